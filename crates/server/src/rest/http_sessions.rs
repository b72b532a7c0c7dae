//! `/api/sessions` sessions (§4.6) that cost nothing until they are proven and
//! work on every node of a site.
//!
//! A session id carries its own proof of origin: 8 random bytes ‖ creation time
//! (u32 seconds) ‖ a 8-byte tag, HMAC-SHA256 under a key derived from the site's
//! private key; the session's nonce is an HMAC of the id. So issuing a session
//! (every 401 carries one) stores nothing, any node holding the site key can check
//! an id and recompute its nonce, and forged ids are refused. Only what a session
//! learns later is stored — the identity it proved, or that it was ended — in a
//! [`SharedTable`] over the server's store (memory for a single node, the shared
//! store with several), with the idle deadline.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::auth::Identity;
use crate::cluster::SharedTable;
use handled_proto::codec::{put_bytes, put_i32, Reader};

type HmacSha256 = Hmac<Sha256>;

const RANDOM_LEN: usize = 8;
const TAG_LEN: usize = 8;
const ID_LEN: usize = RANDOM_LEN + 4 + TAG_LEN;

/// Stored state of a session: ended, or proven as an identity.
const ENDED: u8 = 0;
const PROVEN: u8 = 1;

pub(crate) struct HttpSession {
    pub id: String,
    pub nonce: [u8; 16],
    identity: Mutex<Option<Identity>>,
}

impl HttpSession {
    pub fn identity(&self) -> Option<Identity> {
        self.identity.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

pub(crate) struct HttpSessions {
    key: [u8; 32],
    ttl: Duration,
    learned: SharedTable,
}

fn now_secs() -> u32 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as u32)
}

impl HttpSessions {
    /// `secret`: bytes only this site knows (its private key); `store`: where
    /// proven identities are kept (the server's store).
    pub fn new(secret: &[u8], ttl: Duration, store: Arc<dyn handled_store::Store>) -> Self {
        let mut mac = HmacSha256::new_from_slice(b"handled /api/sessions").expect("any key length");
        mac.update(secret);
        HttpSessions { key: mac.finalize().into_bytes().into(), ttl, learned: SharedTable::new(store, "http-session") }
    }

    fn mac(&self, label: &[u8], data: &[u8]) -> [u8; 32] {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("any key length");
        mac.update(label);
        mac.update(data);
        mac.finalize().into_bytes().into()
    }

    fn session(&self, id: &[u8; ID_LEN], identity: Option<Identity>) -> Arc<HttpSession> {
        let nonce = self.mac(b"nonce", id)[..16].try_into().expect("16 bytes");
        Arc::new(HttpSession { id: hex::encode(id), nonce, identity: Mutex::new(identity) })
    }

    /// A new unauthenticated session with a fresh nonce (nothing is stored).
    pub fn create(&self) -> Arc<HttpSession> {
        let mut id = [0u8; ID_LEN];
        id[..RANDOM_LEN].copy_from_slice(&rand::random::<[u8; RANDOM_LEN]>());
        id[RANDOM_LEN..RANDOM_LEN + 4].copy_from_slice(&now_secs().to_be_bytes());
        let tag = self.mac(b"id", &id[..RANDOM_LEN + 4]);
        id[RANDOM_LEN + 4..].copy_from_slice(&tag[..TAG_LEN]);
        self.session(&id, None)
    }

    /// The session `id` names, if it is ours and neither ended nor expired: never
    /// proven ones live `ttl` from their creation, proven ones `ttl` from their
    /// last use.
    pub async fn get(&self, id: &str) -> Option<Arc<HttpSession>> {
        let raw: [u8; ID_LEN] = hex::decode(id).ok()?.try_into().ok()?;
        let tag = self.mac(b"id", &raw[..RANDOM_LEN + 4]);
        let tag_ok: bool = subtle::ConstantTimeEq::ct_eq(&tag[..TAG_LEN], &raw[RANDOM_LEN + 4..]).into();
        if !tag_ok {
            return None;
        }
        let learned = match self.learned.get_with_deadline(&raw).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!("session state not read: {e}");
                return None;
            }
        };
        match learned {
            Some((state, left)) => {
                let identity = decode_identity(&state)?;
                if left < self.ttl / 2 {
                    // Idle deadline: renewed (at most once per half-life) on use.
                    let _ = self.learned.put(&raw, &state, self.ttl).await;
                }
                Some(self.session(&raw, Some(identity)))
            }
            None => {
                let created = u32::from_be_bytes(raw[RANDOM_LEN..RANDOM_LEN + 4].try_into().expect("4 bytes"));
                let age = Duration::from_secs(u64::from(now_secs().saturating_sub(created)));
                (age < self.ttl).then(|| self.session(&raw, None))
            }
        }
    }

    /// Bind a proven identity to the session, on every node.
    pub async fn prove(&self, session: &HttpSession, identity: Identity) {
        *session.identity.lock().unwrap_or_else(|e| e.into_inner()) = Some(identity.clone());
        let Ok(raw) = hex::decode(&session.id) else { return };
        if let Err(e) = self.learned.put(&raw, &encode_identity(&identity), self.ttl).await {
            tracing::warn!("session identity not stored: {e}");
        }
    }

    /// End a session: its id is refused from now on, on every node.
    pub async fn remove(&self, id: &str) {
        let Ok(raw) = hex::decode(id) else { return };
        if let Err(e) = self.learned.put(&raw, &[ENDED], self.ttl).await {
            tracing::warn!("session end not stored: {e}");
        }
    }
}

fn encode_identity(i: &Identity) -> Vec<u8> {
    let mut out = vec![PROVEN];
    put_bytes(&mut out, &i.handle);
    put_i32(&mut out, i.index);
    put_i32(&mut out, i.key_index.unwrap_or(-1));
    out
}

/// `None` for an ended session.
fn decode_identity(b: &[u8]) -> Option<Identity> {
    let (&kind, rest) = b.split_first()?;
    if kind != PROVEN {
        return None;
    }
    let mut r = Reader::new(rest);
    let mut identity = Identity::new(r.bytes("handle").ok()?.to_vec(), r.i32("index").ok()?);
    identity.key_index = Some(r.i32("key index").ok()?).filter(|k| *k >= 0);
    Some(identity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_store::MemoryStore;

    #[tokio::test]
    async fn ids_are_checked_nonces_derived_and_proofs_shared() {
        let store: Arc<dyn handled_store::Store> = Arc::new(MemoryStore::new());
        let a = HttpSessions::new(b"site key", Duration::from_secs(60), store.clone());
        let b = HttpSessions::new(b"site key", Duration::from_secs(60), store.clone());
        let s = a.create();
        let on_b = b.get(&s.id).await.expect("another node knows the session");
        assert_eq!(on_b.nonce, s.nonce);
        assert!(on_b.identity().is_none());
        let other_site = HttpSessions::new(b"other key", Duration::from_secs(60), store);
        assert!(other_site.get(&s.id).await.is_none(), "forged or foreign ids are refused");
        let mut forged = s.id.clone().into_bytes();
        forged[0] = if forged[0] == b'a' { b'b' } else { b'a' };
        assert!(a.get(std::str::from_utf8(&forged).unwrap()).await.is_none());
        a.prove(&s, Identity::new(b"TEST/ADMIN".to_vec(), 300)).await;
        assert_eq!(b.get(&s.id).await.unwrap().identity().unwrap().index, 300, "the proof is seen on every node");
        b.remove(&s.id).await;
        assert!(a.get(&s.id).await.is_none(), "ended everywhere");
        assert!(a.get("zz").await.is_none() && a.get("").await.is_none());
    }

    /// F5: anonymous session creation (every 401, every `POST /api/sessions`) kept
    /// an entry each, up to 100k, then refused everyone. Now it keeps nothing.
    #[tokio::test]
    async fn issuing_sessions_stores_nothing() {
        let store: Arc<dyn handled_store::Store> = Arc::new(MemoryStore::new());
        let a = HttpSessions::new(b"k", Duration::from_secs(60), store.clone());
        let ids: Vec<String> = (0..10_000).map(|_| a.create().id.clone()).collect();
        assert!(store.doc_scan("http-session", b"", None, 1).await.unwrap().is_empty());
        assert!(a.get(&ids[9_999]).await.is_some(), "and each still works");
    }

    #[tokio::test]
    async fn unproven_sessions_expire_from_creation() {
        let a = HttpSessions::new(b"k", Duration::from_secs(1), Arc::new(MemoryStore::new()));
        let s = a.create();
        assert!(a.get(&s.id).await.is_some());
        tokio::time::sleep(Duration::from_millis(2100)).await;
        assert!(a.get(&s.id).await.is_none());
    }
}
