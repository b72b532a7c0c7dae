//! Per-client rate limits on recursion: a token bucket per client network
//! (an IPv4 address; an IPv6 address grouped by its first `ipv6_prefix`
//! bits, since one host holds a whole /64) for the lookups that need an
//! upstream query. Answers from the cache cost nothing: an upstream query is
//! what an amplifier abuses and what the sites asked pay for.
//!
//! The table is bounded in count (`MAX_CLIENTS` buckets, quick_cache's
//! CLOCK-PRO evicting). A flood from many addresses cannot grow it: new
//! addresses enter cold and push out other cold ones first, so the buckets
//! of clients that keep asking stay. A client whose bucket was pushed out
//! starts again with a full one: at worst one more burst, and the queries
//! under way stay bounded by `max_pending` whatever happens here. A bucket
//! left alone for `burst / rate` seconds is full again, the same as none,
//! so an old entry never holds anything against its client.

use quick_cache::unsync::Cache;
use std::net::{IpAddr, Ipv6Addr};
use std::time::Instant;

/// Client networks with a bucket at once (about 64 bytes each).
pub const MAX_CLIENTS: usize = 65_536;

/// How many upstream lookups a client may start: `rate` per second on
/// average, `burst` at once. `rate` 0: no limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub rate: f64,
    pub burst: f64,
    /// IPv6 clients are grouped by this many leading bits.
    pub ipv6_prefix: u8,
}

impl Limits {
    pub const NONE: Limits = Limits { rate: 0.0, burst: 0.0, ipv6_prefix: 64 };

    /// As the `[resolver]` table says (`client_rate`, `client_burst`, `client_ipv6_prefix`).
    pub fn of(table: &crate::config::resolver::ResolverConfig) -> Limits {
        Limits { rate: table.client_rate, burst: f64::from(table.client_burst), ipv6_prefix: table.client_ipv6_prefix }
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

pub struct ClientRate {
    limits: Limits,
    buckets: Cache<IpAddr, Bucket>,
}

impl ClientRate {
    pub fn new(limits: Limits, capacity: usize) -> Self {
        ClientRate { limits, buckets: Cache::new(capacity.max(1)) }
    }

    /// New limits (SIGHUP); the buckets stay, their tokens capped at the new burst.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// May `client` start one more upstream lookup at `now`? Takes a token if so.
    pub fn admit(&mut self, client: IpAddr, now: Instant) -> bool {
        let Limits { rate, burst, ipv6_prefix } = self.limits;
        if rate <= 0.0 {
            return true;
        }
        let key = network_of(client, ipv6_prefix);
        let mut bucket = self.buckets.get(&key).copied().unwrap_or(Bucket { tokens: burst, at: now });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(burst);
        bucket.at = now;
        let admitted = bucket.tokens >= 1.0;
        if admitted {
            bucket.tokens -= 1.0;
        }
        self.buckets.insert(key, bucket);
        admitted
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.buckets.len()
    }
}

/// The network a client's bucket is kept for: an IPv4 address (IPv4-mapped
/// IPv6 included) alone, an IPv6 address cut to `prefix` bits.
fn network_of(client: IpAddr, prefix: u8) -> IpAddr {
    match client {
        IpAddr::V4(_) => client,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u32::from(prefix.min(128));
                let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(rate: f64, burst: f64) -> Limits {
        Limits { rate, burst, ipv6_prefix: 64 }
    }

    #[test]
    fn a_burst_then_the_rate() {
        let mut r = ClientRate::new(limits(2.0, 3.0), 16);
        let t = Instant::now();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let admitted: Vec<bool> = (0..5).map(|_| r.admit(a, t)).collect();
        assert_eq!(admitted, [true, true, true, false, false], "the burst, then nothing");
        // Half a second at 2/s: one token.
        let later = t + Duration::from_millis(500);
        assert!(r.admit(a, later));
        assert!(!r.admit(a, later));
        // Another client has its own bucket.
        assert!(r.admit("192.0.2.2".parse().unwrap(), later));
        // Long idle: full again, never more than the burst.
        let much_later = t + Duration::from_secs(3600);
        assert_eq!((0..4).filter(|_| r.admit(a, much_later)).count(), 3);
    }

    #[test]
    fn ipv6_grouped_by_prefix_and_mapped_ipv4_as_ipv4() {
        let mut r = ClientRate::new(limits(1.0, 1.0), 16);
        let t = Instant::now();
        assert!(r.admit("2001:db8:1:2::1".parse().unwrap(), t));
        assert!(!r.admit("2001:db8:1:2:ffff::9".parse().unwrap(), t), "same /64, same bucket");
        assert!(r.admit("2001:db8:1:3::1".parse().unwrap(), t), "another /64");
        assert!(r.admit("::ffff:192.0.2.7".parse().unwrap(), t));
        assert!(!r.admit("192.0.2.7".parse().unwrap(), t), "IPv4-mapped is the IPv4 address");
        let mut wide = ClientRate::new(Limits { ipv6_prefix: 48, ..limits(1.0, 1.0) }, 16);
        assert!(wide.admit("2001:db8:1:2::1".parse().unwrap(), t));
        assert!(!wide.admit("2001:db8:1:3::1".parse().unwrap(), t), "same /48");
        assert_eq!(network_of("2001:db8::1".parse().unwrap(), 0), IpAddr::V6(Ipv6Addr::UNSPECIFIED));
    }

    /// A flood of addresses fills the table to its bound, no further, and a
    /// client that keeps asking keeps its (empty) bucket.
    #[test]
    fn bounded_however_many_addresses() {
        let mut r = ClientRate::new(limits(1.0, 1.0), 64);
        let t = Instant::now();
        let steady: IpAddr = "198.51.100.1".parse().unwrap();
        assert!(r.admit(steady, t));
        for n in 0..10_000u32 {
            r.admit(IpAddr::V4((0x0a00_0000 + n).into()), t);
            if n % 16 == 0 {
                assert!(!r.admit(steady, t), "still limited after {n} other addresses");
            }
        }
        assert!(r.len() <= 64, "{}", r.len());
    }

    #[test]
    fn rate_zero_is_no_limit() {
        let mut r = ClientRate::new(limits(0.0, 0.0), 16);
        let t = Instant::now();
        assert!((0..1000).all(|_| r.admit("192.0.2.1".parse().unwrap(), t)));
        assert_eq!(r.len(), 0, "nothing kept");
    }
}
