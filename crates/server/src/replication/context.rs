//! What replication works with, built once at start and shared by the source
//! (answering mirrors), the mirror's pull loop and a multi-primary group:
//! the directory (store, homed prefixes, mirror status), the settings, the
//! site key that signs streams, the metrics, and the source's stream slots.
//! Replication reads none of the transports' or sessions' bookkeeping.

use crate::config::Config;
use crate::directory::Directory;
use crate::keys::RsaSigner;
use crate::metrics::Metrics;
use crate::replication_status::slots;
use std::sync::Arc;

pub struct ReplicationContext {
    pub directory: Arc<Directory>,
    pub config: Arc<Config>,
    pub key: Arc<RsaSigner>,
    pub metrics: Arc<Metrics>,
    /// The source's stream slots and waiting pulls.
    pub slots: slots::Source,
}

impl ReplicationContext {
    pub fn new(directory: Arc<Directory>, config: Arc<Config>, key: Arc<RsaSigner>, metrics: Arc<Metrics>) -> Self {
        let slots = slots::Source::new(&config);
        ReplicationContext { directory, config, key, metrics, slots }
    }
}

/// Replication reads the store and the homed set as operations do.
impl std::ops::Deref for ReplicationContext {
    type Target = Directory;
    fn deref(&self) -> &Directory {
        &self.directory
    }
}
