//! Recursion offered to clients: the global resolver of the `[resolver]`
//! table (`handled_resolver`), who may use it (an allow-list of networks: an
//! open resolver is an amplifier) and how much of it one client address may
//! hold at once. Its figures go to `/metrics` at every scrape.

use crate::config::Config;
use crate::metrics::{counter, cumulative, gauge, Metrics};
use handled_resolver::metrics::LATENCY_BUCKETS;
use handled_resolver::Resolver;
use ipnet::IpNet;
use prometheus_client::metrics::counter::Counter;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

pub struct Recursion {
    pub resolver: Arc<Resolver>,
    /// Native REC requests are recursed (`allow_recursion`); the web proxy
    /// and the JSON API are whenever this exists.
    pub native: bool,
    allow: Vec<IpNet>,
    per_client: usize,
    /// Requests under way per client address; an address leaves at zero, so
    /// this holds at most the requests under way.
    in_flight: Mutex<HashMap<IpAddr, usize>>,
}

impl Recursion {
    /// As `config` says; `None` when neither `enabled` nor `allow_recursion`.
    pub fn of(config: &Config, metrics: &Metrics) -> Result<Option<Recursion>, String> {
        let table = &config.resolver;
        if !table.enabled && !table.allow_recursion {
            return Ok(None);
        }
        let path = table.root_info(config.root_info.as_deref()).ok_or("[resolver] needs root_info")?;
        let root = handled_client::sites::load_root_info(path)?;
        let resolver = Arc::new(Resolver::new(root, crate::auth::signature::verify, table.options()?));
        let scraped = resolver.clone();
        metrics.add_scrape_hook(Box::new(move |r| register(r, &scraped)));
        Ok(Some(Recursion {
            resolver,
            native: table.allow_recursion,
            allow: table.allow.clone(),
            per_client: table.per_client,
            in_flight: Mutex::default(),
        }))
    }

    /// Is `client` in the allow-list (an IPv4 address seen as IPv6-mapped too)?
    pub fn allows(&self, client: IpAddr) -> bool {
        let client = match client {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(client, IpAddr::V4),
            v4 => v4,
        };
        self.allow.iter().any(|net| net.contains(&client))
    }

    /// A turn for `client`, or None when it already has `per_client` under way.
    pub fn turn(&self, client: IpAddr) -> Option<Turn<'_>> {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        let n = in_flight.entry(client).or_default();
        if *n >= self.per_client {
            if *n == 0 {
                in_flight.remove(&client);
            }
            return None;
        }
        *n += 1;
        Some(Turn { owner: self, client })
    }
}

/// One recursive request of a client under way.
pub struct Turn<'a> {
    owner: &'a Recursion,
    client: IpAddr,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut in_flight = self.owner.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = in_flight.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                in_flight.remove(&self.client);
            }
        }
    }
}

fn register(r: &mut prometheus_client::registry::Registry, resolver: &Resolver) {
    let s = resolver.snapshot();
    let counters = [
        ("resolver_hits", "Handles of other services answered from the resolver's cache", s.hits),
        ("resolver_misses", "Resolver lookups that asked upstream (or joined a query under way)", s.misses),
        ("resolver_coalesced", "Lookups answered by a query another client started", s.coalesced),
        ("resolver_stale_served", "Answers served past their TTL while upstream failed", s.stale_served),
        ("resolver_negative_hits", "\"Handle not found\" answered from the cache", s.negative_hits),
        ("resolver_upstream_queries", "Handles asked upstream", s.upstream_queries),
        ("resolver_upstream_failures", "Upstream queries no site answered (in time, verifiably)", s.upstream_failures),
        ("resolver_busy", "Lookups refused: too many queries under way", s.busy),
        (
            "resolver_verification_failures",
            "Upstream replies whose signature did not verify with the site's published key",
            s.verification_failures,
        ),
    ];
    for (name, help, value) in counters {
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
}
