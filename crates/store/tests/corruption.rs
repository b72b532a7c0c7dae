//! F11 (issue 13): damage on disk is detected and refused, never served and never
//! "repaired" by dropping acknowledged data. One flipped byte in
//! * a stored value of a cleanly closed store: reading it is an error naming the key;
//! * the middle of the write-ahead log: the store does not open, and says where;
//! * a data page after an unclean shutdown: the store does not open.
//!
//! Unclean shutdowns come from a child process (this test executable re-run with
//! an environment switch) that writes and then exits without closing the store.
//! `tests/hostile/corrupt_store.py` does the same flips on a server's data directory.

use handled_store::RecordStore;
use std::path::{Path, PathBuf};
use std::time::Duration;

use handled_store::conformance::url_record;
use handled_store::{EmbeddedOptions, EmbeddedStore, Expect, StoreError, STORE_FILE_NAME};

const CHILD_DIR: &str = "HANDLED_STORE_CORRUPTION_CHILD";
const IMPORTED: u32 = 400;
const LOGGED: u32 = 200;

/// No checkpoint while the child runs: its creates stay in the log.
/// Damage to the store file and its log, read through redb: the key
/// directory (which would answer lookups from its own intact copy) is off here
/// and has its own damage tests (`embedded_keydir_tests.rs`).
fn options() -> EmbeddedOptions {
    EmbeddedOptions { checkpoint_interval: Duration::from_secs(3600), key_directory: false, ..Default::default() }
}

fn imported_key(i: u32) -> Vec<u8> {
    format!("20.5000/imp-{i:05}").into_bytes()
}

fn imported_data(i: u32) -> String {
    format!("https://example.org/imported/{i:05}/marker")
}

fn logged_key(i: u32) -> Vec<u8> {
    format!("20.5000/wal-{i:05}").into_bytes()
}

/// The child's body: an import (a durable checkpoint) then one logged create at a
/// time, then exit without closing the store (as a crash would leave it).
#[test]
fn corruption_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else { return };
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let s = EmbeddedStore::open_dir(Path::new(&dir), options()).unwrap();
        s.put_many((0..IMPORTED).map(|i| (imported_key(i), url_record(&imported_data(i)))).collect()).await.unwrap();
        for i in 0..LOGGED {
            s.swap(&logged_key(i), Expect::Absent, Some(url_record("logged"))).await.unwrap();
        }
        std::process::exit(0);
    });
}

/// A data directory as the child left it.
fn crashed_store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let status = std::process::Command::new(exe)
        .args(["--exact", "corruption_child", "--nocapture", "--test-threads", "1"])
        .env(CHILD_DIR, dir.path())
        .status()
        .unwrap();
    assert!(status.success(), "child failed: {status}");
    dir
}

fn wal_path(dir: &Path) -> PathBuf {
    dir.join(format!("{STORE_FILE_NAME}.wal"))
}

fn flip(path: &Path, offset: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[offset] ^= 0x01;
    std::fs::write(path, bytes).unwrap();
}

/// Offsets of `needle` in the file.
fn find(path: &Path, needle: &[u8]) -> Vec<usize> {
    let bytes = std::fs::read(path).unwrap();
    bytes.windows(needle.len()).enumerate().filter(|(_, w)| *w == needle).map(|(i, _)| i).collect()
}

fn open_error(dir: &Path) -> StoreError {
    match EmbeddedStore::open_dir(dir, options()) {
        Ok(_) => panic!("a damaged store opened"),
        Err(e) => e,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_value_of_a_clean_store_is_an_error_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = EmbeddedStore::open_dir(dir.path(), options()).unwrap();
        for i in 0..50 {
            s.swap(&imported_key(i), Expect::Absent, Some(url_record(&imported_data(i)))).await.unwrap();
        }
    }
    let file = dir.path().join(STORE_FILE_NAME);
    let spots = find(&file, imported_data(17).as_bytes());
    assert!(!spots.is_empty(), "the value is in the file");
    for at in spots {
        flip(&file, at + 20); // one byte inside the URL
    }
    let s = EmbeddedStore::open_dir(dir.path(), options()).unwrap();
    match s.get(&imported_key(17)).await {
        Err(StoreError::Corrupt(m)) => assert!(m.contains("20.5000/imp-00017") && m.contains("checksum"), "{m}"),
        other => panic!("a damaged value was served: {other:?}"),
    }
    // A conditional write needing the current record fails too; the neighbours are fine.
    let e = s.swap(&imported_key(17), Expect::Absent, Some(url_record("x"))).await.unwrap_err();
    assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
    assert_eq!(s.get(&imported_key(16)).await.unwrap(), Some(url_record(&imported_data(16))));
    // Overwriting repairs it.
    s.swap(&imported_key(17), Expect::Any, Some(url_record("again"))).await.unwrap();
    assert_eq!(s.get(&imported_key(17)).await.unwrap(), Some(url_record("again")));
}

#[test]
fn damage_in_the_middle_of_the_log_refuses_to_open() {
    let dir = crashed_store();
    let wal = wal_path(dir.path());
    let len = std::fs::metadata(&wal).unwrap().len() as usize;
    assert!(len > 0, "the child's creates are in the log");
    flip(&wal, len / 2);
    let e = open_error(dir.path());
    let m = e.to_string();
    assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
    assert!(m.contains(&wal.display().to_string()) && m.contains("offset") && m.contains("backup"), "{m}");
    assert_eq!(std::fs::metadata(&wal).unwrap().len() as usize, len, "the log is left as it was");
    // Undo the damage: everything acknowledged is there.
    flip(&wal, len / 2);
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let s = EmbeddedStore::open_dir(dir.path(), options()).unwrap();
    assert_eq!(rt.block_on(s.count()).unwrap(), (IMPORTED + LOGGED) as u64);
}

#[test]
fn torn_tail_of_the_log_is_dropped() {
    let dir = crashed_store();
    let wal = wal_path(dir.path());
    let len = std::fs::metadata(&wal).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&wal).unwrap().set_len(len - 3).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let s = EmbeddedStore::open_dir(dir.path(), options()).unwrap();
    assert_eq!(rt.block_on(s.count()).unwrap(), (IMPORTED + LOGGED - 1) as u64);
}

#[test]
fn damaged_page_after_an_unclean_shutdown_refuses_to_open() {
    let dir = crashed_store();
    let file = dir.path().join(STORE_FILE_NAME);
    let spots = find(&file, imported_data(IMPORTED / 2).as_bytes());
    assert!(!spots.is_empty(), "the imported value is in the file");
    for at in spots {
        flip(&file, at + 20);
    }
    let e = open_error(dir.path());
    assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
    let m = e.to_string();
    assert!(m.contains(&file.display().to_string()) && m.contains("backup"), "{m}");
}

/// Stores of format 2 (checksummed, records in the wire form, written before the
/// compact form) open as they are, with and without the key directory: their records
/// read, a compare-and-set expecting one of them holds, and what is written from
/// then on is compact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn format_2_store_reads_its_records_as_they_are() {
    let handles: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new(handled_store::HANDLES_TABLE);
    let format: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("format");
    let sealed = |key: &[u8], payload: &[u8]| {
        let mut h = crc32fast::Hasher::new();
        h.update(key);
        h.update(payload);
        [h.finalize().to_le_bytes().as_slice(), payload].concat()
    };
    for key_directory in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(STORE_FILE_NAME);
        {
            let db = redb::Database::create(&file).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut t = txn.open_table(handles).unwrap();
                for i in 0..3000 {
                    let k = imported_key(i);
                    t.insert(k.as_slice(), sealed(&k, &url_record(&imported_data(i)).encode_wire()).as_slice())
                        .unwrap();
                }
                txn.open_table(format).unwrap().insert("version", 2).unwrap();
            }
            txn.commit().unwrap();
        }
        let opts = EmbeddedOptions { key_directory, ..options() };
        let s = EmbeddedStore::open_dir(dir.path(), opts.clone()).unwrap();
        assert_eq!(s.count().await.unwrap(), 3000);
        for i in [0, 1500, 2999] {
            assert_eq!(s.get(&imported_key(i)).await.unwrap(), Some(url_record(&imported_data(i))));
        }
        let (k, old, new) = (imported_key(7), url_record(&imported_data(7)), url_record("https://example.org/new"));
        let done = s.swap(&k, Expect::Present(old), Some(new.clone())).await.unwrap();
        assert!(matches!(done, handled_store::SwapOutcome::Done { .. }), "key directory {key_directory}: {done:?}");
        handled_store::StoreAdmin::close(&s);
        drop(s);
        let db = redb::Database::open(&file).unwrap();
        let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
        assert_eq!(txn.open_table(format).unwrap().get("version").unwrap().unwrap().value(), 6);
        let t = txn.open_table(handles).unwrap();
        let written = t.get(k.as_slice()).unwrap().unwrap().value().to_vec();
        match key_directory {
            // The record's location in the directory's segments (0xC6 after the checksum).
            true => assert_eq!(written[4], 0xC6, "a location: {written:?}"),
            false => assert_eq!(written, sealed(&k, &new.encode()), "compact"),
        }
        let untouched = imported_key(8);
        let kept = sealed(&untouched, &url_record(&imported_data(8)).encode_wire());
        assert_eq!(t.get(untouched.as_slice()).unwrap().unwrap().value(), kept.as_slice(), "left as it was");
    }
}

/// Stores written before values were checksummed (format 1: bare values, no
/// `format` table) are sealed once when opened, and read as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn format_1_store_is_upgraded_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(STORE_FILE_NAME);
    {
        let db = redb::Database::create(&file).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let handles: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new(handled_store::HANDLES_TABLE);
            let mut t = txn.open_table(handles).unwrap();
            for i in 0..5000 {
                t.insert(imported_key(i).as_slice(), url_record(&imported_data(i)).encode_wire().as_slice()).unwrap();
            }
            let meta: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new(handled_store::META_TABLE);
            txn.open_table(meta).unwrap().insert("site/serial", [0u8, 7].as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    for _ in 0..2 {
        let s = EmbeddedStore::open_dir(dir.path(), options()).unwrap();
        assert_eq!(s.count().await.unwrap(), 5000);
        for i in [0, 4095, 4096, 4999] {
            assert_eq!(s.get(&imported_key(i)).await.unwrap(), Some(url_record(&imported_data(i))));
        }
        assert_eq!(s.meta_get("site/serial").await.unwrap(), Some(vec![0, 7]));
    }
}
