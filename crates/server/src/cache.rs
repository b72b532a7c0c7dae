//! A byte-bounded read-through cache in front of the store. It wraps the store
//! behind the same trait, so every write path — native, REST, import — drops
//! what it changes without having to remember to: invalidation by dependency
//! by construction. Homing changes (meta writes) drop everything.
//!
//! Freshness: a miss fills the cache only if no write happened between the
//! store read and the fill (checked under the lock writes take to invalidate),
//! so a read that raced a write can never plant the old record after it.

use async_trait::async_trait;
use handled_store::{
    DocExpect, DocOutcome, DocWrite, Document, Expect, HandleRecord, IndexHit, IndexMatch, ReplicatedChange,
    ReplicatedWrite, Store, StoreError, StoreStats, SwapOutcome, TxnEntry, TxnLogBounds,
};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Rough per-entry overhead on top of the encoded sizes (key copy, map slots, Vec headers).
const ENTRY_OVERHEAD: u64 = 96;

type Entry = Option<HandleRecord>;

#[derive(Clone)]
struct ByteWeight;

impl quick_cache::Weighter<Vec<u8>, Entry> for ByteWeight {
    fn weight(&self, key: &Vec<u8>, value: &Entry) -> u64 {
        ENTRY_OVERHEAD + key.len() as u64 + value.as_ref().map_or(0, |r| r.encoded_len() as u64)
    }
}

#[derive(Clone, Default)]
struct CountEvictions(Arc<AtomicU64>);

impl quick_cache::Lifecycle<Vec<u8>, Entry> for CountEvictions {
    type RequestState = ();
    fn begin_request(&self) {}
    fn on_evict(&self, _: &mut (), _: Vec<u8>, _: Entry) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

type Map = quick_cache::sync::Cache<Vec<u8>, Entry, ByteWeight, quick_cache::DefaultHashBuilder, CountEvictions>;

/// Cache counters for metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub invalidations: u64,
    pub bytes: u64,
    pub entries: u64,
    pub capacity_bytes: u64,
}

pub struct CachingStore {
    inner: Arc<dyn Store>,
    map: Map,
    evictions: Arc<AtomicU64>,
    invalidations: AtomicU64,
    /// Bumped by every write; a fill is dropped if it changed since its read.
    write_seq: AtomicU64,
    fill_lock: Mutex<()>,
    capacity_bytes: u64,
}

impl CachingStore {
    pub fn new(inner: Arc<dyn Store>, capacity_bytes: u64) -> Self {
        let lifecycle = CountEvictions::default();
        let evictions = lifecycle.0.clone();
        let estimated_items = (capacity_bytes / 256).max(16) as usize;
        let map = Map::with(estimated_items, capacity_bytes, ByteWeight, Default::default(), lifecycle);
        CachingStore {
            inner,
            map,
            evictions,
            invalidations: AtomicU64::new(0),
            write_seq: AtomicU64::new(0),
            fill_lock: Mutex::new(()),
            capacity_bytes,
        }
    }

    pub fn cache_stats(&self) -> CacheStats {
        CacheStats {
            hits: self.map.hits(),
            misses: self.map.misses(),
            evictions: self.evictions.load(Ordering::Relaxed),
            invalidations: self.invalidations.load(Ordering::Relaxed),
            bytes: self.map.weight(),
            entries: self.map.len() as u64,
            capacity_bytes: self.capacity_bytes,
        }
    }

    fn invalidate<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) {
        let _guard = self.fill_lock.lock();
        self.write_seq.fetch_add(1, Ordering::AcqRel);
        for key in keys {
            if self.map.remove(key).is_some() {
                self.invalidations.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn invalidate_all(&self) {
        let _guard = self.fill_lock.lock();
        self.write_seq.fetch_add(1, Ordering::AcqRel);
        self.invalidations.fetch_add(self.map.len() as u64, Ordering::Relaxed);
        self.map.clear();
    }
}

#[async_trait]
impl Store for CachingStore {
    async fn get(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        if let Some(hit) = self.map.get(key) {
            return Ok(hit);
        }
        let seq = self.write_seq.load(Ordering::Acquire);
        let record = self.inner.get(key).await?;
        let _guard = self.fill_lock.lock();
        if self.write_seq.load(Ordering::Acquire) == seq {
            self.map.insert(key.to_vec(), record.clone());
        }
        Ok(record)
    }

    async fn swap_with_docs(
        &self,
        key: &[u8],
        expect: Expect,
        new: Option<HandleRecord>,
        docs: Vec<DocWrite>,
    ) -> Result<SwapOutcome, StoreError> {
        // Invalidate after the durable write and before the caller can acknowledge it.
        let outcome = self.inner.swap_with_docs(key, expect, new, docs).await;
        self.invalidate([key]);
        outcome
    }

    async fn scan_keys(
        &self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        self.inner.scan_keys(prefix, start_after, limit).await
    }

    async fn put_many_with_docs(
        &self,
        records: Vec<(Vec<u8>, HandleRecord)>,
        docs: Vec<DocWrite>,
    ) -> Result<(), StoreError> {
        let keys: Vec<Vec<u8>> = records.iter().map(|(k, _)| k.clone()).collect();
        let outcome = self.inner.put_many_with_docs(records, docs).await;
        self.invalidate(keys.iter().map(Vec::as_slice));
        outcome
    }

    async fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.meta_get(key).await
    }

    async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        // Homing and site changes decide what resolves at all: drop everything.
        let outcome = self.inner.meta_put(key, value).await;
        self.invalidate_all();
        outcome
    }

    async fn meta_scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.inner.meta_scan(prefix).await
    }

    async fn count(&self) -> Result<u64, StoreError> {
        self.inner.count().await
    }

    fn stats(&self) -> StoreStats {
        self.inner.stats()
    }

    fn writable(&self) -> Result<(), StoreError> {
        self.inner.writable()
    }

    fn close(&self) {
        self.inner.close();
        self.invalidate_all();
    }

    fn export(&self) -> Result<Box<dyn handled_store::backup::StoreExport>, StoreError> {
        self.inner.export()
    }

    // The transaction log is not cached: pass through. Replicated changes drop
    // what they change, like the writes they stand for.
    async fn txn_log_read(&self, after: u64, limit: usize) -> Result<Vec<TxnEntry>, StoreError> {
        self.inner.txn_log_read(after, limit).await
    }

    async fn txn_log_bounds(&self) -> Result<TxnLogBounds, StoreError> {
        self.inner.txn_log_bounds().await
    }

    async fn txn_log_prune(&self, before_ms: u64) -> Result<u64, StoreError> {
        self.inner.txn_log_prune(before_ms).await
    }

    fn txn_log_subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.txn_log_subscribe()
    }

    async fn apply_replicated_with_docs(
        &self,
        changes: Vec<ReplicatedChange>,
        progress: Vec<(String, Option<Vec<u8>>)>,
        docs: Vec<DocWrite>,
    ) -> Result<(), StoreError> {
        let mut keys = Vec::new();
        let mut homing = false;
        for c in &changes {
            match c.write() {
                ReplicatedWrite::Handle(k, _) => keys.push(k),
                ReplicatedWrite::Meta(..) => homing = true,
            }
        }
        let outcome = self.inner.apply_replicated_with_docs(changes, progress, docs).await;
        if homing {
            self.invalidate_all();
        } else {
            self.invalidate(keys.iter().map(Vec::as_slice));
        }
        outcome
    }

    async fn txn_log_reset(&self, id: u64) -> Result<(), StoreError> {
        self.inner.txn_log_reset(id).await
    }

    async fn checkpoint(&self) -> Result<(), StoreError> {
        self.inner.checkpoint().await
    }

    // Documents (domain registry, reverse lookups) are not cached: pass through.
    async fn doc_get(&self, collection: &str, id: &[u8]) -> Result<Option<Document>, StoreError> {
        self.inner.doc_get(collection, id).await
    }

    async fn doc_swap(
        &self,
        c: &str,
        id: &[u8],
        expect: DocExpect,
        new: Option<Document>,
    ) -> Result<DocOutcome, StoreError> {
        self.inner.doc_swap(c, id, expect, new).await
    }

    async fn doc_lookup(
        &self,
        c: &str,
        index: &str,
        key: IndexMatch<'_>,
        after: Option<&IndexHit>,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        self.inner.doc_lookup(c, index, key, after, limit).await
    }

    async fn doc_scan(
        &self,
        c: &str,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Document)>, StoreError> {
        self.inner.doc_scan(c, prefix, after, limit).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_proto::value::HandleValue;
    use handled_store::MemoryStore;

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
        store.meta_put("homed/0.NA/A", None).await.unwrap();
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
}
