//! The transaction log on SQL (`replication_log`), on every database: the
//! suite's txn-log tests with the log on (built-in statements, and through
//! custom statements), several nodes logging into one database, the
//! refusals, and (ignored) the cost of the log per write.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use handled_store::conformance::{read_whole_log, url_record};
use handled_store::{Expect, RecordStore, SqlOptions, SqlStore, Store, StoreAdmin, TxnAction, TxnLogStore};

/// Options for a fresh database with the tables, the log's too.
pub async fn log_options(name: &str) -> Option<SqlOptions> {
    let o = crate::options(&format!("log_{name}")).await?;
    Some(SqlOptions { txn_log: true, txn_poll_interval: Duration::from_millis(200), ..o })
}

pub async fn log_store(name: &str) -> Option<Arc<dyn Store>> {
    let o = log_options(name).await?;
    Some(Arc::new(SqlStore::connect(&o).await.expect("open the sql store (replication_log)")))
}

/// The log on, handles written through custom statements on the operator's
/// tables (`custom_tables`): the log's tables are ours either way.
pub async fn custom_log_store(name: &str) -> Option<Arc<dyn Store>> {
    let o = log_options(&format!("custom_{name}")).await?;
    for ddl in super::custom_tables() {
        crate::run_sql(&o.url, ddl).await;
    }
    let o = SqlOptions { statements: super::custom_statements(), ..o };
    Some(Arc::new(SqlStore::connect(&o).await.expect("open the sql store (replication_log, custom statements)")))
}

/// The log on, tables in Handle.Net's text layout (`TEXT_LAYOUT`).
pub async fn text_log_store(name: &str) -> Option<Arc<dyn Store>> {
    let o = log_options(&format!("text_{name}")).await?;
    let o = SqlOptions { layout: super::TEXT_LAYOUT, ..o };
    Some(Arc::new(SqlStore::connect(&o).await.expect("open the sql store (replication_log, text layout)")))
}

/// One test per txn-log conformance test, on a fresh database each, in
/// module `builtin`, and again in `custom_writes` and `text_layout`.
macro_rules! txn_suite {
    ($($name:ident),* $(,)?) => {
        mod builtin {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let Some(s) = super::log_store(stringify!($name)).await else { return };
                    handled_store::conformance::$name(s).await;
                }
            )*
        }
        mod custom_writes {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let Some(s) = super::custom_log_store(stringify!($name)).await else { return };
                    handled_store::conformance::$name(s).await;
                }
            )*
        }
        mod text_layout {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let Some(s) = super::text_log_store(stringify!($name)).await else { return };
                    handled_store::conformance::$name(s).await;
                }
            )*
        }
        /// The txn-log suite tests run here.
        pub const TXN_LOG_RUN: &[&str] = &[$(stringify!($name)),*];
    };
}

handled_store::conformance_txn_log!(txn_suite!());

/// Two nodes (stores) on one database, writing at once: one log, its ids
/// gap-free and in commit order (a write acknowledged before another began
/// has the lower id), each write once; and a subscriber on one node wakes
/// for the other's write (the state row's poll).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_nodes_share_one_gap_free_log() {
    let Some(o) = log_options("two_nodes").await else { return };
    let nodes: Vec<Arc<dyn Store>> =
        vec![Arc::new(SqlStore::connect(&o).await.unwrap()), Arc::new(SqlStore::connect(&o).await.unwrap())];
    const EACH: usize = 40;
    let mut tasks = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        for w in 0..4 {
            let node = node.clone();
            tasks.push(tokio::spawn(async move {
                let mut done = Vec::new();
                for i in 0..EACH {
                    let key = format!("T/{n}-{w}-{i}").into_bytes();
                    let began = Instant::now();
                    node.swap(&key, Expect::Absent, Some(url_record("1"))).await.unwrap();
                    node.swap(&key, Expect::Any, Some(url_record("2"))).await.unwrap();
                    done.push((key, began, Instant::now()));
                }
                done
            }));
        }
    }
    let mut writes = Vec::new();
    for t in tasks {
        writes.extend(t.await.unwrap());
    }
    let log = read_whole_log(&*nodes[1]).await;
    let total = 2 * 4 * 2 * EACH as u64;
    assert_eq!(log.iter().map(|e| e.id).collect::<Vec<_>>(), (1..=total).collect::<Vec<_>>(), "gap-free");
    assert!(log.windows(2).all(|w| w[0].date_ms <= w[1].date_ms), "dates never decrease");
    // Each handle: its create, then its update.
    let mut ids: HashMap<Vec<u8>, Vec<(u64, TxnAction)>> = HashMap::new();
    for e in &log {
        ids.entry(e.handle.clone()).or_default().push((e.id, e.action));
    }
    assert_eq!(ids.len(), writes.len());
    for (key, entries) in &ids {
        assert_eq!(entries.iter().map(|e| e.1).collect::<Vec<_>>(), [TxnAction::Create, TxnAction::Update], "{key:?}");
    }
    // Commit order: a pair of writes acknowledged before the next pair began is logged before it.
    let last_id = |k: &Vec<u8>| ids[k][1].0;
    let first_id = |k: &Vec<u8>| ids[k][0].0;
    for (k1, _, ended) in &writes {
        for (k2, began, _) in &writes {
            if ended < began {
                assert!(last_id(k1) < first_id(k2), "{k1:?} acknowledged before {k2:?} began, logged after");
            }
        }
    }
    for node in &nodes {
        assert_eq!(node.txn_log_bounds().await.unwrap().last, total);
    }
    // A subscriber on node 1 wakes for node 0's write.
    let mut rx = nodes[1].txn_log_subscribe();
    tokio::time::timeout(Duration::from_secs(5), async {
        while *rx.borrow_and_update() != total {
            rx.changed().await.unwrap();
        }
    })
    .await
    .expect("node 1 saw the log's last id");
    nodes[0].swap(b"T/last", Expect::Absent, Some(url_record("x"))).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), rx.changed()).await.expect("woken by the other node").unwrap();
    assert_eq!(*rx.borrow_and_update(), total + 1);
}

/// With the log off nothing of it is in the database; turned on against a
/// database without its tables, the start stops with the statements to run.
/// Read-only with the log, and documents in a pull, are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_log_asks_for_its_tables_and_refuses_what_it_cannot_keep() {
    let Some(o) = crate::options("log_tables").await else { return };
    let off = SqlStore::connect(&o).await.unwrap();
    assert!(!off.capabilities().txn_log);
    off.swap(b"T/1", Expect::Absent, Some(url_record("x"))).await.unwrap();
    let on = SqlOptions { txn_log: true, create_schema: false, ..o.clone() };
    let e = SqlStore::connect(&on).await.err().expect("tables missing").to_string();
    assert!(e.contains("handled_txnlog, handled_txnlog_state") && e.contains("create table handled_txnlog"), "{e}");
    assert!(e.contains("insert into handled_txnlog_state"), "{e}");
    let ro = SqlOptions { txn_log: true, read_only: true, create_schema: false, ..o.clone() };
    let e = SqlStore::connect(&ro).await.err().expect("read_only with the log").to_string();
    assert!(e.contains("replication_log and read_only"), "{e}");
    // Created now; the handle written before is in no entry (not logged then).
    let s_url = o.url.clone();
    let s = SqlStore::connect(&SqlOptions { txn_log: true, ..o }).await.unwrap();
    assert!(s.capabilities().txn_log);
    assert_eq!(s.txn_log_bounds().await.unwrap().last, 0);
    // Rows another program inserts are served, and not logged (no triggers).
    let insert = match crate::SCHEME {
        "postgres" => {
            "insert into handles (handle, idx, type, data) values ('T/sql'::bytea, 1, 'URL'::bytea, 'x'::bytea)"
        }
        _ => "insert into handles (handle, idx, type, data) values ('T/sql', 1, 'URL', 'x')",
    };
    crate::run_sql(&s_url, insert).await;
    assert!(s.get(b"T/sql").await.unwrap().is_some());
    assert_eq!(s.txn_log_bounds().await.unwrap().last, 0, "a row written by plain SQL is not logged");
    let doc = handled_store::DocWrite::new("hrls", b"T/1".to_vec(), None);
    let e = s.apply_replicated_with_docs(Vec::new(), Vec::new(), vec![doc]).await.unwrap_err();
    assert!(e.to_string().contains("no documents"), "{e}");
    let dated = handled_store::ReplicatedChange {
        entry: handled_store::TxnEntry { id: 1, date_ms: 1, action: TxnAction::Create, handle: b"T/2".to_vec() },
        record: Some(url_record("y")),
        priority: Some(0),
    };
    let e = s.apply_replicated(vec![dated], Vec::new()).await.unwrap_err();
    assert!(e.to_string().contains("multi-primary"), "{e}");
    assert_eq!(s.get(b"T/2").await.unwrap(), None);
}

/// Not a test: the cost of the log per write (creates/s with it off and on,
/// alternating, same database server). `cargo test -p handled-store
/// --features sql --test sql_postgres -- --ignored --nocapture txn_log_write_cost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore]
async fn txn_log_write_cost() {
    let creates: usize = std::env::var("HANDLED_BENCH_CREATES").ok().and_then(|v| v.parse().ok()).unwrap_or(3000);
    let writers: usize = std::env::var("HANDLED_BENCH_WRITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(16);
    let rounds: usize = std::env::var("HANDLED_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    for round in 0..rounds {
        for logged in [false, true] {
            let name = format!("cost_{round}_{logged}");
            let Some(o) = crate::options(&name).await else { return };
            let o = SqlOptions { txn_log: logged, max_connections: writers as u32, ..o };
            let s: Arc<dyn Store> = Arc::new(SqlStore::connect(&o).await.unwrap());
            let rate = super::write_rate::creates_per_second(&s, creates, writers).await;
            eprintln!(
                "round {round}: log {}: {creates} creates, {writers} writers, {rate:.0}/s",
                if logged { "on " } else { "off" }
            );
            if logged {
                assert_eq!(s.txn_log_bounds().await.unwrap().last, creates as u64);
            }
            s.close();
        }
    }
}
