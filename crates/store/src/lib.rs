//! Handle storage for `handled`.
//!
//! One [`Store`] trait and four backends:
//! * [`EmbeddedStore`]: durable, one redb file, reads inline on the caller, writes
//!   group-committed by one writer thread (one synced log append per batch);
//! * [`MemoryStore`]: a `BTreeMap` behind a lock, for `--ephemeral` runs and tests;
//! * `CassandraStore` (feature `cassandra`, on by default): Apache Cassandra, for
//!   several stateless nodes sharing one registry;
//! * `SqlStore` (feature `sql`, on by default): Handle.Net's own SQL tables on
//!   PostgreSQL (`sql/`), declining documents and the transaction log.
//!
//! The trait is shaped so a distributed backend (Apache Cassandra) can implement it
//! too: everything is async, atomicity is per handle only (compare-and-set through
//! [`Store::swap`], which maps onto a lightweight transaction; documents derived
//! from a handle may ride along in the same step), there are no general
//! multi-key transactions, and listing is a key-prefix scan with paging.
//!
//! Besides handles, a store keeps **documents** (the `doc_*` methods): named
//! collections of opaque bodies, each carrying the secondary-index entries it is
//! found under. A document and its own index entries change together, atomically,
//! by compare-and-set; lookups go by index key (exact or prefix) and a collection
//! can be scanned by id prefix. Still no multi-key transactions: a partitioned
//! backend keeps one table of documents and one of index entries
//! (materialized-view style) and writes both in one lightweight transaction per
//! document. The domain registry and the reverse-lookup index are built on them.
//!
//! [`conformance`] holds the behaviour suite every backend must pass.

use std::sync::atomic::{AtomicU64, Ordering};

pub mod backup;
#[cfg(feature = "cassandra")]
pub mod cassandra;
pub mod conformance;
mod documents;
mod embedded;
mod memory;
mod record;
#[cfg(feature = "sql")]
pub mod sql;
pub mod txn_log;

#[cfg(feature = "cassandra")]
pub use cassandra::{CassandraOptions, CassandraStore};
pub use documents::{DocExpect, DocOutcome, Document, IndexEntry, IndexHit, IndexMatch, MAX_INDEX_KEY};
pub use embedded::{EmbeddedOptions, EmbeddedRestore, EmbeddedStore, HANDLES_TABLE, META_TABLE, STORE_FILE_NAME};
pub use memory::MemoryStore;
pub use record::{HandleRecord, InvalidRecord, RecordError};
#[cfg(feature = "sql")]
pub use sql::{SqlOptions, SqlStore};
pub use txn_log::{
    homed_meta_key, ReplicatedChange, ReplicatedWrite, TxnAction, TxnEntry, TxnLogBounds, HOMED_META_PREFIX,
    TXN_LOG_READ_MAX,
};

/// What [`Store::swap`] requires of the current state of the handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// The handle must not exist (create).
    Absent,
    /// The handle must exist with exactly this record (all values equal, in order).
    Present(HandleRecord),
    /// No condition (unconditional overwrite or delete).
    Any,
}

/// Result of a [`Store::swap`] that ran (errors aside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwapOutcome {
    /// The expectation held and the new state is written (durably, on durable
    /// backends). `previous` is the state it replaced. With [`Expect::Any`] over a
    /// stored record that cannot be decoded, `previous` is `None`.
    Done { previous: Option<HandleRecord> },
    /// The expectation did not hold; nothing was written. `current` is the state
    /// that was found.
    Conflict { current: Option<HandleRecord> },
}

impl SwapOutcome {
    pub fn is_done(&self) -> bool {
        matches!(self, SwapOutcome::Done { .. })
    }
}

/// An unconditional document write (`None` = delete) that rides along with a
/// handle write ([`Store::swap_with_docs`], [`Store::put_many_with_docs`]).
/// A partitioned backend keeps such documents in the handle's partition, so
/// the pair stays one lightweight transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocWrite {
    pub collection: String,
    pub id: Vec<u8>,
    pub doc: Option<Document>,
}

/// Storage failures.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("storage I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Stored bytes that cannot be decoded, or a damaged database file.
    #[error("storage corrupt: {0}")]
    Corrupt(String),
    /// The store has been shut down (or its writer stopped).
    #[error("store is closed")]
    Closed,
    /// Any other backend failure (database engine, network, timeouts…).
    #[error("storage backend error: {0}")]
    Backend(String),
    /// The caller asked to store something that could never be read back.
    #[error("{0}")]
    Invalid(#[from] InvalidRecord),
}

impl StoreError {
    /// A copy of this error, for reporting one failure to several waiters
    /// (`std::io::Error` is not `Clone`).
    pub fn duplicate(&self) -> StoreError {
        match self {
            StoreError::Io(e) => StoreError::Io(std::io::Error::new(e.kind(), e.to_string())),
            StoreError::Corrupt(s) => StoreError::Corrupt(s.clone()),
            StoreError::Closed => StoreError::Closed,
            StoreError::Backend(s) => StoreError::Backend(s.clone()),
            StoreError::Invalid(e) => StoreError::Invalid(e.clone()),
        }
    }
}

/// Counters for metrics. All totals since the store was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Write transactions committed (group commits, meta writes and imports).
    pub commits: u64,
    /// Durable flushes (fsync) done by those commits; 0 for the memory store.
    pub fsyncs: u64,
    /// Write operations (swap, meta_put) acknowledged, conflicts included.
    pub write_ops: u64,
    /// Write operations that failed (commit failure or other error).
    pub failed_ops: u64,
    /// Commits that failed (every operation of the batch failed with it).
    pub failed_commits: u64,
    /// Largest number of operations committed together.
    pub max_batch: u64,
    /// Group-commit sizes: bucket `i` counts commits of `2^i ..= 2^(i+1)-1`
    /// operations (the last bucket is open-ended: ≥ 512).
    pub batch_sizes: [u64; 10],
    /// Records written by `put_many`.
    pub imported: u64,
    /// Total time spent committing (including fsync), in microseconds.
    pub commit_micros: u64,
}

impl StoreStats {
    /// Mean operations per commit.
    pub fn mean_batch(&self) -> f64 {
        let n: u64 = self.batch_sizes.iter().sum();
        if n == 0 {
            0.0
        } else {
            self.write_ops as f64 / n as f64
        }
    }
}

/// Lock-free counters behind [`StoreStats`].
#[derive(Debug, Default)]
pub(crate) struct StatCounters {
    commits: AtomicU64,
    fsyncs: AtomicU64,
    write_ops: AtomicU64,
    failed_ops: AtomicU64,
    failed_commits: AtomicU64,
    max_batch: AtomicU64,
    batch_sizes: [AtomicU64; 10],
    imported: AtomicU64,
    commit_micros: AtomicU64,
}

impl StatCounters {
    /// A committed batch of `ops` write operations (plus `imported` records).
    pub(crate) fn committed(&self, ops: u64, imported: u64, durable: bool, micros: u64) {
        self.commits.fetch_add(1, Ordering::Relaxed);
        if durable {
            self.fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        self.commit_micros.fetch_add(micros, Ordering::Relaxed);
        self.imported.fetch_add(imported, Ordering::Relaxed);
        if ops > 0 {
            self.write_ops.fetch_add(ops, Ordering::Relaxed);
            self.max_batch.fetch_max(ops, Ordering::Relaxed);
            let bucket = (63 - ops.leading_zeros() as usize).min(self.batch_sizes.len() - 1);
            self.batch_sizes[bucket].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn failed(&self, ops: u64) {
        self.failed_commits.fetch_add(1, Ordering::Relaxed);
        self.failed_ops.fetch_add(ops, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> StoreStats {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StoreStats {
            commits: l(&self.commits),
            fsyncs: l(&self.fsyncs),
            write_ops: l(&self.write_ops),
            failed_ops: l(&self.failed_ops),
            failed_commits: l(&self.failed_commits),
            max_batch: l(&self.max_batch),
            batch_sizes: std::array::from_fn(|i| l(&self.batch_sizes[i])),
            imported: l(&self.imported),
            commit_micros: l(&self.commit_micros),
        }
    }
}

/// Handle storage. Keys are opaque bytes (the server passes normalized handles) and
/// sort bytewise.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// Point read by storage key (the server passes the normalized handle bytes).
    async fn get(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError>;

    /// Atomic compare-and-set of one handle: write `new` (`None` = delete) if the
    /// current state matches `expect`. Durable before it returns `Ok` on durable
    /// backends. Deleting an absent handle with `Expect::Any` is `Done { previous: None }`.
    async fn swap(&self, key: &[u8], expect: Expect, new: Option<HandleRecord>) -> Result<SwapOutcome, StoreError> {
        self.swap_with_docs(key, expect, new, Vec::new()).await
    }

    /// [`Store::swap`], and if it is done, the document writes `docs` in the same
    /// atomic step (one commit: a crash keeps both or neither). For documents
    /// derived from the handle's state, such as index entries, so they never
    /// disagree with it. Wrappers override this method, not `swap`, so every
    /// handle write goes through one path.
    async fn swap_with_docs(
        &self,
        key: &[u8],
        expect: Expect,
        new: Option<HandleRecord>,
        docs: Vec<DocWrite>,
    ) -> Result<SwapOutcome, StoreError>;

    /// Keys starting with `prefix`, in key order, strictly after `start_after`, at
    /// most `limit`. Page by passing the last key of a page as the next
    /// `start_after`. (The server scans `<PREFIX>/`-style prefixes; a partitioned
    /// backend can map the part before `/` to its partition and keep the rest
    /// sorted within it.)
    async fn scan_keys(
        &self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError>;

    /// Bulk load (import): overwrite these records, no CAS; durable on return. If a
    /// key appears twice the later record wins. Callers should pass sorted chunks of
    /// some thousands of records.
    async fn put_many(&self, records: Vec<(Vec<u8>, HandleRecord)>) -> Result<(), StoreError> {
        self.put_many_with_docs(records, Vec::new()).await
    }

    /// [`Store::put_many`] plus document writes, all in the same atomic step
    /// (documents after records). Wrappers override this one, not `put_many`.
    async fn put_many_with_docs(
        &self,
        records: Vec<(Vec<u8>, HandleRecord)>,
        docs: Vec<DocWrite>,
    ) -> Result<(), StoreError>;

    /// Small server metadata (homed prefixes, serials).
    async fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Set (`Some`) or delete (`None`) a metadata entry; durable on return.
    async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError>;
    /// Metadata entries whose key starts with `prefix`, in key order.
    async fn meta_scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError>;

    /// Approximate number of handles.
    async fn count(&self) -> Result<u64, StoreError>;

    /// Counters for metrics.
    fn stats(&self) -> StoreStats;

    /// Whether writes can be taken now, and if not why (e.g. the disk is full);
    /// for readiness. Required, so that wrappers forward it.
    fn writable(&self) -> Result<(), StoreError>;

    // -- Documents -----------------------------------------------------------------
    //
    // A document lives in a `collection` under an `id` (bytes); collections are
    // independent name spaces and need no creation. Each document carries a set of
    // [`IndexEntry`]s (index name, key); the store maintains the indexes itself:
    // a write removes the entries of the document it replaces and adds the new
    // ones in the same atomic step, so a lookup never sees an entry without its
    // document or a document state's entries mixed with another state's.
    // Required (no defaults), so a wrapper that forgets to forward them does not
    // compile, instead of failing at run time.

    /// Read one document (body and index entries, entries sorted).
    async fn doc_get(&self, collection: &str, id: &[u8]) -> Result<Option<Document>, StoreError>;

    /// Atomic compare-and-set of one document and its index entries: write `new`
    /// (`None` = delete it and its entries) if the current document matches
    /// `expect`. Durable before `Ok` on durable backends (the embedded store
    /// group-commits these with every other write). Same outcomes as [`Store::swap`].
    async fn doc_swap(
        &self,
        collection: &str,
        id: &[u8],
        expect: DocExpect,
        new: Option<Document>,
    ) -> Result<DocOutcome, StoreError>;

    /// Index entries of `collection` under index `index` whose key matches `key`
    /// (exactly, or starting with a prefix), in (key, id) order, strictly after
    /// `start_after`, at most `limit`. Page with the last hit of a page. Keys sort
    /// bytewise, so big-endian numbers give range scans (e.g. deadlines).
    async fn doc_lookup(
        &self,
        collection: &str,
        index: &str,
        key: IndexMatch<'_>,
        start_after: Option<&IndexHit>,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError>;

    /// Documents of `collection` whose id starts with `prefix`, in id order,
    /// strictly after `start_after`, at most `limit` (maintenance and start-up
    /// only: request paths use lookups).
    async fn doc_scan(
        &self,
        collection: &str,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Document)>, StoreError>;

    // -- Transaction log (replication source; see `txn_log`) -------------------------
    //
    // Local writes are logged by the store itself, in the same commit as the
    // change: a `swap_with_docs` that is `Done` logs Create (absent → present),
    // Update (present → present) or Delete (present → absent); every `put_many`
    // record logs Create or Update; a `meta_put` under `HOMED_META_PREFIX` logs
    // HomeNa (`Some`) or UnhomeNa (`None`, when it was homed). Conflicts and
    // no-op writes log nothing, so ids stay gap-free. Required (no defaults), so
    // every wrapper forwards them.

    /// Entries with id > `after`, in id order, at most `limit` (and at most
    /// [`TXN_LOG_READ_MAX`]).
    async fn txn_log_read(&self, after: u64, limit: usize) -> Result<Vec<TxnEntry>, StoreError>;

    async fn txn_log_bounds(&self) -> Result<TxnLogBounds, StoreError>;

    /// Remove the entries dated before `before_ms`, raising `floor` to the
    /// highest id removed. Returns how many went.
    async fn txn_log_prune(&self, before_ms: u64) -> Result<u64, StoreError>;

    /// The last committed id (`TxnLogBounds::last`), updated after each commit
    /// that logs is durable and visible to reads: a replication source waits on
    /// `changed()` to long-poll instead of re-reading the log.
    fn txn_log_subscribe(&self) -> tokio::sync::watch::Receiver<u64>;

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

    /// [`Store::apply_replicated`] plus document writes (after the changes) in
    /// the same atomic commit: how a wrapper keeps documents derived from
    /// handles (the reverse index) in step. Wrappers override this one.
    async fn apply_replicated_with_docs(
        &self,
        changes: Vec<ReplicatedChange>,
        progress: Vec<(String, Option<Vec<u8>>)>,
        docs: Vec<DocWrite>,
    ) -> Result<(), StoreError>;

    /// Mirror (re)bootstrap by a dump: set floor = last = `id` and drop every
    /// kept entry (a dump resumes the source's sequence at `id`, lower or
    /// higher than ours: mirrors of this server that are past it are then
    /// told to redump instead of missing changes).
    async fn txn_log_reset(&self, id: u64) -> Result<(), StoreError>;

    /// Durable checkpoint (opcode 1003): everything acknowledged is in the
    /// backing storage's main file when this returns.
    async fn checkpoint(&self) -> Result<(), StoreError>;

    /// Finish the writes already queued, then release the backing storage so it
    /// is left cleanly shut down. Later calls fail with [`StoreError::Closed`].
    fn close(&self);

    /// A consistent export of everything stored, for a backup ([`backup`]);
    /// backends that cannot give one say so.
    fn export(&self) -> Result<Box<dyn backup::StoreExport>, StoreError> {
        Err(StoreError::Backend("this store backend has no backup export".into()))
    }
}

/// Lower bound of a prefix scan: the prefix itself, or just after `start_after` when
/// that sorts at or after the prefix.
pub(crate) fn scan_start<'a>(prefix: &'a [u8], start_after: Option<&'a [u8]>) -> std::ops::Bound<&'a [u8]> {
    use std::ops::Bound;
    match start_after {
        Some(s) if s >= prefix => Bound::Excluded(s),
        _ => Bound::Included(prefix),
    }
}
