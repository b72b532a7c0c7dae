//! `store = "sql"` on a real PostgreSQL (started by `db_server`): the store
//! conformance suite, Handle.Net's schema and row format, rows other programs
//! write, homing in `nas`, several nodes writing one database, read-only,
//! timeouts and reconnects. Skipped, saying why, without PostgreSQL.
#![cfg(feature = "sql")]

mod db_server;
#[path = "sql_postgres/handle_net.rs"]
mod handle_net;
#[path = "sql_postgres/operations.rs"]
mod operations;
mod sql_common;
use db_server::postgres as pg_server;

use std::sync::Arc;

use handled_store::{SqlOptions, SqlStore, Store};

/// Options for a fresh database with the tables created.
pub async fn options(name: &str) -> Option<SqlOptions> {
    let url = pg_server::database(name).await?;
    Some(SqlOptions { url, create_schema: true, max_connections: 8, ..SqlOptions::default() })
}

pub async fn store(name: &str) -> Option<Arc<dyn Store>> {
    let o = options(name).await?;
    Some(Arc::new(SqlStore::connect(&o).await.expect("open the sql store")))
}

// Conformance tests that run here only: keys that are not UTF-8 (MariaDB's
// `handle` is a varchar).
sql_common::suite!(HERE, scan_keys_order_prefix_limit);

#[test]
fn every_suite_test_runs_or_says_why_not() {
    sql_common::every_suite_test_runs_or_says_why_not(HERE, &[]);
}
