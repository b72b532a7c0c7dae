//! Finding the site responsible for a handle the way a Handle client does
//! (§6.1): handles of the `0.` prefixes (and slash-less names) live at the
//! root (global) sites of `root_info`; any other handle's prefix handle
//! `0.NA/<PREFIX>` is resolved there for its HS_SITE values, following HS_SERV
//! service handles (resolved wherever they live) and referrals (§3.6: a root
//! refers a derived prefix `0.NA/a.b` to the HS_SITE.PREFIX sites of
//! `0.NA/a`), all within a bounded depth.
//!
//! What was found is kept for the values' TTL, within a bounded number of
//! entries and bytes: a peer naming many prefixes cannot grow it.
//!
//! One finder for every walk of the global system: the server's checks of
//! identities held elsewhere, the global resolver, and anything else that
//! must find the site responsible for a handle. Signatures are checked with
//! the function the caller passes (the server's crypto), as for replication
//! streams.

mod addresses;
mod exchange;
mod guard;
mod latency;
mod policy;
mod root_info;
mod walker;

pub use exchange::Trust;
pub use guard::{UpstreamGuards, Walk, DEFAULT_ATTEMPTS, UNREACHABLE_FOR};
pub use policy::{class_of, NetworkClass, UpstreamPolicy};
pub use root_info::{load_root_info, parse_root_info, parse_site_file, read_site_file};
pub use walker::{resolution, Known, Step, Walker, MAX_ASKS, MAX_FRAMES};

use crate::replication::SignatureCheck;
use crate::resolved_values;
use exchange::{ask, Asking};
use guard::{GuardCounters, Unreachable};
use handled_proto::codec::Codec;
use handled_proto::data::site::SiteInfo;
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::request::RequestBody;
use handled_proto::value::{types, HandleValue, TtlType};
use latency::Latencies;
pub use latency::{ServerLatency, MAX_SERVERS};
use policy::AddressRules;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// Service handles and referrals followed in one walk (each another lookup):
/// Handle.Net's own services use one level of each.
const MAX_DEPTH: usize = 5;
/// Sites taken from one lookup; more are ignored.
const MAX_SITES: usize = 16;
/// Prefixes whose sites are remembered, and their bytes together.
const CACHE_ENTRIES: usize = 1024;
const CACHE_BYTES: usize = 2 << 20;
/// Longest a lookup is kept whatever its TTL says.
const MAX_TTL: Duration = Duration::from_secs(24 * 3600);
/// The site record types of values naming where a handle's service is, and
/// those of a referral for derived prefixes (§3.6).
const SITE_TYPES: [&[u8]; 4] = [types::HS_SITE, b"HS_SITE.6", types::HS_SITE_PREFIX, types::HS_NA_DELEGATE];
const SERVICE_TYPES: [&[u8]; 2] = [types::HS_SERV, types::HS_SERV_PREFIX];

/// Why a request to another site did not succeed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LookupError {
    /// No responsible server could be found or reached in time.
    #[error("{0}")]
    Unreachable(String),
    /// A reply came that is not certified by the server it came from.
    #[error("{0}")]
    Uncertified(String),
    /// The root (or the service a referral named) says the prefix handle does not exist.
    #[error("{0}")]
    NoSuchPrefix(String),
    /// The responsible server answered with an error code.
    #[error("{}: {message}", .code.name())]
    Refused { code: ResponseCode, message: String },
    /// The servers named are at addresses the upstream policy refuses.
    #[error("{0}")]
    NotAllowed(String),
}

/// How a walk asks: trust policy, UDP first, retries.
#[derive(Debug, Clone, Copy)]
pub struct SiteOptions {
    pub trust: Trust,
    /// Try a server's UDP interface before TCP (the Java client's order).
    pub udp: bool,
    /// Rounds over a service's sites before giving up, each after a pause
    /// twice as long as the one before (starting at `backoff`).
    pub rounds: u32,
    pub backoff: Duration,
    /// Upstream attempts (one per protocol and address asked) in one walk.
    pub attempts: u32,
}

impl Default for SiteOptions {
    fn default() -> Self {
        SiteOptions {
            trust: Trust::Require,
            udp: false,
            rounds: 1,
            backoff: Duration::from_millis(100),
            attempts: DEFAULT_ATTEMPTS,
        }
    }
}

/// Where the global sites are and what is known about others.
pub struct Sites {
    root: Arc<Vec<SiteInfo>>,
    cache: Mutex<Cache>,
    check: SignatureCheck,
    options: SiteOptions,
    unverified: AtomicU64,
    latencies: Latencies,
    rules: AddressRules,
    unreachable: Unreachable,
    guards: GuardCounters,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<Vec<u8>, Entry>,
    bytes: usize,
}

struct Entry {
    sites: Arc<Vec<SiteInfo>>,
    expires: Instant,
    bytes: usize,
}

impl Sites {
    /// Walks starting at the `root` sites; replies are believed when `check`
    /// verifies their signature with the responding server's published key.
    pub fn new(root: Vec<SiteInfo>, check: SignatureCheck) -> Self {
        Self::with_options(root, check, SiteOptions::default())
    }

    pub fn with_options(root: Vec<SiteInfo>, check: SignatureCheck, options: SiteOptions) -> Self {
        Sites {
            rules: AddressRules::new(UpstreamPolicy::default(), &root),
            root: Arc::new(root),
            cache: Mutex::default(),
            check,
            options,
            unverified: AtomicU64::new(0),
            latencies: Latencies::default(),
            unreachable: Unreachable::default(),
            guards: GuardCounters::default(),
        }
    }

    /// The operator's lists of networks asked or never asked, on top of the
    /// default (global addresses, and those of the root sites' class).
    pub fn with_policy(mut self, policy: UpstreamPolicy) -> Self {
        self.rules = AddressRules::new(policy, &self.root);
        self
    }

    /// A walk ending at `deadline`, with this finder's budget of attempts.
    pub fn walk(&self, deadline: Instant) -> Walk {
        Walk::new(deadline, self.options.attempts)
    }

    /// Upstream attempts not made so far (policy, budget, remembered failures).
    pub fn guards(&self) -> UpstreamGuards {
        self.guards.snapshot()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Prefixes remembered, and their bytes.
    pub fn cached(&self) -> (usize, usize) {
        let c = self.cache();
        (c.entries.len(), c.bytes)
    }

    /// Exchanges with each server asked so far (at most [`MAX_SERVERS`] and "other").
    pub fn server_latencies(&self) -> Vec<(String, ServerLatency)> {
        self.latencies.snapshot()
    }

    /// Replies whose signature did not verify so far.
    pub fn verification_failures(&self) -> u64 {
        self.unverified.load(Ordering::Relaxed)
    }

    /// The sites responsible for `h`.
    pub async fn for_handle(&self, h: &[u8], walk: &Walk) -> Result<Arc<Vec<SiteInfo>>, LookupError> {
        sendable(h)?;
        let mut walker = Walker::for_handle(self.root.clone(), h);
        let first = walker.start(self);
        match self.drive(&mut walker, first, walk).await? {
            Step::Sites(sites) => Ok(sites),
            _ => Err(LookupError::Unreachable(format!("{}: no sites found", show(h)))),
        }
    }

    /// Send `body` about `h` to `sites` and follow referrals (302/303) to the
    /// sites they name, within the depth bound (`depth`: service handles and
    /// referrals already followed, 0 for a walk of its own). Any other reply
    /// is returned, whatever its code.
    pub async fn resolve_following(
        &self,
        sites: &[SiteInfo],
        h: &[u8],
        body: &RequestBody,
        depth: usize,
        walk: &Walk,
    ) -> Result<crate::Response, LookupError> {
        let mut walker = Walker::following(self.root.clone(), Arc::new(sites.to_vec()), h, body.clone(), depth);
        let first = walker.start(self);
        match self.drive(&mut walker, first, walk).await? {
            Step::Answer(response) => Ok(*response),
            _ => Err(LookupError::Unreachable(format!("{}: no answer", show(h)))),
        }
    }

    /// Ask what `walker` asks for until it ends: its last step, [`Step::Sites`]
    /// or [`Step::Answer`].
    async fn drive(&self, walker: &mut Walker, mut step: Step, walk: &Walk) -> Result<Step, LookupError> {
        loop {
            step = match step {
                Step::Ask { sites, handle, body } => {
                    let response = self.first_answer(&sites, &handle, &body, walk).await?;
                    walker.answer(response, self)
                }
                Step::Failed(e) => return Err(e),
                done => return Ok(done),
            };
        }
    }

    /// Resolve `h` (values of `types`, or at `indexes`) at the first of `sites`
    /// that answers, certified. A handle or value that is not there is
    /// [`LookupError::Refused`]; no site answering, [`LookupError::Unreachable`].
    pub async fn resolve_at(
        &self,
        sites: &[SiteInfo],
        h: &[u8],
        value_types: &[&[u8]],
        walk: &Walk,
    ) -> Result<Vec<HandleValue>, LookupError> {
        self.resolve_filtered(sites, h, &[], value_types, walk).await
    }

    /// [`resolve_at`] with an index filter too.
    pub async fn resolve_filtered(
        &self,
        sites: &[SiteInfo],
        h: &[u8],
        indexes: &[i32],
        value_types: &[&[u8]],
        walk: &Walk,
    ) -> Result<Vec<HandleValue>, LookupError> {
        let response = self.first_answer(sites, h, &resolution(h, indexes, value_types), walk).await?;
        match (response.code(), resolved_values(&response)) {
            (ResponseCode::SUCCESS, Some(values)) => Ok(values.to_vec()),
            (code, _) => Err(LookupError::Refused { code, message: response.message().unwrap_or_default() }),
        }
    }

    /// Send `body` to each site in turn until one gives a checked answer, in
    /// up to `rounds` rounds with a growing pause between them, within the
    /// walk's attempts. Sites none of which answered are not asked again for
    /// [`UNREACHABLE_FOR`].
    pub async fn first_answer(
        &self,
        sites: &[SiteInfo],
        h: &[u8],
        body: &RequestBody,
        walk: &Walk,
    ) -> Result<crate::Response, LookupError> {
        self.first_answer_flagged(sites, h, body, OpFlags::NONE, walk).await
    }

    /// [`first_answer`](Self::first_answer) with `extra` flags in the
    /// request (a resolver passing a client's DNR on).
    pub async fn first_answer_flagged(
        &self,
        sites: &[SiteInfo],
        h: &[u8],
        body: &RequestBody,
        extra: OpFlags,
        walk: &Walk,
    ) -> Result<crate::Response, LookupError> {
        sendable(h)?;
        let deadline = walk.deadline();
        let how = Asking {
            trust: self.options.trust,
            check: self.check,
            udp: self.options.udp,
            extra,
            unverified: &self.unverified,
            rules: &self.rules,
            guards: &self.guards,
        };
        let key = self.unreachable.key(sites);
        if self.unreachable.is_remembered(key) {
            self.guards.skipped.fetch_add(1, Ordering::Relaxed);
            return Err(LookupError::Unreachable(format!(
                "{}: its sites did not answer within the last {} s; not asked again yet",
                show(h),
                UNREACHABLE_FOR.as_secs()
            )));
        }
        let mut trying = self.unreachable.trying(key);
        let mut last = LookupError::Unreachable(format!("no sites for {}", show(h)));
        let mut pause = self.options.backoff;
        for round in 0..self.options.rounds.max(1) {
            if round > 0 {
                // Jittered, so that resolvers retrying together spread out.
                let jitter = pause.mul_f64(rand::random::<f64>() * 0.5);
                tokio::time::sleep_until(deadline.min(Instant::now() + pause + jitter)).await;
                pause *= 2;
            }
            for site in sites {
                if walk.spent() {
                    walk.count_cut(&self.guards);
                    return Err(last);
                }
                if Instant::now() >= deadline {
                    return Err(last);
                }
                let started = Instant::now();
                let asked = ask(site, h, body, walk, how).await;
                // Refused by the policy: nothing was exchanged to time.
                if !matches!(asked, Err(LookupError::NotAllowed(_))) {
                    self.latencies.record(latency::label(site, h), started.elapsed(), asked.is_err());
                }
                match asked {
                    Ok(r) => {
                        trying.answered = true;
                        return Ok(r);
                    }
                    Err(e) => {
                        tracing::debug!("site lookup: {e}");
                        trying.failed = true;
                        // An unverifiable reply is an answer (the next lookup asks again).
                        trying.answered |= matches!(e, LookupError::Uncertified(_));
                        last = e;
                    }
                }
            }
        }
        Err(last)
    }
}

impl Known for Sites {
    fn lookup(&self, key: &[u8]) -> Option<Arc<Vec<SiteInfo>>> {
        let mut cache = self.cache();
        let entry = cache.entries.get(key)?;
        if entry.expires > Instant::now() {
            return Some(entry.sites.clone());
        }
        let gone = cache.entries.remove(key).map_or(0, |e| e.bytes);
        cache.bytes -= gone;
        None
    }

    fn remember(&self, key: Vec<u8>, sites: Arc<Vec<SiteInfo>>, ttl: Duration) {
        let bytes = key.len() + sites.iter().map(|s| s.to_bytes().len()).sum::<usize>() + 64;
        if ttl.is_zero() || bytes > CACHE_BYTES / 16 {
            return;
        }
        let now = Instant::now();
        let mut cache = self.cache();
        let cache = &mut *cache;
        if let Some(old) = cache.entries.remove(&key) {
            cache.bytes -= old.bytes;
        }
        cache.entries.retain(|_, e| e.expires > now);
        cache.bytes = cache.entries.values().map(|e| e.bytes).sum();
        while cache.entries.len() >= CACHE_ENTRIES || cache.bytes + bytes > CACHE_BYTES {
            // The entry closest to expiry goes first.
            let Some(soonest) = cache.entries.iter().min_by_key(|(_, e)| e.expires).map(|(k, _)| k.clone()) else {
                break;
            };
            cache.bytes -= cache.entries.remove(&soonest).map_or(0, |e| e.bytes);
        }
        cache.bytes += bytes;
        cache.entries.insert(key, Entry { sites, expires: now + ttl, bytes });
    }
}

/// How long values may be kept: their shortest TTL (absolute ones counted
/// from now), within `max`.
pub fn ttl(values: &[HandleValue], max: Duration) -> Duration {
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let secs = values
        .iter()
        .map(|v| match v.ttl_type {
            TtlType::Relative => i64::from(v.ttl),
            TtlType::Absolute => i64::from(v.ttl) - now,
        })
        .min()
        .unwrap_or(0);
    Duration::from_secs(secs.max(0) as u64).min(max)
}

/// Handles with control characters are not sent upstream: whatever a site
/// record names receives the request's bytes, and CR/LF in them would be
/// lines to a line-based service there.
fn sendable(h: &[u8]) -> Result<(), LookupError> {
    if h.iter().any(u8::is_ascii_control) {
        return Err(LookupError::Refused {
            code: ResponseCode::INVALID_HANDLE,
            message: "a handle with control characters is not sent to other servers".into(),
        });
    }
    Ok(())
}

fn show(h: &[u8]) -> String {
    String::from_utf8_lossy(h).into_owned()
}

/// Site records for tests, here and in the server's tests of remote checks.
#[doc(hidden)]
pub mod testing {
    use handled_proto::data::site::{Interface, InterfaceKind, ServerInfo, SiteInfo, TransportProtocol};

    /// One server at 127.0.0.1:`port` (TCP, query and admin) publishing `key`.
    pub fn site(port: u16, key: Vec<u8>) -> SiteInfo {
        SiteInfo {
            data_version: 1,
            protocol_major: 2,
            protocol_minor: 10,
            serial: 1,
            primary: true,
            multi_primary: false,
            hash_option: 2,
            hash_filter: Vec::new(),
            attributes: Vec::new(),
            servers: vec![ServerInfo {
                server_id: 1,
                address: ServerInfo::ipv4([127, 0, 0, 1]),
                public_key: key,
                interfaces: vec![Interface {
                    kind: InterfaceKind::AdminAndQuery,
                    protocol: TransportProtocol::Tcp,
                    port: i32::from(port),
                }],
            }],
        }
    }
}

#[cfg(test)]
mod upstream_tests;

#[cfg(test)]
pub(crate) mod tests {
    use super::testing::site;
    use super::*;

    pub(crate) fn no_check(
        _: &handled_proto::data::pubkey::PublicKey,
        _: handled_proto::digest::DigestAlg,
        _: &[u8],
        _: &[u8],
    ) -> bool {
        false
    }

    /// Peers naming ever new prefixes cannot grow the cache past its count
    /// or bytes; entries go when their TTL has passed.
    #[tokio::test]
    async fn the_site_cache_is_bounded_in_count_bytes_and_age() {
        let sites = Sites::new(vec![site(1, vec![])], no_check);
        let one = Arc::new(vec![site(2, vec![0; 100])]);
        for n in 0..CACHE_ENTRIES + 50 {
            sites.remember(format!("0.NA/P{n}").into_bytes(), one.clone(), Duration::from_secs(60));
        }
        let (count, bytes) = sites.cached();
        assert!(count <= CACHE_ENTRIES && bytes <= CACHE_BYTES, "{count} entries, {bytes} bytes");
        assert!(sites.lookup(format!("0.NA/P{}", CACHE_ENTRIES + 49).as_bytes()).is_some(), "the newest stays");

        let big = Arc::new(vec![site(2, vec![0; CACHE_BYTES / 64]); 3]);
        for n in 0..200 {
            sites.remember(format!("0.NA/B{n}").into_bytes(), big.clone(), Duration::from_secs(60));
        }
        let (count, bytes) = sites.cached();
        assert!(bytes <= CACHE_BYTES && count < CACHE_ENTRIES, "{count} entries, {bytes} bytes");

        let short = Sites::new(vec![], no_check);
        short.remember(b"0.NA/T".to_vec(), one.clone(), Duration::from_millis(30));
        short.remember(b"0.NA/ZERO".to_vec(), one.clone(), Duration::ZERO);
        assert!(short.lookup(b"0.NA/T").is_some());
        assert!(short.lookup(b"0.NA/ZERO").is_none(), "a zero TTL is not kept");
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert!(short.lookup(b"0.NA/T").is_none(), "expired");
        assert_eq!(short.cached(), (0, 0));
    }

    #[test]
    fn ttl_is_the_shortest_within_a_day() {
        let mut a = HandleValue::new(1, "HS_SITE", "x");
        a.ttl = 600;
        let mut b = a.clone();
        b.ttl = 60;
        assert_eq!(ttl(&[a.clone(), b], MAX_TTL), Duration::from_secs(60));
        a.ttl = i32::MAX;
        assert_eq!(ttl(&[a.clone()], MAX_TTL), MAX_TTL);
        a.ttl_type = TtlType::Absolute;
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i32;
        a.ttl = now + 120;
        let left = ttl(&[a.clone()], MAX_TTL).as_secs();
        assert!((118..=120).contains(&left), "{left}");
        a.ttl = 1; // long past
        assert_eq!(ttl(&[a], MAX_TTL), Duration::ZERO);
    }

    #[tokio::test]
    async fn global_handles_go_to_the_root_sites_without_a_lookup() {
        let sites = Sites::new(vec![site(9, vec![])], no_check);
        let far = sites.walk(Instant::now() + Duration::from_secs(1));
        for h in [&b"0.NA/ADM"[..], b"0.na/x", b"ADM", b"0.NA/0.NA"] {
            assert_eq!(sites.for_handle(h, &far).await.unwrap()[0].servers[0].interfaces[0].port, 9, "{h:?}");
        }
    }
}
