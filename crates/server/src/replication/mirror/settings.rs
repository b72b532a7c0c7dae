//! The mirror's configuration keys (`replication_*` in config.rs), checked
//! and turned into what the mirror uses: where the source is, who we are.

use crate::config::ReplicationConfig;
use base64::Engine;
use handled_client::credentials::{Credentials, KeyChoice};
use std::path::PathBuf;
use std::time::Duration;

/// How the source is named in `replication_source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    /// A site record file: Handle.Net's `siteinfo.json`, or the binary `siteinfo.bin`.
    File(PathBuf),
    /// `host:port` of the source's native TCP interface.
    Address(String),
    /// `index:handle` of an HS_SITE value.
    SiteValue { index: i32, handle: Vec<u8> },
}

impl SourceSpec {
    pub fn parse(text: &str) -> Result<SourceSpec, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("replication_source is empty".into());
        }
        if let Some((index, handle)) = text.split_once(':') {
            if !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()) && handle.contains('/') {
                let index = index.parse().map_err(|_| format!("bad index in replication_source {text:?}"))?;
                return Ok(SourceSpec::SiteValue { index, handle: handle.as_bytes().to_vec() });
            }
        }
        let lower = text.to_ascii_lowercase();
        if lower.ends_with(".json") || lower.ends_with(".bin") || std::path::Path::new(text).is_file() {
            return Ok(SourceSpec::File(PathBuf::from(text)));
        }
        match text.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {
                Ok(SourceSpec::Address(text.to_string()))
            }
            _ => Err(format!(
                "replication_source {text:?} is neither a site record file (.json/.bin), host:port nor index:handle"
            )),
        }
    }
}

/// Everything the mirror needs from the configuration.
#[derive(Clone)]
pub struct MirrorSettings {
    pub source: SourceSpec,
    /// `replication_source` as written (labels, logs).
    pub source_text: String,
    pub resolver: Option<String>,
    pub credentials: Credentials,
    pub interval: Duration,
    pub timeout: Duration,
    pub low_latency: bool,
    /// Proxied mirroring (`replication_pull_other_transactions`): the source's
    /// own queue name, `0:<index>:<handle>` of `replication_source`.
    pub all_queues: Option<String>,
}

impl MirrorSettings {
    /// None when no source is configured (a primary).
    pub fn from_config(c: &ReplicationConfig) -> Result<Option<MirrorSettings>, String> {
        let Some(text) = &c.source else { return Ok(None) };
        let source = SourceSpec::parse(text)?;
        if matches!(source, SourceSpec::SiteValue { .. }) && c.resolver.is_none() {
            tracing::info!("replication_source {text}: resolved in our own store (no replication_resolver)");
        }
        let all_queues = match (&source, c.pull_other_transactions) {
            (_, false) => None,
            (SourceSpec::SiteValue { index, handle }, true) => {
                Some(format!("0:{index}:{}", String::from_utf8_lossy(handle)))
            }
            (_, true) => {
                return Err("replication_pull_other_transactions needs replication_source = INDEX:HANDLE of the \
                            source's HS_SITE value (Handle.Net's replication_site_handle_value)"
                    .into())
            }
        };
        Ok(Some(MirrorSettings {
            all_queues,
            source,
            source_text: text.trim().to_string(),
            resolver: c.resolver.clone(),
            credentials: identity(c)?,
            interval: Duration::from_millis(c.interval_ms.max(1)),
            timeout: Duration::from_millis(c.timeout_ms.max(100)),
            // The long poll is of one queue: not with all queues.
            low_latency: c.low_latency && !c.pull_other_transactions,
        }))
    }
}

/// The replication identity: a credentials file, or Handle.Net's
/// `secretkey:`/`privatekey:` form with its secret or key file.
pub(crate) fn identity(c: &ReplicationConfig) -> Result<Credentials, String> {
    if let Some(path) = &c.credentials {
        let choice = match c.credentials_key.as_str() {
            "secret" => KeyChoice::Secret,
            "public_key" => KeyChoice::PublicKey,
            other => return Err(format!("replication_credentials_key {other:?}: \"secret\" or \"public_key\"")),
        };
        return Credentials::load(path, choice).map_err(|e| format!("replication_credentials: {e}"));
    }
    let Some(auth) = &c.authentication else {
        return Err("a mirror or multi-primary member needs an identity: replication_authentication (secretkey:INDEX:HANDLE or \
                    privatekey:INDEX:HANDLE) or replication_credentials"
            .into());
    };
    let bad =
        || format!("replication_authentication {auth:?}: expected secretkey:INDEX:HANDLE or privatekey:INDEX:HANDLE");
    let (kind, rest) = auth.split_once(':').ok_or_else(bad)?;
    let (index, handle) = rest.split_once(':').ok_or_else(bad)?;
    let index: i32 = index.parse().map_err(|_| bad())?;
    if !handle.contains('/') {
        return Err(bad());
    }
    match kind.to_ascii_lowercase().as_str() {
        "secretkey" => {
            let secret = std::env::var("HANDLED_REPLICATION_SECRET")
                .ok()
                .or_else(|| c.secret.clone())
                .ok_or("a secretkey: identity needs replication_secret (or HANDLED_REPLICATION_SECRET)")?;
            Ok(Credentials::secret(handle.as_bytes(), index, secret.into_bytes()))
        }
        "privatekey" => {
            let path = c.private_key.as_ref().ok_or("a privatekey: identity needs replication_private_key")?;
            let raw = std::fs::read(path).map_err(|e| format!("replication_private_key {}: {e}", path.display()))?;
            let der = pem_or_der(&raw).map_err(|e| format!("replication_private_key {}: {e}", path.display()))?;
            Credentials::rsa_pkcs8(handle.as_bytes(), index, &der).map_err(|e| e.to_string())
        }
        _ => Err(bad()),
    }
}

/// PKCS#8 as DER, or PEM (`-----BEGIN PRIVATE KEY-----`).
fn pem_or_der(raw: &[u8]) -> Result<Vec<u8>, String> {
    let Ok(text) = std::str::from_utf8(raw) else { return Ok(raw.to_vec()) };
    if !text.contains("-----BEGIN") {
        return Ok(raw.to_vec());
    }
    let body: String = text.lines().filter(|l| !l.starts_with("-----")).map(str::trim).collect();
    base64::engine::general_purpose::STANDARD.decode(body).map_err(|_| "PEM with invalid base64".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_told_apart() {
        assert_eq!(SourceSpec::parse("siteinfo.json").unwrap(), SourceSpec::File("siteinfo.json".into()));
        assert_eq!(SourceSpec::parse("/x/siteinfo.bin").unwrap(), SourceSpec::File("/x/siteinfo.bin".into()));
        assert_eq!(SourceSpec::parse("127.0.0.1:2641").unwrap(), SourceSpec::Address("127.0.0.1:2641".into()));
        assert_eq!(SourceSpec::parse("[::1]:2641").unwrap(), SourceSpec::Address("[::1]:2641".into()));
        assert_eq!(
            SourceSpec::parse("1:0.NA/TEST").unwrap(),
            SourceSpec::SiteValue { index: 1, handle: b"0.NA/TEST".to_vec() }
        );
        assert!(SourceSpec::parse("nonsense").is_err());
        assert!(SourceSpec::parse("host:0").is_err());
    }

    #[test]
    fn identities() {
        let mut c = ReplicationConfig { source: Some("127.0.0.1:2641".into()), ..ReplicationConfig::default() };
        assert!(MirrorSettings::from_config(&c).err().unwrap().contains("needs an identity"));
        c.authentication = Some("secretkey:301:TEST/ADMIN".into());
        assert!(MirrorSettings::from_config(&c).err().unwrap().contains("replication_secret"));
        c.secret = Some("s3cret".into());
        let s = MirrorSettings::from_config(&c).unwrap().unwrap();
        assert_eq!(s.credentials.display(), "301:TEST/ADMIN");
        assert_eq!(s.interval, Duration::from_millis(30_000), "the original's default");
        c.authentication = Some("secretkey:x:TEST/ADMIN".into());
        assert!(MirrorSettings::from_config(&c).is_err());
        c.authentication = Some("privatekey:300:TEST/ADMIN".into());
        assert!(MirrorSettings::from_config(&c).err().unwrap().contains("replication_private_key"));
        assert!(MirrorSettings::from_config(&ReplicationConfig::default()).unwrap().is_none(), "no source: a primary");
        c.authentication = Some("secretkey:301:TEST/ADMIN".into());
        c.pull_other_transactions = true;
        assert!(
            MirrorSettings::from_config(&c).err().unwrap().contains("INDEX:HANDLE"),
            "all queues need a site value"
        );
        c.source = Some("2:TEST/SITES".into());
        assert_eq!(MirrorSettings::from_config(&c).unwrap().unwrap().all_queues.as_deref(), Some("0:2:TEST/SITES"));
    }
}
