//! A byte-bounded read-through cache of the store. Readers ask it with the
//! seam they read ([`RecordCache::get`] with the records, the documents'
//! reads through [`CachedDocuments`]); it is a commit observer of the store
//! ([`handled_store::observe`]), so every write path — native, REST, registry,
//! import, replication — drops what it changes without having to remember to:
//! invalidation by dependency by construction ([`keys`]). Handle records,
//! documents and the first page of exact index lookups are cached; homing
//! changes (meta writes) and writes whose old state is unknown drop everything.
//!
//! Freshness: a miss fills the cache only if no invalidation happened between
//! the store read and the fill (checked under the lock invalidations take), so
//! a read that raced a write can never plant the old answer after it.
//!
//! On several nodes sharing a store, a [`Coherence`] (`crate::cluster`) says
//! when this node may answer from its cache at all (a live lease) and carries
//! each write to the peers: what it may change before it runs (marked pending:
//! neither answered nor filled, [`pending`]), what it changed before it is
//! answered.

pub mod keys;
mod pending;

use async_trait::async_trait;
use handled_store::{
    CommitObserver, Committed, DocExpect, DocOutcome, Document, DocumentStore, HandleRecord, IndexHit, IndexMatch,
    Observed, RecordStore, Store, StoreError, Writing,
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
    /// Before a write runs: make every peer that may serve from its cache mark
    /// `pending` (neither answer nor fill it) until [`Coherence::settle`]; an
    /// error means it could not be made sure, and the write must not run.
    async fn mark_pending(&self, pending: &Change) -> Result<(), StoreError>;
    /// After it ran: lift the peers' mark of `pending` and drop `change`, as
    /// [`Coherence::publish`] does.
    async fn settle(&self, pending: &Change, change: &Change) -> Result<(), StoreError>;
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

/// The cache: what it holds, and the cluster it keeps coherent with.
pub struct RecordCache {
    map: Map,
    evictions: Arc<AtomicU64>,
    invalidations: AtomicU64,
    /// Bumped by every invalidation; a fill is dropped if it changed since its read.
    write_seq: AtomicU64,
    fill_lock: Mutex<()>,
    /// Keys with a write in flight, here or on a peer.
    pending: pending::Pending,
    capacity_bytes: u64,
    coherence: std::sync::OnceLock<Arc<dyn Coherence>>,
}

impl RecordCache {
    pub fn new(capacity_bytes: u64) -> Self {
        let lifecycle = CountEvictions::default();
        let evictions = lifecycle.0.clone();
        let estimated_items = (capacity_bytes / 256).max(16) as usize;
        let map = Map::with(estimated_items, capacity_bytes, ByteWeight, Default::default(), lifecycle);
        RecordCache {
            map,
            evictions,
            invalidations: AtomicU64::new(0),
            write_seq: AtomicU64::new(0),
            fill_lock: Mutex::new(()),
            pending: Default::default(),
            capacity_bytes,
            coherence: Default::default(),
        }
    }

    /// Observe the writes of `store` (put under a layer that tells observers
    /// when it has none); returns the store to write through.
    pub fn observe(self: &Arc<Self>, store: Arc<dyn Store>) -> Arc<dyn Store> {
        let store = Observed::ensure(store);
        if let Some(hooks) = store.hooks() {
            hooks.observe(self.clone());
        }
        store
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
        self.drop_locked(change);
    }

    /// Drop what `change` names; the caller holds `fill_lock`, so no read
    /// that started before fills the cache after.
    fn drop_locked(&self, change: &Change) {
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

    /// A write that may change `pending` is about to run (here or on a peer):
    /// drop it and neither answer nor fill it until [`RecordCache::settle`].
    pub fn mark_pending(&self, pending: &Change) {
        let _guard = self.fill_lock.lock();
        self.pending.mark(pending);
        self.drop_locked(pending);
    }

    /// That write ran: lift the mark of `pending`, drop what `change` names.
    pub fn settle(&self, pending: &Change, change: &Change) {
        let _guard = self.fill_lock.lock();
        self.pending.lift(pending);
        self.drop_locked(change);
    }

    fn serving(&self) -> bool {
        self.coherence.get().is_none_or(|c| c.may_serve())
    }

    /// The cached answer under `key`, or `read` it from the store and keep it
    /// if nothing was invalidated meanwhile.
    async fn read_through<F>(&self, key: Vec<u8>, read: F) -> Result<Entry, StoreError>
    where
        F: std::future::Future<Output = Result<Entry, StoreError>>,
    {
        if !self.serving() || self.pending.holds(&key) {
            return read.await;
        }
        if let Some(hit) = self.map.get(&key) {
            return Ok(hit);
        }
        let seq = self.write_seq.load(Ordering::Acquire);
        let entry = read.await?;
        let _guard = self.fill_lock.lock();
        // A mark since the read bumped the sequence; one before it is seen above.
        if self.write_seq.load(Ordering::Acquire) == seq && self.serving() {
            self.map.insert(key, entry.clone());
        }
        Ok(entry)
    }

    /// The record under `key`, from the cache or read from `store`.
    pub async fn get(&self, store: &dyn RecordStore, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        let read = async { Ok(Entry::Handle(store.get(key).await?)) };
        match self.read_through(keys::handle_key(key), read).await? {
            Entry::Handle(record) => Ok(record),
            _ => Err(StoreError::Corrupt("cache: not a handle entry".into())),
        }
    }
}

/// What a committed write changed, in cache keys.
fn change_of(committed: &Committed<'_>) -> Change {
    match committed {
        // Homing and site changes decide what resolves at all: drop everything.
        Committed::Meta | Committed::Handles { meta: true, .. } => Change::All,
        // A ride-along document write's old state is not known here: drop
        // everything if any is cached.
        Committed::Handles { doc_collections, .. } if doc_collections.iter().any(|c| cached_collection(c)) => {
            Change::All
        }
        Committed::Handles { keys, .. } => Change::Keys(keys.iter().map(|k| keys::handle_key(k)).collect()),
        Committed::Document { collection, .. } if !cached_collection(collection) => Change::Keys(Vec::new()),
        Committed::Document { collection: c, id, new, outcome } => match outcome {
            // The store says what it replaced: its index values and the new ones.
            Ok(DocOutcome::Done { previous }) => Change::Keys(doc_change(c, id, previous.as_ref(), *new)),
            // Nothing written.
            Ok(DocOutcome::Conflict { .. }) => Change::Keys(vec![keys::doc_key(c, id)]),
            // Maybe written, over an unknown state.
            Err(()) => Change::All,
        },
    }
}

/// What a write about to run may change, in cache keys: marked pending until
/// it ran. A document write's index lookups are not named (its old index
/// values are not known before it runs): only the document is marked.
fn pending_of(writing: &Writing<'_>) -> Change {
    match *writing {
        Writing::Meta | Writing::Handles { meta: true, .. } => Change::All,
        Writing::Handles { keys, .. } => Change::Keys(keys.iter().map(|k| keys::handle_key(k)).collect()),
        Writing::Document { collection, id } if cached_collection(collection) => {
            Change::Keys(vec![keys::doc_key(collection, id)])
        }
        Writing::Document { .. } => Change::Keys(Vec::new()),
    }
}

/// Before a write: mark what it may change, here then on the peers (only in a
/// cluster: a single node's reads and writes meet in its own store and cache,
/// whose fills already lose to invalidations). After it (whatever its outcome)
/// and before its answer: lift the mark and drop what it changed, here, then
/// on the peers.
#[async_trait]
impl CommitObserver for RecordCache {
    async fn writing(&self, writing: &Writing<'_>) -> Result<(), StoreError> {
        let Some(c) = self.coherence.get() else { return Ok(()) };
        let pending = pending_of(writing);
        if pending.is_empty() {
            return Ok(());
        }
        self.mark_pending(&pending);
        if let Err(e) = c.mark_pending(&pending).await {
            self.settle(&pending, &Change::Keys(Vec::new()));
            return Err(e);
        }
        Ok(())
    }

    async fn committed(&self, committed: &Committed<'_>) -> Result<(), StoreError> {
        let change = change_of(committed);
        let Some(c) = self.coherence.get() else {
            if !change.is_empty() {
                self.invalidate(&change);
            }
            return Ok(());
        };
        let pending = pending_of(&committed.writing());
        if change.is_empty() && pending.is_empty() {
            return Ok(());
        }
        self.settle(&pending, &change);
        c.settle(&pending, &change).await
    }
}

/// The documents of a store, read through the cache (what the domain
/// registry is given). Writes go to the store, which tells the cache.
pub struct CachedDocuments {
    pub store: Arc<dyn Store>,
    pub cache: Arc<RecordCache>,
}

#[async_trait]
impl DocumentStore for CachedDocuments {
    async fn doc_get(&self, collection: &str, id: &[u8]) -> Result<Option<Document>, StoreError> {
        if !cached_collection(collection) {
            return self.store.doc_get(collection, id).await;
        }
        let read = async { Ok(Entry::Doc(self.store.doc_get(collection, id).await?)) };
        match self.cache.read_through(keys::doc_key(collection, id), read).await? {
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
        self.store.doc_swap(c, id, expect, new).await
    }

    /// First pages of exact matches from the cache (a prefix match depends
    /// on every value of the index, later pages are rare), the others read
    /// from the store.
    async fn doc_lookup(
        &self,
        c: &str,
        index: &str,
        key: IndexMatch<'_>,
        after: Option<&IndexHit>,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        let (IndexMatch::Exact(value), None, true) = (key, after, cached_collection(c)) else {
            return self.store.doc_lookup(c, index, key, after, limit).await;
        };
        let read =
            async { Ok(Entry::Lookup { limit, hits: self.store.doc_lookup(c, index, key, None, limit).await? }) };
        match self.cache.read_through(keys::lookup_key(c, index, value), read).await? {
            Entry::Lookup { limit: cached, hits } if cached == limit => Ok(hits),
            // Cached for another page size: ask the store.
            _ => self.store.doc_lookup(c, index, key, None, limit).await,
        }
    }

    async fn doc_scan(
        &self,
        c: &str,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Document)>, StoreError> {
        self.store.doc_scan(c, prefix, after, limit).await
    }
}

/// For tests: a store (a layer of its own over `inner`) and a cache observing
/// it, read as the directory reads (documents through `docs`); derefs to the
/// store for writes.
#[cfg(test)]
pub struct CachingStore {
    pub store: Arc<dyn Store>,
    pub cache: Arc<RecordCache>,
    /// The documents, read through the cache.
    pub docs: CachedDocuments,
}

#[cfg(test)]
impl CachingStore {
    pub fn new(inner: Arc<dyn Store>, capacity_bytes: u64) -> Self {
        let cache = Arc::new(RecordCache::new(capacity_bytes));
        let store = cache.observe(Arc::new(Observed::new(inner)));
        let docs = CachedDocuments { store: store.clone(), cache: cache.clone() };
        CachingStore { store, cache, docs }
    }

    pub async fn get(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        self.cache.get(&*self.store, key).await
    }

    pub fn cache_stats(&self) -> CacheStats {
        self.cache.cache_stats()
    }

    pub async fn leave_cluster(&self) {
        self.cache.leave_cluster().await
    }
}

#[cfg(test)]
impl std::ops::Deref for CachingStore {
    type Target = dyn Store;
    fn deref(&self) -> &(dyn Store + 'static) {
        &*self.store
    }
}

#[cfg(test)]
mod tests;
