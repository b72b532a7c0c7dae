//! `store = "sql"` on a real MariaDB (started by `handled_testenv::db`): the store
//! conformance suite and the operations every SQL database runs
//! (`sql_common`), Handle.Net's MySQL schema and row format, rows other
//! programs write with the `mariadb` client, handles matched by their bytes
//! in a case-insensitive table, statement timeouts and reconnects. Skipped,
//! saying why, without MariaDB.
#![cfg(feature = "sql")]

use handled_testenv::db;
#[path = "sql_mariadb/handle_net.rs"]
mod handle_net;
#[path = "sql_mariadb/operations.rs"]
mod operations;
mod sql_common;
use sql_common::store;

use std::time::Duration;

use handled_store::SqlOptions;
use sqlx::{Connection, Executor};

/// The URL scheme of this database.
pub const SCHEME: &str = "mariadb";
/// A statement timeout short enough for a test to wait out (innodb_lock_wait_timeout
/// counts whole seconds: one at least).
pub const SHORT_TIMEOUT: Duration = Duration::from_millis(1000);

/// The first column of `handles` as its create statement declares it.
pub const HANDLE_COLUMN: &str = "handle varchar(255) not null";
/// Options for a fresh database with the tables created.
pub async fn options(name: &str) -> Option<SqlOptions> {
    Some(sql_common::fresh_options(db::mariadb::database(name).await?))
}

/// `statements` through the `mariadb` client on the database of `url`.
pub fn mariadb(url: &str, statements: &str) -> String {
    let server = db::mariadb::server().expect("the server of a database we have");
    let db = url.rsplit('/').next().unwrap();
    db::mariadb::sql(server, db, statements).unwrap()
}

/// Drops every index on `handles.data` there is (the manual's MySQL tables have none).
pub const DROP_DATA_INDEX: &str = "drop index if exists handled_dataindex on handles";

/// `sql` as another program runs it on the database of `url`.
pub async fn run_sql(url: &str, sql: &str) {
    mariadb(url, sql);
}

/// Another program holding a handle's rows (`for update`, in an open transaction).
pub struct RowLock(sqlx::MySqlConnection);

pub async fn lock_rows(url: &str, handle: &str) -> RowLock {
    let mut c = sqlx::MySqlConnection::connect(&url.replace("mariadb://", "mysql://")).await.unwrap();
    c.execute("begin").await.unwrap();
    sqlx::query("select * from handles where handle = ? for update").bind(handle).execute(&mut c).await.unwrap();
    RowLock(c)
}

impl RowLock {
    pub async fn release(mut self) {
        self.0.execute("rollback").await.unwrap();
    }
}

/// Cut every other connection to the database, as a restart or an idle cut
/// would: how many there were.
pub async fn cut_connections(url: &str) -> usize {
    let ids =
        mariadb(url, "select id from information_schema.processlist where db = database() and id <> connection_id()");
    let kills: Vec<String> = ids.lines().map(|id| format!("kill {id};")).collect();
    if !kills.is_empty() {
        mariadb(url, &kills.join(" "));
    }
    kills.len()
}

#[test]
fn every_suite_test_runs_or_says_why_not() {
    sql_common::every_suite_test_runs_or_says_why_not(
        &[],
        &[(
            "scan_keys_order_prefix_limit",
            "keys that are not UTF-8 cannot be rows of a varchar column \
             (operations::handles_are_utf8_text_in_byte_order)",
        )],
    );
}
