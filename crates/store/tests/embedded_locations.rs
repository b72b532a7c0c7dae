//! Handle values kept as their records' locations in the key directory's
//! segments (issue 45, `embedded_keydir_locations.rs`): what redb holds, reads
//! through it (exports) while a merge deletes the segments they name, and a
//! store opened without the directory getting its values back.

use std::path::Path;
use std::time::Duration;

use handled_store::backup::{BackupTable, StoreExport};
use handled_store::conformance::url_record;
use handled_store::{
    EmbeddedOptions, EmbeddedStore, Expect, HandleRecord, RecordStore, StoreAdmin, HANDLES_TABLE, STORE_FILE_NAME,
};
use redb::{ReadableDatabase, ReadableTable, TableDefinition};

const HANDLES: TableDefinition<&[u8], &[u8]> = TableDefinition::new(HANDLES_TABLE);
const FORMAT: TableDefinition<&str, u64> = TableDefinition::new("format");
/// A location's first byte, after the value's 4-byte checksum.
const LOCATION_TAG: u8 = 0xC6;

fn opts(key_directory: bool) -> EmbeddedOptions {
    EmbeddedOptions {
        key_directory,
        key_directory_segment_bytes: 16 << 10,
        checkpoint_interval: Duration::from_secs(3600),
        warm_on_open: false,
        min_free_bytes: 0,
        ..Default::default()
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("20.5000/loc-{i:05}").into_bytes()
}

/// (handles whose redb value is a location, all handles, the `locations` mark).
fn raw_forms(dir: &Path) -> (usize, usize, bool) {
    let db = redb::Database::open(dir.join(STORE_FILE_NAME)).unwrap();
    let txn = db.begin_read().unwrap();
    let t = txn.open_table(HANDLES).unwrap();
    let (mut located, mut all) = (0, 0);
    for item in t.iter().unwrap() {
        let (_, v) = item.unwrap();
        located += usize::from(v.value().get(4) == Some(&LOCATION_TAG));
        all += 1;
    }
    let mark = txn.open_table(FORMAT).unwrap().get("locations").unwrap().is_some();
    (located, all, mark)
}

/// Every handle an export holds, decoded.
fn exported(export: &mut dyn StoreExport, per_step: usize) -> Vec<(Vec<u8>, HandleRecord)> {
    let mut out = Vec::new();
    loop {
        let entries = export.next_entries(per_step).unwrap();
        if entries.is_empty() {
            return out;
        }
        for e in entries.into_iter().filter(|e| e.table == BackupTable::Handles) {
            let r = HandleRecord::decode_stored(&e.key, &e.payload).unwrap();
            out.push((e.key, r));
        }
    }
}

fn segment_files(dir: &Path) -> Vec<String> {
    let mut seg_dir = dir.join(STORE_FILE_NAME).into_os_string();
    seg_dir.push(".keydir");
    let mut names: Vec<String> = std::fs::read_dir(seg_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("seg-"))
        .collect();
    names.sort();
    names
}

/// Imports and checkpoints write locations; gets, exports and compare-and-set
/// read the records through them, before and after a reopen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imports_and_checkpoints_write_locations_that_every_read_follows() {
    let dir = tempfile::tempdir().unwrap();
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    let batch: Vec<_> = (0..500).map(|i| (key(i), url_record(&format!("import-{i}")))).collect();
    s.put_many(batch).await.unwrap();
    for i in (0..500).step_by(5) {
        let old = url_record(&format!("import-{i}"));
        let done = s.swap(&key(i), Expect::Present(old), Some(url_record(&format!("swap-{i}")))).await.unwrap();
        assert!(matches!(done, handled_store::SwapOutcome::Done { .. }), "{i}: {done:?}");
    }
    s.swap(&key(1), Expect::Any, None).await.unwrap();
    s.checkpoint().await.unwrap();
    let want = |i: usize| match i {
        1 => None,
        i if i % 5 == 0 => Some(url_record(&format!("swap-{i}"))),
        i => Some(url_record(&format!("import-{i}"))),
    };
    let check = |all: Vec<(Vec<u8>, HandleRecord)>| {
        assert_eq!(all.len(), 499);
        for (k, r) in all {
            let i: usize = std::str::from_utf8(&k[12..]).unwrap().parse().unwrap();
            assert_eq!(Some(r), want(i), "{i}");
        }
    };
    check(exported(&mut *s.export().unwrap(), 4096));
    drop(s);
    assert_eq!(raw_forms(dir.path()), (499, 499, true), "every value a location");
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    for i in 0..500 {
        assert_eq!(s.get(&key(i)).await.unwrap(), want(i), "{i}");
    }
    check(exported(&mut *s.export().unwrap(), 4096));
    // A compare-and-set against a record redb holds as a location.
    let old = want(7).unwrap();
    let done = s.swap(&key(7), Expect::Present(old), Some(url_record("again"))).await.unwrap();
    assert!(matches!(done, handled_store::SwapOutcome::Done { .. }), "{done:?}");
}

/// An export (a snapshot) begun before the merge deleted the segment its
/// locations name still reads every record, as it was when it began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_reads_segments_the_merge_deleted_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    let pad = "p".repeat(400);
    for i in 0..100 {
        s.swap(&key(i), Expect::Any, Some(url_record(&format!("first-{i}-{pad}")))).await.unwrap();
    }
    s.checkpoint().await.unwrap();
    let before = segment_files(dir.path());
    let mut export = s.export().unwrap();
    // Overwritten over and over: the merge copies the live records forward and
    // deletes the segments they were in.
    for round in 0..30 {
        for i in 0..100 {
            s.swap(&key(i), Expect::Any, Some(url_record(&format!("r{round}-{i}-{pad}")))).await.unwrap();
        }
        s.checkpoint().await.unwrap();
    }
    let after = segment_files(dir.path());
    assert!(!after.contains(&before[0]), "the first segment was merged away: {before:?} → {after:?}");
    let all = exported(&mut *export, 1024);
    assert_eq!(all.len(), 100);
    for (i, (k, r)) in all.into_iter().enumerate() {
        assert_eq!(k, key(i));
        assert_eq!(r, url_record(&format!("first-{i}-{pad}")));
    }
    // And the store itself the last round.
    for i in 0..100 {
        assert_eq!(s.get(&key(i)).await.unwrap(), Some(url_record(&format!("r29-{i}-{pad}"))));
    }
    drop(s);
    let (located, all, _) = raw_forms(dir.path());
    assert_eq!((located, all), (100, 100));
}

/// A store opened without the directory gets its values back into redb (and
/// stops naming the directory), and the next open with it writes it afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opened_without_the_directory_the_values_move_back() {
    let dir = tempfile::tempdir().unwrap();
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    for i in 0..300 {
        s.swap(&key(i), Expect::Any, Some(url_record(&format!("v{i}")))).await.unwrap();
    }
    drop(s);
    assert_eq!(raw_forms(dir.path()), (300, 300, true));
    let s = EmbeddedStore::open_dir(dir.path(), opts(false)).unwrap();
    assert!(s.key_directory_stats().is_none());
    for i in 0..300 {
        assert_eq!(s.get(&key(i)).await.unwrap(), Some(url_record(&format!("v{i}"))), "{i}");
    }
    s.swap(&key(300), Expect::Absent, Some(url_record("v300"))).await.unwrap();
    drop(s);
    assert_eq!(raw_forms(dir.path()), (0, 301, false), "every value back in redb");
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    assert_eq!(s.key_directory_stats().unwrap().keys, 301);
    for i in 0..=300 {
        assert_eq!(s.get(&key(i)).await.unwrap(), Some(url_record(&format!("v{i}"))), "{i}");
    }
    assert_eq!(exported(&mut *s.export().unwrap(), 4096).len(), 301);
}

/// With its segments gone, a store whose records they hold is refused, saying
/// why, instead of being opened without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_whose_segments_are_gone_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    s.swap(&key(1), Expect::Absent, Some(url_record("one"))).await.unwrap();
    drop(s);
    let mut seg_dir = dir.path().join(STORE_FILE_NAME).into_os_string();
    seg_dir.push(".keydir");
    std::fs::remove_dir_all(&seg_dir).unwrap();
    for key_directory in [true, false] {
        match EmbeddedStore::open_dir(dir.path(), opts(key_directory)) {
            Err(handled_store::StoreError::Corrupt(m)) => assert!(m.contains("segment"), "{m}"),
            Err(e) => panic!("{key_directory}: {e}"),
            Ok(_) => panic!("{key_directory}: opened without the segments holding its records"),
        }
    }
}
