//! Embedded durable backend on redb: one file (plus its write-ahead log).
//!
//! * Reads (`get`, `scan_keys`, `meta_*` reads, `count`, documents) run inline on
//!   the caller against a published view (`embedded_view.rs`): a redb read
//!   snapshot under the in-memory layers of the batches not yet checkpointed.
//!   The writer publishes it (an `ArcSwap`) *before* it acknowledges a batch, so
//!   an acknowledged write is visible to every later read, and a read costs one
//!   atomic load plus a layer and B-tree lookup. Readers never wait for the
//!   writer. Should publishing fail, reads fall back to a fresh read transaction each.
//! * Writes go to ONE writer thread through a bounded channel (`embedded_writer.rs`).
//!   The thread takes the first pending operation, drains whatever else is already
//!   queued (up to [`EmbeddedOptions::max_batch_ops`] /
//!   [`EmbeddedOptions::max_batch_bytes`]), applies the batch in arrival order
//!   over the published view (each swap checks its expectation against the state
//!   including the batch's earlier operations, so two swaps of one key in a batch
//!   behave as if serialized), makes it durable — one synced append to the
//!   write-ahead log (`embedded_wal.rs`) — and visible, and only then answers
//!   every operation. If that fails, every operation of the batch fails: nothing
//!   unwritten is ever acknowledged. Checkpoints (durable redb commits, after
//!   which the log can go) run beside the writes (`embedded_committer.rs`). A
//!   batch with an import or a log checkpoint is not logged: it is applied
//!   straight into its own durable redb commit (`embedded_tx.rs`).
//!
//! Batching needs no timer: while one sync runs, the next batch queues up.
//!
//! Damage is refused, never served or rolled back over: every stored value carries
//! a checksum checked on read (`embedded_format.rs`), and every durable commit is
//! two-phase, so that a page that fails its checksum when redb repairs the file
//! after an unclean shutdown cannot be a torn commit: redb then refuses the file
//! instead of rolling back to an older commit (which lost whole stores before).
//!
//! Documents live in two more tables (documents, index entries; see
//! `embedded_docs.rs`); a document swap is one more kind of batched operation, and
//! documents riding along with a handle write are applied in the same transaction.
//!
//! The transaction log (replication source) is two more tables written by the
//! writer in each batch's transaction, ids assigned in apply order
//! (`embedded_txnlog.rs`).

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use arc_swap::ArcSwapOption;
use parking_lot::Mutex;
use redb::{Database, ReadOnlyTable, ReadableDatabase, TableDefinition};
use tokio::sync::{mpsc, oneshot};

use crate::txn_log::TxnNotifier;
use crate::{
    scan_start, Backup, Capabilities, DocExpect, DocOutcome, DocWrite, Document, DocumentStore, Expect, HandleRecord,
    IndexHit, IndexMatch, RecordStore, ReplicatedChange, StatCounters, StoreAdmin, StoreError, StoreStats, SwapOutcome,
    TxnEntry, TxnLogBounds, TxnLogStore,
};

#[path = "embedded_backup.rs"]
mod backup;
#[path = "embedded_committer.rs"]
mod committer;
#[path = "embedded_docs.rs"]
mod docs;
#[path = "embedded_format.rs"]
mod format;
#[path = "embedded_keydir.rs"]
mod keydir;
#[path = "embedded_seams.rs"]
mod seams;
#[path = "embedded_segments.rs"]
mod segments;
#[path = "embedded_space.rs"]
mod space;
#[path = "embedded_tx.rs"]
mod tx;
#[path = "embedded_txnlog.rs"]
mod txnlog;
/// The transaction log's stored entries, for the fuzz target `txn_log_entry`.
#[doc(hidden)]
pub use txnlog::entry::{decode as fuzz_decode_txn_log_entry, encode_run as fuzz_encode_txn_log_run};
#[path = "embedded_view.rs"]
mod view;
#[path = "embedded_wal.rs"]
mod wal;
#[path = "embedded_warm.rs"]
mod warm;
#[path = "embedded_writer.rs"]
mod writer;

pub use backup::EmbeddedRestore;
use committer::Committer;
use keydir::KeyDir;
pub use keydir::KeyDirStats;
use space::DiskSpace;
use txnlog::{LogOp, TXN_LOG, TXN_STATE};
use view::View;
use wal::{TableId, Wal};
use warm::Warmer;
use writer::{writer_loop, Op, Pending, RawExpect, RawOutcome, Reply};

/// File name of the store inside a data directory.
pub const STORE_FILE_NAME: &str = "handles.redb";
/// redb table of handles: normalized handle bytes → [`HandleRecord`] stored form.
pub const HANDLES_TABLE: &str = "handles.v1";
/// redb table of server metadata: key → bytes.
pub const META_TABLE: &str = "meta.v1";

const HANDLES: TableDefinition<&[u8], &[u8]> = TableDefinition::new(HANDLES_TABLE);
const META: TableDefinition<&str, &[u8]> = TableDefinition::new(META_TABLE);
/// redb table of documents: `documents::doc_key` → `Document` stored form.
pub const DOCS_TABLE: &str = "docs.v1";
/// redb table of document index entries: `documents::index_key` → ().
pub const DOC_INDEX_TABLE: &str = "docindex.v1";
const DOCS: TableDefinition<&[u8], &[u8]> = TableDefinition::new(DOCS_TABLE);
const DOC_INDEX: TableDefinition<&[u8], ()> = TableDefinition::new(DOC_INDEX_TABLE);

/// Tuning of [`EmbeddedStore`].
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// redb page cache; `None` keeps redb's default (1 GiB).
    pub cache_bytes: Option<usize>,
    /// Most operations committed together.
    pub max_batch_ops: usize,
    /// Most encoded bytes committed together (an import chunk may exceed it alone).
    pub max_batch_bytes: usize,
    /// Writes that may wait for the writer before callers are held back.
    pub queue_depth: usize,
    /// redb quick-repair: each checkpoint also saves the allocator state so that
    /// opening after a crash is instant instead of a walk of the whole file. Costs
    /// an extra fsync per checkpoint. Off by default.
    pub quick_repair: bool,
    /// Longest time between checkpoints (durable commits of the store file,
    /// beside the writes; in between, batches are made durable by the
    /// write-ahead log and kept in memory). Longer: more log to replay after a crash.
    pub checkpoint_interval: std::time::Duration,
    /// Log size that starts a checkpoint: it bounds each checkpoint's work, and
    /// so the burst of page writes (and disk flushes) it puts beside the log's
    /// own syncs. The 1 MiB default is ~100 ms of creates at full speed.
    pub checkpoint_log_bytes: u64,
    /// Free space kept on the store's filesystem: below it writes are refused (and
    /// [`Store::writable`] says why) until space returns. 0: no reserve.
    pub min_free_bytes: u64,
    /// Verify every page checksum on every open (slow on big stores). Off by default;
    /// redb always checks and repairs after an unclean shutdown.
    pub check_integrity_on_open: bool,
    /// Read the store file once, in order, after opening (on a thread of its own,
    /// up to half the available memory) so that the OS holds it in its page cache
    /// (`embedded_warm.rs`); [`StoreAdmin::warming`] says how far it got. On by default.
    pub warm_on_open: bool,
    /// Serve handle lookups through a key directory (`embedded_keydir.rs`):
    /// each checkpoint also appends its handle records to segment files read
    /// through `mmap`, and a hash of every key in memory points at them, so a
    /// get costs the same at 10M handles as at 10k, for ~20–40 bytes of memory
    /// per handle. redb keeps every key, and for the records checkpointed with
    /// the directory their locations in it rather than a copy
    /// (`embedded_keydir_locations.rs`). Opening a store that has no (current)
    /// directory writes one from the store file first; opening one without the
    /// option moves its records back into the store file. On by default.
    pub key_directory: bool,
    /// Size of the key directory's segment files. Replaced records leave dead
    /// bytes behind; once they are a third of all, each checkpoint also copies
    /// the live records of a slice of the oldest segment forward, and a segment
    /// so emptied is deleted (`embedded_keydir_merge.rs`). Small sizes are for tests.
    pub key_directory_segment_bytes: u64,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        EmbeddedOptions {
            cache_bytes: None,
            max_batch_ops: 1024,
            max_batch_bytes: 8 << 20,
            queue_depth: 4096,
            quick_repair: false,
            check_integrity_on_open: false,
            checkpoint_interval: std::time::Duration::from_secs(2),
            checkpoint_log_bytes: 1 << 20,
            min_free_bytes: 64 << 20,
            warm_on_open: true,
            key_directory: true,
            key_directory_segment_bytes: keydir::DEFAULT_SEGMENT_BYTES,
        }
    }
}

/// The durable store: see the module documentation.
pub struct EmbeddedStore {
    path: PathBuf,
    tx: Mutex<Option<mpsc::Sender<Pending>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    shared: Arc<Shared>,
    space: DiskSpace,
    repaired: bool,
    warmer: Warmer,
}

struct Shared {
    stats: StatCounters,
    /// The tables as of the latest checkpoint, with the layers of the batches
    /// logged since (None if the snapshot could not be opened).
    snapshot: ArcSwapOption<View>,
    /// Why the writer stopped, or takes no more writes, if it did so on its own.
    fatal: Mutex<Option<String>>,
    /// Taken by `close`: redb marks the file cleanly shut down only when the
    /// database is dropped, and an unclean file is repaired (slowly) at next open.
    /// Empty while the writer reopens the file after an I/O error.
    db: Mutex<Option<Arc<Database>>>,
    /// The last transaction-log id, published after each commit.
    txn_notifier: TxnNotifier,
    /// The key directory, if the store has one (`EmbeddedOptions::key_directory`);
    /// replaced when the writer reopens the file.
    keydir: arc_swap::ArcSwapOption<KeyDir>,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore").field("path", &self.path).finish_non_exhaustive()
    }
}

impl EmbeddedStore {
    /// Open (or create) the store. `path` is the database file; if it names an
    /// existing directory, the file is `path/handles.redb`. Opening does not scan
    /// the data; after an unclean shutdown redb repairs the file first (progress is
    /// logged) and [`Self::was_repaired`] tells.
    pub fn open(path: &Path, options: EmbeddedOptions) -> Result<Self, StoreError> {
        let path = if path.is_dir() { path.join(STORE_FILE_NAME) } else { path.to_path_buf() };
        let space = DiskSpace::new(&path, options.min_free_bytes);
        let (db, log, repaired, keydir) = open_file(&path, &options, &space)?;
        // With a key directory lookups read its segments, not the store file:
        // those first, and readiness waits for them alone.
        let mut warm = keydir.as_ref().map(|k| k.segment_paths()).unwrap_or_default();
        let serving = if warm.is_empty() { 1 } else { warm.len() };
        warm.push(path.clone());
        let warmer = if options.warm_on_open { Warmer::start(&warm, serving, None) } else { Warmer::done() };
        let view = View::new(Arc::new(Snapshot::open(&db, keydir.as_ref()).map_err(|e| open_error(&path, e))?));
        let last_txn = txnlog::last(&view).map_err(|e| open_error(&path, e))?;
        let shared = Arc::new(Shared {
            stats: StatCounters::default(),
            snapshot: ArcSwapOption::from_pointee(view),
            fatal: Mutex::new(None),
            db: Mutex::new(Some(Arc::new(db))),
            txn_notifier: TxnNotifier::new(last_txn),
            keydir: ArcSwapOption::new(keydir),
        });
        let (tx, rx) = mpsc::channel(options.queue_depth.max(1));
        let writer = {
            let shared = shared.clone();
            let opts = options.clone();
            let space = space.clone();
            let path = path.clone();
            std::thread::Builder::new()
                .name("store-writer".into())
                .spawn(move || {
                    let mut committer = Committer::new(log, opts.clone(), space, shared.clone(), path);
                    writer_loop(rx, shared.clone(), opts, &mut committer);
                    // Leave the file complete and the log empty.
                    if let Err(e) = committer.checkpoint() {
                        tracing::error!("final store checkpoint failed (the log is replayed at next open): {e}");
                    }
                    if let Some(k) = shared.keydir.load_full() {
                        k.write_hint();
                    }
                })
                .map_err(StoreError::Io)?
        };
        Ok(EmbeddedStore {
            path,
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            shared,
            space,
            repaired,
            warmer,
        })
    }

    /// Open `dir/handles.redb`, creating `dir` if needed.
    pub fn open_dir(dir: &Path, options: EmbeddedOptions) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir)?;
        Self::open(&dir.join(STORE_FILE_NAME), options)
    }

    /// Compact a store that is not open (e.g. after a large import): rewrite it so
    /// that free space is given back. Returns the file size before and after.
    /// Fails if the store is open elsewhere.
    pub fn compact_file(path: &Path) -> Result<(u64, u64), StoreError> {
        let path = if path.is_dir() { path.join(STORE_FILE_NAME) } else { path.to_path_buf() };
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).map_err(StoreError::Io);
        let before = size(&path)?;
        let mut db = Database::open(&path).map_err(|e| open_error(&path, map_redb(e.into())))?;
        while db.compact().map_err(|e| map_redb(e.into()))? {}
        drop(db);
        Ok((before, size(&path)?))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The key directory's size, if the store has one.
    pub fn key_directory_stats(&self) -> Option<KeyDirStats> {
        self.shared.keydir.load().as_ref().map(|k| k.stats())
    }

    /// Did this open have to repair the file (unclean shutdown)?
    pub fn was_repaired(&self) -> bool {
        self.repaired
    }

    /// Stop the writer after it has committed everything queued, and close the file.
    /// Dropping the store does the same.
    fn shutdown(&self) {
        self.warmer.stop();
        self.tx.lock().take();
        let writer = self.writer.lock().take();
        if let Some(w) = writer {
            let _ = w.join();
        }
        // The snapshot holds a read transaction: release it before the database.
        self.shared.snapshot.store(None);
        self.shared.db.lock().take();
    }

    fn sender(&self) -> Result<mpsc::Sender<Pending>, StoreError> {
        self.tx.lock().clone().ok_or(StoreError::Closed)
    }

    fn database(&self) -> Result<Arc<Database>, StoreError> {
        let db = self.shared.db.lock().clone();
        db.ok_or_else(|| self.writer_gone())
    }

    /// Queue one write and wait for its acknowledgement.
    async fn submit<T>(
        &self,
        op: Op,
        wrap: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> Reply,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        let bytes = op.bytes();
        self.sender()?.send(Pending { op, bytes, reply: wrap(reply) }).await.map_err(|_| self.writer_gone())?;
        answer.await.map_err(|_| self.writer_gone())?
    }

    fn writer_gone(&self) -> StoreError {
        match &*self.shared.fatal.lock() {
            Some(m) => StoreError::Backend(m.clone()),
            None => StoreError::Closed,
        }
    }

    /// The latest committed state.
    fn snapshot(&self) -> Result<Arc<View>, StoreError> {
        match self.shared.snapshot.load_full() {
            Some(s) => Ok(s),
            None => {
                let keydir = self.shared.keydir.load_full();
                Ok(Arc::new(View::new(Arc::new(Snapshot::open(&*self.database()?, keydir.as_ref())?))))
            }
        }
    }
}

impl Drop for EmbeddedStore {
    fn drop(&mut self) {
        self.shutdown();
    }
}

// ---------------------------------------------------------------------------------
// Open and errors

/// What [`open_file`] opened: the database, its log, whether it had to be
/// repaired, and its key directory if it has one.
type Opened = (Database, Wal, bool, Option<Arc<KeyDir>>);

/// Open the database file, replay its log and bring it to the current format,
/// and open (or write) the key directory if it has one. (Also how the writer
/// reopens the file after redb latched an I/O error.)
fn open_file(path: &Path, options: &EmbeddedOptions, space: &DiskSpace) -> Result<Opened, StoreError> {
    let path = path.to_path_buf();
    let repair_seen = Arc::new(AtomicBool::new(false));
    let mut builder = Database::builder();
    if let Some(c) = options.cache_bytes {
        builder.set_cache_size(c);
    }
    builder.set_check_integrity_on_open(options.check_integrity_on_open);
    {
        let seen = repair_seen.clone();
        let shown = AtomicU64::new(u64::MAX);
        let p = path.clone();
        builder.set_repair_callback(move |s| {
            if !seen.swap(true, Ordering::Relaxed) {
                tracing::warn!(path = %p.display(), "store was not shut down cleanly: repairing");
            }
            let decile = (s.progress() * 10.0) as u64;
            if shown.swap(decile, Ordering::Relaxed) != decile {
                tracing::info!(path = %p.display(), "store repair {:.0}%", s.progress() * 100.0);
            }
        });
    }
    let db = builder.create(&path).map_err(|e| open_error(&path, map_redb(e.into())))?;
    let repaired = repair_seen.load(Ordering::Relaxed);
    if repaired {
        tracing::warn!(path = %path.display(), "store repaired");
    }
    ensure_tables(&db).map_err(|e| open_error(&path, e))?;

    // The key directory as the last checkpoint left it: the log's replay goes
    // through it, in the replay's own commit.
    let segment_bytes = options.key_directory_segment_bytes.max(segments::MIN_SEGMENT_BYTES);
    let keydir = match options.key_directory {
        true => Some(keydir::open(&db, &path, segment_bytes).map_err(|e| open_error(&path, e))?),
        false => None,
    };
    let (mut staged, mut replay_gen) = (None, None);
    let mut hook = |txn: &redb::WriteTransaction, gen: u64, handles: &wal::HandleEntries| -> Result<(), StoreError> {
        if let Some(Ok(k)) = &keydir {
            staged = k.stage(handles.iter().map(|(k, v)| (k.as_slice(), v.as_deref())))?;
            keydir::write_locations(txn, staged.as_ref())?;
            keydir::record(txn, staged.as_ref(), gen)?;
            replay_gen = Some(gen);
        }
        Ok(())
    };
    let (log, replayed) = Wal::open(&db, &path, &mut hook).map_err(|e| match e {
        StoreError::Io(io) if io.kind() == std::io::ErrorKind::StorageFull => {
            let log_len = Wal::bytes_on_disk(&path);
            StoreError::Io(std::io::Error::new(
                io.kind(),
                format!(
                    "replaying the store log ({}) after an unclean shutdown needs free space, up to about twice \
                     the log's size; {}: free some and start again ({io})",
                    space::mib(log_len),
                    space.describe()
                ),
            ))
        }
        e => open_error(&path, e),
    })?;
    let repaired = repaired || replayed > 0;
    format::upgrade(&db).map_err(|e| open_error(&path, e))?;
    docs::code_if_empty(&db).map_err(|e| open_error(&path, e))?;
    if !options.key_directory {
        keydir::inline_values(&db, &path).map_err(|e| open_error(&path, e))?;
    }
    let keydir = match keydir {
        None => None,
        Some(Ok(k)) => {
            if let Some(gen) = replay_gen {
                k.set_generation(gen);
            }
            if let Some(s) = staged {
                k.install(s).map_err(|e| open_error(&path, e))?;
            }
            Some(k)
        }
        Some(Err(why)) => {
            tracing::info!(path = %path.display(), "writing the key directory from the store file: {why}");
            Some(keydir::rebuild(&db, &path, segment_bytes).map_err(|e| open_error(&path, e))?)
        }
    };
    Ok((db, log, repaired, keydir.map(Arc::new)))
}

/// Every table in one read transaction, and what reads the handle values that
/// are locations in the key directory (`embedded_keydir_locations.rs`).
struct Snapshot {
    handles: ReadOnlyTable<&'static [u8], &'static [u8]>,
    resolver: Option<keydir::Resolver>,
    meta: ReadOnlyTable<&'static str, &'static [u8]>,
    docs: ReadOnlyTable<&'static [u8], &'static [u8]>,
    doc_index: ReadOnlyTable<&'static [u8], ()>,
    txn_log: ReadOnlyTable<&'static [u8], &'static [u8]>,
    txn_state: ReadOnlyTable<&'static str, &'static [u8]>,
}

impl Snapshot {
    fn open(db: &Database, keydir: Option<&Arc<KeyDir>>) -> Result<Snapshot, StoreError> {
        // The segments mapped before the snapshot: any it names that a merge
        // drops later stay readable through these.
        let resolver = keydir.map(|k| k.resolver());
        let txn = db.begin_read().map_err(|e| map_redb(e.into()))?;
        Ok(Snapshot {
            handles: txn.open_table(HANDLES).map_err(|e| map_redb(e.into()))?,
            resolver,
            meta: txn.open_table(META).map_err(|e| map_redb(e.into()))?,
            docs: txn.open_table(DOCS).map_err(|e| map_redb(e.into()))?,
            doc_index: txn.open_table(DOC_INDEX).map_err(|e| map_redb(e.into()))?,
            txn_log: txn.open_table(TXN_LOG).map_err(|e| map_redb(e.into()))?,
            txn_state: txn.open_table(TXN_STATE).map_err(|e| map_redb(e.into()))?,
        })
    }

    /// The stored (sealed) value of handle `key`, read through the key
    /// directory if redb holds its location.
    fn handle(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        match self.handles.get(key).map_err(|e| map_redb(e.into()))? {
            Some(g) => keydir::resolve(self.resolver.as_ref(), key, g.value().to_vec()).map(Some),
            None => Ok(None),
        }
    }
}

/// Create the tables if this is a new file (a no-op read otherwise).
fn ensure_tables(db: &Database) -> Result<(), StoreError> {
    let missing = {
        let txn = db.begin_read().map_err(|e| map_redb(e.into()))?;
        let h = matches!(txn.open_table(HANDLES), Err(redb::TableError::TableDoesNotExist(_)));
        let m = matches!(txn.open_table(META), Err(redb::TableError::TableDoesNotExist(_)));
        let d = matches!(txn.open_table(DOCS), Err(redb::TableError::TableDoesNotExist(_)));
        let i = matches!(txn.open_table(DOC_INDEX), Err(redb::TableError::TableDoesNotExist(_)));
        let w = matches!(txn.open_table(wal::WAL_STATE), Err(redb::TableError::TableDoesNotExist(_)));
        let l = matches!(txn.open_table(TXN_LOG), Err(redb::TableError::TableDoesNotExist(_)))
            || matches!(txn.open_table(TXN_STATE), Err(redb::TableError::TableDoesNotExist(_)));
        h || m || d || i || w || l
    };
    if missing {
        let mut txn = db.begin_write().map_err(|e| map_redb(e.into()))?;
        txn.set_two_phase_commit(true);
        txn.open_table(HANDLES).map_err(|e| map_redb(e.into()))?;
        txn.open_table(META).map_err(|e| map_redb(e.into()))?;
        txn.open_table(DOCS).map_err(|e| map_redb(e.into()))?;
        txn.open_table(DOC_INDEX).map_err(|e| map_redb(e.into()))?;
        txn.open_table(wal::WAL_STATE).map_err(|e| map_redb(e.into()))?;
        txn.open_table(TXN_LOG).map_err(|e| map_redb(e.into()))?;
        txn.open_table(TXN_STATE).map_err(|e| map_redb(e.into()))?;
        txn.commit().map_err(|e| map_redb(e.into()))?;
    }
    Ok(())
}

fn open_error(path: &Path, e: StoreError) -> StoreError {
    let p = path.display();
    match e {
        // redb reports a file that is not a database as InvalidData.
        StoreError::Io(io) if io.kind() == std::io::ErrorKind::InvalidData => {
            StoreError::Corrupt(format!("store {p}: {io}"))
        }
        StoreError::Io(io) => StoreError::Io(std::io::Error::new(io.kind(), format!("opening store {p}: {io}"))),
        // The log's own message says where and what to do.
        StoreError::Corrupt(m) if m.starts_with("store log") => StoreError::Corrupt(m),
        StoreError::Corrupt(m) => StoreError::Corrupt(format!(
            "store {p}: {m}. The file is damaged and the server does not start on it: restore the data \
             directory from a backup"
        )),
        StoreError::Backend(m) => StoreError::Backend(format!("opening store {p}: {m}")),
        other => other,
    }
}

/// redb errors → [`StoreError`].
fn map_redb(e: redb::Error) -> StoreError {
    match e {
        redb::Error::Io(io) => StoreError::Io(io),
        redb::Error::Corrupted(m) => StoreError::Corrupt(m),
        redb::Error::DatabaseClosed => StoreError::Closed,
        redb::Error::DatabaseAlreadyOpen => {
            StoreError::Backend("the database file is already open (another handled process?)".into())
        }
        redb::Error::PreviousIo => {
            StoreError::Backend("an earlier I/O error left the store unusable: restart the server".into())
        }
        redb::Error::RepairAborted => StoreError::Backend("repair of the database file was aborted".into()),
        redb::Error::UpgradeRequired(v) => {
            StoreError::Backend(format!("the database file has format version {v}: it needs an upgrade"))
        }
        redb::Error::TableTypeMismatch { table, key, value } => StoreError::Corrupt(format!(
            "table {table} has key type {key:?} and value type {value:?}: not a handled store?"
        )),
        other => StoreError::Backend(other.to_string()),
    }
}
