//! The transaction log's tables and statements on Cassandra (design and proofs:
//! docs/cluster.md, "Transaction log (replication source)").
//!
//! * `txn_seq ((part))`: one row: `last` id handed out, `date` of that hand-out
//!   (never decreasing, so dates never decrease along ids), `floor` (highest id
//!   pruned or skipped by a reset), `epoch` (bumped by each reset) and `owner`
//!   (a nonce naming the last allocation, to settle a timed-out one). Changed
//!   only by lightweight transactions.
//! * `txn_log ((bucket), id)`, `bucket = id / BUCKET_IDS`: one row per id handed
//!   out: `state` pending / done / void, the `action`, the `handle`, the `date`.
//!   A state changes at most once, from pending (or absent) to done or void,
//!   by a lightweight transaction conditional on that.
//! * `txn_state ((part))`: a hint of the settled frontier (every id at or
//!   below it is done or void) with the epoch it belongs to, so a node that
//!   starts does not walk the whole log again.

use scylla::client::session::Session;
use scylla::errors::ExecutionError;
use scylla::response::query_result::QueryResult;
use scylla::statement::prepared::PreparedStatement;
use scylla::value::{CqlValue, Row};

use super::{backend_error, rows_of};
use crate::{StoreError, TxnAction, TxnEntry};

/// Ids per `txn_log` partition: readers go through the log a bucket at a time.
pub const BUCKET_IDS: u64 = 4096;

/// `txn_log.state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryState {
    Pending = 0,
    Done = 1,
    Void = 2,
}

impl EntryState {
    fn from_code(c: i32) -> Result<EntryState, StoreError> {
        match c {
            0 => Ok(EntryState::Pending),
            1 => Ok(EntryState::Done),
            2 => Ok(EntryState::Void),
            _ => Err(StoreError::Corrupt(format!("transaction log: unknown entry state {c}"))),
        }
    }
}

/// One `txn_log` row as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryRow {
    pub id: u64,
    pub state: EntryState,
    pub action: Option<TxnAction>,
    pub handle: Vec<u8>,
    pub date_ms: u64,
}

impl EntryRow {
    /// The entry a done row serves.
    pub fn entry(&self) -> Result<TxnEntry, StoreError> {
        let action = self
            .action
            .ok_or_else(|| StoreError::Corrupt(format!("transaction log entry {}: done without an action", self.id)))?;
        Ok(TxnEntry { id: self.id, date_ms: self.date_ms, action, handle: self.handle.clone() })
    }
}

type RawEntry = (i64, Option<i32>, Option<i32>, Option<Vec<u8>>, Option<i64>);

fn entry_row((id, state, action, handle, date): RawEntry) -> Result<EntryRow, StoreError> {
    let action = match action {
        Some(c) => Some(
            u8::try_from(c)
                .ok()
                .and_then(TxnAction::from_code)
                .ok_or_else(|| StoreError::Corrupt(format!("transaction log entry {id}: unknown action {c}")))?,
        ),
        None => None,
    };
    Ok(EntryRow {
        id: id as u64,
        state: EntryState::from_code(state.unwrap_or(EntryState::Void as i32))?,
        action,
        handle: handle.unwrap_or_default(),
        date_ms: date.unwrap_or(0).max(0) as u64,
    })
}

/// The `txn_seq` row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Seq {
    pub last: u64,
    pub date_ms: u64,
    pub floor: u64,
    pub epoch: u64,
    pub owner: i64,
}

pub fn bucket_of(id: u64) -> i64 {
    (id / BUCKET_IDS) as i64
}

/// Whether a lightweight transaction applied (its first column).
pub fn applied(result: Result<QueryResult, ExecutionError>, what: &str) -> Result<bool, StoreError> {
    let rows = rows_of::<Row>(result, what)?;
    match rows.first().and_then(|r| r.columns.first()).cloned().flatten() {
        Some(CqlValue::Boolean(b)) => Ok(b),
        other => Err(StoreError::Backend(format!("cassandra: {what} answered {other:?}"))),
    }
}

pub struct TxnStatements {
    seq_read: PreparedStatement,
    seq_init: PreparedStatement,
    pub seq_take: PreparedStatement,
    pub seq_floor: PreparedStatement,
    pub seq_reset: PreparedStatement,
    pub pending: PreparedStatement,
    pub finish: PreparedStatement,
    pub void_missing: PreparedStatement,
    pub put_entry: PreparedStatement,
    page: PreparedStatement,
    one_serial: PreparedStatement,
    pub delete_entry: PreparedStatement,
    pub delete_bucket: PreparedStatement,
    hint_read: PreparedStatement,
    pub hint_write: PreparedStatement,
    meta_serial: PreparedStatement,
    handle_serial: PreparedStatement,
    pub meta_insert: PreparedStatement,
    pub meta_update: PreparedStatement,
    pub meta_delete: PreparedStatement,
}

impl TxnStatements {
    pub async fn prepare(session: &Session, ks: &str) -> Result<Self, StoreError> {
        let prep = |cql: String, idempotent: bool, serial: bool| super::prepare(session, cql, idempotent, serial);
        let cols = "id, state, action, handle, date";
        let statements = TxnStatements {
            seq_read: prep(
                format!("SELECT last, date, floor, epoch, owner FROM {ks}.txn_seq WHERE part = 0"),
                true,
                true,
            )
            .await?,
            seq_init: prep(
                format!(
                    "INSERT INTO {ks}.txn_seq (part, last, date, floor, epoch, owner) VALUES (0, 0, 0, 0, 0, 0) \
                     IF NOT EXISTS"
                ),
                false,
                false,
            )
            .await?,
            seq_take: prep(
                format!("UPDATE {ks}.txn_seq SET last = ?, date = ?, owner = ? WHERE part = 0 IF last = ?"),
                false,
                false,
            )
            .await?,
            seq_floor: prep(format!("UPDATE {ks}.txn_seq SET floor = ? WHERE part = 0 IF floor = ?"), false, false)
                .await?,
            seq_reset: prep(
                format!(
                    "UPDATE {ks}.txn_seq SET last = ?, floor = ?, epoch = ?, owner = ? WHERE part = 0 IF epoch = ?"
                ),
                false,
                false,
            )
            .await?,
            pending: prep(
                format!(
                    "INSERT INTO {ks}.txn_log (bucket, id, state, action, handle, date) VALUES (?, ?, 0, ?, ?, ?) \
                     IF NOT EXISTS"
                ),
                false,
                false,
            )
            .await?,
            finish: prep(
                format!("UPDATE {ks}.txn_log SET state = ?, action = ? WHERE bucket = ? AND id = ? IF state = 0"),
                false,
                false,
            )
            .await?,
            void_missing: prep(
                format!("INSERT INTO {ks}.txn_log (bucket, id, state) VALUES (?, ?, 2) IF NOT EXISTS"),
                false,
                false,
            )
            .await?,
            put_entry: prep(
                format!("INSERT INTO {ks}.txn_log (bucket, id, state, action, handle, date) VALUES (?, ?, ?, ?, ?, ?)"),
                true,
                false,
            )
            .await?,
            page: prep(
                format!("SELECT {cols} FROM {ks}.txn_log WHERE bucket = ? AND id > ? AND id <= ? LIMIT ?"),
                true,
                false,
            )
            .await?,
            one_serial: prep(format!("SELECT {cols} FROM {ks}.txn_log WHERE bucket = ? AND id = ?"), true, true)
                .await?,
            delete_entry: prep(format!("DELETE FROM {ks}.txn_log WHERE bucket = ? AND id = ?"), true, false).await?,
            delete_bucket: prep(format!("DELETE FROM {ks}.txn_log WHERE bucket = ?"), true, false).await?,
            hint_read: prep(format!("SELECT frontier, epoch FROM {ks}.txn_state WHERE part = 0"), true, false).await?,
            hint_write: prep(
                format!("INSERT INTO {ks}.txn_state (part, frontier, epoch) VALUES (0, ?, ?)"),
                true,
                false,
            )
            .await?,
            meta_serial: prep(format!("SELECT value FROM {ks}.meta WHERE part = 0 AND key = ?"), true, true).await?,
            handle_serial: prep(format!("SELECT body FROM {ks}.objects WHERE pk = ? AND coll = ?"), true, true).await?,
            meta_insert: prep(
                format!("INSERT INTO {ks}.meta (part, key, value) VALUES (0, ?, ?) IF NOT EXISTS"),
                false,
                false,
            )
            .await?,
            meta_update: prep(
                format!("UPDATE {ks}.meta SET value = ? WHERE part = 0 AND key = ? IF EXISTS"),
                false,
                false,
            )
            .await?,
            meta_delete: prep(format!("DELETE FROM {ks}.meta WHERE part = 0 AND key = ? IF EXISTS"), false, false)
                .await?,
        };
        // The sequence row exists from the start, so every change of it is a
        // compare on its current values.
        session.execute_unpaged(&statements.seq_init, ()).await.map_err(|e| backend_error("txn_seq", e))?;
        Ok(statements)
    }

    /// The sequence row, at SERIAL (R1: what has been handed out).
    pub async fn seq(&self, session: &Session) -> Result<Seq, StoreError> {
        let rows = rows_of::<(Option<i64>, Option<i64>, Option<i64>, Option<i64>, Option<i64>)>(
            session.execute_unpaged(&self.seq_read, ()).await,
            "txn_seq read",
        )?;
        let n = |v: Option<i64>| v.unwrap_or(0).max(0) as u64;
        Ok(rows
            .into_iter()
            .next()
            .map(|(last, date, floor, epoch, owner)| Seq {
                last: n(last),
                date_ms: n(date),
                floor: n(floor),
                epoch: n(epoch),
                owner: owner.unwrap_or(0),
            })
            .unwrap_or_default())
    }

    /// Rows with id in `(after, upto]` of `after + 1`'s bucket, at most `limit`.
    pub async fn page(
        &self,
        session: &Session,
        after: u64,
        upto: u64,
        limit: usize,
    ) -> Result<Vec<EntryRow>, StoreError> {
        let bucket = bucket_of(after + 1);
        let end = upto.min((bucket as u64 + 1) * BUCKET_IDS - 1);
        let rows = rows_of::<RawEntry>(
            session.execute_unpaged(&self.page, (bucket, after as i64, end as i64, limit as i32)).await,
            "txn_log read",
        )?;
        rows.into_iter().map(entry_row).collect()
    }

    /// One row at SERIAL (finishes or rules out a transaction in progress on it).
    pub async fn one_serial(&self, session: &Session, id: u64) -> Result<Option<EntryRow>, StoreError> {
        let rows = rows_of::<RawEntry>(
            session.execute_unpaged(&self.one_serial, (bucket_of(id), id as i64)).await,
            "txn_log read",
        )?;
        rows.into_iter().next().map(entry_row).transpose()
    }

    /// The frontier hint: `(frontier, epoch)`.
    pub async fn hint(&self, session: &Session) -> Result<Option<(u64, u64)>, StoreError> {
        let rows = rows_of::<(Option<i64>, Option<i64>)>(
            session.execute_unpaged(&self.hint_read, ()).await,
            "txn_state read",
        )?;
        Ok(rows.into_iter().next().map(|(f, e)| (f.unwrap_or(0).max(0) as u64, e.unwrap_or(0).max(0) as u64)))
    }

    /// Whether meta `key` exists, at SERIAL.
    pub async fn meta_exists(&self, session: &Session, key: &str) -> Result<bool, StoreError> {
        let rows =
            rows_of::<(Option<Vec<u8>>,)>(session.execute_unpaged(&self.meta_serial, (key,)).await, "meta read")?;
        Ok(!rows.is_empty())
    }

    /// Whether handle `key` is present, at SERIAL (finishes or rules out a
    /// write in flight on its partition).
    pub async fn handle_present(&self, session: &Session, key: &[u8]) -> Result<bool, StoreError> {
        let values = (super::pk(key), super::schema::HANDLE_COLL);
        let rows =
            rows_of::<(Option<Vec<u8>>,)>(session.execute_unpaged(&self.handle_serial, values).await, "objects read")?;
        Ok(rows.into_iter().next().is_some_and(|(b,)| b.is_some()))
    }
}
