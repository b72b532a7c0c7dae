//! What SIGHUP changes in a running server: the HTTPS certificate (its files
//! read again) and the keys of [`Live`](crate::live::Live), from the configuration file. Every
//! other key (ports, prefixes, store, limits) needs a restart.

use crate::config::{Config, ConfigError};
use crate::live::Live;
use crate::state::ServerState;
use std::path::Path;

/// The keys SIGHUP reloads, as README lists them.
pub const RELOADED_KEYS: &str = "tls_cert, tls_key, server_admins, server_admin_full_access, allow_list_handles, \
     allow_plain_http_admin, root_info, remote_auth_timeout_ms, remote_auth_concurrent";

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("HTTPS certificate: {0}")]
    Tls(#[from] crate::tls::TlsError),
    #[error("{0}")]
    RootInfo(String),
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
        root_info: file.root_info,
        remote_auth_timeout_ms: file.remote_auth_timeout_ms,
        remote_auth_concurrent: file.remote_auth_concurrent,
        ..state.config.clone()
    };
    merged.parsed_server_admins()?;
    // Read again even if the path is the same: the root sites may have moved.
    let remote = crate::state::remote_auth_of(&merged).map_err(ReloadError::RootInfo)?;
    if let Some(tls) = &state.tls {
        tls.reload(&merged, &state.key)?;
    }
    state.set_live(Live::of(&merged));
    state.set_remote_auth(remote);
    Ok(())
}
