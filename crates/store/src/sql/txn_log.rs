//! The transaction log on SQL (`replication_log`): our tables
//! `handled_txnlog` (one row per entry) and `handled_txnlog_state` (one row:
//! `last`, `floor`, `last_date_ms`; schema.rs).
//!
//! Every logged write, in its own transaction and after its own locks (the
//! handle's, records.rs), locks the state row, takes `last + 1` and
//! `max(now, last_date_ms)`, inserts the entry and updates the row, then
//! commits (PostgreSQL: one statement, [`PG_LOG`]; MariaDB: `select … for
//! update`, the insert, the update). The row lock is held until that commit, so the logged
//! writes of every `handled` sharing the database are serialised there: ids
//! are handed out in commit order, with no gap (a write that rolls back gave
//! its id back). Taking it last keeps the one lock order (handle, then log)
//! every writer follows, so no deadlock comes from it, and holds it for the
//! shortest time: the cost of the log is that time, per write (README).
//!
//! Subscribers are woken by this node's commits at once, and by other
//! nodes' within [`SqlOptions::txn_poll_interval`] (a primary-key read of
//! the state row). Rows other programs write by plain SQL are not logged.
//!
//! [`SqlOptions::txn_poll_interval`]: super::SqlOptions::txn_poll_interval

use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx::Row;

use super::db::{on_pool, on_tx, Pool, Sql, Tx};
use super::error::backend;
use super::SqlCore;
use crate::txn_log::TxnLogState;
use crate::{StoreError, TxnAction, TxnEntry, TxnLogBounds, TXN_LOG_READ_MAX};

/// Entries per `insert` on MariaDB (four parameters each).
const INSERT_ENTRIES: usize = 1000;

// Spelled alike on both databases.
const LOCK_STATE: &str = "select last, floor, last_date_ms from handled_txnlog_state where one = 1 for update";
const LAST: &str = "select last from handled_txnlog_state where one = 1";
/// One statement, one snapshot: the counters and the oldest kept entry's date.
const BOUNDS: &str = "select floor, last, (select date_ms from handled_txnlog where id = (select min(id) from \
                      handled_txnlog)) from handled_txnlog_state where one = 1";
const CLEAR: &str = "delete from handled_txnlog";
const SAVE_STATE: Sql = Sql {
    pg: "update handled_txnlog_state set last = $1, floor = $2, last_date_ms = $3 where one = 1",
    my: "update handled_txnlog_state set last = ?, floor = ?, last_date_ms = ? where one = 1",
};
/// A state table created by hand from the DDL shown may lack its row.
const STATE_ROW: Sql = Sql {
    pg: "insert into handled_txnlog_state (one, last, floor, last_date_ms) values (1, 0, 0, 0) \
         on conflict do nothing",
    my: "insert ignore into handled_txnlog_state (one, last, floor, last_date_ms) values (1, 0, 0, 0)",
};
const READ: Sql = Sql {
    pg: "select id, date_ms, action, handle from handled_txnlog where id > $1 order by id limit $2",
    my: "select id, date_ms, action, handle from handled_txnlog where id > ? order by id limit ?",
};
/// Dates never decrease along the log: the entries dated before form a prefix.
const PRUNABLE: Sql = Sql {
    pg: "select max(id) from handled_txnlog where date_ms < $1",
    my: "select max(id) from handled_txnlog where date_ms < ?",
};
const PRUNE: Sql =
    Sql { pg: "delete from handled_txnlog where id <= $1", my: "delete from handled_txnlog where id <= ?" };
const PG_APPEND: &str = "insert into handled_txnlog (id, date_ms, action, handle) \
                         select * from unnest($1::int8[], $2::int8[], $3::int2[], $4::bytea[])";
/// PostgreSQL logs local changes in one statement: the state row updated
/// (locked) and the entries inserted, so that the row is held for one round
/// trip and the commit. The entries' ids follow the row's `last` before it.
const PG_LOG: &str = "with s as (update handled_txnlog_state set last = last + $1, \
                      last_date_ms = greatest(last_date_ms, $2) where one = 1 returning last, last_date_ms), \
                      i as (insert into handled_txnlog (id, date_ms, action, handle) \
                      select s.last - $1 + u.n, s.last_date_ms, u.a, u.h from s, \
                      unnest($3::int2[], $4::bytea[]) with ordinality as u(a, h, n)) \
                      select last from s";

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("sql: handled_txnlog: {what}"))
}

/// This node's view of the log: who to wake.
pub(crate) struct SqlTxnLog {
    notify: tokio::sync::watch::Sender<u64>,
}

impl SqlTxnLog {
    /// The state row made sure of, and the poll started (it ends with the
    /// store: a weak reference).
    pub(super) async fn open(pool: &Pool, poll: Duration) -> Result<Arc<SqlTxnLog>, StoreError> {
        let d = pool.dialect();
        on_pool!(pool, p => sqlx::query(d.sql(&STATE_ROW)).execute(p).await.map(drop)).map_err(backend)?;
        let last = read_last(pool).await?;
        let log = Arc::new(SqlTxnLog { notify: tokio::sync::watch::Sender::new(last) });
        tokio::spawn(poll_state(Arc::downgrade(&log), pool.clone(), poll));
        Ok(log)
    }

    /// After a commit that logged up to `last`. Never backwards: a poll that
    /// read the row before this commit may publish after it.
    pub(super) fn committed(&self, last: u64) {
        self.notify.send_if_modified(|v| {
            let moved = last > *v;
            *v = (*v).max(last);
            moved
        });
    }

    pub(super) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.notify.subscribe()
    }
}

async fn read_last(pool: &Pool) -> Result<u64, StoreError> {
    let last: Option<i64> = on_pool!(pool, p => sqlx::query_scalar(LAST).fetch_optional(p).await).map_err(backend)?;
    last.map(|n| n.max(0) as u64).ok_or_else(|| corrupt("handled_txnlog_state has no row"))
}

/// Wake subscribers for what other nodes logged. A value lower than the one
/// published (a reset elsewhere) is taken once two polls agree on it.
async fn poll_state(log: Weak<SqlTxnLog>, pool: Pool, every: Duration) {
    let mut lower = None;
    loop {
        tokio::time::sleep(every).await;
        let Some(log) = log.upgrade() else { return };
        match read_last(&pool).await {
            Ok(last) if last >= *log.notify.borrow() => {
                lower = None;
                log.committed(last);
            }
            Ok(last) if lower == Some(last) => drop(log.notify.send_replace(last)),
            Ok(last) => lower = Some(last),
            Err(StoreError::Closed) => return,
            Err(e) => tracing::debug!("sql: transaction log poll: {e}"),
        }
    }
}

impl Tx {
    /// Lock the log's state row, the last lock of a logged write.
    pub(super) async fn lock_log(&mut self) -> Result<TxnLogState, sqlx::Error> {
        let (last, floor, date): (i64, i64, i64) = on_tx!(self, c => sqlx::query_as(LOCK_STATE).fetch_one(c).await)?;
        Ok(TxnLogState { last: last.max(0) as u64, floor: floor.max(0) as u64, last_date_ms: date.max(0) as u64 })
    }

    pub(super) async fn save_log(&mut self, s: &TxnLogState) -> Result<(), sqlx::Error> {
        let sql = self.dialect().sql(&SAVE_STATE);
        let (last, floor, date) = (int(s.last), int(s.floor), int(s.last_date_ms));
        on_tx!(self, c => sqlx::query(sql).bind(last).bind(floor).bind(date).execute(c).await.map(drop))
    }

    pub(super) async fn append(&mut self, entries: &[TxnEntry]) -> Result<(), sqlx::Error> {
        if entries.is_empty() {
            return Ok(());
        }
        match self {
            Tx::Postgres(t) => {
                sqlx::query(PG_APPEND)
                    .bind(entries.iter().map(|e| int(e.id)).collect::<Vec<_>>())
                    .bind(entries.iter().map(|e| int(e.date_ms)).collect::<Vec<_>>())
                    .bind(entries.iter().map(|e| i16::from(e.action.code())).collect::<Vec<_>>())
                    .bind(entries.iter().map(|e| e.handle.clone()).collect::<Vec<_>>())
                    .execute(&mut **t)
                    .await?;
            }
            Tx::MySql(t) => {
                for part in entries.chunks(INSERT_ENTRIES) {
                    let sql = format!(
                        "insert into handled_txnlog (id, date_ms, action, handle) values {}",
                        vec!["(?, ?, ?, ?)"; part.len()].join(", ")
                    );
                    let mut q = sqlx::query(&sql);
                    for e in part {
                        q = q.bind(int(e.id)).bind(int(e.date_ms)).bind(i16::from(e.action.code())).bind(&e.handle);
                    }
                    q.execute(&mut **t).await?;
                }
            }
        }
        Ok(())
    }
}

impl SqlCore {
    pub(super) fn txn(&self) -> Result<&SqlTxnLog, StoreError> {
        self.txn.as_deref().ok_or_else(|| {
            StoreError::Unsupported(
                "sql: no transaction log is kept (set replication_log = true in [sql] to be a replication source \
                 or a mirror)"
                    .into(),
            )
        })
    }

    /// Log local `changes` in `tx`, right before its commit: the new last id,
    /// `None` with the log off or nothing to log. Publish it once committed
    /// ([`SqlStore::published`]).
    pub(super) async fn log_in(
        &self,
        tx: &mut Tx,
        changes: impl IntoIterator<Item = (TxnAction, &[u8])>,
    ) -> Result<Option<u64>, sqlx::Error> {
        if self.txn.is_none() {
            return Ok(None);
        }
        let changes: Vec<_> = changes.into_iter().collect();
        if changes.is_empty() {
            return Ok(None);
        }
        if let Tx::Postgres(t) = tx {
            let last: i64 = sqlx::query_scalar(PG_LOG)
                .bind(changes.len() as i64)
                .bind(int(crate::clock::machine_ms()))
                .bind(changes.iter().map(|(a, _)| i16::from(a.code())).collect::<Vec<_>>())
                .bind(changes.iter().map(|(_, h)| h.to_vec()).collect::<Vec<_>>())
                .fetch_one(&mut **t)
                .await?;
            return Ok(Some(last.max(0) as u64));
        }
        let mut state = tx.lock_log().await?;
        let entries: Vec<TxnEntry> = changes.into_iter().map(|(a, h)| state.next(a, h)).collect();
        tx.append(&entries).await?;
        tx.save_log(&state).await?;
        Ok(Some(state.last))
    }

    /// Wake subscribers for a committed `last` ([`SqlStore::log_in`]).
    pub(super) fn published(&self, last: Option<u64>) {
        if let (Some(txn), Some(last)) = (&self.txn, last) {
            txn.committed(last);
        }
    }

    pub(super) async fn log_read(&self, after: u64, limit: usize) -> Result<Vec<TxnEntry>, StoreError> {
        self.check_open()?;
        self.txn()?;
        let limit = limit.min(TXN_LOG_READ_MAX);
        if limit == 0 || after >= i64::MAX as u64 {
            return Ok(Vec::new());
        }
        let sql = self.pool.dialect().sql(&READ);
        let rows = self
            .pool
            .retrying_lost(|| async {
                on_pool!(&self.pool, p => {
                    let rows = sqlx::query(sql).bind(int(after)).bind(limit as i64).fetch_all(p).await?;
                    rows.iter()
                        .map(|r| Ok((r.try_get::<i64, _>(0)?, r.try_get::<i64, _>(1)?, r.try_get::<i16, _>(2)?,
                            r.try_get::<Vec<u8>, _>(3)?)))
                        .collect::<Result<Vec<_>, sqlx::Error>>()
                })
            })
            .await
            .map_err(backend)?;
        rows.into_iter()
            .map(|(id, date, action, handle)| {
                let action = u8::try_from(action).ok().and_then(TxnAction::from_code);
                let action = action.ok_or_else(|| corrupt(&format!("entry {id}: unknown action")))?;
                Ok(TxnEntry { id: id.max(0) as u64, date_ms: date.max(0) as u64, action, handle })
            })
            .collect()
    }

    pub(super) async fn log_bounds(&self) -> Result<TxnLogBounds, StoreError> {
        self.check_open()?;
        self.txn()?;
        let row: Option<(i64, i64, Option<i64>)> =
            on_pool!(&self.pool, p => sqlx::query_as(BOUNDS).fetch_optional(p).await).map_err(backend)?;
        let (floor, last, first) = row.ok_or_else(|| corrupt("handled_txnlog_state has no row"))?;
        Ok(TxnLogBounds {
            floor: floor.max(0) as u64,
            last: last.max(0) as u64,
            first_date_ms: first.map(|d| d.max(0) as u64),
        })
    }

    /// Remove the entries dated before `before_ms`, raising the floor.
    pub(super) async fn log_prune(&self, before_ms: u64) -> Result<u64, StoreError> {
        self.check_writable()?;
        self.txn()?;
        let d = self.pool.dialect();
        let removed = async {
            let mut tx = self.pool.begin().await?;
            let mut state = tx.lock_log().await?;
            let sql = d.sql(&PRUNABLE);
            let highest: Option<i64> =
                on_tx!(&mut tx, c => sqlx::query_scalar(sql).bind(int(before_ms)).fetch_one(c).await)?;
            let Some(highest) = highest else {
                tx.rollback().await?;
                return Ok(0);
            };
            let sql = d.sql(&PRUNE);
            let removed = on_tx!(&mut tx, c => sqlx::query(sql).bind(highest).execute(c).await?.rows_affected());
            state.floor = state.floor.max(highest.max(0) as u64);
            tx.save_log(&state).await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(removed)
        };
        removed.await.map_err(backend)
    }

    /// A mirror's dump: floor = last = `id`, every entry dropped.
    pub(super) async fn log_reset(&self, id: u64) -> Result<(), StoreError> {
        self.check_writable()?;
        let txn = self.txn()?;
        let done = async {
            let mut tx = self.pool.begin().await?;
            let mut state = tx.lock_log().await?;
            on_tx!(&mut tx, c => sqlx::query(CLEAR).execute(c).await.map(drop))?;
            state.reset(id);
            tx.save_log(&state).await?;
            tx.commit().await
        };
        done.await.map_err(backend)?;
        // Lower too: the log goes on from the dump's id.
        txn.notify.send_replace(id);
        Ok(())
    }
}
