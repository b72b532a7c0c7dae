//! F14 (issue 13): a full disk. Writes are refused with a clear error while the
//! disk is full, the store says it cannot take writes (readiness), and writes work
//! again without a restart once space returns; nothing acknowledged is lost.
//!
//! Runs on a small tmpfs mounted for the test (needs root / CAP_SYS_ADMIN); skips
//! with a message when mounting is not permitted. Always unmounts.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use handled_store::conformance::url_record;
use handled_store::{EmbeddedOptions, EmbeddedStore, Expect, RecordStore, StoreAdmin, StoreError};
use handled_testenv::tmpfs::Tmpfs;

/// Whether the store says it takes writes again within `limit` (readiness).
async fn writable_within(s: &EmbeddedStore, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while s.writable().is_err() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

fn key(i: u32) -> Vec<u8> {
    format!("20.5000/full-{i:06}").into_bytes()
}

fn record(i: u32) -> handled_store::HandleRecord {
    url_record(&format!("https://example.org/{i:06}/{}", "x".repeat(400)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_disk_refuses_writes_then_recovers_without_restart() {
    let Some(fs) = Tmpfs::mount(16) else { return };
    let data = fs.path().join("data");
    let opts = EmbeddedOptions {
        cache_bytes: Some(4 << 20),
        checkpoint_interval: Duration::from_millis(50),
        min_free_bytes: 1 << 20,
        ..Default::default()
    };
    let s = EmbeddedStore::open_dir(&data, opts.clone()).unwrap();
    let mut acked = Vec::new();
    for i in 0..200 {
        s.swap(&key(i), Expect::Absent, Some(record(i))).await.unwrap();
        acked.push(i);
    }
    assert!(s.writable().is_ok());
    let filler = fs.fill();
    // Writes now fail, with an error that says why; reads go on.
    let mut refused = None;
    for i in 200..400 {
        match s.swap(&key(i), Expect::Absent, Some(record(i))).await {
            Ok(_) => acked.push(i),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let e = refused.expect("a write was refused on a full disk");
    assert!(e.to_string().contains("free"), "unclear error: {e}");
    let why = s.writable().expect_err("the store says it cannot take writes");
    assert!(why.to_string().contains("free"), "{why}");
    assert_eq!(s.get(&key(0)).await.unwrap(), Some(record(0)));
    // Space returns: writes work again, no restart.
    std::fs::remove_file(&filler).unwrap();
    assert!(writable_within(&s, Duration::from_secs(5)).await, "the store did not recover: {:?}", s.writable());
    for i in 1000..1100 {
        s.swap(&key(i), Expect::Absent, Some(record(i))).await.unwrap();
        acked.push(i);
    }
    drop(s);
    let s = EmbeddedStore::open_dir(&data, opts).unwrap();
    for i in &acked {
        assert_eq!(s.get(&key(*i)).await.unwrap(), Some(record(*i)), "acknowledged write {i} lost");
    }
    let _ = StoreError::Closed;
}

const CHILD_DIR: &str = "HANDLED_STORE_DISK_FULL_CHILD";
const LOGGED: u32 = 3000;

fn no_checkpoint() -> EmbeddedOptions {
    EmbeddedOptions { checkpoint_interval: Duration::from_secs(3600), min_free_bytes: 0, ..Default::default() }
}

/// The child: logged creates, then exit without closing (a crash).
#[test]
fn disk_full_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else { return };
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let s = EmbeddedStore::open_dir(Path::new(&dir), no_checkpoint()).unwrap();
        for i in 0..LOGGED {
            s.swap(&key(i), Expect::Absent, Some(record(i))).await.unwrap();
        }
        std::process::exit(0);
    });
}

/// A start that has to replay the log on a full disk fails saying what it needs,
/// leaves everything as it was, and succeeds once space is freed.
#[test]
fn replay_on_a_full_disk_says_what_it_needs() {
    let Some(fs) = Tmpfs::mount(16) else { return };
    let data = fs.path().join("data");
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "disk_full_child", "--nocapture", "--test-threads", "1"])
        .env(CHILD_DIR, &data)
        .status()
        .unwrap();
    assert!(status.success(), "child failed: {status}");
    let filler = fs.fill();
    let e = match EmbeddedStore::open_dir(&data, no_checkpoint()) {
        Ok(_) => {
            handled_testenv::skipped("the replay fitted in the space left");
            return;
        }
        Err(e) => e.to_string(),
    };
    assert!(e.contains("replaying the store log") && e.contains("MiB free"), "{e}");
    std::fs::remove_file(filler).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let s = EmbeddedStore::open_dir(&data, no_checkpoint()).unwrap();
    assert_eq!(rt.block_on(s.count()).unwrap(), LOGGED as u64);
}

/// Without a reserve the disk fills inside redb, which then refuses every
/// transaction until the file is reopened: the writer reopens it (replaying its
/// log) once space returns, still without a restart, and loses nothing acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn io_error_inside_the_database_recovers_when_space_returns() {
    let Some(fs) = Tmpfs::mount(16) else { return };
    let data = fs.path().join("data");
    let opts = EmbeddedOptions {
        cache_bytes: Some(4 << 20),
        checkpoint_interval: Duration::from_millis(20),
        min_free_bytes: 0,
        ..Default::default()
    };
    let s = EmbeddedStore::open_dir(&data, opts.clone()).unwrap();
    // Leave about 1 MiB, then write (checkpointing often) until the disk is full.
    let filler = fs.path().join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0x55u8; 64 << 10];
        while f.write_all(&chunk).and_then(|_| f.sync_data()).is_ok() {}
        f.set_len(f.metadata().unwrap().len().saturating_sub(1 << 20)).unwrap();
    }
    let mut acked = Vec::new();
    let mut failed = 0;
    for i in 0..5000 {
        match s.swap(&key(i), Expect::Absent, Some(record(i))).await {
            Ok(_) => acked.push(i),
            Err(e) => {
                failed += 1;
                if failed == 1 {
                    eprintln!("first refusal: {e}");
                }
                if failed >= 20 {
                    break;
                }
            }
        }
    }
    assert!(failed > 0, "the disk never filled");
    let latched = s.writable().err().map(|e| e.to_string());
    eprintln!("while full: writable = {latched:?}");
    std::fs::remove_file(&filler).unwrap();
    if latched.is_some() {
        // Readiness comes back with the space, before any write: the idle writer reopens the file.
        let ready = writable_within(&s, Duration::from_secs(5)).await;
        assert!(ready, "the store did not reopen itself once space returned: {:?}", s.writable());
    }
    // The next write goes through (reopening the file if it still is broken).
    let mut back = false;
    for attempt in 0..50u32 {
        match s.swap(&key(10_000 + attempt), Expect::Absent, Some(record(10_000 + attempt))).await {
            Ok(_) => {
                acked.push(10_000 + attempt);
                back = true;
                break;
            }
            Err(e) => eprintln!("retry {attempt}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(back, "writes did not resume after space returned");
    assert!(s.writable().is_ok(), "{:?}", s.writable());
    for i in &acked {
        assert_eq!(s.get(&key(*i)).await.unwrap(), Some(record(*i)), "acknowledged write {i} lost");
    }
    drop(s);
    let s = EmbeddedStore::open_dir(&data, opts).unwrap();
    for i in &acked {
        assert_eq!(s.get(&key(*i)).await.unwrap(), Some(record(*i)), "acknowledged write {i} lost after reopen");
    }
}
