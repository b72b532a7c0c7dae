//! Behaviour specific to the durable backend: persistence across reopen, group
//! commit, corrupt data and files, locking.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use handled_store::conformance::{rich_record, url_record};
use handled_store::{
    EmbeddedOptions, EmbeddedStore, Expect, HandleRecord, RecordStore, Store, StoreAdmin, StoreError, SwapOutcome,
    HANDLES_TABLE, STORE_FILE_NAME,
};

fn open(dir: &Path) -> EmbeddedStore {
    EmbeddedStore::open_dir(dir, EmbeddedOptions::default()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_persists_everything() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path());
        for i in 0..50u32 {
            s.swap(format!("20.5000/h{i:02}").as_bytes(), Expect::Absent, Some(rich_record(i))).await.unwrap();
        }
        s.swap(b"20.5000/h07", Expect::Present(rich_record(7)), Some(url_record("changed"))).await.unwrap();
        s.swap(b"20.5000/h08", Expect::Any, None).await.unwrap();
        s.put_many((0..100u32).map(|i| (format!("20.6000/{i:03}").into_bytes(), url_record("imp"))).collect())
            .await
            .unwrap();
        s.meta_put("prefix/20.5000", Some(b"homed".to_vec())).await.unwrap();
        s.meta_put("gone", Some(b"x".to_vec())).await.unwrap();
        s.meta_put("gone", None).await.unwrap();
        assert!(!s.was_repaired());
    } // dropped: writer joined, file closed
    let s = open(dir.path());
    assert!(!s.was_repaired(), "a clean close must not need a repair");
    assert_eq!(s.count().await.unwrap(), 49 + 100);
    assert_eq!(s.get(b"20.5000/h07").await.unwrap(), Some(url_record("changed")));
    assert_eq!(s.get(b"20.5000/h08").await.unwrap(), None);
    assert_eq!(s.get(b"20.5000/h49").await.unwrap(), Some(rich_record(49)));
    assert_eq!(s.get(b"20.6000/099").await.unwrap(), Some(url_record("imp")));
    assert_eq!(s.meta_get("prefix/20.5000").await.unwrap(), Some(b"homed".to_vec()));
    assert_eq!(s.meta_get("gone").await.unwrap(), None);
    assert_eq!(s.scan_keys(b"20.5000/", None, 3).await.unwrap()[2], b"20.5000/h02");
    // Explicit close works the same as drop.
    s.close();
    let s = EmbeddedStore::open(&dir.path().join(STORE_FILE_NAME), EmbeddedOptions::default()).unwrap();
    assert_eq!(s.count().await.unwrap(), 149);
}

/// Many tasks swapping distinct and shared keys; every acknowledged write is there
/// after a reopen, and no CAS update was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_swaps_all_persisted_and_batched() {
    let dir = tempfile::tempdir().unwrap();
    let s: Arc<dyn Store> = Arc::new(open(dir.path()));
    let tasks = 64u32;
    let per = 30u32;
    let hot: &[&[u8]] = &[b"20.5000/hot0", b"20.5000/hot1"];
    for k in hot {
        s.swap(k, Expect::Absent, Some(url_record("0"))).await.unwrap();
    }
    let mut joins = Vec::new();
    for t in 0..tasks {
        let s = s.clone();
        joins.push(tokio::spawn(async move {
            let mut mine = BTreeMap::new();
            let mut increments = 0u64;
            for i in 0..per {
                let k = format!("20.5000/c{t}-{i}").into_bytes();
                let r = url_record(&format!("{t}/{i}"));
                assert!(s.swap(&k, Expect::Absent, Some(r.clone())).await.unwrap().is_done());
                mine.insert(k, r);
                // A CAS increment of a shared counter every few writes.
                if i % 3 == 0 {
                    let hk = hot[(t % 2) as usize];
                    let mut cur = s.get(hk).await.unwrap().unwrap();
                    loop {
                        let n: u64 = std::str::from_utf8(&cur.values[0].data).unwrap().parse().unwrap();
                        match s
                            .swap(hk, Expect::Present(cur.clone()), Some(url_record(&(n + 1).to_string())))
                            .await
                            .unwrap()
                        {
                            SwapOutcome::Done { .. } => break,
                            SwapOutcome::Conflict { current } => cur = current.unwrap(),
                        }
                    }
                    increments += 1;
                }
            }
            (mine, increments, t % 2)
        }));
    }
    let mut all = BTreeMap::new();
    let mut incs = [0u64; 2];
    for j in joins {
        let (mine, n, h) = j.await.unwrap();
        all.extend(mine);
        incs[h as usize] += n;
    }
    let stats = s.stats();
    assert!(stats.max_batch > 1, "no group commit under load: {stats:?}");
    assert!(stats.commits < stats.write_ops, "{stats:?}");
    // A batch of conflicts only changes nothing and syncs nothing.
    assert!(stats.fsyncs <= stats.commits && stats.fsyncs > 0, "{stats:?}");
    assert_eq!(stats.failed_ops, 0);
    eprintln!(
        "{} ops in {} commits, mean batch {:.1}, max {}",
        stats.write_ops,
        stats.commits,
        stats.mean_batch(),
        stats.max_batch
    );
    drop(s);

    let s = open(dir.path());
    for (k, r) in &all {
        assert_eq!(s.get(k).await.unwrap().as_ref(), Some(r));
    }
    for (i, k) in hot.iter().enumerate() {
        assert_eq!(s.get(k).await.unwrap(), Some(url_record(&incs[i].to_string())));
    }
    assert_eq!(s.count().await.unwrap(), all.len() as u64 + 2);
}

/// Write raw bytes under a key, bypassing the store (as a bug or a bad disk might).
fn inject_raw(file: &Path, key: &[u8], value: &[u8]) {
    let db = redb::Database::open(file).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let def: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new(HANDLES_TABLE);
        let mut t = txn.open_table(def).unwrap();
        t.insert(key, value).unwrap();
    }
    txn.commit().unwrap();
}

/// Records written into redb behind the store's back are read through redb:
/// a key directory would not know them (its own damage tests are in
/// `embedded_keydir_tests.rs`).
fn open_redb_only(dir: &Path) -> EmbeddedStore {
    EmbeddedStore::open_dir(dir, EmbeddedOptions { key_directory: false, ..Default::default() }).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_records_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(STORE_FILE_NAME);
    open_redb_only(dir.path()).swap(b"20.5000/ok", Expect::Absent, Some(url_record("fine"))).await.unwrap();
    let mut bad_values: Vec<Vec<u8>> = vec![
        vec![],
        vec![0, 0, 0],
        vec![0, 0, 0, 1],                // one value announced, none there
        vec![0xff, 0xff, 0xff, 0xff],    // negative count
        vec![0x7f, 0xff, 0xff, 0xff, 1], // huge count
        b"not a record at all".to_vec(),
    ];
    let mut trailing = url_record("x").encode();
    trailing.push(0);
    bad_values.push(trailing);
    let mut bad_ttl = url_record("x").encode_wire();
    bad_ttl[4 + 8] = 9; // TTL type byte of the first value, in the form written before the compact one
    bad_values.push(bad_ttl);
    let mut wire_trailing = url_record("x").encode_wire();
    wire_trailing.push(0);
    bad_values.push(wire_trailing);
    bad_values.push(vec![0xc5, 0x01, 1, 0, 0, 0, 0]); // compact: one value announced, none there
    bad_values.push(vec![0xc5, 0x80, 0]); // compact: an unknown flag
    for (i, v) in bad_values.iter().enumerate() {
        inject_raw(&file, format!("20.5000/bad{i}").as_bytes(), v);
    }

    let s = open_redb_only(dir.path());
    assert_eq!(s.get(b"20.5000/ok").await.unwrap(), Some(url_record("fine")));
    for i in 0..bad_values.len() {
        let k = format!("20.5000/bad{i}").into_bytes();
        match s.get(&k).await {
            Err(StoreError::Corrupt(m)) => assert!(m.contains(&format!("bad{i}")), "{m}"),
            other => panic!("bad{i}: {other:?}"),
        }
        // Conditional swaps that would have to report the current record: Corrupt,
        // and nothing is written.
        let e = s.swap(&k, Expect::Absent, Some(url_record("n"))).await.unwrap_err();
        assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
        let e = s.swap(&k, Expect::Present(url_record("x")), Some(url_record("n"))).await.unwrap_err();
        assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
        assert!(matches!(s.get(&k).await, Err(StoreError::Corrupt(_))));
    }
    // Listing does not decode: all keys are listed.
    assert_eq!(s.scan_keys(b"20.5000/bad", None, 100).await.unwrap().len(), bad_values.len());
    // An unconditional overwrite repairs the handle.
    let out = s.swap(b"20.5000/bad0", Expect::Any, Some(url_record("repaired"))).await.unwrap();
    assert_eq!(out, SwapOutcome::Done { previous: None });
    assert_eq!(s.get(b"20.5000/bad0").await.unwrap(), Some(url_record("repaired")));
    let out = s.swap(b"20.5000/bad1", Expect::Any, None).await.unwrap();
    assert!(out.is_done());
    assert_eq!(s.get(b"20.5000/bad1").await.unwrap(), None);
}

#[test]
fn damaged_files_fail_to_open_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    // Not a database at all.
    let junk = dir.path().join("junk.redb");
    std::fs::write(&junk, vec![0x5a; 64 * 1024]).unwrap();
    match EmbeddedStore::open(&junk, EmbeddedOptions::default()) {
        Err(e) => {
            assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
            eprintln!("junk file: {e}")
        }
        Ok(_) => panic!("opened a junk file"),
    }
    // A real store, truncated.
    let file = dir.path().join("trunc.redb");
    {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let s = EmbeddedStore::open(&file, EmbeddedOptions::default()).unwrap();
        rt.block_on(s.put_many((0..2000u32).map(|i| (format!("20.5000/{i}").into_bytes(), rich_record(i))).collect()))
            .unwrap();
    }
    let len = std::fs::metadata(&file).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len(len / 3).unwrap();
    drop(f);
    let r = std::panic::catch_unwind(|| EmbeddedStore::open(&file, EmbeddedOptions::default()).map(|_| ()));
    match r {
        Ok(Err(e)) => eprintln!("truncated file: {e}"),
        Ok(Ok(())) => {} // redb may find an older consistent state; acceptable
        Err(_) => panic!("open panicked on a truncated file"),
    }
    // A directory we cannot create a file in.
    let e = EmbeddedStore::open(Path::new("/proc/handled-store-test/x.redb"), EmbeddedOptions::default()).unwrap_err();
    assert!(matches!(e, StoreError::Io(_)), "{e:?}");
    assert!(e.to_string().contains("/proc/handled-store-test/x.redb"), "{e}");
}

#[test]
fn second_open_of_same_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _a = open(dir.path());
    let e = EmbeddedStore::open_dir(dir.path(), EmbeddedOptions::default()).unwrap_err();
    assert!(matches!(e, StoreError::Backend(ref m) if m.contains("already open")), "{e:?}");
}

#[test]
fn open_accepts_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let s = EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).unwrap();
    assert_eq!(s.path(), dir.path().join(STORE_FILE_NAME));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_repair_option_works() {
    let dir = tempfile::tempdir().unwrap();
    let opts = EmbeddedOptions { quick_repair: true, max_batch_ops: 4, ..Default::default() };
    {
        let s = EmbeddedStore::open_dir(dir.path(), opts.clone()).unwrap();
        for i in 0..20u32 {
            s.swap(format!("k{i}").as_bytes(), Expect::Absent, Some(HandleRecord::default())).await.unwrap();
        }
    }
    let s = EmbeddedStore::open_dir(dir.path(), opts).unwrap();
    assert_eq!(s.count().await.unwrap(), 20);
}

/// The server shares its store behind an Arc and cannot drop it on shutdown:
/// `close` through the trait must still leave a file that reopens without repair.
#[tokio::test(flavor = "multi_thread")]
async fn close_through_a_shared_handle_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let shared: std::sync::Arc<dyn handled_store::Store> = std::sync::Arc::new(open(dir.path()));
    let other_holder = shared.clone();
    shared.swap(b"20.5000/x", Expect::Absent, Some(url_record("x"))).await.unwrap();
    shared.close();
    let s = open(dir.path());
    assert!(!s.was_repaired(), "closed while still shared: must not need a repair");
    assert_eq!(s.get(b"20.5000/x").await.unwrap(), Some(url_record("x")));
    drop(other_holder);
}

/// The store reads its file once after opening (into the OS page cache), says
/// so while it does, and is done soon on a small store; turned off, it says
/// nothing. Reads and writes are served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warming_after_open_finishes_and_can_be_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path());
        s.put_many((0..2000u32).map(|i| (format!("20.6000/{i:04}").into_bytes(), url_record("w"))).collect())
            .await
            .unwrap();
    }
    let s = open(dir.path());
    if let Some(w) = s.warming() {
        assert!(w.read_bytes <= w.total_bytes);
    }
    assert_eq!(s.get(b"20.6000/0007").await.unwrap(), Some(url_record("w")));
    let start = std::time::Instant::now();
    while s.warming().is_some() {
        assert!(start.elapsed() < std::time::Duration::from_secs(30), "warming did not finish");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    drop(s);
    let off = EmbeddedOptions { warm_on_open: false, ..Default::default() };
    let s = EmbeddedStore::open_dir(dir.path(), off).unwrap();
    assert_eq!(s.warming(), None);
    assert_eq!(s.count().await.unwrap(), 2000);
}

/// An import's changes are logged in shared entries, a few bytes a handle,
/// where an entry each took ~41 B/handle of the store file (issue 45); opened
/// again, the log reads back every change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_is_logged_in_runs() {
    use redb::{ReadableDatabase, ReadableTable};
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let n = 10_000;
    s.put_many((0..n).map(|i| (format!("TEST/{i:08}").into_bytes(), url_record("u"))).collect()).await.unwrap();
    StoreAdmin::close(&s);
    drop(s);
    {
        let db = redb::Database::open(dir.path().join(STORE_FILE_NAME)).unwrap();
        let txn = db.begin_read().unwrap();
        let def: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("txnlog.v1");
        let (mut entries, mut bytes) = (0, 0);
        for item in txn.open_table(def).unwrap().iter().unwrap() {
            let (k, v) = item.unwrap();
            entries += 1;
            bytes += k.value().len() + v.value().len();
        }
        assert!(entries <= n / 50, "{entries} entries for {n} handles");
        assert!(bytes <= n * 6, "{bytes} bytes for {n} handles");
    }
    let s = open(dir.path());
    let log = handled_store::conformance::read_whole_log(&s).await;
    assert_eq!(log.iter().map(|e| e.id).collect::<Vec<_>>(), (1..=n as u64).collect::<Vec<_>>());
    assert!(log.iter().all(|e| e.action == handled_store::TxnAction::Create));
}
