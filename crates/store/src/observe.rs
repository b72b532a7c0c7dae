//! Commit observers and document contributors: what the server hangs on a
//! store's writes (its record cache, its value index) without wrapping the
//! store in a type of its own for each.
//!
//! A [`DocContributor`] adds documents to every handle write, in the same
//! commit (the reverse-lookup index: its entries never disagree with the
//! handle). A [`CommitObserver`] is told of every write once it ran, whatever
//! its outcome, before the write is answered (the cache drops what changed
//! and announces it to the cluster's peers; an error fails the answer).
//!
//! [`Observed`] is the one layer that calls them, over any store; [`Hooks`]
//! is where they are registered, reached through [`crate::StoreAdmin::hooks`]
//! so that whoever holds the store as `Arc<dyn Store>` can add one.

use crate::{
    backup::StoreExport, Capabilities, DocExpect, DocOutcome, DocWrite, Document, DocumentStore, Expect, HandleRecord,
    IndexHit, IndexMatch, RecordStore, ReplicatedChange, ReplicatedWrite, Store, StoreAdmin, StoreError, StoreStats,
    SwapOutcome, TxnEntry, TxnLogBounds, TxnLogStore, Warming,
};
use parking_lot::RwLock;
use std::sync::Arc;

/// A write that ran, as told to [`CommitObserver`]s.
#[derive(Debug)]
pub enum Committed<'a> {
    /// Handle records under `keys` (written, or maybe written when the write
    /// failed), with documents riding along in `doc_collections`; `meta`: server
    /// metadata (homing among it) changed with them (replicated changes).
    Handles { keys: &'a [Vec<u8>], doc_collections: &'a [String], meta: bool },
    /// Server metadata, homing among it: what resolves at all may have changed.
    Meta,
    /// One document swap: `new` was asked for, `outcome` is what the store said.
    Document { collection: &'a str, id: &'a [u8], new: Option<&'a Document>, outcome: Result<&'a DocOutcome, ()> },
}

/// Told of every write through the store, after it ran and before it is answered.
#[async_trait::async_trait]
pub trait CommitObserver: Send + Sync + 'static {
    /// An error means the observer could not do its part (a peer was not
    /// told): the write is then answered with it, not as done.
    async fn committed(&self, change: &Committed<'_>) -> Result<(), StoreError>;
}

/// Adds documents to handle writes, in the same commit.
pub trait DocContributor: Send + Sync + 'static {
    /// Push to `out` the documents to write along with handle `key` becoming
    /// `record` (`None`: deleted).
    fn contribute(&self, key: &[u8], record: Option<&HandleRecord>, out: &mut Vec<DocWrite>);
}

/// The registered contributors and observers of a store.
#[derive(Default)]
pub struct Hooks {
    contributors: RwLock<Vec<Arc<dyn DocContributor>>>,
    observers: RwLock<Vec<Arc<dyn CommitObserver>>>,
}

impl Hooks {
    /// Add documents to every later handle write.
    pub fn contribute(&self, contributor: Arc<dyn DocContributor>) {
        self.contributors.write().push(contributor);
    }

    /// Be told of every later write.
    pub fn observe(&self, observer: Arc<dyn CommitObserver>) {
        self.observers.write().push(observer);
    }

    fn add_docs<'r>(
        &self,
        writes: impl Iterator<Item = (&'r [u8], Option<&'r HandleRecord>)>,
        out: &mut Vec<DocWrite>,
    ) {
        let contributors = self.contributors.read();
        if contributors.is_empty() {
            return;
        }
        for (key, record) in writes {
            for c in contributors.iter() {
                c.contribute(key, record, out);
            }
        }
    }

    /// The observers now registered (`None`: no one to tell, nothing to prepare).
    fn observers(&self) -> Option<Vec<Arc<dyn CommitObserver>>> {
        let observers = self.observers.read();
        (!observers.is_empty()).then(|| observers.clone())
    }

    /// Tell `observers` of `change`, then answer with `outcome`.
    async fn tell<T>(
        observers: Option<Vec<Arc<dyn CommitObserver>>>,
        change: &Committed<'_>,
        outcome: Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        for o in observers.iter().flatten() {
            o.committed(change).await?;
        }
        outcome
    }
}

/// The collections of `docs`, each once.
fn collections(docs: &[DocWrite]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for d in docs {
        if !out.contains(&d.collection) {
            out.push(d.collection.clone());
        }
    }
    out
}

/// A store whose writes go through its [`Hooks`].
pub struct Observed {
    inner: Arc<dyn Store>,
    hooks: Hooks,
}

impl Observed {
    /// A layer with hooks of its own over `inner` (each node of a test
    /// sharing one store has its own).
    pub fn new(inner: Arc<dyn Store>) -> Observed {
        Observed { inner, hooks: Hooks::default() }
    }

    /// `store` itself when it already has hooks, else `store` under a layer that has.
    pub fn ensure(store: Arc<dyn Store>) -> Arc<dyn Store> {
        if store.hooks().is_some() {
            return store;
        }
        Arc::new(Observed::new(store))
    }
}

#[async_trait::async_trait]
impl RecordStore for Observed {
    async fn get(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        self.inner.get(key).await
    }

    async fn swap_with_docs(
        &self,
        key: &[u8],
        expect: Expect,
        new: Option<HandleRecord>,
        mut docs: Vec<DocWrite>,
    ) -> Result<SwapOutcome, StoreError> {
        self.hooks.add_docs(std::iter::once((key, new.as_ref())), &mut docs);
        let Some(observers) = self.hooks.observers() else {
            return self.inner.swap_with_docs(key, expect, new, docs).await;
        };
        let (keys, doc_collections) = ([key.to_vec()], collections(&docs));
        let outcome = self.inner.swap_with_docs(key, expect, new, docs).await;
        let change = Committed::Handles { keys: &keys, doc_collections: &doc_collections, meta: false };
        Hooks::tell(Some(observers), &change, outcome).await
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
        mut docs: Vec<DocWrite>,
    ) -> Result<(), StoreError> {
        self.hooks.add_docs(records.iter().map(|(k, r)| (k.as_slice(), Some(r))), &mut docs);
        let Some(observers) = self.hooks.observers() else {
            return self.inner.put_many_with_docs(records, docs).await;
        };
        let keys: Vec<Vec<u8>> = records.iter().map(|(k, _)| k.clone()).collect();
        let doc_collections = collections(&docs);
        let outcome = self.inner.put_many_with_docs(records, docs).await;
        let change = Committed::Handles { keys: &keys, doc_collections: &doc_collections, meta: false };
        Hooks::tell(Some(observers), &change, outcome).await
    }

    async fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.meta_get(key).await
    }

    async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        let outcome = self.inner.meta_put(key, value).await;
        Hooks::tell(self.hooks.observers(), &Committed::Meta, outcome).await
    }

    async fn meta_scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.inner.meta_scan(prefix).await
    }

    async fn count(&self) -> Result<u64, StoreError> {
        self.inner.count().await
    }

    async fn home(&self, prefix_handle: &[u8], homed: bool) -> Result<(), StoreError> {
        let outcome = self.inner.home(prefix_handle, homed).await;
        Hooks::tell(self.hooks.observers(), &Committed::Meta, outcome).await
    }

    async fn homed_prefixes(&self) -> Result<Vec<Vec<u8>>, StoreError> {
        self.inner.homed_prefixes().await
    }
}

#[async_trait::async_trait]
impl DocumentStore for Observed {
    async fn doc_get(&self, collection: &str, id: &[u8]) -> Result<Option<Document>, StoreError> {
        self.inner.doc_get(collection, id).await
    }

    async fn doc_swap(
        &self,
        collection: &str,
        id: &[u8],
        expect: DocExpect,
        new: Option<Document>,
    ) -> Result<DocOutcome, StoreError> {
        let Some(observers) = self.hooks.observers() else {
            return self.inner.doc_swap(collection, id, expect, new).await;
        };
        let outcome = self.inner.doc_swap(collection, id, expect, new.clone()).await;
        let change = Committed::Document { collection, id, new: new.as_ref(), outcome: outcome.as_ref().map_err(drop) };
        for o in &observers {
            o.committed(&change).await?;
        }
        outcome
    }

    async fn doc_lookup(
        &self,
        collection: &str,
        index: &str,
        key: IndexMatch<'_>,
        start_after: Option<&IndexHit>,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        self.inner.doc_lookup(collection, index, key, start_after, limit).await
    }

    async fn doc_scan(
        &self,
        collection: &str,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Document)>, StoreError> {
        self.inner.doc_scan(collection, prefix, start_after, limit).await
    }
}

#[async_trait::async_trait]
impl TxnLogStore for Observed {
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

    /// Replicated handles get their documents like local writes, in the same commit.
    async fn apply_replicated_with_docs(
        &self,
        changes: Vec<ReplicatedChange>,
        progress: Vec<(String, Option<Vec<u8>>)>,
        mut docs: Vec<DocWrite>,
    ) -> Result<(), StoreError> {
        let (mut keys, mut meta) = (Vec::new(), false);
        let mut records = Vec::new();
        for c in &changes {
            match c.write() {
                ReplicatedWrite::Handle(k, r) => {
                    keys.push(k);
                    records.push(r);
                }
                ReplicatedWrite::Meta(..) => meta = true,
            }
        }
        self.hooks.add_docs(keys.iter().map(Vec::as_slice).zip(records.iter().map(Option::as_ref)), &mut docs);
        let Some(observers) = self.hooks.observers() else {
            return self.inner.apply_replicated_with_docs(changes, progress, docs).await;
        };
        let doc_collections = collections(&docs);
        let outcome = self.inner.apply_replicated_with_docs(changes, progress, docs).await;
        let change = Committed::Handles { keys: &keys, doc_collections: &doc_collections, meta };
        Hooks::tell(Some(observers), &change, outcome).await
    }

    async fn txn_log_reset(&self, id: u64) -> Result<(), StoreError> {
        self.inner.txn_log_reset(id).await
    }
}

#[async_trait::async_trait]
impl StoreAdmin for Observed {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn stats(&self) -> StoreStats {
        self.inner.stats()
    }

    fn writable(&self) -> Result<(), StoreError> {
        self.inner.writable()
    }

    fn warming(&self) -> Option<Warming> {
        self.inner.warming()
    }

    async fn checkpoint(&self) -> Result<(), StoreError> {
        self.inner.checkpoint().await
    }

    fn close(&self) {
        self.inner.close()
    }

    fn export(&self) -> Result<Box<dyn StoreExport>, StoreError> {
        self.inner.export()
    }

    fn hooks(&self) -> Option<&Hooks> {
        Some(&self.hooks)
    }
}
