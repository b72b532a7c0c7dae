//! Server-side sessions (§5.7, §7.5): DH-agreed keys, the identity the session
//! was opened for and whether it has proven it, replay protection on client
//! counters, our own counter for MACed responses, and idle expiry.

use crate::auth::Identity;
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
    pub fn new(id: i32, key: [u8; 32], version: Version, claimed: Option<(Vec<u8>, i32)>, timeout: Duration, encrypt_all: bool) -> Self {
        Session {
            id,
            key,
            version,
            claimed,
            timeout,
            encrypt_all,
            server_counter: AtomicI32::new(1),
            live: Mutex::new(Live { last_used: Instant::now(), authenticated: None, seen: BTreeSet::new(), floor: None }),
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
}

pub struct Sessions {
    map: Mutex<HashMap<i32, Arc<Session>>>,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions { map: Mutex::new(HashMap::new()) }
    }
}

impl Sessions {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A live session by id; an expired one is dropped and reported absent.
    pub fn get(&self, id: i32) -> Option<Arc<Session>> {
        let mut map = self.map();
        let s = map.get(&id)?.clone();
        if s.expired(Instant::now()) {
            map.remove(&id);
            return None;
        }
        Some(s)
    }

    /// Add a session; false when the table is full of live sessions.
    pub fn insert(&self, session: Session) -> bool {
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

    #[test]
    fn sessions_expire_when_idle() {
        let t = Sessions::default();
        t.insert(session(Duration::from_millis(1)));
        std::thread::sleep(Duration::from_millis(5));
        assert!(t.get(5).is_none());
        assert!(!t.contains(5));
    }
}
