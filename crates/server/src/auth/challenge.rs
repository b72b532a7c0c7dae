//! Pending challenges (§5.1, §7.5): what was asked, the nonce sent, and when,
//! keyed by challenge id; entries expire after the configured time.

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
}

pub struct Challenges {
    pending: Mutex<HashMap<i32, Pending>>,
    ttl: Duration,
}

impl Challenges {
    pub fn new(ttl: Duration) -> Self {
        Challenges { pending: Mutex::new(HashMap::new()), ttl }
    }

    /// Remember a challenge under `id` (replacing an older one for the same id,
    /// as a session has one outstanding challenge). False when the table is full.
    pub fn insert(&self, id: i32, pending: Pending) -> bool {
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

    /// Take the challenge for `id` if it is still valid; an answer uses it up.
    pub fn take(&self, id: i32) -> Option<Pending> {
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

    #[test]
    fn answers_use_challenges_up_and_they_expire() {
        let c = Challenges::new(Duration::from_secs(60));
        assert!(c.insert(7, pending()));
        assert!(c.take(7).is_some());
        assert!(c.take(7).is_none(), "an answer can't be replayed");
        let short = Challenges::new(Duration::from_millis(1));
        short.insert(8, pending());
        std::thread::sleep(Duration::from_millis(5));
        assert!(short.take(8).is_none());
    }
}
