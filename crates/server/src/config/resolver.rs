//! The `[resolver]` table: resolving handles homed elsewhere by walking the
//! global system (`handled_resolver`), for the web proxy and the JSON API
//! (`enabled`) and for native REC requests (`allow_recursion`, Handle.Net's
//! key: without it, such requests are answered 301 as by Handle.Net).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResolverConfig {
    /// Resolve handles of prefixes not homed here (web proxy, JSON API).
    pub enabled: bool,
    /// Also for native requests with the REC flag (never without it).
    pub allow_recursion: bool,
    /// The root sites; unset: the top-level `root_info`.
    pub root_info: Option<PathBuf>,
    /// Client networks (CIDR) offered recursion; others get 301. An open
    /// resolver amplifies floods, so only loopback by default.
    pub allow: Vec<ipnet::IpNet>,
    /// The answer cache, in MiB.
    pub cache_mb: u64,
    /// Longest a positive answer is kept, whatever its TTL says.
    pub max_ttl_secs: u64,
    /// How long "handle not found" is kept.
    pub negative_ttl_secs: u64,
    /// How long past its TTL an answer may be served while its site is down (0: never).
    pub serve_stale_secs: u64,
    /// The whole walk for one handle, retries and referrals included.
    pub timeout_ms: u64,
    /// Handles asked upstream at once; beyond, "too busy".
    pub max_pending: usize,
    /// Recursive requests of one client address under way at once; beyond, "too busy".
    pub per_client: usize,
    /// Lookups needing an upstream query (cache misses) one client may start
    /// per second on average (0: no limit); beyond, "too busy" / HTTP 429.
    pub client_rate: f64,
    /// ... and at once, after a pause.
    pub client_burst: u32,
    /// IPv6 clients share a rate limit per network of this many bits (a host
    /// has a whole /64 to pick addresses from).
    pub client_ipv6_prefix: u8,
    /// Refresh an answer asked for in the last tenth of its TTL (TTLs of
    /// 10 s or more) in the background, so popular handles never go cold.
    pub prefetch: bool,
    /// "require": every upstream answer signed by the key its site record
    /// publishes; "prefer": signatures checked when present; "off".
    pub trust: String,
    /// Networks (CIDR) asked upstream although not globally routable (by
    /// default only global addresses and those of the root sites' class are:
    /// site records name the addresses asked). Remote identity checks too.
    pub allow_upstream: Vec<ipnet::IpNet>,
    /// Networks never asked upstream, whatever else says (Unbound's do-not-query-address).
    pub deny_upstream: Vec<ipnet::IpNet>,
    /// Upstream attempts (one per protocol and address asked) one walk may make.
    pub upstream_attempts: u32,
}

impl Default for ResolverConfig {
    fn default() -> Self {
        ResolverConfig {
            enabled: false,
            allow_recursion: false,
            root_info: None,
            allow: vec!["127.0.0.0/8".parse().expect("CIDR"), "::1/128".parse().expect("CIDR")],
            cache_mb: 64,
            max_ttl_secs: 86400,
            negative_ttl_secs: 60,
            serve_stale_secs: 3600,
            timeout_ms: 5000,
            max_pending: 1024,
            per_client: 32,
            client_rate: 20.0,
            client_burst: 100,
            client_ipv6_prefix: 64,
            prefetch: true,
            trust: "require".into(),
            allow_upstream: Vec::new(),
            deny_upstream: Vec::new(),
            upstream_attempts: handled_client::sites::DEFAULT_ATTEMPTS,
        }
    }
}

impl ResolverConfig {
    pub fn trust(&self) -> Result<handled_resolver::Trust, String> {
        match self.trust.as_str() {
            "require" => Ok(handled_resolver::Trust::Require),
            "prefer" => Ok(handled_resolver::Trust::Prefer),
            "off" => Ok(handled_resolver::Trust::Off),
            other => Err(format!("[resolver] trust {other:?}: require, prefer or off")),
        }
    }

    /// The root_info file in force: ours, else the server's.
    pub fn root_info<'a>(&'a self, server_root_info: Option<&'a std::path::Path>) -> Option<&'a std::path::Path> {
        self.root_info.as_deref().or(server_root_info)
    }

    /// Where walks of the global system may send (the resolver's and remote identity checks').
    pub fn upstream_policy(&self) -> handled_client::sites::UpstreamPolicy {
        handled_client::sites::UpstreamPolicy { allow: self.allow_upstream.clone(), deny: self.deny_upstream.clone() }
    }

    /// Refused at start rather than at the first request.
    pub fn validate(&self, server_root_info: Option<&std::path::Path>) -> Result<(), String> {
        self.trust()?;
        if self.upstream_attempts == 0 {
            return Err("[resolver] upstream_attempts must be at least 1".into());
        }
        if !(self.client_rate.is_finite() && self.client_rate >= 0.0) {
            return Err(format!(
                "[resolver] client_rate {}: a number of lookups per second, 0 or more",
                self.client_rate
            ));
        }
        if self.client_rate > 0.0 && self.client_burst == 0 {
            return Err("[resolver] client_burst must be at least 1 when client_rate is set".into());
        }
        if self.client_ipv6_prefix > 128 {
            return Err(format!("[resolver] client_ipv6_prefix {}: at most 128", self.client_ipv6_prefix));
        }
        if !self.enabled && !self.allow_recursion {
            return Ok(());
        }
        let Some(path) = self.root_info(server_root_info) else {
            return Err("[resolver] needs root_info (in [resolver] or at the top level): the root sites".into());
        };
        handled_client::sites::load_root_info(path)?;
        if self.timeout_ms == 0 || self.max_pending == 0 || self.per_client == 0 || self.cache_mb == 0 {
            return Err("[resolver] timeout_ms, max_pending, per_client and cache_mb must be positive".into());
        }
        Ok(())
    }

    pub fn options(&self) -> Result<handled_resolver::Options, String> {
        let secs = std::time::Duration::from_secs;
        Ok(handled_resolver::Options {
            cache_bytes: self.cache_mb << 20,
            max_ttl: secs(self.max_ttl_secs),
            negative_ttl: secs(self.negative_ttl_secs),
            serve_stale: secs(self.serve_stale_secs),
            timeout: std::time::Duration::from_millis(self.timeout_ms),
            max_pending: self.max_pending,
            trust: self.trust()?,
            prefetch: self.prefetch,
            upstream: self.upstream_policy(),
            upstream_attempts: self.upstream_attempts,
            ..Default::default()
        })
    }
}
