//! Nodes of one process sharing a memory store, each with its cache, lease
//! and cluster channel on loopback: the coherence rules without Cassandra
//! (tests/cluster/ runs them through real nodes on Cassandra).

use std::sync::Arc;
use std::time::{Duration, Instant};

use handled_proto::value::HandleValue;
use handled_store::{
    DocExpect, Document, DocumentStore, Expect, HandleRecord, IndexEntry, IndexMatch, MemoryStore, Store,
};

use super::coherence::{Cluster, Timings};
use crate::cache::{CachingStore, Coherence};

fn timings() -> Timings {
    Timings {
        lease: Duration::from_millis(800),
        margin: Duration::from_millis(100),
        view_refresh: Duration::from_millis(200),
        ack_timeout: Duration::from_millis(100),
    }
}

struct Node {
    cache: CachingStore,
    cluster: Arc<Cluster>,
}

async fn node(store: &Arc<dyn Store>) -> Node {
    let cache = CachingStore::new(store.clone(), 1 << 20);
    let cluster = Cluster::start(store.clone(), &cache.cache, "127.0.0.1:0".parse().unwrap(), b"site key", timings())
        .await
        .unwrap();
    Node { cache, cluster }
}

async fn until_serving(nodes: &[&Node]) {
    let start = Instant::now();
    while !nodes.iter().all(|n| n.cluster.may_serve()) {
        assert!(start.elapsed() < Duration::from_secs(5), "nodes never got to serve from their caches");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `N` nodes on one fresh store (returned too), each serving from its cache.
async fn serving_nodes<const N: usize>() -> (Arc<dyn Store>, [Node; N]) {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut nodes = Vec::with_capacity(N);
    for _ in 0..N {
        nodes.push(node(&store).await);
    }
    until_serving(&nodes.iter().collect::<Vec<_>>()).await;
    let Ok(nodes) = nodes.try_into() else { unreachable!("N nodes made") };
    (store, nodes)
}

fn record(n: u64) -> HandleRecord {
    HandleRecord::new(vec![HandleValue::new(1, "URL", n.to_string())])
}

fn doc(n: u64) -> Document {
    Document::new(n.to_string().into_bytes(), vec![IndexEntry::new("user", format!("u{}", n % 3).into_bytes())])
}

async fn handle_on(node: &Node) -> u64 {
    let r = node.cache.get(b"A/1").await.unwrap().unwrap();
    std::str::from_utf8(&r.values[0].data).unwrap().parse().unwrap()
}

async fn doc_on(node: &Node) -> u64 {
    let d = node.cache.docs.doc_get("reg", b"x").await.unwrap().unwrap();
    std::str::from_utf8(&d.body).unwrap().parse().unwrap()
}

async fn users_on(node: &Node, user: u64) -> usize {
    let key = format!("u{user}");
    node.cache.docs.doc_lookup("reg", "user", IndexMatch::Exact(key.as_bytes()), None, 10).await.unwrap().len()
}

/// After a write is answered on A, B never answers the old value: handles,
/// documents and lookups, many rounds, B's cache holding the old answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_on_one_node_is_never_read_old_on_another() {
    let (_, [a, b]) = serving_nodes::<2>().await;
    a.cache.swap(b"A/1", Expect::Absent, Some(record(0))).await.unwrap();
    a.cache.doc_swap("reg", b"x", DocExpect::Absent, Some(doc(0))).await.unwrap();
    for n in 1..=300u64 {
        // B caches the current answers…
        assert_eq!(handle_on(&b).await, n - 1);
        assert_eq!(doc_on(&b).await, n - 1);
        assert_eq!(users_on(&b, (n - 1) % 3).await, 1);
        // …A changes them…
        a.cache.swap(b"A/1", Expect::Any, Some(record(n))).await.unwrap();
        a.cache.doc_swap("reg", b"x", DocExpect::Any, Some(doc(n))).await.unwrap();
        // …and once A has answered, B has the new ones.
        assert_eq!(handle_on(&b).await, n, "round {n}: old handle on B");
        assert_eq!(doc_on(&b).await, n, "round {n}: old document on B");
        assert_eq!(users_on(&b, (n - 1) % 3).await, 0, "round {n}: old lookup on B");
        assert_eq!(users_on(&b, n % 3).await, 1, "round {n}: new lookup missing on B");
    }
    let (sa, sb) = (a.cache.cache_stats(), b.cache.cache_stats());
    assert!(sb.hits > 300, "B answered from its cache: {sb:?}");
    let (ka, kb) = (sa.cluster.unwrap(), sb.cluster.unwrap());
    assert!(ka.invalidations_sent >= 600 && kb.invalidations_received >= 600, "{ka:?} {kb:?}");
    assert_eq!(ka.fences, 0);
}

/// A node that stops answering (killed) delays the next write by at most
/// about one lease (it is fenced and its lease waited out); later writes go
/// at once, and the survivor's reads stay fresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_node_delays_writes_once_for_at_most_a_lease() {
    let (_, [a, b, c]) = serving_nodes::<3>().await;
    a.cache.swap(b"A/1", Expect::Absent, Some(record(0))).await.unwrap();
    assert_eq!(handle_on(&b).await, 0);
    c.cluster.stop();
    tokio::time::sleep(Duration::from_millis(100)).await; // its tasks are aborted asynchronously
    let t = timings();
    let started = Instant::now();
    a.cache.swap(b"A/1", Expect::Any, Some(record(1))).await.unwrap();
    let first = started.elapsed();
    assert!(first <= t.lease + t.margin + Duration::from_millis(300), "first write after the death took {first:?}");
    assert_eq!(a.cluster.stats().fences, 1, "the dead node was fenced");
    assert_eq!(handle_on(&b).await, 1);
    let started = Instant::now();
    for n in 2..20 {
        a.cache.swap(b"A/1", Expect::Any, Some(record(n))).await.unwrap();
        assert_eq!(handle_on(&b).await, n);
    }
    assert!(started.elapsed() < t.lease, "later writes do not wait: {:?}", started.elapsed());
    assert_eq!(a.cluster.stats().fences, 1);
}

/// A node that shuts down cleanly removes its lease: writes elsewhere do not
/// wait for it, nor fence it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_leaving_cleanly_delays_no_write() {
    let (_, [a, b]) = serving_nodes::<2>().await;
    b.cache.leave_cluster().await;
    assert!(!b.cluster.may_serve());
    let started = Instant::now();
    a.cache.swap(b"A/1", Expect::Absent, Some(record(0))).await.unwrap();
    assert!(started.elapsed() < timings().lease / 2, "waited {:?}", started.elapsed());
    assert_eq!(a.cluster.stats().fences, 0, "no lease left to fence");
}

/// A node whose lease cannot be renewed (the store is gone) stops serving
/// from its cache and drops it; a node fenced by a peer does too, and serves
/// again only after a new lease has had time to reach every writer's view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_cannot_renew_its_lease_stops_serving_from_its_cache() {
    let (store, [a, b]) = serving_nodes::<2>().await;
    a.cache.swap(b"A/1", Expect::Absent, Some(record(0))).await.unwrap();
    handle_on(&b).await;
    assert_eq!(b.cache.cache_stats().entries, 1);
    // Fenced by A (as after a missed acknowledgement): B's next renewal sees it.
    a.cluster.fence_for_test(b.cluster.id()).await;
    b.cluster.renew_once().await;
    assert!(!b.cluster.may_serve(), "fenced: not serving from the cache");
    assert_eq!(b.cache.cache_stats().entries, 0, "fenced: cache dropped");
    until_serving(&[&b]).await;
    // The store goes away: renewals fail.
    handle_on(&b).await;
    store.close();
    b.cluster.renew_once().await;
    assert!(!b.cluster.may_serve(), "no renewal: not serving");
    assert_eq!(b.cache.cache_stats().entries, 0, "no renewal: cache dropped");
    assert!(b.cache.get(b"A/1").await.is_err(), "reads go to the (gone) store, not the cache");
}

/// A store whose record writes, once `hold` is set, take that long to return
/// after they are done: as a Cassandra write whose answer is slow (a cut
/// replica, the driver waiting) while its compare-and-set has committed.
struct SlowAnswers {
    inner: Arc<dyn Store>,
    writes: SlowWrites,
}

struct SlowWrites {
    inner: Arc<dyn Store>,
    hold_ms: std::sync::atomic::AtomicU64,
}

impl SlowWrites {
    async fn held<T>(&self, done: T) -> T {
        let ms = self.hold_ms.load(std::sync::atomic::Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        done
    }

    async fn swap_with_docs(
        &self,
        key: &[u8],
        expect: Expect,
        new: Option<HandleRecord>,
        docs: Vec<handled_store::DocWrite>,
    ) -> Result<handled_store::SwapOutcome, handled_store::StoreError> {
        self.held(self.inner.swap_with_docs(key, expect, new, docs).await).await
    }

    async fn put_many_with_docs(
        &self,
        records: Vec<(Vec<u8>, HandleRecord)>,
        docs: Vec<handled_store::DocWrite>,
    ) -> Result<(), handled_store::StoreError> {
        self.held(self.inner.put_many_with_docs(records, docs).await).await
    }

    async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), handled_store::StoreError> {
        self.held(self.inner.meta_put(key, value).await).await
    }

    async fn home(&self, prefix_handle: &[u8], homed: bool) -> Result<(), handled_store::StoreError> {
        self.held(self.inner.home(prefix_handle, homed).await).await
    }
}

handled_store::forward_store!(RecordStore for SlowAnswers => inner, writes writes);
handled_store::forward_store!(DocumentStore for SlowAnswers => inner);
handled_store::forward_store!(TxnLogStore for SlowAnswers => inner);
handled_store::forward_store!(StoreAdmin for SlowAnswers => inner);

/// docs/cluster.md, "Write pending": while A's write has committed in the
/// store but not yet returned, a read through the store (on a node whose cache
/// does not hold the key) already sees the new value; no node may then answer
/// the old one from its cache — not B, which cached it before, nor A itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_committed_but_not_yet_answered_is_never_read_old_after_it_was_read_new() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let slow = Arc::new(SlowAnswers {
        inner: store.clone(),
        writes: SlowWrites { inner: store.clone(), hold_ms: Default::default() },
    });
    let slow_store: Arc<dyn Store> = slow.clone();
    let (a, b) = (node(&slow_store).await, node(&store).await);
    until_serving(&[&a, &b]).await;
    for n in 1..=20u64 {
        slow.writes.hold_ms.store(0, std::sync::atomic::Ordering::Relaxed);
        a.cache.swap(b"A/1", Expect::Any, Some(record(n * 10))).await.unwrap();
        // Both caches hold the value.
        assert_eq!((handle_on(&a).await, handle_on(&b).await), (n * 10, n * 10));
        assert_eq!((handle_on(&a).await, handle_on(&b).await), (n * 10, n * 10));
        slow.writes.hold_ms.store(400, std::sync::atomic::Ordering::Relaxed);
        let writer = {
            let a_store = a.cache.store.clone();
            tokio::spawn(async move { a_store.swap(b"A/1", Expect::Any, Some(record(n * 10 + 1))).await })
        };
        // Committed in the store (what a read through it on a third node sees)…
        let start = Instant::now();
        while store.get(b"A/1").await.unwrap() != Some(record(n * 10 + 1)) {
            assert!(start.elapsed() < Duration::from_secs(5), "the write never committed");
            tokio::task::yield_now().await;
        }
        // …so neither cache may answer the old value any more.
        assert_eq!(handle_on(&b).await, n * 10 + 1, "round {n}: B answered the old value from its cache");
        assert_eq!(handle_on(&a).await, n * 10 + 1, "round {n}: A answered the old value from its cache");
        writer.await.unwrap().unwrap();
        assert_eq!((handle_on(&a).await, handle_on(&b).await), (n * 10 + 1, n * 10 + 1));
    }
    let hits = b.cache.cache_stats().hits;
    assert!(hits >= 20, "B answered from its cache between writes: {hits} hits");
}
