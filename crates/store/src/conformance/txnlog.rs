//! The transaction log (`txn_log` methods, and the logging every write does):
//! the behaviour every backend that keeps a log must show (listed in
//! [`super::TXN_LOG`]).

use std::sync::Arc;
use std::time::Duration;

use super::{on_tasks, url_record};
use crate::{DocWrite, Document, Expect, ReplicatedChange, Store, TxnAction, TxnEntry, TxnLogBounds, TXN_LOG_READ_MAX};

/// The whole transaction log, read a page at a time (also for the crash tests).
pub async fn read_whole_log(s: &dyn Store) -> Vec<TxnEntry> {
    let mut out: Vec<TxnEntry> = Vec::new();
    loop {
        let after = out.last().map_or(0, |e| e.id);
        let page = s.txn_log_read(after, 7).await.unwrap();
        if page.is_empty() {
            return out;
        }
        out.extend(page);
    }
}

fn summary(entries: &[TxnEntry]) -> Vec<(u64, TxnAction, String)> {
    entries.iter().map(|e| (e.id, e.action, String::from_utf8_lossy(&e.handle).into_owned())).collect()
}

fn entry(id: u64, date_ms: u64, action: TxnAction, handle: &str) -> TxnEntry {
    TxnEntry { id, date_ms, action, handle: handle.as_bytes().to_vec() }
}

fn assert_dates_never_decrease(entries: &[TxnEntry]) {
    for w in entries.windows(2) {
        assert!(w[0].date_ms <= w[1].date_ms, "dates go back: {:?} then {:?}", w[0], w[1]);
    }
}

pub async fn txn_log_local_writes(s: Arc<dyn Store>) {
    assert_eq!(s.txn_log_bounds().await.unwrap(), TxnLogBounds::default());
    let before = crate::clock::machine_ms();
    let k = b"20.5000/a";
    s.swap(k, Expect::Absent, Some(url_record("1"))).await.unwrap();
    s.swap(k, Expect::Present(url_record("1")), Some(url_record("2"))).await.unwrap();
    s.swap(k, Expect::Any, Some(url_record("3"))).await.unwrap();
    s.swap(k, Expect::Any, None).await.unwrap();
    s.home(b"0.NA/20.5000", true).await.unwrap();
    s.home(b"0.NA/20.5000", false).await.unwrap();
    // With documents riding along (where the store keeps them), the handle
    // write is logged just the same.
    let docs = match s.capabilities().documents {
        true => vec![DocWrite::new("c", b"d".to_vec(), Some(Document::new(b"x".to_vec(), vec![])))],
        false => Vec::new(),
    };
    s.swap_with_docs(b"20.5000/b", Expect::Absent, Some(url_record("b")), docs).await.unwrap();
    let entries = read_whole_log(&*s).await;
    use TxnAction::*;
    assert_eq!(
        summary(&entries),
        vec![
            (1, Create, "20.5000/a".into()),
            (2, Update, "20.5000/a".into()),
            (3, Update, "20.5000/a".into()),
            (4, Delete, "20.5000/a".into()),
            (5, HomeNa, "0.NA/20.5000".into()),
            (6, UnhomeNa, "0.NA/20.5000".into()),
            (7, Create, "20.5000/b".into()),
        ]
    );
    let after = crate::clock::machine_ms();
    assert!(entries.iter().all(|e| (before..=after).contains(&e.date_ms)), "{entries:?} not in {before}..={after}");
    assert_dates_never_decrease(&entries);
    let b = s.txn_log_bounds().await.unwrap();
    assert_eq!(b, TxnLogBounds { floor: 0, last: 7, first_date_ms: Some(entries[0].date_ms) });
}

pub async fn txn_log_no_ops_and_conflicts_log_nothing(s: Arc<dyn Store>) {
    let k = b"20.5000/a";
    s.swap(k, Expect::Any, None).await.unwrap(); // delete of an absent handle
    s.swap(k, Expect::Present(url_record("x")), Some(url_record("y"))).await.unwrap(); // conflict
    s.home(b"0.NA/X", false).await.unwrap(); // unhome of what is not homed
    s.meta_put("site/serial", Some(vec![1])).await.unwrap(); // not a homing
    s.meta_put("site/serial", None).await.unwrap();
    assert_eq!(s.txn_log_bounds().await.unwrap(), TxnLogBounds::default());
    s.swap(k, Expect::Absent, Some(url_record("1"))).await.unwrap();
    s.swap(k, Expect::Absent, Some(url_record("2"))).await.unwrap(); // conflict
    s.swap(k, Expect::Present(url_record("2")), None).await.unwrap(); // conflict
    s.swap(k, Expect::Present(url_record("1")), None).await.unwrap();
    s.swap(k, Expect::Any, None).await.unwrap(); // absent again: no-op
    let entries = read_whole_log(&*s).await;
    assert_eq!(
        summary(&entries),
        vec![(1, TxnAction::Create, "20.5000/a".into()), (2, TxnAction::Delete, "20.5000/a".into())]
    );
    assert_eq!(s.txn_log_bounds().await.unwrap().last, 2);
}

pub async fn txn_log_put_many(s: Arc<dyn Store>) {
    s.swap(b"20.5000/b", Expect::Absent, Some(url_record("b"))).await.unwrap();
    let records = vec![
        (b"20.5000/a".to_vec(), url_record("a")),
        (b"20.5000/b".to_vec(), url_record("b2")),
        (b"20.5000/c".to_vec(), url_record("c")),
    ];
    s.put_many(records).await.unwrap();
    let mut got = summary(&read_whole_log(&*s).await);
    assert_eq!(got.remove(0), (1, TxnAction::Create, "20.5000/b".into()));
    // One entry per record, ids 2..=4 (the order within one import is the backend's).
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![2, 3, 4]);
    got.sort_by(|x, y| x.2.cmp(&y.2));
    let actions: Vec<_> = got.iter().map(|g| (g.1, g.2.as_str())).collect();
    assert_eq!(
        actions,
        vec![(TxnAction::Create, "20.5000/a"), (TxnAction::Update, "20.5000/b"), (TxnAction::Create, "20.5000/c")]
    );
}

/// A larger import, of creates and updates mixed and handles of many lengths
/// (the embedded store logs its runs in shared entries): gap-free ids, each
/// change once, and a read from any id with any limit gives the same changes.
pub async fn txn_log_large_import_reads_from_anywhere(s: Arc<dyn Store>) {
    let handle = |i: usize| format!("20.5000/{}{i:04}", "x".repeat(i % 37));
    for i in (0..400).filter(|i| i % 5 == 0 || (100..130).contains(i)) {
        s.swap(handle(i).as_bytes(), Expect::Absent, Some(url_record("old"))).await.unwrap();
    }
    let before = s.txn_log_bounds().await.unwrap().last;
    s.put_many((0..400).map(|i| (handle(i).into_bytes(), url_record("new"))).collect()).await.unwrap();
    let all = read_whole_log(&*s).await;
    let imported = &all[before as usize..];
    assert_eq!(imported.iter().map(|e| e.id).collect::<Vec<_>>(), (before + 1..=before + 400).collect::<Vec<_>>());
    let mut got: Vec<_> = summary(imported).into_iter().map(|(_, a, h)| (h, a.code())).collect();
    got.sort();
    let mut want: Vec<_> = (0..400)
        .map(|i| {
            let existed = i % 5 == 0 || (100..130).contains(&i);
            (handle(i), if existed { TxnAction::Update } else { TxnAction::Create }.code())
        })
        .collect();
    want.sort();
    assert_eq!(got, want);
    assert_dates_never_decrease(&all);
    for limit in [1, 3, 64] {
        for after in 0..=all.len() {
            let page = s.txn_log_read(after as u64, limit).await.unwrap();
            assert_eq!(page, all[after..(after + limit).min(all.len())], "after {after}, limit {limit}");
        }
    }
    // A prune of everything counts every change, those sharing an entry included.
    assert_eq!(s.txn_log_prune(u64::MAX).await.unwrap(), all.len() as u64);
    assert_eq!(s.txn_log_bounds().await.unwrap().floor, before + 400);
}

pub async fn txn_log_read_paging(s: Arc<dyn Store>) {
    for i in 0..25 {
        s.swap(format!("20.5000/{i:02}").as_bytes(), Expect::Absent, Some(url_record("x"))).await.unwrap();
    }
    let ids = |v: Vec<TxnEntry>| v.into_iter().map(|e| e.id).collect::<Vec<_>>();
    assert_eq!(ids(s.txn_log_read(0, 10).await.unwrap()), (1..=10).collect::<Vec<_>>());
    assert_eq!(ids(s.txn_log_read(10, 10).await.unwrap()), (11..=20).collect::<Vec<_>>());
    assert_eq!(ids(s.txn_log_read(20, 10).await.unwrap()), (21..=25).collect::<Vec<_>>());
    assert!(s.txn_log_read(25, 10).await.unwrap().is_empty());
    assert!(s.txn_log_read(1000, 10).await.unwrap().is_empty());
    assert!(s.txn_log_read(u64::MAX, 10).await.unwrap().is_empty());
    assert!(s.txn_log_read(0, 0).await.unwrap().is_empty());
    let page = s.txn_log_read(3, 1).await.unwrap();
    assert_eq!(page, vec![entry(4, page[0].date_ms, TxnAction::Create, "20.5000/03")]);
    // However much is asked for, one read is bounded.
    assert_eq!(s.txn_log_read(0, usize::MAX).await.unwrap().len(), 25.min(TXN_LOG_READ_MAX));
}

/// Replicated changes with chosen dates (1000, 2000, …), so a prune can cut between them.
fn dated(ids: std::ops::RangeInclusive<u64>) -> Vec<ReplicatedChange> {
    ids.map(|i| ReplicatedChange {
        entry: entry(i, i * 1000, TxnAction::Create, &format!("20.5000/r{i}")),
        record: Some(url_record(&i.to_string())),
        priority: None,
    })
    .collect()
}

pub async fn txn_log_prune_raises_floor(s: Arc<dyn Store>) {
    assert_eq!(s.txn_log_prune(u64::MAX).await.unwrap(), 0);
    s.apply_replicated(dated(1..=4), Vec::new()).await.unwrap();
    assert_eq!(s.txn_log_prune(0).await.unwrap(), 0);
    assert_eq!(s.txn_log_prune(2500).await.unwrap(), 2);
    assert_eq!(s.txn_log_bounds().await.unwrap(), TxnLogBounds { floor: 2, last: 4, first_date_ms: Some(3000) });
    assert_eq!(summary(&read_whole_log(&*s).await).iter().map(|e| e.0).collect::<Vec<_>>(), vec![3, 4]);
    assert_eq!(s.txn_log_prune(2500).await.unwrap(), 0, "nothing left to prune");
    // The data stays; only the log is cut.
    assert_eq!(s.get(b"20.5000/r1").await.unwrap(), Some(url_record("1")));
    // Prune everything: the log is empty, but the sequence goes on.
    assert_eq!(s.txn_log_prune(u64::MAX).await.unwrap(), 2);
    assert_eq!(s.txn_log_bounds().await.unwrap(), TxnLogBounds { floor: 4, last: 4, first_date_ms: None });
    s.swap(b"20.5000/new", Expect::Absent, Some(url_record("n"))).await.unwrap();
    let e = read_whole_log(&*s).await;
    assert_eq!(summary(&e), vec![(5, TxnAction::Create, "20.5000/new".into())]);
    assert!(e[0].date_ms >= 4000);
    assert_eq!(
        s.txn_log_bounds().await.unwrap(),
        TxnLogBounds { floor: 4, last: 5, first_date_ms: Some(e[0].date_ms) }
    );
}

pub async fn txn_log_reset(s: Arc<dyn Store>) {
    // An empty log continues at the dump's id.
    s.txn_log_reset(100).await.unwrap();
    assert_eq!(s.txn_log_bounds().await.unwrap(), TxnLogBounds { floor: 100, last: 100, first_date_ms: None });
    s.swap(b"20.5000/a", Expect::Absent, Some(url_record("a"))).await.unwrap();
    assert_eq!(summary(&read_whole_log(&*s).await), vec![(101, TxnAction::Create, "20.5000/a".into())]);
    // A dump from a source with lower ids restarts the log there too, dropping
    // what it kept: ids pulled next must be logged, not taken for ones we had.
    s.txn_log_reset(50).await.unwrap();
    assert_eq!(s.txn_log_bounds().await.unwrap(), TxnLogBounds { floor: 50, last: 50, first_date_ms: None });
    assert!(read_whole_log(&*s).await.is_empty());
    s.swap(b"20.5000/b", Expect::Absent, Some(url_record("b"))).await.unwrap();
    assert_eq!(summary(&read_whole_log(&*s).await), vec![(51, TxnAction::Create, "20.5000/b".into())]);
    // A log behind the id restarts there, dropping what it kept.
    s.txn_log_reset(500).await.unwrap();
    assert_eq!(s.txn_log_bounds().await.unwrap(), TxnLogBounds { floor: 500, last: 500, first_date_ms: None });
    assert!(read_whole_log(&*s).await.is_empty());
    assert_eq!(s.get(b"20.5000/a").await.unwrap(), Some(url_record("a")), "the data stays");
    s.swap(b"20.5000/a", Expect::Any, None).await.unwrap();
    assert_eq!(summary(&read_whole_log(&*s).await), vec![(501, TxnAction::Delete, "20.5000/a".into())]);
}

pub async fn txn_log_apply_replicated(s: Arc<dyn Store>) {
    use TxnAction::*;
    let first = ReplicatedChange {
        entry: entry(10, 4000, Create, "20.5000/gone"),
        record: Some(url_record("old")),
        priority: None,
    };
    s.apply_replicated(vec![first], Vec::new()).await.unwrap();
    assert_eq!(s.get(b"20.5000/gone").await.unwrap(), Some(url_record("old")));
    let changes = vec![
        ReplicatedChange {
            entry: entry(11, 5000, Create, "20.5000/a"),
            record: Some(url_record("a1")),
            priority: None,
        },
        ReplicatedChange {
            entry: entry(12, 6000, Update, "20.5000/a"),
            record: Some(url_record("a2")),
            priority: None,
        },
        // Gone at the source by send time: no values, so a delete.
        ReplicatedChange { entry: entry(13, 6000, Create, "20.5000/gone"), record: None, priority: None },
        ReplicatedChange { entry: entry(14, 7000, HomeNa, "0.NA/20.5000"), record: None, priority: None },
        // A date before the last one logged is raised to it.
        ReplicatedChange { entry: entry(15, 6500, Delete, "20.5000/never"), record: None, priority: None },
    ];
    let progress = vec![("repl/source".to_owned(), Some(b"15".to_vec())), ("repl/old".to_owned(), None)];
    s.meta_put("repl/old", Some(vec![1])).await.unwrap();
    s.apply_replicated(changes, progress).await.unwrap();
    assert_eq!(s.get(b"20.5000/a").await.unwrap(), Some(url_record("a2")));
    assert_eq!(s.get(b"20.5000/gone").await.unwrap(), None);
    assert_eq!(s.homed_prefixes().await.unwrap(), vec![b"0.NA/20.5000".to_vec()]);
    assert_eq!(s.meta_get("repl/source").await.unwrap(), Some(b"15".to_vec()));
    assert_eq!(s.meta_get("repl/old").await.unwrap(), None);
    let got = read_whole_log(&*s).await;
    assert_eq!(got[0], entry(10, 4000, Create, "20.5000/gone"));
    assert_eq!(
        got[1..],
        [
            entry(11, 5000, Create, "20.5000/a"),
            entry(12, 6000, Update, "20.5000/a"),
            entry(13, 6000, Create, "20.5000/gone"),
            entry(14, 7000, HomeNa, "0.NA/20.5000"),
            entry(15, 7000, Delete, "20.5000/never"),
        ]
    );
    // A pull that overlaps the last one: ids already logged are applied (the
    // state as sent now) but not logged again.
    let again = vec![
        ReplicatedChange { entry: entry(14, 7000, UnhomeNa, "0.NA/20.5000"), record: None, priority: None },
        ReplicatedChange {
            entry: entry(16, 8000, Update, "20.5000/a"),
            record: Some(url_record("a3")),
            priority: None,
        },
    ];
    s.apply_replicated(again, vec![("repl/source".to_owned(), Some(b"16".to_vec()))]).await.unwrap();
    assert!(s.homed_prefixes().await.unwrap().is_empty());
    assert_eq!(s.get(b"20.5000/a").await.unwrap(), Some(url_record("a3")));
    let got = read_whole_log(&*s).await;
    assert_eq!(got.iter().map(|e| e.id).collect::<Vec<_>>(), vec![10, 11, 12, 13, 14, 15, 16]);
    assert_eq!(got[4].action, HomeNa, "entry 14 was not rewritten");
    // A promoted mirror continues the source's sequence.
    s.swap(b"20.5000/local", Expect::Absent, Some(url_record("l"))).await.unwrap();
    let last = read_whole_log(&*s).await.pop().unwrap();
    assert_eq!((last.id, last.action), (17, Create));
    assert!(last.date_ms >= 8000);
    assert_eq!(s.txn_log_bounds().await.unwrap().last, 17);
}

pub async fn txn_log_apply_replicated_all_or_nothing(s: Arc<dyn Store>) {
    let max = handled_proto::codec::MAX_ARRAY_LEN;
    let bad = crate::HandleRecord::new(vec![handled_proto::HandleValue::new(1, "URL", vec![0u8; max + 1])]);
    let changes = vec![
        ReplicatedChange {
            entry: entry(1, 1000, TxnAction::Create, "20.5000/ok"),
            record: Some(url_record("ok")),
            priority: None,
        },
        ReplicatedChange { entry: entry(2, 1000, TxnAction::Create, "20.5000/bad"), record: Some(bad), priority: None },
    ];
    let progress = vec![("repl/source".to_owned(), Some(b"2".to_vec()))];
    assert!(s.apply_replicated(changes, progress).await.is_err(), "an unstorable record refuses the whole pull");
    assert_eq!(s.get(b"20.5000/ok").await.unwrap(), None);
    assert_eq!(s.meta_get("repl/source").await.unwrap(), None);
    assert_eq!(s.txn_log_bounds().await.unwrap(), TxnLogBounds::default());
}

pub async fn txn_log_subscribe_wakes_on_commit(s: Arc<dyn Store>) {
    let mut rx = s.txn_log_subscribe();
    assert_eq!(*rx.borrow_and_update(), 0);
    let waiter = {
        let s = s.clone();
        let mut rx = s.txn_log_subscribe();
        tokio::spawn(async move {
            rx.changed().await.unwrap();
            let last = *rx.borrow_and_update();
            // Woken only once the entry is visible.
            let entries = s.txn_log_read(last - 1, 10).await.unwrap();
            (last, entries)
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await; // let the waiter start waiting
    s.swap(b"20.5000/a", Expect::Absent, Some(url_record("a"))).await.unwrap();
    let (last, entries) = tokio::time::timeout(Duration::from_secs(10), waiter).await.expect("not woken").unwrap();
    assert_eq!(last, 1);
    assert_eq!(summary(&entries), vec![(1, TxnAction::Create, "20.5000/a".into())]);
    assert!(rx.has_changed().unwrap());
    assert_eq!(*rx.borrow_and_update(), 1);
    // Writes that log nothing wake nobody.
    s.swap(b"20.5000/a", Expect::Absent, Some(url_record("b"))).await.unwrap();
    s.meta_put("site/x", Some(vec![1])).await.unwrap();
    assert!(!rx.has_changed().unwrap());
    s.home(b"0.NA/X", true).await.unwrap();
    assert!(rx.has_changed().unwrap());
    assert_eq!(*rx.borrow_and_update(), 2);
}

pub async fn txn_log_concurrent_ids_gap_free(s: Arc<dyn Store>) {
    const TASKS: u64 = 8;
    const EACH: u64 = 25;
    on_tasks(&s, TASKS as u32, |s, t| async move {
        for i in 0..EACH {
            let k = format!("20.5000/t{t}-{i}");
            s.swap(k.as_bytes(), Expect::Absent, Some(url_record("1"))).await.unwrap();
            s.swap(k.as_bytes(), Expect::Present(url_record("1")), Some(url_record("2"))).await.unwrap();
            // A conflicting write from the same task: never logged.
            s.swap(k.as_bytes(), Expect::Absent, Some(url_record("3"))).await.unwrap();
        }
    })
    .await;
    let entries = read_whole_log(&*s).await;
    assert_eq!(entries.iter().map(|e| e.id).collect::<Vec<_>>(), (1..=TASKS * EACH * 2).collect::<Vec<_>>());
    assert_dates_never_decrease(&entries);
    // Each handle: its create, then its update, in that order.
    let mut seen = std::collections::HashMap::new();
    for e in &entries {
        let next = seen.entry(e.handle.clone()).or_insert(TxnAction::Create);
        assert_eq!(e.action, *next, "{e:?}");
        *next = TxnAction::Update;
    }
    assert_eq!(seen.len() as u64, TASKS * EACH);
    assert_eq!(s.txn_log_bounds().await.unwrap().last, TASKS * EACH * 2);
}

pub async fn txn_log_checkpoint(s: Arc<dyn Store>) {
    s.swap(b"20.5000/a", Expect::Absent, Some(url_record("a"))).await.unwrap();
    s.checkpoint().await.unwrap();
    s.checkpoint().await.unwrap();
    assert_eq!(s.get(b"20.5000/a").await.unwrap(), Some(url_record("a")));
    assert_eq!(s.txn_log_bounds().await.unwrap().last, 1, "a checkpoint is not logged");
    s.close();
    assert!(s.checkpoint().await.is_err(), "a closed store refuses");
}
