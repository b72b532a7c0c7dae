//! What the SQL store does where the shared suite expects what its schema
//! cannot hold, and the operations around it, on every database: several
//! nodes on one database, read-only, statement timeouts, reconnects, what it
//! declines. What only another program can do to the database (hold rows,
//! cut connections) is the crate root's (`lock_rows`, `cut_connections`).

use std::sync::Arc;
use std::time::Duration;

use handled_proto::HandleValue;
use handled_store::conformance::url_record;
use handled_store::{
    DocExpect, Expect, HandleRecord, RecordStore, SqlOptions, SqlStore, Store, StoreAdmin, StoreError, SwapOutcome,
};

use crate::{options, store};

fn sorted(mut r: HandleRecord) -> HandleRecord {
    r.values.sort_by_key(|v| v.index);
    r.name = None;
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn create_and_empty_records() {
    let Some(s) = store("create_and_empty_records").await else { return };
    let r1 = url_record("a");
    assert_eq!(
        s.swap(b"20.5000/a", Expect::Absent, Some(r1.clone())).await.unwrap(),
        SwapOutcome::Done { previous: None }
    );
    let out = s.swap(b"20.5000/a", Expect::Absent, Some(url_record("b"))).await.unwrap();
    assert_eq!(out, SwapOutcome::Conflict { current: Some(r1.clone()) });
    assert_eq!(s.get(b"20.5000/A").await.unwrap(), None, "keys are exact bytes");
    // No values, no row: refused before anything is written.
    let e = s.swap(b"20.5000/empty", Expect::Absent, Some(HandleRecord::default())).await.unwrap_err();
    assert!(matches!(&e, StoreError::Invalid(m) if m.0.contains("without values")), "{e:?}");
    let twice = HandleRecord::new(vec![HandleValue::new(1, "URL", "x"), HandleValue::new(1, "EMAIL", "y")]);
    assert!(matches!(s.swap(b"20.5000/t", Expect::Any, Some(twice)).await, Err(StoreError::Invalid(_))));
    assert_eq!(s.count().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn present_compares_by_index() {
    let Some(s) = store("present_compares_by_index").await else { return };
    let k = b"20.5000/p";
    let two = HandleRecord::new(vec![HandleValue::new(2, "EMAIL", "y"), HandleValue::new(1, "URL", "x")]);
    s.swap(k, Expect::Absent, Some(two.clone())).await.unwrap();
    assert_eq!(s.get(k).await.unwrap(), Some(sorted(two.clone())), "read back in index order");
    // The same values in another order, or under a spelling, are the same record here.
    let mut named = HandleRecord::named(two.values.clone(), b"20.5000/P", k);
    named.values.reverse();
    let out = s.swap(k, Expect::Present(named), Some(url_record("3"))).await.unwrap();
    assert_eq!(out, SwapOutcome::Done { previous: Some(sorted(two.clone())) });
    // One field off is not.
    let mut off = url_record("3");
    off.values[0].ttl += 1;
    assert_eq!(
        s.swap(k, Expect::Present(off), None).await.unwrap(),
        SwapOutcome::Conflict { current: Some(url_record("3")) }
    );
    assert!(!s.swap(k, Expect::Present(two), None).await.unwrap().is_done());
}

/// Three stores on one database (three `handled` nodes): writers on all of
/// them race to create the same names with different value indexes (which row
/// locks alone would let through, merging two records) and increment one
/// counter by compare-and-set. Each name is created once; no increment is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn several_nodes_share_one_database() {
    let Some(o) = options("several_nodes_share_one_database").await else { return };
    let mut nodes: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..3 {
        nodes.push(Arc::new(SqlStore::connect(&o).await.unwrap()));
    }
    let counter: &[u8] = b"T/counter";
    nodes[0].swap(counter, Expect::Absent, Some(url_record("0"))).await.unwrap();
    let mut tasks = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        for w in 0..4i32 {
            let node = node.clone();
            tasks.push(tokio::spawn(async move {
                let me = n as i32 * 10 + w;
                let mut won = Vec::new();
                for i in 0..40 {
                    let key = format!("T/{i}").into_bytes();
                    let rec = HandleRecord::new(vec![HandleValue::new(me + 1, "URL", me.to_string())]);
                    match node.swap(&key, Expect::Absent, Some(rec)).await.unwrap() {
                        SwapOutcome::Done { previous: None } => won.push((i, me)),
                        SwapOutcome::Done { previous } => panic!("create replaced {previous:?}"),
                        SwapOutcome::Conflict { current } => assert_eq!(current.unwrap().values.len(), 1),
                    }
                }
                for _ in 0..10 {
                    let mut seen = node.get(counter).await.unwrap().unwrap();
                    loop {
                        let next: u64 = std::str::from_utf8(&seen.values[0].data).unwrap().parse::<u64>().unwrap() + 1;
                        match node.swap(counter, Expect::Present(seen), Some(url_record(&next.to_string()))).await {
                            Ok(SwapOutcome::Done { .. }) => break,
                            Ok(SwapOutcome::Conflict { current }) => seen = current.unwrap(),
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                won
            }));
        }
    }
    let mut winners = std::collections::BTreeMap::new();
    for t in tasks {
        for (i, me) in t.await.unwrap() {
            assert!(winners.insert(i, me).is_none(), "T/{i} created twice");
        }
    }
    assert_eq!(winners.len(), 40);
    for (i, me) in winners {
        let got = nodes[2].get(format!("T/{i}").as_bytes()).await.unwrap().unwrap();
        assert_eq!(got.values.len(), 1, "T/{i} has one creator's values only");
        assert_eq!(got.values[0].index, me + 1);
    }
    assert_eq!(nodes[1].get(counter).await.unwrap(), Some(url_record("120")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_only_never_writes() {
    let Some(o) = options("read_only_never_writes").await else { return };
    let rw = SqlStore::connect(&o).await.unwrap();
    rw.swap(b"T/1", Expect::Absent, Some(url_record("x"))).await.unwrap();
    let ro = SqlStore::connect(&SqlOptions { read_only: true, create_schema: false, ..o.clone() }).await.unwrap();
    assert!(ro.writable().unwrap_err().to_string().contains("read_only"));
    assert_eq!(ro.get(b"T/1").await.unwrap(), Some(url_record("x")));
    let refused = |r: Result<(), StoreError>| assert!(r.unwrap_err().to_string().contains("read_only"));
    refused(ro.swap(b"T/2", Expect::Absent, Some(url_record("y"))).await.map(|_| ()));
    refused(ro.put_many(vec![(b"T/3".to_vec(), url_record("z"))]).await);
    refused(ro.meta_put("homed/0.NA/T", Some(Vec::new())).await);
    assert_eq!(rw.count().await.unwrap(), 1);
    let both = SqlOptions { read_only: true, ..o };
    assert!(SqlStore::connect(&both).await.is_err(), "read_only with create_schema is refused");
}

/// Documents always; the transaction log with `replication_log` off (the
/// default), where nothing of it is in the database (txn_log.rs runs it on).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn documents_and_txn_log_are_declined() {
    let Some(s) = store("declined").await else { return };
    let says = |e: StoreError, what: &str| assert!(e.to_string().contains(what), "{e}");
    says(s.doc_get("hrls", b"x").await.unwrap_err(), "no documents");
    says(s.doc_swap("site", b"k", DocExpect::Absent, None).await.unwrap_err(), "no documents");
    says(s.doc_scan("lease", b"", None, 10).await.unwrap_err(), "no documents");
    let doc = handled_store::DocWrite::new("hrls", b"T/1".to_vec(), None);
    says(s.swap_with_docs(b"T/1", Expect::Any, Some(url_record("x")), vec![doc]).await.unwrap_err(), "no documents");
    assert_eq!(s.get(b"T/1").await.unwrap(), None, "declined before writing the handle");
    says(s.txn_log_read(0, 10).await.unwrap_err(), "no transaction log");
    says(s.txn_log_bounds().await.unwrap_err(), "no transaction log");
    says(s.apply_replicated(Vec::new(), Vec::new()).await.unwrap_err(), "no transaction log");
    says(s.txn_log_reset(5).await.unwrap_err(), "no transaction log");
    says(s.txn_log_prune(5).await.unwrap_err(), "no transaction log");
    says(s.txn_log_read(0, 10).await.unwrap_err(), "replication_log = true");
    assert!(!s.capabilities().txn_log);
    s.checkpoint().await.unwrap();
    assert!(s.export().is_err(), "backups are the database's own (pg_dump)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_held_row_lock_times_out_instead_of_hanging() {
    let Some(o) = options("held_row_lock").await else { return };
    let fast = SqlOptions { statement_timeout: crate::SHORT_TIMEOUT, ..o.clone() };
    let s = SqlStore::connect(&fast).await.unwrap();
    s.swap(b"T/locked", Expect::Absent, Some(url_record("x"))).await.unwrap();
    // Another program holds the handle's rows.
    let other = crate::lock_rows(&o.url, "T/locked").await;
    let started = std::time::Instant::now();
    let e = s.swap(b"T/locked", Expect::Any, Some(url_record("y"))).await.unwrap_err();
    assert!(e.to_string().contains("timed out"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
    other.release().await;
    assert!(s.swap(b"T/locked", Expect::Any, Some(url_record("y"))).await.unwrap().is_done());
    assert_eq!(s.stats().failed_ops, 1);
}

/// Lookups that arrive while every read statement is out wait and go
/// together: each still gets its own handle's values, exact bytes only (not
/// a case variant MariaDB's collation also matches), one key asked twice gets
/// them twice, absent keys get nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lookups_under_load_go_together_each_answered() {
    let Some(o) = options("lookups_together").await else { return };
    // One connection, one read statement at a time: a write waiting for
    // another program's row lock holds the connection while lookups queue.
    let o = SqlOptions { max_connections: 1, read_statements: Some(1), ..o };
    let s = Arc::new(SqlStore::connect(&o).await.unwrap());
    let records: Vec<(Vec<u8>, HandleRecord)> =
        (0..40).map(|i| (format!("T/k{i}").into_bytes(), url_record(&format!("v{i}")))).collect();
    s.put_many(records.clone()).await.unwrap();
    s.swap(b"T/locked", Expect::Absent, Some(url_record("x"))).await.unwrap();
    let other = crate::lock_rows(&o.url, "T/locked").await;
    let writer = {
        let s = s.clone();
        tokio::spawn(async move { s.swap(b"T/locked", Expect::Any, Some(url_record("y"))).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await; // the writer waits on the lock
    let before = s.lookup_counts();
    let mut asked: Vec<(Vec<u8>, Option<HandleRecord>)> = Vec::new();
    for round in 0..3 {
        for (k, r) in &records {
            asked.push((k.clone(), Some(r.clone())));
            if round == 0 {
                asked.push((k.to_ascii_lowercase(), None)); // t/k1: another handle
                asked.push((format!("T/absent{}", k.len()).into_bytes(), None));
            }
        }
    }
    let lookups: Vec<_> = asked
        .iter()
        .map(|(k, _)| {
            let (s, k) = (s.clone(), k.clone());
            tokio::spawn(async move { s.get(&k).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    other.release().await;
    assert!(writer.await.unwrap().unwrap().is_done());
    for ((key, want), got) in asked.iter().zip(lookups) {
        let got = got.await.unwrap().unwrap().map(sorted);
        assert_eq!(got, want.clone().map(sorted), "{}", String::from_utf8_lossy(key));
    }
    let counts = s.lookup_counts();
    let (lookups, statements) = (counts.lookups - before.lookups, counts.statements - before.statements);
    assert_eq!(lookups, asked.len() as u64);
    assert!(statements * 8 <= lookups, "{lookups} lookups took {statements} statements: not batched");
    assert_eq!(s.get(b"T/locked").await.unwrap(), Some(url_record("y")));
}

/// Writes that arrive while every write transaction is out wait and commit
/// together: each gets the outcome it would have had alone (compared with its
/// handle as the transaction found it), a second write of one handle sees the
/// first, and a value the database refuses fails alone, not its round.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_under_load_go_together_each_answered() {
    let Some(o) = options("writes_together").await else { return };
    let o = SqlOptions { write_transactions: Some(1), ..o };
    let s = Arc::new(SqlStore::connect(&o).await.unwrap());
    let old = |i: usize| url_record(&format!("old{i}"));
    let new = |i: usize| url_record(&format!("new{i}"));
    let existing: Vec<(Vec<u8>, HandleRecord)> = (0..30).map(|i| (format!("T/e{i}").into_bytes(), old(i))).collect();
    s.put_many(existing).await.unwrap();
    s.swap(b"T/locked", Expect::Absent, Some(url_record("x"))).await.unwrap();
    // Another program holds a row: the one write transaction waits on it while the others queue.
    let other = crate::lock_rows(&o.url, "T/locked").await;
    let blocked = {
        let s = s.clone();
        tokio::spawn(async move { s.swap(b"T/locked", Expect::Any, Some(url_record("y"))).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = s.write_counts();
    let refused = HandleRecord::new(vec![HandleValue::new(7, "BIG", crate::sql_common::noise(70_000, 11))]);
    let mut asked: Vec<(&str, Vec<u8>, Expect, Option<HandleRecord>)> = Vec::new();
    for i in 0..40 {
        asked.push(("create", format!("T/n{i}").into_bytes(), Expect::Absent, Some(new(i))));
    }
    for i in 0..10 {
        asked.push(("delete", format!("T/e{i}").into_bytes(), Expect::Any, None));
        asked.push(("replace", format!("T/e{}", 10 + i).into_bytes(), Expect::Present(old(10 + i)), Some(new(i))));
        asked.push(("stale", format!("T/e{}", 20 + i).into_bytes(), Expect::Absent, Some(new(i))));
    }
    asked.push(("twice", b"T/dup".to_vec(), Expect::Absent, Some(new(1))));
    asked.push(("twice", b"T/dup".to_vec(), Expect::Absent, Some(new(2))));
    let writes: Vec<_> = asked
        .iter()
        .map(|(_, k, e, r)| {
            let (s, k, e, r) = (s.clone(), k.clone(), e.clone(), r.clone());
            tokio::spawn(async move { s.swap(&k, e, r).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    other.release().await;
    assert!(blocked.await.unwrap().unwrap().is_done());
    let mut dup_done = Vec::new();
    for ((what, key, _, record), got) in asked.iter().zip(writes) {
        let got = got.await.unwrap();
        let i: usize = String::from_utf8_lossy(key).trim_start_matches(['T', '/', 'e', 'n']).parse().unwrap_or(0);
        let name = String::from_utf8_lossy(key);
        match *what {
            "create" => assert_eq!(got.unwrap(), SwapOutcome::Done { previous: None }, "{name}"),
            "delete" | "replace" => {
                let got = got.unwrap();
                assert_eq!(got, SwapOutcome::Done { previous: Some(old(i)) }, "{name}")
            }
            "stale" => assert_eq!(got.unwrap(), SwapOutcome::Conflict { current: Some(old(i)) }, "{name}"),
            "twice" => match got.unwrap() {
                SwapOutcome::Done { previous: None } => dup_done.push(record.clone().unwrap()),
                SwapOutcome::Conflict { current: Some(c) } => assert!(c == new(1) || c == new(2), "{c:?}"),
                other => panic!("T/dup: {other:?}"),
            },
            _ => unreachable!(),
        }
    }
    assert_eq!(dup_done.len(), 1, "exactly one of two creates of a handle is done");
    assert_eq!(s.get(b"T/dup").await.unwrap(), Some(dup_done[0].clone()));
    assert_eq!(s.get(b"T/big").await.unwrap(), None);
    for i in 0..40 {
        assert_eq!(s.get(format!("T/n{i}").as_bytes()).await.unwrap(), Some(new(i)));
    }
    for i in 0..10 {
        assert_eq!(s.get(format!("T/e{i}").as_bytes()).await.unwrap(), None);
        assert_eq!(s.get(format!("T/e{}", 10 + i).as_bytes()).await.unwrap(), Some(new(i)));
        assert_eq!(s.get(format!("T/e{}", 20 + i).as_bytes()).await.unwrap(), Some(old(20 + i)));
    }
    let counts = s.write_counts();
    let (writes, transactions) = (counts.writes - before.writes, counts.transactions - before.transactions);
    assert_eq!(writes, asked.len() as u64);
    // 71 writes of 70 handles, at most 64 a round: the one waiting, then two or three.
    assert!(transactions <= 4, "{writes} writes took {transactions} transactions: not batched");

    // A value the database refuses fails its round's transaction: each write
    // of the round is then tried alone, and only that one fails.
    let other = crate::lock_rows(&o.url, "T/locked").await;
    let blocked = {
        let s = s.clone();
        tokio::spawn(async move { s.swap(b"T/locked", Expect::Any, Some(url_record("z"))).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut round: Vec<_> = (0..5)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move { s.swap(format!("T/r{i}").as_bytes(), Expect::Absent, Some(new(i))).await })
        })
        .collect();
    round.push({
        let s = s.clone();
        tokio::spawn(async move { s.swap(b"T/big", Expect::Absent, Some(refused)).await })
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    other.release().await;
    assert!(blocked.await.unwrap().unwrap().is_done());
    let refusal = round.pop().unwrap().await.unwrap();
    assert!(refusal.is_err(), "the database takes a value it should refuse: {refusal:?}");
    for (i, got) in round.into_iter().enumerate() {
        assert_eq!(got.await.unwrap().unwrap(), SwapOutcome::Done { previous: None }, "T/r{i}");
        assert_eq!(s.get(format!("T/r{i}").as_bytes()).await.unwrap(), Some(new(i)));
    }
    assert_eq!(s.get(b"T/big").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connections_the_database_cut_are_replaced() {
    let Some(o) = options("connections_cut").await else { return };
    let s = SqlStore::connect(&o).await.unwrap();
    s.swap(b"T/1", Expect::Absent, Some(url_record("x"))).await.unwrap();
    for _ in 0..3 {
        assert_eq!(s.get(b"T/1").await.unwrap(), Some(url_record("x")));
    }
    // As a database restart or an idle cut would.
    assert!(crate::cut_connections(&o.url).await > 0, "the store had connections open");
    assert_eq!(s.get(b"T/1").await.unwrap(), Some(url_record("x")));
    assert!(s.swap(b"T/2", Expect::Absent, Some(url_record("y"))).await.unwrap().is_done());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unreachable_database_is_a_clear_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let o = SqlOptions {
        url: format!("{}://u:secret@127.0.0.1:{port}/none", crate::SCHEME),
        connect_timeout: Duration::from_millis(500),
        ..SqlOptions::default()
    };
    let e = SqlStore::connect(&o).await.err().expect("nothing listens there").to_string();
    assert!(e.contains("connect_timeout_ms") || e.contains("refused"), "{e}");
    assert!(!e.contains("secret"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn missing_tables_are_named_with_their_statements() {
    let Some(o) = options("missing_tables").await else { return };
    // Ours only when asked for: without it the server's own state is in its data directory.
    let e = SqlStore::connect(&SqlOptions { create_schema: false, ..o.clone() }).await.err().unwrap().to_string();
    assert!(e.contains("table(s) nas, handles missing"), "{e}");
    let required = SqlOptions { create_schema: false, meta_table: handled_store::MetaTable::Required, ..o };
    let e = SqlStore::connect(&required).await.err().unwrap().to_string();
    assert!(e.contains("nas, handles, handled_meta"), "{e}");
    assert!(e.contains(&format!("create table handles ({}", crate::HANDLE_COLUMN)), "{e}");
    assert!(!e.contains("password"), "{e}");
}

/// Handle.Net's custom statements (§8.1.4) run in place of the built-in ones,
/// each of them visibly different from the default here so that a built-in
/// answer fails the test; and a statement of the wrong shape stops the start,
/// naming its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn custom_statements_read_in_place_of_the_built_in_ones() {
    use handled_store::sql::{SqlStatements, SqlStmt};
    let Some(o) = options("custom_statements").await else { return };
    let rw = SqlStore::connect(&o).await.unwrap();
    let two = HandleRecord::new(vec![HandleValue::new(1, "URL", "https://a"), HandleValue::new(2, "EMAIL", "a@b")]);
    for (k, r) in [(&b"20.5000/a"[..], two), (b"20.5000/b", url_record("b")), (b"20.6000/c", url_record("c"))] {
        rw.swap(k, Expect::Absent, Some(r)).await.unwrap();
    }
    rw.meta_put("homed/0.NA/20.5000", Some(Vec::new())).await.unwrap();
    let statements =
        |list: &[(SqlStmt, &str)]| -> SqlStatements { list.iter().map(|(s, t)| (*s, t.to_string())).collect() };
    let columns = "idx, type, data, ttl_type, ttl, timestamp, refs, admin_read, admin_write, pub_read, pub_write";
    let custom = statements(&[
        // Index 1 only.
        (SqlStmt::GetHandle, &format!("select {columns} from handles where handle = ? and idx = 1")),
        // Every prefix but the one in `nas` is homed.
        (SqlStmt::HaveNa, "select count(*) from nas where na <> ?"),
        (SqlStmt::ScanNas, "select distinct na from nas"),
        // Handles with an index 2 only.
        (SqlStmt::ScanHandles, "select distinct handle from handles where idx = 2"),
        (SqlStmt::ScanByPrefix, "select distinct handle from handles where handle like ?"),
        (SqlStmt::DeleteHandle, "delete from handles where handle = ?"),
    ]);
    let view = SqlOptions { read_only: true, create_schema: false, statements: custom.clone(), ..o.clone() };
    let s = SqlStore::connect(&view).await.unwrap();
    let got = s.get(b"20.5000/a").await.unwrap().unwrap();
    assert_eq!(got.values.iter().map(|v| v.index).collect::<Vec<_>>(), [1], "get_handle_stmt not used");
    assert_eq!(got.values[0].data, b"https://a");
    assert_eq!(s.get(b"20.5000/none").await.unwrap(), None);
    assert_eq!(s.meta_get("homed/0.NA/20.7000").await.unwrap(), Some(Vec::new()), "have_na_stmt not used");
    assert_eq!(s.meta_get("homed/0.NA/20.5000").await.unwrap(), None);
    let homed: Vec<String> = s.meta_scan("homed/").await.unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(homed, ["homed/0.NA/20.5000"]);
    let listed = s.scan_keys(b"20.5000/", None, 10).await.unwrap();
    assert_eq!(listed, [b"20.5000/a".to_vec(), b"20.5000/b".to_vec()]);
    assert_eq!(s.scan_keys(b"20.5000/", Some(b"20.5000/a"), 10).await.unwrap(), [b"20.5000/b".to_vec()]);
    assert_eq!(s.scan_keys(b"", None, 10).await.unwrap(), [b"20.5000/a".to_vec()], "scan_handles_stmt not used");
    assert_eq!(s.count().await.unwrap(), 1);

    // Refused at start, the key named.
    let refused = |list: &[(SqlStmt, &str)], read_only: bool| {
        let o = SqlOptions { read_only, create_schema: false, statements: statements(list), ..o.clone() };
        async move { SqlStore::connect(&o).await.err().expect("refused").to_string() }
    };
    let e = refused(&[(SqlStmt::GetHandle, custom[&SqlStmt::GetHandle].as_str())], false).await;
    assert!(e.contains("get_handle_stmt") && e.contains("read_only = true"), "{e}");
    let e = refused(&[(SqlStmt::HaveNa, "select count(*) from nas where na = ? or na = ?")], true).await;
    assert!(e.contains("have_na_stmt") && e.contains("2 parameter"), "{e}");
    let e = refused(&[(SqlStmt::GetHandle, &format!("select {columns} from handles"))], true).await;
    assert!(e.contains("get_handle_stmt") && e.contains("0 parameter"), "{e}");
    let wrong = format!("select {} from handles where handle = ?", columns.replace("data", "1.5"));
    let e = refused(&[(SqlStmt::GetHandle, &wrong)], true).await;
    assert!(e.contains("get_handle_stmt") && e.contains("column 3 (data"), "{e}");
    let e = refused(&[(SqlStmt::ScanNas, "select na, na from nas")], true).await;
    assert!(e.contains("scan_nas_stmt") && e.contains("2 column"), "{e}");
    let e = refused(&[(SqlStmt::CreateHandle, "insert into no_such_table values (?)")], true).await;
    assert!(e.contains("create_handle_stmt") && e.contains("prepare"), "{e}");
}

/// Writes through custom statements land in the operator's tables (no
/// Handle.Net table exists here), every column kept; a row another program
/// inserts there is read at once; a writable view lacking a statement it
/// would need is refused at start, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn custom_statements_write_the_operators_tables() {
    use crate::sql_common::{custom_statements, custom_tables, every_column_record};
    let Some(o) = options("custom_write_tables").await else { return };
    for ddl in custom_tables() {
        crate::run_sql(&o.url, ddl).await;
    }
    let view = SqlOptions { statements: custom_statements(), ..o.clone() };
    let s = SqlStore::connect(&view).await.unwrap();
    s.swap(b"20.5000/every", Expect::Absent, Some(every_column_record())).await.unwrap();
    assert_eq!(s.get(b"20.5000/every").await.unwrap(), Some(sorted(every_column_record())));
    // Changed: Handle.Net's delete_handle_stmt, then create_handle_stmt per value.
    let one = url_record("changed");
    s.swap(b"20.5000/every", Expect::Present(every_column_record()), Some(one.clone())).await.unwrap();
    assert_eq!(s.get(b"20.5000/every").await.unwrap(), Some(one));

    crate::run_sql(
        &o.url,
        "insert into pids (pid, vidx, vtype, vdata, ttl_type, ttl, ts, refs, ar, aw, pr, pw) \
         values ('20.5000/sql', 1, 'URL', 'https://sql.example', 0, 86400, 0, '', true, 1, true, false)",
    )
    .await;
    let got = s.get(b"20.5000/sql").await.unwrap().expect("a row inserted by plain SQL");
    assert_eq!(got.values[0].data, b"https://sql.example");
    s.meta_put("homed/0.NA/20.5000", Some(Vec::new())).await.unwrap();
    s.meta_put("homed/0.NA/20.5000", Some(Vec::new())).await.unwrap();
    let homed: Vec<String> = s.meta_scan("homed/").await.unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(homed, ["homed/0.NA/20.5000"], "homed twice, one row (have_na_stmt first)");
    s.swap(b"20.5000/sql", Expect::Any, None).await.unwrap();
    assert_eq!(s.get(b"20.5000/sql").await.unwrap(), None);

    let mut lacking = custom_statements();
    lacking.remove(&handled_store::sql::SqlStmt::AddNa);
    let o = SqlOptions { statements: lacking, ..o };
    let e = SqlStore::connect(&o).await.err().expect("refused").to_string();
    assert!(e.contains("add_na_stmt") && !e.contains("create_handle_stmt"), "{e}");
}

/// S5: a value the table can never hold is refused at once, as such (a
/// refusal, not "storage unavailable, try again"), after one try: on
/// PostgreSQL by dataindex, on MariaDB by the `blob` column. Nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_value_the_table_cannot_hold_is_refused_at_once() {
    use handled_store::Refused;
    let Some(o) = options("a_value_the_table_cannot_hold").await else { return };
    let s = SqlStore::connect(&o).await.unwrap();
    let big = HandleRecord::new(vec![HandleValue::new(1, "URL", crate::sql_common::noise(70_000, 5))]);
    let tries = s.write_counts().tries;
    let e = s.swap(b"T/big", Expect::Absent, Some(big.clone())).await.unwrap_err();
    assert!(matches!(&e, StoreError::Refused { what: Refused::Value, .. }), "{e:?}");
    assert_eq!(s.write_counts().tries - tries, 1, "one try: {e}");
    let e = s.put_many(vec![(b"T/big".to_vec(), big)]).await.unwrap_err();
    assert!(matches!(&e, StoreError::Refused { what: Refused::Value, .. }), "{e:?}");
    assert_eq!(s.get(b"T/big").await.unwrap(), None);
}
