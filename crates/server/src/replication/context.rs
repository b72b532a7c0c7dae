//! What replication works with, built once at start and shared by the source
//! (answering mirrors), the mirror's pull loop and a multi-primary group:
//! the directory (store, homed prefixes, mirror status), the settings, the
//! site key that signs streams, the metrics, and the source's stream slots.
//! Replication reads none of the transports' or sessions' bookkeeping.

use crate::config::{Config, ReplicationConfig};
use crate::directory::Directory;
use crate::keys::RsaSigner;
use crate::metrics::Metrics;
use crate::replication_status::slots;
use std::net::SocketAddr;
use std::sync::Arc;

pub struct ReplicationContext {
    pub directory: Arc<Directory>,
    pub settings: ReplicationSettings,
    pub key: Arc<RsaSigner>,
    pub metrics: Arc<Metrics>,
    /// The source's stream slots, waiting pulls and TLS acceptor.
    pub slots: slots::Source,
}

/// What replication reads of the configuration: its own section and the few
/// server-wide facts it needs, not the whole `Config`.
pub struct ReplicationSettings {
    /// The `[replication]` section.
    pub replication: ReplicationConfig,
    /// Who may take backups over the protocol (`backup_admins`, `[auth]`).
    pub backup_admins: Vec<String>,
    /// This server's prefixes (`prefixes`): never unhomed by a source, and
    /// the first names our transaction queue.
    pub prefixes: Vec<String>,
    /// The native TCP address peers know us by (public address, port): how a
    /// multi-primary member finds itself in the sites handle.
    pub own_address: SocketAddr,
    pub case_sensitive: bool,
}

impl ReplicationContext {
    pub fn new(directory: Arc<Directory>, config: &Config, key: Arc<RsaSigner>, metrics: Arc<Metrics>) -> Self {
        let settings = ReplicationSettings {
            replication: config.replication.clone(),
            backup_admins: config.auth.backup_admins.clone(),
            prefixes: config.prefixes.clone(),
            own_address: SocketAddr::new(config.public_address(), config.port),
            case_sensitive: config.case_sensitive,
        };
        // The stream certificate is made from the site key on first use, naming
        // the addresses of the time of start.
        let (subject, tls_key) = (crate::tls::SelfSigned::of(config), key.clone());
        let slots = slots::Source::new(
            config.replication.max_streams,
            Box::new(move || crate::tls::site_key_acceptor(&subject, &tls_key)),
        );
        ReplicationContext { directory, settings, key, metrics, slots }
    }
}

/// Replication reads the store and the homed set as operations do.
impl std::ops::Deref for ReplicationContext {
    type Target = Directory;
    fn deref(&self) -> &Directory {
        &self.directory
    }
}
