//! The transaction log on the embedded store (see `txn_log.rs` for what it is).
//!
//! Two tables: `txnlog.v1` (the last id an entry holds, 8 bytes big-endian → one
//! change, or a run of an import's changes: `embedded_txnlog_entry.rs`; sealed
//! like every other value) and `txnlog_state.v1` (one row: floor, last id,
//! last date). The writer thread assigns ids while it applies a batch, in
//! arrival order, and writes the entries and the counters in the batch's own
//! write transaction; their effects go into the batch's redo record like any
//! other table's. So the change, its entry and the counter reach the disk in the
//! same synced log append (or the same durable commit), a crash keeps all or
//! none, and replaying the log re-creates exactly the same ids: the counter is
//! replayed state, not recomputed.
//!
//! Reads (`txn_log_read`, bounds) go to the published view, which the writer
//! publishes before it acknowledges a batch and before it wakes subscribers.

use std::ops::Bound;

use redb::TableDefinition;

#[path = "embedded_txnlog_entry.rs"]
pub(super) mod entry;

use super::docs::{self, DocOp};
use super::format;
use super::tx::Tx;
use super::view::View;
use super::wal::TableId;
use super::writer::Ack;
use crate::change_dates::{date_local, date_pulled, decode_priority, LOCAL_PRIORITY_META_KEY};
use crate::txn_log::TxnLogState;
use crate::{ReplicatedChange, ReplicatedWrite, StoreError, TxnAction, TxnEntry, TxnLogBounds};

/// redb table of log entries: last id (u64 BE) → sealed entry (`entry.rs`).
pub const TXN_LOG_TABLE: &str = "txnlog.v1";
/// redb table of the log's counters: [`STATE_KEY`] → sealed `TxnLogState`.
pub const TXN_STATE_TABLE: &str = "txnlog_state.v1";
pub(super) const TXN_LOG: TableDefinition<&[u8], &[u8]> = TableDefinition::new(TXN_LOG_TABLE);
pub(super) const TXN_STATE: TableDefinition<&str, &[u8]> = TableDefinition::new(TXN_STATE_TABLE);
const STATE_KEY: &str = "state";
/// Entries removed per writer operation by a prune (the caller loops), so one
/// prune does not hold up the writes behind it.
pub(super) const PRUNE_CHUNK: usize = 10_000;

/// Log operations queued to the writer.
pub(super) enum LogOp {
    /// Remove up to [`PRUNE_CHUNK`] entries dated before `before_ms`; acks the count.
    Prune {
        before_ms: u64,
    },
    Reset {
        id: u64,
    },
    /// Replicated changes (encoded on the caller; with the priority of a
    /// multi-primary peer), then `docs`, then `progress`.
    Replicated {
        changes: Vec<(TxnEntry, RawWrite, Option<i32>)>,
        docs: Vec<DocOp>,
        progress: Vec<(String, Option<Vec<u8>>)>,
    },
    /// Force a durable commit of everything acknowledged.
    Checkpoint,
}

/// A [`ReplicatedWrite`] with the record encoded.
pub(super) enum RawWrite {
    Handle(Vec<u8>, Option<Vec<u8>>),
    Meta(String, Option<Vec<u8>>),
}

impl LogOp {
    /// Encode replicated changes (validating records) on the caller.
    pub(super) fn replicated(
        changes: Vec<ReplicatedChange>,
        docs: Vec<DocOp>,
        progress: Vec<(String, Option<Vec<u8>>)>,
    ) -> Result<LogOp, StoreError> {
        let mut raw = Vec::with_capacity(changes.len());
        for c in changes {
            let write = match c.write() {
                ReplicatedWrite::Handle(k, Some(r)) => {
                    r.validate()?;
                    RawWrite::Handle(k, Some(r.encode()))
                }
                ReplicatedWrite::Handle(k, None) => RawWrite::Handle(k, None),
                ReplicatedWrite::Meta(k, v) => RawWrite::Meta(k, v),
            };
            raw.push((c.entry, write, c.priority));
        }
        Ok(LogOp::Replicated { changes: raw, docs, progress })
    }

    pub(super) fn bytes(&self) -> usize {
        let opt = |v: &Option<Vec<u8>>| v.as_ref().map_or(0, Vec::len);
        match self {
            LogOp::Replicated { changes, docs, progress } => {
                let c: usize = changes
                    .iter()
                    .map(|(e, w, _)| {
                        e.handle.len()
                            + match w {
                                RawWrite::Handle(k, v) => k.len() + opt(v),
                                RawWrite::Meta(k, v) => k.len() + opt(v),
                            }
                    })
                    .sum();
                c + docs.iter().map(DocOp::bytes).sum::<usize>()
                    + progress.iter().map(|(k, v)| k.len() + opt(v)).sum::<usize>()
            }
            _ => 16,
        }
    }

    /// Whether the batch holding this operation must be a durable commit.
    pub(super) fn is_checkpoint(&self) -> bool {
        matches!(self, LogOp::Checkpoint)
    }
}

/// The log's counters as a batch moves them. [`LogTables::finish`] writes them back.
pub(super) struct LogTables {
    state: TxnLogState,
    dirty: bool,
    /// This server's multi-primary priority: local changes are dated while set.
    priority: Option<i32>,
}

impl LogTables {
    pub(super) fn open(tx: &mut Tx) -> Result<Self, StoreError> {
        let state = match tx.get(TableId::TxnState, STATE_KEY.as_bytes())? {
            Some(v) => TxnLogState::decode(format::unseal("transaction log state", STATE_KEY.as_bytes(), &v)?)?,
            None => TxnLogState::default(),
        };
        let priority = match tx.get(TableId::Meta, LOCAL_PRIORITY_META_KEY.as_bytes())? {
            Some(v) => Some(decode_priority(format::unseal("meta", LOCAL_PRIORITY_META_KEY.as_bytes(), &v)?)?),
            None => None,
        };
        Ok(LogTables { state, dirty: false, priority })
    }

    /// The log counters of `slot`, read there on first use.
    pub(super) fn open_in<'s>(slot: &'s mut Option<LogTables>, tx: &mut Tx) -> Result<&'s mut LogTables, StoreError> {
        if slot.is_none() {
            *slot = Some(LogTables::open(tx)?);
        }
        Ok(slot.as_mut().expect("opened above"))
    }

    /// Log a local change.
    /// Log a local change (dated by the multi-primary rule while that is on).
    pub(super) fn append(&mut self, tx: &mut Tx, action: TxnAction, handle: &[u8]) -> Result<(), StoreError> {
        let entry = match date_local(self.priority, action, handle, |k| get_meta(tx, k))? {
            Some((date, (key, value))) => {
                put_meta(tx, &key, Some(&value))?;
                self.state.next_dated(action, handle, date)
            }
            None => self.state.next(action, handle),
        };
        self.insert(tx, &entry)
    }

    /// Log an import's changes, in order: each run of one action in one
    /// entry, unless the multi-primary rule dates each change.
    pub(super) fn append_imported(&mut self, tx: &mut Tx, changes: &[(TxnAction, &[u8])]) -> Result<(), StoreError> {
        if self.priority.is_some() {
            for (action, handle) in changes {
                self.append(tx, *action, handle)?;
            }
            return Ok(());
        }
        for run in entry::runs(changes) {
            if let [(action, handle)] = run {
                self.append(tx, *action, handle)?;
                continue;
            }
            let (last, date_ms) = self.state.next_run(run.len() as u64);
            let handles: Vec<&[u8]> = run.iter().map(|(_, h)| *h).collect();
            self.put(tx, last, &entry::encode_run(date_ms, run[0].0, &handles))?;
        }
        Ok(())
    }

    /// Log a replicated change under its source id (unless already covered).
    fn replicated(&mut self, tx: &mut Tx, entry: &TxnEntry) -> Result<(), StoreError> {
        match self.state.replicated(entry) {
            Some(e) => self.insert(tx, &e),
            None => Ok(()),
        }
    }

    fn insert(&mut self, tx: &mut Tx, entry: &TxnEntry) -> Result<(), StoreError> {
        self.put(tx, entry.id, &entry::encode_one(entry))
    }

    fn put(&mut self, tx: &mut Tx, last: u64, body: &[u8]) -> Result<(), StoreError> {
        let key = last.to_be_bytes();
        tx.put(TableId::TxnLog, &key, Some(&format::seal(&key, body)))?;
        self.dirty = true;
        Ok(())
    }

    fn remove(&mut self, tx: &mut Tx, last: u64) -> Result<(), StoreError> {
        tx.put(TableId::TxnLog, &last.to_be_bytes(), None)?;
        self.dirty = true;
        Ok(())
    }

    /// The stored entries from the start whose first change has `keep` false,
    /// until they hold `max` changes or more: (last id, changes held) each.
    fn leading(tx: &mut Tx, max: u64, keep: impl Fn(&TxnEntry) -> bool) -> Result<Vec<(u64, u64)>, StoreError> {
        let (mut out, mut changes) = (Vec::new(), 0);
        for item in tx.range(TableId::TxnLog, Bound::Unbounded)? {
            let (k, v) = item?;
            let held = decode(&k, &v)?;
            if changes >= max || held.first().is_none_or(&keep) {
                break;
            }
            let last = held.last().expect("not empty").id;
            out.push((last, held.len() as u64));
            changes += held.len() as u64;
        }
        Ok(out)
    }

    /// Write the counters back if the batch moved them.
    pub(super) fn finish(self, tx: &mut Tx) -> Result<(), StoreError> {
        if self.dirty {
            let sealed = format::seal(STATE_KEY.as_bytes(), &self.state.encode());
            tx.put(TableId::TxnState, STATE_KEY.as_bytes(), Some(&sealed))?;
        }
        Ok(())
    }
}

/// Apply one log operation to the writer's batch.
pub(super) fn apply(op: &LogOp, tx: &mut Tx, log: &mut LogTables) -> Result<Ack, StoreError> {
    match op {
        LogOp::Prune { before_ms } => {
            let entries = LogTables::leading(tx, PRUNE_CHUNK as u64, |e| e.date_ms >= *before_ms)?;
            for &(last, _) in &entries {
                log.remove(tx, last)?;
            }
            if let Some(&(highest, _)) = entries.last() {
                log.state.floor = log.state.floor.max(highest);
            }
            Ok(Ack::Count(entries.iter().map(|(_, changes)| changes).sum()))
        }
        LogOp::Reset { id } => {
            log.state.reset(*id);
            log.dirty = true;
            for (last, _) in LogTables::leading(tx, u64::MAX, |_| false)? {
                log.remove(tx, last)?;
            }
            Ok(Ack::Unit)
        }
        LogOp::Replicated { changes, docs: doc_ops, progress } => {
            let mut riding = docs::Riding::new(doc_ops);
            for (entry, write, priority) in changes {
                if let Some(priority) = priority {
                    // Another primary's change: applied only if newer, never logged.
                    let Some((key, value)) = date_pulled(entry, *priority, |k| get_meta(tx, k))? else {
                        if let RawWrite::Handle(key, _) = write {
                            riding.skipped(key);
                        }
                        continue;
                    };
                    put_meta(tx, &key, Some(&value))?;
                }
                match write {
                    RawWrite::Handle(key, value) => {
                        if riding.waits_for(key) {
                            let replaced = tx.get(TableId::Handles, key)?;
                            riding.written(tx, key, replaced.as_deref())?;
                        }
                        let sealed = value.as_deref().map(|v| format::seal(key, v));
                        tx.put(TableId::Handles, key, sealed.as_deref())?;
                    }
                    RawWrite::Meta(key, value) => put_meta(tx, key, value.as_deref())?,
                }
                if priority.is_none() {
                    log.replicated(tx, entry)?;
                }
            }
            riding.finish(tx)?;
            for (key, value) in progress {
                put_meta(tx, key, value.as_deref())?;
            }
            Ok(Ack::Unit)
        }
        LogOp::Checkpoint => Ok(Ack::Unit),
    }
}

fn get_meta(tx: &mut Tx, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
    match tx.get(TableId::Meta, key.as_bytes())? {
        Some(v) => Ok(Some(format::unseal("meta", key.as_bytes(), &v)?.to_vec())),
        None => Ok(None),
    }
}

fn put_meta(tx: &mut Tx, key: &str, value: Option<&[u8]>) -> Result<(), StoreError> {
    let sealed = value.map(|v| format::seal(key.as_bytes(), v));
    tx.put(TableId::Meta, key.as_bytes(), sealed.as_deref())
}

/// The changes a stored entry holds, by id.
fn decode(key: &[u8], sealed: &[u8]) -> Result<Vec<TxnEntry>, StoreError> {
    let last = u64::from_be_bytes(
        key.try_into().map_err(|_| StoreError::Corrupt("transaction log: malformed entry key".into()))?,
    );
    entry::decode(last, format::unseal("transaction log entry", key, sealed)?)
}

fn state(view: &View) -> Result<TxnLogState, StoreError> {
    match view.get(TableId::TxnState, STATE_KEY.as_bytes())? {
        Some(v) => TxnLogState::decode(format::unseal("transaction log state", STATE_KEY.as_bytes(), &v)?),
        None => Ok(TxnLogState::default()),
    }
}

/// The last committed id as of `view`.
pub(super) fn last(view: &View) -> Result<u64, StoreError> {
    state(view).map(|s| s.last)
}

pub(super) fn read(view: &View, after: u64, limit: usize) -> Result<Vec<TxnEntry>, StoreError> {
    let mut out = Vec::new();
    let Some(from) = after.checked_add(1) else { return Ok(out) };
    let from = from.to_be_bytes();
    let limit = limit.min(crate::TXN_LOG_READ_MAX);
    // The first entry at or past `from` holds it, if the log still does.
    for item in view.range(TableId::TxnLog, Bound::Included(from.as_slice()))? {
        if out.len() >= limit {
            break;
        }
        let (k, v) = item?;
        let left = limit - out.len();
        out.extend(decode(&k, &v)?.into_iter().filter(|e| e.id > after).take(left));
    }
    Ok(out)
}

pub(super) fn bounds(view: &View) -> Result<TxnLogBounds, StoreError> {
    let s = state(view)?;
    let first = match view.range(TableId::TxnLog, Bound::Unbounded)?.next() {
        Some(item) => {
            let (k, v) = item?;
            decode(&k, &v)?.first().map(|e| e.date_ms)
        }
        None => None,
    };
    Ok(TxnLogBounds { floor: s.floor, last: s.last, first_date_ms: first })
}
