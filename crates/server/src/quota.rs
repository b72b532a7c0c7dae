//! What a peer may make the server keep before it has proven anything
//! (pending challenges, unauthenticated sessions, unfinished UDP requests):
//! a [`Ledger`] charges each entry to its peer and to a byte budget, in order
//! of creation, so limits are checked in O(1) and the oldest entries are found
//! (to expire or to evict) without a scan.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Limits of one kind of peer-made state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Bytes held for all peers together; one peer may hold a
    /// [`PEER_SHARE`]th of them.
    pub max_bytes: usize,
    /// Entries held for one peer (one IPv4 address or one IPv6 /64).
    pub per_peer: usize,
}

/// One peer may hold at most this fraction (1/PEER_SHARE) of a byte budget, so
/// a single flooding peer leaves room for the others.
pub const PEER_SHARE: usize = 8;

/// Why an entry was not charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverQuota {
    /// This peer already holds its share.
    Peer,
    /// All peers together hold the byte budget.
    Bytes,
}

/// The peer an entry is charged to: an IPv4 address, or the /64 of an IPv6
/// address (one host typically owns a whole /64).
pub fn peer_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        },
        v4 => v4,
    }
}

struct Charge {
    peer: IpAddr,
    bytes: usize,
    since: Instant,
}

/// The entries charged, by key, with per-peer counts and the byte total.
pub struct Ledger<K> {
    quota: Quota,
    charges: HashMap<K, Charge>,
    /// Keys in order of charging; a key released (or charged again) leaves a
    /// stale item here, skipped when it reaches the front.
    order: VecDeque<(Instant, K)>,
    /// Entries and bytes per peer.
    per_peer: HashMap<IpAddr, (usize, usize)>,
    bytes: usize,
}

impl<K: Hash + Eq + Clone> Ledger<K> {
    pub fn new(quota: Quota) -> Self {
        Ledger { quota, charges: HashMap::new(), order: VecDeque::new(), per_peer: HashMap::new(), bytes: 0 }
    }

    /// Charge `bytes` for `key` to `peer` (replacing an earlier charge for `key`).
    pub fn charge(&mut self, key: K, peer: IpAddr, bytes: usize, now: Instant) -> Result<(), OverQuota> {
        self.release(&key);
        let peer = peer_of(peer);
        let (count, held) = self.per_peer.get(&peer).copied().unwrap_or_default();
        if count >= self.quota.per_peer || held + bytes > self.quota.max_bytes / PEER_SHARE {
            return Err(OverQuota::Peer);
        }
        if self.bytes + bytes > self.quota.max_bytes {
            return Err(OverQuota::Bytes);
        }
        let share = self.per_peer.entry(peer).or_default();
        *share = (share.0 + 1, share.1 + bytes);
        self.bytes += bytes;
        self.charges.insert(key.clone(), Charge { peer, bytes, since: now });
        self.order.push_back((now, key));
        Ok(())
    }

    /// Drop the charge for `key`; false when there was none.
    pub fn release(&mut self, key: &K) -> bool {
        let Some(c) = self.charges.remove(key) else { return false };
        self.bytes -= c.bytes;
        if let Some(share) = self.per_peer.get_mut(&c.peer) {
            *share = (share.0 - 1, share.1 - c.bytes);
            if share.0 == 0 {
                self.per_peer.remove(&c.peer);
            }
        }
        if self.charges.len() < self.charges.capacity() / 4 {
            // After a flood, give the tables' memory back.
            self.charges.shrink_to_fit();
            self.per_peer.shrink_to_fit();
        }
        true
    }

    /// The oldest live charge's key.
    pub fn oldest(&mut self) -> Option<K> {
        self.drop_stale_front();
        self.order.front().map(|(_, k)| k.clone())
    }

    /// Release and return the keys charged more than `age` before `now`.
    pub fn expire(&mut self, age: Duration, now: Instant) -> Vec<K> {
        let mut expired = Vec::new();
        loop {
            self.drop_stale_front();
            match self.order.front() {
                Some((since, _)) if now.saturating_duration_since(*since) >= age => {
                    let (_, key) = self.order.pop_front().expect("front exists");
                    self.release(&key);
                    expired.push(key);
                }
                _ => break,
            }
        }
        if self.order.len() < self.order.capacity() / 4 {
            self.order.shrink_to_fit();
        }
        expired
    }

    fn drop_stale_front(&mut self) {
        while let Some((since, key)) = self.order.front() {
            if self.charges.get(key).is_some_and(|c| c.since == *since) {
                return;
            }
            self.order.pop_front();
        }
    }

    pub fn contains(&self, key: &K) -> bool {
        self.charges.contains_key(key)
    }

    pub fn len(&self) -> usize {
        self.charges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.charges.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_are_bounded_per_peer_and_in_bytes_and_expire_in_order() {
        let mut l = Ledger::new(Quota { max_bytes: 100 * PEER_SHARE, per_peer: 2 });
        let peer = |n: u8| IpAddr::from([10, 0, 0, n]);
        let t0 = Instant::now();
        let later = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(l.charge(0, peer(1), 101, t0), Err(OverQuota::Peer), "a peer's share of the bytes");
        l.charge(1, peer(1), 10, t0).unwrap();
        l.charge(2, peer(1), 10, later(1)).unwrap();
        assert_eq!(l.charge(3, peer(1), 10, later(2)), Err(OverQuota::Peer), "a peer's share of the entries");
        for n in 2..=8 {
            l.charge(n as i32 + 1, peer(n), 100, later(2)).unwrap();
        }
        assert_eq!(l.charge(10, peer(9), 100, later(3)), Err(OverQuota::Bytes));
        l.charge(1, peer(1), 5, later(4)).unwrap(); // charged again: now the newest
        assert_eq!((l.len(), l.bytes()), (9, 715));
        assert_eq!(l.oldest(), Some(2));
        assert_eq!(l.expire(Duration::from_millis(2), later(4)), vec![2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!((l.len(), l.bytes()), (1, 5));
        l.charge(4, peer(1), 10, later(5)).unwrap();
        assert!(l.release(&1) && !l.release(&1));
        assert_eq!(l.expire(Duration::ZERO, later(6)), vec![4]);
        assert!(l.is_empty() && l.bytes() == 0);
    }

    #[test]
    fn an_ipv6_host_is_one_peer_per_64() {
        let p = |s: &str| peer_of(s.parse().unwrap());
        assert_eq!(p("2001:db8::1"), p("2001:db8::ffff:1234"));
        assert_ne!(p("2001:db8::1"), p("2001:db8:0:1::1"));
        assert_eq!(p("::ffff:10.0.0.1"), p("10.0.0.1"));
    }
}
