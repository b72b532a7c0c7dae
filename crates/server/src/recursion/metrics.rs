//! The resolver's figures in `/metrics` (`handled_resolver_*`), read at
//! every scrape from the offer in force (a reload that renews the resolver
//! starts its counters again, which Prometheus reads as a reset).

use super::Recursion;
use crate::metrics::{counter, cumulative, gauge};
use handled_resolver::metrics::LATENCY_BUCKETS;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// The upstream server an exchange went to (address:port; "other" past the bound).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabel {
    server: String,
}

pub(super) fn register(r: &mut Registry, recursion: &Recursion) {
    let Some(offer) = recursion.current() else {
        return;
    };
    let s = offer.resolver.snapshot();
    let counters = [
        ("resolver_hits", "Handles of other services answered from the resolver's cache", s.hits),
        ("resolver_misses", "Resolver lookups that asked upstream (or joined a query under way)", s.misses),
        ("resolver_coalesced", "Lookups answered by a query another client started", s.coalesced),
        ("resolver_stale_served", "Answers served past their TTL while upstream failed", s.stale_served),
        ("resolver_negative_hits", "\"Handle not found\" answered from the cache", s.negative_hits),
        ("resolver_upstream_queries", "Handles asked upstream", s.upstream_queries),
        ("resolver_upstream_failures", "Upstream queries no site answered (in time, verifiably)", s.upstream_failures),
        ("resolver_busy", "Lookups refused: too many queries under way", s.busy),
        ("resolver_prefetches", "Cached answers refreshed in the background (prefetch near the end of their TTL; cache-only UDP answers past it)", s.prefetches),
        (
            "resolver_rate_limited",
            "Lookups needing an upstream query refused by the client's rate limit",
            recursion.rate_limited(),
        ),
        (
            "resolver_verification_failures",
            "Upstream replies whose signature did not verify with the site's published key",
            s.verification_failures,
        ),
    ];
    let guards = [
        (
            "resolver_upstream_refused",
            "Upstream addresses not asked: refused by the address policy (not global, not the root's class, deny_upstream)",
            s.guards.refused_by_policy,
        ),
        ("resolver_upstream_cut", "Lookups stopped because their upstream_attempts were spent", s.guards.cut_by_budget),
        (
            "resolver_upstream_skipped",
            "Lookups not sent: their sites did not answer within the last few seconds",
            s.guards.skipped_unreachable,
        ),
    ];
    for (name, help, value) in counters.into_iter().chain(guards) {
        r.register(name, help, counter(value));
    }
    let gauges = [
        ("resolver_cache_entries", "Answers held by the resolver's cache", s.entries as u64),
        ("resolver_cache_bytes", "Bytes held by the resolver's cache", s.bytes),
        ("resolver_pending", "Upstream queries under way", s.pending as u64),
    ];
    for (name, help, value) in gauges {
        r.register(name, help, gauge(value));
    }
    const BOUNDS: [&str; LATENCY_BUCKETS.len() + 1] =
        ["0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "1", "5", "+Inf"];
    let buckets = cumulative(&BOUNDS, &s.latency_buckets);
    r.register("resolver_upstream_latency", "Upstream queries that took at most `le` seconds (cumulative)", buckets);
    r.register("resolver_upstream_seconds", "Time spent on upstream queries", {
        let c: Counter<f64> = Counter::default();
        c.inc_by(s.latency_sum.as_secs_f64());
        c
    });
    // By server: the mean latency is seconds over exchanges.
    let exchanges: Family<ServerLabel, Counter> = Family::default();
    let failures: Family<ServerLabel, Counter> = Family::default();
    let seconds: Family<ServerLabel, Counter<f64>> = Family::default();
    for (server, stat) in s.servers {
        let label = ServerLabel { server };
        exchanges.get_or_create(&label).inc_by(stat.queries);
        failures.get_or_create(&label).inc_by(stat.failures);
        seconds.get_or_create(&label).inc_by(stat.total.as_secs_f64());
    }
    r.register("resolver_server_exchanges", "Exchanges with each upstream server (address:port)", exchanges);
    r.register("resolver_server_failures", "Exchanges with each upstream server that gave no usable answer", failures);
    r.register("resolver_server_seconds", "Time spent in exchanges with each upstream server", seconds);
}
