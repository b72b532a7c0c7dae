//! The keyspace and its tables, created and migrated by `handled` itself.
//!
//! Race-safe when several nodes start at once against an empty cluster: every
//! statement is `IF NOT EXISTS`, and each table is created with an id derived from
//! (keyspace, table) rather than a random one, so concurrent creations of the same
//! table on different coordinators agree instead of leaving the cluster with two
//! schema versions of one table. The schema version is kept in `schema_info`; a
//! store refuses to open a keyspace made by a newer `handled`.
//!
//! Tables:
//! * `objects ((pk), coll)`: one row per handle (`coll` = [`HANDLE_COLL`], `pk` the
//!   handle key) and per document (`coll` its collection, `pk` its id), with the
//!   encoded body (null once deleted: the row stays as a tombstone so its version
//!   never restarts) and a version bumped by every compare-and-set. A handle and
//!   documents sharing its key are one partition, so they change in one
//!   lightweight transaction.
//! * `lookups ((coll, idx, bucket), key, id)`: derived lookup entries (document
//!   index entries, and the id listings behind `scan_keys` and `doc_scan`), spread
//!   over [`BUCKETS`] partitions per index by a hash of the key.
//! * `meta ((part), key)`: server metadata, one small partition.
//! * `counts (bucket)`: approximate handle count (counters).

use scylla::client::session::Session;

use super::backend_error;
use super::options::{check_keyspace, replication_map};
use crate::StoreError;

/// Version of the tables below; bump with a migration step in [`ensure`].
pub const SCHEMA_VERSION: i32 = 1;

/// Partitions per index in `entries`. Fixed for the life of a keyspace.
pub const BUCKETS: i32 = 16;

/// `coll` of handle rows (collection names never start with NUL).
pub const HANDLE_COLL: &str = "\u{0}handle";
/// `idx` of the id listing of a collection (index names never start with NUL).
pub const LISTING_IDX: &str = "\u{0}id";

const TABLES: &[(&str, &str)] = &[
    ("objects", "(pk blob, coll text, body blob, version bigint, PRIMARY KEY ((pk), coll))"),
    ("lookups", "(coll text, idx text, bucket int, key blob, id blob, PRIMARY KEY ((coll, idx, bucket), key, id))"),
    ("meta", "(part int, key text, value blob, PRIMARY KEY ((part), key))"),
    ("counts", "(bucket int PRIMARY KEY, n counter)"),
    ("schema_info", "(part int PRIMARY KEY, version int)"),
    // The transaction log (`txn_tables`): the last id handed out, the entries, how far it is settled.
    ("txn_seq", "(part int PRIMARY KEY, last bigint, date bigint, floor bigint, epoch bigint, owner bigint)"),
    (
        "txn_log",
        "(bucket bigint, id bigint, state int, action int, handle blob, date bigint, PRIMARY KEY ((bucket), id))",
    ),
    ("txn_state", "(part int PRIMARY KEY, frontier bigint, epoch bigint)"),
];

/// A stable table id: the first 16 bytes of SHA-1(keyspace ‖ '.' ‖ table), as a
/// version-5-shaped UUID.
fn table_id(keyspace: &str, table: &str) -> String {
    use sha1::{Digest, Sha1};
    let d = Sha1::digest(format!("{keyspace}.{table}").as_bytes());
    let mut b: [u8; 16] = d[..16].try_into().expect("16 bytes");
    b[6] = (b[6] & 0x0f) | 0x50;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// Create the keyspace and tables when missing, then check the schema version.
pub async fn ensure(session: &Session, keyspace: &str, replication: &str) -> Result<(), StoreError> {
    check_keyspace(keyspace)?;
    let map = replication_map(replication)?;
    let ddl = |cql: String| async move {
        session.query_unpaged(cql.as_str(), ()).await.map_err(|e| backend_error(&cql, e))?;
        Ok::<(), StoreError>(())
    };
    ddl(format!("CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {map}")).await?;
    for (table, columns) in TABLES {
        let id = table_id(keyspace, table);
        ddl(format!("CREATE TABLE IF NOT EXISTS {keyspace}.{table} {columns} WITH id = {id}")).await?;
    }
    session.await_schema_agreement().await.map_err(|e| StoreError::Backend(format!("schema agreement: {e}")))?;
    // First writer wins; everyone then reads what was written.
    let insert =
        format!("INSERT INTO {keyspace}.schema_info (part, version) VALUES (0, {SCHEMA_VERSION}) IF NOT EXISTS");
    session.query_unpaged(insert.as_str(), ()).await.map_err(|e| backend_error("schema_info", e))?;
    let select = format!("SELECT version FROM {keyspace}.schema_info WHERE part = 0");
    let rows = session.query_unpaged(select.as_str(), ()).await.map_err(|e| backend_error("schema_info", e))?;
    let found = rows
        .into_rows_result()
        .map_err(|e| StoreError::Backend(format!("schema_info: {e}")))?
        .maybe_first_row::<(i32,)>()
        .map_err(|e| StoreError::Backend(format!("schema_info: {e}")))?
        .map(|(v,)| v);
    match found {
        Some(SCHEMA_VERSION) => Ok(()),
        Some(v) if v > SCHEMA_VERSION => Err(StoreError::Backend(format!(
            "keyspace {keyspace} has schema version {v}, newer than this handled ({SCHEMA_VERSION}): upgrade handled"
        ))),
        Some(v) => {
            Err(StoreError::Backend(format!("keyspace {keyspace} has schema version {v}: no migration from it")))
        }
        None => Err(StoreError::Backend(format!("keyspace {keyspace}: schema_info row missing after creation"))),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn table_ids_are_stable_uuids_per_keyspace() {
        let a = super::table_id("handled", "objects");
        assert_eq!(a, super::table_id("handled", "objects"));
        assert_ne!(a, super::table_id("other", "objects"));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "5");
    }
}
