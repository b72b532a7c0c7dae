//! The transaction log: what a replication source serves to its mirrors
//! (Handle.Net opcodes 1000–1002, see `docs/replication.md`).
//!
//! Every change of a handle, and every homing or unhoming of a prefix, gets an
//! entry `(id, date, action, handle)` written **by the store, in the same atomic
//! commit as the change** (no write path can forget it, and a crash keeps both
//! or neither). Ids are gap-free and strictly increasing in commit order; dates
//! never decrease. No values are kept: a source sends the values current at send
//! time (replication is state-based per handle), and the hashes a mirror filters
//! on are a pure function of the handle.
//!
//! A mirror applies what it pulls with [`crate::Store::apply_replicated`], which
//! logs each change under the *source's* id, so a promoted mirror continues the
//! old primary's sequence.

use crate::clock::machine_ms;
use crate::HandleRecord;

/// Meta-table key prefix under which each homed prefix handle is recorded
/// (`homed/0.NA/X` → empty value). A `meta_put` under it is logged as
/// [`TxnAction::HomeNa`] / [`TxnAction::UnhomeNa`].
pub const HOMED_META_PREFIX: &str = "homed/";

/// Most entries one [`crate::Store::txn_log_read`] returns, whatever the caller asks.
pub const TXN_LOG_READ_MAX: usize = 10_000;

/// The meta key recording that `prefix_handle` (normalized `0.NA/X`) is homed.
pub fn homed_meta_key(prefix_handle: &[u8]) -> String {
    format!("{HOMED_META_PREFIX}{}", String::from_utf8_lossy(prefix_handle))
}

/// What a log entry says happened (the Handle.Net action codes).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnAction {
    Create = 1,
    Delete = 2,
    Update = 3,
    HomeNa = 4,
    UnhomeNa = 5,
}

impl TxnAction {
    /// The wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<TxnAction> {
        use TxnAction::*;
        [Create, Delete, Update, HomeNa, UnhomeNa].into_iter().find(|a| a.code() == code)
    }

    /// The action logged for a handle write that found it `existed` and leaves
    /// it `present`; `None` for a no-op (deleting an absent handle).
    pub fn of_handle_write(existed: bool, present: bool) -> Option<TxnAction> {
        match (existed, present) {
            (false, false) => None,
            (false, true) => Some(TxnAction::Create),
            (true, true) => Some(TxnAction::Update),
            (true, false) => Some(TxnAction::Delete),
        }
    }

    /// The action and prefix handle logged for a meta write of `key` that found
    /// it `existed` and leaves it `present`; `None` for keys outside
    /// [`HOMED_META_PREFIX`] and for unhoming a prefix that was not homed.
    pub fn of_meta_write(key: &str, existed: bool, present: bool) -> Option<(TxnAction, Vec<u8>)> {
        let handle = key.strip_prefix(HOMED_META_PREFIX)?;
        let action = match (existed, present) {
            (false, false) => return None,
            (_, true) => TxnAction::HomeNa,
            (true, false) => TxnAction::UnhomeNa,
        };
        Some((action, handle.as_bytes().to_vec()))
    }
}

/// One logged change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnEntry {
    /// > 0, strictly increasing in commit order, no gaps between local changes.
    pub id: u64,
    /// Wall clock at commit, ms since the epoch; never decreases along the log.
    pub date_ms: u64,
    pub action: TxnAction,
    /// The storage key (normalized handle), or the prefix handle (`0.NA/X`)
    /// for [`TxnAction::HomeNa`] / [`TxnAction::UnhomeNa`].
    pub handle: Vec<u8>,
}

/// The extent of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxnLogBounds {
    /// Every entry with id > floor is still in the log (floor = highest id pruned
    /// or never kept: 0 on a fresh log, the dump's resume id on a mirror
    /// bootstrapped by a dump).
    pub floor: u64,
    /// Highest id committed (0 = none). The next local change gets last + 1.
    pub last: u64,
    /// Date of the oldest kept entry (None = log empty).
    pub first_date_ms: Option<u64>,
}

/// A change pulled from a replication source, applied with the source's txn id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicatedChange {
    /// Id and date from the source.
    pub entry: TxnEntry,
    /// Create/Update: the values sent (None or empty = the handle is gone at the
    /// source: delete it). Ignored for the other actions.
    pub record: Option<HandleRecord>,
    /// Pulled from another primary of a multi-primary group whose HS_SITE has
    /// this priority: applied only if newer than the handle's last change
    /// (`crate::change_dates`), dated, and not logged (the id is of the
    /// other primary's sequence). `None`: a mirror's change, as described above.
    pub priority: Option<i32>,
}

/// The write a [`ReplicatedChange`] stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicatedWrite {
    /// Set (`Some`) or delete (`None`) a handle.
    Handle(Vec<u8>, Option<HandleRecord>),
    /// Set (`Some`) or delete (`None`) a meta entry (a homed prefix).
    Meta(String, Option<Vec<u8>>),
}

impl ReplicatedChange {
    /// What applying this change writes (state-based: the record as sent).
    pub fn write(&self) -> ReplicatedWrite {
        let handle = self.entry.handle.clone();
        match self.entry.action {
            TxnAction::Create | TxnAction::Update => {
                let record = self.record.clone().filter(|r| !r.values.is_empty());
                ReplicatedWrite::Handle(handle, record)
            }
            TxnAction::Delete => ReplicatedWrite::Handle(handle, None),
            TxnAction::HomeNa => ReplicatedWrite::Meta(homed_meta_key(&handle), Some(Vec::new())),
            TxnAction::UnhomeNa => ReplicatedWrite::Meta(homed_meta_key(&handle), None),
        }
    }
}

/// The counters of a log, kept by each backend next to its entries and changed
/// in the same commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct TxnLogState {
    pub(crate) floor: u64,
    pub(crate) last: u64,
    /// Date of the last entry logged (dates never go below it).
    pub(crate) last_date_ms: u64,
}

impl TxnLogState {
    const ENCODED: usize = 24;

    /// The entry for the next local change.
    pub(crate) fn next(&mut self, action: TxnAction, handle: &[u8]) -> TxnEntry {
        let (id, date_ms) = self.next_run(1);
        TxnEntry { id, date_ms, action, handle: handle.to_vec() }
    }

    /// The last id and the date of the next `count` local changes, logged
    /// together (an import's run).
    pub(crate) fn next_run(&mut self, count: u64) -> (u64, u64) {
        self.last += count;
        self.last_date_ms = self.last_date_ms.max(machine_ms());
        (self.last, self.last_date_ms)
    }

    /// The entry for the next local change, dated `date_ms` by the
    /// multi-primary rule (`crate::change_dates`) rather than by the log.
    pub(crate) fn next_dated(&mut self, action: TxnAction, handle: &[u8], date_ms: u64) -> TxnEntry {
        self.last += 1;
        self.last_date_ms = self.last_date_ms.max(date_ms);
        TxnEntry { id: self.last, date_ms, action, handle: handle.to_vec() }
    }

    /// The entry to log for a replicated change, `None` if its id is already
    /// covered (at or below `last`: applied again, not logged again).
    pub(crate) fn replicated(&mut self, entry: &TxnEntry) -> Option<TxnEntry> {
        if entry.id <= self.last {
            return None;
        }
        self.last = entry.id;
        self.last_date_ms = self.last_date_ms.max(entry.date_ms);
        Some(TxnEntry { date_ms: self.last_date_ms, ..entry.clone() })
    }

    /// Mirror (re)bootstrap by a dump: the log continues at `id`, whatever it
    /// held (the caller drops every kept entry). Always, even when `id` is
    /// lower: a dump from a source with another id sequence would otherwise
    /// leave its first pulled ids at or below `last`, applied but never logged,
    /// so mirrors of this mirror would miss them; with the ids lowered, those
    /// mirrors claim ids beyond ours and are told to redump.
    pub(crate) fn reset(&mut self, id: u64) {
        self.floor = id;
        self.last = id;
    }

    pub(crate) fn encode(&self) -> [u8; Self::ENCODED] {
        let mut out = [0u8; Self::ENCODED];
        out[..8].copy_from_slice(&self.floor.to_be_bytes());
        out[8..16].copy_from_slice(&self.last.to_be_bytes());
        out[16..].copy_from_slice(&self.last_date_ms.to_be_bytes());
        out
    }

    pub(crate) fn decode(b: &[u8]) -> Result<TxnLogState, crate::StoreError> {
        if b.len() != Self::ENCODED {
            return Err(crate::StoreError::Corrupt("transaction log state: malformed".into()));
        }
        let n = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Ok(TxnLogState { floor: n(0), last: n(8), last_date_ms: n(16) })
    }
}

/// Wakes long-polling readers ([`crate::Store::txn_log_subscribe`]) with the last
/// committed id, once the commit is durable and visible.
#[derive(Debug)]
pub(crate) struct TxnNotifier(tokio::sync::watch::Sender<u64>);

impl TxnNotifier {
    pub(crate) fn new(last: u64) -> Self {
        TxnNotifier(tokio::sync::watch::Sender::new(last))
    }

    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.subscribe()
    }

    /// Publish `last` (no wake-up when it did not change).
    pub(crate) fn publish(&self, last: u64) {
        self.0.send_if_modified(|v| {
            let changed = *v != last;
            *v = last;
            changed
        });
    }
}
