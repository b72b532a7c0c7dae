//! Node leases: each node serving from its record cache has a row in the store
//! (collection [`COLLECTION`]) with its cluster-channel address, the end of its
//! lease (wall-clock ms) and an epoch. It renews the row by compare-and-set on
//! the row it last wrote; a writer that cannot reach it bumps the epoch
//! ([`Leases::fence`]), so its next renewal fails and it drops its cache.

use std::net::SocketAddr;
use std::sync::Arc;

use handled_store::clock::now_ms;
use handled_store::{DocExpect, DocOutcome, Document, DocumentStore, StoreError};
use parking_lot::Mutex;

/// The collection of node rows (not cached, not announced).
pub const COLLECTION: &str = crate::cache::keys::CLUSTER_NODES;
/// Rows read per view (more nodes than this in one site is not a use case).
const MAX_MEMBERS: usize = 1024;
/// A row whose lease ended this long ago is removed by the next view refresh.
const FORGET_AFTER_MS: u64 = 10 * 60 * 1000;

/// One node's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: u64,
    pub addr: SocketAddr,
    pub lease_until: u64,
    pub epoch: u64,
}

impl Member {
    fn row_id(id: u64) -> [u8; 8] {
        id.to_be_bytes()
    }

    fn document(&self) -> Document {
        let mut body = Vec::with_capacity(64);
        body.extend_from_slice(&self.id.to_be_bytes());
        body.extend_from_slice(&self.lease_until.to_be_bytes());
        body.extend_from_slice(&self.epoch.to_be_bytes());
        body.extend_from_slice(self.addr.to_string().as_bytes());
        Document::new(body, Vec::new())
    }

    pub fn of(doc: &Document) -> Option<Member> {
        let b = &doc.body;
        let u64_at = |i: usize| b.get(i..i + 8).map(|x| u64::from_be_bytes(x.try_into().expect("8 bytes")));
        let addr = std::str::from_utf8(b.get(24..)?).ok()?.parse().ok()?;
        Some(Member { id: u64_at(0)?, lease_until: u64_at(8)?, epoch: u64_at(16)?, addr })
    }
}

/// What a renewal found.
#[derive(Debug)]
pub enum Renewal {
    /// Our row is extended to this time; `fresh`: it was (re)written with a
    /// new epoch (we were fenced, or it is our first), so peers may not yet
    /// count us as a member.
    Held { lease_until: u64, fresh: bool },
    /// The store did not answer: our lease runs out on its own.
    Failed(StoreError),
}

/// This node's row and the reading of everyone's.
pub struct Leases {
    store: Arc<dyn DocumentStore>,
    me: u64,
    addr: SocketAddr,
    lease_ms: u64,
    /// The row as we last wrote it (the expectation of the next renewal).
    held: Mutex<Option<Document>>,
}

impl Leases {
    pub fn new(store: Arc<dyn DocumentStore>, addr: SocketAddr, lease_ms: u64) -> Self {
        Leases { store, me: rand::random::<u64>() | 1, addr, lease_ms, held: Mutex::new(None) }
    }

    pub fn id(&self) -> u64 {
        self.me
    }

    /// Extend our lease by compare-and-set on the row we last wrote; if it
    /// was changed (fenced) or never written, write it anew with the next epoch.
    pub async fn renew(&self) -> Renewal {
        let lease_until = now_ms() + self.lease_ms;
        let held = self.held.lock().clone();
        if let Some(doc) = held {
            let Some(mine) = Member::of(&doc) else { return Renewal::Failed(StoreError::Corrupt("lease row".into())) };
            let next = Member { lease_until, ..mine }.document();
            match self
                .store
                .doc_swap(COLLECTION, &Member::row_id(self.me), DocExpect::Present(doc), Some(next.clone()))
                .await
            {
                Ok(DocOutcome::Done { .. }) => {
                    *self.held.lock() = Some(next);
                    return Renewal::Held { lease_until, fresh: false };
                }
                Ok(DocOutcome::Conflict { .. }) => {}
                Err(e) => {
                    // Unknown outcome: the row may now differ from ours; the next
                    // renewal finds out (conflict) and starts a new epoch.
                    return Renewal::Failed(e);
                }
            }
        }
        // Fenced (or first start): a new epoch over whatever the row holds.
        let row = Member::row_id(self.me);
        let current = match self.store.doc_get(COLLECTION, &row).await {
            Ok(c) => c,
            Err(e) => return Renewal::Failed(e),
        };
        let epoch = current.as_ref().and_then(Member::of).map_or(1, |m| m.epoch + 1);
        let next = Member { id: self.me, addr: self.addr, lease_until, epoch }.document();
        let expect = current.map_or(DocExpect::Absent, DocExpect::Present);
        match self.store.doc_swap(COLLECTION, &row, expect, Some(next.clone())).await {
            Ok(DocOutcome::Done { .. }) => {
                *self.held.lock() = Some(next);
                Renewal::Held { lease_until, fresh: true }
            }
            Ok(DocOutcome::Conflict { .. }) => Renewal::Failed(StoreError::Backend("lease row changed".into())),
            Err(e) => Renewal::Failed(e),
        }
    }

    /// Remove our row (we have stopped serving from the cache): writers then
    /// find no lease to wait out.
    pub async fn remove(&self) -> Result<(), StoreError> {
        let Some(doc) = self.held.lock().take() else { return Ok(()) };
        self.store.doc_swap(COLLECTION, &Member::row_id(self.me), DocExpect::Present(doc), None).await.map(|_| ())
    }

    /// Every node's row (ours too), forgetting long-dead ones.
    pub async fn members(&self) -> Result<Vec<Member>, StoreError> {
        let rows = self.store.doc_scan(COLLECTION, b"", None, MAX_MEMBERS).await?;
        let now = now_ms();
        let mut out = Vec::with_capacity(rows.len());
        for (id, doc) in rows {
            match Member::of(&doc) {
                Some(m) if m.lease_until + FORGET_AFTER_MS > now => out.push(m),
                _ => {
                    // Best effort: a node coming back writes a new epoch anyway.
                    let _ = self.store.doc_swap(COLLECTION, &id, DocExpect::Present(doc), None).await;
                }
            }
        }
        Ok(out)
    }

    /// Bump member `id`'s epoch so its next renewal fails. Returns the end of
    /// the lease it may still be serving under (`None`: no row).
    pub async fn fence(&self, id: u64) -> Result<Option<u64>, StoreError> {
        let row = Member::row_id(id);
        for _ in 0..8 {
            let Some(doc) = self.store.doc_get(COLLECTION, &row).await? else { return Ok(None) };
            let Some(m) = Member::of(&doc) else { return Ok(None) };
            if m.lease_until < now_ms() {
                return Ok(Some(m.lease_until)); // already over; nothing to stop
            }
            let bumped = Member { epoch: m.epoch + 1, ..m.clone() }.document();
            if self.store.doc_swap(COLLECTION, &row, DocExpect::Present(doc), Some(bumped)).await?.is_done() {
                return Ok(Some(m.lease_until));
            }
            // It renewed meanwhile: fence the new lease.
        }
        Err(StoreError::Backend(format!("cluster node {id:016x} kept renewing while being fenced")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_store::MemoryStore;

    #[tokio::test]
    async fn renewal_extends_and_a_fence_starts_a_new_epoch() {
        let store: Arc<dyn DocumentStore> = Arc::new(MemoryStore::new());
        let a = Leases::new(store.clone(), "127.0.0.1:1".parse().unwrap(), 2000);
        let b = Leases::new(store.clone(), "127.0.0.1:2".parse().unwrap(), 2000);
        assert!(matches!(a.renew().await, Renewal::Held { fresh: true, .. }));
        assert!(matches!(a.renew().await, Renewal::Held { fresh: false, .. }));
        assert!(matches!(b.renew().await, Renewal::Held { fresh: true, .. }));
        let members = b.members().await.unwrap();
        assert_eq!(members.len(), 2);
        let before = members.iter().find(|m| m.id == a.id()).unwrap().clone();
        let until = b.fence(a.id()).await.unwrap().unwrap();
        assert_eq!(until, before.lease_until);
        // a's next renewal finds its row changed: a new epoch, fresh again.
        assert!(matches!(a.renew().await, Renewal::Held { fresh: true, .. }));
        let after = b.members().await.unwrap().into_iter().find(|m| m.id == a.id()).unwrap();
        assert_eq!(after.epoch, before.epoch + 2, "fenced once, re-registered once");
    }
}
