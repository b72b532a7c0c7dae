//! [`StoreAdmin`]: what a store is ([`Capabilities`]) and how it is run
//! (metrics, readiness, checkpoints, shutdown, backups).

use crate::{backup::StoreExport, StoreError, StoreStats};

/// What a backend can do and how it is deployed, for callers to decide by
/// instead of by backend name. Each backend says it of itself; wrappers
/// forward the inner store's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Several server nodes use the store at once (behind a balancer): they
    /// share the site key, challenges and sessions through it, and a node's
    /// record cache needs the cluster channel to hear the others' writes.
    pub shared: bool,
    /// What it holds outlives the process (not an in-memory store).
    pub durable: bool,
    /// [`crate::DocumentStore`] works (the domain registry, `/hrls` search
    /// and shared sessions need it); otherwise every method refuses.
    pub documents: bool,
    /// [`crate::TxnLogStore`] works (a replication source or mirror needs it);
    /// otherwise every method refuses.
    pub txn_log: bool,
    /// Whether [`StoreAdmin::export`] gives an online backup.
    pub backup: Backup,
    /// Every write is refused (Handle.Net's `sql_read_only`): a server on it
    /// writes nothing at start and answers administration like a mirror.
    pub read_only: bool,
    /// Reads wait on a network round trip (a database server): work that must
    /// not stall, such as the UDP receive thread, hands them to workers.
    pub remote: bool,
}

/// Online backups ([`crate::backup`]) of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backup {
    /// [`StoreAdmin::export`] gives a consistent export.
    Export,
    /// No export: why, and what to do instead (shown to whoever asked).
    Refused(&'static str),
}

/// How far a store is from serving reads at full speed, while it warms its
/// files into memory after it opened ([`StoreAdmin::warming`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Warming {
    /// Bytes read so far.
    pub read_bytes: u64,
    /// Bytes it will read in all.
    pub total_bytes: u64,
}

/// Running a store: metrics, readiness, checkpoints, shutdown and backups.
#[async_trait::async_trait]
pub trait StoreAdmin: Send + Sync + 'static {
    /// What this store can do. Required, so that wrappers forward it.
    fn capabilities(&self) -> Capabilities;

    /// Counters for metrics.
    fn stats(&self) -> StoreStats;

    /// Whether writes can be taken now, and if not why (e.g. the disk is full);
    /// for readiness. Required, so that wrappers forward it.
    fn writable(&self) -> Result<(), StoreError>;

    /// `Some` while the store is still warming its files into memory after it
    /// opened (reads are served, but slower: readiness says not yet ready), `None`
    /// once it serves at speed. Wrappers forward it; the default is for stores
    /// with nothing to warm.
    fn warming(&self) -> Option<Warming> {
        None
    }

    /// Durable checkpoint (opcode 1003): everything acknowledged is in the
    /// backing storage's main file when this returns.
    async fn checkpoint(&self) -> Result<(), StoreError>;

    /// Finish the writes already queued, then release the backing storage so it
    /// is left cleanly shut down. Later calls fail with [`StoreError::Closed`].
    fn close(&self);

    /// Where commit observers and document contributors are registered
    /// ([`crate::observe`]): `None` for a bare backend, which
    /// [`crate::Observed::ensure`] puts under a layer that has them. Wrappers forward it.
    fn hooks(&self) -> Option<&crate::Hooks> {
        None
    }

    /// The store under the layer that calls the hooks, when this is that
    /// layer: reads, which hooks never see, can go to it directly and skip a
    /// dynamic call and a boxed future each. Wrappers forward it.
    fn beneath_hooks(&self) -> Option<std::sync::Arc<dyn crate::Store>> {
        None
    }

    /// A consistent export of everything stored, for a backup ([`crate::backup`]),
    /// when [`Capabilities::backup`] is [`Backup::Export`].
    fn export(&self) -> Result<Box<dyn StoreExport>, StoreError> {
        Err(match self.capabilities().backup {
            Backup::Refused(why) => StoreError::Unsupported(why.into()),
            Backup::Export => StoreError::Unsupported("this store backend has no backup export".into()),
        })
    }
}
