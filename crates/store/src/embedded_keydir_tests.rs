use std::io::Write;
use std::path::Path;
use std::time::Duration;

use redb::Database;

use super::super::{EmbeddedOptions, EmbeddedStore};
use super::*;
use crate::conformance::url_record;
use crate::{Expect, RecordStore, StoreAdmin};

fn opts(key_directory: bool) -> EmbeddedOptions {
    EmbeddedOptions {
        key_directory,
        checkpoint_interval: Duration::ZERO,
        warm_on_open: false,
        min_free_bytes: 0,
        ..Default::default()
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("20.5000/kd-{i:04}").into_bytes()
}

async fn put(s: &EmbeddedStore, i: usize, v: &str) {
    s.swap(&key(i), Expect::Any, Some(url_record(v))).await.unwrap();
}

async fn value(s: &EmbeddedStore, i: usize) -> Option<String> {
    let r = s.get(&key(i)).await.unwrap()?;
    Some(String::from_utf8(r.values[0].data.to_vec()).unwrap())
}

fn only_segment(dir: &Path) -> PathBuf {
    let seg_dir = segments::dir_for(&dir.join(super::super::STORE_FILE_NAME));
    let ids = segments::list(&seg_dir).unwrap();
    assert_eq!(ids.len(), 1, "{ids:?}");
    segments::seg_path(&seg_dir, ids[0])
}

/// Writes, overwrites and removals are served through the directory after
/// their checkpoint, and after a reopen (from the segments).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_go_through_the_directory_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    for i in 0..200 {
        put(&s, i, &format!("v{i}")).await;
    }
    for i in (0..200).step_by(3) {
        put(&s, i, &format!("w{i}")).await;
    }
    for i in (0..200).step_by(7) {
        s.swap(&key(i), Expect::Any, None).await.unwrap();
    }
    s.checkpoint().await.unwrap();
    let want = |i: usize| match (i % 7, i % 3) {
        (0, _) => None,
        (_, 0) => Some(format!("w{i}")),
        _ => Some(format!("v{i}")),
    };
    // Everything is in redb and the directory: the layers are empty.
    let view = s.shared.snapshot.load_full().unwrap();
    assert!(view.active.is_empty() && view.frozen.is_empty());
    for i in 0..200 {
        assert_eq!(value(&s, i).await, want(i), "{i}");
    }
    let stats = s.key_directory_stats().unwrap();
    assert_eq!(stats.keys, 200 - 200usize.div_ceil(7) as u64);
    assert!(stats.live_bytes < stats.segment_bytes);
    drop(s);
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    for i in 0..200 {
        assert_eq!(value(&s, i).await, want(i), "{i} after reopen");
    }
    assert_eq!(s.key_directory_stats().unwrap().keys, stats.keys);
}

/// Checkpoints that outgrow the hash grow it beside the live one (lookups go
/// on meanwhile) and swap it in: no key is lost across the growths. The tail
/// segment keeps its one map, each checkpoint's records taken in through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hash_grows_across_checkpoints_without_losing_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    let capacity = |s: &EmbeddedStore| s.shared.keydir.load().as_ref().unwrap().inner.read().dir.index.capacity();
    // Where the tail segment's records are mapped: one map for all its checkpoints.
    let tail_map = |s: &EmbeddedStore| {
        let kd = s.shared.keydir.load();
        let inner = kd.as_ref().unwrap().inner.read();
        let mut maps = inner.maps.0.iter().enumerate().filter_map(|(id, m)| Some((id, m.as_ref()?.bytes().as_ptr())));
        maps.next_back().map(|(id, at)| (id, at as usize))
    };
    let first = capacity(&s);
    let mut grew = 0;
    let mut mapped = None;
    for round in 0..20 {
        let before = capacity(&s);
        for i in round * 250..(round + 1) * 250 {
            put(&s, i, &format!("v{i}")).await;
        }
        s.checkpoint().await.unwrap();
        grew += usize::from(capacity(&s) > before);
        let now = tail_map(&s).expect("a mapped tail");
        assert_eq!(*mapped.get_or_insert(now), now, "the tail was mapped anew at round {round}");
    }
    assert!(grew >= 3, "grown {grew} times from a capacity of {first} to {}", capacity(&s));
    for i in 0..5000 {
        assert_eq!(value(&s, i).await, Some(format!("v{i}")), "{i}");
    }
    assert_eq!(s.key_directory_stats().unwrap().keys, 5000);
}

/// A damaged record is `Corrupt` on get (never a panic, never another
/// record), through the directory and through redb, which holds only its
/// location; an open that reads the segments finds the damage and refuses the
/// store, saying why, rather than losing the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_record_is_corrupt_and_the_open_that_finds_it_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    put(&s, 1, "one").await;
    put(&s, 2, "two").await;
    s.checkpoint().await.unwrap();
    let seg = only_segment(dir.path());
    let mut bytes = std::fs::read(&seg).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x55;
    // Written in place: the mapping sees it.
    std::fs::OpenOptions::new().write(true).open(&seg).unwrap().write_all(&bytes).unwrap();
    let kd = s.shared.keydir.load_full().unwrap();
    match kd.get(&key(2)) {
        Err(crate::StoreError::Corrupt(m)) => assert!(m.contains("key directory"), "{m}"),
        other => panic!("{other:?}"),
    }
    let corrupt = |r: Result<Option<crate::HandleRecord>, crate::StoreError>| match r {
        Err(crate::StoreError::Corrupt(m)) => assert!(m.contains("restore"), "{m}"),
        other => panic!("{other:?}"),
    };
    corrupt(s.get(&key(2)).await);
    assert_eq!(value(&s, 1).await.as_deref(), Some("one"));
    drop((s, kd));
    // Restarted from the hint (which does not read the records): the same.
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    corrupt(s.get(&key(2)).await);
    assert_eq!(value(&s, 1).await.as_deref(), Some("one"));
    drop(s);
    // Without the hint the segments are read and the damage found.
    std::fs::remove_file(segments::dir_for(&dir.path().join(super::super::STORE_FILE_NAME)).join(hint::NAME)).unwrap();
    match EmbeddedStore::open_dir(dir.path(), opts(true)) {
        Err(crate::StoreError::Corrupt(m)) => assert!(m.contains("cannot be written afresh"), "{m}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened on a damaged record"),
    }
}

/// A clean restart loads the hash from the hint; after a checkpoint the hint
/// is stale and the segments are read instead; both give the same directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hint_is_used_only_while_current() {
    let dir = tempfile::tempdir().unwrap();
    let seg_dir = segments::dir_for(&dir.path().join(super::super::STORE_FILE_NAME));
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    for i in 0..50 {
        put(&s, i, &format!("v{i}")).await;
    }
    drop(s);
    let (gen, segs) = {
        let db = Database::open(dir.path().join(super::super::STORE_FILE_NAME)).unwrap();
        let c = opening::committed(&db).unwrap().unwrap();
        (c.gen, c.segs)
    };
    let d = hint::read(&seg_dir, gen, &segs).unwrap();
    assert_eq!(d.index.len(), 50);
    assert!(hint::read(&seg_dir, gen + 1, &segs).is_err(), "another generation");
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    assert_eq!(s.key_directory_stats().unwrap().keys, 50);
    put(&s, 60, "x").await;
    // A crash now: the hint on disk names an older generation.
    let stale = std::fs::read(seg_dir.join(hint::NAME)).unwrap();
    drop(s);
    std::fs::write(seg_dir.join(hint::NAME), &stale).unwrap();
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    assert_eq!(s.key_directory_stats().unwrap().keys, 51);
    assert_eq!(value(&s, 60).await.as_deref(), Some("x"));
    drop(s);
    // A damaged hint is not used either.
    let mut bad = std::fs::read(seg_dir.join(hint::NAME)).unwrap();
    bad[20] ^= 1;
    std::fs::write(seg_dir.join(hint::NAME), &bad).unwrap();
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    assert_eq!(value(&s, 60).await.as_deref(), Some("x"));
    assert_eq!(s.key_directory_stats().unwrap().keys, 51);
}

/// Bytes past a segment's committed length (a checkpoint killed before its
/// commit) are cut off at open; a store checkpointed without the directory
/// gets it rewritten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncommitted_tails_are_cut_and_stale_directories_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    put(&s, 1, "one").await;
    drop(s);
    let seg = only_segment(dir.path());
    let len = std::fs::metadata(&seg).unwrap().len();
    let mut garbage = Vec::new();
    segments::encode(&mut garbage, &key(1), Body::Value(b"never committed"));
    std::fs::OpenOptions::new().append(true).open(&seg).unwrap().write_all(&garbage).unwrap();
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), len);
    assert_eq!(value(&s, 1).await.as_deref(), Some("one"));
    drop(s);
    // Written without the directory: it is behind.
    let s = EmbeddedStore::open_dir(dir.path(), opts(false)).unwrap();
    put(&s, 1, "uno").await;
    put(&s, 2, "two").await;
    drop(s);
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    assert_eq!(value(&s, 1).await.as_deref(), Some("uno"));
    assert_eq!(value(&s, 2).await.as_deref(), Some("two"));
    assert_eq!(s.key_directory_stats().unwrap().keys, 2);
}

/// Two keys whose hashes collide are both found (the second in the exact map),
/// and removing one leaves the other.
#[test]
fn colliding_keys_are_kept_apart() {
    let mut buf = Vec::new();
    segments::encode(&mut buf, b"a", Body::Value(b"1"));
    let b_at = buf.len();
    segments::encode(&mut buf, b"b", Body::Value(b"2"));
    let b_end = buf.len();
    segments::encode(&mut buf, b"b", Body::Removed);
    let dir = tempfile::tempdir().unwrap();
    let path = segments::seg_path(dir.path(), 1);
    std::fs::write(&path, &buf).unwrap();
    let mut inner = Inner::default();
    inner.maps.set(1, segments::map(dir.path(), 1, buf.len() as u64, 0).unwrap());
    inner.apply_range(1, 0, b_at as u64).unwrap();
    // Pretend "b" hashes where "a" is.
    let a = inner.dir.index.remove(hash(b"a")).unwrap();
    inner.dir.index.insert(hash(b"b"), a);
    inner.apply_range(1, b_at as u64, b_end as u64).unwrap();
    assert_eq!(inner.dir.collisions.get(&b"b"[..]).copied(), Some(pack(1, b_at as u64)));
    assert_eq!(inner.maps.key_at(inner.dir.index.get(hash(b"b")).unwrap()), Some(&b"a"[..]));
    let kd = KeyDir {
        dir: dir.path().into(),
        inner: RwLock::new(inner),
        tail: Mutex::new(Tail::open(dir.path(), 1, buf.len() as u64, DEFAULT_SEGMENT_BYTES).unwrap()),
        installing: Mutex::new(()),
        gen: AtomicU64::new(0),
        segment_bytes: DEFAULT_SEGMENT_BYTES,
        merge: Mutex::default(),
    };
    let payload = |k: &[u8]| kd.get(k);
    // "a" and "b" are not records that decode: a decode error means the key matched.
    assert!(payload(b"b").is_err(), "b is found through the exact map");
    kd.inner.write().apply_range(1, b_end as u64, buf.len() as u64).unwrap();
    assert!(kd.inner.read().dir.collisions.is_empty());
    assert_eq!(payload(b"b").unwrap(), None);
}

/// Overwrites and removals leave dead records; with small segments the merge
/// copies the live ones forward a slice per checkpoint and deletes the oldest
/// segments, so the segments stay within a bound of the live bytes; every
/// record reads the same before and after, and after reopens from the hint and
/// from the segments alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merging_keeps_the_segments_near_the_live_records() {
    let dir = tempfile::tempdir().unwrap();
    let seg_dir = segments::dir_for(&dir.path().join(super::super::STORE_FILE_NAME));
    let small = EmbeddedOptions { key_directory_segment_bytes: 64 << 10, ..opts(true) };
    let s = EmbeddedStore::open_dir(dir.path(), small.clone()).unwrap();
    let want = |round: usize, i: usize| match i % 5 {
        0 if round > 0 => None,
        _ => Some(format!("r{round}-{i}-{}", "x".repeat(i % 40))),
    };
    let mut deleted = 0;
    for round in 0..30 {
        for i in 0..300 {
            match want(round, i) {
                Some(v) => put(&s, i, &v).await,
                None => drop(s.swap(&key(i), Expect::Any, None).await.unwrap()),
            }
        }
        s.checkpoint().await.unwrap();
        let ids = segments::list(&seg_dir).unwrap();
        deleted = deleted.max(ids[0] - 1);
    }
    let st = s.key_directory_stats().unwrap();
    assert!(deleted >= 5, "the oldest segments were merged away: {deleted} deleted");
    // 30 rounds of writes are ~30× the live bytes; merged, the segments hold a few times them.
    assert!(st.segment_bytes < 4 * st.live_bytes + 3 * (64 << 10), "{st:?}");
    let on_disk: u64 = segments::list(&seg_dir)
        .unwrap()
        .iter()
        .map(|id| std::fs::metadata(segments::seg_path(&seg_dir, *id)).unwrap().len())
        .sum();
    assert_eq!(on_disk, st.segment_bytes, "the accounts are the files");
    for i in 0..300 {
        assert_eq!(value(&s, i).await, want(29, i), "{i}");
    }
    drop(s);
    for from_hint in [true, false] {
        if !from_hint {
            std::fs::remove_file(seg_dir.join(hint::NAME)).unwrap();
        }
        let s = EmbeddedStore::open_dir(dir.path(), small.clone()).unwrap();
        let kd = s.shared.keydir.load_full().unwrap();
        for i in 0..300 {
            let through = kd.get(&key(i)).unwrap().map(|r| String::from_utf8(r.values[0].data.to_vec()).unwrap());
            assert_eq!(through, want(29, i), "{i}, directory from the hint: {from_hint}");
        }
        assert_eq!(s.key_directory_stats().unwrap().keys, 240);
    }
}

/// Segments written in the records' earlier form (`crc ‖ u32 ‖ u32 ‖ key ‖
/// value`, before 2026-12-05) are never read as the current form: a table that
/// names no form has them written afresh from redb at open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segments_of_the_earlier_record_form_are_written_afresh() {
    let dir = tempfile::tempdir().unwrap();
    // Values in redb, as every server of the earlier form kept them: written
    // without the directory, which the next open writes from them.
    let s = EmbeddedStore::open_dir(dir.path(), opts(false)).unwrap();
    for i in 0..20 {
        put(&s, i, &format!("v{i}")).await;
    }
    drop(s);
    drop(EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap());
    // What a server of the earlier form left: its records, and no form in the table.
    let seg = only_segment(dir.path());
    let mut earlier = Vec::new();
    let mut at = 0;
    let bytes = std::fs::read(&seg).unwrap();
    while at < bytes.len() {
        let r = segments::record_at(&bytes, at).unwrap();
        let Body::Value(v) = r.body else { panic!("only values were written") };
        let mut rest = Vec::new();
        rest.extend_from_slice(&(r.key.len() as u32).to_le_bytes());
        rest.extend_from_slice(&(v.len() as u32).to_le_bytes());
        rest.extend_from_slice(r.key);
        rest.extend_from_slice(v);
        earlier.extend_from_slice(&crc32fast::hash(&rest).to_le_bytes());
        earlier.extend_from_slice(&rest);
        at += r.len;
    }
    std::fs::write(&seg, &earlier).unwrap();
    {
        let db = Database::open(dir.path().join(super::super::STORE_FILE_NAME)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn.open_table(KEYDIR).unwrap();
            t.remove(RECORDS_KEY).unwrap();
            let len = earlier.len() as u64;
            let id = segments::list(&segments::dir_for(&dir.path().join(super::super::STORE_FILE_NAME))).unwrap()[0];
            t.insert(seg_key(id).as_str(), len).unwrap();
        }
        txn.commit().unwrap();
        let c = opening::committed(&db).unwrap().unwrap();
        assert_eq!(c.records, 1);
        let store = dir.path().join(super::super::STORE_FILE_NAME);
        let why = opening::open(&db, &store, segments::MIN_SEGMENT_BYTES).unwrap().err().unwrap();
        assert!(why.contains("in form 1"), "{why}");
    }
    let s = EmbeddedStore::open_dir(dir.path(), opts(true)).unwrap();
    for i in 0..20 {
        assert_eq!(value(&s, i).await.as_deref(), Some(format!("v{i}").as_str()));
    }
    drop(s);
    let db = Database::open(dir.path().join(super::super::STORE_FILE_NAME)).unwrap();
    assert_eq!(opening::committed(&db).unwrap().unwrap().records, segments::RECORDS_FORM);
    assert!(std::fs::read(only_segment(dir.path())).unwrap().len() < earlier.len(), "six bytes a record fewer");
}
