//! The `[templates]` table: template handles (Technical Manual §11), with
//! Handle.Net's `server_config` keys under shorter names (`template_delimiter`
//! → `delimiter`, `namespace`, `template_ns_override` → `namespace_override`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TemplatesConfig {
    /// The delimiter between a base handle and its extension when no
    /// HS_NAMESPACE names one (e.g. `"@"`; `"/"` templates a whole prefix).
    /// Unset and no namespace with a delimiter: no template handles.
    pub delimiter: Option<String>,
    /// An HS_NAMESPACE document (`<namespace>…</namespace>`) used when the
    /// prefix handle carries none.
    pub namespace: Option<String>,
    /// Use `namespace` and `delimiter` even when the prefix handle has an
    /// HS_NAMESPACE (its value is then not read).
    pub namespace_override: bool,
}

impl TemplatesConfig {
    /// A namespace that does not parse is refused at start, not at the first request.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(xml) = &self.namespace {
            crate::xml::parse(xml).map_err(|e| format!("[templates] namespace is not XML: {e}"))?;
        }
        if self.delimiter.as_deref() == Some("") {
            return Err("[templates] delimiter must not be empty (leave it out instead)".into());
        }
        Ok(())
    }
}
