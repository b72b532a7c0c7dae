//! Server-side sessions (§5.7, §7.5): DH-agreed keys, the identity the session
//! was opened for and whether it has proven it, replay protection on client
//! counters, our own counter for MACed responses, and idle expiry.

mod stored;

use crate::auth::Identity;
use crate::cluster::SharedTable;
use handled_proto::envelope::Version;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Client counters remembered per session (Java keeps about 200).
const REPLAY_WINDOW: usize = 256;
/// Most live sessions; beyond it expired ones are swept, then setup is refused.
const MAX_SESSIONS: usize = 200_000;

/// Why a session message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterError {
    /// Counter seen before or older than the window (→ 505).
    Replayed,
}

struct Live {
    last_used: Instant,
    authenticated: Option<Identity>,
    seen: BTreeSet<i32>,
    /// Counters at or below this fell out of the window and count as seen.
    floor: Option<i32>,
}

pub struct Session {
    pub id: i32,
    pub key: [u8; 32],
    /// Version of the setup response: requests and responses in the session use it.
    pub version: Version,
    /// The identity named at setup (`None` = anonymous).
    pub claimed: Option<(Vec<u8>, i32)>,
    pub timeout: Duration,
    /// Encrypt every response (client asked for it with ENC at setup).
    pub encrypt_all: bool,
    server_counter: AtomicI32,
    live: Mutex<Live>,
}

impl Session {
    pub fn new(
        id: i32,
        key: [u8; 32],
        version: Version,
        claimed: Option<(Vec<u8>, i32)>,
        timeout: Duration,
        encrypt_all: bool,
    ) -> Self {
        Session {
            id,
            key,
            version,
            claimed,
            timeout,
            encrypt_all,
            server_counter: AtomicI32::new(1),
            live: Mutex::new(Live {
                last_used: Instant::now(),
                authenticated: None,
                seen: BTreeSet::new(),
                floor: None,
            }),
        }
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn expired(&self, now: Instant) -> bool {
        now.duration_since(self.live().last_used) > self.timeout
    }

    /// Accept a client counter once; refuse repeats and counters older than the window.
    pub fn accept_counter(&self, counter: i32) -> Result<(), CounterError> {
        let mut live = self.live();
        if live.floor.is_some_and(|f| counter <= f) || !live.seen.insert(counter) {
            return Err(CounterError::Replayed);
        }
        if live.seen.len() > REPLAY_WINDOW {
            live.floor = live.seen.pop_first();
        }
        live.last_used = Instant::now();
        Ok(())
    }

    pub fn touch(&self) {
        self.live().last_used = Instant::now();
    }

    /// The proven identity, once a challenge in this session was answered by
    /// the identity named at setup.
    pub fn identity(&self) -> Option<Identity> {
        self.live().authenticated.clone()
    }

    /// Record a successful answer; the session becomes authenticated only if
    /// the answer's identity is the one the session was opened for.
    pub fn authenticate(&self, identity: &Identity) -> bool {
        let Some((handle, index)) = &self.claimed else { return false };
        if !handled_proto::handle::eq_prefix_ci(handle, &identity.handle) || *index != identity.index {
            return false;
        }
        self.live().authenticated = Some(identity.clone());
        true
    }

    /// Next counter for a MACed response (clients reject repeats).
    pub fn next_server_counter(&self) -> i32 {
        self.server_counter.fetch_add(1, Ordering::Relaxed)
    }

    /// A fresh local copy of a shared session's settings.
    fn clone_shared(&self) -> Session {
        let s = Session::new(self.id, self.key, self.version, self.claimed.clone(), self.timeout, self.encrypt_all);
        if let Some(identity) = self.identity() {
            s.authenticate(&identity);
        }
        s
    }
}

pub struct Sessions {
    map: Mutex<HashMap<i32, Arc<Session>>>,
    /// With several nodes on one store: sessions every node can continue. The
    /// local map then caches them (replay windows and response counters stay
    /// per node).
    shared: Option<SharedTable>,
    /// Client counters used in shared sessions, so a message replayed to another
    /// node is refused too.
    shared_counters: Option<SharedTable>,
}

/// Longest time a shared session's used counter is remembered across nodes
/// (beyond it, only the receiving node's own window refuses a replay).
pub const SHARED_COUNTER_SECS: u64 = 600;

impl Default for Sessions {
    fn default() -> Self {
        Sessions { map: Mutex::new(HashMap::new()), shared: None, shared_counters: None }
    }
}

/// Why a session was not added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotAdded {
    Full,
    /// Another node has a session with this id: pick another.
    IdTaken,
    Store,
}

impl Sessions {
    /// Sessions continued on any node sharing `store`.
    pub fn shared(store: Arc<dyn handled_store::Store>) -> Self {
        Sessions {
            shared: Some(SharedTable::new(store.clone(), "auth-session")),
            shared_counters: Some(SharedTable::new(store, "auth-session-counter")),
            ..Sessions::default()
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A live session by id; an expired one is dropped and reported absent.
    /// Shared sessions are read from the store (another node may have opened,
    /// authenticated, renewed or ended it).
    pub async fn get(&self, id: i32) -> Option<Arc<Session>> {
        if let Some(shared) = &self.shared {
            let stored = match shared.get_with_deadline(&id.to_be_bytes()).await {
                Ok(Some((b, left))) => {
                    let s = stored::decode(&b);
                    // Idle expiry: renewed on use, at most once per half-life.
                    if let Some(s) = s.as_ref().filter(|s| left < s.timeout / 2) {
                        self.save(s).await;
                    }
                    s
                }
                Ok(None) => None,
                Err(e) => {
                    tracing::warn!("shared session not read: {e}");
                    None
                }
            };
            let Some(stored) = stored else {
                self.map().remove(&id);
                return None;
            };
            let mut map = self.map();
            let local = map.entry(id).or_insert_with(|| Arc::new(stored.clone_shared())).clone();
            if let (None, Some(identity)) = (local.identity(), stored.identity()) {
                local.authenticate(&identity);
            }
            local.touch();
            return Some(local);
        }
        let mut map = self.map();
        let s = map.get(&id)?.clone();
        if s.expired(Instant::now()) {
            map.remove(&id);
            return None;
        }
        Some(s)
    }

    /// Add a session.
    pub async fn add(&self, session: Session) -> Result<(), NotAdded> {
        if let Some(shared) = &self.shared {
            match shared.create(&session.id.to_be_bytes(), &stored::encode(&session), session.timeout).await {
                Ok(true) => {}
                Ok(false) => return Err(NotAdded::IdTaken),
                Err(e) => {
                    tracing::warn!("shared session not stored: {e}");
                    return Err(NotAdded::Store);
                }
            }
        }
        self.insert(session).then_some(()).ok_or(NotAdded::Full)
    }

    /// Keep a session's proven identity (and renew its idle deadline) where all
    /// nodes see it.
    pub async fn save(&self, session: &Session) {
        if let Some(shared) = &self.shared {
            if let Err(e) = shared.put(&session.id.to_be_bytes(), &stored::encode(session), session.timeout).await {
                tracing::warn!("shared session not saved: {e}");
            }
        }
    }

    /// Is this the first use of `counter` in session `s` on any node? Always true
    /// for a single node (the session's own window decides). Counters are
    /// remembered for the session's idle time, at most [`SHARED_COUNTER_SECS`].
    pub async fn first_use_everywhere(&self, s: &Session, counter: i32) -> bool {
        let Some(counters) = &self.shared_counters else { return true };
        let key = [s.id.to_be_bytes(), counter.to_be_bytes()].concat();
        let ttl = s.timeout.min(Duration::from_secs(SHARED_COUNTER_SECS));
        match counters.create(&key, &[], ttl).await {
            Ok(first) => first,
            Err(e) => {
                tracing::warn!("shared session counter not recorded: {e}");
                false
            }
        }
    }

    /// End a session everywhere.
    pub async fn end(&self, id: i32) {
        self.remove(id);
        if let Some(shared) = &self.shared {
            if let Err(e) = shared.remove(&id.to_be_bytes()).await {
                tracing::warn!("shared session not removed: {e}");
            }
        }
    }

    /// Add a session locally; false when the table is full of live sessions.
    fn insert(&self, session: Session) -> bool {
        let mut map = self.map();
        if map.len() >= MAX_SESSIONS {
            let now = Instant::now();
            map.retain(|_, s| !s.expired(now));
            if map.len() >= MAX_SESSIONS {
                return false;
            }
        }
        map.insert(session.id, Arc::new(session));
        true
    }

    pub fn contains(&self, id: i32) -> bool {
        self.map().contains_key(&id)
    }

    pub fn remove(&self, id: i32) -> bool {
        self.map().remove(&id).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(timeout: Duration) -> Session {
        Session::new(5, [1; 32], Version::V2_10, Some((b"TEST/ADMIN".to_vec(), 300)), timeout, false)
    }

    #[test]
    fn replayed_and_stale_counters_are_refused() {
        let s = session(Duration::from_secs(60));
        assert!(s.accept_counter(1).is_ok());
        assert_eq!(s.accept_counter(1), Err(CounterError::Replayed));
        for c in 2..=400 {
            s.accept_counter(c).unwrap();
        }
        assert_eq!(s.accept_counter(3), Err(CounterError::Replayed), "below the window");
        assert!(s.accept_counter(401).is_ok());
    }

    #[test]
    fn authenticates_only_the_claimed_identity() {
        let s = session(Duration::from_secs(60));
        assert!(!s.authenticate(&Identity::new(b"TEST/OTHER".to_vec(), 300)));
        assert!(!s.authenticate(&Identity::new(b"TEST/ADMIN".to_vec(), 301)));
        assert!(s.identity().is_none());
        assert!(s.authenticate(&Identity::new(b"test/ADMIN".to_vec(), 300)));
        assert!(s.identity().is_some());
    }

    #[tokio::test]
    async fn sessions_expire_when_idle() {
        let t = Sessions::default();
        t.add(session(Duration::from_millis(1))).await.unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(t.get(5).await.is_none());
        assert!(!t.contains(5));
    }

    #[tokio::test]
    async fn a_shared_session_continues_on_another_node() {
        let store: Arc<dyn handled_store::Store> = Arc::new(handled_store::MemoryStore::new());
        let (a, b) = (Sessions::shared(store.clone()), Sessions::shared(store));
        a.add(session(Duration::from_secs(60))).await.unwrap();
        assert_eq!(b.add(session(Duration::from_secs(60))).await, Err(NotAdded::IdTaken));
        let on_b = b.get(5).await.expect("visible on the other node");
        assert_eq!((on_b.key, on_b.claimed.clone()), ([1; 32], Some((b"TEST/ADMIN".to_vec(), 300))));
        assert!(on_b.identity().is_none());
        let on_a = a.get(5).await.unwrap();
        assert!(on_a.authenticate(&Identity::new(b"TEST/ADMIN".to_vec(), 300)));
        a.save(&on_a).await;
        assert!(b.get(5).await.unwrap().identity().is_some(), "authenticated on one node, known on the other");
        let s = a.get(5).await.unwrap();
        assert!(a.first_use_everywhere(&s, 17).await);
        assert!(!b.first_use_everywhere(&s, 17).await, "a counter replayed to another node is refused");
        b.end(5).await;
        assert!(a.get(5).await.is_none(), "ended everywhere");
        // Used sessions stay alive past their first deadline (idle expiry).
        let short = Session::new(6, [1; 32], Version::V2_10, None, Duration::from_millis(400), false);
        a.add(short).await.unwrap();
        for _ in 0..4 {
            tokio::time::sleep(Duration::from_millis(150)).await;
            assert!(b.get(6).await.is_some(), "renewed by use");
        }
    }
}
