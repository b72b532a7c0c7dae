//! The resolver's answer cache: one entry per handle, bounded in bytes
//! (quick_cache evicts by weight). An entry is fresh for its TTL (the record's
//! shortest value TTL, relative or absolute `ttl_type`, at most `max_ttl`; a
//! negative answer for `negative_ttl`) and may then serve stale for
//! `serve_stale` more while upstream fails (RFC 8767's idea). A positive
//! entry asked for in the last tenth of a long enough TTL is due for a
//! prefetch: refreshed in the background while it is still served, so a
//! popular handle never goes cold (BIND's and Unbound's `prefetch`).

use handled_client::sites::ttl;
use handled_proto::value::HandleValue;
use quick_cache::sync::Cache;
use quick_cache::Weighter;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// What upstream said about a handle.
#[derive(Debug, Clone)]
pub enum Found {
    Values(Arc<[HandleValue]>),
    /// 100: the responsible server (or the root, for its prefix) has no such handle.
    NotFound,
}

#[derive(Debug)]
pub struct Entry {
    pub found: Found,
    pub fresh_until: Instant,
    /// Not served at all after this, even stale.
    pub stale_until: Instant,
    /// While upstream failed lately, stale answers go out without asking
    /// again before this (each asking would cost clients the full timeout).
    pub retry_after: Instant,
    /// From this moment a request for the entry refreshes it in the background.
    prefetch_at: Option<Instant>,
    /// A refresh was started for this entry (one at most: the next comes with its successor).
    prefetch_started: AtomicBool,
    bytes: u64,
}

/// TTLs shorter than this are not prefetched: refreshing a handle every few
/// seconds would cost upstream more than the misses it saves.
pub const PREFETCH_MIN_TTL: Duration = Duration::from_secs(10);

impl Entry {
    pub fn is_fresh(&self, now: Instant) -> bool {
        now < self.fresh_until
    }

    pub fn may_serve_stale(&self, now: Instant) -> bool {
        now < self.stale_until
    }

    /// True once per entry: it is fresh, in the last tenth of its TTL, and no
    /// refresh has been started for it yet.
    pub fn take_prefetch(&self, now: Instant) -> bool {
        self.is_fresh(now)
            && self.prefetch_at.is_some_and(|at| now >= at)
            && !self.prefetch_started.swap(true, Ordering::Relaxed)
    }
}

/// Bytes an entry holds, roughly: what its weight in the cache is.
fn bytes_of(key: &[u8], found: &Found) -> u64 {
    let values = match found {
        Found::Values(values) => values.iter().map(|v| v.value_type.len() + v.data.len() + 64).sum(),
        Found::NotFound => 0,
    };
    (key.len() + values + 96) as u64
}

#[derive(Clone)]
struct ByBytes;

impl Weighter<Vec<u8>, Arc<Entry>> for ByBytes {
    fn weight(&self, _key: &Vec<u8>, entry: &Arc<Entry>) -> u64 {
        entry.bytes.max(1)
    }
}

pub struct AnswerCache {
    entries: Cache<Vec<u8>, Arc<Entry>, ByBytes>,
    capacity: u64,
    max_ttl: Duration,
    negative_ttl: Duration,
    serve_stale: Duration,
}

impl AnswerCache {
    pub fn new(capacity: u64, max_ttl: Duration, negative_ttl: Duration, serve_stale: Duration) -> Self {
        // quick_cache sizes its tables by an estimate of the count.
        let estimate = (capacity / 512).clamp(16, 1 << 22) as usize;
        AnswerCache {
            entries: Cache::with_weighter(estimate, capacity.max(1), ByBytes),
            capacity,
            max_ttl,
            negative_ttl,
            serve_stale,
        }
    }

    pub fn get(&self, key: &[u8]) -> Option<Arc<Entry>> {
        let entry = self.entries.get(key)?;
        if entry.may_serve_stale(Instant::now()) {
            return Some(entry);
        }
        self.entries.remove(key);
        None
    }

    /// Keep `found` for `key`, as of `now`; not when its TTL is zero or it is
    /// too large for the cache (over an eighth of it).
    pub fn put(&self, key: Vec<u8>, found: Found, now: Instant) {
        let ttl = match &found {
            Found::Values(values) => ttl(values, self.max_ttl),
            Found::NotFound => self.negative_ttl,
        };
        let bytes = bytes_of(&key, &found);
        if ttl.is_zero() || bytes > self.capacity / 8 {
            return;
        }
        let fresh_until = now + ttl;
        let prefetch_at =
            (matches!(found, Found::Values(_)) && ttl >= PREFETCH_MIN_TTL).then(|| fresh_until - ttl / 10);
        let entry = Entry {
            found,
            fresh_until,
            stale_until: fresh_until + self.serve_stale,
            retry_after: now,
            prefetch_at,
            prefetch_started: AtomicBool::new(false),
            bytes,
        };
        self.entries.insert(key, Arc::new(entry));
    }

    /// Upstream failed: serve `entry` stale without asking until `retry_after`.
    pub fn hold_stale(&self, key: &[u8], entry: &Entry, retry_after: Instant) {
        let held = Entry {
            found: entry.found.clone(),
            retry_after,
            prefetch_at: None,
            prefetch_started: AtomicBool::new(true),
            ..*entry
        };
        self.entries.insert(key.to_vec(), Arc::new(held));
    }

    /// Entries and their bytes.
    pub fn usage(&self) -> (usize, u64) {
        (self.entries.len(), self.entries.weight())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(ttl: i32, bytes: usize) -> Found {
        let mut v = HandleValue::new(1, "URL", vec![b'x'; bytes]);
        v.ttl = ttl;
        Found::Values(vec![v].into())
    }

    /// A peer naming ever new handles cannot grow the cache past its bytes.
    #[test]
    fn bounded_in_bytes() {
        let cache = AnswerCache::new(64 << 10, Duration::from_secs(60), Duration::from_secs(5), Duration::ZERO);
        let now = Instant::now();
        for n in 0..5000 {
            cache.put(format!("P/{n}").into_bytes(), values(60, 200), now);
        }
        let (count, bytes) = cache.usage();
        assert!(bytes <= 64 << 10, "{count} entries, {bytes} bytes");
        assert!(count > 50, "{count}");
        cache.put(b"P/huge".to_vec(), values(60, 16 << 10), now);
        assert!(cache.get(b"P/huge").is_none(), "an entry over an eighth of the cache is not kept");
        cache.put(b"P/zero".to_vec(), values(0, 10), now);
        assert!(cache.get(b"P/zero").is_none(), "a zero TTL is not kept");
    }

    #[tokio::test(start_paused = true)]
    async fn fresh_then_stale_then_gone() {
        let cache = AnswerCache::new(1 << 20, Duration::from_secs(60), Duration::from_secs(5), Duration::from_secs(30));
        let now = Instant::now();
        cache.put(b"P/a".to_vec(), values(10, 10), now);
        cache.put(b"P/missing".to_vec(), Found::NotFound, now);
        assert!(cache.get(b"P/a").unwrap().is_fresh(Instant::now()));
        assert!(cache.get(b"P/missing").unwrap().is_fresh(Instant::now()));
        tokio::time::advance(Duration::from_secs(6)).await;
        let negative = cache.get(b"P/missing").unwrap();
        assert!(!negative.is_fresh(Instant::now()), "negative answers last negative_ttl");
        tokio::time::advance(Duration::from_secs(5)).await;
        let stale = cache.get(b"P/a").unwrap();
        assert!(!stale.is_fresh(Instant::now()) && stale.may_serve_stale(Instant::now()));
        tokio::time::advance(Duration::from_secs(30)).await;
        assert!(cache.get(b"P/a").is_none(), "past the stale window");
        assert!(cache.get(b"P/missing").is_none());
        assert_eq!(cache.usage().0, 0, "entries past their stale window go when read");
    }

    #[tokio::test(start_paused = true)]
    async fn prefetch_due_once_in_the_last_tenth() {
        let cache =
            AnswerCache::new(1 << 20, Duration::from_secs(600), Duration::from_secs(5), Duration::from_secs(30));
        let now = Instant::now();
        cache.put(b"P/long".to_vec(), values(100, 10), now);
        cache.put(b"P/short".to_vec(), values(5, 10), now);
        cache.put(b"P/missing".to_vec(), Found::NotFound, now);
        tokio::time::advance(Duration::from_secs(89)).await;
        assert!(!cache.get(b"P/long").unwrap().take_prefetch(Instant::now()), "not before the last tenth");
        tokio::time::advance(Duration::from_secs(2)).await;
        let long = cache.get(b"P/long").unwrap();
        assert!(long.take_prefetch(Instant::now()), "due at 91 s of 100");
        assert!(!long.take_prefetch(Instant::now()), "one refresh per entry");
        let (short, missing) = (cache.get(b"P/short"), cache.get(b"P/missing"));
        assert!(short.is_none() || !short.unwrap().take_prefetch(Instant::now()), "TTLs under 10 s are not prefetched");
        assert!(missing.is_none() || !missing.unwrap().take_prefetch(Instant::now()), "nor negative answers");
        tokio::time::advance(Duration::from_secs(10)).await;
        let expired = cache.get(b"P/long").unwrap();
        assert!(!expired.take_prefetch(Instant::now()), "a stale entry is fetched by the miss path, not prefetched");
    }
}
