//! What only PostgreSQL can say: the advisory lock a write takes, and bulk
//! inserts and deletes with arrays (one statement whatever the number of rows).

use sha2::{Digest, Sha256};
use sqlx::PgConnection;

use super::layout::{PgKeys, Queries};
use super::values::ValueRow;

/// First key of our advisory locks (`pg_advisory_xact_lock(class, hash)`):
/// "hdld", so that they stay apart from other applications' locks.
const LOCK_CLASS: i32 = 0x6864_6c64;

fn lock_hash(key: &[u8]) -> i32 {
    let d = Sha256::digest(key);
    i32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

/// A transaction's opening: `begin`, then a transaction-scoped advisory lock
/// on each key, in one round trip (a simple query of two statements), so
/// that `handled` nodes sharing the database serialise their writes of one
/// handle, creates of an absent handle included, which row locks alone cannot
/// do: there is no row yet. Taken in one order by every writer, so two bulk
/// loads cannot deadlock. The text holds only numbers computed here.
pub(crate) fn begin_locking(keys: &[&[u8]]) -> String {
    let mut hashes: Vec<i32> = keys.iter().map(|k| lock_hash(k)).collect();
    hashes.sort_unstable();
    hashes.dedup();
    let list: Vec<String> = hashes.iter().map(i32::to_string).collect();
    format!("begin; select pg_advisory_xact_lock({LOCK_CLASS}, h) from unnest('{{{}}}'::int4[]) as h", list.join(","))
}

/// Delete the rows of `keys` (layout.rs, `Queries::pg_delete`: one array).
pub(crate) async fn delete_keys(conn: &mut PgConnection, q: &Queries, keys: &[&[u8]]) -> Result<(), sqlx::Error> {
    sqlx::query(&q.pg_delete).bind(PgKeys::new(keys, q.handle_text)).execute(conn).await?;
    Ok(())
}

/// Insert `rows` of each key (keys and rows side by side) with `sql`
/// (layout.rs, `Queries::pg_insert`: one array per column, names as bytes).
pub(crate) async fn insert(conn: &mut PgConnection, sql: &str, rows: &[(&[u8], &ValueRow)]) -> Result<(), sqlx::Error> {
    let col = |f: &dyn Fn(&ValueRow) -> Vec<u8>| rows.iter().map(|(_, r)| f(r)).collect::<Vec<_>>();
    let bools = |f: &dyn Fn(&ValueRow) -> bool| rows.iter().map(|(_, r)| f(r)).collect::<Vec<_>>();
    sqlx::query(sql)
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
