//! Pending challenges (§5.1, §7.5): what was asked, the nonce sent, and when,
//! keyed by challenge id; entries expire after the configured time.
//!
//! Anyone may make the server keep a challenge (and the request it guards, up
//! to 256 KiB): each is charged to its peer and to a byte budget
//! ([`crate::quota`]); beyond either the challenge is refused (too busy), and
//! expired ones are swept by age, not only when the table is full.

use crate::cluster::SharedTable;
use crate::quota::{Ledger, OverQuota, Quota};
use handled_proto::codec::{put_bytes, put_i32, Codec, Reader};
use handled_proto::envelope::Envelope;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a pending challenge costs besides the request it holds (map entry,
/// nonce, digest, envelope, bookkeeping): charged so that a flood of tiny
/// requests is bounded too.
const ENTRY_OVERHEAD: usize = 256;

/// One issued challenge and the request it guards.
#[derive(Debug, Clone)]
pub struct Pending {
    pub nonce: Vec<u8>,
    /// The request digest sent with the challenge (the client MACs/signs `nonce ‖ digest`).
    pub digest: Vec<u8>,
    /// The challenged request: envelope as received, header+body in plaintext.
    pub envelope: Envelope,
    pub message: Vec<u8>,
    /// The session it arrived in (0 = none).
    pub session_id: i32,
    created: Instant,
}

impl Pending {
    pub fn new(nonce: Vec<u8>, digest: Vec<u8>, envelope: Envelope, message: Vec<u8>, session_id: i32) -> Self {
        Pending { nonce, digest, envelope, message, session_id, created: Instant::now() }
    }

    /// Bytes charged to the peer for keeping this challenge.
    fn cost(&self) -> usize {
        ENTRY_OVERHEAD + self.message.len() + self.nonce.len() + self.digest.len()
    }

    /// Shared form: nonce, digest, envelope, message, session id.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.message.len() + 96);
        put_bytes(&mut out, &self.nonce);
        put_bytes(&mut out, &self.digest);
        self.envelope.encode(&mut out);
        put_bytes(&mut out, &self.message);
        put_i32(&mut out, self.session_id);
        out
    }

    fn decode(b: &[u8]) -> Option<Pending> {
        let mut r = Reader::new(b);
        let nonce = r.bytes("nonce").ok()?.to_vec();
        let digest = r.bytes("digest").ok()?.to_vec();
        let envelope = Envelope::read(&mut r).ok()?;
        let message = r.bytes("message").ok()?.to_vec();
        let session_id = r.i32("session id").ok()?;
        Some(Pending::new(nonce, digest, envelope, message, session_id))
    }
}

/// Why a challenge could not be remembered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotStored {
    /// The peer holds its share of challenges, or all peers the byte budget.
    Full,
    /// Another node holds a challenge with this id: pick another.
    IdTaken,
    /// The shared store failed.
    Store,
}

/// The challenges this node issued: the requests themselves on a single node
/// (in a shared store, only their charges: the store holds them).
struct Local {
    pending: HashMap<i32, Pending>,
    charged: Ledger<i32>,
}

pub struct Challenges {
    local: Mutex<Local>,
    ttl: Duration,
    /// With several nodes on one store: the challenges every node can take.
    shared: Option<SharedTable>,
}

impl Challenges {
    pub fn new(ttl: Duration, quota: Quota) -> Self {
        let local = Local { pending: HashMap::new(), charged: Ledger::new(quota) };
        Challenges { local: Mutex::new(local), ttl, shared: None }
    }

    /// Challenges answerable on any node sharing `store`.
    pub fn shared(ttl: Duration, quota: Quota, store: std::sync::Arc<dyn handled_store::DocumentStore>) -> Self {
        Challenges { shared: Some(SharedTable::new(store, "auth-challenge")), ..Challenges::new(ttl, quota) }
    }

    fn local(&self) -> std::sync::MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remember a challenge from `peer` under `id`. A session's challenge
    /// (`replace`) replaces an older one for the same id, as a session has one
    /// outstanding challenge; any other id must be new.
    pub async fn insert(&self, id: i32, peer: IpAddr, pending: Pending, replace: bool) -> Result<(), NotStored> {
        self.charge(id, peer, &pending)?;
        let Some(shared) = &self.shared else {
            self.local().pending.insert(id, pending);
            return Ok(());
        };
        let payload = pending.encode();
        let stored = if replace {
            shared.put(&id.to_be_bytes(), &payload, self.ttl).await.map(|()| true)
        } else {
            shared.create(&id.to_be_bytes(), &payload, self.ttl).await
        };
        let refused = match stored {
            Ok(true) => return Ok(()),
            Ok(false) => NotStored::IdTaken,
            Err(e) => {
                tracing::warn!("shared challenge not stored: {e}");
                NotStored::Store
            }
        };
        self.local().charged.release(&id);
        Err(refused)
    }

    /// Charge a new challenge to its peer, after sweeping expired ones.
    fn charge(&self, id: i32, peer: IpAddr, pending: &Pending) -> Result<(), NotStored> {
        let mut local = self.local();
        let now = Instant::now();
        Self::sweep_locked(&mut local, self.ttl, now);
        local.pending.remove(&id);
        local.charged.charge(id, peer, pending.cost(), now).map_err(|why| {
            match why {
                OverQuota::Peer => tracing::debug!("challenge refused: {peer} holds its share"),
                OverQuota::Bytes => tracing::info!("challenge refused: the pending-challenge budget is spent"),
            }
            NotStored::Full
        })
    }

    fn sweep_locked(local: &mut Local, ttl: Duration, now: Instant) {
        for id in local.charged.expire(ttl, now) {
            local.pending.remove(&id);
        }
        if local.pending.len() < local.pending.capacity() / 4 {
            local.pending.shrink_to_fit();
        }
    }

    /// Forget expired challenges (also done on every new one).
    pub fn sweep(&self) {
        Self::sweep_locked(&mut self.local(), self.ttl, Instant::now());
    }

    /// Challenges and bytes this node holds charged.
    pub fn held(&self) -> (usize, usize) {
        let local = self.local();
        (local.charged.len(), local.charged.bytes())
    }

    /// Take the challenge for `id` if it is still valid; an answer uses it up
    /// (on whichever node it arrives, exactly once).
    pub async fn take(&self, id: i32) -> Option<Pending> {
        let p = {
            let mut local = self.local();
            local.charged.release(&id);
            local.pending.remove(&id)
        };
        if let Some(shared) = &self.shared {
            return match shared.take(&id.to_be_bytes()).await {
                Ok(p) => p.as_deref().and_then(Pending::decode),
                Err(e) => {
                    tracing::warn!("shared challenge not read: {e}");
                    None
                }
            };
        }
        p.filter(|p| p.created.elapsed() < self.ttl)
    }

    pub fn contains(&self, id: i32) -> bool {
        self.local().charged.contains(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_proto::envelope::Version;

    const QUOTA: Quota = Quota { max_bytes: 1 << 20, per_peer: 100 };

    fn peer(n: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, n])
    }

    fn pending() -> Pending {
        Pending::new(vec![1; 16], vec![2; 32], Envelope::new(Version::V2_10, Version::V2_10, 5), vec![], 0)
    }

    #[tokio::test]
    async fn answers_use_challenges_up_and_they_expire() {
        let shared = std::sync::Arc::new(handled_store::MemoryStore::new());
        for c in [
            Challenges::new(Duration::from_secs(60), QUOTA),
            Challenges::shared(Duration::from_secs(60), QUOTA, shared.clone()),
        ] {
            c.insert(7, peer(1), pending(), false).await.unwrap();
            assert!(c.take(7).await.is_some());
            assert!(c.take(7).await.is_none(), "an answer can't be replayed");
        }
        let short = Challenges::new(Duration::from_millis(1), QUOTA);
        short.insert(8, peer(1), pending(), false).await.unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(short.take(8).await.is_none());
    }

    #[tokio::test]
    async fn a_shared_challenge_is_answered_on_another_node_once() {
        let store: std::sync::Arc<dyn handled_store::Store> = std::sync::Arc::new(handled_store::MemoryStore::new());
        let (a, b) = (
            Challenges::shared(Duration::from_secs(60), QUOTA, store.clone()),
            Challenges::shared(Duration::from_secs(60), QUOTA, store),
        );
        a.insert(9, peer(1), pending(), false).await.unwrap();
        assert_eq!(
            b.insert(9, peer(1), pending(), false).await,
            Err(NotStored::IdTaken),
            "ids are unique across nodes"
        );
        let p = b.take(9).await.expect("the other node takes it");
        assert_eq!((p.nonce, p.digest, p.message), (vec![1; 16], vec![2; 32], vec![]));
        assert!(a.take(9).await.is_none(), "and only once");
    }

    fn request(bytes: usize) -> Pending {
        Pending::new(vec![1; 16], vec![2; 32], Envelope::new(Version::V2_10, Version::V2_10, 5), vec![0; bytes], 0)
    }

    /// F3: a flood of big challenged requests is bounded per peer and in bytes,
    /// refused beyond, and swept by age; other peers still get challenges.
    #[tokio::test]
    async fn pending_challenges_are_bounded_per_peer_and_in_bytes_and_swept_by_age() {
        let ttl = Duration::from_millis(200);
        let budget = 8 * 4 * 64 * 1024; // a peer's share: 3 requests of 64 KiB
        let c = Challenges::new(ttl, Quota { max_bytes: budget, per_peer: 5 });
        for id in 1..=3 {
            c.insert(id, peer(1), request(64 * 1024), false).await.unwrap();
        }
        assert_eq!(c.insert(4, peer(1), request(64 * 1024), false).await, Err(NotStored::Full), "its byte share");
        c.insert(4, peer(1), request(10), false).await.unwrap();
        c.insert(5, peer(1), request(10), false).await.unwrap();
        assert_eq!(c.insert(6, peer(1), request(10), false).await, Err(NotStored::Full), "its count");
        c.insert(6, peer(2), request(10), false).await.expect("another peer is still challenged");
        // Many peers, each within its share: the budget still holds.
        let refused = 'flood: {
            for n in 3..=40 {
                for k in 0..3 {
                    if c.insert(i32::from(n) * 10 + k, peer(n), request(64 * 1024), false).await.is_err() {
                        break 'flood Some(n);
                    }
                }
            }
            None
        };
        let (count, bytes) = c.held();
        assert!(refused.is_some() && bytes <= budget, "{count} challenges, {bytes} bytes");
        assert!(c.take(1).await.is_some(), "answered: the charge is gone");
        c.insert(1000, peer(50), request(64 * 1024), false).await.unwrap();
        tokio::time::sleep(ttl).await;
        c.sweep();
        assert_eq!(c.held(), (0, 0), "expired challenges go without a new one arriving");
        assert!(c.local().pending.is_empty());
        c.insert(1001, peer(1), request(64 * 1024), false).await.expect("the peer's share is free again");
    }
}
