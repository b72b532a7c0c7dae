//! The tables: Handle.Net's `nas` and `handles`, exactly as its Technical
//! Manual creates them on PostgreSQL (§8.2) and on MySQL (§8.1.2), and
//! `handled_meta`, ours.
//!
//! At open the tables are checked (present, columns of the types the
//! statements bind); missing ones are created only with `create_schema`,
//! otherwise the error shows the statements to run. With Handle.Net's
//! `store_*_as_string` options (layout.rs) the name columns are text:
//! PostgreSQL `text` in the `C` collation (byte order, so that the index
//! serves ranges and `like 'PREFIX/%'`), MariaDB `varchar(255)` for `type`.

use super::db::Dialect;
use super::db::{on_pool, Pool, Sql};
use super::error::backend;
use super::layout::{Col, Layout};
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

/// Ours, with `replication_log` only (txn_log.rs): the transaction log a
/// replication source serves, and its one-row state (`last` id, `floor`
/// pruned up to, date of the last entry), whose row lock orders every logged
/// write of every `handled` sharing the database.
pub const HANDLED_TXNLOG_POSTGRES: &[&str] = &[
    "create table handled_txnlog (id int8 not null, date_ms int8 not null, action int2 not null, \
     handle bytea not null, primary key(id))",
    "create table handled_txnlog_state (one int4 not null, last int8 not null, floor int8 not null, \
     last_date_ms int8 not null, primary key(one))",
    "insert into handled_txnlog_state (one, last, floor, last_date_ms) values (1, 0, 0, 0)",
];
pub const HANDLED_TXNLOG_MYSQL: &[&str] = &[
    "create table handled_txnlog (id bigint not null, date_ms bigint not null, action smallint not null, \
     handle blob not null, primary key(id)) engine=InnoDB",
    "create table handled_txnlog_state (one int not null, last bigint not null, floor bigint not null, \
     last_date_ms bigint not null, primary key(one)) engine=InnoDB",
    "insert into handled_txnlog_state (one, last, floor, last_date_ms) values (1, 0, 0, 0)",
];

/// The column of each table a name option concerns, in Handle.Net's DDL,
/// and how the text layout spells it.
const TEXT_COLUMNS: &[(Col, Dialect, &str, &str)] = &[
    (Col::Na, Dialect::Postgres, "na bytea", "na text collate \"C\""),
    (Col::Handle, Dialect::Postgres, "handle bytea", "handle text collate \"C\""),
    (Col::Type, Dialect::Postgres, "type bytea", "type text"),
    (Col::Type, Dialect::MySql, "type blob", "type varchar(255)"),
];

/// Handle.Net's tables (`nas`, then `handles` and its indexes) in this layout.
pub fn handle_net_tables(d: Dialect, layout: Layout) -> Vec<String> {
    let manual = match d {
        Dialect::Postgres => HANDLE_NET_POSTGRES,
        Dialect::MySql => HANDLE_NET_MYSQL,
    };
    let mut ddl: Vec<String> = manual.iter().map(|s| s.to_string()).collect();
    for (col, dialect, bytes, text) in TEXT_COLUMNS {
        if *dialect == d && layout.text(*col) {
            for stmt in &mut ddl {
                *stmt = stmt.replacen(bytes, text, 1);
            }
        }
    }
    ddl
}

/// Columns whose type the store relies on: the names, bytes or text
/// (layout.rs), and `data`, bytes in every layout.
const CHECKED_COLUMNS: &[(&str, &str, Option<Col>)] = &[
    ("nas", "na", Some(Col::Na)),
    ("handles", "handle", Some(Col::Handle)),
    ("handles", "type", Some(Col::Type)),
    ("handles", "data", None),
];

const COLUMN_TYPE: Sql = Sql {
    pg: "select data_type::text from information_schema.columns \
         where table_schema = current_schema() and table_name = $1 and column_name = $2",
    my: "select cast(data_type as char) from information_schema.columns \
         where table_schema = database() and table_name = ? and column_name = ?",
};

const PG_TEXT: &[&str] = &["text", "character varying", "character"];
const MY_BYTES: &[&str] = &["blob", "tinyblob", "mediumblob", "longblob", "varbinary", "binary"];
const MY_TEXT: &[&str] = &["varchar", "char", "text", "tinytext", "mediumtext", "longtext"];

/// Whether a column of SQL type `ty` holds what the statements bind, or why
/// not. PostgreSQL takes no text for bytes nor bytes for text (Handle.Net
/// fails every statement on a table of the other layout): the option must
/// match the table. MariaDB converts: text or bytes either way, as for
/// Handle.Net's driver (layout.rs).
fn fits(d: Dialect, layout: Layout, col: Option<Col>, ty: &str) -> Result<(), String> {
    let Some(col) = col else {
        let bytes = match d {
            Dialect::Postgres => ty == "bytea",
            Dialect::MySql => MY_BYTES.contains(&ty),
        };
        return if bytes { Ok(()) } else { Err(format!("{ty}: not bytes (bytea, blob)")) };
    };
    match d {
        Dialect::Postgres => match (layout.text(col), ty == "bytea", PG_TEXT.contains(&ty)) {
            (false, true, _) | (true, _, true) => Ok(()),
            (false, _, true) => Err(format!(
                "{ty} (text), Handle.Net's {opt} layout: set {opt} = true (as in its sql_settings)",
                opt = col.option()
            )),
            (true, true, _) => Err(format!(
                "bytea, Handle.Net's default layout: {opt} = true wants text or varchar (set {opt} = false, \
                 as in its sql_settings)",
                opt = col.option()
            )),
            _ => Err(format!("{ty}: neither bytea nor text")),
        },
        Dialect::MySql if MY_BYTES.contains(&ty) || MY_TEXT.contains(&ty) => Ok(()),
        Dialect::MySql => Err(format!("{ty}: neither text (varchar) nor bytes (blob)")),
    }
}

/// Check the tables, creating missing ones when `create` is set.
/// `handle_net`: Handle.Net's two tables are wanted (not by a view, which
/// reads and writes the operator's own through custom statements);
/// `txn_log`: ours of the transaction log.
pub(crate) async fn ensure(
    pool: &Pool,
    create: bool,
    handle_net: bool,
    meta_table: bool,
    txn_log: bool,
    layout: Layout,
) -> Result<(), StoreError> {
    let d = pool.dialect();
    let meta = match d {
        Dialect::Postgres => HANDLED_META_POSTGRES,
        Dialect::MySql => HANDLED_META_MYSQL,
    };
    let tables = handle_net_tables(d, layout);
    let mut wanted: Vec<(&str, Vec<String>)> = Vec::new();
    if handle_net {
        wanted = vec![("nas", tables[..1].to_vec()), ("handles", tables[1..].to_vec())];
    }
    if meta_table {
        wanted.push(("handled_meta", vec![meta.to_string()]));
    }
    if txn_log {
        let ddl = match d {
            Dialect::Postgres => HANDLED_TXNLOG_POSTGRES,
            Dialect::MySql => HANDLED_TXNLOG_MYSQL,
        };
        wanted.push(("handled_txnlog", vec![ddl[0].to_string()]));
        wanted.push(("handled_txnlog_state", ddl[1..].iter().map(|s| s.to_string()).collect()));
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
    if !handle_net {
        return Ok(());
    }
    let sql = d.sql(&COLUMN_TYPE);
    for (table, column, col) in CHECKED_COLUMNS {
        let ty: Option<String> = on_pool!(pool, p => {
            sqlx::query_scalar(sql).bind(table).bind(column).fetch_optional(p).await
        })
        .map_err(backend)?;
        match ty.as_deref() {
            Some(t) => fits(d, layout, *col, t)
                .map_err(|why| StoreError::Backend(format!("sql: column {table}.{column} is {why}")))?,
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

pub(crate) async fn table_exists(pool: &Pool, table: &str) -> Result<bool, StoreError> {
    let sql = pool.dialect().sql(&TABLE_EXISTS);
    let n: i64 = on_pool!(pool, p => sqlx::query_scalar(sql).bind(table).fetch_one(p).await).map_err(backend)?;
    Ok(n > 0)
}
