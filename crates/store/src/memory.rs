//! In-memory backend: for `--ephemeral` runs and tests. Same semantics as the
//! durable one, nothing survives the process.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use parking_lot::{Mutex, RwLock};

use crate::change_dates::{date_local, date_pulled, decode_priority, DateWrite, LOCAL_PRIORITY_META_KEY};
use crate::documents::{doc_key, doc_key_prefix_len, index_key, LookupRange};
use crate::riding::Riding;
use crate::txn_log::{TxnLogState, TxnNotifier};
use crate::{
    scan_start, Backup, Capabilities, DocExpect, DocOutcome, DocWrite, Document, DocumentStore, Expect, HandleRecord,
    IndexHit, IndexMatch, RecordStore, ReplicatedChange, ReplicatedWrite, StatCounters, StoreAdmin, StoreError,
    StoreStats, SwapOutcome, TxnAction, TxnEntry, TxnLogBounds, TxnLogStore, TXN_LOG_READ_MAX,
};

/// A `BTreeMap` of handles and one of metadata, each behind a reader-writer lock.
/// Locks are taken in the order handles → meta → docs → log; a write appends its
/// log entry while it still holds the lock of what it changes, so log order is
/// commit order.
#[derive(Debug)]
pub struct MemoryStore {
    handles: RwLock<BTreeMap<Vec<u8>, HandleRecord>>,
    meta: RwLock<BTreeMap<String, Vec<u8>>>,
    /// Documents and their index entries under one lock: a write changes both at once.
    docs: RwLock<Docs>,
    log: Mutex<Log>,
    notifier: TxnNotifier,
    stats: StatCounters,
    closed: std::sync::atomic::AtomicBool,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore {
            handles: Default::default(),
            meta: Default::default(),
            docs: Default::default(),
            log: Default::default(),
            notifier: TxnNotifier::new(0),
            stats: Default::default(),
            closed: Default::default(),
        }
    }
}

/// The transaction log: entries by id and its counters.
#[derive(Debug, Default)]
struct Log {
    entries: BTreeMap<u64, TxnEntry>,
    state: TxnLogState,
}

impl Log {
    /// Log a local change; `dated`: its multi-primary date and the meta write
    /// recording it (from [`local_date`]), written with it.
    fn append(
        &mut self,
        meta: &mut BTreeMap<String, Vec<u8>>,
        action: Option<TxnAction>,
        handle: &[u8],
        dated: Option<(u64, DateWrite)>,
    ) {
        if let Some(action) = action {
            let e = match dated {
                Some((date, (k, v))) => {
                    meta.insert(k, v);
                    self.state.next_dated(action, handle, date)
                }
                None => self.state.next(action, handle),
            };
            self.entries.insert(e.id, e);
        }
    }
}

/// The multi-primary date of a local change while dating is on (read before
/// anything changes, so a malformed date fails the write cleanly).
fn local_date(
    meta: &BTreeMap<String, Vec<u8>>,
    action: Option<TxnAction>,
    handle: &[u8],
) -> Result<Option<(u64, DateWrite)>, StoreError> {
    let Some(action) = action else { return Ok(None) };
    let priority = meta.get(LOCAL_PRIORITY_META_KEY).map(|b| decode_priority(b)).transpose()?;
    date_local(priority, action, handle, |k| Ok(meta.get(k).cloned()))
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

    /// Tell subscribers the last id, after the locks of a commit are released.
    fn notify(&self) {
        let last = self.log.lock().state.last;
        self.notifier.publish(last);
    }

    fn check_open(&self) -> Result<(), StoreError> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl RecordStore for MemoryStore {
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
        if !crate::cas::holds(expect.precondition(), current, |want, c| want == c) {
            let current = current.cloned();
            drop(map);
            self.stats.committed(1, 0, false, 0);
            return Ok(SwapOutcome::Conflict { current });
        }
        let action = TxnAction::of_handle_write(current.is_some(), new.is_some());
        let mut meta = self.meta.write();
        let dated = local_date(&meta, action, key)?;
        // Both locks held together: no reader sees the handle without its documents.
        let mut docs = self.docs.write();
        let previous = match new {
            Some(r) => map.insert(key.to_vec(), r),
            None => map.remove(key),
        };
        for w in doc_writes {
            docs.write(&w.collection, &w.id, w.doc);
        }
        self.log.lock().append(&mut meta, action, key, dated);
        drop((docs, meta, map));
        self.stats.committed(1, 0, false, 0);
        self.notify();
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
        let mut meta = self.meta.write();
        let mut docs = self.docs.write();
        let mut log = self.log.lock();
        for (k, r) in records {
            let action = TxnAction::of_handle_write(map.contains_key(&k), true);
            let dated = local_date(&meta, action, &k)?;
            log.append(&mut meta, action, &k, dated);
            map.insert(k, r);
        }
        for w in doc_writes {
            docs.write(&w.collection, &w.id, w.doc);
        }
        drop((log, docs, meta, map));
        self.stats.committed(0, n, false, 0);
        self.notify();
        Ok(())
    }

    async fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.check_open()?;
        Ok(self.meta.read().get(key).cloned())
    }

    async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        self.check_open()?;
        let mut meta = self.meta.write();
        let homing = TxnAction::of_meta_write(key, meta.contains_key(key), value.is_some());
        let dated = match &homing {
            Some((action, handle)) => local_date(&meta, Some(*action), handle)?,
            None => None,
        };
        match value {
            Some(v) => meta.insert(key.to_owned(), v),
            None => meta.remove(key),
        };
        if let Some((action, handle)) = homing {
            self.log.lock().append(&mut meta, Some(action), &handle, dated);
        }
        drop(meta);
        self.stats.committed(1, 0, false, 0);
        self.notify();
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
}

#[async_trait::async_trait]
impl DocumentStore for MemoryStore {
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
        let expect = match expect {
            DocExpect::Present(d) => DocExpect::Present(d.normalized()),
            e => e,
        };
        let key = doc_key(collection, id);
        let mut docs = self.docs.write();
        let current = docs.docs.get(&key);
        if !crate::cas::holds(expect.precondition(), current, |want, c| want == c) {
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
}

#[async_trait::async_trait]
impl TxnLogStore for MemoryStore {
    async fn txn_log_read(&self, after: u64, limit: usize) -> Result<Vec<TxnEntry>, StoreError> {
        self.check_open()?;
        let log = self.log.lock();
        let from = after.saturating_add(1);
        Ok(log.entries.range(from..).take(limit.min(TXN_LOG_READ_MAX)).map(|(_, e)| e.clone()).collect())
    }

    async fn txn_log_bounds(&self) -> Result<TxnLogBounds, StoreError> {
        self.check_open()?;
        let log = self.log.lock();
        let first_date_ms = log.entries.values().next().map(|e| e.date_ms);
        Ok(TxnLogBounds { floor: log.state.floor, last: log.state.last, first_date_ms })
    }

    async fn txn_log_prune(&self, before_ms: u64) -> Result<u64, StoreError> {
        self.check_open()?;
        let mut log = self.log.lock();
        let mut removed = 0;
        while let Some(e) = log.entries.first_entry() {
            if e.get().date_ms >= before_ms {
                break;
            }
            let (id, _) = e.remove_entry();
            log.state.floor = log.state.floor.max(id);
            removed += 1;
        }
        Ok(removed)
    }

    fn txn_log_subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.notifier.subscribe()
    }

    async fn apply_replicated_with_docs(
        &self,
        changes: Vec<ReplicatedChange>,
        progress: Vec<(String, Option<Vec<u8>>)>,
        doc_writes: Vec<DocWrite>,
    ) -> Result<(), StoreError> {
        self.check_open()?;
        let writes: Vec<(ReplicatedWrite, &ReplicatedChange)> = changes.iter().map(|c| (c.write(), c)).collect();
        for (w, _) in &writes {
            if let ReplicatedWrite::Handle(_, Some(r)) = w {
                r.validate()?;
            }
        }
        let doc_writes = validated(doc_writes)?;
        let mut map = self.handles.write();
        let mut meta = self.meta.write();
        let mut docs = self.docs.write();
        let mut log = self.log.lock();
        let mut riding = Riding::new(doc_writes);
        for (w, change) in writes {
            let entry = &change.entry;
            let handle = match &w {
                ReplicatedWrite::Handle(k, _) => Some(riding.take(k)),
                ReplicatedWrite::Meta(..) => None,
            };
            if let Some(priority) = change.priority {
                // Another primary's change: applied only if newer, never logged
                // (and the documents derived from it are dropped with it).
                let Some((k, v)) = date_pulled(entry, priority, |k| Ok(meta.get(k).cloned()))? else { continue };
                meta.insert(k, v);
            }
            for d in handle.into_iter().flatten() {
                docs.write(&d.collection, &d.id, d.doc);
            }
            match w {
                ReplicatedWrite::Handle(k, Some(r)) => drop(map.insert(k, r)),
                ReplicatedWrite::Handle(k, None) => drop(map.remove(&k)),
                ReplicatedWrite::Meta(k, Some(v)) => drop(meta.insert(k, v)),
                ReplicatedWrite::Meta(k, None) => drop(meta.remove(&k)),
            }
            if change.priority.is_none() {
                if let Some(e) = log.state.replicated(entry) {
                    log.entries.insert(e.id, e);
                }
            }
        }
        for w in riding.kept() {
            docs.write(&w.collection, &w.id, w.doc);
        }
        for (k, v) in progress {
            match v {
                Some(v) => meta.insert(k, v),
                None => meta.remove(&k),
            };
        }
        drop((log, docs, meta, map));
        self.stats.committed(1, 0, false, 0);
        self.notify();
        Ok(())
    }

    async fn txn_log_reset(&self, id: u64) -> Result<(), StoreError> {
        self.check_open()?;
        let mut log = self.log.lock();
        log.state.reset(id);
        log.entries.clear();
        drop(log);
        self.notify();
        Ok(())
    }
}

#[async_trait::async_trait]
impl StoreAdmin for MemoryStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            shared: false,
            durable: false,
            documents: true,
            txn_log: true,
            backup: Backup::Refused(
                "this server keeps its store in memory (--ephemeral): there is nothing durable to back up; \
                 run it on the embedded store (the default) to keep data",
            ),
            read_only: false,
            remote: false,
        }
    }

    fn stats(&self) -> StoreStats {
        self.stats.snapshot()
    }

    fn writable(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::Release);
    }

    async fn checkpoint(&self) -> Result<(), StoreError> {
        // Nothing is durable here: every acknowledged write is already in the maps.
        self.check_open()
    }
}
