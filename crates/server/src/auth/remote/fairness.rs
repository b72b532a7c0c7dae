//! Who gets a turn at remote checking. Anyone may claim an identity held
//! elsewhere, and each claim holds a turn until the identity's server answers
//! or the time limit passes, so a few anonymous claims against a slow server
//! could hold every turn and lock the real administrators out. Three rules
//! keep them in:
//!
//! * a prefix whose server failed or was too slow is not asked again for
//!   [`FAILING_FOR`] (negative cache): its claims fail at once;
//! * one prefix holds at most half of the turns at a time;
//! * a quarter of the turns is kept for identities that verified within
//!   [`TRUSTED_FOR`]: claims of strangers never take those.

use handled_proto::handle;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// How long a prefix whose server failed is not asked again.
pub const FAILING_FOR: Duration = Duration::from_secs(30);
/// How long an identity that verified keeps its share of reserved turns.
pub const TRUSTED_FOR: Duration = Duration::from_secs(3600);
/// Entries of each remembered set; the oldest go first.
const MAX_REMEMBERED: usize = 4096;

/// The turns and what is remembered about prefixes and identities.
pub struct Fairness {
    open: Arc<Semaphore>,
    reserved: Arc<Semaphore>,
    per_prefix_max: usize,
    state: Mutex<Remembered>,
}

#[derive(Default)]
struct Remembered {
    /// Checks running per prefix (entries removed at zero).
    running: HashMap<Vec<u8>, usize>,
    /// Prefix → until when it is not asked.
    failing: HashMap<Vec<u8>, Instant>,
    /// `index:handle` → until when it counts as known.
    trusted: HashMap<Vec<u8>, Instant>,
}

/// Why no turn was given.
#[derive(Debug, PartialEq, Eq)]
pub enum NoTurn {
    /// Every turn open to this claim is taken (or its prefix holds its share).
    Busy,
    /// The prefix's server failed within [`FAILING_FOR`].
    Failing,
}

/// A turn: gives back the permit and the prefix's count when dropped.
pub struct Turn<'a> {
    fairness: &'a Fairness,
    prefix: Vec<u8>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut s = self.fairness.lock();
        if let Some(n) = s.running.get_mut(&self.prefix) {
            *n -= 1;
            if *n == 0 {
                s.running.remove(&self.prefix);
            }
        }
    }
}

/// The prefix a handle's checks count against (its prefix handle, upper case).
pub fn prefix_key(h: &[u8]) -> Vec<u8> {
    let canonical = handle::canonical(h);
    handle::prefix_handle(&canonical).to_ascii_uppercase()
}

fn identity_key(h: &[u8], index: i32) -> Vec<u8> {
    let mut key = format!("{index}:").into_bytes();
    key.extend_from_slice(&handle::canonical(h).to_ascii_uppercase());
    key
}

impl Fairness {
    /// For `concurrent` checks at once in all.
    pub fn new(concurrent: usize) -> Self {
        let concurrent = concurrent.max(1);
        let reserved = concurrent / 4;
        Fairness {
            open: Arc::new(Semaphore::new(concurrent - reserved)),
            reserved: Arc::new(Semaphore::new(reserved)),
            per_prefix_max: (concurrent / 2).max(1),
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Remembered> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A turn for checking `index:handle`, waiting at most `wait` for one.
    pub async fn turn(&self, h: &[u8], index: i32, wait: Duration) -> Result<Turn<'_>, NoTurn> {
        let prefix = prefix_key(h);
        let now = Instant::now();
        let trusted = {
            let mut s = self.lock();
            let trusted = s.trusted.get(&identity_key(h, index)).is_some_and(|until| *until > now);
            // A known identity may find its server back before the others do.
            if !trusted {
                match s.failing.get(&prefix) {
                    Some(until) if *until > now => return Err(NoTurn::Failing),
                    Some(_) => {
                        s.failing.remove(&prefix);
                    }
                    None => {}
                }
                if s.running.get(&prefix).copied().unwrap_or(0) >= self.per_prefix_max {
                    return Err(NoTurn::Busy);
                }
            }
            trusted
        };
        let permit = if trusted {
            let open = self.open.clone().acquire_owned();
            let reserved = self.reserved.clone().acquire_owned();
            let either = async {
                tokio::select! {
                    p = open => p,
                    p = reserved => p,
                }
            };
            tokio::time::timeout(wait, either).await
        } else {
            tokio::time::timeout(wait, self.open.clone().acquire_owned()).await
        };
        let Ok(Ok(permit)) = permit else { return Err(NoTurn::Busy) };
        *self.lock().running.entry(prefix.clone()).or_default() += 1;
        Ok(Turn { fairness: self, prefix, _permit: permit })
    }

    /// `index:handle` proved itself: it keeps a share of reserved turns.
    pub fn verified(&self, h: &[u8], index: i32) {
        let mut s = self.lock();
        remember(&mut s.trusted, identity_key(h, index), Instant::now() + TRUSTED_FOR);
    }

    /// The server of `handle`'s prefix failed or did not answer in time.
    pub fn failed(&self, h: &[u8]) {
        let mut s = self.lock();
        remember(&mut s.failing, prefix_key(h), Instant::now() + FAILING_FOR);
    }
}

/// Insert, first dropping what has expired and, if still full, the entry
/// that expires first.
fn remember(map: &mut HashMap<Vec<u8>, Instant>, key: Vec<u8>, until: Instant) {
    if map.len() >= MAX_REMEMBERED && !map.contains_key(&key) {
        let now = Instant::now();
        map.retain(|_, t| *t > now);
        if map.len() >= MAX_REMEMBERED {
            if let Some(first) = map.iter().min_by_key(|(_, t)| **t).map(|(k, _)| k.clone()) {
                map.remove(&first);
            }
        }
    }
    map.insert(key, until);
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_millis(50);

    #[tokio::test]
    async fn strangers_neither_take_the_reserved_turns_nor_all_of_one_prefix() {
        let f = Fairness::new(4);
        // One prefix holds at most half.
        let a = f.turn(b"SLOW/a", 300, WAIT).await.unwrap();
        let b = f.turn(b"SLOW/b", 300, WAIT).await.unwrap();
        assert_eq!(f.turn(b"SLOW/c", 300, WAIT).await.err(), Some(NoTurn::Busy));
        // Strangers of other prefixes get the third open turn, not the reserved one.
        let c = f.turn(b"OTHER/c", 300, WAIT).await.unwrap();
        assert_eq!(f.turn(b"THIRD/d", 300, WAIT).await.err(), Some(NoTurn::Busy));
        // A known administrator still gets in.
        f.verified(b"adm/admin", 300);
        let known = f.turn(b"ADM/ADMIN", 300, WAIT).await.unwrap();
        drop((a, b, c, known));
        assert!(f.lock().running.is_empty(), "counts go back to zero");
    }

    #[tokio::test]
    async fn a_failing_prefix_is_not_asked_again_for_a_while() {
        let f = Fairness::new(4);
        f.failed(b"SLOW/x");
        assert_eq!(f.turn(b"slow/y", 300, WAIT).await.err(), Some(NoTurn::Failing));
        assert!(f.turn(b"FINE/y", 300, WAIT).await.is_ok());
        f.verified(b"SLOW/ADMIN", 300);
        assert!(f.turn(b"SLOW/ADMIN", 300, WAIT).await.is_ok(), "a known identity may try its server again");
        f.lock().failing.insert(prefix_key(b"SLOW/x"), Instant::now());
        assert!(f.turn(b"SLOW/y", 300, WAIT).await.is_ok(), "forgotten after its time");
    }

    #[test]
    fn remembered_sets_are_bounded() {
        let mut map = HashMap::new();
        let now = Instant::now();
        for i in 0..MAX_REMEMBERED + 100 {
            remember(&mut map, i.to_string().into_bytes(), now + Duration::from_secs(i as u64 + 10));
        }
        assert_eq!(map.len(), MAX_REMEMBERED);
        assert!(!map.contains_key(&b"0"[..]), "the one expiring first went");
    }

    #[tokio::test]
    async fn one_turn_in_all_still_serves_strangers() {
        let f = Fairness::new(1);
        assert!(f.turn(b"A/x", 300, WAIT).await.is_ok());
    }
}
