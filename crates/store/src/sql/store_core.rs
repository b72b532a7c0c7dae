//! The store's state, shared by its operations and by the tasks that run
//! lookups and writes together (read_batch.rs, write_batch.rs). Public in a
//! private module: [`super::SqlStore`] dereferences to it.

use std::sync::atomic::AtomicBool;

use super::{custom, db, layout, read_batch, search, txn_log, write_batch, SqlOptions};
use crate::StatCounters;

/// What the store's operations work with; reached through [`super::SqlStore`]'s `Deref`.
pub struct SqlCore {
    pub(super) pool: db::Pool,
    pub(super) options: SqlOptions,
    pub(super) custom: custom::Custom,
    /// The built-in statements of this database and layout.
    pub(super) queries: layout::Queries,
    /// Point reads, several lookups a statement under load (read_batch.rs).
    pub(super) reads: std::sync::Arc<read_batch::ReadBatches>,
    /// Writes, several swaps a transaction under load (write_batch.rs).
    pub(super) writes: write_batch::WriteBatches,
    /// Held by a bulk load's transaction (records.rs, `put_records`): one at a time.
    pub(super) bulk: tokio::sync::Mutex<()>,
    pub(super) value_search: search::ValueSearch,
    /// The server's own metadata is in `handled_meta` (else in `local_meta`).
    pub(super) meta_in_table: bool,
    pub(super) local_meta: Option<super::local_meta::LocalMeta>,
    pub(super) closed: AtomicBool,
    pub(super) stats: StatCounters,
    /// The transaction log, with `replication_log` (txn_log.rs).
    pub(super) txn: Option<std::sync::Arc<txn_log::SqlTxnLog>>,
}
