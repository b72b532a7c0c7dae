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

/// A write about to run, as told to [`CommitObserver::writing`]: what it may
/// change, before its outcome is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writing<'a> {
    /// Handle records under `keys`; `meta`: server metadata with them.
    Handles { keys: &'a [Vec<u8>], meta: bool },
    /// Server metadata, homing among it.
    Meta,
    /// One document.
    Document { collection: &'a str, id: &'a [u8] },
}

impl Committed<'_> {
    /// The same write as it was announced before it ran.
    pub fn writing(&self) -> Writing<'_> {
        match *self {
            Committed::Handles { keys, meta, .. } => Writing::Handles { keys, meta },
            Committed::Meta => Writing::Meta,
            Committed::Document { collection, id, .. } => Writing::Document { collection, id },
        }
    }
}

/// Told of every write through the store: before it runs, and after it ran
/// (whatever its outcome) and before it is answered.
#[async_trait::async_trait]
pub trait CommitObserver: Send + Sync + 'static {
    /// The write is about to run (the record cache stops answering and filling
    /// what it may change, here and on its peers, until `committed`). An error
    /// means the observer could not do its part: the write does not run, and
    /// the observers told before are told it ended, through `committed`.
    async fn writing(&self, _write: &Writing<'_>) -> Result<(), StoreError> {
        Ok(())
    }

    /// An error means the observer could not do its part (a peer was not
    /// told): the write is then answered with it, not as done.
    async fn committed(&self, change: &Committed<'_>) -> Result<(), StoreError>;
}

/// Adds documents to handle writes, in the same commit.
pub trait DocContributor: Send + Sync + 'static {
    /// Push to `out` the documents to write along with handle `key` becoming
    /// `record` (`None`: deleted).
    fn contribute(&self, key: &[u8], record: Option<&HandleRecord>, out: &mut Vec<DocWrite>);

    /// True when `contribute` depends on the key and record alone, and its
    /// documents are only ever found through their index (never read back by
    /// id): a store may then keep their index entries only, and rebuild the
    /// document a write replaces from the record it replaces ([`DerivedFrom`]).
    /// What `contribute` indexes must then not change while a store holds
    /// entries made by an earlier version of it. A derived document exists
    /// only while its handle does: one given for a deleted handle is dropped.
    fn derived(&self) -> bool {
        false
    }
}

/// Where a derived document came from: the handle it rides with and the
/// contributor that made it, so a store can make the replaced one again.
#[derive(Clone)]
pub struct DerivedFrom {
    pub handle: Vec<u8>,
    contributor: Arc<dyn DocContributor>,
}

impl DerivedFrom {
    /// The document (`collection`, `id`) that handle [`Self::handle`] had as
    /// `record` (`None`: absent, so none, or no such document).
    pub fn document(&self, collection: &str, id: &[u8], record: Option<&HandleRecord>) -> Option<Document> {
        let record = record?;
        let mut out = Vec::new();
        self.contributor.contribute(&self.handle, Some(record), &mut out);
        out.into_iter().find(|w| w.collection == collection && w.id == id).and_then(|w| w.doc)
    }
}

impl std::fmt::Debug for DerivedFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DerivedFrom").field("handle", &String::from_utf8_lossy(&self.handle)).finish_non_exhaustive()
    }
}

impl PartialEq for DerivedFrom {
    fn eq(&self, other: &Self) -> bool {
        self.handle == other.handle && Arc::ptr_eq(&self.contributor, &other.contributor)
    }
}

impl Eq for DerivedFrom {}

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
                let first = out.len();
                c.contribute(key, record, out);
                if c.derived() {
                    for w in &mut out[first..] {
                        w.derived = Some(DerivedFrom { handle: key.to_vec(), contributor: c.clone() });
                        if record.is_none() {
                            w.doc = None;
                        }
                    }
                }
            }
        }
    }

    /// The observers now registered (`None`: no one to tell, nothing to prepare).
    fn observers(&self) -> Option<Vec<Arc<dyn CommitObserver>>> {
        let observers = self.observers.read();
        (!observers.is_empty()).then(|| observers.clone())
    }

    /// Tell `observers` that the write `change` describes is about to run. If
    /// one refuses, those told before it are told the write ended (as one that
    /// may have run), and its error is returned: the write must not run.
    async fn announce(observers: &[Arc<dyn CommitObserver>], change: &Committed<'_>) -> Result<(), StoreError> {
        let writing = change.writing();
        for (i, o) in observers.iter().enumerate() {
            if let Err(e) = o.writing(&writing).await {
                for told in &observers[..i] {
                    let _ = told.committed(change).await;
                }
                return Err(e);
            }
        }
        Ok(())
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

    fn beneath_hooks(&self) -> Option<Arc<dyn Store>> {
        Some(self.inner.clone())
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
        let change = Committed::Handles { keys: &keys, doc_collections: &doc_collections, meta: false };
        Hooks::announce(&observers, &change).await?;
        let outcome = self.inner.swap_with_docs(key, expect, new, docs).await;
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
        let change = Committed::Handles { keys: &keys, doc_collections: &doc_collections, meta: false };
        Hooks::announce(&observers, &change).await?;
        let outcome = self.inner.put_many_with_docs(records, docs).await;
        Hooks::tell(Some(observers), &change, outcome).await
    }

    async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        let observers = self.hooks.observers();
        Hooks::announce(observers.as_deref().unwrap_or_default(), &Committed::Meta).await?;
        let outcome = self.inner.meta_put(key, value).await;
        Hooks::tell(observers, &Committed::Meta, outcome).await
    }

    async fn home(&self, prefix_handle: &[u8], homed: bool) -> Result<(), StoreError> {
        let observers = self.hooks.observers();
        Hooks::announce(observers.as_deref().unwrap_or_default(), &Committed::Meta).await?;
        let outcome = self.inner.home(prefix_handle, homed).await;
        Hooks::tell(observers, &Committed::Meta, outcome).await
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
        // Before it runs its outcome is unknown: what a refusal tells the others.
        let unknown = Committed::Document { collection, id, new: new.as_ref(), outcome: Err(()) };
        Hooks::announce(&observers, &unknown).await?;
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
        let change = Committed::Handles { keys: &keys, doc_collections: &doc_collections, meta };
        Hooks::announce(&observers, &change).await?;
        let outcome = self.inner.apply_replicated_with_docs(changes, progress, docs).await;
        Hooks::tell(Some(observers), &change, outcome).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStore;
    use handled_proto::value::HandleValue;
    use parking_lot::Mutex;

    /// Writes, for each handle, a document of its value count.
    struct Counts;

    impl DocContributor for Counts {
        fn contribute(&self, key: &[u8], record: Option<&HandleRecord>, out: &mut Vec<DocWrite>) {
            let doc = record.map(|r| Document::new(r.values.len().to_string().into_bytes(), Vec::new()));
            out.push(DocWrite::new("counts", key, doc));
        }
    }

    /// Records what it is told; fails when asked to.
    #[derive(Default)]
    struct Told {
        seen: Mutex<Vec<String>>,
        fail: std::sync::atomic::AtomicBool,
    }

    #[async_trait::async_trait]
    impl CommitObserver for Told {
        async fn committed(&self, change: &Committed<'_>) -> Result<(), StoreError> {
            self.seen.lock().push(match change {
                Committed::Handles { keys, doc_collections, meta } => {
                    format!("handles {keys:?} {doc_collections:?} {meta}")
                }
                Committed::Meta => "meta".into(),
                Committed::Document { collection, outcome, .. } => format!("doc {collection} {}", outcome.is_ok()),
            });
            if self.fail.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(StoreError::Backend("peer not told".into()));
            }
            Ok(())
        }
    }

    fn record(n: usize) -> HandleRecord {
        HandleRecord::new((1..=n as i32).map(|i| HandleValue::new(i, "URL", "x")).collect())
    }

    /// Refuses every write before it runs.
    struct Refuses;

    #[async_trait::async_trait]
    impl CommitObserver for Refuses {
        async fn writing(&self, _: &Writing<'_>) -> Result<(), StoreError> {
            Err(StoreError::Backend("peer not marked".into()))
        }
        async fn committed(&self, _: &Committed<'_>) -> Result<(), StoreError> {
            panic!("a refused write is not reported to the observer that refused it")
        }
    }

    #[tokio::test]
    async fn a_write_an_observer_refuses_does_not_run_and_the_others_hear_it_ended() {
        let store = Observed::ensure(Arc::new(MemoryStore::new()));
        let hooks = store.hooks().unwrap();
        let told = Arc::new(Told::default());
        hooks.observe(told.clone());
        hooks.observe(Arc::new(Refuses));
        assert!(store.swap(b"T/1", Expect::Absent, Some(record(1))).await.is_err());
        assert!(store
            .doc_swap("reg", b"x", DocExpect::Absent, Some(Document::new(b"1".to_vec(), Vec::new())))
            .await
            .is_err());
        assert!(store.home(b"0.NA/T", true).await.is_err());
        let inner = store.beneath_hooks().unwrap();
        assert_eq!(inner.get(b"T/1").await.unwrap(), None, "the refused write did not run");
        assert_eq!(inner.doc_get("reg", b"x").await.unwrap(), None);
        assert_eq!(*told.seen.lock(), [r#"handles [[84, 47, 49]] [] false"#, "doc reg false", "meta"]);
    }

    #[tokio::test]
    async fn contributors_ride_along_and_observers_are_told() {
        let store = Observed::ensure(Arc::new(MemoryStore::new()));
        assert!(Arc::ptr_eq(&store, &Observed::ensure(store.clone())), "one layer, not two");
        let hooks = store.hooks().unwrap();
        hooks.contribute(Arc::new(Counts));
        let told = Arc::new(Told::default());
        hooks.observe(told.clone());
        store.swap(b"T/1", Expect::Absent, Some(record(2))).await.unwrap();
        assert_eq!(store.doc_get("counts", b"T/1").await.unwrap().unwrap().body, b"2");
        store.put_many(vec![(b"T/2".to_vec(), record(3))]).await.unwrap();
        assert_eq!(store.doc_get("counts", b"T/2").await.unwrap().unwrap().body, b"3");
        store.home(b"0.NA/T", true).await.unwrap();
        store.doc_swap("reg", b"x", DocExpect::Absent, Some(Document::new(b"1".to_vec(), Vec::new()))).await.unwrap();
        assert_eq!(
            *told.seen.lock(),
            [
                r#"handles [[84, 47, 49]] ["counts"] false"#,
                r#"handles [[84, 47, 50]] ["counts"] false"#,
                "meta",
                "doc reg true",
            ]
        );
        // An observer that cannot do its part fails the write's answer (the write itself is done).
        told.fail.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(store.swap(b"T/1", Expect::Any, None).await.is_err());
        assert_eq!(store.get(b"T/1").await.unwrap(), None);
        assert_eq!(store.doc_get("counts", b"T/1").await.unwrap(), None, "the contributor's delete rode along");
    }
}
