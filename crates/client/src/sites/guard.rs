//! What one walk may cost upstream, and what failed lately. A prefix's site
//! records may name 16 sites (32 with `alt_addr`), each with UDP, TCP and
//! HTTP interfaces, tried in two rounds: without a bound one lookup opened
//! dozens of connections to addresses of the prefix owner's choosing, and the
//! next handle of the prefix did it again. So a walk makes at most a fixed
//! number of attempts (one per protocol and address asked, the root's
//! included), and a set of sites none of which answered is not asked again for
//! [`UNREACHABLE_FOR`].

use handled_proto::data::site::SiteInfo;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// How long sites that did not answer are not asked again.
pub const UNREACHABLE_FOR: Duration = Duration::from_secs(5);
/// Site sets remembered as unreachable, at most (the soonest to expire go first).
const MAX_REMEMBERED: usize = 4096;
/// Upstream attempts one walk may make, by default (`[resolver] upstream_attempts`).
pub const DEFAULT_ATTEMPTS: u32 = 8;

/// One walk: its deadline and the attempts it has left.
pub struct Walk {
    deadline: Instant,
    attempts: u32,
    left: AtomicU32,
    cut: AtomicBool,
}

impl Walk {
    pub(super) fn new(deadline: Instant, attempts: u32) -> Self {
        Walk { deadline, attempts, left: AtomicU32::new(attempts), cut: AtomicBool::new(false) }
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Take one attempt; false when they are spent.
    pub(super) fn take_attempt(&self) -> bool {
        self.left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok()
    }

    pub(super) fn spent(&self) -> bool {
        self.left.load(Ordering::Relaxed) == 0
    }

    /// Count the walk as cut short by its budget, once however often it is found spent.
    pub(super) fn count_cut(&self, counters: &GuardCounters) {
        if !self.cut.swap(true, Ordering::Relaxed) {
            counters.cut.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The budget, for messages.
    pub(super) fn attempts(&self) -> u32 {
        self.attempts
    }
}

/// Upstream attempts not made, counted (metrics).
#[derive(Default)]
pub(super) struct GuardCounters {
    pub refused: AtomicU64,
    pub cut: AtomicU64,
    pub skipped: AtomicU64,
}

/// [`GuardCounters`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpstreamGuards {
    /// Addresses not asked: refused by the address policy.
    pub refused_by_policy: u64,
    /// Walks stopped because their budget of attempts was spent.
    pub cut_by_budget: u64,
    /// Lookups not sent: their sites failed within [`UNREACHABLE_FOR`].
    pub skipped_unreachable: u64,
}

impl GuardCounters {
    pub(super) fn snapshot(&self) -> UpstreamGuards {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        UpstreamGuards {
            refused_by_policy: get(&self.refused),
            cut_by_budget: get(&self.cut),
            skipped_unreachable: get(&self.skipped),
        }
    }
}

/// Site sets (by a keyed hash of their records) none of which answered lately.
#[derive(Default)]
pub(super) struct Unreachable {
    hasher: RandomState,
    until: Mutex<HashMap<u64, Instant>>,
}

impl Unreachable {
    pub(super) fn key(&self, sites: &[SiteInfo]) -> u64 {
        self.hasher.hash_one(sites)
    }

    fn until(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Instant>> {
        self.until.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn is_remembered(&self, key: u64) -> bool {
        let now = Instant::now();
        let mut until = self.until();
        match until.get(&key) {
            Some(t) if *t > now => true,
            Some(_) => {
                until.remove(&key);
                false
            }
            None => false,
        }
    }

    fn remember(&self, key: u64) {
        let now = Instant::now();
        let mut until = self.until();
        if until.len() >= MAX_REMEMBERED {
            until.retain(|_, t| *t > now);
        }
        if until.len() >= MAX_REMEMBERED {
            if let Some(soonest) = until.iter().min_by_key(|(_, t)| **t).map(|(k, _)| *k) {
                until.remove(&soonest);
            }
        }
        until.insert(key, now + UNREACHABLE_FOR);
    }

    /// Marks a set as tried: remembered as unreachable when dropped after an
    /// attempt failed and none answered. A walk cancelled before any attempt
    /// failed (its client gone) leaves nothing behind, so a client cannot
    /// make a working prefix look dead by hanging up.
    pub(super) fn trying(&self, key: u64) -> Trying<'_> {
        Trying { memory: self, key, failed: false, answered: false }
    }
}

pub(super) struct Trying<'a> {
    memory: &'a Unreachable,
    key: u64,
    pub failed: bool,
    pub answered: bool,
}

impl Drop for Trying<'_> {
    fn drop(&mut self) {
        if self.failed && !self.answered {
            self.memory.remember(self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_has_a_fixed_number_of_attempts() {
        let walk = Walk::new(Instant::now(), 3);
        assert!((0..3).all(|_| walk.take_attempt()));
        assert!(!walk.take_attempt() && walk.spent());
    }

    #[tokio::test]
    async fn failed_sets_are_remembered_briefly_and_within_a_bound() {
        let memory = Unreachable::default();
        let site = super::super::testing::site(1, vec![]);
        let key = memory.key(std::slice::from_ref(&site));
        drop(memory.trying(key));
        assert!(!memory.is_remembered(key), "nothing failed: a cancelled walk");
        let mut failed = memory.trying(key);
        failed.failed = true;
        drop(failed);
        assert!(memory.is_remembered(key));
        let mut answered = memory.trying(7);
        answered.failed = true;
        answered.answered = true;
        drop(answered);
        assert!(!memory.is_remembered(7), "another site of the set answered");
        for k in 0..MAX_REMEMBERED as u64 + 10 {
            memory.remember(k + 100);
        }
        assert!(memory.until().len() <= MAX_REMEMBERED);
    }
}
