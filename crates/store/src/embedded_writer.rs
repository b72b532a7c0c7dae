//! The embedded store's single writer thread: group commit.
//!
//! Callers queue [`Pending`] operations; the thread takes the first, drains
//! whatever else is already queued (up to the batch limits), applies the batch
//! in arrival order over the published view, makes it durable and visible
//! (`embedded_committer.rs`), and only then answers every operation of the batch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::docs::{self, DocOp};
use super::format;
use super::tx::Tx;
use super::txnlog::{self, LogOp, LogTables};
use super::wal::TableId;
use super::{EmbeddedOptions, Shared};
use crate::cas::Precondition;
use crate::{HandleRecord, StoreError, TxnAction};

pub(super) enum RawExpect {
    Absent,
    Present(Vec<u8>),
    Any,
}

impl RawExpect {
    /// Whether the stored bytes `current` meet this ([`crate::cas::holds`]).
    pub(super) fn holds(&self, current: Option<&[u8]>) -> bool {
        crate::cas::holds(self.precondition(), current, |e, c| e == c)
    }

    /// [`Self::holds`] for a handle record, which may be stored in the form written
    /// before the compact one (`record.rs`): equal bytes, or the same record.
    fn holds_record(&self, current: Option<&[u8]>) -> bool {
        crate::cas::holds(self.precondition(), current, |e, c| e == c || HandleRecord::same_in_other_forms(e, c))
    }

    fn precondition(&self) -> Precondition<'_, [u8]> {
        match self {
            RawExpect::Absent => Precondition::Absent,
            RawExpect::Present(e) => Precondition::Present(e.as_slice()),
            RawExpect::Any => Precondition::Any,
        }
    }
}

pub(super) enum RawOutcome {
    /// `Expect::Present` held: the previous record is the expected one.
    DoneAsExpected,
    Done {
        previous: Option<Vec<u8>>,
    },
    Conflict {
        current: Option<Vec<u8>>,
    },
    /// The current record fails its checksum: only an unconditional write may replace it.
    Damaged(StoreError),
}

pub(super) enum Op {
    /// A handle swap; `docs` are written with it when it is done.
    Swap {
        key: Vec<u8>,
        expect: RawExpect,
        new: Option<Vec<u8>>,
        docs: Vec<DocOp>,
    },
    Meta {
        key: String,
        value: Option<Vec<u8>>,
    },
    Import {
        records: Vec<(Vec<u8>, Vec<u8>)>,
        docs: Vec<DocOp>,
    },
    /// A document swap: stored document key, the index-entry keys of the new
    /// state, the id (to rebuild the old state's entry keys) and the collection.
    DocSwap(docs::DocOp),
    /// Transaction-log maintenance, replicated changes, checkpoints.
    TxnLog(LogOp),
}

impl Op {
    pub(super) fn bytes(&self) -> usize {
        match self {
            Op::Swap { key, expect, new, docs } => {
                key.len()
                    + new.as_ref().map_or(0, Vec::len)
                    + if let RawExpect::Present(e) = expect { e.len() } else { 0 }
                    + docs.iter().map(DocOp::bytes).sum::<usize>()
            }
            Op::Meta { key, value } => key.len() + value.as_ref().map_or(0, Vec::len),
            Op::Import { records, docs } => {
                records.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
                    + docs.iter().map(DocOp::bytes).sum::<usize>()
            }
            Op::DocSwap(d) => d.bytes(),
            Op::TxnLog(l) => l.bytes(),
        }
    }
}

pub(super) enum Reply {
    Swap(oneshot::Sender<Result<RawOutcome, StoreError>>),
    Unit(oneshot::Sender<Result<(), StoreError>>),
    Count(oneshot::Sender<Result<u64, StoreError>>),
}

pub(super) enum Ack {
    Swap(RawOutcome),
    Unit,
    Count(u64),
}

pub(super) struct Pending {
    pub(super) op: Op,
    pub(super) bytes: usize,
    pub(super) reply: Reply,
}

impl Pending {
    fn answer(self, result: Result<Ack, StoreError>) {
        // A caller that went away no longer needs its answer: ignore send errors.
        let wrong = || StoreError::Backend("internal: wrong reply".into());
        match (self.reply, result) {
            (Reply::Swap(r), Ok(Ack::Swap(o))) => drop(r.send(Ok(o))),
            (Reply::Unit(r), Ok(Ack::Unit)) => drop(r.send(Ok(()))),
            (Reply::Count(r), Ok(Ack::Count(n))) => drop(r.send(Ok(n))),
            (Reply::Swap(r), Err(e)) => drop(r.send(Err(e))),
            (Reply::Unit(r), Err(e)) => drop(r.send(Err(e))),
            (Reply::Count(r), Err(e)) => drop(r.send(Err(e))),
            (Reply::Swap(r), Ok(_)) => drop(r.send(Err(wrong()))),
            (Reply::Unit(r), Ok(_)) => drop(r.send(Err(wrong()))),
            (Reply::Count(r), Ok(_)) => drop(r.send(Err(wrong()))),
        }
    }
}

/// What the writer thread drives: see [`writer_loop`].
pub(super) trait Commit {
    /// Apply and commit one batch: durable, and visible to reads, when it
    /// returns; true if the disk was synced.
    fn commit(&mut self, batch: &[Pending]) -> Result<(Vec<Ack>, bool), StoreError>;

    /// How long the writer may wait for a batch before [`Commit::idle`] has
    /// work to do (None: as long as it takes).
    fn idle_wait(&self) -> Option<Duration> {
        None
    }

    /// No batch came within [`Commit::idle_wait`].
    fn idle(&mut self) {}
}

/// Tests commit with a plain function, which never has idle work.
impl<F: FnMut(&[Pending]) -> Result<(Vec<Ack>, bool), StoreError>> Commit for F {
    fn commit(&mut self, batch: &[Pending]) -> Result<(Vec<Ack>, bool), StoreError> {
        self(batch)
    }
}

/// Take batches off the queue, `commit` each, then answer; between batches,
/// give `commit` its idle work when it asks for it. `commit` is a parameter
/// so tests can make it fail.
pub(super) fn writer_loop(
    mut rx: mpsc::Receiver<Pending>,
    shared: Arc<Shared>,
    opts: EmbeddedOptions,
    commit: &mut impl Commit,
) {
    let max_ops = opts.max_batch_ops.max(1);
    let mut batch: Vec<Pending> = Vec::with_capacity(max_ops);
    // Only for waiting on the queue with a timeout.
    let timer = tokio::runtime::Builder::new_current_thread().enable_time().build();
    loop {
        let first = match (commit.idle_wait(), &timer) {
            (Some(wait), Ok(timer)) => match timer.block_on(async { tokio::time::timeout(wait, rx.recv()).await }) {
                Ok(first) => first,
                Err(_) => {
                    commit.idle();
                    continue;
                }
            },
            _ => rx.blocking_recv(),
        };
        let Some(first) = first else { break };
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
            batch.iter().map(|p| if let Op::Import { records, .. } = &p.op { records.len() as u64 } else { 0 }).sum();

        let started = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| commit.commit(&batch)));
        match result {
            Ok(Ok((acks, synced))) => {
                shared.stats.committed(ops, imported, synced, started.elapsed().as_micros() as u64);
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

/// Apply a batch to `tx`, in arrival order.
pub(super) fn apply(tx: &mut Tx, batch: &[Pending]) -> Result<Vec<Ack>, StoreError> {
    let mut acks = Vec::with_capacity(batch.len());
    // The transaction log's counters, read by the first change to log.
    let mut log: Option<LogTables> = None;
    let mut names = docs::BatchNames::default();
    for p in batch {
        match &p.op {
            Op::Swap { key, expect, new, docs: doc_ops } => {
                let key = key.as_slice();
                let mut existed = false;
                let current = match tx.get(TableId::Handles, key)? {
                    None => None,
                    Some(v) => match format::unseal("handle", key, &v) {
                        Ok(c) => {
                            existed = true;
                            Some(c.to_vec())
                        }
                        // Overwriting (or deleting) a damaged record is how it is repaired.
                        Err(_) if matches!(expect, RawExpect::Any) => {
                            existed = true;
                            None
                        }
                        Err(e) => {
                            acks.push(Ack::Swap(RawOutcome::Damaged(e)));
                            continue;
                        }
                    },
                };
                if !expect.holds_record(current.as_deref()) {
                    acks.push(Ack::Swap(RawOutcome::Conflict { current }));
                    continue;
                }
                let sealed = new.as_deref().map(|v| format::seal(key, v));
                tx.put(TableId::Handles, key, sealed.as_deref())?;
                if let Some(action) = TxnAction::of_handle_write(existed, new.is_some()) {
                    LogTables::open_in(&mut log, tx)?.append(tx, action, key)?;
                }
                for d in doc_ops {
                    docs::apply_riding(tx, d, current.as_deref(), &mut names)?;
                }
                acks.push(Ack::Swap(match expect {
                    RawExpect::Present(_) => RawOutcome::DoneAsExpected,
                    _ => RawOutcome::Done { previous: current },
                }));
            }
            Op::Meta { key, value } => {
                let existed =
                    key.starts_with(crate::HOMED_META_PREFIX) && tx.get(TableId::Meta, key.as_bytes())?.is_some();
                if let Some((action, handle)) = TxnAction::of_meta_write(key, existed, value.is_some()) {
                    LogTables::open_in(&mut log, tx)?.append(tx, action, &handle)?;
                }
                let sealed = value.as_deref().map(|v| format::seal(key.as_bytes(), v));
                tx.put(TableId::Meta, key.as_bytes(), sealed.as_deref())?;
                acks.push(Ack::Unit);
            }
            Op::Import { records, docs: doc_ops } => {
                // Not in the write-ahead log: a batch with an import is a checkpoint.
                let mut riding = docs::Riding::new(doc_ops);
                let mut changes = Vec::with_capacity(records.len());
                for (k, v) in records {
                    let replaced = tx.get(TableId::Handles, k)?;
                    riding.written(tx, k, replaced.as_deref())?;
                    tx.put(TableId::Handles, k, Some(&format::seal(k, v)))?;
                    let action = if replaced.is_some() { TxnAction::Update } else { TxnAction::Create };
                    changes.push((action, k.as_slice()));
                }
                LogTables::open_in(&mut log, tx)?.append_imported(tx, &changes)?;
                riding.finish(tx)?;
                acks.push(Ack::Unit);
            }
            Op::DocSwap(d) => acks.push(Ack::Swap(docs::apply(tx, d, &mut names)?)),
            Op::TxnLog(op) => {
                let l = LogTables::open_in(&mut log, tx)?;
                acks.push(txnlog::apply(op, tx, l)?);
            }
        }
    }
    if let Some(l) = log {
        l.finish(tx)?;
    }
    Ok(acks)
}

#[cfg(test)]
mod tests {
    use super::super::view::View;
    use super::super::{ensure_tables, Snapshot, HANDLES, META};
    use super::*;
    use crate::HandleRecord;
    use crate::StatCounters;
    use arc_swap::ArcSwapOption;
    use parking_lot::Mutex;
    use redb::Database;
    use redb::{ReadableDatabase, ReadableTableMetadata};

    /// One durable commit, no log (the log has tests of its own).
    fn commit_durably(db: &Database, batch: &[Pending]) -> Result<(Vec<Ack>, bool), StoreError> {
        let txn = db.begin_write().unwrap();
        let mut tx = Tx::direct(&txn, None)?;
        let acks = apply(&mut tx, batch)?;
        tx.into_handles()?;
        txn.commit().unwrap();
        Ok((acks, true))
    }

    fn rec(d: &str) -> Vec<u8> {
        HandleRecord::new(vec![handled_proto::HandleValue::new(1, "URL", d)]).encode()
    }

    fn swap(key: &[u8], expect: RawExpect, new: Option<Vec<u8>>) -> Pending {
        let (reply, _rx) = oneshot::channel();
        let op = Op::Swap { key: key.to_vec(), expect, new, docs: Vec::new() };
        Pending { bytes: op.bytes(), op, reply: Reply::Swap(reply) }
    }

    fn outcome(a: &Ack) -> &RawOutcome {
        match a {
            Ack::Swap(o) => o,
            _ => panic!("not a swap ack"),
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
            swap(k, RawExpect::Absent, Some(rec("a"))),            // Done
            swap(k, RawExpect::Absent, Some(rec("x"))),            // Conflict(a)
            swap(k, RawExpect::Present(rec("a")), Some(rec("b"))), // Done
            swap(k, RawExpect::Present(rec("a")), Some(rec("y"))), // Conflict(b)
            swap(k, RawExpect::Any, None),                         // Done(prev b)
            swap(k, RawExpect::Present(rec("b")), Some(rec("z"))), // Conflict(None)
            swap(k, RawExpect::Absent, Some(rec("c"))),            // Done
        ];
        let acks = commit_durably(&db, &batch).unwrap().0;
        assert!(matches!(outcome(&acks[0]), RawOutcome::Done { previous: None }));
        assert!(matches!(outcome(&acks[1]), RawOutcome::Conflict { current: Some(c) } if *c == rec("a")));
        assert!(matches!(outcome(&acks[2]), RawOutcome::DoneAsExpected));
        assert!(matches!(outcome(&acks[3]), RawOutcome::Conflict { current: Some(c) } if *c == rec("b")));
        assert!(matches!(outcome(&acks[4]), RawOutcome::Done { previous: Some(p) } if *p == rec("b")));
        assert!(matches!(outcome(&acks[5]), RawOutcome::Conflict { current: None }));
        assert!(matches!(outcome(&acks[6]), RawOutcome::Done { previous: None }));
        let txn = db.begin_read().unwrap();
        let t = txn.open_table(HANDLES).unwrap();
        let stored = t.get(k.as_slice()).unwrap().unwrap();
        assert_eq!(format::unseal("handle", k, stored.value()).unwrap(), rec("c").as_slice());
        assert_eq!(t.len().unwrap(), 1);
    }

    /// A record stored before the compact form meets an expectation of the same
    /// record (written compact), and only of that record.
    #[test]
    fn a_record_in_the_earlier_form_meets_its_compact_form() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        ensure_tables(&db).unwrap();
        let k = b"20.5000/old";
        let old = HandleRecord::new(vec![handled_proto::HandleValue::new(1, "URL", "a")]);
        {
            let txn = db.begin_write().unwrap();
            txn.open_table(HANDLES)
                .unwrap()
                .insert(k.as_slice(), format::seal(k, &old.encode_wire()).as_slice())
                .unwrap();
            txn.commit().unwrap();
        }
        let batch = vec![
            swap(k, RawExpect::Present(rec("other")), Some(rec("x"))), // Conflict(a, as stored)
            swap(k, RawExpect::Present(old.encode()), Some(rec("b"))), // Done
        ];
        let acks = commit_durably(&db, &batch).unwrap().0;
        assert!(
            matches!(outcome(&acks[0]), RawOutcome::Conflict { current: Some(c) } if *c == old.encode_wire()),
            "another record does not meet it"
        );
        assert!(matches!(outcome(&acks[1]), RawOutcome::DoneAsExpected));
        let txn = db.begin_read().unwrap();
        let t = txn.open_table(HANDLES).unwrap();
        let stored = t.get(k.as_slice()).unwrap().unwrap();
        assert_eq!(format::unseal("handle", k, stored.value()).unwrap(), rec("b").as_slice());
    }

    fn unit(key: &str) -> (Pending, oneshot::Receiver<Result<(), StoreError>>) {
        let (reply, rx) = oneshot::channel();
        let op = Op::Meta { key: key.into(), value: Some(vec![1]) };
        (Pending { bytes: op.bytes(), op, reply: Reply::Unit(reply) }, rx)
    }

    fn test_shared(db: &Arc<Database>) -> Arc<Shared> {
        Arc::new(Shared {
            stats: StatCounters::default(),
            snapshot: ArcSwapOption::from_pointee(View::new(Arc::new(Snapshot::open(db, None).unwrap()))),
            fatal: Mutex::new(None),
            db: Mutex::new(Some(db.clone())),
            txn_notifier: crate::txn_log::TxnNotifier::new(0),
            keydir: ArcSwapOption::empty(),
        })
    }

    /// A fresh database (in a directory that lives as long as the returned guard)
    /// and the writer's shared state.
    fn test_writer_parts() -> (tempfile::TempDir, Arc<Database>, Arc<Shared>) {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        ensure_tables(&db).unwrap();
        let db = Arc::new(db);
        let shared = test_shared(&db);
        (dir, db, shared)
    }

    /// A failed commit fails every operation of its batch, and only those.
    #[test]
    fn failed_commit_fails_the_whole_batch() {
        let (_dir, db, shared) = test_writer_parts();
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
                writer_loop(rx, shared, EmbeddedOptions::default(), &mut |batch: &[Pending]| {
                    let fail = batch.iter().any(|p| matches!(&p.op, Op::Meta { key, .. } if key == "fail"));
                    if fail {
                        Err(StoreError::Io(std::io::Error::other("disk on fire")))
                    } else {
                        commit_durably(&db, batch)
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
        let (_dir, _db, shared) = test_writer_parts();
        let (tx, rx) = mpsc::channel(16);
        let (p1, r1) = unit("a");
        let (p2, r2) = unit("b");
        tx.blocking_send(p1).unwrap();
        tx.blocking_send(p2).unwrap();
        let writer = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                writer_loop(rx, shared, EmbeddedOptions::default(), &mut |_: &[Pending]| panic!("boom"))
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
