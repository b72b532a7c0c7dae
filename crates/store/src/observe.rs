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
    DocExpect, DocOutcome, DocWrite, Document, Expect, HandleRecord, ReplicatedChange, ReplicatedWrite, Store,
    StoreError, SwapOutcome,
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

/// A store whose writes go through its [`Hooks`]: reads pass to the inner
/// store, writes to [`Hooked`], which calls contributors and observers.
pub struct Observed {
    inner: Arc<dyn Store>,
    hooked: Hooked,
}

impl Observed {
    /// A layer with hooks of its own over `inner` (each node of a test
    /// sharing one store has its own).
    pub fn new(inner: Arc<dyn Store>) -> Observed {
        Observed { inner: inner.clone(), hooked: Hooked { inner, hooks: Hooks::default() } }
    }

    /// `store` itself when it already has hooks, else `store` under a layer that has.
    pub fn ensure(store: Arc<dyn Store>) -> Arc<dyn Store> {
        if store.hooks().is_some() {
            return store;
        }
        Arc::new(Observed::new(store))
    }
}

crate::forward_store!(RecordStore for Observed => inner, writes hooked);
crate::forward_store!(DocumentStore for Observed => inner, writes hooked);
crate::forward_store!(TxnLogStore for Observed => inner, writes hooked);
crate::forward_store!(StoreAdmin for Observed => inner, writes hooked);

/// The writes of an [`Observed`] store, with its hooks.
pub struct Hooked {
    inner: Arc<dyn Store>,
    hooks: Hooks,
}

impl Hooked {
    fn hooks(&self) -> Option<&Hooks> {
        Some(&self.hooks)
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

    async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        let outcome = self.inner.meta_put(key, value).await;
        Hooks::tell(self.hooks.observers(), &Committed::Meta, outcome).await
    }

    async fn home(&self, prefix_handle: &[u8], homed: bool) -> Result<(), StoreError> {
        let outcome = self.inner.home(prefix_handle, homed).await;
        Hooks::tell(self.hooks.observers(), &Committed::Meta, outcome).await
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
}
