//! A byte-bounded read-through cache in front of the store. It wraps the store
//! behind the same trait, so every write path — native, REST, registry, import —
//! drops what it changes without having to remember to: invalidation by
//! dependency by construction ([`keys`]). Handle records, documents and the
//! first page of exact index lookups are cached; homing changes (meta writes)
//! and writes whose old state is unknown drop everything.
//!
//! Freshness: a miss fills the cache only if no invalidation happened between
//! the store read and the fill (checked under the lock invalidations take), so
//! a read that raced a write can never plant the old answer after it.
//!
//! On several nodes sharing a store, a [`Coherence`] (`crate::cluster`) says
//! when this node may answer from its cache at all (a live lease) and carries
//! each write's [`Change`] to the peers before the write is answered.

pub mod keys;

use async_trait::async_trait;
use handled_store::{
    Capabilities, DocExpect, DocOutcome, DocWrite, Document, DocumentStore, Expect, HandleRecord, IndexHit, IndexMatch,
    RecordStore, ReplicatedChange, ReplicatedWrite, Store, StoreAdmin, StoreError, StoreStats, SwapOutcome, TxnEntry,
    TxnLogBounds, TxnLogStore,
};
pub use keys::Change;
use keys::{cached_collection, doc_change, Entry};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Clone)]
struct ByteWeight;

impl quick_cache::Weighter<Vec<u8>, Entry> for ByteWeight {
    fn weight(&self, key: &Vec<u8>, value: &Entry) -> u64 {
        key.len() as u64 + value.weight()
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

/// How a node sharing its store with others keeps its cache coherent with theirs.
#[async_trait]
pub trait Coherence: Send + Sync + 'static {
    /// May answers come from the cache now (this node holds a live lease)?
    fn may_serve(&self) -> bool;
    /// Make every peer that may serve from its cache drop `change` (or stop
    /// serving from it); returns when that is done. An error means it could
    /// not be made sure: the write must not be acknowledged as done.
    async fn publish(&self, change: &Change) -> Result<(), StoreError>;
    /// Figures for metrics.
    fn stats(&self) -> CoherenceStats;
    /// Stop serving from the cache and leave the cluster (a clean shutdown),
    /// so writers need not fence this node and wait out its lease.
    async fn leave(&self);
}

/// Cluster figures for metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct CoherenceStats {
    pub invalidations_sent: u64,
    pub invalidations_received: u64,
    /// Frames from the cluster channel refused (bad tag, size or content).
    pub refused_frames: u64,
    pub fences: u64,
    pub lease_live: bool,
}

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
    /// With a cluster: its figures.
    pub cluster: Option<CoherenceStats>,
}

pub struct CachingStore {
    inner: Arc<dyn Store>,
    map: Map,
    evictions: Arc<AtomicU64>,
    invalidations: AtomicU64,
    /// Bumped by every invalidation; a fill is dropped if it changed since its read.
    write_seq: AtomicU64,
    fill_lock: Mutex<()>,
    capacity_bytes: u64,
    coherence: std::sync::OnceLock<Arc<dyn Coherence>>,
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
            coherence: Default::default(),
        }
    }

    /// Join a cluster (once, before serving): answers come from the cache only
    /// while `coherence` allows, and every write is published through it.
    pub fn set_coherence(&self, coherence: Arc<dyn Coherence>) {
        let _ = self.coherence.set(coherence);
    }

    /// Leave the cluster, if in one (before the store is closed).
    pub async fn leave_cluster(&self) {
        if let Some(c) = self.coherence.get() {
            c.leave().await;
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
            cluster: self.coherence.get().map(|c| c.stats()),
        }
    }

    /// Drop what `change` names (a local write, or a peer's announcement).
    pub fn invalidate(&self, change: &Change) {
        let _guard = self.fill_lock.lock();
        self.write_seq.fetch_add(1, Ordering::AcqRel);
        match change {
            Change::All => {
                self.invalidations.fetch_add(self.map.len() as u64, Ordering::Relaxed);
                self.map.clear();
            }
            Change::Keys(keys) => {
                for key in keys {
                    if self.map.remove(key.as_slice()).is_some() {
                        self.invalidations.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    }

    fn serving(&self) -> bool {
        self.coherence.get().is_none_or(|c| c.may_serve())
    }

    /// After a write (whatever its outcome) and before its answer: drop what it
    /// changed here, then on the peers.
    async fn changed<T>(&self, change: Change, outcome: Result<T, StoreError>) -> Result<T, StoreError> {
        if change.is_empty() {
            return outcome;
        }
        self.invalidate(&change);
        if let Some(c) = self.coherence.get() {
            c.publish(&change).await?;
        }
        outcome
    }

    /// The cached answer under `key`, or `read` it from the store and keep it
    /// if nothing was invalidated meanwhile.
    async fn read_through<F>(&self, key: Vec<u8>, read: F) -> Result<Entry, StoreError>
    where
        F: std::future::Future<Output = Result<Entry, StoreError>>,
    {
        if !self.serving() {
            return read.await;
        }
        if let Some(hit) = self.map.get(&key) {
            return Ok(hit);
        }
        let seq = self.write_seq.load(Ordering::Acquire);
        let entry = read.await?;
        let _guard = self.fill_lock.lock();
        if self.write_seq.load(Ordering::Acquire) == seq && self.serving() {
            self.map.insert(key, entry.clone());
        }
        Ok(entry)
    }

    /// A ride-along document write's old state is not known here: drop
    /// everything if any is cached.
    fn handle_change(keys: Vec<Vec<u8>>, docs: &[DocWrite]) -> Change {
        if docs.iter().any(|d| cached_collection(&d.collection)) {
            Change::All
        } else {
            Change::Keys(keys)
        }
    }
}

#[async_trait::async_trait]
impl RecordStore for CachingStore {
    async fn get(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        let read = async { Ok(Entry::Handle(self.inner.get(key).await?)) };
        match self.read_through(keys::handle_key(key), read).await? {
            Entry::Handle(record) => Ok(record),
            _ => Err(StoreError::Corrupt("cache: not a handle entry".into())),
        }
    }

    async fn swap_with_docs(
        &self,
        key: &[u8],
        expect: Expect,
        new: Option<HandleRecord>,
        docs: Vec<DocWrite>,
    ) -> Result<SwapOutcome, StoreError> {
        // Invalidate after the durable write and before the caller can acknowledge it.
        let change = Self::handle_change(vec![keys::handle_key(key)], &docs);
        let outcome = self.inner.swap_with_docs(key, expect, new, docs).await;
        self.changed(change, outcome).await
    }

    async fn scan_keys(
        &self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        self.inner.scan_keys(prefix, start_after, limit).await
    }

    async fn find_by_value(
        &self,
        value_type: &[u8],
        data: IndexMatch<'_>,
        start_after: Option<&IndexHit>,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        self.inner.find_by_value(value_type, data, start_after, limit).await
    }

    async fn put_many_with_docs(
        &self,
        records: Vec<(Vec<u8>, HandleRecord)>,
        docs: Vec<DocWrite>,
    ) -> Result<(), StoreError> {
        let change = Self::handle_change(records.iter().map(|(k, _)| keys::handle_key(k)).collect(), &docs);
        let outcome = self.inner.put_many_with_docs(records, docs).await;
        self.changed(change, outcome).await
    }

    async fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.meta_get(key).await
    }

    async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        // Homing and site changes decide what resolves at all: drop everything.
        let outcome = self.inner.meta_put(key, value).await;
        self.changed(Change::All, outcome).await
    }

    async fn meta_scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.inner.meta_scan(prefix).await
    }

    async fn count(&self) -> Result<u64, StoreError> {
        self.inner.count().await
    }

    async fn home(&self, prefix_handle: &[u8], homed: bool) -> Result<(), StoreError> {
        // Homing decides what resolves at all: drop everything.
        let outcome = self.inner.home(prefix_handle, homed).await;
        self.changed(Change::All, outcome).await
    }

    async fn homed_prefixes(&self) -> Result<Vec<Vec<u8>>, StoreError> {
        self.inner.homed_prefixes().await
    }
}

#[async_trait::async_trait]
impl DocumentStore for CachingStore {
    async fn doc_get(&self, collection: &str, id: &[u8]) -> Result<Option<Document>, StoreError> {
        if !cached_collection(collection) {
            return self.inner.doc_get(collection, id).await;
        }
        let read = async { Ok(Entry::Doc(self.inner.doc_get(collection, id).await?)) };
        match self.read_through(keys::doc_key(collection, id), read).await? {
            Entry::Doc(doc) => Ok(doc),
            _ => Err(StoreError::Corrupt("cache: not a document entry".into())),
        }
    }

    async fn doc_swap(
        &self,
        c: &str,
        id: &[u8],
        expect: DocExpect,
        new: Option<Document>,
    ) -> Result<DocOutcome, StoreError> {
        if !cached_collection(c) {
            return self.inner.doc_swap(c, id, expect, new).await;
        }
        let outcome = self.inner.doc_swap(c, id, expect, new.clone()).await;
        let change = match &outcome {
            // The store says what it replaced: its index values and the new ones.
            Ok(DocOutcome::Done { previous }) => Change::Keys(doc_change(c, id, previous.as_ref(), new.as_ref())),
            // Nothing written.
            Ok(DocOutcome::Conflict { .. }) => Change::Keys(vec![keys::doc_key(c, id)]),
            // Maybe written, over an unknown state.
            Err(_) => Change::All,
        };
        self.changed(change, outcome).await
    }

    async fn doc_lookup(
        &self,
        c: &str,
        index: &str,
        key: IndexMatch<'_>,
        after: Option<&IndexHit>,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        // Only first pages of exact matches: a prefix match depends on every
        // value of the index, later pages are rare.
        let (IndexMatch::Exact(value), None, true) = (key, after, cached_collection(c)) else {
            return self.inner.doc_lookup(c, index, key, after, limit).await;
        };
        let read =
            async { Ok(Entry::Lookup { limit, hits: self.inner.doc_lookup(c, index, key, None, limit).await? }) };
        match self.read_through(keys::lookup_key(c, index, value), read).await? {
            Entry::Lookup { limit: cached, hits } if cached == limit => Ok(hits),
            // Cached for another page size: ask the store.
            _ => self.inner.doc_lookup(c, index, key, None, limit).await,
        }
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

#[async_trait::async_trait]
impl TxnLogStore for CachingStore {
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
                ReplicatedWrite::Handle(k, _) => keys.push(keys::handle_key(&k)),
                ReplicatedWrite::Meta(..) => homing = true,
            }
        }
        let change = if homing { Change::All } else { Self::handle_change(keys, &docs) };
        let outcome = self.inner.apply_replicated_with_docs(changes, progress, docs).await;
        self.changed(change, outcome).await
    }

    async fn txn_log_reset(&self, id: u64) -> Result<(), StoreError> {
        self.inner.txn_log_reset(id).await
    }
}

#[async_trait::async_trait]
impl StoreAdmin for CachingStore {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn stats(&self) -> StoreStats {
        self.inner.stats()
    }

    fn writable(&self) -> Result<(), StoreError> {
        self.inner.writable()
    }

    fn warming(&self) -> Option<handled_store::Warming> {
        self.inner.warming()
    }

    fn close(&self) {
        self.inner.close();
        self.invalidate(&Change::All);
    }

    fn export(&self) -> Result<Box<dyn handled_store::backup::StoreExport>, StoreError> {
        self.inner.export()
    }

    async fn checkpoint(&self) -> Result<(), StoreError> {
        self.inner.checkpoint().await
    }
}

#[cfg(test)]
mod tests;
