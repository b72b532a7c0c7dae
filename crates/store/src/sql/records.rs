//! Handles: point reads, compare-and-set writes, listing and bulk loads on
//! Handle.Net's `handles` table (one row per value).
//!
//! A write is one transaction: it takes a transaction-scoped advisory lock on
//! the handle (so that `handled` nodes sharing the database serialise their
//! writes of one handle, creates of an absent handle included, which row
//! locks alone cannot do: there is no row yet), then locks the handle's rows
//! (`for update`, so a concurrent `update` by another program waits or is
//! waited for), compares, deletes the old rows and inserts the new ones.
//! No lost update, and a reader sees the old values or the new, never a mix.

use std::time::Instant;

use sha2::{Digest, Sha256};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use super::error::{backend, is_connection_lost, is_unique_violation};
use super::values::{canonical, rows_of, NullableRow, ValueRow};
use super::SqlStore;
use crate::{Expect, HandleRecord, StoreError, SwapOutcome};

/// First key of our advisory locks (`pg_advisory_xact_lock(class, hash)`):
/// "hdld", so that they stay apart from other applications' locks.
const LOCK_CLASS: i32 = 0x6864_6c64;
/// Keys per transaction of a bulk load: bounds the advisory locks one holds
/// (they share the lock table with everything else in the database).
const PUT_CHUNK: usize = 500;
/// Tries of a write that lost an insert race to a writer that takes no
/// advisory lock (Handle.Net, an application's own `insert`).
const WRITE_TRIES: usize = 3;

const SELECT_VALUES: &str = "select idx, type, data, ttl_type, ttl, timestamp, refs, admin_read, admin_write, \
                             pub_read, pub_write from handles where handle = $1 order by idx";

const INSERT_VALUES: &str = "insert into handles (handle, idx, type, data, ttl_type, ttl, timestamp, refs, \
     admin_read, admin_write, pub_read, pub_write) select * from unnest($1::bytea[], $2::int4[], $3::bytea[], \
     $4::bytea[], $5::int2[], $6::int4[], $7::int4[], $8::text[], $9::bool[], $10::bool[], $11::bool[], $12::bool[])";

fn lock_hash(key: &[u8]) -> i32 {
    let d = Sha256::digest(key);
    i32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

fn value_of(row: &PgRow) -> Result<handled_proto::HandleValue, sqlx::Error> {
    Ok(NullableRow {
        idx: row.try_get(0)?,
        value_type: row.try_get(1)?,
        data: row.try_get(2)?,
        ttl_type: row.try_get(3)?,
        ttl: row.try_get(4)?,
        timestamp: row.try_get(5)?,
        refs: row.try_get(6)?,
        admin_read: row.try_get(7)?,
        admin_write: row.try_get(8)?,
        pub_read: row.try_get(9)?,
        pub_write: row.try_get(10)?,
    }
    .into_value())
}

async fn read(conn: &mut PgConnection, key: &[u8], lock: bool) -> Result<Option<HandleRecord>, sqlx::Error> {
    let sql = if lock { format!("{SELECT_VALUES} for update") } else { SELECT_VALUES.to_owned() };
    let rows = sqlx::query(&sql).bind(key).fetch_all(conn).await?;
    if rows.is_empty() {
        return Ok(None);
    }
    let values = rows.iter().map(value_of).collect::<Result<Vec<_>, _>>()?;
    Ok(Some(HandleRecord::new(values)))
}

/// Insert `rows` of each key (keys and rows side by side).
async fn insert(conn: &mut PgConnection, rows: &[(&[u8], &ValueRow)]) -> Result<(), sqlx::Error> {
    if rows.is_empty() {
        return Ok(());
    }
    let col = |f: &dyn Fn(&ValueRow) -> Vec<u8>| rows.iter().map(|(_, r)| f(r)).collect::<Vec<_>>();
    let bools = |f: &dyn Fn(&ValueRow) -> bool| rows.iter().map(|(_, r)| f(r)).collect::<Vec<_>>();
    sqlx::query(INSERT_VALUES)
        .bind(rows.iter().map(|(k, _)| k.to_vec()).collect::<Vec<_>>())
        .bind(rows.iter().map(|(_, r)| r.idx).collect::<Vec<_>>())
        .bind(col(&|r| r.value_type.clone()))
        .bind(col(&|r| r.data.clone()))
        .bind(rows.iter().map(|(_, r)| r.ttl_type).collect::<Vec<_>>())
        .bind(rows.iter().map(|(_, r)| r.ttl).collect::<Vec<_>>())
        .bind(rows.iter().map(|(_, r)| r.timestamp).collect::<Vec<_>>())
        .bind(rows.iter().map(|(_, r)| r.refs.clone()).collect::<Vec<_>>())
        .bind(bools(&|r| r.admin_read))
        .bind(bools(&|r| r.admin_write))
        .bind(bools(&|r| r.pub_read))
        .bind(bools(&|r| r.pub_write))
        .execute(conn)
        .await?;
    Ok(())
}

fn holds(expect: &Expect, current: Option<&HandleRecord>) -> bool {
    match (expect, current) {
        (Expect::Any, _) => true,
        (Expect::Absent, c) => c.is_none(),
        // The table keeps values in index order and no spelling: compare what it can hold.
        (Expect::Present(want), Some(c)) => canonical(want) == c.values,
        (Expect::Present(_), None) => false,
    }
}

impl SqlStore {
    pub(super) async fn get_record(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        self.check_open()?;
        let mut tries = 0;
        loop {
            let attempt = async {
                let mut conn = self.pool.acquire().await?;
                read(&mut conn, key, false).await
            };
            match attempt.await {
                Ok(r) => return Ok(r),
                // Once: the pool then opens a fresh connection.
                Err(e) if is_connection_lost(&e) && tries == 0 => tries += 1,
                Err(e) => return Err(backend(e)),
            }
        }
    }

    pub(super) async fn swap_record(
        &self,
        key: &[u8],
        expect: Expect,
        new: Option<HandleRecord>,
    ) -> Result<SwapOutcome, StoreError> {
        self.check_writable()?;
        let rows = new.as_ref().map(rows_of).transpose()?;
        let started = Instant::now();
        let mut tries = 0;
        let result = loop {
            match self.swap_once(key, &expect, rows.as_deref()).await {
                Err(e) if is_unique_violation(&e) && tries + 1 < WRITE_TRIES => tries += 1,
                other => break other.map_err(backend),
            }
        };
        match &result {
            Ok(_) => self.stats.committed(1, 0, true, started.elapsed().as_micros() as u64),
            Err(_) => self.stats.failed(1),
        }
        result
    }

    async fn swap_once(
        &self,
        key: &[u8],
        expect: &Expect,
        rows: Option<&[ValueRow]>,
    ) -> Result<SwapOutcome, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("select pg_advisory_xact_lock($1, $2)")
            .bind(LOCK_CLASS)
            .bind(lock_hash(key))
            .execute(&mut *tx)
            .await?;
        let current = read(&mut tx, key, true).await?;
        if !holds(expect, current.as_ref()) {
            tx.rollback().await?;
            return Ok(SwapOutcome::Conflict { current });
        }
        if current.is_none() && rows.is_none() {
            tx.rollback().await?; // nothing to delete, nothing to write
            return Ok(SwapOutcome::Done { previous: None });
        }
        if current.is_some() {
            sqlx::query("delete from handles where handle = $1").bind(key).execute(&mut *tx).await?;
        }
        if let Some(rows) = rows {
            let pairs: Vec<(&[u8], &ValueRow)> = rows.iter().map(|r| (key, r)).collect();
            insert(&mut tx, &pairs).await?;
        }
        tx.commit().await?;
        Ok(SwapOutcome::Done { previous: current })
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
        // A range on the primary key (bytea sorts bytewise), not `like`, which
        // would need escaping and could not use the index for binary keys.
        let end = prefix_end(prefix);
        let mut sql = String::from("select handle from handles where handle >= $1");
        let mut n = 1;
        if end.is_some() {
            n += 1;
            sql.push_str(&format!(" and handle < ${n}"));
        }
        if start_after.is_some() {
            n += 1;
            sql.push_str(&format!(" and handle > ${n}"));
        }
        sql.push_str(&format!(" group by handle order by handle limit ${}", n + 1));
        let mut q = sqlx::query_scalar::<_, Vec<u8>>(&sql).bind(prefix);
        if let Some(end) = &end {
            q = q.bind(end.as_slice());
        }
        if let Some(after) = start_after {
            q = q.bind(after);
        }
        q.bind(i64::try_from(limit).unwrap_or(i64::MAX)).fetch_all(&self.pool).await.map_err(backend)
    }

    pub(super) async fn count_handles(&self) -> Result<u64, StoreError> {
        self.check_open()?;
        let n: i64 = sqlx::query_scalar("select count(distinct handle) from handles")
            .fetch_one(&self.pool)
            .await
            .map_err(backend)?;
        Ok(n.max(0) as u64)
    }

    pub(super) async fn put_records(&self, records: Vec<(Vec<u8>, HandleRecord)>) -> Result<(), StoreError> {
        self.check_writable()?;
        // The later of a key's records wins; all are checked before anything is written.
        let latest: std::collections::BTreeMap<Vec<u8>, HandleRecord> = records.into_iter().collect();
        let mut rows = Vec::with_capacity(latest.len());
        for (key, record) in latest {
            rows.push((key, rows_of(&record)?));
        }
        for chunk in rows.chunks(PUT_CHUNK) {
            let started = Instant::now();
            match self.put_chunk(chunk).await {
                Ok(()) => self.stats.committed(0, chunk.len() as u64, true, started.elapsed().as_micros() as u64),
                Err(e) => {
                    self.stats.failed(0);
                    return Err(backend(e));
                }
            }
        }
        Ok(())
    }

    async fn put_chunk(&self, chunk: &[(Vec<u8>, Vec<ValueRow>)]) -> Result<(), sqlx::Error> {
        let mut hashes: Vec<i32> = chunk.iter().map(|(k, _)| lock_hash(k)).collect();
        // One order for every writer, so that two bulk loads cannot deadlock.
        hashes.sort_unstable();
        hashes.dedup();
        let mut tx = self.pool.begin().await?;
        sqlx::query("select pg_advisory_xact_lock($1, h) from unnest($2::int4[]) as h")
            .bind(LOCK_CLASS)
            .bind(&hashes)
            .execute(&mut *tx)
            .await?;
        let keys: Vec<Vec<u8>> = chunk.iter().map(|(k, _)| k.clone()).collect();
        sqlx::query("delete from handles where handle = any($1::bytea[])").bind(&keys).execute(&mut *tx).await?;
        let pairs: Vec<(&[u8], &ValueRow)> =
            chunk.iter().flat_map(|(k, rows)| rows.iter().map(move |r| (k.as_slice(), r))).collect();
        insert(&mut tx, &pairs).await?;
        tx.commit().await
    }
}

/// The smallest key above every key that starts with `prefix`; `None` when
/// there is none (the prefix is empty or all 0xff).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_bounds_the_range() {
        assert_eq!(prefix_end(b"20.5000/"), Some(b"20.50000".to_vec()));
        assert_eq!(prefix_end(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }

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
