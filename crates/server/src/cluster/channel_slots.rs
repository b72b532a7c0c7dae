//! Who may hold a connection to the cluster channel. Anyone who can reach the
//! port can connect, but only the site's nodes know the key, so a connection
//! starts *pending* (a small budget, a few per address, a short deadline for
//! its first frame) and becomes *authenticated* once a frame verified. The
//! two budgets are apart: strangers filling the pending slots never close
//! or crowd out the connections peers already hold (each keeps a pool), and
//! no address holds more than a peer's pool of either.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// Connections waiting for their first authenticated frame, in all.
pub const MAX_PENDING: usize = 32;
/// ... and from one address.
pub const MAX_PENDING_PER_ADDRESS: usize = 4;
/// Authenticated connections, in all.
pub const MAX_AUTHENTICATED: usize = 64;
/// Connections of either kind from one address: twice a peer's pool.
pub const MAX_PER_ADDRESS: usize = 16;
/// How soon after connecting the first frame must have come.
pub const FIRST_FRAME: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Counts {
    pending: usize,
    authenticated: usize,
    pending_by_address: HashMap<IpAddr, usize>,
    by_address: HashMap<IpAddr, usize>,
}

/// The budgets of one channel listener.
#[derive(Clone, Default)]
pub struct Slots {
    counts: Arc<Mutex<Counts>>,
}

/// A connection's place; gives it back when dropped.
pub struct Slot {
    counts: Arc<Mutex<Counts>>,
    address: IpAddr,
    authenticated: bool,
}

fn decrement(map: &mut HashMap<IpAddr, usize>, address: IpAddr) {
    if let Some(n) = map.get_mut(&address) {
        *n -= 1;
        if *n == 0 {
            map.remove(&address);
        }
    }
}

impl Slots {
    /// A pending slot for a connection from `address`, if one is free.
    pub fn pending(&self, address: IpAddr) -> Option<Slot> {
        let mut c = self.counts.lock();
        let from_here = c.pending_by_address.get(&address).copied().unwrap_or(0);
        let all_from_here = c.by_address.get(&address).copied().unwrap_or(0);
        if c.pending >= MAX_PENDING || from_here >= MAX_PENDING_PER_ADDRESS || all_from_here >= MAX_PER_ADDRESS {
            return None;
        }
        c.pending += 1;
        *c.pending_by_address.entry(address).or_default() += 1;
        *c.by_address.entry(address).or_default() += 1;
        Some(Slot { counts: self.counts.clone(), address, authenticated: false })
    }

    /// (pending, authenticated) connections now.
    pub fn counts(&self) -> (usize, usize) {
        let c = self.counts.lock();
        (c.pending, c.authenticated)
    }
}

impl Slot {
    /// The connection sent a frame that verified: it moves to the
    /// authenticated budget, or is refused (false) when that is full.
    pub fn authenticate(&mut self) -> bool {
        if self.authenticated {
            return true;
        }
        let mut c = self.counts.lock();
        if c.authenticated >= MAX_AUTHENTICATED {
            return false;
        }
        c.pending -= 1;
        decrement(&mut c.pending_by_address, self.address);
        c.authenticated += 1;
        self.authenticated = true;
        true
    }

    pub fn is_authenticated(&self) -> bool {
        self.authenticated
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.counts.lock();
        if self.authenticated {
            c.authenticated -= 1;
        } else {
            c.pending -= 1;
            decrement(&mut c.pending_by_address, self.address);
        }
        decrement(&mut c.by_address, self.address);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strangers_fill_only_the_pending_budget() {
        let slots = Slots::default();
        let stranger: IpAddr = "192.0.2.1".parse().unwrap();
        let held: Vec<Slot> = (0..MAX_PENDING_PER_ADDRESS).map(|_| slots.pending(stranger).unwrap()).collect();
        assert!(slots.pending(stranger).is_none(), "a few per address");
        let others: Vec<Slot> = (0..MAX_PENDING - MAX_PENDING_PER_ADDRESS)
            .map(|i| slots.pending(IpAddr::from([198, 51, 100, i as u8])).unwrap())
            .collect();
        let peer: IpAddr = "127.0.0.2".parse().unwrap();
        assert!(slots.pending(peer).is_none(), "pending full");
        drop(held);
        drop(others);
        // A peer's pool: authenticated connections leave the pending budget.
        let pool: Vec<Slot> = (0..8)
            .map(|_| {
                let mut s = slots.pending(peer).unwrap();
                assert!(s.authenticate());
                s
            })
            .collect();
        assert_eq!(slots.counts(), (0, 8));
        let flood: Vec<Slot> =
            (0..MAX_PENDING).filter_map(|i| slots.pending(IpAddr::from([203, 0, 113, i as u8]))).collect();
        assert_eq!(flood.len(), MAX_PENDING);
        assert_eq!(slots.counts(), (MAX_PENDING, 8), "the flood does not touch the peer's pool");
        drop((pool, flood));
        assert_eq!(slots.counts(), (0, 0));
        assert!(slots.counts.lock().by_address.is_empty());
    }

    #[test]
    fn one_address_holds_at_most_a_pool_and_a_half() {
        let slots = Slots::default();
        let a: IpAddr = "127.0.0.3".parse().unwrap();
        let mut kept = Vec::new();
        while let Some(mut s) = slots.pending(a) {
            assert!(s.authenticate());
            kept.push(s);
        }
        assert_eq!(kept.len(), MAX_PER_ADDRESS);
    }
}
