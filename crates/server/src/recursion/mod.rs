//! Recursion offered to clients: the global resolver of the `[resolver]`
//! table (`handled_resolver`), who may use it (an allow-list of networks: an
//! open resolver is an amplifier), how much of it one client may hold at once
//! and how many upstream queries it may start per second. SIGHUP replaces the
//! offer (see [`Recursion::prepare`]); its figures go to `/metrics` at every
//! scrape.

mod metrics;
pub mod rate;

use crate::config::Config;
use crate::metrics::Metrics;
use handled_proto::data::site::SiteInfo;
use handled_resolver::{Options, Resolver};
use ipnet::IpNet;
use parking_lot::{Mutex, RwLock};
use rate::{ClientRate, Limits};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct Recursion {
    /// None: neither `enabled` nor `allow_recursion`.
    offer: RwLock<Option<Arc<Offer>>>,
    /// Requests under way per client address; an address leaves at zero, so
    /// this holds at most the requests under way. Kept across reloads.
    in_flight: Mutex<HashMap<IpAddr, usize>>,
    /// Upstream lookups per client network; kept across reloads, new limits applied.
    rate: Mutex<ClientRate>,
    rate_limited: AtomicU64,
}

/// What the `[resolver]` table in force offers.
pub struct Offer {
    pub resolver: Arc<Resolver>,
    /// Native REC requests are recursed (`allow_recursion`); the web proxy
    /// and the JSON API are whenever there is an offer.
    pub native: bool,
    allow: Vec<IpNet>,
    per_client: usize,
    /// What the resolver was built from: a reload that changes neither keeps it, cache and all.
    built_from: (Options, Vec<SiteInfo>),
}

/// What a reload does to the resolver, for its log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// No recursion before or after.
    Off,
    /// Its options, trust policy and root sites unchanged: the cache is kept
    /// (the allow-list and the limits may have changed).
    Kept,
    /// A new resolver with an empty cache: what was cached was fetched and
    /// verified under other options, trust or root sites.
    Renewed,
}

/// A reload's offer, built and checked before anything is replaced.
pub struct Prepared {
    offer: Option<Arc<Offer>>,
    limits: Limits,
    pub renewal: Renewal,
}

impl Recursion {
    /// No recursion until a configuration is applied ([`prepare`](Self::prepare),
    /// [`apply`](Self::apply)); its figures registered with `metrics`.
    pub fn new(metrics: &Metrics) -> Arc<Recursion> {
        let recursion = Arc::new(Recursion {
            offer: RwLock::new(None),
            in_flight: Mutex::default(),
            rate: Mutex::new(ClientRate::new(Limits::NONE, rate::MAX_CLIENTS)),
            rate_limited: AtomicU64::new(0),
        });
        let scraped = recursion.clone();
        metrics.add_scrape_hook(Box::new(move |r| metrics::register(r, &scraped)));
        recursion
    }

    /// The offer in force; requests under way keep the one they started with.
    pub fn current(&self) -> Option<Arc<Offer>> {
        self.offer.read().clone()
    }

    /// Are native REC requests recursed?
    pub fn native(&self) -> bool {
        self.offer.read().as_ref().is_some_and(|o| o.native)
    }

    /// At start and on SIGHUP, first half: the offer `config` describes,
    /// reusing the running resolver (and its cache) when its options and
    /// root sites are unchanged. Nothing changes yet.
    pub fn prepare(&self, config: &Config) -> Result<Prepared, String> {
        let running = self.current();
        let table = &config.resolver;
        let limits = Limits::of(table);
        if !table.enabled && !table.allow_recursion {
            return Ok(Prepared { offer: None, limits, renewal: Renewal::Off });
        }
        let path = table.root_info(config.root_info.as_deref()).ok_or("[resolver] needs root_info")?;
        let root = handled_client::sites::load_root_info(path)
            .map_err(|e| format!("[resolver] root_info {}: {e}", path.display()))?;
        let built_from = (table.options()?, root);
        let (resolver, renewal) = match running.as_deref() {
            Some(offer) if offer.built_from == built_from => (offer.resolver.clone(), Renewal::Kept),
            _ => {
                let (options, root) = built_from.clone();
                (Arc::new(Resolver::new(root, crate::auth::signature::verify, options)), Renewal::Renewed)
            }
        };
        let offer = Offer {
            resolver,
            native: table.allow_recursion,
            allow: table.allow.clone(),
            per_client: table.per_client,
            built_from,
        };
        Ok(Prepared { offer: Some(Arc::new(offer)), limits, renewal })
    }

    /// Second half: put `prepared` in force.
    pub fn apply(&self, prepared: Prepared) {
        self.rate.lock().set_limits(prepared.limits);
        *self.offer.write() = prepared.offer;
    }

    /// A turn for `client` under `offer`, or None when it already has
    /// `per_client` requests under way.
    pub fn turn(&self, offer: &Offer, client: IpAddr) -> Option<Turn<'_>> {
        let mut in_flight = self.in_flight.lock();
        let n = in_flight.entry(client).or_default();
        if *n >= offer.per_client {
            if *n == 0 {
                in_flight.remove(&client);
            }
            return None;
        }
        *n += 1;
        Some(Turn { owner: self, client })
    }

    /// May `client` start an upstream lookup now? Refusals are counted.
    pub fn admit(&self, client: IpAddr) -> bool {
        let admitted = self.rate.lock().admit(client, std::time::Instant::now());
        if !admitted {
            self.rate_limited.fetch_add(1, Ordering::Relaxed);
        }
        admitted
    }

    /// Lookups refused by the per-client rate limit so far.
    pub fn rate_limited(&self) -> u64 {
        self.rate_limited.load(Ordering::Relaxed)
    }
}

impl Offer {
    /// Is `client` in the allow-list (an IPv4 address seen as IPv6-mapped too)?
    pub fn allows(&self, client: IpAddr) -> bool {
        let client = match client {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(client, IpAddr::V4),
            v4 => v4,
        };
        self.allow.iter().any(|net| net.contains(&client))
    }
}

/// One recursive request of a client under way.
pub struct Turn<'a> {
    owner: &'a Recursion,
    client: IpAddr,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut in_flight = self.owner.in_flight.lock();
        if let Some(n) = in_flight.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                in_flight.remove(&self.client);
            }
        }
    }
}
