//! The store conformance suite, and multi-node races, against a live Cassandra.
//!
//! Needs `HANDLED_TEST_CASSANDRA=host:port` (`tests/cassandra/run.sh` starts a
//! throwaway node and sets it); without it every test says so and returns. Each
//! test gets a keyspace of its own (replication 1).
#![cfg(feature = "cassandra")]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use handled_store::conformance::{self, url_record};
use handled_store::{CassandraOptions, CassandraStore, Expect, HandleRecord, Store, SwapOutcome};

mod write_rate;

fn contact_point() -> Option<String> {
    match std::env::var("HANDLED_TEST_CASSANDRA") {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            handled_testenv::skipped(
                "HANDLED_TEST_CASSANDRA is not set (tests/cassandra/run.sh starts a node and sets it)",
            );
            None
        }
    }
}

/// A keyspace no other test (or earlier run) uses.
fn fresh_keyspace(name: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let short: String = name.chars().filter(|c| c.is_ascii_alphanumeric()).take(24).collect();
    format!("t{}_{}_{}_{short}", std::process::id() % 100_000, N.fetch_add(1, Ordering::Relaxed), nanos % 10_000)
}

/// Options for a fresh keyspace (replication 1).
fn options(name: &str) -> Option<CassandraOptions> {
    let contact = contact_point()?;
    Some(CassandraOptions {
        contact_points: vec![contact],
        keyspace: fresh_keyspace(name),
        replication: "1".into(),
        ..CassandraOptions::default()
    })
}

/// `nodes` stores on one keyspace: what several `handled` nodes share.
async fn stores(name: &str, nodes: usize) -> Option<Vec<Arc<dyn Store>>> {
    stores_with(options(name)?, nodes).await
}

async fn stores_with(options: CassandraOptions, nodes: usize) -> Option<Vec<Arc<dyn Store>>> {
    let mut out: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..nodes {
        out.push(Arc::new(CassandraStore::connect(&options).await.expect("connect to cassandra")));
    }
    Some(out)
}

macro_rules! suite {
    ($($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let Some(mut s) = stores(stringify!($name), 1).await else { return };
                conformance::$name(s.remove(0)).await;
            }
        )*
    };
}

// Every seam: the lists are the suite's own (`handled_store::conformance`).
handled_store::conformance_records!(suite!());
handled_store::conformance_admin!(suite!());
handled_store::conformance_documents!(suite!());
handled_store::conformance_txn_log!(suite!());

/// Three "nodes" (sessions) × 8 writers create the same 300 names: each name is
/// created exactly once, and the record stored is the winner's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_creates_across_nodes_create_each_name_once() {
    let Some(nodes) = stores("race_create", 3).await else { return };
    const NAMES: u32 = 300;
    let mut tasks = Vec::new();
    for (n, store) in nodes.iter().enumerate() {
        for w in 0..8u32 {
            let store = store.clone();
            let who = format!("{n}-{w}");
            tasks.push(tokio::spawn(async move {
                let mut won = Vec::new();
                for i in 0..NAMES {
                    let key = format!("T/{i}").into_bytes();
                    match store.swap(&key, Expect::Absent, Some(url_record(&who))).await.unwrap() {
                        SwapOutcome::Done { previous: None } => won.push((i, who.clone())),
                        SwapOutcome::Done { previous } => panic!("create replaced {previous:?}"),
                        SwapOutcome::Conflict { current } => assert!(current.is_some()),
                    }
                }
                won
            }));
        }
    }
    let mut winners = std::collections::BTreeMap::new();
    for t in tasks {
        for (i, who) in t.await.unwrap() {
            assert!(winners.insert(i, who).is_none(), "name {i} created twice");
        }
    }
    assert_eq!(winners.len(), NAMES as usize, "every name created once");
    for (i, who) in winners {
        let got = nodes[(i % 3) as usize].get(format!("T/{i}").as_bytes()).await.unwrap();
        assert_eq!(got, Some(url_record(&who)));
    }
}

/// Three "nodes" × 8 writers each append values to one handle by read-modify-write:
/// no update is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_across_nodes_lose_nothing() {
    let Some(nodes) = stores("race_append", 3).await else { return };
    nodes[0].swap(b"T/hot", Expect::Absent, Some(HandleRecord::new(Vec::new()))).await.unwrap();
    const PER_WRITER: u32 = 10;
    let mut tasks = Vec::new();
    for (n, store) in nodes.iter().enumerate() {
        for w in 0..8u32 {
            let store = store.clone();
            let index = 1000 * (n as u32 + 1) + 100 * w;
            tasks.push(tokio::spawn(async move {
                for i in 0..PER_WRITER {
                    loop {
                        let current = store.get(b"T/hot").await.unwrap().unwrap();
                        let mut next = current.clone();
                        next.values.push(handled_proto::HandleValue::new((index + i) as i32, "URL", "x"));
                        if store.swap(b"T/hot", Expect::Present(current), Some(next)).await.unwrap().is_done() {
                            break;
                        }
                    }
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    let record = nodes[1].get(b"T/hot").await.unwrap().unwrap();
    assert_eq!(record.values.len(), 3 * 8 * PER_WRITER as usize, "no append lost");
}

/// With `replication_log = false` (`txn_log: false`) every log method says so
/// instead of answering as an empty log, and writes still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn txn_log_off_refuses_clearly() {
    let Some(o) = options("txnlog_off") else { return };
    let Some(mut s) = stores_with(CassandraOptions { txn_log: false, ..o }, 1).await else { return };
    let s = s.remove(0);
    assert!(!s.capabilities().txn_log, "the capabilities say so too");
    s.swap(b"20.5000/a", Expect::Absent, Some(url_record("a"))).await.unwrap();
    let answers = [
        s.txn_log_read(0, 10).await.map(drop),
        s.txn_log_bounds().await.map(drop),
        s.txn_log_prune(0).await.map(drop),
        s.txn_log_reset(1).await,
        s.apply_replicated(Vec::new(), Vec::new()).await,
    ];
    for a in answers {
        let e = a.unwrap_err().to_string();
        assert!(e.contains("replication_log = false"), "{e}");
    }
    assert_eq!(*s.txn_log_subscribe().borrow(), 0);
    s.checkpoint().await.unwrap();
}

/// The property the design proves (docs/cluster.md): 3 sessions × 8 writers
/// change handles concurrently (own names, a shared hot handle, racing
/// creates that make lost rounds and void entries, deletes) while a reader
/// follows the log. The reader's ids only go up, every acknowledged change
/// has an entry, and no entry ever appears below an id the reader has passed:
/// the whole log read afterwards is exactly what the reader saw. Settling is
/// made eager (300 ms) so readers take over and void entries of writers that
/// are still at work.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn txn_log_followed_while_three_nodes_write() {
    use handled_store::{TxnAction, TxnEntry};
    use std::collections::HashMap;
    use std::time::Duration;
    let Some(o) = options("txnlog_follow") else { return };
    let o = CassandraOptions {
        txn_settle_after: Duration::from_millis(300),
        txn_poll_interval: Duration::from_millis(200),
        ..o
    };
    let Some(nodes) = stores_with(o.clone(), 3).await else { return };
    let Some(mut reader_store) = stores_with(o, 1).await else { return };
    let reader_store = reader_store.remove(0);
    const ROUNDS: u32 = 12;
    let writing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let reader = {
        let (s, writing) = (reader_store.clone(), writing.clone());
        tokio::spawn(async move {
            let mut seen: Vec<TxnEntry> = Vec::new();
            let mut quiet_rounds = 0;
            loop {
                let after = seen.last().map_or(0, |e| e.id);
                let page = s.txn_log_read(after, 50).await.unwrap();
                for e in &page {
                    let last = seen.last().map_or(0, |l| l.id);
                    assert!(e.id > last, "id {} after {last}", e.id);
                }
                let empty = page.is_empty();
                seen.extend(page);
                if empty {
                    if !writing.load(Ordering::Acquire) {
                        // Writers are done: caught up once the frontier is ours.
                        let b = s.txn_log_bounds().await.unwrap();
                        quiet_rounds += 1;
                        if b.last <= seen.last().map_or(0, |e| e.id) || quiet_rounds > 200 {
                            return seen;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        })
    };
    let mut tasks = Vec::new();
    for (n, store) in nodes.iter().enumerate() {
        for w in 0..8u32 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let mut acked: Vec<(Vec<u8>, TxnAction)> = Vec::new();
                let mut ack = |key: &[u8], out: SwapOutcome, present: bool| {
                    if let SwapOutcome::Done { previous } = out {
                        if let Some(a) = TxnAction::of_handle_write(previous.is_some(), present) {
                            acked.push((key.to_vec(), a));
                        }
                    }
                };
                for i in 0..ROUNDS {
                    let own = format!("M/{n}-{w}-{i}").into_bytes();
                    let hot = format!("M/hot{}", i % 3).into_bytes();
                    let race = format!("M/race{i}").into_bytes();
                    let who = url_record(&format!("{n}-{w}-{i}"));
                    ack(&own, store.swap(&own, Expect::Absent, Some(who.clone())).await.unwrap(), true);
                    ack(&hot, store.swap(&hot, Expect::Any, Some(who.clone())).await.unwrap(), true);
                    ack(&race, store.swap(&race, Expect::Absent, Some(who.clone())).await.unwrap(), true);
                    if i % 4 == 3 {
                        ack(&own, store.swap(&own, Expect::Any, None).await.unwrap(), false);
                    }
                }
                acked
            }));
        }
    }
    let mut acked = Vec::new();
    for t in tasks {
        acked.extend(t.await.unwrap());
    }
    writing.store(false, Ordering::Release);
    let seen = tokio::time::timeout(Duration::from_secs(120), reader).await.expect("reader caught up").unwrap();
    // Nothing appeared below the reader: the whole log is what it saw.
    let whole = conformance::read_whole_log(&*nodes[1]).await;
    let unseen: Vec<u64> = whole.iter().filter(|e| !seen.contains(e)).map(|e| e.id).collect();
    assert!(unseen.is_empty(), "entries appeared below ids the reader had passed: {unseen:?}");
    assert_eq!(whole.len(), seen.len(), "the reader saw entries the log does not hold");
    // Every acknowledged change has an entry (a reader that took an entry over
    // may make more, never fewer).
    let mut logged: HashMap<Vec<u8>, usize> = HashMap::new();
    for e in &seen {
        *logged.entry(e.handle.clone()).or_default() += 1;
    }
    let mut wanted: HashMap<Vec<u8>, usize> = HashMap::new();
    for (k, _) in &acked {
        *wanted.entry(k.clone()).or_default() += 1;
    }
    for (k, n) in &wanted {
        let got = logged.get(k).copied().unwrap_or(0);
        assert!(got >= *n, "{}: {n} changes acknowledged, {got} logged", String::from_utf8_lossy(k));
    }
    // The last entry of each handle says what it is now (here deletes come
    // only from a handle's own writer, so they are never out of order).
    let mut last: HashMap<Vec<u8>, TxnAction> = HashMap::new();
    for e in &seen {
        last.insert(e.handle.clone(), e.action);
    }
    for (k, a) in last {
        let present = nodes[0].get(&k).await.unwrap().is_some();
        assert_eq!(present, a != TxnAction::Delete, "{}: last logged {a:?}", String::from_utf8_lossy(&k));
    }
    eprintln!("{} changes acknowledged, {} entries, last id {}", acked.len(), seen.len(), whole.last().unwrap().id);
}

/// Not a test: the cost of the log per write on one Cassandra node (creates/s
/// with and without it, alternating, same run). `cargo test -p handled-store
/// --test cassandra -- --ignored --nocapture txn_log_write_cost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore]
async fn txn_log_write_cost() {
    let creates: usize = std::env::var("HANDLED_BENCH_CREATES").ok().and_then(|v| v.parse().ok()).unwrap_or(3000);
    let Some(base) = options("txnlog_cost") else { return };
    for round in 0..3 {
        for logged in [false, true] {
            let o = CassandraOptions { keyspace: fresh_keyspace("txnlog_cost"), txn_log: logged, ..base.clone() };
            let s: Arc<dyn Store> = Arc::new(CassandraStore::connect(&o).await.unwrap());
            let rate = write_rate::creates_per_second(&s, creates, 64).await;
            eprintln!("round {round}: log {}: {creates} creates, {rate:.0}/s", if logged { "on " } else { "off" });
            if logged {
                assert_eq!(s.txn_log_bounds().await.unwrap().last, creates as u64);
            }
        }
    }
}

/// What a writer that died between its steps leaves (R3): id 2 pending for a
/// change that applied, id 3 handed out and never written. A reader stops
/// before them while they are young, then settles them: 2 done with what the
/// row now is (Update), 3 void; the log goes on past them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn txn_log_settles_what_dead_writers_left() {
    use handled_store::TxnAction;
    use std::time::Duration;
    let Some(o) = options("txnlog_dead") else { return };
    let settle = Duration::from_millis(1500);
    let o = CassandraOptions { txn_settle_after: settle, txn_poll_interval: Duration::from_secs(3600), ..o };
    let Some(mut s) = stores_with(o.clone(), 1).await else { return };
    let s = s.remove(0);
    s.swap(b"D/a", Expect::Absent, Some(url_record("a"))).await.unwrap();
    // The dead writer: ids 2 and 3 handed out, 2 pending, its change applied
    // (by a session that does not log), 3 never written.
    let session =
        scylla::client::session_builder::SessionBuilder::new().known_node(&o.contact_points[0]).build().await.unwrap();
    let ks = &o.keyspace;
    let lwt = format!("UPDATE {ks}.txn_seq SET last = 3 WHERE part = 0 IF last = 1");
    session.query_unpaged(lwt, ()).await.unwrap();
    let pending =
        format!("INSERT INTO {ks}.txn_log (bucket, id, state, action, handle, date) VALUES (0, 2, 0, 3, ?, 5)");
    session.query_unpaged(pending, (b"D/a".to_vec(),)).await.unwrap();
    let Some(mut quiet) = stores_with(CassandraOptions { txn_log: false, ..o.clone() }, 1).await else { return };
    quiet.remove(0).swap(b"D/a", Expect::Any, Some(url_record("b"))).await.unwrap();
    s.swap(b"D/b", Expect::Absent, Some(url_record("b"))).await.unwrap();
    let ids = |v: Vec<handled_store::TxnEntry>| v.into_iter().map(|e| (e.id, e.action)).collect::<Vec<_>>();
    assert_eq!(ids(s.txn_log_read(0, 10).await.unwrap()), vec![(1, TxnAction::Create)], "young: wait at 2");
    assert_eq!(s.txn_log_bounds().await.unwrap().last, 1);
    tokio::time::sleep(settle + Duration::from_millis(200)).await;
    let got = s.txn_log_read(0, 10).await.unwrap();
    assert_eq!(ids(got.clone()), vec![(1, TxnAction::Create), (2, TxnAction::Update), (4, TxnAction::Create)]);
    assert_eq!(got[1].handle, b"D/a");
    assert_eq!(s.txn_log_bounds().await.unwrap().last, 4);
}
