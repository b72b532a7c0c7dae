//! [`TxnLogStore`]: the transaction log a replication source serves, and the
//! mirror's replicated writes (see [`crate::txn_log`]).

use crate::txn_log::{ReplicatedChange, TxnEntry, TxnLogBounds};
use crate::{DocWrite, StoreError};
use std::sync::OnceLock;

/// Local writes are logged by the store itself, in the same commit as the
/// change: a `swap_with_docs` that is `Done` logs Create (absent → present),
/// Update (present → present) or Delete (present → absent); every `put_many`
/// record logs Create or Update; homing logs HomeNa, unhoming a homed prefix
/// UnhomeNa. Conflicts and no-op writes log nothing, so ids stay gap-free.
///
/// A backend without a log keeps every default, which refuses with
/// [`StoreError::Unsupported`] (and a subscription that never moves), and says
/// `txn_log: false` in its [`crate::Capabilities`]. Wrappers forward every
/// method.
#[async_trait::async_trait]
pub trait TxnLogStore: Send + Sync + 'static {
    /// Entries with id > `after`, in id order, at most `limit` (and at most
    /// [`crate::TXN_LOG_READ_MAX`]).
    async fn txn_log_read(&self, after: u64, limit: usize) -> Result<Vec<TxnEntry>, StoreError> {
        let _ = (after, limit);
        Err(no_txn_log())
    }

    async fn txn_log_bounds(&self) -> Result<TxnLogBounds, StoreError> {
        Err(no_txn_log())
    }

    /// Remove the entries dated before `before_ms`, raising `floor` to the
    /// highest id removed. Returns how many went.
    async fn txn_log_prune(&self, before_ms: u64) -> Result<u64, StoreError> {
        let _ = before_ms;
        Err(no_txn_log())
    }

    /// The last committed id (`TxnLogBounds::last`), updated after each commit
    /// that logs is durable and visible to reads: a replication source waits on
    /// `changed()` to long-poll instead of re-reading the log.
    fn txn_log_subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        never_moves()
    }

    /// Mirror side: apply pulled changes (records; homed prefixes as
    /// `HOMED_META_PREFIX` meta keys), log each with its source id (continuing
    /// the source's sequence, so a promoted mirror serves the old primary's
    /// mirrors without a redump), and write `progress` (meta key → bytes, not
    /// logged; keys outside `HOMED_META_PREFIX`) — all in ONE atomic commit.
    /// Changes with ids at or below `last` are applied (state-based, harmless)
    /// but not logged again; logged dates never go below the last one.
    async fn apply_replicated(
        &self,
        changes: Vec<ReplicatedChange>,
        progress: Vec<(String, Option<Vec<u8>>)>,
    ) -> Result<(), StoreError> {
        self.apply_replicated_with_docs(changes, progress, Vec::new()).await
    }

    /// [`TxnLogStore::apply_replicated`] plus document writes (after the
    /// changes) in the same atomic commit: how a wrapper keeps documents
    /// derived from handles (the reverse index) in step. Wrappers override this one.
    async fn apply_replicated_with_docs(
        &self,
        changes: Vec<ReplicatedChange>,
        progress: Vec<(String, Option<Vec<u8>>)>,
        docs: Vec<DocWrite>,
    ) -> Result<(), StoreError> {
        let _ = (changes, progress, docs);
        Err(no_txn_log())
    }

    /// Mirror (re)bootstrap by a dump: set floor = last = `id` and drop every
    /// kept entry (a dump resumes the source's sequence at `id`, lower or
    /// higher than ours: mirrors of this server that are past it are then
    /// told to redump instead of missing changes).
    async fn txn_log_reset(&self, id: u64) -> Result<(), StoreError> {
        let _ = id;
        Err(no_txn_log())
    }
}

/// What the defaults of [`TxnLogStore`] answer.
pub fn no_txn_log() -> StoreError {
    StoreError::Unsupported("this store backend keeps no transaction log (it cannot be a replication source)".into())
}

/// What a backend without multi-primary conflict dates answers a pulled
/// change that carries a priority.
pub fn no_multi_primary() -> StoreError {
    StoreError::Unsupported(
        "multi-primary replication needs the embedded or memory store (docs/multi-primary.md)".into(),
    )
}

/// A subscription to a log that never moves: waiters wait (a closed channel
/// would wake them at once, over and over).
pub fn never_moves() -> tokio::sync::watch::Receiver<u64> {
    static STILL: OnceLock<tokio::sync::watch::Sender<u64>> = OnceLock::new();
    STILL.get_or_init(|| tokio::sync::watch::Sender::new(0)).subscribe()
}
