//! In-memory backend: for `--ephemeral` runs and tests. Same semantics as the
//! durable one, nothing survives the process.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use parking_lot::RwLock;

use crate::documents::{doc_key, doc_key_prefix_len, index_key, LookupRange};
use crate::{
    scan_start, DocExpect, DocOutcome, DocWrite, Document, Expect, HandleRecord, IndexHit, IndexMatch, StatCounters,
    Store, StoreError, StoreStats, SwapOutcome,
};

/// A `BTreeMap` of handles and one of metadata, each behind a reader-writer lock.
#[derive(Debug, Default)]
pub struct MemoryStore {
    handles: RwLock<BTreeMap<Vec<u8>, HandleRecord>>,
    meta: RwLock<BTreeMap<String, Vec<u8>>>,
    /// Documents and their index entries under one lock: a write changes both at once.
    docs: RwLock<Docs>,
    stats: StatCounters,
    closed: std::sync::atomic::AtomicBool,
}

/// Keys as built by `documents` (same order as the embedded backend).
#[derive(Debug, Default)]
struct Docs {
    docs: BTreeMap<Vec<u8>, Document>,
    index: BTreeSet<Vec<u8>>,
}

impl Docs {
    /// Replace (or delete) one document and its index entries; returns the old one.
    fn write(&mut self, collection: &str, id: &[u8], new: Option<Document>) -> Option<Document> {
        let key = doc_key(collection, id);
        if let Some(d) = &new {
            for e in &d.index {
                self.index.insert(index_key(collection, e, id));
            }
        }
        let previous = match new {
            Some(d) => self.docs.insert(key.clone(), d),
            None => self.docs.remove(&key),
        };
        // Entries of the replaced state that the new one does not carry.
        if let Some(p) = &previous {
            let keep = self.docs.get(&key).map(|d| d.index.clone()).unwrap_or_default();
            for e in p.index.iter().filter(|e| !keep.contains(e)) {
                self.index.remove(&index_key(collection, e, id));
            }
        }
        previous
    }
}

/// Normalize and check documents before any lock is taken.
fn validated(writes: Vec<DocWrite>) -> Result<Vec<DocWrite>, StoreError> {
    writes
        .into_iter()
        .map(|w| {
            let doc = w.doc.map(Document::normalized);
            if let Some(d) = &doc {
                d.validate()?;
            }
            Ok(DocWrite { doc, ..w })
        })
        .collect()
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn check_open(&self) -> Result<(), StoreError> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Store for MemoryStore {
    async fn get(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        self.check_open()?;
        Ok(self.handles.read().get(key).cloned())
    }

    async fn swap_with_docs(
        &self,
        key: &[u8],
        expect: Expect,
        new: Option<HandleRecord>,
        doc_writes: Vec<DocWrite>,
    ) -> Result<SwapOutcome, StoreError> {
        self.check_open()?;
        if let Some(r) = &new {
            r.validate()?;
        }
        let doc_writes = validated(doc_writes)?;
        let mut map = self.handles.write();
        let current = map.get(key);
        let ok = match &expect {
            Expect::Any => true,
            Expect::Absent => current.is_none(),
            Expect::Present(r) => current == Some(r),
        };
        if !ok {
            let current = current.cloned();
            drop(map);
            self.stats.committed(1, 0, false, 0);
            return Ok(SwapOutcome::Conflict { current });
        }
        // Both locks held together: no reader sees the handle without its documents.
        let mut docs = self.docs.write();
        let previous = match new {
            Some(r) => map.insert(key.to_vec(), r),
            None => map.remove(key),
        };
        for w in doc_writes {
            docs.write(&w.collection, &w.id, w.doc);
        }
        drop((docs, map));
        self.stats.committed(1, 0, false, 0);
        Ok(SwapOutcome::Done { previous })
    }

    async fn scan_keys(
        &self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        self.check_open()?;
        let map = self.handles.read();
        Ok(map
            .range::<[u8], _>((scan_start(prefix, start_after), Bound::Unbounded))
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(prefix))
            .take(limit)
            .cloned()
            .collect())
    }

    async fn put_many_with_docs(
        &self,
        records: Vec<(Vec<u8>, HandleRecord)>,
        doc_writes: Vec<DocWrite>,
    ) -> Result<(), StoreError> {
        self.check_open()?;
        for (_, r) in &records {
            r.validate()?;
        }
        let doc_writes = validated(doc_writes)?;
        let n = records.len() as u64;
        let mut map = self.handles.write();
        let mut docs = self.docs.write();
        for (k, r) in records {
            map.insert(k, r);
        }
        for w in doc_writes {
            docs.write(&w.collection, &w.id, w.doc);
        }
        drop((docs, map));
        self.stats.committed(0, n, false, 0);
        Ok(())
    }

    async fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.check_open()?;
        Ok(self.meta.read().get(key).cloned())
    }

    async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        self.check_open()?;
        let mut meta = self.meta.write();
        match value {
            Some(v) => meta.insert(key.to_owned(), v),
            None => meta.remove(key),
        };
        drop(meta);
        self.stats.committed(1, 0, false, 0);
        Ok(())
    }

    async fn meta_scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.check_open()?;
        let meta = self.meta.read();
        Ok(meta
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    async fn count(&self) -> Result<u64, StoreError> {
        self.check_open()?;
        Ok(self.handles.read().len() as u64)
    }

    fn stats(&self) -> StoreStats {
        self.stats.snapshot()
    }

    fn writable(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn doc_get(&self, collection: &str, id: &[u8]) -> Result<Option<Document>, StoreError> {
        self.check_open()?;
        Ok(self.docs.read().docs.get(&doc_key(collection, id)).cloned())
    }

    async fn doc_swap(
        &self,
        collection: &str,
        id: &[u8],
        expect: DocExpect,
        new: Option<Document>,
    ) -> Result<DocOutcome, StoreError> {
        self.check_open()?;
        let new = new.map(Document::normalized);
        if let Some(d) = &new {
            d.validate()?;
        }
        let key = doc_key(collection, id);
        let mut docs = self.docs.write();
        let current = docs.docs.get(&key);
        let ok = match expect {
            DocExpect::Any => true,
            DocExpect::Absent => current.is_none(),
            DocExpect::Present(d) => current == Some(&d.normalized()),
        };
        if !ok {
            let current = current.cloned();
            drop(docs);
            self.stats.committed(1, 0, false, 0);
            return Ok(DocOutcome::Conflict { current });
        }
        let previous = docs.write(collection, id, new);
        drop(docs);
        self.stats.committed(1, 0, false, 0);
        Ok(DocOutcome::Done { previous })
    }

    async fn doc_lookup(
        &self,
        collection: &str,
        index: &str,
        key: IndexMatch<'_>,
        start_after: Option<&IndexHit>,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        self.check_open()?;
        let range = LookupRange::new(collection, index, key, start_after);
        let docs = self.docs.read();
        docs.index
            .range::<[u8], _>((range.start(), Bound::Unbounded))
            .take_while(|k| k.starts_with(&range.prefix))
            .take(limit)
            .map(|k| range.parse(k))
            .collect()
    }

    async fn doc_scan(
        &self,
        collection: &str,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Document)>, StoreError> {
        self.check_open()?;
        let head = doc_key_prefix_len(collection);
        let lower = doc_key(collection, prefix);
        let after = start_after.map(|a| doc_key(collection, a));
        let docs = self.docs.read();
        Ok(docs
            .docs
            .range::<[u8], _>((scan_start(&lower, after.as_deref()), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(&lower))
            .take(limit)
            .map(|(k, d)| (k[head..].to_vec(), d.clone()))
            .collect())
    }

    fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::Release);
    }
}
