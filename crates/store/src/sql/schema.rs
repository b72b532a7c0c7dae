//! The tables: Handle.Net's `nas` and `handles`, exactly as its Technical
//! Manual creates them on PostgreSQL (§8.2) and on MySQL (§8.1.2), and
//! `handled_meta`, ours.
//!
//! At open the tables are checked (present, columns of the types the
//! statements bind); missing ones are created only with `create_schema`,
//! otherwise the error shows the statements to run.

use super::db::Dialect;
use super::db::{on_pool, Pool, Sql};
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

/// Handle.Net's MySQL tables, §8.1.2, column by column. The manual leaves the
/// character set to the database's default; these tables are UTF-8 with a
/// binary collation, so that handles that differ in letter case are two rows,
/// as on PostgreSQL (a table the DBA made with a case-insensitive collation
/// is served too: db.rs, `key_binds`). `utf8mb4_bin` is in MariaDB and MySQL
/// alike; it ignores trailing spaces, so `A/b ` cannot be a row beside `A/b`
/// (refused, saying so).
pub const HANDLE_NET_MYSQL: &[&str] = &[
    "create table nas (na varchar(255) not null, PRIMARY KEY(na)) character set utf8mb4 collate utf8mb4_bin",
    "create table handles (handle varchar(255) not null, idx int4 not null, type blob, data blob, ttl_type int2, \
     ttl int4, timestamp int4, refs blob, admin_read bool, admin_write bool, pub_read bool, pub_write bool, \
     PRIMARY KEY(handle, idx)) character set utf8mb4 collate utf8mb4_bin",
];

/// Ours, optional (`meta_table`): the server's own small metadata (site
/// serial, replication progress), which Handle.Net's schema has no place for.
/// Keys are bytes so that they sort bytewise, whatever the collation.
pub const HANDLED_META_POSTGRES: &str =
    "create table handled_meta (k bytea not null, v bytea not null, primary key(k))";
pub const HANDLED_META_MYSQL: &str =
    "create table handled_meta (k varbinary(512) not null, v longblob not null, primary key(k))";

/// Columns whose type the store relies on (its statements bind bytes there).
const BYTES_COLUMNS: &[(&str, &str)] =
    &[("nas", "na"), ("handles", "handle"), ("handles", "type"), ("handles", "data")];

const COLUMN_TYPE: Sql = Sql {
    pg: "select data_type::text from information_schema.columns \
         where table_schema = current_schema() and table_name = $1 and column_name = $2",
    my: "select cast(data_type as char) from information_schema.columns \
         where table_schema = database() and table_name = ? and column_name = ?",
};

/// Column types that hold what the statements bind: bytes on PostgreSQL; on
/// MariaDB text (handles and prefixes, as the manual's `varchar`) or bytes.
fn fits(d: Dialect, column: &str, ty: &str) -> bool {
    match d {
        Dialect::Postgres => ty == "bytea",
        Dialect::MySql => {
            let bytes = ["blob", "tinyblob", "mediumblob", "longblob", "varbinary", "binary"].contains(&ty);
            bytes || (["na", "handle"].contains(&column) && ["varchar", "char"].contains(&ty))
        }
    }
}

/// Check the tables, creating missing ones when `create` is set.
pub(crate) async fn ensure(pool: &Pool, create: bool, meta_table: bool) -> Result<(), StoreError> {
    let d = pool.dialect();
    let (handle_net, meta) = match d {
        Dialect::Postgres => (HANDLE_NET_POSTGRES, HANDLED_META_POSTGRES),
        Dialect::MySql => (HANDLE_NET_MYSQL, HANDLED_META_MYSQL),
    };
    let mut wanted: Vec<(&str, Vec<&str>)> =
        vec![("nas", handle_net[..1].to_vec()), ("handles", handle_net[1..].to_vec())];
    if meta_table {
        wanted.push(("handled_meta", vec![meta]));
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
        // One transaction on PostgreSQL; MariaDB commits each `create table`
        // by itself, and a second start creates what is still missing.
        let mut tx = pool.begin().await.map_err(backend)?;
        for (table, ddl) in &missing {
            tracing::info!(table, "sql: creating table");
            for stmt in ddl {
                super::db::on_tx!(&mut tx, c => sqlx::query(stmt).execute(c).await.map(drop)).map_err(backend)?;
            }
        }
        tx.commit().await.map_err(backend)?;
    }
    let sql = d.sql(&COLUMN_TYPE);
    for (table, column) in BYTES_COLUMNS {
        let ty: Option<String> = on_pool!(pool, p => {
            sqlx::query_scalar(sql).bind(table).bind(column).fetch_optional(p).await
        })
        .map_err(backend)?;
        match ty.as_deref() {
            Some(t) if fits(d, column, t) => {}
            Some(other) => {
                return Err(StoreError::Backend(format!(
                    "sql: column {table}.{column} is {other}, which the store cannot use (Handle.Net's \
                     store_*_as_string layouts are not supported yet)"
                )))
            }
            None => return Err(StoreError::Backend(format!("sql: table {table} has no column {column}"))),
        }
    }
    Ok(())
}

const TABLE_EXISTS: Sql = Sql {
    // to_regclass follows the search path, as the store's own statements do.
    pg: "select count(*) from (select to_regclass($1) as r) t where r is not null",
    my: "select count(*) from information_schema.tables where table_schema = database() and table_name = ?",
};

async fn table_exists(pool: &Pool, table: &str) -> Result<bool, StoreError> {
    let sql = pool.dialect().sql(&TABLE_EXISTS);
    let n: i64 = on_pool!(pool, p => sqlx::query_scalar(sql).bind(table).fetch_one(p).await).map_err(backend)?;
    Ok(n > 0)
}
