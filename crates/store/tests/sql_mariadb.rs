//! `store = "sql"` on a real MariaDB (started by `db_server`): the store
//! conformance suite and the operations every SQL database runs
//! (`sql_common`), Handle.Net's MySQL schema and row format, rows other
//! programs write with the `mariadb` client, handles matched by their bytes
//! in a case-insensitive table, statement timeouts and reconnects. Skipped,
//! saying why, without MariaDB.
#![cfg(feature = "sql")]

mod db_server;
#[path = "sql_mariadb/handle_net.rs"]
mod handle_net;
#[path = "sql_mariadb/operations.rs"]
mod operations;
mod sql_common;

use std::sync::Arc;

use handled_store::{SqlOptions, SqlStore, Store};

/// Options for a fresh database with the tables created.
pub async fn options(name: &str) -> Option<SqlOptions> {
    let url = db_server::mariadb::database(name).await?;
    Some(SqlOptions { url, create_schema: true, max_connections: 8, ..SqlOptions::default() })
}

pub async fn store(name: &str) -> Option<Arc<dyn Store>> {
    let o = options(name).await?;
    Some(Arc::new(SqlStore::connect(&o).await.expect("open the sql store")))
}

/// `statements` through the `mariadb` client on the database of `url`.
pub fn mariadb(url: &str, statements: &str) -> String {
    let server = db_server::mariadb::server().expect("the server of a database we have");
    let db = url.rsplit('/').next().unwrap();
    db_server::mariadb::sql(server, db, statements).unwrap()
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
