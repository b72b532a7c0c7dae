//! The tables: Handle.Net's `nas` and `handles`, exactly as its Technical
//! Manual (§8.2) creates them on PostgreSQL, and `handled_meta`, ours.
//!
//! At open the tables are checked (present, key columns `bytea`); missing ones
//! are created only with `create_schema`, otherwise the error shows the
//! statements to run.

use sqlx::PgPool;

use super::error::backend;
use crate::StoreError;

/// Handle.Net's PostgreSQL tables and indexes, §8.2, statement by statement.
/// `dataindex` (for searches by data) limits a value's data to what a btree
/// entry holds (about 2.7 kB after compression): PostgreSQL refuses a larger
/// one, as it does for Handle.Net; drop that index to store larger values.
pub const HANDLE_NET_POSTGRES: &[&str] = &[
    "create table nas (na bytea not null, primary key(na))",
    "create table handles (handle bytea not null, idx int4 not null, type bytea, data bytea, ttl_type int2, \
     ttl int4, timestamp int4, refs text, admin_read bool, admin_write bool, pub_read bool, pub_write bool, \
     primary key(handle, idx))",
    "create index dataindex on handles ( data )",
    "create index handleindex on handles ( handle )",
];

/// Ours, optional (`meta_table`): the server's own small metadata (site
/// serial, replication progress), which Handle.Net's schema has no place for.
/// Keys are bytes so that they sort bytewise, whatever the collation.
pub const HANDLED_META_POSTGRES: &str =
    "create table handled_meta (k bytea not null, v bytea not null, primary key(k))";

/// Columns whose type the store relies on (its statements bind bytes there).
const BYTEA_COLUMNS: &[(&str, &str)] =
    &[("nas", "na"), ("handles", "handle"), ("handles", "type"), ("handles", "data")];

/// Check the tables, creating missing ones when `create` is set.
pub(crate) async fn ensure(pool: &PgPool, create: bool, meta_table: bool) -> Result<(), StoreError> {
    let mut wanted: Vec<(&str, Vec<&str>)> =
        vec![("nas", HANDLE_NET_POSTGRES[..1].to_vec()), ("handles", HANDLE_NET_POSTGRES[1..].to_vec())];
    if meta_table {
        wanted.push(("handled_meta", vec![HANDLED_META_POSTGRES]));
    }
    let mut missing = Vec::new();
    for (table, ddl) in &wanted {
        if !table_exists(pool, table).await? {
            missing.push((*table, ddl.clone()));
        }
    }
    if !missing.is_empty() {
        if !create {
            let names: Vec<&str> = missing.iter().map(|(t, _)| *t).collect();
            let ddl: Vec<String> = missing.iter().flat_map(|(_, d)| d.iter().map(|s| format!("{s};"))).collect();
            return Err(StoreError::Backend(format!(
                "sql: table(s) {} missing: create them (or set create_schema = true):\n{}",
                names.join(", "),
                ddl.join("\n")
            )));
        }
        let mut tx = pool.begin().await.map_err(backend)?;
        for (table, ddl) in &missing {
            tracing::info!(table, "sql: creating table");
            for stmt in ddl {
                sqlx::query(stmt).execute(&mut *tx).await.map_err(backend)?;
            }
        }
        tx.commit().await.map_err(backend)?;
    }
    for (table, column) in BYTEA_COLUMNS {
        let ty: Option<String> = sqlx::query_scalar(
            "select data_type::text from information_schema.columns \
             where table_schema = current_schema() and table_name = $1 and column_name = $2",
        )
        .bind(table)
        .bind(column)
        .fetch_optional(pool)
        .await
        .map_err(backend)?;
        match ty.as_deref() {
            Some("bytea") => {}
            Some(other) => {
                return Err(StoreError::Backend(format!(
                    "sql: column {table}.{column} is {other}, not bytea (Handle.Net's store_*_as_string \
                     layouts are not supported yet)"
                )))
            }
            None => return Err(StoreError::Backend(format!("sql: table {table} has no column {column}"))),
        }
    }
    Ok(())
}

async fn table_exists(pool: &PgPool, table: &str) -> Result<bool, StoreError> {
    // to_regclass follows the search path, as the store's own statements do.
    let found: Option<String> =
        sqlx::query_scalar("select to_regclass($1)::text").bind(table).fetch_one(pool).await.map_err(backend)?;
    Ok(found.is_some())
}
