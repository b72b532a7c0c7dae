//! State that every node of a site must share when several stateless nodes sit
//! on one store (Cassandra) behind a balancer with no affinity: a client may send
//! the answer to a challenge, or the next request of a session, to another node.
//!
//! [`SharedTable`] keeps such short-lived entries (pending challenges, sessions)
//! as documents of the store, each with its deadline in the body and in a `due`
//! index entry, so expired ones are found without a scan and swept by whichever
//! node comes by. Only used with a shared store: a single node keeps them in
//! memory.

pub mod channel;
pub mod channel_slots;
pub mod coherence;
pub mod lease;

use handled_store::clock::now_ms;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use handled_store::{DocExpect, DocOutcome, Document, DocumentStore, IndexEntry, IndexHit, IndexMatch, StoreError};

const DUE_INDEX: &str = "due";
/// Sweep expired entries on every this many creations…
const SWEEP_EVERY: u32 = 32;
/// …at most this many at a time (bounded work per request).
const SWEEP_BATCH: usize = 64;

/// Short-lived entries keyed by id bytes, shared by all nodes through the store.
pub struct SharedTable {
    store: Arc<dyn DocumentStore>,
    collection: &'static str,
    creations: AtomicU32,
}

/// A stored entry: deadline (ms since the epoch, big-endian) ‖ payload.
fn document(id: &[u8], payload: &[u8], ttl: Duration) -> Document {
    let due = now_ms().saturating_add(ttl.as_millis() as u64).to_be_bytes();
    let mut key = due.to_vec();
    key.extend_from_slice(id);
    Document::new([due.as_slice(), payload].concat(), vec![IndexEntry::new(DUE_INDEX, key)])
}

/// The payload of a document still in force.
fn live(doc: &Document) -> Option<&[u8]> {
    let (due, payload) = doc.body.split_first_chunk::<8>()?;
    (u64::from_be_bytes(*due) > now_ms()).then_some(payload)
}

impl SharedTable {
    pub fn new(store: Arc<dyn DocumentStore>, collection: &'static str) -> Self {
        SharedTable { store, collection, creations: AtomicU32::new(0) }
    }

    /// Create entry `id`; `Ok(false)` when the id is taken (by a live entry).
    pub async fn create(&self, id: &[u8], payload: &[u8], ttl: Duration) -> Result<bool, StoreError> {
        if self.creations.fetch_add(1, Ordering::Relaxed).is_multiple_of(SWEEP_EVERY) {
            self.sweep().await?;
        }
        let new = document(id, payload, ttl);
        let expect = match self.store.doc_get(self.collection, id).await? {
            Some(old) if live(&old).is_some() => return Ok(false),
            Some(old) => DocExpect::Present(old),
            None => DocExpect::Absent,
        };
        Ok(self.store.doc_swap(self.collection, id, expect, Some(new)).await?.is_done())
    }

    /// Replace entry `id` (its deadline starts again).
    pub async fn put(&self, id: &[u8], payload: &[u8], ttl: Duration) -> Result<(), StoreError> {
        if self.creations.fetch_add(1, Ordering::Relaxed).is_multiple_of(SWEEP_EVERY) {
            self.sweep().await?;
        }
        let doc = document(id, payload, ttl);
        self.store.doc_swap(self.collection, id, DocExpect::Any, Some(doc)).await.map(|_| ())
    }

    /// The payload of entry `id`, if it is still in force.
    pub async fn get(&self, id: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.get_with_deadline(id).await?.map(|(p, _)| p))
    }

    /// The payload of entry `id` and the time it has left, if it is still in force.
    pub async fn get_with_deadline(&self, id: &[u8]) -> Result<Option<(Vec<u8>, Duration)>, StoreError> {
        let Some(doc) = self.store.doc_get(self.collection, id).await? else { return Ok(None) };
        let Some(payload) = live(&doc) else { return Ok(None) };
        let due = u64::from_be_bytes(doc.body[..8].try_into().expect("8 bytes"));
        Ok(Some((payload.to_vec(), Duration::from_millis(due.saturating_sub(now_ms())))))
    }

    /// Remove entry `id` and return its payload if it was in force: of several
    /// nodes taking the same entry at once, exactly one gets it.
    pub async fn take(&self, id: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(doc) = self.store.doc_get(self.collection, id).await? else { return Ok(None) };
        let payload = live(&doc).map(<[u8]>::to_vec);
        match self.store.doc_swap(self.collection, id, DocExpect::Present(doc), None).await? {
            DocOutcome::Done { .. } => Ok(payload),
            DocOutcome::Conflict { .. } => Ok(None),
        }
    }

    pub async fn remove(&self, id: &[u8]) -> Result<(), StoreError> {
        self.store.doc_swap(self.collection, id, DocExpect::Any, None).await.map(|_| ())
    }

    /// Delete up to [`SWEEP_BATCH`] expired entries.
    pub async fn sweep(&self) -> Result<usize, StoreError> {
        let now = now_ms().to_be_bytes();
        let hits =
            self.store.doc_lookup(self.collection, DUE_INDEX, IndexMatch::Prefix(b""), None, SWEEP_BATCH).await?;
        let mut swept = 0;
        for IndexHit { key, id } in hits.into_iter().take_while(|h| h.key.as_slice() < now.as_slice()) {
            // Only if it is still the expired state (a node may have renewed it).
            if let Some(doc) = self.store.doc_get(self.collection, &id).await? {
                if live(&doc).is_none() && doc.index.iter().any(|e| e.key == key) {
                    swept += self.store.doc_swap(self.collection, &id, DocExpect::Present(doc), None).await?.is_done()
                        as usize;
                }
            }
        }
        Ok(swept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_store::MemoryStore;

    #[tokio::test]
    async fn entries_are_created_once_taken_once_and_expire() {
        let t = SharedTable::new(Arc::new(MemoryStore::new()), "c");
        assert!(t.create(b"7", b"a", Duration::from_secs(60)).await.unwrap());
        assert!(!t.create(b"7", b"b", Duration::from_secs(60)).await.unwrap(), "id taken");
        assert_eq!(t.get(b"7").await.unwrap().as_deref(), Some(&b"a"[..]));
        assert_eq!(t.take(b"7").await.unwrap().as_deref(), Some(&b"a"[..]));
        assert_eq!(t.take(b"7").await.unwrap(), None, "taken once");
        assert!(t.create(b"8", b"x", Duration::from_millis(1)).await.unwrap());
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(t.get(b"8").await.unwrap(), None, "expired");
        assert!(t.create(b"8", b"y", Duration::from_secs(60)).await.unwrap(), "an expired id is free again");
        assert!(t.create(b"9", b"z", Duration::from_millis(1)).await.unwrap());
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(t.sweep().await.unwrap(), 1);
        assert_eq!(t.get(b"8").await.unwrap().as_deref(), Some(&b"y"[..]), "live entries stay");
    }
}

#[cfg(test)]
mod coherence_tests;
