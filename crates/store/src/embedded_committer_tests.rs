use std::time::Duration;

use redb::ReadableTableMetadata;

use super::super::{EmbeddedOptions, EmbeddedStore};
use super::TEST_CHECKPOINT_PAUSE;
use crate::conformance::url_record;
use crate::{
    DocWrite, Document, DocumentStore, Expect, IndexEntry, IndexMatch, RecordStore, StoreAdmin, SwapOutcome,
    TxnLogStore,
};

fn key(i: usize) -> Vec<u8> {
    format!("20.5000/ov-{i:03}").into_bytes()
}

fn doc_for(i: usize) -> DocWrite {
    let k = key(i);
    DocWrite::new("rev", k.clone(), Some(Document::new(k.as_slice(), vec![IndexEntry::new("url", k.as_slice())])))
}

/// Every read sees exactly the handles `live` (and their documents and log entries).
async fn check_reads(s: &EmbeddedStore, live: &[usize], log_len: usize) {
    for &i in live {
        assert!(s.get(&key(i)).await.unwrap().is_some(), "get {i}");
        let hits = s.doc_lookup("rev", "url", IndexMatch::Exact(&key(i)), None, 10).await.unwrap();
        assert_eq!(hits.len(), 1, "lookup {i}");
        assert!(s.doc_get("rev", &key(i)).await.unwrap().is_some(), "doc {i}");
    }
    let mut want: Vec<Vec<u8>> = live.iter().map(|&i| key(i)).collect();
    want.sort();
    assert_eq!(s.scan_keys(b"20.5000/ov-", None, 1000).await.unwrap(), want);
    assert_eq!(s.count().await.unwrap(), live.len() as u64);
    let log = s.txn_log_read(0, 1000).await.unwrap();
    assert_eq!(log.len(), log_len);
    assert!(log.iter().enumerate().all(|(n, e)| e.id == n as u64 + 1), "log ids gap-free");
    assert_eq!(s.txn_log_bounds().await.unwrap().last, log_len as u64);
    let docs = s.doc_scan("rev", b"20.5000/ov-", None, 1000).await.unwrap();
    assert_eq!(docs.len(), live.len());
}

async fn create(s: &EmbeddedStore, i: usize) -> SwapOutcome {
    let k = key(i);
    let w = s.swap_with_docs(&k, Expect::Absent, Some(url_record("http://x/")), vec![doc_for(i)]);
    tokio::time::timeout(Duration::from_secs(20), w).await.expect("a write waited for the checkpoint").unwrap()
}

/// While a checkpoint cannot even begin its commit, writes are acknowledged
/// (into the active layer) and every read sees them; afterwards the frozen layer
/// is in redb, and everything survives a reopen. (With the checkpoint on the writer,
/// as before, the first write after the pause waits: the timeout fails.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// Holding the pause across the writes is the point: the checkpoint thread waits on it.
#[allow(clippy::await_holding_lock)]
async fn writes_and_reads_go_on_while_a_checkpoint_runs() {
    let dir = tempfile::tempdir().unwrap();
    let opts = EmbeddedOptions { checkpoint_interval: Duration::ZERO, min_free_bytes: 0, ..Default::default() };
    let s = EmbeddedStore::open_dir(dir.path(), opts.clone()).unwrap();
    let pause = TEST_CHECKPOINT_PAUSE.lock();
    // Committed to redb, then a checkpoint starts and waits on the pause.
    assert!(matches!(create(&s, 0).await, SwapOutcome::Done { .. }));
    let mut live = vec![0];
    for i in 1..30 {
        assert!(matches!(create(&s, i).await, SwapOutcome::Done { .. }), "create {i}");
        live.push(i);
    }
    let overlay = s.shared.snapshot.load_full().unwrap().active_bytes;
    assert!(overlay > 0, "the writes went to the active layer");
    // Compare-and-set sees the layers, removals hide what redb still has.
    assert!(matches!(create(&s, 3).await, SwapOutcome::Conflict { current: Some(_) }));
    for i in [0, 5] {
        let k = key(i);
        let gone = s.swap_with_docs(&k, Expect::Any, None, vec![DocWrite { doc: None, ..doc_for(i) }]);
        assert!(matches!(gone.await.unwrap(), SwapOutcome::Done { previous: Some(_) }));
        live.retain(|&l| l != i);
    }
    let log_len = 32;
    check_reads(&s, &live, log_len).await;
    // A backup started now holds every acknowledged write.
    let mut export = s.export().unwrap();
    let mut handles = 0;
    loop {
        let entries = export.next_entries(1 << 20).unwrap();
        if entries.is_empty() {
            break;
        }
        handles += entries.iter().filter(|e| e.table == crate::backup::BackupTable::Handles).count();
    }
    assert_eq!(handles, live.len());

    drop(pause);
    // The next batch waits for nothing long: the checkpoint finishes, its snapshot is published.
    assert!(matches!(create(&s, 40).await, SwapOutcome::Done { .. }));
    live.push(40);
    std::thread::sleep(Duration::from_millis(50));
    assert!(matches!(create(&s, 41).await, SwapOutcome::Done { .. }));
    live.push(41);
    check_reads(&s, &live, log_len + 2).await;
    drop(s);

    let s = EmbeddedStore::open_dir(dir.path(), opts).unwrap();
    check_reads(&s, &live, log_len + 2).await;
}

/// A checkpoint starts at every `checkpoint_log_bytes` of log, not only on
/// time: with an hour between timed ones, writes still move into redb as they
/// go and the log files stay small (each checkpoint's work is bounded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_start_at_the_log_bound() {
    let dir = tempfile::tempdir().unwrap();
    let opts = EmbeddedOptions {
        checkpoint_interval: Duration::from_secs(3600),
        checkpoint_log_bytes: 4096,
        min_free_bytes: 0,
        ..Default::default()
    };
    let s = EmbeddedStore::open_dir(dir.path(), opts).unwrap();
    let mut live = Vec::new();
    for i in 0..300 {
        assert!(matches!(create(&s, i).await, SwapOutcome::Done { .. }), "create {i}");
        live.push(i);
    }
    // Another test may hold every checkpoint back for a while: keep writing
    // until one that started after the first 300 writes has finished.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut i = 300;
    loop {
        let in_redb = s.shared.snapshot.load_full().unwrap().snap.handles.len().unwrap();
        if in_redb >= 300 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "only {in_redb} of 300 handles reached the store file");
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(matches!(create(&s, i).await, SwapOutcome::Done { .. }), "create {i}");
        live.push(i);
        i += 1;
    }
    for path in super::super::Wal::paths_for(&dir.path().join(super::super::STORE_FILE_NAME)) {
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(len < 256 << 10, "{} holds {len} bytes", path.display());
    }
    check_reads(&s, &live, live.len()).await;
}

/// An idle store has every write in its file, and its log empty, within a
/// checkpoint interval of the last write (nothing waits in memory for a next
/// write that may not come).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_store_checkpoints_what_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let interval = Duration::from_millis(50);
    let opts = EmbeddedOptions { checkpoint_interval: interval, min_free_bytes: 0, ..Default::default() };
    let s = EmbeddedStore::open_dir(dir.path(), opts).unwrap();
    let live: Vec<usize> = (0..10).collect();
    for &i in &live {
        assert!(matches!(create(&s, i).await, SwapOutcome::Done { .. }), "create {i}");
    }
    // Another test may hold checkpoints back for a while.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let logs = super::super::Wal::paths_for(&dir.path().join(super::super::STORE_FILE_NAME));
    loop {
        let view = s.shared.snapshot.load_full().unwrap();
        let in_memory = view.active.len() + view.frozen.len();
        let logged: u64 = logs.iter().map(|p| std::fs::metadata(p).unwrap().len()).sum();
        if in_memory == 0 && logged == 0 {
            assert_eq!(view.snap.handles.len().unwrap(), live.len() as u64);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{in_memory} entries still in memory and {logged} log bytes, long after the last write"
        );
        tokio::time::sleep(interval).await;
    }
    check_reads(&s, &live, live.len()).await;
}
