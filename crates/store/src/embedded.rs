//! Embedded durable backend on redb: one file, two tables.
//!
//! * Reads (`get`, `scan_keys`, `meta_*` reads, `count`) run inline on the caller
//!   against a published snapshot: the writer opens a redb read transaction on each
//!   commit it makes and publishes its two tables (an `ArcSwap`) *before* it
//!   acknowledges the batch, so an acknowledged write is visible to every later read,
//!   and a read costs one atomic load plus the B-tree lookup. Readers never wait for
//!   the writer. Should publishing fail, reads fall back to a fresh read transaction
//!   each.
//! * Writes go to ONE writer thread through a bounded channel. The thread takes the
//!   first pending operation, drains whatever else is already queued (up to
//!   [`EmbeddedOptions::max_batch_ops`] / [`EmbeddedOptions::max_batch_bytes`]),
//!   applies the batch in arrival order inside one write transaction (each swap checks
//!   its expectation against the state inside that transaction, so two swaps of one
//!   key in a batch behave as if serialized), commits with `Durability::Immediate`
//!   (one fsync), and only then answers every operation. If the commit fails, every
//!   operation of the batch fails: nothing unwritten is ever acknowledged.
//!
//! Batching needs no timer: while one fsync runs, the next batch queues up.
//!
//! Documents live in two more tables (documents, index entries; see
//! `embedded_docs.rs`); a document swap is one more kind of batched operation, so
//! it is group-committed and durable before its acknowledgement like the rest.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use arc_swap::ArcSwapOption;
use parking_lot::Mutex;
use redb::{
    Database, Durability, ReadOnlyTable, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition,
};
use tokio::sync::{mpsc, oneshot};

use crate::{
    scan_start, DocExpect, DocOutcome, Document, Expect, HandleRecord, IndexHit, IndexMatch, StatCounters, Store,
    StoreError, StoreStats, SwapOutcome,
};

#[path = "embedded_docs.rs"]
mod docs;

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
    /// redb quick-repair: each commit also saves the allocator state so that opening
    /// after a crash is instant instead of a walk of the whole file. Costs an extra
    /// fsync per commit. Off by default.
    pub quick_repair: bool,
    /// Verify every page checksum on every open (slow on big stores). Off by default;
    /// redb always checks and repairs after an unclean shutdown.
    pub check_integrity_on_open: bool,
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
        }
    }
}

/// The durable store: see the module documentation.
pub struct EmbeddedStore {
    /// Taken by `close`: redb marks the file cleanly shut down only when the
    /// database is dropped, and an unclean file is repaired (slowly) at next open.
    db: Mutex<Option<Arc<Database>>>,
    path: PathBuf,
    tx: Mutex<Option<mpsc::Sender<Pending>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    shared: Arc<Shared>,
    repaired: bool,
}

struct Shared {
    stats: StatCounters,
    /// The tables as of the latest commit (None if it could not be opened).
    snapshot: ArcSwapOption<Snapshot>,
    /// Why the writer stopped, if it stopped on its own.
    fatal: Mutex<Option<String>>,
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

        let db = Arc::new(db);
        let snapshot = Snapshot::open(&db).map_err(|e| open_error(&path, e))?;
        let shared = Arc::new(Shared {
            stats: StatCounters::default(),
            snapshot: ArcSwapOption::from_pointee(snapshot),
            fatal: Mutex::new(None),
        });
        let (tx, rx) = mpsc::channel(options.queue_depth.max(1));
        let writer = {
            let db = db.clone();
            let shared = shared.clone();
            let opts = options.clone();
            std::thread::Builder::new()
                .name("store-writer".into())
                .spawn(move || {
                    let quick_repair = opts.quick_repair;
                    writer_loop(db, rx, shared, opts, move |db, batch| apply(db, batch, quick_repair))
                })
                .map_err(StoreError::Io)?
        };
        Ok(EmbeddedStore { db: Mutex::new(Some(db)), path, tx: Mutex::new(Some(tx)), writer: Mutex::new(Some(writer)), shared, repaired })
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

    /// Did this open have to repair the file (unclean shutdown)?
    pub fn was_repaired(&self) -> bool {
        self.repaired
    }

    /// Stop the writer after it has committed everything queued, and close the file.
    /// Dropping the store does the same.
    fn shutdown(&self) {
        self.tx.lock().take();
        let writer = self.writer.lock().take();
        if let Some(w) = writer {
            let _ = w.join();
        }
        // The snapshot holds a read transaction: release it before the database.
        self.shared.snapshot.store(None);
        self.db.lock().take();
    }

    fn sender(&self) -> Result<mpsc::Sender<Pending>, StoreError> {
        self.tx.lock().clone().ok_or(StoreError::Closed)
    }

    fn database(&self) -> Result<Arc<Database>, StoreError> {
        self.db.lock().clone().ok_or(StoreError::Closed)
    }

    /// Queue one write and wait for its acknowledgement.
    async fn submit<T>(&self, op: Op, wrap: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> Reply) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        let bytes = op.bytes();
        self.sender()?
            .send(Pending { op, bytes, reply: wrap(reply) })
            .await
            .map_err(|_| self.writer_gone())?;
        answer.await.map_err(|_| self.writer_gone())?
    }

    fn writer_gone(&self) -> StoreError {
        match &*self.shared.fatal.lock() {
            Some(m) => StoreError::Backend(m.clone()),
            None => StoreError::Closed,
        }
    }

    /// The latest committed state.
    fn snapshot(&self) -> Result<Arc<Snapshot>, StoreError> {
        match self.shared.snapshot.load_full() {
            Some(s) => Ok(s),
            None => Snapshot::open(&*self.database()?).map(Arc::new),
        }
    }
}

impl Drop for EmbeddedStore {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[async_trait::async_trait]
impl Store for EmbeddedStore {
    async fn get(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        // The hot path: borrow the snapshot without touching its reference count.
        let guard = self.shared.snapshot.load();
        let fallback;
        let snap = match guard.as_deref() {
            Some(s) => s,
            None => {
                fallback = Snapshot::open(&*self.database()?)?;
                &fallback
            }
        };
        match snap.handles.get(key).map_err(|e| map_redb(e.into()))? {
            Some(g) => HandleRecord::decode_stored(key, g.value()).map(Some),
            None => Ok(None),
        }
    }

    async fn swap(&self, key: &[u8], expect: Expect, new: Option<HandleRecord>) -> Result<SwapOutcome, StoreError> {
        if let Some(r) = &new {
            r.validate()?;
        }
        let (raw_expect, expected) = match expect {
            Expect::Absent => (RawExpect::Absent, None),
            Expect::Any => (RawExpect::Any, None),
            Expect::Present(r) => (RawExpect::Present(r.encode()), Some(r)),
        };
        let op = Op::Swap { key: key.to_vec(), expect: raw_expect, new: new.map(|r| r.encode()) };
        let raw = self.submit(op, Reply::Swap).await?;
        Ok(match raw {
            RawOutcome::DoneAsExpected => SwapOutcome::Done { previous: expected },
            RawOutcome::Done { previous: None } => SwapOutcome::Done { previous: None },
            RawOutcome::Done { previous: Some(b) } => {
                // Only `Expect::Any` gets here: the write happened, so a previous
                // record that no longer decodes is reported as unknown, not as an error.
                let previous = match HandleRecord::decode_stored(key, &b) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        tracing::warn!("overwrote undecodable record: {e}");
                        None
                    }
                };
                SwapOutcome::Done { previous }
            }
            RawOutcome::Conflict { current: None } => SwapOutcome::Conflict { current: None },
            RawOutcome::Conflict { current: Some(b) } => {
                SwapOutcome::Conflict { current: Some(HandleRecord::decode_stored(key, &b)?) }
            }
        })
    }

    async fn scan_keys(&self, prefix: &[u8], start_after: Option<&[u8]>, limit: usize) -> Result<Vec<Vec<u8>>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let snap = self.snapshot()?;
        let range = snap
            .handles
            .range::<&[u8]>((scan_start(prefix, start_after), Bound::Unbounded))
            .map_err(|e| map_redb(e.into()))?;
        let mut out = Vec::new();
        for item in range {
            let (k, _) = item.map_err(|e| map_redb(e.into()))?;
            let k = k.value();
            if !k.starts_with(prefix) {
                break;
            }
            out.push(k.to_vec());
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    async fn put_many(&self, records: Vec<(Vec<u8>, HandleRecord)>) -> Result<(), StoreError> {
        for (_, r) in &records {
            r.validate()?;
        }
        // Encode and sort here, on the caller, to keep the writer thread free. The
        // sort is stable so the later of two equal keys is inserted last and wins.
        let mut encoded: Vec<(Vec<u8>, Vec<u8>)> = records.into_iter().map(|(k, r)| (k, r.encode())).collect();
        if !encoded.is_sorted_by(|a, b| a.0 <= b.0) {
            encoded.sort_by(|a, b| a.0.cmp(&b.0));
        }
        self.submit(Op::Import { records: encoded }, Reply::Unit).await
    }

    async fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let snap = self.snapshot()?;
        Ok(snap.meta.get(key).map_err(|e| map_redb(e.into()))?.map(|g| g.value().to_vec()))
    }

    async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        self.submit(Op::Meta { key: key.to_owned(), value }, Reply::Unit).await
    }

    async fn meta_scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let snap = self.snapshot()?;
        let range = snap.meta.range::<&str>(prefix..).map_err(|e| map_redb(e.into()))?;
        let mut out = Vec::new();
        for item in range {
            let (k, v) = item.map_err(|e| map_redb(e.into()))?;
            if !k.value().starts_with(prefix) {
                break;
            }
            out.push((k.value().to_owned(), v.value().to_vec()));
        }
        Ok(out)
    }

    async fn count(&self) -> Result<u64, StoreError> {
        self.snapshot()?.handles.len().map_err(|e| map_redb(e.into()))
    }

    fn stats(&self) -> StoreStats {
        self.shared.stats.snapshot()
    }

    fn close(&self) {
        self.shutdown();
    }

    async fn doc_get(&self, collection: &str, id: &[u8]) -> Result<Option<Document>, StoreError> {
        docs::get(&*self.snapshot()?, collection, id)
    }

    async fn doc_swap(
        &self,
        collection: &str,
        id: &[u8],
        expect: DocExpect,
        new: Option<Document>,
    ) -> Result<DocOutcome, StoreError> {
        let op = docs::swap_op(collection, id, expect, new)?;
        let raw = self.submit(op, Reply::Swap).await?;
        docs::outcome(raw)
    }

    async fn doc_lookup(
        &self,
        collection: &str,
        index: &str,
        key: IndexMatch<'_>,
        start_after: Option<&IndexHit>,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        docs::lookup(&*self.snapshot()?, collection, index, key, start_after, limit)
    }

    async fn doc_scan(
        &self,
        collection: &str,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Document)>, StoreError> {
        docs::scan(&*self.snapshot()?, collection, prefix, start_after, limit)
    }
}

// ---------------------------------------------------------------------------------
// The writer

enum RawExpect {
    Absent,
    Present(Vec<u8>),
    Any,
}

enum RawOutcome {
    /// `Expect::Present` held: the previous record is the expected one.
    DoneAsExpected,
    Done { previous: Option<Vec<u8>> },
    Conflict { current: Option<Vec<u8>> },
}

enum Op {
    Swap { key: Vec<u8>, expect: RawExpect, new: Option<Vec<u8>> },
    Meta { key: String, value: Option<Vec<u8>> },
    Import { records: Vec<(Vec<u8>, Vec<u8>)> },
    /// A document swap: stored document key, the index-entry keys of the new
    /// state, the id (to rebuild the old state's entry keys) and the collection.
    DocSwap(docs::DocOp),
}

impl Op {
    fn bytes(&self) -> usize {
        match self {
            Op::Swap { key, expect, new } => {
                key.len() + new.as_ref().map_or(0, Vec::len) + if let RawExpect::Present(e) = expect { e.len() } else { 0 }
            }
            Op::Meta { key, value } => key.len() + value.as_ref().map_or(0, Vec::len),
            Op::Import { records } => records.iter().map(|(k, v)| k.len() + v.len()).sum(),
            Op::DocSwap(d) => d.bytes(),
        }
    }
}

enum Reply {
    Swap(oneshot::Sender<Result<RawOutcome, StoreError>>),
    Unit(oneshot::Sender<Result<(), StoreError>>),
}

enum Ack {
    Swap(RawOutcome),
    Unit,
}

struct Pending {
    op: Op,
    bytes: usize,
    reply: Reply,
}

impl Pending {
    fn answer(self, result: Result<Ack, StoreError>) {
        // A caller that went away no longer needs its answer: ignore send errors.
        match (self.reply, result) {
            (Reply::Swap(r), Ok(Ack::Swap(o))) => drop(r.send(Ok(o))),
            (Reply::Unit(r), Ok(Ack::Unit)) => drop(r.send(Ok(()))),
            (Reply::Swap(r), Err(e)) => drop(r.send(Err(e))),
            (Reply::Unit(r), Err(e)) => drop(r.send(Err(e))),
            (Reply::Swap(r), Ok(Ack::Unit)) => drop(r.send(Err(StoreError::Backend("internal: wrong reply".into())))),
            (Reply::Unit(r), Ok(Ack::Swap(_))) => drop(r.send(Err(StoreError::Backend("internal: wrong reply".into())))),
        }
    }
}

/// Take batches off the queue, `apply` each (one transaction, one commit), publish
/// the new snapshot, then answer. `apply` is a parameter so tests can make it fail.
fn writer_loop(
    db: Arc<Database>,
    mut rx: mpsc::Receiver<Pending>,
    shared: Arc<Shared>,
    opts: EmbeddedOptions,
    apply: impl Fn(&Database, &[Pending]) -> Result<Vec<Ack>, StoreError>,
) {
    let max_ops = opts.max_batch_ops.max(1);
    let mut batch: Vec<Pending> = Vec::with_capacity(max_ops);
    while let Some(first) = rx.blocking_recv() {
        let mut bytes = first.bytes;
        batch.push(first);
        while batch.len() < max_ops && bytes < opts.max_batch_bytes {
            match rx.try_recv() {
                Ok(p) => {
                    bytes += p.bytes;
                    batch.push(p);
                }
                Err(_) => break,
            }
        }
        let ops = batch.iter().filter(|p| !matches!(p.op, Op::Import { .. })).count() as u64;
        let imported: u64 =
            batch.iter().map(|p| if let Op::Import { records } = &p.op { records.len() as u64 } else { 0 }).sum();

        let started = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| apply(&db, &batch)));
        match result {
            Ok(Ok(acks)) => {
                shared.stats.committed(ops, imported, true, started.elapsed().as_micros() as u64);
                // Publish the new state before anyone learns of it.
                match Snapshot::open(&db) {
                    Ok(snap) => shared.snapshot.store(Some(Arc::new(snap))),
                    Err(e) => {
                        tracing::warn!("could not open a read snapshot after a commit: {e}");
                        shared.snapshot.store(None);
                    }
                }
                for (p, a) in batch.drain(..).zip(acks) {
                    p.answer(Ok(a));
                }
            }
            Ok(Err(e)) => {
                tracing::error!("store commit of {} operations failed: {e}", batch.len());
                shared.stats.failed(batch.len() as u64);
                for p in batch.drain(..) {
                    p.answer(Err(e.duplicate()));
                }
            }
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                let msg = format!("store writer stopped after a panic: {msg}");
                tracing::error!("{msg}");
                shared.stats.failed(batch.len() as u64);
                *shared.fatal.lock() = Some(msg.clone());
                for p in batch.drain(..) {
                    p.answer(Err(StoreError::Backend(msg.clone())));
                }
                // The database may be in any state: take no more writes.
                rx.close();
                while let Ok(p) = rx.try_recv() {
                    p.answer(Err(StoreError::Backend(msg.clone())));
                }
                return;
            }
        }
    }
}

/// Apply a batch in one write transaction and commit it durably.
fn apply(db: &Database, batch: &[Pending], quick_repair: bool) -> Result<Vec<Ack>, StoreError> {
    let r = |e: redb::StorageError| map_redb(e.into());
    let mut txn = db.begin_write().map_err(|e| map_redb(e.into()))?;
    txn.set_durability(Durability::Immediate).map_err(|e| StoreError::Backend(e.to_string()))?;
    txn.set_quick_repair(quick_repair);
    let mut acks = Vec::with_capacity(batch.len());
    {
        let mut handles = txn.open_table(HANDLES).map_err(|e| map_redb(e.into()))?;
        let mut meta = None;
        let mut doc_tables = None;
        for p in batch {
            match &p.op {
                Op::Swap { key, expect, new } => {
                    let key = key.as_slice();
                    let outcome = match expect {
                        RawExpect::Any => {
                            let previous = match new {
                                Some(v) => handles.insert(key, v.as_slice()).map_err(r)?.map(|g| g.value().to_vec()),
                                None => handles.remove(key).map_err(r)?.map(|g| g.value().to_vec()),
                            };
                            RawOutcome::Done { previous }
                        }
                        RawExpect::Absent | RawExpect::Present(_) => {
                            let conflict = {
                                let current = handles.get(key).map_err(r)?;
                                match (expect, current) {
                                    (RawExpect::Absent, None) => None,
                                    (RawExpect::Present(e), Some(c)) if c.value() == e.as_slice() => None,
                                    (_, c) => Some(c.map(|g| g.value().to_vec())),
                                }
                            };
                            match conflict {
                                Some(current) => RawOutcome::Conflict { current },
                                None => {
                                    match new {
                                        Some(v) => drop(handles.insert(key, v.as_slice()).map_err(r)?),
                                        None => drop(handles.remove(key).map_err(r)?),
                                    }
                                    match expect {
                                        RawExpect::Present(_) => RawOutcome::DoneAsExpected,
                                        _ => RawOutcome::Done { previous: None },
                                    }
                                }
                            }
                        }
                    };
                    acks.push(Ack::Swap(outcome));
                }
                Op::Meta { key, value } => {
                    if meta.is_none() {
                        meta = Some(txn.open_table(META).map_err(|e| map_redb(e.into()))?);
                    }
                    let t = meta.as_mut().expect("opened above");
                    match value {
                        Some(v) => drop(t.insert(key.as_str(), v.as_slice()).map_err(r)?),
                        None => drop(t.remove(key.as_str()).map_err(r)?),
                    }
                    acks.push(Ack::Unit);
                }
                Op::Import { records } => {
                    for (k, v) in records {
                        handles.insert(k.as_slice(), v.as_slice()).map_err(r)?;
                    }
                    acks.push(Ack::Unit);
                }
                Op::DocSwap(d) => {
                    if doc_tables.is_none() {
                        let t = txn.open_table(DOCS).map_err(|e| map_redb(e.into()))?;
                        let i = txn.open_table(DOC_INDEX).map_err(|e| map_redb(e.into()))?;
                        doc_tables = Some((t, i));
                    }
                    let (t, i) = doc_tables.as_mut().expect("opened above");
                    acks.push(Ack::Swap(docs::apply(t, i, d)?));
                }
            }
        }
    }
    txn.commit().map_err(|e| map_redb(e.into()))?;
    Ok(acks)
}

// ---------------------------------------------------------------------------------
// Open and errors

/// Both tables in one read transaction.
struct Snapshot {
    handles: ReadOnlyTable<&'static [u8], &'static [u8]>,
    meta: ReadOnlyTable<&'static str, &'static [u8]>,
    docs: ReadOnlyTable<&'static [u8], &'static [u8]>,
    doc_index: ReadOnlyTable<&'static [u8], ()>,
}

impl Snapshot {
    fn open(db: &Database) -> Result<Snapshot, StoreError> {
        let txn = db.begin_read().map_err(|e| map_redb(e.into()))?;
        Ok(Snapshot {
            handles: txn.open_table(HANDLES).map_err(|e| map_redb(e.into()))?,
            meta: txn.open_table(META).map_err(|e| map_redb(e.into()))?,
            docs: txn.open_table(DOCS).map_err(|e| map_redb(e.into()))?,
            doc_index: txn.open_table(DOC_INDEX).map_err(|e| map_redb(e.into()))?,
        })
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
        h || m || d || i
    };
    if missing {
        let txn = db.begin_write().map_err(|e| map_redb(e.into()))?;
        txn.open_table(HANDLES).map_err(|e| map_redb(e.into()))?;
        txn.open_table(META).map_err(|e| map_redb(e.into()))?;
        txn.open_table(DOCS).map_err(|e| map_redb(e.into()))?;
        txn.open_table(DOC_INDEX).map_err(|e| map_redb(e.into()))?;
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
        StoreError::Corrupt(m) => StoreError::Corrupt(format!("store {p}: {m}")),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(d: &str) -> Vec<u8> {
        HandleRecord::new(vec![handled_proto::HandleValue::new(1, "URL", d)]).encode()
    }

    fn swap(key: &[u8], expect: RawExpect, new: Option<Vec<u8>>) -> Pending {
        let (reply, _rx) = oneshot::channel();
        let op = Op::Swap { key: key.to_vec(), expect, new };
        Pending { bytes: op.bytes(), op, reply: Reply::Swap(reply) }
    }

    fn outcome(a: &Ack) -> &RawOutcome {
        match a {
            Ack::Swap(o) => o,
            Ack::Unit => panic!("unit ack"),
        }
    }

    /// Several operations on one key inside ONE transaction behave as if serialized
    /// in arrival order.
    #[test]
    fn same_key_ops_in_one_batch_are_serialized() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        ensure_tables(&db).unwrap();
        let k = b"20.5000/k";
        let batch = vec![
            swap(k, RawExpect::Absent, Some(rec("a"))),                 // Done
            swap(k, RawExpect::Absent, Some(rec("x"))),                 // Conflict(a)
            swap(k, RawExpect::Present(rec("a")), Some(rec("b"))),      // Done
            swap(k, RawExpect::Present(rec("a")), Some(rec("y"))),      // Conflict(b)
            swap(k, RawExpect::Any, None),                              // Done(prev b)
            swap(k, RawExpect::Present(rec("b")), Some(rec("z"))),      // Conflict(None)
            swap(k, RawExpect::Absent, Some(rec("c"))),                 // Done
        ];
        let acks = apply(&db, &batch, false).unwrap();
        assert!(matches!(outcome(&acks[0]), RawOutcome::Done { previous: None }));
        assert!(matches!(outcome(&acks[1]), RawOutcome::Conflict { current: Some(c) } if *c == rec("a")));
        assert!(matches!(outcome(&acks[2]), RawOutcome::DoneAsExpected));
        assert!(matches!(outcome(&acks[3]), RawOutcome::Conflict { current: Some(c) } if *c == rec("b")));
        assert!(matches!(outcome(&acks[4]), RawOutcome::Done { previous: Some(p) } if *p == rec("b")));
        assert!(matches!(outcome(&acks[5]), RawOutcome::Conflict { current: None }));
        assert!(matches!(outcome(&acks[6]), RawOutcome::Done { previous: None }));
        let txn = db.begin_read().unwrap();
        let t = txn.open_table(HANDLES).unwrap();
        assert_eq!(t.get(k.as_slice()).unwrap().unwrap().value(), rec("c").as_slice());
        assert_eq!(t.len().unwrap(), 1);
    }

    fn unit(key: &str) -> (Pending, oneshot::Receiver<Result<(), StoreError>>) {
        let (reply, rx) = oneshot::channel();
        let op = Op::Meta { key: key.into(), value: Some(vec![1]) };
        (Pending { bytes: op.bytes(), op, reply: Reply::Unit(reply) }, rx)
    }

    fn test_shared(db: &Database) -> Arc<Shared> {
        Arc::new(Shared {
            stats: StatCounters::default(),
            snapshot: ArcSwapOption::from_pointee(Snapshot::open(db).unwrap()),
            fatal: Mutex::new(None),
        })
    }

    /// A failed commit fails every operation of its batch, and only those.
    #[test]
    fn failed_commit_fails_the_whole_batch() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        ensure_tables(&db).unwrap();
        let db = Arc::new(db);
        let shared = test_shared(&db);
        let (tx, rx) = mpsc::channel(16);
        // Queue a batch before the writer starts, so it is drained as one.
        let mut answers = Vec::new();
        for k in ["a", "fail", "b"] {
            let (p, r) = unit(k);
            tx.blocking_send(p).unwrap();
            answers.push(r);
        }
        let writer = {
            let (db, shared) = (db.clone(), shared.clone());
            std::thread::spawn(move || {
                writer_loop(db, rx, shared, EmbeddedOptions::default(), |db, batch| {
                    let fail = batch.iter().any(|p| matches!(&p.op, Op::Meta { key, .. } if key == "fail"));
                    if fail {
                        Err(StoreError::Io(std::io::Error::other("disk on fire")))
                    } else {
                        apply(db, batch, false)
                    }
                })
            })
        };
        for r in answers {
            match r.blocking_recv().unwrap() {
                Err(StoreError::Io(e)) => assert!(e.to_string().contains("disk on fire")),
                other => panic!("{other:?}"),
            }
        }
        // The next batch is unaffected.
        let (p, r) = unit("c");
        tx.blocking_send(p).unwrap();
        r.blocking_recv().unwrap().unwrap();
        drop(tx);
        writer.join().unwrap();
        let st = shared.stats.snapshot();
        assert_eq!((st.failed_commits, st.failed_ops, st.commits, st.write_ops), (1, 3, 1, 1));
        // Nothing of the failed batch was written.
        let txn = db.begin_read().unwrap();
        let meta = txn.open_table(META).unwrap();
        assert!(meta.get("a").unwrap().is_none());
        assert!(meta.get("c").unwrap().is_some());
    }

    /// A panic in the writer fails its batch and stops the writer for good.
    #[test]
    fn writer_panic_stops_writes() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        ensure_tables(&db).unwrap();
        let db = Arc::new(db);
        let shared = test_shared(&db);
        let (tx, rx) = mpsc::channel(16);
        let (p1, r1) = unit("a");
        let (p2, r2) = unit("b");
        tx.blocking_send(p1).unwrap();
        tx.blocking_send(p2).unwrap();
        let writer = {
            let (db, shared) = (db.clone(), shared.clone());
            std::thread::spawn(move || {
                writer_loop(db, rx, shared, EmbeddedOptions::default(), |_, _| panic!("boom"))
            })
        };
        for r in [r1, r2] {
            match r.blocking_recv().unwrap() {
                Err(StoreError::Backend(m)) => assert!(m.contains("boom"), "{m}"),
                other => panic!("{other:?}"),
            }
        }
        writer.join().unwrap();
        assert!(shared.fatal.lock().as_deref().unwrap().contains("boom"));
        let (p3, _r3) = unit("c");
        assert!(tx.blocking_send(p3).is_err(), "the writer must take no more writes");
    }
}
