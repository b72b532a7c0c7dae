//! What the resolver counts, read by the server for `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (seconds) of the upstream latency buckets.
pub const LATENCY_BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];

#[derive(Default)]
pub struct Counters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub coalesced: AtomicU64,
    pub stale_served: AtomicU64,
    pub negative_hits: AtomicU64,
    pub upstream_queries: AtomicU64,
    pub upstream_failures: AtomicU64,
    pub busy: AtomicU64,
    /// Background refreshes of entries near the end of their TTL.
    pub prefetches: AtomicU64,
    /// One per bound, and one for slower.
    latency_buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    latency_micros: AtomicU64,
    latency_count: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub hits: u64,
    pub misses: u64,
    pub coalesced: u64,
    pub stale_served: u64,
    pub negative_hits: u64,
    pub upstream_queries: u64,
    pub upstream_failures: u64,
    pub busy: u64,
    pub prefetches: u64,
    pub verification_failures: u64,
    /// Upstream query latencies: per bucket of [`LATENCY_BUCKETS`] and one
    /// for slower (not cumulative), their count and sum.
    pub latency_buckets: Vec<u64>,
    pub latency_count: u64,
    pub latency_sum: Duration,
    /// Exchanges with each server asked (its address and port), at most
    /// `handled_client::sites::MAX_SERVERS` of them and "other".
    pub servers: Vec<(String, handled_client::sites::ServerLatency)>,
    /// Upstream attempts not made: refused by the address policy, past the
    /// walk's budget, sites remembered as unreachable.
    pub guards: handled_client::sites::UpstreamGuards,
    /// Cached answers and their bytes; queries under way.
    pub entries: usize,
    pub bytes: u64,
    pub pending: usize,
}

pub fn add(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    pub fn upstream_took(&self, took: Duration) {
        let secs = took.as_secs_f64();
        let bucket = LATENCY_BUCKETS.iter().position(|b| secs <= *b).unwrap_or(LATENCY_BUCKETS.len());
        add(&self.latency_buckets[bucket]);
        self.latency_micros.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
        add(&self.latency_count);
    }

    pub fn snapshot(&self) -> Snapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Snapshot {
            hits: get(&self.hits),
            misses: get(&self.misses),
            coalesced: get(&self.coalesced),
            stale_served: get(&self.stale_served),
            negative_hits: get(&self.negative_hits),
            upstream_queries: get(&self.upstream_queries),
            upstream_failures: get(&self.upstream_failures),
            busy: get(&self.busy),
            prefetches: get(&self.prefetches),
            latency_buckets: self.latency_buckets.iter().map(get).collect(),
            latency_count: get(&self.latency_count),
            latency_sum: Duration::from_micros(get(&self.latency_micros)),
            ..Snapshot::default()
        }
    }
}
