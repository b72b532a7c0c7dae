//! Handles: point reads, compare-and-set writes, listing and bulk loads on
//! Handle.Net's `handles` table (one row per value), on either database.
//!
//! A write is one transaction: it serialises with other writers of the
//! handle (PostgreSQL: a transaction-scoped advisory lock, postgres.rs;
//! MariaDB: InnoDB's next-key locks, mysql.rs), so that `handled` nodes
//! sharing the database cannot both create an absent handle, then locks the
//! handle's rows (`for update`, so a concurrent `update` by another program
//! waits or is waited for), compares, deletes the old rows and inserts the
//! new ones. No lost update, and a reader sees the old values or the new,
//! never a mix. Where custom statements are given, the read, the delete and
//! the inserts are theirs, in the same transaction (custom_writes.rs). With
//! `replication_log`, the write's log entry is its last statement before the
//! commit (txn_log.rs). Under load, one transaction does this for several
//! handles at once (write_batch.rs).

use std::time::{Duration, Instant};

use super::custom::Stmt;
use super::db::Dialect;
use super::db::{on_pool, Sql, Tx};
use super::error::{backend, is_lost_race, is_retryable_write, is_unique_violation};
use super::layout::{Col, Queries};
use super::values::{canonical, rows_of, ValueRow};
use super::{mysql, postgres, SqlCore};
use crate::{Expect, HandleRecord, InvalidRecord, Refused, StoreError, TxnAction};

/// Keys per transaction of a bulk load: bounds the locks one holds.
const PUT_CHUNK: usize = 500;
/// Tries of a write that lost a race: an insert beaten by a writer that takes
/// no lock of ours (Handle.Net, an application's own `insert`), or, on
/// MariaDB, the deadlock by which InnoDB picks one of two racing creators
/// (mysql.rs). A refusal (error.rs) is never tried again. A lost insert means
/// another writer committed, so this bounds the writers racing for one handle.
pub(super) const WRITE_TRIES: usize = 32;
/// How long a write that keeps losing deadlocks is tried again, its tries
/// spent or not. A deadlock's loser is rolled back at once while the winner
/// runs on, and InnoDB picks the transaction that has done least, so a loser
/// that starts again before the winner commits loses again: bulk loads in
/// neighbouring ranges under SERIALIZABLE (a writable view's custom
/// statements, a statement per value) do so for as long as the winners ahead
/// of it run, one after another, as lock waits would: 4 s for the last of
/// four loads of 250 handles on a busy 2-core machine, 29 tries.
const DEADLOCK_PATIENCE: Duration = Duration::from_secs(30);

const COUNT_HANDLES: Sql = Sql {
    pg: "select count(distinct handle) from handles",
    my: "select count(distinct cast(handle as binary)) from handles",
};

/// A row of [`Queries::value_columns`] as a value. `refs` is `text` on PostgreSQL and
/// a `blob` on MariaDB (Handle.Net's schemas): read as text, else as bytes.
macro_rules! value_of {
    ($row:expr) => {{
        let row = $row;
        let refs: Option<String> = match row.try_get::<Option<String>, _>(6) {
            Ok(text) => text,
            Err(_) => row.try_get::<Option<Vec<u8>>, _>(6)?.map(|b| String::from_utf8_lossy(&b).into_owned()),
        };
        Ok::<_, sqlx::Error>(
            NullableRow {
                idx: row.try_get(0)?,
                value_type: row.try_get(1)?,
                data: row.try_get(2)?,
                ttl_type: row.try_get(3)?,
                ttl: row.try_get(4)?,
                timestamp: row.try_get(5)?,
                refs,
                admin_read: row.try_get(7)?,
                admin_write: row.try_get(8)?,
                pub_read: row.try_get(9)?,
                pub_write: row.try_get(10)?,
            }
            .into_value(),
        )
    }};
}
pub(super) use value_of;

pub(super) fn record_of(values: Vec<handled_proto::HandleValue>) -> Option<HandleRecord> {
    (!values.is_empty()).then(|| HandleRecord::new(values))
}

impl Tx {
    pub(super) fn dialect(&self) -> Dialect {
        match self {
            Tx::Postgres(_) => Dialect::Postgres,
            Tx::MySql(_) => Dialect::MySql,
        }
    }

    async fn delete_keys(&mut self, q: &Queries, keys: &[&[u8]]) -> Result<(), sqlx::Error> {
        match self {
            Tx::Postgres(t) => postgres::delete_keys(t, q, keys).await,
            Tx::MySql(t) => mysql::delete_keys(t, keys).await,
        }
    }

    async fn insert(&mut self, q: &Queries, rows: &[(&[u8], &ValueRow)]) -> Result<(), sqlx::Error> {
        if rows.is_empty() {
            return Ok(());
        }
        match self {
            Tx::Postgres(t) => postgres::insert(t, &q.pg_insert, rows).await,
            Tx::MySql(t) => mysql::insert(t, rows).await,
        }
    }
}

pub(super) fn holds(expect: &Expect, current: Option<&HandleRecord>) -> bool {
    // The table keeps values in index order and no spelling: compare what it can hold.
    crate::cas::holds(expect.precondition(), current, |want, c| canonical(want) == c.values)
}

impl SqlCore {
    pub(super) async fn get_record(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        self.check_open()?;
        if let Some(p) = self.custom.get(Stmt::GetHandle) {
            return self.custom_get(p, key).await;
        }
        if !self.storable_key(key) {
            return Ok(None); // no such row can exist
        }
        self.reads.get(key).await
    }

    /// The keys' rows deleted, by `delete_handle_stmt` where it is custom.
    pub(super) async fn delete_in(&self, tx: &mut Tx, keys: &[&[u8]]) -> Result<(), sqlx::Error> {
        match self.custom.get(Stmt::DeleteHandle) {
            Some(p) => tx.custom_delete(p, keys).await,
            None => tx.delete_keys(&self.queries, keys).await,
        }
    }

    /// The rows inserted, by `create_handle_stmt` where it is custom.
    pub(super) async fn insert_in(&self, tx: &mut Tx, rows: &[(&[u8], &ValueRow)]) -> Result<(), sqlx::Error> {
        match self.custom.get(Stmt::CreateHandle) {
            Some(p) => tx.custom_create(p, rows).await,
            None => tx.insert(&self.queries, rows).await,
        }
    }

    pub(super) async fn scan(
        &self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        self.check_open()?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        if self.custom.is_view()
            || [Stmt::ScanHandles, Stmt::ScanByPrefix].iter().any(|s| self.custom.get(*s).is_some())
        {
            return self.custom_scan(prefix, start_after, limit).await;
        }
        // A range on the key's bytes (or text in byte order: layout.rs), not
        // `like`, which would need escaping and could not use PostgreSQL's
        // index for binary keys.
        let (d, l) = (self.pool.dialect(), self.options.layout);
        let range = l.range(d, Col::Handle, prefix, start_after);
        let sql = l.scan(d, "handles", Col::Handle, &range);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        on_pool!(&self.pool, p => {
            let mut q = sqlx::query_scalar::<_, Vec<u8>>(&sql).bind(range.bound(prefix));
            if let Some(to) = &range.to {
                q = q.bind(range.bound(to));
            }
            if let Some(after) = start_after {
                q = q.bind(range.bound(after));
            }
            q.bind(limit).fetch_all(p).await
        })
        .map_err(backend)
    }

    pub(super) async fn count_handles(&self) -> Result<u64, StoreError> {
        self.check_open()?;
        if self.custom.is_view() || self.custom.get(Stmt::ScanHandles).is_some() {
            return self.custom_count().await;
        }
        let sql = self.pool.dialect().sql(&COUNT_HANDLES);
        let n: i64 = on_pool!(&self.pool, p => sqlx::query_scalar(sql).fetch_one(p).await).map_err(backend)?;
        Ok(n.max(0) as u64)
    }

    pub(super) async fn put_records(&self, records: Vec<(Vec<u8>, HandleRecord)>) -> Result<(), StoreError> {
        self.check_writable()?;
        // The later of a key's records wins; all are checked before anything is written.
        let latest: std::collections::BTreeMap<Vec<u8>, HandleRecord> = records.into_iter().collect();
        let mut rows = Vec::with_capacity(latest.len());
        for (key, record) in latest {
            self.check_key(&key)?;
            let r = self.rows_of(&key, &record)?;
            rows.push((key, r));
        }
        for chunk in rows.chunks(PUT_CHUNK) {
            // Bulk loads of one process take turns, a chunk each: together they
            // would gain nothing but lock waits, each statement's counted against
            // the statement timeout, and, through a writable view's custom
            // statements (a statement per value, SERIALIZABLE), deadlocks for as
            // long as the transactions ahead run.
            let _turn = self.bulk.lock().await;
            let started = Instant::now();
            match retrying_write(|| self.put_chunk(chunk)).await {
                Ok(()) => self.stats.committed(0, chunk.len() as u64, true, started.elapsed().as_micros() as u64),
                Err(e) => {
                    self.stats.failed(0);
                    return Err(self.write_error(e));
                }
            }
        }
        Ok(())
    }

    async fn put_chunk(&self, chunk: &[(Vec<u8>, Vec<ValueRow>)]) -> Result<(), sqlx::Error> {
        let keys: Vec<&[u8]> = chunk.iter().map(|(k, _)| k.as_slice()).collect();
        let mut tx = self.begin_write(&keys).await?;
        // With the log, each handle is a Create or an Update (txn_apply.rs).
        let existing = match self.txn {
            Some(_) => self.existing_in(&mut tx, &keys).await?,
            None => Default::default(),
        };
        self.delete_in(&mut tx, &keys).await?;
        let pairs: Vec<(&[u8], &ValueRow)> =
            chunk.iter().flat_map(|(k, rows)| rows.iter().map(move |r| (k.as_slice(), r))).collect();
        self.insert_in(&mut tx, &pairs).await?;
        let changes = chunk.iter().filter_map(|(k, rows)| {
            let action = TxnAction::of_handle_write(existing.contains(k), !rows.is_empty());
            action.map(|a| (a, k.as_slice()))
        });
        let logged = self.log_in(&mut tx, changes).await?;
        tx.commit().await?;
        self.published(logged);
        Ok(())
    }

    /// A write's transaction, serialised with other writers of these keys:
    /// PostgreSQL's advisory locks, taken as it begins (postgres.rs); on
    /// MariaDB the locking reads and deletes take InnoDB's next-key locks (mysql.rs).
    pub(super) async fn begin_write(&self, keys: &[&[u8]]) -> Result<Tx, sqlx::Error> {
        let opening = (self.pool.dialect() == Dialect::Postgres).then(|| postgres::begin_locking(keys));
        self.pool.begin_with(opening).await
    }

    /// Whether the key can be a row of this database: text columns hold
    /// UTF-8 (MariaDB's `varchar` handles, the text layout: layout.rs).
    fn storable_key(&self, key: &[u8]) -> bool {
        self.options.layout.holds(self.pool.dialect(), Col::Handle, key)
    }

    pub(super) fn check_key(&self, key: &[u8]) -> Result<(), StoreError> {
        if self.storable_key(key) {
            return Ok(());
        }
        Err(StoreError::Invalid(InvalidRecord(self.options.layout.refusal(self.pool.dialect(), Col::Handle, key))))
    }

    /// The rows of `key`'s record, each one the columns (or the custom
    /// `create_handle_stmt`'s parameters) can hold.
    pub(super) fn rows_of(&self, key: &[u8], record: &HandleRecord) -> Result<Vec<ValueRow>, InvalidRecord> {
        let (d, l) = (self.pool.dialect(), self.options.layout);
        let rows = rows_of(record)?;
        if let Some(p) = self.custom.get(Stmt::CreateHandle) {
            for r in &rows {
                super::custom_writes::check_create_row(p, key, r)?;
            }
            return Ok(rows);
        }
        match rows.iter().find(|r| !l.holds(d, Col::Type, &r.value_type)) {
            Some(r) => Err(InvalidRecord(l.refusal(d, Col::Type, &r.value_type))),
            None => Ok(rows),
        }
    }

    /// A write's error once its tries are spent: a unique violation that
    /// outlived [`WRITE_TRIES`] tries (each finding the handle absent) is no
    /// race but a key the table holds in another spelling, refused for good.
    pub(super) fn write_error(&self, e: sqlx::Error) -> StoreError {
        if is_unique_violation(&e) {
            return StoreError::Refused {
                what: Refused::Taken,
                message: format!(
                    "sql: the database refused the handle through {WRITE_TRIES} tries: a unique key of its table \
                     holds another row it takes for this one ({e})"
                ),
            };
        }
        backend(e)
    }
}

/// Run a write transaction, again after a lost race (an insert beaten by
/// another writer: [`WRITE_TRIES`]; a deadlock or a serialization failure:
/// those tries or [`DEADLOCK_PATIENCE`], whichever lasts longer; never after a
/// refusal, error.rs) with a short, growing, jittered pause, so that racing
/// writers do not meet again in step.
pub(super) async fn retrying_write<T, F, Fut>(mut once: F) -> Result<T, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
{
    let started = Instant::now();
    let mut tries = 0;
    loop {
        match once().await {
            Err(e)
                if is_retryable_write(&e)
                    && (tries + 1 < WRITE_TRIES || is_lost_race(&e) && started.elapsed() < DEADLOCK_PATIENCE) =>
            {
                tries += 1;
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .subsec_nanos();
                let jitter = u64::from(nanos) % 5;
                tokio::time::sleep(Duration::from_millis((tries as u64).min(20) + jitter)).await;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn present_compares_what_the_table_holds() {
        use handled_proto::HandleValue;
        let a = HandleValue::new(1, "URL", "a");
        let b = HandleValue::new(2, "EMAIL", "b");
        let stored = HandleRecord::new(vec![a.clone(), b.clone()]);
        let unsorted = HandleRecord::named(vec![b, a], b"X/y", b"X/Y");
        assert!(holds(&Expect::Present(unsorted), Some(&stored)));
        assert!(!holds(&Expect::Present(stored.clone()), None));
        assert!(!holds(&Expect::Absent, Some(&stored)));
        assert!(holds(&Expect::Any, None));
    }
}
