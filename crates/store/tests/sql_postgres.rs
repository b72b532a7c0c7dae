//! `store = "sql"` on a real PostgreSQL (started by `handled_testenv::db`): the store
//! conformance suite, Handle.Net's schema and row format, rows other programs
//! write, homing in `nas`, several nodes writing one database, read-only,
//! timeouts and reconnects. Skipped, saying why, without PostgreSQL.
#![cfg(feature = "sql")]

use handled_testenv::db;
#[path = "sql_postgres/handle_net.rs"]
mod handle_net;
#[path = "sql_postgres/operations.rs"]
mod operations;
mod sql_common;
use db::postgres as pg_server;
use sql_common::store;

use std::time::Duration;

use handled_store::SqlOptions;
use sqlx::{Connection, Executor};

/// The URL scheme of this database.
pub const SCHEME: &str = "postgres";
/// A statement timeout short enough for a test to wait out.
pub const SHORT_TIMEOUT: Duration = Duration::from_millis(300);

/// The first column of `handles` as its create statement declares it.
pub const HANDLE_COLUMN: &str = "handle bytea not null";
/// Options for a fresh database with the tables created.
pub async fn options(name: &str) -> Option<SqlOptions> {
    Some(sql_common::fresh_options(pg_server::database(name).await?))
}

/// Drops every index on `handles.data` there is (§8.2's).
pub const DROP_DATA_INDEX: &str = "drop index if exists dataindex";

/// `sql` as another program runs it on the database of `url`.
pub async fn run_sql(url: &str, sql: &str) {
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    c.execute(sql).await.unwrap();
}

/// Another program holding a handle's rows (`for update`, in an open transaction).
pub struct RowLock(sqlx::PgConnection);

pub async fn lock_rows(url: &str, handle: &str) -> RowLock {
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    c.execute("begin").await.unwrap();
    sqlx::query("select * from handles where handle = $1 for update")
        .bind(handle.as_bytes())
        .execute(&mut c)
        .await
        .unwrap();
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
    let mut admin = sqlx::PgConnection::connect(url).await.unwrap();
    let cut: Vec<(bool,)> = sqlx::query_as(
        "select pg_terminate_backend(pid) from pg_stat_activity \
         where datname = current_database() and pid <> pg_backend_pid()",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    cut.len()
}

// Conformance tests that run here only: keys that are not UTF-8 (MariaDB's
// `handle` is a varchar).
sql_common::suite!(HERE, scan_keys_order_prefix_limit);

#[test]
fn every_suite_test_runs_or_says_why_not() {
    sql_common::every_suite_test_runs_or_says_why_not(HERE, &[]);
}
