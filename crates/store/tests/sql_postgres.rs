//! `store = "sql"` on a real PostgreSQL (started by `pg_server`): the store
//! conformance suite, Handle.Net's schema and row format, rows other programs
//! write, homing in `nas`, several nodes writing one database, read-only,
//! timeouts and reconnects. Skipped, saying why, without PostgreSQL.
#![cfg(feature = "sql")]

#[path = "sql_postgres/handle_net.rs"]
mod handle_net;
#[path = "sql_postgres/operations.rs"]
mod operations;
mod pg_server;

use std::sync::Arc;

use handled_store::conformance;
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

macro_rules! suite {
    ($names:ident, $($name:ident),* $(,)?) => {
        const $names: &[&str] = &[$(stringify!($name)),*];
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let Some(s) = store(stringify!($name)).await else { return };
                conformance::$name(s).await;
            }
        )*
    };
}

suite!(
    NAMES,
    get_absent,
    swap_any,
    delete,
    invalid_record_rejected,
    scan_keys_order_prefix_limit,
    scan_keys_paging,
    put_many,
    meta_ops,
    homing,
    concurrent_distinct_keys,
    concurrent_same_key,
    same_key_racing_creates,
    stats_count_writes,
    closed_store_refuses,
    capabilities_are_kept,
);

/// Suite tests that do not run here, and why. The first three have variants
/// in `operations.rs` that check what the schema can hold instead.
const NOT_HERE: &[(&str, &str)] = &[
    ("create_absent", "a handle without values has no row in `handles` (operations::create_and_empty_records)"),
    ("swap_present", "values are rows keyed by index: no order to compare (operations::present_compares_by_index)"),
    (
        "values_round_trip",
        "a 300 kB value exceeds Handle.Net's dataindex; order is the index's \
         (operations::values_round_trip_in_index_order)",
    ),
    ("doc_swap_basics", "no documents in Handle.Net's schema (operations::documents_and_txn_log_are_declined)"),
    ("doc_index_maintenance", "no documents in Handle.Net's schema"),
    ("doc_lookup_prefix_order_paging", "no documents in Handle.Net's schema"),
    ("doc_scan_collection", "no documents in Handle.Net's schema"),
    ("doc_concurrent_cas", "no documents in Handle.Net's schema"),
    ("doc_closed_refuses", "no documents in Handle.Net's schema"),
    ("swap_with_docs_follows_the_handle", "no documents in Handle.Net's schema"),
    ("swap_with_docs_concurrent", "no documents in Handle.Net's schema"),
];

#[test]
fn every_suite_test_runs_or_says_why_not() {
    let mut covered: Vec<&str> = NAMES.to_vec();
    covered.extend(NOT_HERE.iter().map(|(n, _)| *n));
    covered.sort();
    let seams = [conformance::RECORDS, conformance::ADMIN, conformance::DOCUMENTS];
    let mut all: Vec<&str> = seams.iter().flat_map(|s| s.iter().map(|(n, _)| *n)).collect();
    all.sort();
    assert_eq!(covered, all, "a suite test is neither run on SQL nor listed in NOT_HERE with a reason");
    // The whole transaction-log suite is declined: no log in the schema
    // (operations::documents_and_txn_log_are_declined checks the refusal).
    assert!(!conformance::TXN_LOG.is_empty());
}
