//! How the writer thread makes batches durable and visible, and how
//! checkpoints move them into redb without stopping writes.
//!
//! A batch is applied over the published [`View`] (so compare-and-set sees
//! every acknowledged write), its effects are appended to the log and synced,
//! and put in the view's active layer; the new view is published before the
//! batch is answered. The write path never touches redb: a redb commit rewrites
//! every B-tree page a batch touched, and the pages of unsynced commits are only
//! written at the next durable one, so the costly part is deferred anyway.
//!
//! A checkpoint (one durable redb commit, after which the log it covers can go)
//! is due every [`EmbeddedOptions::checkpoint_interval`], or when the log or the
//! active layer reach [`EmbeddedOptions::checkpoint_log_bytes`]. The writer
//! rotates the log (new records go to the other file), freezes the active layer
//! and hands it to a thread of its own, which writes it into redb in one durable
//! commit, opens a snapshot of the result, then empties the retired log file.
//! Meanwhile batches go to a fresh active layer. When the checkpoint is done the
//! writer publishes its snapshot with the frozen layer dropped (no copying).
//! Should the active layer reach [`MAX_ACTIVE_BYTES`] while a checkpoint still
//! runs, the writer waits for it (backpressure). Every acknowledged batch is in
//! a synced log record that no durable checkpoint covers until it is in redb, so
//! a crash at any point loses nothing: opening replays both log files after the
//! last durable checkpoint.
//!
//! Imports and explicit checkpoints are durable commits on the writer itself
//! (of the active layer and the batch), as is the final one at shutdown.

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redb::{Database, Durability};

use super::keydir::{self, KeyDir, Staged};
use super::space::DiskSpace;
use super::tx::{RawTables, Tx};
use super::txnlog;
use super::view::{Layer, View};
use super::wal::{self, RetiredLog, TableId, Wal};
use super::writer::{apply, Ack, Commit, Op, Pending};
use super::{map_redb, EmbeddedOptions, Shared, Snapshot};
use crate::StoreError;

/// Active-layer size beyond which the writer waits for the running checkpoint.
pub(super) const MAX_ACTIVE_BYTES: usize = 64 << 20;

/// A checkpoint running on its own thread.
struct Running {
    thread: JoinHandle<Result<Checkpointed, StoreError>>,
    retired: RetiredLog,
    /// Log bytes the checkpoint covers.
    log_bytes: u64,
}

/// What a background checkpoint left: a snapshot with the frozen layer in it
/// (`None` if opening it failed) and how long its parts took.
struct Checkpointed {
    snap: Option<Arc<Snapshot>>,
    entries: usize,
    commit: Duration,
    log_empty: Duration,
    emptied: bool,
}

#[cfg(test)]
/// Held by a test to keep background checkpoints from starting their commit.
pub(super) static TEST_CHECKPOINT_PAUSE: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// Commits batches: see the module documentation.
pub(super) struct Committer {
    wal: Wal,
    opts: EmbeddedOptions,
    last_checkpoint: Instant,
    space: DiskSpace,
    /// The database (`shared.db`); `shared.fatal` says why writes are refused
    /// while the file is broken.
    shared: Arc<Shared>,
    path: PathBuf,
    /// What batches are applied over: the view last published.
    view: Option<Arc<View>>,
    running: Option<Running>,
    /// Set when the store file and the log may disagree, or redb latched an I/O
    /// error: the file is reopened (its log replayed) before the next write, or
    /// by the idle writer once space is back.
    broken: Option<String>,
    /// When the idle writer next tries to reopen a broken file, and how long it
    /// waits after a reopen that failed.
    reopen_at: Instant,
    reopen_backoff: Duration,
}

impl Committer {
    pub(super) fn new(wal: Wal, opts: EmbeddedOptions, space: DiskSpace, shared: Arc<Shared>, path: PathBuf) -> Self {
        let view = shared.snapshot.load_full();
        Committer {
            wal,
            opts,
            last_checkpoint: Instant::now(),
            space,
            shared,
            path,
            view,
            running: None,
            broken: None,
            reopen_at: Instant::now(),
            reopen_backoff: REOPEN_POLL,
        }
    }

    /// Apply and commit one batch; durable and visible when it returns `Ok`. The
    /// flag tells whether the disk was synced (false when the batch changed
    /// nothing). Refused while the disk is (nearly) full.
    pub(super) fn commit(&mut self, batch: &[Pending]) -> Result<(Vec<Ack>, bool), StoreError> {
        if self.broken.is_some() {
            self.reopen()?;
        }
        self.space.check()?;
        let db = self.shared.db.lock().clone().ok_or(StoreError::Closed)?;
        let result = self.commit_batch(&db, batch);
        if let Err(e) = &result {
            // redb latches an I/O error (e.g. a full disk despite the reserve):
            // every later transaction fails until the file is reopened.
            if self.broken.is_none() && self.running.is_none() && db.begin_write().is_err() {
                self.break_with(format!(
                    "store unusable after an I/O error ({e}; {}); it is reopened once space allows",
                    self.space.describe()
                ));
            }
        }
        result
    }

    fn break_with(&mut self, msg: String) {
        tracing::error!("{msg}");
        *self.shared.fatal.lock() = Some(msg.clone());
        self.broken = Some(msg);
        self.reopen_at = Instant::now();
        self.reopen_backoff = REOPEN_POLL;
    }

    /// Reopen a broken file without waiting for a write, so readiness comes back
    /// with the space: tried once the filesystem has room for the replay (about
    /// twice the log) and a margin, then less often while reopening fails.
    fn reopen_when_space_returns(&mut self) {
        let now = Instant::now();
        if now < self.reopen_at {
            return;
        }
        let replay = 2 * Wal::bytes_on_disk(&self.path);
        if !self.space.has_room_for(replay.saturating_add(REOPEN_MARGIN)) {
            self.reopen_at = now + REOPEN_POLL;
            return;
        }
        if let Err(e) = self.reopen() {
            self.reopen_backoff = (self.reopen_backoff * 2).min(MAX_REOPEN_BACKOFF);
            self.reopen_at = now + self.reopen_backoff;
            tracing::warn!("{e}; tried again in {:?}", self.reopen_backoff);
        }
    }

    /// Reopen a broken file once space is back: release it, open it again
    /// (replaying the log) and take writes again. Fails, and is tried again at the
    /// next write, while space is short or a reader still holds the old file;
    /// reads fail with the reason from the release until the reopen succeeds.
    fn reopen(&mut self) -> Result<(), StoreError> {
        let broken = self.broken.clone().unwrap_or_default();
        // Reads go on from the old file until space is back.
        self.space.check().map_err(|e| StoreError::Backend(format!("{broken}; not reopened yet: {e}")))?;
        self.wait_for_checkpoint();
        self.view = None;
        self.shared.snapshot.store(None);
        self.shared.db.lock().take();
        let reopened = super::open_file(&self.path, &self.opts, &self.space).and_then(|(db, wal, _, keydir)| {
            Ok((View::new(Arc::new(Snapshot::open(&db, keydir.as_ref())?)), db, wal, keydir))
        });
        match reopened {
            Ok((view, db, wal, keydir)) => {
                self.wal = wal;
                self.shared.keydir.store(keydir);
                self.last_checkpoint = Instant::now();
                *self.shared.db.lock() = Some(Arc::new(db));
                self.publish(view);
                *self.shared.fatal.lock() = None;
                self.broken = None;
                tracing::warn!(path = %self.path.display(), "store reopened after an I/O error; writes resume");
                Ok(())
            }
            Err(e) => Err(StoreError::Backend(format!("{broken}; reopening failed: {e}"))),
        }
    }

    /// The view last published (a fresh snapshot if there is none: everything
    /// is in redb then, see [`Self::publish_snapshot`]).
    fn view(&mut self, db: &Database) -> Result<Arc<View>, StoreError> {
        if self.view.is_none() {
            let keydir = self.shared.keydir.load_full();
            self.publish(View::new(Arc::new(Snapshot::open(db, keydir.as_ref())?)));
        }
        self.view.clone().ok_or(StoreError::Closed)
    }

    /// Make `view` what reads (and the next batch) see, then tell log subscribers.
    fn publish(&mut self, view: View) {
        let last = txnlog::last(&view);
        let view = Arc::new(view);
        self.shared.snapshot.store(Some(view.clone()));
        self.view = Some(view);
        match last {
            Ok(last) => self.shared.txn_notifier.publish(last),
            Err(e) => tracing::warn!("could not read the transaction log state: {e}"),
        }
    }

    /// After a durable commit of everything on the writer: publish a fresh
    /// snapshot of `db` with no layers. Should that fail, reads (and the next
    /// batch) open their own.
    fn publish_snapshot(&mut self, db: &Database) {
        match Snapshot::open(db, self.shared.keydir.load_full().as_ref()) {
            Ok(snap) => self.publish(View::new(Arc::new(snap))),
            Err(e) => {
                tracing::warn!("could not open a read snapshot after a commit: {e}");
                self.shared.snapshot.store(None);
                self.view = None;
            }
        }
    }

    fn commit_batch(&mut self, db: &Arc<Database>, batch: &[Pending]) -> Result<(Vec<Ack>, bool), StoreError> {
        // Imports are not logged (the log would double their I/O): they checkpoint.
        let forced = batch.iter().any(|p| match &p.op {
            Op::Import { .. } => true,
            Op::TxnLog(l) => l.is_checkpoint(),
            _ => false,
        });
        let active_full = self.view.as_ref().is_some_and(|v| v.active_bytes >= MAX_ACTIVE_BYTES);
        let finished = self.running.as_ref().is_some_and(|r| r.thread.is_finished());
        if forced || active_full || finished {
            self.finish_checkpoint(db)?;
        }
        let view = self.view(db)?;
        if forced {
            return Ok((self.commit_direct(db, &view, batch)?, true));
        }
        let mut tx = Tx::logged(&view);
        let acks = apply(&mut tx, batch)?;
        let (writes, redo) = tx.into_logged();
        if redo.is_empty() {
            return Ok((acks, false));
        }
        // On failure nothing was applied anywhere.
        self.wal.append(&redo)?;
        let next = view.with(&writes);
        let due = self.running.is_none()
            // The log file holds every batch of the active layer, so its size bounds the layer's.
            && (next.active_bytes >= MAX_ACTIVE_BYTES
                || self.wal.len() >= self.opts.checkpoint_log_bytes
                || self.last_checkpoint.elapsed() >= self.opts.checkpoint_interval);
        self.publish(next);
        if due {
            self.start_checkpoint(db);
        }
        Ok((acks, true))
    }

    /// Freeze the active layer and start a checkpoint writing it on its own
    /// thread; should that not start, checkpoint on the writer instead (the log
    /// and the active layer must not grow without bound).
    fn start_checkpoint(&mut self, db: &Arc<Database>) {
        self.last_checkpoint = Instant::now();
        if let Err(e) = self.spawn_checkpoint(db) {
            tracing::warn!("store checkpoint could not start beside the writes ({e}); made on the writer");
            if let Err(e) = self.checkpoint() {
                self.break_with(format!(
                    "store checkpoint failed ({e}; {}); the store is reopened (its log replayed) once space allows",
                    self.space.describe()
                ));
            }
        }
    }

    fn spawn_checkpoint(&mut self, db: &Arc<Database>) -> Result<(), StoreError> {
        let view = self.view(db)?;
        let log_bytes = self.wal.len();
        let retired = self.wal.rotate()?;
        let frozen = view.freeze();
        let (db, layer, seq, quick_repair) = (db.clone(), frozen.frozen.clone(), retired.seq, self.opts.quick_repair);
        let log = retired.try_clone();
        let keydir = self.shared.keydir.load_full();
        let thread = std::thread::Builder::new()
            .name("store-checkpoint".into())
            .spawn(move || checkpoint_layer(&db, &layer, seq, quick_repair, keydir.as_ref(), log))?;
        self.running = Some(Running { thread, retired, log_bytes });
        self.publish(frozen);
        Ok(())
    }

    /// Wait for the running checkpoint (if any) without publishing its
    /// snapshot (the file is being given up).
    fn wait_for_checkpoint(&mut self) {
        if let Some(r) = self.running.take() {
            let _ = r.thread.join();
        }
    }

    /// Wait for the running checkpoint, then publish its snapshot with the
    /// frozen layer dropped.
    fn finish_checkpoint(&mut self, db: &Database) -> Result<(), StoreError> {
        let Some(r) = self.running.take() else { return Ok(()) };
        let result = r.thread.join().unwrap_or_else(|_| Err(StoreError::Backend("checkpoint thread panicked".into())));
        let done = match result {
            Ok(done) => done,
            Err(e) => {
                // Everything is still in the log (the retired file was not emptied).
                let msg = format!(
                    "store checkpoint failed ({e}; {}); the store is reopened (its log replayed) once space allows",
                    self.space.describe()
                );
                self.break_with(msg.clone());
                return Err(StoreError::Backend(msg));
            }
        };
        self.wal.retired_done(&r.retired, done.emptied);
        // How long the checkpoint ran beside the writes (it holds none of them up).
        tracing::debug!(
            entries = done.entries,
            log_bytes = r.log_bytes,
            commit_us = done.commit.as_micros() as u64,
            log_reset_us = done.log_empty.as_micros() as u64,
            "store checkpoint"
        );
        let keydir = self.shared.keydir.load_full();
        let snap = match done.snap.map_or_else(|| Snapshot::open(db, keydir.as_ref()).map(Arc::new), Ok) {
            Ok(snap) => snap,
            Err(e) => {
                // The view must not lose its active layer nor keep a frozen one
                // over a snapshot without it: start over from the log.
                let msg = format!("could not open a read snapshot after a checkpoint ({e}): the store is reopened (its log replayed) once space allows");
                self.break_with(msg.clone());
                return Err(StoreError::Backend(msg));
            }
        };
        let view = self.view(db)?;
        self.publish(view.thawed(snap));
        Ok(())
    }

    /// A batch with an import or an explicit checkpoint: applied straight into
    /// one durable commit with the active layer (not logged), and the log emptied.
    fn commit_direct(&mut self, db: &Database, view: &View, batch: &[Pending]) -> Result<Vec<Ack>, StoreError> {
        let keydir = self.shared.keydir.load_full();
        let mut acks = Vec::new();
        let (seq, quick_repair) = (self.wal.last_seq(), self.opts.quick_repair);
        let (gen, staged) = durable_commit(db, quick_repair, seq, keydir.is_some(), |txn| {
            let mut tx = Tx::direct(txn, keydir.as_ref().map(|k| k.resolver()))?;
            // The layer first: the batch's later entries of a key win.
            for (k, v) in layer_entries(&view.active) {
                tx.put(table_of(k)?, &k[1..], v)?;
            }
            acks = apply(&mut tx, batch)?;
            let written = tx.into_handles()?;
            let staged = stage_handles(keydir.as_deref(), written.iter().map(|(k, v)| (k.as_slice(), v.as_deref())))?;
            keydir::write_locations(txn, staged.as_ref())?;
            Ok(staged)
        })?;
        self.install(keydir.as_deref(), staged, gen)?;
        self.checkpointed();
        self.publish_snapshot(db);
        Ok(acks)
    }

    /// Point the key directory at what a durable commit just recorded; if it
    /// cannot be, the store is reopened (reads keep the view before the commit,
    /// which still has every layer).
    fn install(&mut self, keydir: Option<&KeyDir>, staged: Option<Staged>, gen: u64) -> Result<(), StoreError> {
        let Some(k) = keydir else { return Ok(()) };
        k.set_generation(gen);
        let Some(s) = staged else { return Ok(()) };
        k.install(s).inspect_err(|e| {
            self.break_with(format!(
                "the key directory could not take a checkpoint ({e}); the store is reopened (its log replayed)"
            ))
        })
    }

    /// A durable commit of everything so far (on shutdown), emptying the log.
    pub(super) fn checkpoint(&mut self) -> Result<(), StoreError> {
        if self.broken.is_some() {
            self.wait_for_checkpoint();
            return Ok(());
        }
        let Some(db) = self.shared.db.lock().clone() else { return Ok(()) };
        self.finish_checkpoint(&db)?;
        let active = self.view.as_ref().map(|v| v.active.clone()).unwrap_or_default();
        let keydir = self.shared.keydir.load_full();
        let staged = stage_handles(keydir.as_deref(), layer_handles(&active))?;
        let (gen, staged) =
            durable_commit(&db, self.opts.quick_repair, self.wal.last_seq(), keydir.is_some(), |txn| {
                write(txn, layer_entries(&active), keydir.is_some())?;
                keydir::write_locations(txn, staged.as_ref())?;
                Ok(staged)
            })?;
        self.install(keydir.as_deref(), staged, gen)?;
        self.checkpointed();
        self.publish_snapshot(&db);
        Ok(())
    }

    fn checkpointed(&mut self) {
        self.last_checkpoint = Instant::now();
        // Harmless if it fails: replay skips records a checkpoint covers.
        if let Err(e) = self.wal.reset() {
            tracing::warn!("could not empty the store log after a checkpoint: {e}");
        }
    }
}

/// A background checkpoint: `layer` into redb in one durable commit that
/// records log sequence `seq` as covered, a snapshot of the result, then the
/// retired log file emptied.
fn checkpoint_layer(
    db: &Database,
    layer: &Layer,
    seq: u64,
    quick_repair: bool,
    keydir: Option<&Arc<KeyDir>>,
    log: std::io::Result<RetiredLog>,
) -> Result<Checkpointed, StoreError> {
    #[cfg(test)]
    drop(TEST_CHECKPOINT_PAUSE.lock());
    let started = Instant::now();
    // The key directory's records are synced before the commit that counts them,
    // and pointed at after it, before the writer drops the frozen layer.
    let staged = stage_handles(keydir.map(|k| &**k), layer_handles(layer))?;
    let (gen, staged) = durable_commit(db, quick_repair, seq, keydir.is_some(), |txn| {
        write(txn, layer_entries(layer), keydir.is_some())?;
        keydir::write_locations(txn, staged.as_ref())?;
        Ok(staged)
    })?;
    if let Some(k) = keydir {
        k.set_generation(gen);
        if let Some(s) = staged {
            k.install(s)?;
        }
    }
    let snap = match Snapshot::open(db, keydir) {
        Ok(s) => Some(Arc::new(s)),
        Err(e) => {
            tracing::warn!("could not open a read snapshot after a checkpoint: {e}");
            None
        }
    };
    let commit = started.elapsed();
    // Harmless if it fails: replay skips records a checkpoint covers, and the
    // writer empties the file before it takes appends again.
    let emptied = match log.and_then(|l| l.empty()) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!("could not empty the store log after a checkpoint: {e}");
            false
        }
    };
    Ok(Checkpointed { snap, entries: layer.len(), commit, log_empty: started.elapsed() - commit, emptied })
}

/// How long an idle writer waits before looking whether the running checkpoint
/// has finished.
const IDLE_POLL: Duration = Duration::from_millis(20);

/// How often a broken store looks whether space is back (one `statvfs`).
const REOPEN_POLL: Duration = Duration::from_millis(100);

/// The longest wait between reopens that fail with space free.
const MAX_REOPEN_BACKOFF: Duration = Duration::from_secs(10);

/// Free space, beyond what the replay needs, before the idle writer reopens.
const REOPEN_MARGIN: u64 = 1 << 20;

impl Commit for Committer {
    fn commit(&mut self, batch: &[Pending]) -> Result<(Vec<Ack>, bool), StoreError> {
        Committer::commit(self, batch)
    }

    /// While batches are not all in the store file: when the running
    /// checkpoint may be done, or when the active layer is due; while the file
    /// is broken, when the next reopen is due.
    fn idle_wait(&self) -> Option<Duration> {
        if self.broken.is_some() {
            return Some(self.reopen_at.saturating_duration_since(Instant::now()));
        }
        if self.running.is_some() {
            return Some(IDLE_POLL);
        }
        let pending = self.view.as_ref().is_some_and(|v| !v.active.is_empty());
        pending.then(|| self.opts.checkpoint_interval.saturating_sub(self.last_checkpoint.elapsed()))
    }

    /// Finish a finished checkpoint, and checkpoint what came since once it is
    /// due: an idle store has everything in its file, and its log empty, within
    /// a checkpoint interval of the last write. A broken file is reopened.
    fn idle(&mut self) {
        if self.broken.is_some() {
            return self.reopen_when_space_returns();
        }
        let Some(db) = self.shared.db.lock().clone() else { return };
        if self.running.as_ref().is_some_and(|r| r.thread.is_finished()) {
            // A failure is reported, and marks the store for a reopen.
            let _ = self.finish_checkpoint(&db);
        }
        let due = self.last_checkpoint.elapsed() >= self.opts.checkpoint_interval;
        let pending = self.view.as_ref().is_some_and(|v| !v.active.is_empty());
        if self.broken.is_none() && self.running.is_none() && pending && due {
            self.start_checkpoint(&db);
        }
    }
}

/// One durable redb commit of what `fill` writes, recording log sequence
/// `seq` as covered (a checkpoint), and with a key directory (`keyed`) what
/// `fill` staged in it (its records are synced before the commit that counts
/// them) and the checkpoint generation it now matches. Returns that
/// generation and what was staged.
fn durable_commit(
    db: &Database,
    quick_repair: bool,
    seq: u64,
    keyed: bool,
    fill: impl FnOnce(&redb::WriteTransaction) -> Result<Option<Staged>, StoreError>,
) -> Result<(u64, Option<Staged>), StoreError> {
    let mut txn = db.begin_write().map_err(|e| map_redb(e.into()))?;
    txn.set_durability(Durability::Immediate).map_err(|e| StoreError::Backend(e.to_string()))?;
    txn.set_two_phase_commit(true);
    txn.set_quick_repair(quick_repair);
    let staged = fill(&txn)?;
    let gen = wal::set_checkpoint(&txn, seq)?;
    if keyed {
        keydir::record(&txn, staged.as_ref(), gen)?;
    }
    txn.commit().map_err(|e| map_redb(e.into()))?;
    Ok((gen, staged))
}

/// Append handle entries (key → value) to the key directory, if there is one,
/// and sync them.
fn stage_handles<'a>(
    keydir: Option<&KeyDir>,
    handles: impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)>,
) -> Result<Option<Staged>, StoreError> {
    keydir.map_or(Ok(None), |k| k.stage(handles))
}

fn layer_entries(layer: &Layer) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
    layer.iter().map(|(k, v)| (&k[..], v.as_deref()))
}

/// The handle entries of `layer` (key → value).
fn layer_handles(layer: &Layer) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
    let handles = TableId::Handles as u8;
    layer_entries(layer).filter(move |(key, _)| key.first() == Some(&handles)).map(|(key, v)| (&key[1..], v))
}

/// Write `entries` (`table byte ‖ key` → value, `None`: remove) inside `txn`;
/// `keyed`: not the handle entries, which the key directory's locations stand
/// for (`keydir::write_locations`).
fn write<'a>(
    txn: &redb::WriteTransaction,
    entries: impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    keyed: bool,
) -> Result<(), StoreError> {
    let mut tables = RawTables::open(txn)?;
    for (k, v) in entries {
        let table = table_of(k)?;
        if !(keyed && table == TableId::Handles) {
            tables.put(table, &k[1..], v).map_err(StoreError::Backend)?;
        }
    }
    Ok(())
}

/// The table of a layer's entry (`table byte ‖ key`).
fn table_of(entry_key: &[u8]) -> Result<TableId, StoreError> {
    entry_key
        .first()
        .and_then(|&b| TableId::from_byte(b))
        .ok_or_else(|| StoreError::Backend("internal: unknown table".into()))
}

#[cfg(test)]
#[path = "embedded_committer_tests.rs"]
mod tests;
