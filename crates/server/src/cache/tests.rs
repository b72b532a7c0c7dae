use super::*;
use handled_proto::value::HandleValue;
use handled_store::{DocWrite, DocumentStore, Expect};
use handled_store::{IndexEntry, MemoryStore};

fn record(n: u64) -> HandleRecord {
    HandleRecord::new(vec![HandleValue::new(1, "URL", n.to_string())])
}

fn version(r: &Option<HandleRecord>) -> u64 {
    r.as_ref().map_or(0, |r| std::str::from_utf8(&r.values[0].data).unwrap().parse().unwrap())
}

#[tokio::test]
async fn every_write_kind_invalidates() {
    let store = CachingStore::new(Arc::new(MemoryStore::new()), 1 << 20);
    assert_eq!(store.get(b"A/1").await.unwrap(), None); // cached miss
    store.swap(b"A/1", Expect::Absent, Some(record(1))).await.unwrap();
    assert_eq!(version(&store.get(b"A/1").await.unwrap()), 1);
    store.swap(b"A/1", Expect::Any, Some(record(2))).await.unwrap();
    assert_eq!(version(&store.get(b"A/1").await.unwrap()), 2);
    store.put_many(vec![(b"A/1".to_vec(), record(3))]).await.unwrap();
    assert_eq!(version(&store.get(b"A/1").await.unwrap()), 3);
    store.swap(b"A/1", Expect::Any, None).await.unwrap();
    assert_eq!(store.get(b"A/1").await.unwrap(), None);
    store.swap(b"A/1", Expect::Absent, Some(record(4))).await.unwrap();
    store.get(b"A/1").await.unwrap();
    store.home(b"0.NA/A", false).await.unwrap();
    assert_eq!(store.cache_stats().entries, 0);
    let s = store.cache_stats();
    assert!(s.hits == 0 && s.misses >= 6 && s.invalidations >= 5, "{s:?}");
    store.get(b"A/1").await.unwrap();
    store.get(b"A/1").await.unwrap();
    assert_eq!(store.cache_stats().hits, 1);
}

/// A mirror's replicated changes drop what they change, like local writes;
/// a homing among them drops everything.
#[tokio::test]
async fn replicated_changes_invalidate() {
    use handled_store::{ReplicatedChange, TxnAction, TxnEntry};
    let change = |id: u64, action: TxnAction, key: &[u8], r: Option<HandleRecord>| ReplicatedChange {
        entry: TxnEntry { id, date_ms: 1, action, handle: key.to_vec() },
        record: r,
        priority: None,
    };
    let store = CachingStore::new(Arc::new(MemoryStore::new()), 1 << 20);
    store.swap(b"A/1", Expect::Absent, Some(record(1))).await.unwrap();
    store.swap(b"A/2", Expect::Absent, Some(record(1))).await.unwrap();
    assert_eq!(version(&store.get(b"A/1").await.unwrap()), 1);
    assert_eq!(version(&store.get(b"A/2").await.unwrap()), 1);
    store.apply_replicated(vec![change(10, TxnAction::Update, b"A/1", Some(record(2)))], vec![]).await.unwrap();
    assert_eq!(version(&store.get(b"A/1").await.unwrap()), 2);
    assert_eq!(store.cache_stats().entries, 2, "A/2 stays cached");
    store.apply_replicated(vec![change(11, TxnAction::HomeNa, b"0.NA/B", None)], vec![]).await.unwrap();
    assert_eq!(store.cache_stats().entries, 0);
}

#[tokio::test]
async fn bounded_by_bytes() {
    let store = CachingStore::new(Arc::new(MemoryStore::new()), 64 * 1024);
    for i in 0..5000u64 {
        let key = format!("A/{i}").into_bytes();
        store.swap(&key, Expect::Absent, Some(record(i))).await.unwrap();
        store.get(&key).await.unwrap();
    }
    let s = store.cache_stats();
    assert!(s.bytes <= 64 * 1024 && s.evictions > 0, "{s:?}");
}

/// No read ever returns data older than a write acknowledged before it began.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_never_older_than_acknowledged_writes() {
    for inner in [Arc::new(MemoryStore::new()) as Arc<dyn Store>, embedded()] {
        let store = Arc::new(CachingStore::new(inner, 1 << 20));
        let acked = Arc::new(AtomicU64::new(0));
        let start = Arc::new(tokio::sync::Barrier::new(7));
        // The writer waits for reads between rounds so that reads and writes interleave.
        let reads = Arc::new(AtomicU64::new(0));
        let keys: Vec<Vec<u8>> = (0..4).map(|k| format!("A/{k}").into_bytes()).collect();
        let writer = {
            let (store, acked, keys, start, reads) =
                (store.clone(), acked.clone(), keys.clone(), start.clone(), reads.clone());
            tokio::spawn(async move {
                start.wait().await;
                for n in 1..=120u64 {
                    let seen = reads.load(Ordering::SeqCst);
                    while reads.load(Ordering::SeqCst) < seen + 4 {
                        tokio::task::yield_now().await;
                    }
                    for k in &keys {
                        store.swap(k, Expect::Any, Some(record(n))).await.unwrap();
                    }
                    acked.store(n, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                }
            })
        };
        let readers: Vec<_> = (0..6)
            .map(|_| {
                let (store, acked, keys, start, reads) =
                    (store.clone(), acked.clone(), keys.clone(), start.clone(), reads.clone());
                tokio::spawn(async move {
                    start.wait().await;
                    let mut mine = 0u64;
                    while acked.load(Ordering::SeqCst) < 120 {
                        for k in &keys {
                            let floor = acked.load(Ordering::SeqCst);
                            let seen = version(&store.get(k).await.unwrap());
                            assert!(seen >= floor, "read {seen} after write {floor} was acknowledged");
                            mine += 1;
                            reads.fetch_add(1, Ordering::SeqCst);
                        }
                        tokio::task::yield_now().await;
                    }
                    mine
                })
            })
            .collect();
        writer.await.unwrap();
        let mut total = 0;
        for r in readers {
            total += r.await.unwrap();
        }
        assert!(total > 100, "readers ran ({total} reads)");
        assert!(store.cache_stats().hits > 0, "the cache was exercised");
    }
}

fn embedded() -> Arc<dyn Store> {
    let dir = tempfile::tempdir().unwrap().keep();
    Arc::new(handled_store::EmbeddedStore::open(&dir.join("t.redb"), Default::default()).unwrap())
}

fn doc(body: &str, users: &[&str]) -> Document {
    Document::new(body.as_bytes().to_vec(), users.iter().map(|u| IndexEntry::new("user", u.as_bytes())).collect())
}

async fn ids(store: &CachingStore, user: &str) -> Vec<Vec<u8>> {
    let hits = store.docs.doc_lookup("reg", "user", IndexMatch::Exact(user.as_bytes()), None, 10).await.unwrap();
    hits.into_iter().map(|h| h.id).collect()
}

async fn body(store: &CachingStore, id: &[u8]) -> Option<String> {
    store.docs.doc_get("reg", id).await.unwrap().map(|d| String::from_utf8(d.body).unwrap())
}

/// Every kind of document write drops the document and the lookups of the
/// index values it had before and has after, even those cached before the
/// value existed.
#[tokio::test]
async fn every_doc_write_kind_invalidates_the_doc_and_its_old_and_new_lookups() {
    let store = CachingStore::new(Arc::new(MemoryStore::new()), 1 << 20);
    let none: Vec<Vec<u8>> = Vec::new();
    // Cache the empty answers first: the writes must drop them.
    assert_eq!(ids(&store, "a").await, none);
    assert_eq!(ids(&store, "b").await, none);
    assert_eq!(body(&store, b"x").await, None);
    store.doc_swap("reg", b"x", DocExpect::Absent, Some(doc("1", &["a"]))).await.unwrap();
    assert_eq!(ids(&store, "a").await, vec![b"x".to_vec()]);
    assert_eq!(body(&store, b"x").await.as_deref(), Some("1"));
    // Conditional update moving the entry from a to b.
    let current = store.docs.doc_get("reg", b"x").await.unwrap().unwrap();
    store.doc_swap("reg", b"x", DocExpect::Present(current), Some(doc("2", &["b"]))).await.unwrap();
    assert_eq!(ids(&store, "a").await, none, "old value's lookup dropped");
    assert_eq!(ids(&store, "b").await, vec![b"x".to_vec()], "new value's lookup dropped");
    assert_eq!(body(&store, b"x").await.as_deref(), Some("2"));
    // Unconditional overwrite back to a.
    store.doc_swap("reg", b"x", DocExpect::Any, Some(doc("3", &["a"]))).await.unwrap();
    assert_eq!(ids(&store, "b").await, none);
    assert_eq!(ids(&store, "a").await, vec![b"x".to_vec()]);
    assert_eq!(body(&store, b"x").await.as_deref(), Some("3"));
    // A conflict changes nothing and leaves the answers right.
    let outcome = store.doc_swap("reg", b"x", DocExpect::Absent, Some(doc("4", &["b"]))).await.unwrap();
    assert!(!outcome.is_done());
    assert_eq!(ids(&store, "a").await, vec![b"x".to_vec()]);
    // Delete.
    store.doc_swap("reg", b"x", DocExpect::Any, None).await.unwrap();
    assert_eq!(ids(&store, "a").await, none);
    assert_eq!(body(&store, b"x").await, None);
    assert!(store.cache_stats().hits > 0, "answers came from the cache in between");
}

/// Documents riding along a handle write, and writes of collections the cache
/// leaves alone, are never answered stale.
#[tokio::test]
async fn ride_along_documents_and_uncached_collections() {
    let store = CachingStore::new(Arc::new(MemoryStore::new()), 1 << 20);
    store.doc_swap("reg", b"x", DocExpect::Absent, Some(doc("1", &["a"]))).await.unwrap();
    assert_eq!(body(&store, b"x").await.as_deref(), Some("1"));
    assert_eq!(ids(&store, "a").await, vec![b"x".to_vec()]);
    let ride = DocWrite::new("reg", b"x".to_vec(), Some(doc("2", &["b"])));
    store.swap_with_docs(b"A/1", Expect::Absent, Some(record(1)), vec![ride]).await.unwrap();
    assert_eq!(body(&store, b"x").await.as_deref(), Some("2"));
    assert!(ids(&store, "a").await.is_empty());
    for coll in keys::UNCACHED_COLLECTIONS {
        store.doc_swap(coll, b"k", DocExpect::Any, Some(doc("1", &["a"]))).await.unwrap();
        store.docs.doc_get(coll, b"k").await.unwrap();
    }
    let entries = store.cache_stats().entries;
    for coll in keys::UNCACHED_COLLECTIONS {
        store.docs.doc_get(coll, b"k").await.unwrap();
        store.docs.doc_lookup(coll, "user", IndexMatch::Exact(b"a"), None, 10).await.unwrap();
    }
    assert_eq!(store.cache_stats().entries, entries, "nothing of them is cached");
}

/// A document read that took its answer before a write and fills after it
/// must not plant the old answer (for both the document and its lookup).
#[tokio::test]
async fn a_fill_racing_a_doc_write_never_plants_the_old_answer() {
    let store = Arc::new(CachingStore::new(Arc::new(MemoryStore::new()), 1 << 20));
    store.doc_swap("reg", b"x", DocExpect::Absent, Some(doc("1", &["a"]))).await.unwrap();
    for lookup in [false, true] {
        let (reading, has_read) = tokio::sync::oneshot::channel();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let reader = {
            let store = store.clone();
            tokio::spawn(async move {
                // Takes the store's answer, then waits: a write lands between the read and its fill.
                let read = async {
                    let old = match lookup {
                        true => {
                            let hits = store.store.doc_lookup("reg", "user", IndexMatch::Exact(b"b"), None, 10).await?;
                            Entry::Lookup { limit: 10, hits }
                        }
                        false => Entry::Doc(store.store.doc_get("reg", b"x").await?),
                    };
                    let _ = reading.send(());
                    let _ = released.await;
                    Ok(old)
                };
                let key = if lookup { keys::lookup_key("reg", "user", b"b") } else { keys::doc_key("reg", b"x") };
                store.cache.read_through(key, read).await.unwrap();
            })
        };
        has_read.await.unwrap(); // the reader has its (old) answer
        let old = store.store.doc_get("reg", b"x").await.unwrap();
        let next = if lookup { None } else { Some(doc("2", &["b"])) };
        let expect = old.map_or(DocExpect::Absent, DocExpect::Present);
        assert!(store.doc_swap("reg", b"x", expect, next).await.unwrap().is_done());
        release.send(()).unwrap();
        reader.await.unwrap();
        if lookup {
            assert!(ids(&store, "b").await.is_empty(), "the deleted document's lookup is not planted");
        } else {
            assert_eq!(body(&store, b"x").await.as_deref(), Some("2"), "the old body is not planted");
        }
    }
}
