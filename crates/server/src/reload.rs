//! What SIGHUP changes in a running server: the HTTPS certificate (its files
//! read again) and the keys of [`Live`], from the configuration file. Every
//! other key (ports, prefixes, store, limits) needs a restart.

use crate::config::{Config, ConfigError};
use crate::state::ServerState;
use std::path::Path;

/// The keys SIGHUP reloads, as README lists them.
pub const RELOADED_KEYS: &str =
    "tls_cert, tls_key, server_admins, server_admin_full_access, allow_list_handles, allow_plain_http_admin";

/// Configuration read on every request that may change while serving.
#[derive(Debug, Clone)]
pub struct Live {
    /// Server-wide administrators as (handle, index) references.
    pub server_admins: Vec<(Vec<u8>, i32)>,
    /// Admins scoped to one prefix: (admin handle, prefix handle `0.NA/<PREFIX>`).
    pub prefix_admins: Vec<(Vec<u8>, Vec<u8>)>,
    pub server_admin_full_access: bool,
    pub allow_list_handles: bool,
    pub allow_plain_http_admin: bool,
}

impl Live {
    /// `config`'s values; its admin references must have been validated.
    pub fn of(config: &Config) -> Live {
        Live {
            server_admins: config.parsed_server_admins().unwrap_or_default(),
            prefix_admins: config.prefix_admins(),
            server_admin_full_access: config.server_admin_full_access,
            allow_list_handles: config.allow_list_handles,
            allow_plain_http_admin: config.allow_plain_http_admin,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("HTTPS certificate: {0}")]
    Tls(#[from] crate::transport::tls::TlsError),
}

/// Re-read `path` (None: the defaults) and apply its reloadable keys; on an
/// error nothing changes.
pub fn reload(state: &ServerState, path: Option<&Path>) -> Result<(), ReloadError> {
    let file = Config::load(path)?;
    // The running configuration (flags included) with only the reloadable keys replaced.
    let merged = Config {
        tls_cert: file.tls_cert,
        tls_key: file.tls_key,
        server_admins: file.server_admins,
        server_admin_full_access: file.server_admin_full_access,
        allow_list_handles: file.allow_list_handles,
        allow_plain_http_admin: file.allow_plain_http_admin,
        ..state.config.clone()
    };
    merged.parsed_server_admins()?;
    if let Some(tls) = &state.tls {
        tls.reload(&merged, &state.key)?;
    }
    state.set_live(Live::of(&merged));
    Ok(())
}
