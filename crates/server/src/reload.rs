//! What SIGHUP changes in a running server: the HTTPS certificate (its files
//! read again), the keys of [`Live`](crate::live::Live) and the `[resolver]`
//! table (see [`Recursion::prepare`](crate::recursion::Recursion::prepare)),
//! from the configuration file. Every other key (ports, prefixes, store,
//! limits) needs a restart.

use crate::config::{Config, ConfigError};
use crate::directory::Directory;
use crate::keys::RsaSigner;
use crate::live::Live;
use crate::recursion::{Recursion, Renewal};
use crate::tls::CertSlot;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("HTTPS certificate: {0}")]
    Tls(#[from] crate::tls::TlsError),
    #[error("{0}")]
    RootInfo(String),
    /// The `[resolver]` table could not be applied (its message names the key).
    #[error("{0}")]
    Resolver(String),
}

/// What a reload reads and changes, lent by the server (`state.rs`, `reloadable`).
pub struct Reloadable<'a> {
    /// The running configuration (flags included), onto which the file's reloadable keys go.
    pub config: &'a Config,
    /// Where the live keys and the remote identity checks are kept.
    pub directory: &'a Directory,
    pub recursion: &'a Recursion,
    /// The HTTPS certificate, when HTTPS is on.
    pub tls: Option<&'a CertSlot>,
    /// The server key (a certificate made by the server is signed with it).
    pub key: &'a RsaSigner,
}

/// What one reload did, for its log line: only what was read again.
#[derive(Debug)]
pub struct Reloaded {
    /// The configuration file read again; None when the server has none.
    pub file: Option<PathBuf>,
    /// Reloadable keys read on every request whose values changed.
    pub changed: Vec<&'static str>,
    /// The HTTPS certificate file read again (`tls_cert`), if one is set.
    pub certificate: Option<PathBuf>,
    /// The root site record read again (`root_info`), if one is set.
    pub root_info: Option<PathBuf>,
    /// The `[resolver]` table applied: its resolver (and cache) kept or renewed.
    pub resolver: Renewal,
}

impl std::fmt::Display for Reloaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.file, self.changed.is_empty()) {
            (None, _) => write!(f, "no configuration file (serve --config FILE), so no key was read again")?,
            (Some(file), true) => write!(f, "read {} again: no reloadable key changed", file.display())?,
            (Some(file), false) => write!(f, "read {} again: {} changed", file.display(), self.changed.join(", "))?,
        }
        if let Some(cert) = &self.certificate {
            write!(f, "; HTTPS certificate read again from {}", cert.display())?;
        }
        if let Some(root) = &self.root_info {
            write!(f, "; root_info read again from {} (its site lookups forgotten)", root.display())?;
        }
        match self.resolver {
            Renewal::Off => Ok(()),
            Renewal::Kept => write!(f, "; [resolver] applied, its cache kept"),
            Renewal::Renewed => write!(f, "; [resolver] applied with a new, empty cache"),
        }
    }
}

/// Re-read `path` and apply its reloadable keys, or without a file read again
/// only the files the running configuration names; on an error nothing changes.
pub fn reload(state: &Reloadable<'_>, path: Option<&Path>) -> Result<Reloaded, ReloadError> {
    // Without a file the running keys stay as they are: loading the defaults
    // would undo what flags and the environment set at start.
    let merged = match path {
        None => state.config.clone(),
        Some(path) => {
            let file = Config::load(Some(path))?;
            // The running configuration (flags included) with only the reloadable keys replaced.
            let mut merged = state.config.clone();
            merged.access = file.access;
            merged.transport.tls_cert = file.transport.tls_cert;
            merged.transport.tls_key = file.transport.tls_key;
            merged.root_info = file.root_info;
            merged.auth.remote_auth_timeout_ms = file.auth.remote_auth_timeout_ms;
            merged.auth.remote_auth_concurrent = file.auth.remote_auth_concurrent;
            merged.resolver = file.resolver;
            merged.default_server_admins();
            merged
        }
    };
    merged.parsed_server_admins()?;
    crate::config::parse_admin_list(&merged.access.status_handle_admins)?;
    // Read again even if the path is the same: the root sites may have moved.
    let remote = crate::directory::remote_auth_of(&merged).map_err(ReloadError::RootInfo)?;
    let recursion = state.recursion.prepare(&merged).map_err(ReloadError::Resolver)?;
    let renewal = recursion.renewal;
    if let Some(tls) = state.tls {
        tls.reload(&merged, state.key)?;
    }
    let live = Live::of(&merged);
    let changed = live.changed_keys(&state.directory.live());
    state.directory.set_live(live);
    state.directory.set_remote_auth(remote);
    state.recursion.apply(recursion);
    Ok(Reloaded {
        file: path.map(Path::to_path_buf),
        changed,
        certificate: merged.transport.tls_cert.filter(|_| state.tls.is_some()),
        root_info: merged.root_info,
        resolver: renewal,
    })
}
