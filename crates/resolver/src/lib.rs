//! A caching resolver of any handle, as hdl.handle.net and local resolvers
//! run: the responsible site is found by walking the global system from the
//! root sites (`handled_client::sites`: prefix handles, HS_SITE, HS_SERV,
//! derived-prefix referrals, the site's hash, UDP then TCP, the trust policy),
//! and what it answers is kept in a cache bounded in bytes, per value TTL.
//!
//! Practices of DNS recursive resolvers carried over: one upstream query per
//! handle at a time however many ask (coalescing), negative answers kept for
//! a bounded time, stale answers served for a bounded time while the
//! responsible site is down (RFC 8767), every upstream exchange under a
//! deadline, a bound on the queries under way, and nothing that failed
//! verification kept.

mod cache;
mod inflight;
pub mod metrics;

pub use cache::Found;
pub use handled_client::sites::Trust;

use cache::AnswerCache;
use handled_client::replication::SignatureCheck;
use handled_client::resolved_values;
use handled_client::sites::{self, LookupError, SiteOptions, Sites, UpstreamPolicy, Walk};
use handled_proto::data::site::SiteInfo;
use handled_proto::handle;
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::value::HandleValue;
use inflight::InFlight;
use metrics::{add, Counters, Snapshot};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// What a resolver may hold and how long it waits.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Bytes of cached answers.
    pub cache_bytes: u64,
    /// Longest a positive answer is kept, whatever its TTL.
    pub max_ttl: Duration,
    /// How long "handle not found" is kept.
    pub negative_ttl: Duration,
    /// How long past its TTL an answer may be served while upstream fails.
    pub serve_stale: Duration,
    /// After upstream failed, how long stale answers go out without asking again.
    pub stale_retry: Duration,
    /// The whole walk for one handle (site lookups, retries, referrals).
    pub timeout: Duration,
    /// Handles being asked upstream at once; beyond, "too busy".
    pub max_pending: usize,
    pub trust: Trust,
    /// Rounds over a service's sites, with backoff between them.
    pub rounds: u32,
    /// Refresh an answer asked for in the last tenth of its TTL (at least
    /// 10 s) in the background, serving the cached one meanwhile.
    pub prefetch: bool,
    /// Networks asked besides global addresses and the root sites' class, and never asked.
    pub upstream: UpstreamPolicy,
    /// Upstream attempts (one per protocol and address) one walk may make.
    pub upstream_attempts: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cache_bytes: 64 << 20,
            max_ttl: Duration::from_secs(86400),
            negative_ttl: Duration::from_secs(60),
            serve_stale: Duration::from_secs(3600),
            stale_retry: Duration::from_secs(5),
            timeout: Duration::from_secs(5),
            max_pending: 1024,
            trust: Trust::Require,
            rounds: 2,
            prefetch: true,
            upstream: UpstreamPolicy::default(),
            upstream_attempts: sites::DEFAULT_ATTEMPTS,
        }
    }
}

/// Why a handle could not be resolved.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ResolveError {
    /// The handle (or its prefix) does not exist.
    #[error("handle not found")]
    NotFound,
    /// The responsible server answered with another error code.
    #[error("{}: {message}", .code.name())]
    Refused { code: ResponseCode, message: String },
    /// No responsible server answered in time (or could be reached) and nothing stale was at hand.
    #[error("{0}")]
    Unreachable(String),
    /// A responsible server answered, but not verifiably (its signature did
    /// not check against the key its site record publishes), and nothing
    /// stale was at hand.
    #[error("{0}")]
    Unverifiable(String),
    /// The handle has control characters: never sent upstream, where they
    /// could be lines to whatever service a site record names.
    #[error("a handle with control characters is not resolved at other servers")]
    InvalidHandle,
    /// The responsible servers are at addresses the upstream policy does not ask.
    #[error("{0}")]
    NotAllowed(String),
    /// Too many handles are being asked upstream at once.
    #[error("too many queries under way")]
    Busy,
    /// The asker may not start another upstream query now (its rate limit).
    #[error("too many upstream queries for this client")]
    RateLimited,
}

/// A client's DNR flag (Handle.Net's "do not refer"): the server answering
/// its request must not answer with a prefix referral, but with what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Referrals {
    Follow = 0,
    DoNotRefer = 1,
}

/// An answer and where it came from.
#[derive(Debug, Clone)]
pub struct Answer {
    pub values: Arc<[HandleValue]>,
    pub origin: Origin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Cache,
    Upstream,
    /// Past its TTL, served because upstream failed.
    Stale,
}

pub struct Resolver {
    sites: Sites,
    cache: AnswerCache,
    flights: InFlight<Vec<u8>, Result<Found, ResolveError>>,
    counters: Counters,
    options: Options,
}

impl Resolver {
    /// A resolver starting at the `root` sites (from `root_info`); `check`
    /// verifies signatures (the caller's crypto).
    pub fn new(root: Vec<SiteInfo>, check: SignatureCheck, options: Options) -> Self {
        let site_options = SiteOptions {
            trust: options.trust,
            udp: true,
            rounds: options.rounds,
            attempts: options.upstream_attempts,
            ..Default::default()
        };
        Resolver {
            sites: Sites::with_options(root, check, site_options).with_policy(options.upstream.clone()),
            cache: AnswerCache::new(options.cache_bytes, options.max_ttl, options.negative_ttl, options.serve_stale),
            flights: InFlight::new(options.max_pending),
            counters: Counters::default(),
            options,
        }
    }

    /// The counters, cache use and queries under way now.
    pub fn snapshot(&self) -> Snapshot {
        let (entries, bytes) = self.cache.usage();
        Snapshot {
            entries,
            bytes,
            pending: self.flights.len(),
            verification_failures: self.sites.verification_failures(),
            servers: self.sites.server_latencies(),
            guards: self.sites.guards(),
            ..self.counters.snapshot()
        }
    }

    /// All public values of `h`.
    pub async fn resolve(self: &Arc<Self>, h: &[u8]) -> Result<Answer, ResolveError> {
        self.resolve_admitted(h, Referrals::Follow, || true).await
    }

    /// As [`resolve`](Self::resolve), asking `admit` first whenever the
    /// answer needs an upstream query (a miss, joining one under way
    /// included): false refuses with [`ResolveError::RateLimited`]. Answers
    /// from the cache (fresh, or stale while upstream is known to fail) are
    /// never refused. `referrals`: what the client's DNR flag asks.
    pub async fn resolve_admitted(
        self: &Arc<Self>,
        h: &[u8],
        referrals: Referrals,
        admit: impl FnOnce() -> bool,
    ) -> Result<Answer, ResolveError> {
        if h.iter().any(u8::is_ascii_control) {
            return Err(ResolveError::InvalidHandle);
        }
        let canonical = handle::canonical(h);
        let key = cache_key(&canonical, referrals);
        let cached = self.cache.get(&key);
        let now = Instant::now();
        if let Some(entry) = &cached {
            if entry.is_fresh(now) {
                return self.hit(entry, canonical.into_owned(), key, referrals, now);
            }
            if now < entry.retry_after {
                add(&self.counters.stale_served);
                return answer(&entry.found, Origin::Stale, &self.counters);
            }
        }
        if !admit() {
            return Err(ResolveError::RateLimited);
        }
        add(&self.counters.misses);
        let flight = self.flights.run(key.clone(), || self.fetch(&canonical, key.clone(), referrals)).await;
        let fetched = match flight {
            Ok((fetched, joined)) => {
                if joined {
                    add(&self.counters.coalesced);
                }
                fetched
            }
            Err(inflight::Busy) => {
                add(&self.counters.busy);
                Err(ResolveError::Busy)
            }
        };
        match (fetched, cached) {
            (Ok(found), _) => answer(&found, Origin::Upstream, &self.counters),
            // Upstream down (or unverifiable): what we had, if not too old.
            (Err(ResolveError::Unreachable(why) | ResolveError::Unverifiable(why)), Some(entry))
                if entry.may_serve_stale(Instant::now()) =>
            {
                tracing::debug!("resolver: {} served stale: {why}", String::from_utf8_lossy(&canonical));
                self.cache.hold_stale(&key, &entry, Instant::now() + self.options.stale_retry);
                add(&self.counters.stale_served);
                answer(&entry.found, Origin::Stale, &self.counters)
            }
            (Err(e), _) => Err(e),
        }
    }

    /// Is a fresh answer for `h` in the cache now? A look only: nothing
    /// counted, nothing started.
    pub fn has_fresh(&self, h: &[u8], referrals: Referrals) -> bool {
        let key = cache_key(&handle::canonical(h), referrals);
        self.cache.get(&key).is_some_and(|entry| entry.is_fresh(Instant::now()))
    }

    /// The answer for `h` from the cache alone, never waiting on upstream:
    /// fresh, else one still within its stale window (then refreshed in the
    /// background, as a prefetch). None when the cache has nothing to give
    /// (a refresh is started all the same, within `max_pending`, so that the
    /// asker's next try finds it). For callers that must not wait: the UDP
    /// receive thread, after [`has_fresh`](Self::has_fresh) said yes an
    /// instant before.
    pub fn cached(self: &Arc<Self>, h: &[u8], referrals: Referrals) -> Option<Result<Answer, ResolveError>> {
        let canonical = handle::canonical(h);
        let key = cache_key(&canonical, referrals);
        let now = Instant::now();
        match self.cache.get(&key) {
            Some(entry) if entry.is_fresh(now) => Some(self.hit(&entry, canonical.into_owned(), key, referrals, now)),
            Some(entry) => {
                add(&self.counters.stale_served);
                self.prefetch(canonical.into_owned(), key, referrals);
                Some(answer(&entry.found, Origin::Stale, &self.counters))
            }
            None => {
                self.prefetch(canonical.into_owned(), key, referrals);
                None
            }
        }
    }

    /// A fresh entry's answer, its prefetch started when due.
    fn hit(
        self: &Arc<Self>,
        entry: &cache::Entry,
        canonical: Vec<u8>,
        key: Vec<u8>,
        referrals: Referrals,
        now: Instant,
    ) -> Result<Answer, ResolveError> {
        add(&self.counters.hits);
        if self.options.prefetch && entry.take_prefetch(now) {
            self.prefetch(canonical, key, referrals);
        }
        answer(&entry.found, Origin::Cache, &self.counters)
    }

    /// Refresh `key` in the background: the one query for it (joined by any
    /// miss meanwhile), within `max_pending` (when that is full the entry
    /// expires as without prefetching). Not rate-limited: at most one per
    /// entry per TTL, started by a request the cache answered.
    fn prefetch(self: &Arc<Self>, canonical: Vec<u8>, key: Vec<u8>, referrals: Referrals) {
        add(&self.counters.prefetches);
        let this = self.clone();
        tokio::spawn(async move {
            let _ = this.flights.run(key.clone(), || this.fetch(&canonical, key, referrals)).await;
        });
    }

    /// Ask upstream (the one query for `key` under way) and keep the answer.
    async fn fetch(&self, canonical: &[u8], key: Vec<u8>, referrals: Referrals) -> Result<Found, ResolveError> {
        add(&self.counters.upstream_queries);
        let started = Instant::now();
        let deadline = started + self.options.timeout;
        let walk = self.sites.walk(deadline);
        let result = tokio::time::timeout_at(deadline, self.walk(canonical, referrals, &walk))
            .await
            .unwrap_or_else(|_| Err(LookupError::Unreachable(format!("no answer within {:?}", self.options.timeout))));
        self.counters.upstream_took(started.elapsed());
        let found = match result {
            Ok(found) => found,
            Err(LookupError::NoSuchPrefix(_)) => Found::NotFound,
            Err(LookupError::Refused { code, message }) => return Err(ResolveError::Refused { code, message }),
            Err(LookupError::NotAllowed(why)) => {
                add(&self.counters.upstream_failures);
                return Err(ResolveError::NotAllowed(why));
            }
            Err(LookupError::Uncertified(why)) => {
                add(&self.counters.upstream_failures);
                return Err(ResolveError::Unverifiable(why));
            }
            Err(e) => {
                add(&self.counters.upstream_failures);
                return Err(ResolveError::Unreachable(e.to_string()));
            }
        };
        self.cache.put(key, found.clone(), Instant::now());
        Ok(found)
    }

    /// The responsible sites, then the handle's values there. The sites are
    /// found following referrals whatever the client asked: DNR is about the
    /// answer to its own request, which goes upstream with DNR and is taken
    /// as it comes (a referral is then not an answer: refused with its code).
    async fn walk(&self, canonical: &[u8], referrals: Referrals, walk: &Walk) -> Result<Found, LookupError> {
        let sites = self.sites.for_handle(canonical, walk).await?;
        let body = sites::resolution(canonical, &[], &[]);
        let response = match referrals {
            Referrals::Follow => self.sites.resolve_following(&sites, canonical, &body, 0, walk).await?,
            Referrals::DoNotRefer => {
                self.sites.first_answer_flagged(&sites, canonical, &body, OpFlags::DNR, walk).await?
            }
        };
        match (response.code(), resolved_values(&response)) {
            (ResponseCode::SUCCESS, Some(values)) => Ok(Found::Values(values.to_vec().into())),
            (ResponseCode::HANDLE_NOT_FOUND, _) => Ok(Found::NotFound),
            (code, _) => Err(LookupError::Refused { code, message: response.message().unwrap_or_default() }),
        }
    }
}

/// Prefixes are case-insensitive; suffixes may not be on the server asked. A
/// DNR answer may differ from the other (a root's own record instead of the
/// referral's): each has its entry, told apart by a leading tag byte.
fn cache_key(canonical: &[u8], referrals: Referrals) -> Vec<u8> {
    let mut key = vec![referrals as u8];
    key.extend_from_slice(&handle::normalize(canonical, true));
    key
}

fn answer(found: &Found, origin: Origin, counters: &Counters) -> Result<Answer, ResolveError> {
    match found {
        Found::Values(values) => Ok(Answer { values: values.clone(), origin }),
        Found::NotFound => {
            if origin != Origin::Upstream {
                add(&counters.negative_hits);
            }
            Err(ResolveError::NotFound)
        }
    }
}
