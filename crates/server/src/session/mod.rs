//! Server-side sessions (§5.7, §7.5): DH-agreed keys, the identity the session
//! was opened for and whether it has proven it, replay protection on client
//! counters, our own counter for MACed responses, and idle expiry.
//!
//! Anyone may set up a session, so until it proves the identity it was opened
//! for, a session is cheap and short-lived: it lives at most
//! `unauthenticated_session_secs` from setup, and is charged to its peer and
//! to a byte budget ([`crate::quota`]). A peer beyond its share is refused; a
//! full budget makes room by ending the oldest unauthenticated session, so a
//! flood of setups never locks out a client that goes on to authenticate.

mod stored;

use crate::auth::Identity;
use crate::cluster::SharedTable;
use crate::quota::{Ledger, OverQuota, Quota};
use handled_proto::envelope::Version;
use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Client counters remembered per session (Java keeps about 200).
const REPLAY_WINDOW: usize = 256;
/// Most live sessions; beyond it expired ones are swept, then setup is refused.
const MAX_SESSIONS: usize = 200_000;
/// What an unauthenticated session is charged besides its claimed identity:
/// the session itself, its map entry and a full replay window.
const SESSION_COST: usize = 4096;
/// Longest identity handle a session may claim (the protocol's handle limit).
pub const MAX_IDENTITY_LEN: usize = 2048;

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
    /// When this node made it (set up here, or first seen from another node).
    created: Instant,
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
            created: Instant::now(),
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

    /// Expired, or unauthenticated for longer than `unauthenticated_life`.
    fn stale(&self, now: Instant, unauthenticated_life: Duration) -> bool {
        self.expired(now)
            || (self.identity().is_none() && now.saturating_duration_since(self.created) > unauthenticated_life)
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

/// How unauthenticated sessions are bounded.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    pub unauthenticated: Quota,
    /// Longest life of a session that has not authenticated, from its setup.
    pub unauthenticated_life: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            unauthenticated: Quota { max_bytes: 16 << 20, per_peer: 256 },
            unauthenticated_life: Duration::from_secs(30),
        }
    }
}

/// The sessions this node holds, and the charges of its unauthenticated ones.
struct Local {
    map: HashMap<i32, Arc<Session>>,
    unauthenticated: Ledger<i32>,
}

pub struct Sessions {
    local: Mutex<Local>,
    limits: SessionLimits,
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
        Sessions::new(SessionLimits::default())
    }
}

/// Why a session was not added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotAdded {
    /// The table is full of authenticated sessions, or the peer holds its share.
    Full,
    /// Another node has a session with this id: pick another.
    IdTaken,
    Store,
}

impl Sessions {
    pub fn new(limits: SessionLimits) -> Self {
        let local = Local { map: HashMap::new(), unauthenticated: Ledger::new(limits.unauthenticated) };
        Sessions { local: Mutex::new(local), limits, shared: None, shared_counters: None }
    }

    /// Sessions continued on any node sharing `store`.
    pub fn shared(limits: SessionLimits, store: Arc<dyn handled_store::DocumentStore>) -> Self {
        Sessions {
            shared: Some(SharedTable::new(store.clone(), "auth-session")),
            shared_counters: Some(SharedTable::new(store, "auth-session-counter")),
            ..Sessions::new(limits)
        }
    }

    fn local(&self) -> std::sync::MutexGuard<'_, Local> {
        let mut local = self.local.lock().unwrap_or_else(|e| e.into_inner());
        local.expire_unauthenticated(self.limits.unauthenticated_life);
        local
    }

    /// How long `session` lives idle: its timeout once authenticated, and
    /// before that at most the life of an unauthenticated session.
    fn life(&self, session: &Session) -> Duration {
        match session.identity() {
            Some(_) => session.timeout,
            None => session.timeout.min(self.limits.unauthenticated_life),
        }
    }

    /// Forget expired unauthenticated sessions (also done on every access).
    /// Also those a shared store's other nodes opened, which this node only
    /// caches (its charges cover only its own).
    pub fn sweep(&self) {
        let mut local = self.local();
        let (now, life) = (Instant::now(), self.limits.unauthenticated_life);
        local.map.retain(|_, s| !s.stale(now, life));
    }

    /// Unauthenticated sessions this node holds, and the bytes charged for them.
    pub fn unauthenticated(&self) -> (usize, usize) {
        let local = self.local();
        (local.unauthenticated.len(), local.unauthenticated.bytes())
    }

    /// A live session by id; an expired one is dropped and reported absent.
    /// Shared sessions are read from the store (another node may have opened,
    /// authenticated, renewed or ended it).
    pub async fn get(&self, id: i32) -> Option<Arc<Session>> {
        if let Some(shared) = &self.shared {
            let stored = match shared.get_with_deadline(&id.to_be_bytes()).await {
                Ok(Some((b, left))) => {
                    let s = stored::decode(&b);
                    // Idle expiry: renewed on use, at most once per half-life
                    // (an unauthenticated session is not: its life is short).
                    if let Some(s) = s.as_ref().filter(|s| s.identity().is_some() && left < s.timeout / 2) {
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
                self.local().forget(id);
                return None;
            };
            let mut local = self.local();
            let session = local.map.entry(id).or_insert_with(|| Arc::new(stored.clone_shared())).clone();
            if let (None, Some(identity)) = (session.identity(), stored.identity()) {
                session.authenticate(&identity);
                local.authenticated(id);
            }
            session.touch();
            return Some(session);
        }
        let mut local = self.local();
        let s = local.map.get(&id)?.clone();
        if s.expired(Instant::now()) {
            local.forget(id);
            return None;
        }
        Some(s)
    }

    /// Add a session set up by `peer`.
    pub async fn add(&self, session: Session, peer: IpAddr) -> Result<(), NotAdded> {
        let id = session.id;
        let session = Arc::new(session);
        self.insert(session.clone(), peer)?;
        if let Some(shared) = &self.shared {
            let refused = match shared.create(&id.to_be_bytes(), &stored::encode(&session), self.life(&session)).await {
                Ok(true) => return Ok(()),
                Ok(false) => NotAdded::IdTaken,
                Err(e) => {
                    tracing::warn!("shared session not stored: {e}");
                    NotAdded::Store
                }
            };
            self.local().forget(id);
            return Err(refused);
        }
        Ok(())
    }

    /// Keep a session's proven identity (and renew its idle deadline) where all
    /// nodes see it. Once authenticated it no longer counts as unauthenticated.
    pub async fn save(&self, session: &Session) {
        if session.identity().is_some() {
            self.local().authenticated(session.id);
        }
        if let Some(shared) = &self.shared {
            let life = self.life(session);
            if let Err(e) = shared.put(&session.id.to_be_bytes(), &stored::encode(session), life).await {
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
        self.local().forget(id);
        if let Some(shared) = &self.shared {
            if let Err(e) = shared.remove(&id.to_be_bytes()).await {
                tracing::warn!("shared session not removed: {e}");
            }
        }
    }

    /// Add a new (unauthenticated) session locally, charged to `peer`. A full
    /// budget ends the oldest unauthenticated session to make room.
    fn insert(&self, session: Arc<Session>, peer: IpAddr) -> Result<(), NotAdded> {
        let mut local = self.local();
        if local.map.len() >= MAX_SESSIONS {
            let now = Instant::now();
            let life = self.limits.unauthenticated_life;
            local.map.retain(|_, s| !s.stale(now, life));
            if local.map.len() >= MAX_SESSIONS {
                return Err(NotAdded::Full);
            }
        }
        let cost = SESSION_COST + session.claimed.as_ref().map_or(0, |(h, _)| h.len());
        let Local { map, unauthenticated: ledger } = &mut *local;
        while session.identity().is_none() {
            match ledger.charge(session.id, peer, cost, Instant::now()) {
                Ok(()) => break,
                Err(OverQuota::Peer) => {
                    tracing::debug!("session setup refused: {peer} holds its share of unauthenticated sessions");
                    return Err(NotAdded::Full);
                }
                Err(OverQuota::Bytes) => {
                    let Some(oldest) = ledger.oldest() else { return Err(NotAdded::Full) };
                    ledger.release(&oldest);
                    map.remove(&oldest);
                }
            }
        }
        map.insert(session.id, session);
        Ok(())
    }

    pub fn contains(&self, id: i32) -> bool {
        self.local().map.contains_key(&id)
    }

    pub fn remove(&self, id: i32) -> bool {
        self.local().forget(id)
    }
}

impl Local {
    fn expire_unauthenticated(&mut self, life: Duration) {
        for id in self.unauthenticated.expire(life, Instant::now()) {
            self.map.remove(&id);
        }
        if self.map.len() < self.map.capacity() / 4 {
            self.map.shrink_to_fit();
        }
    }

    /// The session proved its identity: no longer charged as unauthenticated.
    fn authenticated(&mut self, id: i32) {
        self.unauthenticated.release(&id);
    }

    fn forget(&mut self, id: i32) -> bool {
        self.unauthenticated.release(&id);
        self.map.remove(&id).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(timeout: Duration) -> Session {
        numbered(5, timeout)
    }

    fn numbered(id: i32, timeout: Duration) -> Session {
        Session::new(id, [1; 32], Version::V2_10, Some((b"TEST/ADMIN".to_vec(), 300)), timeout, false)
    }

    fn peer(n: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, n])
    }

    fn admin() -> Identity {
        Identity::new(b"TEST/ADMIN".to_vec(), 300)
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
        t.add(session(Duration::from_millis(1)), peer(1)).await.unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(t.get(5).await.is_none());
        assert!(!t.contains(5));
    }

    #[tokio::test]
    async fn a_shared_session_continues_on_another_node() {
        let store: Arc<dyn handled_store::Store> = Arc::new(handled_store::MemoryStore::new());
        let limits = SessionLimits::default();
        let (a, b) = (Sessions::shared(limits, store.clone()), Sessions::shared(limits, store));
        a.add(session(Duration::from_secs(60)), peer(1)).await.unwrap();
        assert_eq!(b.add(session(Duration::from_secs(60)), peer(1)).await, Err(NotAdded::IdTaken));
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
        // A node's cache of another node's unauthenticated session goes with age.
        let quick = SessionLimits { unauthenticated_life: Duration::from_millis(50), ..limits };
        let c = Sessions::shared(quick, Arc::new(handled_store::MemoryStore::new()));
        c.local().map.insert(9, Arc::new(numbered(9, Duration::from_secs(3600))));
        tokio::time::sleep(Duration::from_millis(60)).await;
        c.sweep();
        assert!(!c.contains(9), "swept although it was never charged here");
        // Used (authenticated) sessions stay alive past their first deadline (idle expiry).
        let short = numbered(6, Duration::from_millis(400));
        short.authenticate(&admin());
        a.add(short, peer(1)).await.unwrap();
        for _ in 0..4 {
            tokio::time::sleep(Duration::from_millis(150)).await;
            assert!(b.get(6).await.is_some(), "renewed by use");
        }
    }

    /// F4: anonymous DH setups were kept up to 24 h, 200,000 of them, with
    /// identities of any size (8k setups: 1.9 GB), and a full table refused
    /// everyone. Unauthenticated sessions are now bounded per peer and in
    /// bytes, live briefly, and a flood ends the oldest of them, never an
    /// authenticated one, and never locks out a new client.
    #[tokio::test]
    async fn unauthenticated_sessions_are_bounded_short_lived_and_cannot_lock_out() {
        let life = Duration::from_millis(300);
        let budget = 4 * 8 * SESSION_COST; // room for ~31 unauthenticated sessions
        let limits =
            SessionLimits { unauthenticated: Quota { max_bytes: budget, per_peer: 3 }, unauthenticated_life: life };
        let t = Sessions::new(limits);
        let proven = numbered(1000, Duration::from_secs(3600));
        t.add(proven, peer(99)).await.unwrap();
        let proven = t.get(1000).await.unwrap();
        assert!(proven.authenticate(&admin()));
        t.save(&proven).await;
        assert_eq!(t.unauthenticated().0, 0, "an authenticated session is not charged");
        for id in 1..=3 {
            t.add(numbered(id, Duration::from_secs(86_400)), peer(1)).await.unwrap();
        }
        assert_eq!(t.add(numbered(4, Duration::from_secs(86_400)), peer(1)).await, Err(NotAdded::Full), "its share");
        for n in 2..=40u8 {
            for k in 0..3 {
                let id = i32::from(n) * 10 + k;
                t.add(numbered(id, Duration::from_secs(86_400)), peer(n)).await.expect("a flood never locks out");
            }
        }
        let (count, bytes) = t.unauthenticated();
        assert!(count < 40 && bytes <= budget, "{count} unauthenticated sessions, {bytes} bytes");
        assert!(t.get(1).await.is_none(), "the oldest unauthenticated session made room");
        assert!(t.get(402).await.is_some(), "the newest is there");
        assert!(t.get(1000).await.is_some(), "the authenticated session stays");
        tokio::time::sleep(life).await;
        t.sweep();
        assert_eq!(t.unauthenticated(), (0, 0), "unauthenticated sessions live briefly, asked-for 24 h or not");
        assert!(t.get(402).await.is_none());
        assert!(t.get(1000).await.is_some(), "the authenticated one lives its timeout");
    }
}
