//! What the SQL store's tests run on every database (included by
//! `sql_postgres.rs` and `sql_mariadb.rs`, whose crate roots provide `store`
//! and `options` for a fresh database, and `run_sql`): the store conformance
//! suite, the operations in [`operations`], searches by value in [`search`],
//! the transaction log (`replication_log`) in [`txn_log`] (its cost per
//! write measured with [`write_rate`], shared with `cassandra.rs`).

pub mod operations;
pub mod search;
pub mod txn_log;
#[path = "../write_rate/mod.rs"]
pub mod write_rate;

use std::sync::Arc;

use handled_proto::{HandleValue, TtlType, ValuePermissions, ValueReference};
use handled_store::{Expect, HandleRecord, RecordStore, SqlOptions, SqlStore, Store};

/// Options for the fresh database at `url`, the tables created.
pub fn fresh_options(url: String) -> SqlOptions {
    SqlOptions { url, create_schema: true, max_connections: 8, ..SqlOptions::default() }
}

/// A store on a fresh database (the crate root's `options`).
pub async fn store(name: &str) -> Option<Arc<dyn Store>> {
    let o = crate::options(name).await?;
    Some(Arc::new(SqlStore::connect(&o).await.expect("open the sql store")))
}

/// A fresh database on which the store wrote [`every_column_record`] as
/// `TEST/1`: its options, to read the rows back as another program would.
pub async fn every_column_record_written(name: &str) -> Option<SqlOptions> {
    let o = crate::options(name).await?;
    let s = SqlStore::connect(&o).await.unwrap();
    s.swap(b"TEST/1", Expect::Absent, Some(every_column_record())).await.unwrap();
    Some(o)
}

/// A record that sets every column of Handle.Net's row to something other
/// than its default (`TEST/1`'s rows in each database's `handle_net` tests):
/// index 1 a plain URL, index 100 with permissions, an absolute TTL, a
/// timestamp and two references (one with a tab in its handle).
/// `len` bytes that do not compress (a value too large for the database).
pub fn noise(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (x >> 16) as u8
        })
        .collect()
}

pub fn every_column_record() -> HandleRecord {
    let mut admin = HandleValue::new(100, "HS_ADMIN", vec![0x0f, 0xf2]);
    admin.permissions = ValuePermissions(ValuePermissions::ADMIN_READ | ValuePermissions::PUBLIC_WRITE);
    admin.ttl_type = TtlType::Absolute;
    admin.ttl = 1_900_000_000;
    admin.timestamp = 1_700_000_000;
    admin.references = vec![
        ValueReference { handle: b"0.NA/TEST".to_vec(), index: 200 },
        ValueReference { handle: b"TEST/tab\there".to_vec(), index: -1 },
    ];
    HandleRecord::new(vec![admin, HandleValue::new(1, "URL", "https://example.org/")])
}

/// `APP/43` as the `handle_net` tests deposit it with plain SQL: references as
/// Handle.Net 9.0.0 writes them (`%XXXX`) and as §8.1.4 describes them (raw tabs).
pub fn deposited_references_read(got: &HandleRecord) {
    let refs: Vec<Vec<ValueReference>> = got.values.iter().map(|v| v.references.clone()).collect();
    let r = |index, handle: &str| ValueReference { handle: handle.as_bytes().to_vec(), index };
    assert_eq!(refs, vec![vec![r(1, "TEST/ADMIN"), r(300, "TEST/R\u{e9}%")], vec![r(1, "A"), r(2, "B\tC")]]);
}

/// `APP/42` as the `handle_net` tests deposit it: one full row, one of NULLs.
pub fn deposited_values_read(got: &HandleRecord) {
    assert_eq!(got.values.len(), 2);
    assert_eq!(got.values[0].data, b"https://example.org/42");
    assert_eq!(got.values[0].permissions, ValuePermissions(0x0e));
    assert_eq!((got.values[0].ttl, got.values[0].timestamp), (86400, 1_700_000_000));
    assert_eq!(got.values[1].value_type, b"EMAIL");
    assert_eq!(got.values[1].permissions, ValuePermissions(0), "NULL booleans read as false");
}

/// Handle.Net's three `store_*_as_string` options on: handles, prefixes and
/// types in text columns.
pub const TEXT_LAYOUT: handled_store::sql::SqlLayout = handled_store::sql::SqlLayout {
    store_handle_as_string: true,
    store_na_as_string: true,
    store_handle_value_type_as_string: true,
};

/// A store on a fresh database whose tables are in [`TEXT_LAYOUT`].
pub async fn text_layout_store(name: &str) -> Option<std::sync::Arc<dyn handled_store::Store>> {
    let o = crate::options(&format!("text_{name}")).await?;
    let o = handled_store::SqlOptions { layout: TEXT_LAYOUT, ..o };
    Some(std::sync::Arc::new(handled_store::SqlStore::connect(&o).await.expect("open the sql store (text layout)")))
}

/// The tables of [`custom_writes_store`]: not Handle.Net's names, columns
/// or key types (an application's own), per database.
pub fn custom_tables() -> [&'static str; 2] {
    if crate::SCHEME == "postgres" {
        [
            "create table pids (pid text not null, vidx int4 not null, vtype text, vdata bytea, ttl_type int2, \
             ttl int8, ts int4, refs text, ar bool, aw int2, pr bool, pw bool, primary key (pid, vidx))",
            "create table pid_prefixes (prefix text primary key)",
        ]
    } else {
        [
            "create table pids (pid varbinary(255) not null, vidx int not null, vtype varbinary(255), vdata blob, \
             ttl_type smallint, ttl bigint, ts int, refs text, ar tinyint(1), aw smallint, pr tinyint(1), \
             pw tinyint(1), primary key (pid, vidx)) engine=InnoDB",
            "create table pid_prefixes (prefix varbinary(255) primary key) engine=InnoDB",
        ]
    }
}

/// Handle.Net's custom statements (§8.1.4) for every read and write, on
/// [`custom_tables`]: the server is a writable view over them.
pub fn custom_statements() -> handled_store::sql::SqlStatements {
    use handled_store::sql::SqlStmt as S;
    let cols = "pid, vidx, vtype, vdata, ttl_type, ttl, ts, refs, ar, aw, pr, pw";
    [
        (
            S::GetHandle,
            "select vidx, vtype, vdata, ttl_type, ttl, ts, refs, ar, aw, pr, pw from pids where pid = ?".into(),
        ),
        (S::CreateHandle, format!("insert into pids ({cols}) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")),
        (S::DeleteHandle, "delete from pids where pid = ?".into()),
        (S::HandleExists, "select count(*) from pids where pid = ?".into()),
        (
            S::ModifyValue,
            "update pids set vtype = ?, vdata = ?, ttl_type = ?, ttl = ?, ts = ?, refs = ?, ar = ?, \
                          aw = ?, pr = ?, pw = ? where pid = ? and vidx = ?"
                .into(),
        ),
        (S::ScanHandles, "select distinct pid from pids".into()),
        (S::ScanByPrefix, "select distinct pid from pids where pid like ?".into()),
        (S::HaveNa, "select count(*) from pid_prefixes where prefix = ?".into()),
        (S::AddNa, "insert into pid_prefixes (prefix) values (?)".into()),
        (S::DelNa, "delete from pid_prefixes where prefix = ?".into()),
        (S::ScanNas, "select prefix from pid_prefixes".into()),
    ]
    .into_iter()
    .collect()
}

/// A store on a fresh database that reads and writes [`custom_tables`]
/// through [`custom_statements`] only (and `handled_meta`, ours).
pub async fn custom_writes_store(name: &str) -> Option<std::sync::Arc<dyn handled_store::Store>> {
    let o = crate::options(&format!("custom_{name}")).await?;
    for ddl in custom_tables() {
        crate::run_sql(&o.url, ddl).await;
    }
    let o = handled_store::SqlOptions { statements: custom_statements(), ..o };
    Some(std::sync::Arc::new(
        handled_store::SqlStore::connect(&o).await.expect("open the sql store (custom statements)"),
    ))
}

/// One test per conformance test named, on a fresh database each; with
/// `+ text_layout`, each again in module `text_layout` on tables in
/// [`TEXT_LAYOUT`], and in module `custom_writes` through
/// [`custom_statements`].
macro_rules! suite {
    ($names:ident + text_layout, $($name:ident),* $(,)?) => {
        suite!($names, $($name),*);
        /// The same conformance tests through custom statements alone.
        mod custom_writes {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let Some(s) = crate::sql_common::custom_writes_store(stringify!($name)).await else { return };
                    handled_store::conformance::$name(s).await;
                }
            )*
        }
        /// The same conformance tests with Handle.Net's `store_*_as_string` options on.
        mod text_layout {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let Some(s) = crate::sql_common::text_layout_store(stringify!($name)).await else { return };
                    handled_store::conformance::$name(s).await;
                }
            )*
        }
    };
    ($names:ident, $($name:ident),* $(,)?) => {
        pub const $names: &[&str] = &[$(stringify!($name)),*];
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let Some(s) = crate::store(stringify!($name)).await else { return };
                handled_store::conformance::$name(s).await;
            }
        )*
    };
}
#[allow(unused_imports)] // used by the databases with tests of their own
pub(crate) use suite;

suite!(
    EVERYWHERE + text_layout,
    get_absent,
    swap_any,
    delete,
    invalid_record_rejected,
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

/// Suite tests that run on no SQL database, and why. The first three have
/// variants (in `operations` or the database's own tests) that check what
/// the schema can hold instead.
const NOWHERE: &[(&str, &str)] = &[
    ("create_absent", "a handle without values has no row in `handles` (operations::create_and_empty_records)"),
    ("swap_present", "values are rows keyed by index: no order to compare (operations::present_compares_by_index)"),
    (
        "values_round_trip",
        "a 300 kB value exceeds Handle.Net's dataindex (PostgreSQL) and blob (MariaDB); order is the index's \
         (values_round_trip_in_index_order)",
    ),
    ("doc_swap_basics", "no documents in Handle.Net's schema (operations::documents_and_txn_log_are_declined)"),
    ("doc_index_maintenance", "no documents in Handle.Net's schema"),
    ("doc_lookup_prefix_order_paging", "no documents in Handle.Net's schema"),
    ("doc_scan_collection", "no documents in Handle.Net's schema"),
    ("doc_concurrent_cas", "no documents in Handle.Net's schema"),
    ("doc_closed_refuses", "no documents in Handle.Net's schema"),
    ("swap_with_docs_follows_the_handle", "no documents in Handle.Net's schema"),
    ("swap_with_docs_concurrent", "no documents in Handle.Net's schema"),
    ("derived_documents_follow_the_handle", "no documents in Handle.Net's schema"),
    ("derived_documents_follow_pulled_changes", "no documents in Handle.Net's schema"),
];

/// Every suite test runs on this database or is listed, with a reason, as
/// not running: `here` the database's own runs, `not_here` its own reasons.
pub fn every_suite_test_runs_or_says_why_not(here: &[&str], not_here: &[(&str, &str)]) {
    let mut covered: Vec<&str> = EVERYWHERE.iter().chain(here).copied().collect();
    covered.extend(NOWHERE.iter().chain(not_here).map(|(n, _)| *n));
    use handled_store::conformance;
    // The transaction-log suite runs with `replication_log` on (txn_log.rs);
    // with it off, operations::documents_and_txn_log_are_declined checks the refusal.
    covered.extend(txn_log::TXN_LOG_RUN);
    covered.sort();
    let seams = [conformance::RECORDS, conformance::ADMIN, conformance::DOCUMENTS, conformance::TXN_LOG];
    let mut all: Vec<&str> = seams.iter().flat_map(|s| s.iter().map(|(n, _)| *n)).collect();
    all.sort();
    assert_eq!(covered, all, "a suite test is neither run on SQL nor listed as not running, with a reason");
}
