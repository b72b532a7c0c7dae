//! How the writer thread makes batches durable and visible, and checkpoints
//! without stopping writes.
//!
//! A batch is applied over the published [`View`] (so compare-and-set sees
//! every acknowledged write), its effects are appended to the log and synced,
//! and then either
//! * committed to redb without a sync (the usual case), or
//! * while a checkpoint runs, put in the view's overlay instead.
//!
//! Either way the new view is published before the batch is answered.
//!
//! A checkpoint (a durable redb commit, after which the log it covers can go)
//! is due every [`EmbeddedOptions::checkpoint_interval`] or
//! [`EmbeddedOptions::checkpoint_log_bytes`]. The writer rotates the log (new
//! records go to the other file) and hands the durable commit, then the
//! emptying of the retired log file, to a thread of its own: redb has one write
//! transaction at a time and writes the pages of unsynced commits only in the
//! next durable one, so that commit is the long part (tens of ms) and must not
//! be on the write path. Batches meanwhile go to the overlay (reads merge it
//! over the snapshot). When the checkpoint ends, the writer applies the overlay
//! in one unsynced commit and drops it. Should the overlay outgrow
//! [`MAX_OVERLAY_BYTES`], the writer waits for the checkpoint first
//! (backpressure). Every acknowledged batch is in a synced log record the
//! checkpoint does not cover until it is in redb, so a crash at any point loses
//! nothing: opening replays both log files after the last durable checkpoint.
//!
//! Imports and explicit checkpoints are durable commits on the writer itself,
//! as is the final one at shutdown.

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redb::{Database, Durability};

use super::space::DiskSpace;
use super::txnlog;
use super::view::{Tx, View};
use super::wal::{self, RawTables, RetiredLog, TableId, Wal};
use super::writer::{apply, Ack, Op, Pending};
use super::{map_redb, EmbeddedOptions, Shared, Snapshot};
use crate::StoreError;

/// Overlay size beyond which the writer waits for the running checkpoint.
pub(super) const MAX_OVERLAY_BYTES: usize = 64 << 20;

/// A checkpoint running on its own thread.
struct Running {
    thread: JoinHandle<Result<Timing, StoreError>>,
    retired: RetiredLog,
}

struct Timing {
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
    /// error: the file is reopened (its log replayed) before the next write.
    broken: Option<String>,
}

impl Committer {
    pub(super) fn new(wal: Wal, opts: EmbeddedOptions, space: DiskSpace, shared: Arc<Shared>, path: PathBuf) -> Self {
        let view = shared.snapshot.load_full();
        Committer { wal, opts, last_checkpoint: Instant::now(), space, shared, path, view, running: None, broken: None }
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
                    "store unusable after an I/O error ({e}; {}); it is reopened at the next write",
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
        let reopened = super::open_file(&self.path, &self.opts, &self.space)
            .and_then(|(db, wal, _)| Ok((View::new(Arc::new(Snapshot::open(&db)?)), db, wal)));
        match reopened {
            Ok((view, db, wal)) => {
                self.wal = wal;
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

    /// The view last published (a fresh snapshot if publishing failed).
    fn view(&mut self, db: &Database) -> Result<Arc<View>, StoreError> {
        if self.view.is_none() {
            self.publish(View::new(Arc::new(Snapshot::open(db)?)));
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

    /// Publish a fresh snapshot of `db` (everything is in it). Should that fail,
    /// reads (and the next batch) open their own.
    fn publish_snapshot(&mut self, db: &Database) {
        match Snapshot::open(db) {
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
        let overlay_full = self.view.as_ref().is_some_and(|v| v.overlay_bytes >= MAX_OVERLAY_BYTES);
        let finished = self.running.as_ref().is_some_and(|r| r.thread.is_finished());
        if forced || overlay_full || finished {
            self.finish_checkpoint(db)?;
        }
        let view = self.view(db)?;
        let mut tx = Tx::new(&view);
        let acks = apply(&mut tx, batch)?;
        if forced {
            self.commit_durably(db, &tx)?;
            return Ok((acks, true));
        }
        if tx.redo.is_empty() {
            return Ok((acks, false));
        }
        // On failure nothing was applied anywhere.
        self.wal.append(&tx.redo)?;
        if self.running.is_some() {
            let next = view.with(&tx.writes);
            self.publish(next);
            return Ok((acks, true));
        }
        let written = (|| {
            let mut txn = db.begin_write().map_err(|e| map_redb(e.into()))?;
            txn.set_durability(Durability::None).map_err(|e| StoreError::Backend(e.to_string()))?;
            write(&txn, tx.writes.iter().map(|(k, v)| (k.as_slice(), v.as_deref())))?;
            txn.commit().map_err(|e| map_redb(e.into()))
        })();
        if let Err(e) = written {
            let msg = format!(
                "store commit failed after its log record was written ({e}): restart the server to replay the log"
            );
            self.break_with(msg.clone());
            return Err(StoreError::Backend(msg));
        }
        self.publish_snapshot(db);
        let due = self.wal.len() >= self.opts.checkpoint_log_bytes
            || self.last_checkpoint.elapsed() >= self.opts.checkpoint_interval;
        if due {
            self.start_checkpoint(db);
        }
        Ok((acks, true))
    }

    /// Start a checkpoint of everything committed so far on its own thread.
    fn start_checkpoint(&mut self, db: &Arc<Database>) {
        self.last_checkpoint = Instant::now();
        let retired = match self.wal.rotate() {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("store checkpoint skipped: {e}");
                return;
            }
        };
        let (db, seq, quick_repair) = (db.clone(), retired.seq, self.opts.quick_repair);
        let log = retired.try_clone();
        let spawned = std::thread::Builder::new().name("store-checkpoint".into()).spawn(move || {
            #[cfg(test)]
            drop(TEST_CHECKPOINT_PAUSE.lock());
            let started = Instant::now();
            let mut txn = db.begin_write().map_err(|e| map_redb(e.into()))?;
            txn.set_durability(Durability::Immediate).map_err(|e| StoreError::Backend(e.to_string()))?;
            txn.set_two_phase_commit(true);
            txn.set_quick_repair(quick_repair);
            wal::set_checkpoint(&txn, seq)?;
            txn.commit().map_err(|e| map_redb(e.into()))?;
            let commit = started.elapsed();
            // Harmless if it fails: replay skips records a checkpoint covers, and
            // the writer empties the file before it takes appends again.
            let emptied = match log.and_then(|l| l.empty()) {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!("could not empty the store log after a checkpoint: {e}");
                    false
                }
            };
            Ok(Timing { commit, log_empty: started.elapsed() - commit, emptied })
        });
        match spawned {
            Ok(thread) => self.running = Some(Running { thread, retired }),
            Err(e) => tracing::warn!("store checkpoint skipped: could not start its thread: {e}"),
        }
    }

    /// Wait for the running checkpoint (if any) without applying its overlay
    /// (the file is being given up).
    fn wait_for_checkpoint(&mut self) {
        if let Some(r) = self.running.take() {
            let _ = r.thread.join();
        }
    }

    /// Wait for the running checkpoint, then move the overlay into redb (one
    /// unsynced commit; the log still holds it) and publish a plain snapshot.
    fn finish_checkpoint(&mut self, db: &Database) -> Result<(), StoreError> {
        let Some(r) = self.running.take() else { return Ok(()) };
        let result = r.thread.join().unwrap_or_else(|_| Err(StoreError::Backend("checkpoint thread panicked".into())));
        match result {
            Ok(t) => {
                self.wal.retired_done(&r.retired, t.emptied);
                // How long the checkpoint ran beside the writes (it no longer holds them up).
                tracing::debug!(
                    commit_us = t.commit.as_micros() as u64,
                    log_reset_us = t.log_empty.as_micros() as u64,
                    overlay_bytes = self.view.as_ref().map_or(0, |v| v.overlay_bytes),
                    "store checkpoint"
                );
            }
            Err(e) => {
                // Everything is still in the log (the retired file was not emptied).
                let msg = format!(
                    "store checkpoint failed ({e}; {}); the store is reopened (its log replayed) at the next write",
                    self.space.describe()
                );
                self.break_with(msg.clone());
                return Err(StoreError::Backend(msg));
            }
        }
        let view = self.view(db)?;
        if view.overlay.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        let folded = (|| {
            let mut txn = db.begin_write().map_err(|e| map_redb(e.into()))?;
            txn.set_durability(Durability::None).map_err(|e| StoreError::Backend(e.to_string()))?;
            write(&txn, view.overlay.iter().map(|(k, v)| (&k[..], v.as_deref())))?;
            txn.commit().map_err(|e| map_redb(e.into()))
        })();
        if let Err(e) = folded {
            let msg = format!("store commit of the writes logged during a checkpoint failed ({e}): the store is reopened (its log replayed) at the next write");
            self.break_with(msg.clone());
            return Err(StoreError::Backend(msg));
        }
        self.publish_snapshot(db);
        tracing::debug!(fold_us = started.elapsed().as_micros() as u64, "store overlay applied");
        Ok(())
    }

    /// A batch with an import or an explicit checkpoint: one durable commit of
    /// everything, and the log emptied.
    fn commit_durably(&mut self, db: &Database, tx: &Tx) -> Result<(), StoreError> {
        let mut txn = db.begin_write().map_err(|e| map_redb(e.into()))?;
        txn.set_durability(Durability::Immediate).map_err(|e| StoreError::Backend(e.to_string()))?;
        txn.set_two_phase_commit(true);
        txn.set_quick_repair(self.opts.quick_repair);
        write(&txn, tx.writes.iter().map(|(k, v)| (k.as_slice(), v.as_deref())))?;
        wal::set_checkpoint(&txn, self.wal.last_seq())?;
        txn.commit().map_err(|e| map_redb(e.into()))?;
        self.checkpointed();
        self.publish_snapshot(db);
        Ok(())
    }

    /// A durable commit of everything so far (on shutdown), emptying the log.
    pub(super) fn checkpoint(&mut self) -> Result<(), StoreError> {
        if self.broken.is_some() {
            self.wait_for_checkpoint();
            return Ok(());
        }
        let Some(db) = self.shared.db.lock().clone() else { return Ok(()) };
        self.finish_checkpoint(&db)?;
        let mut txn = db.begin_write().map_err(|e| map_redb(e.into()))?;
        txn.set_durability(Durability::Immediate).map_err(|e| StoreError::Backend(e.to_string()))?;
        txn.set_two_phase_commit(true);
        wal::set_checkpoint(&txn, self.wal.last_seq())?;
        txn.commit().map_err(|e| map_redb(e.into()))?;
        self.checkpointed();
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

/// Write `entries` (`table byte ‖ key` → value, `None`: remove) inside `txn`.
pub(super) fn write<'a>(
    txn: &redb::WriteTransaction,
    entries: impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)>,
) -> Result<(), StoreError> {
    let mut tables = RawTables::open(txn)?;
    for (k, v) in entries {
        let table = TableId::from_byte(k[0]).ok_or_else(|| StoreError::Backend("internal: unknown table".into()))?;
        tables.put(table, &k[1..], v).map_err(StoreError::Backend)?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "embedded_committer_tests.rs"]
mod tests;
