//! The transaction log on the embedded store (see `txn_log.rs` for what it is).
//!
//! Two tables: `txnlog.v1` (id as 8 bytes big-endian → `date ‖ action ‖ handle`,
//! sealed like every other value) and `txnlog_state.v1` (one row: floor, last id,
//! last date). The writer thread assigns ids while it applies a batch, in
//! arrival order, and writes the entries and the counters in the batch's own
//! write transaction; their effects go into the batch's redo record like any
//! other table's. So the change, its entry and the counter reach the disk in the
//! same synced log append (or the same durable commit), a crash keeps all or
//! none, and replaying the log re-creates exactly the same ids: the counter is
//! replayed state, not recomputed.
//!
//! Reads (`txn_log_read`, bounds) go to the published snapshot, which the writer
//! publishes before it acknowledges a batch and before it wakes subscribers.

use std::ops::Bound;

use redb::{ReadableTable, Table, TableDefinition, WriteTransaction};

use super::docs::{self, DocOp};
use super::format;
use super::wal::{Redo, TableId};
use super::writer::Ack;
use super::{map_redb, Snapshot};
use crate::txn_log::TxnLogState;
use crate::{ReplicatedChange, ReplicatedWrite, StoreError, TxnAction, TxnEntry, TxnLogBounds};

/// redb table of log entries: id (u64 BE) → sealed `TxnEntry` body.
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
    /// Replicated changes (encoded on the caller), then `docs`, then `progress`.
    Replicated {
        changes: Vec<(TxnEntry, RawWrite)>,
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
            raw.push((c.entry, write));
        }
        Ok(LogOp::Replicated { changes: raw, docs, progress })
    }

    pub(super) fn bytes(&self) -> usize {
        let opt = |v: &Option<Vec<u8>>| v.as_ref().map_or(0, Vec::len);
        match self {
            LogOp::Replicated { changes, docs, progress } => {
                let c: usize = changes
                    .iter()
                    .map(|(e, w)| {
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

/// The log's tables inside the writer's transaction, and its counters as the
/// batch moves them. [`LogTables::finish`] writes the counters back.
pub(super) struct LogTables<'txn> {
    log: Table<'txn, &'static [u8], &'static [u8]>,
    state_table: Table<'txn, &'static str, &'static [u8]>,
    state: TxnLogState,
    dirty: bool,
}

impl<'txn> LogTables<'txn> {
    pub(super) fn open(txn: &'txn WriteTransaction) -> Result<Self, StoreError> {
        let log = txn.open_table(TXN_LOG).map_err(|e| map_redb(e.into()))?;
        let state_table = txn.open_table(TXN_STATE).map_err(|e| map_redb(e.into()))?;
        let state = match state_table.get(STATE_KEY).map_err(|e| map_redb(e.into()))? {
            Some(g) => TxnLogState::decode(format::unseal("transaction log state", STATE_KEY.as_bytes(), g.value())?)?,
            None => TxnLogState::default(),
        };
        Ok(LogTables { log, state_table, state, dirty: false })
    }

    /// The log tables of `slot`, opened there on first use.
    pub(super) fn open_in<'s>(
        slot: &'s mut Option<LogTables<'txn>>,
        txn: &'txn WriteTransaction,
    ) -> Result<&'s mut LogTables<'txn>, StoreError> {
        if slot.is_none() {
            *slot = Some(LogTables::open(txn)?);
        }
        Ok(slot.as_mut().expect("opened above"))
    }

    /// Log a local change.
    pub(super) fn append(&mut self, action: TxnAction, handle: &[u8], redo: &mut Redo) -> Result<(), StoreError> {
        let entry = self.state.next(action, handle);
        self.insert(&entry, redo)
    }

    /// Log a replicated change under its source id (unless already covered).
    fn replicated(&mut self, entry: &TxnEntry, redo: &mut Redo) -> Result<(), StoreError> {
        match self.state.replicated(entry) {
            Some(e) => self.insert(&e, redo),
            None => Ok(()),
        }
    }

    fn insert(&mut self, entry: &TxnEntry, redo: &mut Redo) -> Result<(), StoreError> {
        let key = entry.id.to_be_bytes();
        let sealed = format::seal(&key, &entry.encode_body());
        self.log.insert(key.as_slice(), sealed.as_slice()).map_err(|e| map_redb(e.into()))?;
        redo.record(TableId::TxnLog, &key, Some(&sealed));
        self.dirty = true;
        Ok(())
    }

    fn remove(&mut self, id: u64, redo: &mut Redo) -> Result<(), StoreError> {
        let key = id.to_be_bytes();
        self.log.remove(key.as_slice()).map_err(|e| map_redb(e.into()))?;
        redo.record(TableId::TxnLog, &key, None);
        self.dirty = true;
        Ok(())
    }

    /// Up to `max` entries from the start with `keep(entry)` false, by id.
    fn leading(&self, max: usize, keep: impl Fn(&TxnEntry) -> bool) -> Result<Vec<u64>, StoreError> {
        let mut out = Vec::new();
        for item in self.log.iter().map_err(|e| map_redb(e.into()))? {
            let (k, v) = item.map_err(|e| map_redb(e.into()))?;
            let entry = decode(k.value(), v.value())?;
            if out.len() >= max || keep(&entry) {
                break;
            }
            out.push(entry.id);
        }
        Ok(out)
    }

    /// Write the counters back if the batch moved them.
    pub(super) fn finish(mut self, redo: &mut Redo) -> Result<(), StoreError> {
        if self.dirty {
            let sealed = format::seal(STATE_KEY.as_bytes(), &self.state.encode());
            self.state_table.insert(STATE_KEY, sealed.as_slice()).map_err(|e| map_redb(e.into()))?;
            redo.record(TableId::TxnState, STATE_KEY.as_bytes(), Some(&sealed));
        }
        Ok(())
    }
}

/// The tables a log operation works on, besides the log.
pub(super) struct DataTables<'a, 'txn> {
    pub(super) handles: &'a mut Table<'txn, &'static [u8], &'static [u8]>,
    pub(super) meta: &'a mut Table<'txn, &'static str, &'static [u8]>,
    pub(super) docs: &'a mut Table<'txn, &'static [u8], &'static [u8]>,
    pub(super) doc_index: &'a mut Table<'txn, &'static [u8], ()>,
}

/// Apply one log operation inside the writer's transaction.
pub(super) fn apply(
    op: &LogOp,
    data: DataTables<'_, '_>,
    log: &mut LogTables<'_>,
    redo: &mut Redo,
) -> Result<Ack, StoreError> {
    let r = |e: redb::StorageError| map_redb(e.into());
    match op {
        LogOp::Prune { before_ms } => {
            let ids = log.leading(PRUNE_CHUNK, |e| e.date_ms >= *before_ms)?;
            for &id in &ids {
                log.remove(id, redo)?;
            }
            if let Some(&highest) = ids.last() {
                log.state.floor = log.state.floor.max(highest);
            }
            Ok(Ack::Count(ids.len() as u64))
        }
        LogOp::Reset { id } => {
            log.state.reset(*id);
            log.dirty = true;
            for old in log.leading(usize::MAX, |_| false)? {
                log.remove(old, redo)?;
            }
            Ok(Ack::Unit)
        }
        LogOp::Replicated { changes, docs: doc_ops, progress } => {
            for (entry, write) in changes {
                match write {
                    RawWrite::Handle(key, value) => {
                        let sealed = value.as_deref().map(|v| format::seal(key, v));
                        match &sealed {
                            Some(v) => drop(data.handles.insert(key.as_slice(), v.as_slice()).map_err(r)?),
                            None => drop(data.handles.remove(key.as_slice()).map_err(r)?),
                        }
                        redo.record(TableId::Handles, key, sealed.as_deref());
                    }
                    RawWrite::Meta(key, value) => put_meta(data.meta, key, value.as_deref(), redo)?,
                }
                log.replicated(entry, redo)?;
            }
            for d in doc_ops {
                docs::apply(data.docs, data.doc_index, d, redo)?;
            }
            for (key, value) in progress {
                put_meta(data.meta, key, value.as_deref(), redo)?;
            }
            Ok(Ack::Unit)
        }
        LogOp::Checkpoint => Ok(Ack::Unit),
    }
}

fn put_meta(
    meta: &mut Table<&'static str, &'static [u8]>,
    key: &str,
    value: Option<&[u8]>,
    redo: &mut Redo,
) -> Result<(), StoreError> {
    let r = |e: redb::StorageError| map_redb(e.into());
    let sealed = value.map(|v| format::seal(key.as_bytes(), v));
    match &sealed {
        Some(v) => drop(meta.insert(key, v.as_slice()).map_err(r)?),
        None => drop(meta.remove(key).map_err(r)?),
    }
    redo.record(TableId::Meta, key.as_bytes(), sealed.as_deref());
    Ok(())
}

fn decode(key: &[u8], sealed: &[u8]) -> Result<TxnEntry, StoreError> {
    let id = u64::from_be_bytes(
        key.try_into().map_err(|_| StoreError::Corrupt("transaction log: malformed entry key".into()))?,
    );
    TxnEntry::decode_body(id, format::unseal("transaction log entry", key, sealed)?)
}

fn state(snap: &Snapshot) -> Result<TxnLogState, StoreError> {
    match snap.txn_state.get(STATE_KEY).map_err(|e| map_redb(e.into()))? {
        Some(g) => TxnLogState::decode(format::unseal("transaction log state", STATE_KEY.as_bytes(), g.value())?),
        None => Ok(TxnLogState::default()),
    }
}

/// The last committed id as of `snap`.
pub(super) fn last(snap: &Snapshot) -> Result<u64, StoreError> {
    state(snap).map(|s| s.last)
}

pub(super) fn read(snap: &Snapshot, after: u64, limit: usize) -> Result<Vec<TxnEntry>, StoreError> {
    let mut out = Vec::new();
    let Some(from) = after.checked_add(1) else { return Ok(out) };
    let from = from.to_be_bytes();
    let range = snap
        .txn_log
        .range::<&[u8]>((Bound::Included(from.as_slice()), Bound::Unbounded))
        .map_err(|e| map_redb(e.into()))?;
    for item in range.take(limit.min(crate::TXN_LOG_READ_MAX)) {
        let (k, v) = item.map_err(|e| map_redb(e.into()))?;
        out.push(decode(k.value(), v.value())?);
    }
    Ok(out)
}

pub(super) fn bounds(snap: &Snapshot) -> Result<TxnLogBounds, StoreError> {
    let s = state(snap)?;
    let first = match snap.txn_log.first().map_err(|e| map_redb(e.into()))? {
        Some((k, v)) => Some(decode(k.value(), v.value())?.date_ms),
        None => None,
    };
    Ok(TxnLogBounds { floor: s.floor, last: s.last, first_date_ms: first })
}
