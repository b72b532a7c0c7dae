//! Handle storage for `handled`.
//!
//! The seams callers use ([`traits`]): [`RecordStore`] (handles, metadata,
//! homing), [`DocumentStore`] (documents and their indexes), [`TxnLogStore`]
//! (the replication log and replicated writes) and [`StoreAdmin`] (what the
//! store can do — its [`Capabilities`] — metrics, checkpoints, shutdown,
//! backups); [`Store`] is all four, what the server holds as `Arc<dyn Store>`.
//! Stores are opened in one place, [`open_store`] with a [`StoreConfig`].
//!
//! Four backends:
//! * [`EmbeddedStore`]: durable, one redb file, reads inline on the caller, writes
//!   group-committed by one writer thread (one synced log append per batch);
//! * [`MemoryStore`]: a `BTreeMap` behind a lock, for `--ephemeral` runs and tests;
//! * `CassandraStore` (feature `cassandra`, on by default): Apache Cassandra, for
//!   several stateless nodes sharing one registry;
//! * `SqlStore` (feature `sql`, on by default): Handle.Net's own SQL tables on
//!   PostgreSQL or MariaDB/MySQL (`sql/`), declining documents and the transaction log.
//!
//! The seams are shaped so a distributed backend (Apache Cassandra) can implement
//! them too: everything is async, atomicity is per handle only (compare-and-set
//! through [`RecordStore::swap`], which maps onto a lightweight transaction;
//! documents derived from a handle may ride along in the same step), there are
//! no general multi-key transactions, and listing is a key-prefix scan with
//! paging.
//!
//! [`conformance`] holds the behaviour suite every backend must pass, per seam.

use std::sync::atomic::{AtomicU64, Ordering};

pub mod backup;
mod cas;
#[cfg(feature = "cassandra")]
pub mod cassandra;
pub mod change_dates;
pub mod clock;
pub mod conformance;
mod documents;
mod embedded;
mod memory;
pub mod observe;
mod open;
mod record;
mod record_compact;
mod riding;
#[cfg(feature = "sql")]
pub mod sql;
pub mod traits;
pub mod txn_log;

#[cfg(feature = "cassandra")]
pub use cassandra::{CassandraOptions, CassandraStore};
pub use documents::{DocExpect, DocOutcome, Document, IndexEntry, IndexHit, IndexMatch, MAX_INDEX_KEY};
pub use embedded::{
    EmbeddedOptions, EmbeddedRestore, EmbeddedStore, DOC_INDEX_TABLE, HANDLES_TABLE, META_TABLE, STORE_FILE_NAME,
};
pub use memory::MemoryStore;
pub use observe::{CommitObserver, Committed, DerivedFrom, DocContributor, Hooks, Observed, Writing};
pub use open::{open_store, StoreConfig};
pub use record::{HandleRecord, InvalidRecord, RecordError};
#[cfg(feature = "sql")]
pub use sql::{MetaTable, SqlOptions, SqlStore, SQL_META_FILE_NAME};
pub use traits::{
    Backup, Capabilities, DocumentStore, RecordStore, Store, StoreAdmin, TxnLogStore, Warming, MAX_SEARCHED_LEN,
};
pub use txn_log::{
    homed_meta_key, ReplicatedChange, ReplicatedWrite, TxnAction, TxnEntry, TxnLogBounds, HOMED_META_PREFIX,
    TXN_LOG_READ_MAX,
};

#[doc(hidden)]
pub use embedded::{fuzz_decode_txn_log_entry, fuzz_encode_txn_log_run};

// For `forward_store!` in other crates.
#[doc(hidden)]
pub use async_trait::async_trait as __async_trait;
#[doc(hidden)]
pub use tokio::sync::watch as __watch;

/// What [`RecordStore::swap`] requires of the current state of the handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// The handle must not exist (create).
    Absent,
    /// The handle must exist with exactly this record (all values equal, in order).
    Present(HandleRecord),
    /// No condition (unconditional overwrite or delete).
    Any,
}

/// Result of a [`RecordStore::swap`] that ran (errors aside).
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
/// handle write ([`RecordStore::swap_with_docs`], [`RecordStore::put_many_with_docs`]).
/// A partitioned backend keeps such documents in the handle's partition, so
/// the pair stays one lightweight transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocWrite {
    pub collection: String,
    pub id: Vec<u8>,
    pub doc: Option<Document>,
    /// Set (by [`Hooks`]) when the document is a function of the handle's record
    /// alone: a store may then keep only its index entries and rebuild the
    /// document it replaces from the record it replaces.
    pub derived: Option<DerivedFrom>,
}

impl DocWrite {
    /// A document write that the store keeps as it is.
    pub fn new(collection: impl Into<String>, id: impl Into<Vec<u8>>, doc: Option<Document>) -> DocWrite {
        DocWrite { collection: collection.into(), id: id.into(), doc, derived: None }
    }
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
    /// This backend does not do that (no documents, no transaction log, no
    /// backup export): says what, and if useful what to do instead. Its
    /// [`Capabilities`] say so beforehand.
    #[error("{0}")]
    Unsupported(String),
    /// The database refused the write for good: trying again cannot succeed
    /// (a name or value its column cannot hold, a key its collation takes for
    /// another's). Says what was refused, and why.
    #[error("{message}")]
    Refused { what: Refused, message: String },
}

/// What a database refused for good ([`StoreError::Refused`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The handle's (or a prefix's) name: too long for its column, or
    /// characters the column cannot hold.
    Name,
    /// A value, or the record as a whole (a constraint of the table).
    Value,
    /// The table holds another handle it takes for this one (its collation:
    /// letter case, trailing spaces), or a unique key of an operator's table.
    Taken,
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
            StoreError::Unsupported(s) => StoreError::Unsupported(s.clone()),
            StoreError::Refused { what, message } => StoreError::Refused { what: *what, message: message.clone() },
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
    /// Handle lookups sent to a database server (SQL; 0 elsewhere) and the
    /// statements that carried them: fewer statements than lookups under load.
    pub lookups: u64,
    pub lookup_statements: u64,
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
            lookups: 0,
            lookup_statements: 0,
        }
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
