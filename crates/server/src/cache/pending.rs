//! Keys with a write in flight (docs/cluster.md, "Write pending"): while a key
//! is marked, the cache neither answers it nor fills it, so that once a read
//! anywhere has seen a write's new state in the store, no cache that has not
//! yet heard of the write can answer the old one. A write marks what it may
//! change before it runs (on its own node and on every peer with a live lease)
//! and lifts the mark with its invalidation. A mark whose lift never comes (a
//! writer that died mid-write) lapses after [`LAPSE`].
//!
//! Marks are counted (writes to one key may overlap) and bounded in count and
//! bytes; past the bounds the whole cache counts as marked until [`LAPSE`]
//! has passed, which costs hits, never freshness.

use super::keys::Change;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a mark holds without its lift: far past the longest a store write
/// waits (`cassandra_request_timeout_ms`, 5 s by default).
pub const LAPSE: Duration = Duration::from_secs(30);
/// Most keys marked at once.
const MAX_KEYS: usize = 65_536;
/// Most bytes of marked keys at once.
const MAX_BYTES: usize = 16 << 20;

#[derive(Default)]
pub struct Pending {
    /// Any mark at all (the read path's one check while none is).
    any: AtomicBool,
    marks: Mutex<Marks>,
}

#[derive(Default)]
struct Marks {
    keys: HashMap<Vec<u8>, Mark>,
    bytes: usize,
    /// Writes that may change anything (homing, a change too large to name).
    all: Option<Mark>,
    /// The bounds were passed: everything counts as marked until then.
    overflow_until: Option<Instant>,
    /// Lapsed marks are swept at most this often (a sweep walks every mark;
    /// reads must not, while writes are in flight).
    next_sweep: Option<Instant>,
}

/// How often lapsed marks are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

#[derive(Clone, Copy)]
struct Mark {
    writes: u32,
    until: Instant,
}

impl Mark {
    fn add(mark: Option<Mark>, now: Instant) -> Mark {
        let writes = mark.filter(|m| m.until > now).map_or(0, |m| m.writes);
        Mark { writes: writes.saturating_add(1), until: now + LAPSE }
    }

    /// One write fewer; `None` when none is left.
    fn lift(self) -> Option<Mark> {
        (self.writes > 1).then(|| Mark { writes: self.writes - 1, ..self })
    }
}

impl Pending {
    /// A write that may change what `change` names is about to run.
    pub fn mark(&self, change: &Change) {
        let now = Instant::now();
        let mut m = self.marks.lock();
        match change {
            Change::All => m.all = Some(Mark::add(m.all, now)),
            Change::Keys(keys) => {
                for key in keys {
                    if let Some(mark) = m.keys.get_mut(key.as_slice()) {
                        *mark = Mark::add(Some(*mark), now);
                    } else if m.keys.len() < MAX_KEYS && m.bytes + key.len() <= MAX_BYTES {
                        m.bytes += key.len();
                        m.keys.insert(key.clone(), Mark::add(None, now));
                    } else {
                        m.overflow_until = Some(now + LAPSE);
                    }
                }
            }
        }
        self.any.store(true, Ordering::Release);
    }

    /// That write ended (whatever its outcome). A lift without its mark (one
    /// that lapsed or overflowed, or was made before this node joined) does nothing.
    pub fn lift(&self, change: &Change) {
        let mut m = self.marks.lock();
        match change {
            Change::All => m.all = m.all.and_then(Mark::lift),
            Change::Keys(keys) => {
                for key in keys {
                    if let Some(mark) = m.keys.get(key.as_slice()).copied() {
                        match mark.lift() {
                            Some(left) => *m.keys.get_mut(key.as_slice()).expect("just read") = left,
                            None => m.forget(key),
                        }
                    }
                }
            }
        }
        self.any.store(m.in_use(), Ordering::Release);
    }

    /// Is `key` marked (not to be answered from the cache, nor filled)?
    pub fn holds(&self, key: &[u8]) -> bool {
        if !self.any.load(Ordering::Acquire) {
            return false;
        }
        let now = Instant::now();
        let mut m = self.marks.lock();
        if m.overflow_until.is_some_and(|t| t > now) || m.all.is_some_and(|a| a.until > now) {
            return true;
        }
        let held = match m.keys.get(key) {
            Some(mark) if mark.until > now => true,
            Some(_) => {
                m.forget(key);
                false
            }
            None => false,
        };
        if !held {
            m.sweep(now);
            self.any.store(m.in_use(), Ordering::Release);
        }
        held
    }
}

impl Marks {
    fn forget(&mut self, key: &[u8]) {
        if self.keys.remove(key).is_some() {
            self.bytes -= key.len();
        }
    }

    /// Drop what lapsed, at most once every [`SWEEP_EVERY`].
    fn sweep(&mut self, now: Instant) {
        if self.next_sweep.is_some_and(|t| t > now) {
            return;
        }
        self.next_sweep = Some(now + SWEEP_EVERY);
        if self.overflow_until.is_some_and(|t| t <= now) {
            self.overflow_until = None;
        }
        if self.all.is_some_and(|a| a.until <= now) {
            self.all = None;
        }
        if self.keys.values().any(|m| m.until <= now) {
            self.keys.retain(|_, m| m.until > now);
            self.bytes = self.keys.keys().map(Vec::len).sum();
        }
    }

    fn in_use(&self) -> bool {
        !self.keys.is_empty() || self.all.is_some() || self.overflow_until.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Change {
        Change::Keys(k.iter().map(|k| k.as_bytes().to_vec()).collect())
    }

    #[test]
    fn marks_count_overlapping_writes_and_lifts_end_them() {
        let p = Pending::default();
        assert!(!p.holds(b"a"));
        p.mark(&keys(&["a", "b"]));
        p.mark(&keys(&["a"]));
        assert!(p.holds(b"a") && p.holds(b"b") && !p.holds(b"c"));
        p.lift(&keys(&["a", "b"]));
        assert!(p.holds(b"a"), "the second write to a is still running");
        assert!(!p.holds(b"b"));
        p.lift(&keys(&["a"]));
        assert!(!p.holds(b"a"));
        p.lift(&keys(&["a"]));
        assert!(!p.any.load(Ordering::Acquire), "a lift without its mark does nothing");
        p.mark(&Change::All);
        assert!(p.holds(b"anything"));
        p.lift(&Change::All);
        assert!(!p.holds(b"anything"));
    }

    #[test]
    fn past_the_bounds_everything_is_marked_until_the_lapse() {
        let p = Pending::default();
        let many: Vec<Vec<u8>> = (0..=MAX_KEYS as u32).map(|i| i.to_be_bytes().to_vec()).collect();
        p.mark(&Change::Keys(many.clone()));
        assert!(p.holds(b"never written"), "overflowed: nothing answered from the cache");
        p.lift(&Change::Keys(many));
        assert!(p.holds(b"never written"), "an overflow lasts until it lapses");
        assert!(p.marks.lock().keys.is_empty());
    }

    #[test]
    fn a_mark_without_its_lift_lapses() {
        let p = Pending::default();
        p.mark(&keys(&["a"]));
        p.marks.lock().keys.get_mut(b"a".as_slice()).unwrap().until = Instant::now() - Duration::from_millis(1);
        assert!(!p.holds(b"a"));
        assert!(!p.any.load(Ordering::Acquire));
    }

    #[test]
    fn lapsed_marks_are_swept_at_most_once_a_second_by_reads_of_other_keys() {
        let p = Pending::default();
        p.mark(&keys(&["a", "b", "c"]));
        let lapse =
            |k: &[u8]| p.marks.lock().keys.get_mut(k).unwrap().until = Instant::now() - Duration::from_millis(1);
        lapse(b"b");
        assert!(!p.holds(b"x"), "a sweep");
        assert_eq!(p.marks.lock().keys.len(), 2, "b swept");
        lapse(b"c");
        assert!(!p.holds(b"x"), "no sweep so soon");
        assert_eq!(p.marks.lock().keys.len(), 2, "c left until the next sweep");
        assert!(!p.holds(b"c"), "but a lapsed mark never holds");
        assert!(p.holds(b"a"));
    }
}
