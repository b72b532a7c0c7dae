//! The reverse-lookup index behind `/hrls`: for every handle, a document in
//! collection [`COLLECTION`] (id = storage key) whose index entries are its
//! publicly readable values — index name = value type (upper case), key = the
//! data (ASCII lower case, searches are case-insensitive).
//!
//! [`IndexedStore`] wraps the store so that *every* handle write keeps the
//! index: the store has no multi-key transactions, so under a per-handle lock
//! the entries of the new state are added before the handle is written and
//! entries of values that are gone are dropped after. The index is therefore
//! always a superset of the truth (a crash in between leaves extra entries,
//! never missing ones), and searches check each hit against the record.

use async_trait::async_trait;
use handled_proto::value::HandleValue;
use handled_store::{
    DocExpect, DocOutcome, Document, Expect, HandleRecord, IndexEntry, IndexHit, IndexMatch, Store, StoreError, StoreStats,
    SwapOutcome,
};
use std::collections::BTreeSet;
use std::sync::Arc;

pub const COLLECTION: &str = "hrls";
/// Longer values are not searchable (keeps index keys small).
pub const MAX_INDEXED_LEN: usize = 2048;
const LOCK_STRIPES: usize = 256;
/// Records indexed concurrently by a bulk load.
const IMPORT_PARALLEL: usize = 256;

/// Is `v` searchable: publicly readable, not too long?
pub fn indexed(v: &HandleValue) -> bool {
    v.permissions.public_read() && v.data.len() <= MAX_INDEXED_LEN && !v.value_type.is_empty()
}

pub fn type_name(t: &[u8]) -> String {
    String::from_utf8_lossy(t).to_ascii_uppercase()
}

/// The index entries of a handle state.
pub fn entries(record: Option<&HandleRecord>) -> BTreeSet<IndexEntry> {
    record
        .map(|r| r.values.iter().filter(|v| indexed(v)).map(|v| IndexEntry::new(type_name(&v.value_type), v.data.to_ascii_lowercase())).collect())
        .unwrap_or_default()
}

pub struct IndexedStore {
    inner: Arc<dyn Store>,
    locks: Vec<tokio::sync::Mutex<()>>,
}

impl IndexedStore {
    pub fn wrap(inner: Arc<dyn Store>) -> Arc<dyn Store> {
        Arc::new(IndexedStore { inner, locks: (0..LOCK_STRIPES).map(|_| tokio::sync::Mutex::new(())).collect() })
    }

    fn lock(&self, key: &[u8]) -> &tokio::sync::Mutex<()> {
        let h = key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
        &self.locks[(h % LOCK_STRIPES as u64) as usize]
    }

    async fn current(&self, key: &[u8]) -> Result<BTreeSet<IndexEntry>, StoreError> {
        Ok(self.inner.doc_get(COLLECTION, key).await?.map(|d| d.index.into_iter().collect()).unwrap_or_default())
    }

    /// Set the handle's entries (compare-and-set, so concurrent bulk loads of
    /// the same key merge rather than lose entries).
    async fn put_entries(&self, key: &[u8], merge: impl Fn(&BTreeSet<IndexEntry>) -> BTreeSet<IndexEntry>) -> Result<(), StoreError> {
        loop {
            let old = self.inner.doc_get(COLLECTION, key).await?;
            let have: BTreeSet<IndexEntry> = old.as_ref().map(|d| d.index.iter().cloned().collect()).unwrap_or_default();
            let want = merge(&have);
            if want == have && (old.is_some() || want.is_empty()) {
                return Ok(());
            }
            let expect = old.map_or(DocExpect::Absent, DocExpect::Present);
            let new = (!want.is_empty()).then(|| Document::new(Vec::new(), want.into_iter().collect()));
            if self.inner.doc_swap(COLLECTION, key, expect, new).await?.is_done() {
                return Ok(());
            }
        }
    }
}

#[async_trait]
impl Store for IndexedStore {
    async fn get(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        self.inner.get(key).await
    }

    async fn swap(&self, key: &[u8], expect: Expect, new: Option<HandleRecord>) -> Result<SwapOutcome, StoreError> {
        let _guard = self.lock(key).lock().await;
        let before = self.current(key).await?;
        let added = entries(new.as_ref());
        let superset: BTreeSet<IndexEntry> = before.union(&added).cloned().collect();
        if superset != before {
            self.put_entries(key, |have| have.union(&added).cloned().collect()).await?;
        }
        let outcome = self.inner.swap(key, expect, new.clone()).await?;
        let exact = match &outcome {
            SwapOutcome::Done { .. } => entries(new.as_ref()),
            SwapOutcome::Conflict { current } => entries(current.as_ref()),
        };
        if exact != superset {
            // A failure here only leaves extra entries, which searches filter out.
            if let Err(e) = self.put_entries(key, |_| exact.clone()).await {
                tracing::warn!("reverse index: dropping stale entries failed: {e}");
            }
        }
        Ok(outcome)
    }

    async fn scan_keys(&self, prefix: &[u8], start_after: Option<&[u8]>, limit: usize) -> Result<Vec<Vec<u8>>, StoreError> {
        self.inner.scan_keys(prefix, start_after, limit).await
    }

    async fn put_many(&self, records: Vec<(Vec<u8>, HandleRecord)>) -> Result<(), StoreError> {
        // Entries first (added to whatever is there), then the records.
        for chunk in records.chunks(IMPORT_PARALLEL) {
            let mut tasks = Vec::with_capacity(chunk.len());
            for (key, record) in chunk {
                let add = entries(Some(record));
                if !add.is_empty() {
                    tasks.push(async move { self.put_entries(key, |have| have.union(&add).cloned().collect()).await });
                }
            }
            for r in futures_join(tasks).await {
                r?;
            }
        }
        self.inner.put_many(records).await
    }

    async fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.meta_get(key).await
    }

    async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        self.inner.meta_put(key, value).await
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

    fn close(&self) {
        self.inner.close();
    }

    async fn doc_get(&self, collection: &str, id: &[u8]) -> Result<Option<Document>, StoreError> {
        self.inner.doc_get(collection, id).await
    }

    async fn doc_swap(&self, c: &str, id: &[u8], expect: DocExpect, new: Option<Document>) -> Result<DocOutcome, StoreError> {
        self.inner.doc_swap(c, id, expect, new).await
    }

    async fn doc_lookup(&self, c: &str, index: &str, key: IndexMatch<'_>, after: Option<&IndexHit>, limit: usize) -> Result<Vec<IndexHit>, StoreError> {
        self.inner.doc_lookup(c, index, key, after, limit).await
    }

    async fn doc_scan(&self, c: &str, prefix: &[u8], after: Option<&[u8]>, limit: usize) -> Result<Vec<(Vec<u8>, Document)>, StoreError> {
        self.inner.doc_scan(c, prefix, after, limit).await
    }
}

/// Run futures concurrently on this task (they only wait on the store).
async fn futures_join<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut pinned: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = (0..pinned.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in pinned.iter_mut().enumerate() {
            if out[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => out[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending { std::task::Poll::Pending } else { std::task::Poll::Ready(()) }
    })
    .await;
    out.into_iter().map(|o| o.expect("every future finished")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_proto::value::ValuePermissions;
    use handled_store::MemoryStore;

    fn record(values: Vec<HandleValue>) -> HandleRecord {
        HandleRecord { values }
    }

    async fn hits(s: &dyn Store, t: &str, key: &[u8]) -> Vec<Vec<u8>> {
        s.doc_lookup(COLLECTION, t, IndexMatch::Exact(key), None, 100).await.unwrap().into_iter().map(|h| h.id).collect()
    }

    #[tokio::test]
    async fn every_write_keeps_the_index() {
        let s = IndexedStore::wrap(Arc::new(MemoryStore::new()));
        let mut secret = HandleValue::new(300, "HS_SECKEY", "pw");
        secret.permissions = ValuePermissions(0x0c);
        let r1 = record(vec![HandleValue::new(1, "URL", "https://A.example"), secret]);
        assert!(s.swap(b"T/1", Expect::Absent, Some(r1.clone())).await.unwrap().is_done());
        assert_eq!(hits(&*s, "URL", b"https://a.example").await, vec![b"T/1".to_vec()]);
        assert!(hits(&*s, "HS_SECKEY", b"pw").await.is_empty(), "non-public values are not indexed");
        let r2 = record(vec![HandleValue::new(1, "url", "https://b.example")]);
        s.swap(b"T/1", Expect::Present(r1), Some(r2.clone())).await.unwrap();
        assert!(hits(&*s, "URL", b"https://a.example").await.is_empty());
        assert_eq!(hits(&*s, "URL", b"https://b.example").await, vec![b"T/1".to_vec()]);
        // A failed compare-and-set leaves the entries of what is stored.
        let outcome = s.swap(b"T/1", Expect::Absent, Some(record(vec![HandleValue::new(1, "URL", "c")]))).await.unwrap();
        assert!(!outcome.is_done());
        assert!(hits(&*s, "URL", b"c").await.is_empty());
        s.swap(b"T/1", Expect::Any, None).await.unwrap();
        assert!(hits(&*s, "URL", b"https://b.example").await.is_empty());
        assert!(s.doc_get(COLLECTION, b"T/1").await.unwrap().is_none());
        s.put_many(vec![(b"T/2".to_vec(), record(vec![HandleValue::new(2, "EMAIL", "x@y")]))]).await.unwrap();
        assert_eq!(hits(&*s, "EMAIL", b"x@y").await, vec![b"T/2".to_vec()]);
    }
}
