//! Pending challenges (§5.1, §7.5): what was asked, the nonce sent, and when,
//! keyed by challenge id; entries expire after the configured time.

use crate::cluster::SharedTable;
use handled_proto::codec::{put_bytes, put_i32, Codec, Reader};
use handled_proto::envelope::Envelope;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most this many challenges wait at once; beyond it expired ones are swept
/// and, if still full, new challenges are refused (a flood cannot grow memory).
const MAX_PENDING: usize = 100_000;

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
    /// The table is full of live challenges.
    Full,
    /// Another node holds a challenge with this id: pick another.
    IdTaken,
    /// The shared store failed.
    Store,
}

pub struct Challenges {
    pending: Mutex<HashMap<i32, Pending>>,
    ttl: Duration,
    /// With several nodes on one store: the challenges every node can take.
    shared: Option<SharedTable>,
}

impl Challenges {
    pub fn new(ttl: Duration) -> Self {
        Challenges { pending: Mutex::new(HashMap::new()), ttl, shared: None }
    }

    /// Challenges answerable on any node sharing `store`.
    pub fn shared(ttl: Duration, store: std::sync::Arc<dyn handled_store::Store>) -> Self {
        Challenges { shared: Some(SharedTable::new(store, "auth-challenge")), ..Challenges::new(ttl) }
    }

    /// Remember a challenge under `id`. A session's challenge (`replace`)
    /// replaces an older one for the same id, as a session has one outstanding
    /// challenge; any other id must be new.
    pub async fn insert(&self, id: i32, pending: Pending, replace: bool) -> Result<(), NotStored> {
        if let Some(shared) = &self.shared {
            let payload = pending.encode();
            let stored = if replace {
                shared.put(&id.to_be_bytes(), &payload, self.ttl).await.map(|()| true)
            } else {
                shared.create(&id.to_be_bytes(), &payload, self.ttl).await
            };
            return match stored {
                Ok(true) => Ok(()),
                Ok(false) => Err(NotStored::IdTaken),
                Err(e) => {
                    tracing::warn!("shared challenge not stored: {e}");
                    Err(NotStored::Store)
                }
            };
        }
        self.insert_local(id, pending).then_some(()).ok_or(NotStored::Full)
    }

    fn insert_local(&self, id: i32, pending: Pending) -> bool {
        let mut map = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_PENDING && !map.contains_key(&id) {
            let ttl = self.ttl;
            map.retain(|_, p| p.created.elapsed() < ttl);
            if map.len() >= MAX_PENDING {
                return false;
            }
        }
        map.insert(id, pending);
        true
    }

    /// Take the challenge for `id` if it is still valid; an answer uses it up
    /// (on whichever node it arrives, exactly once).
    pub async fn take(&self, id: i32) -> Option<Pending> {
        if let Some(shared) = &self.shared {
            return match shared.take(&id.to_be_bytes()).await {
                Ok(p) => p.as_deref().and_then(Pending::decode),
                Err(e) => {
                    tracing::warn!("shared challenge not read: {e}");
                    None
                }
            };
        }
        let p = self.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&id)?;
        (p.created.elapsed() < self.ttl).then_some(p)
    }

    pub fn contains(&self, id: i32) -> bool {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).contains_key(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_proto::envelope::Version;

    fn pending() -> Pending {
        Pending::new(vec![1; 16], vec![2; 32], Envelope::new(Version::V2_10, Version::V2_10, 5), vec![], 0)
    }

    #[tokio::test]
    async fn answers_use_challenges_up_and_they_expire() {
        let shared = std::sync::Arc::new(handled_store::MemoryStore::new());
        for c in [Challenges::new(Duration::from_secs(60)), Challenges::shared(Duration::from_secs(60), shared.clone())]
        {
            c.insert(7, pending(), false).await.unwrap();
            assert!(c.take(7).await.is_some());
            assert!(c.take(7).await.is_none(), "an answer can't be replayed");
        }
        let short = Challenges::new(Duration::from_millis(1));
        short.insert(8, pending(), false).await.unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(short.take(8).await.is_none());
    }

    #[tokio::test]
    async fn a_shared_challenge_is_answered_on_another_node_once() {
        let store: std::sync::Arc<dyn handled_store::Store> = std::sync::Arc::new(handled_store::MemoryStore::new());
        let (a, b) = (
            Challenges::shared(Duration::from_secs(60), store.clone()),
            Challenges::shared(Duration::from_secs(60), store),
        );
        a.insert(9, pending(), false).await.unwrap();
        assert_eq!(b.insert(9, pending(), false).await, Err(NotStored::IdTaken), "ids are unique across nodes");
        let p = b.take(9).await.expect("the other node takes it");
        assert_eq!((p.nonce, p.digest, p.message), (vec![1; 16], vec![2; 32], vec![]));
        assert!(a.take(9).await.is_none(), "and only once");
    }
}
