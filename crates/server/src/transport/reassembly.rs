//! Multi-datagram UDP requests being put together (§4.1), per socket, keyed by
//! (peer, request id). Anyone can start one by sending a first datagram that
//! announces up to 256 KiB, so each is charged its announced size to its peer
//! and to the socket's byte budget ([`crate::quota`]): a peer beyond its share,
//! or any peer beyond the budget, has its new requests dropped (as UDP may),
//! and unfinished ones are dropped by age with every batch of datagrams, not
//! only when the table is full (1,024 unfinished requests had held ~300 MB per socket).

use crate::quota::{Ledger, Quota};
use handled_proto::envelope::{Envelope, ENVELOPE_LEN};
use handled_proto::udp::Reassembly;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Unfinished multi-datagram requests are dropped after this long.
pub const REASSEMBLY_TIMEOUT: Duration = Duration::from_secs(5);
/// Charged per request and per datagram on top of the payload (map entries,
/// chunk allocations).
const REQUEST_OVERHEAD: usize = 256;
const CHUNK_OVERHEAD: usize = 64;

type Key = (SocketAddr, i32);

pub struct Reassemblies {
    pending: HashMap<Key, Reassembly>,
    charged: Ledger<Key>,
}

impl Reassemblies {
    pub fn new(quota: Quota) -> Self {
        Reassemblies { pending: HashMap::new(), charged: Ledger::new(quota) }
    }

    /// Add a datagram from `peer` (its `envelope` read by the receiver);
    /// returns the whole unit (the completing datagram's envelope + the full
    /// message) once complete.
    pub fn add(&mut self, peer: SocketAddr, envelope: &Envelope, datagram: &[u8], now: Instant) -> Option<Vec<u8>> {
        self.sweep(now);
        let key = (peer, envelope.request_id);
        if !self.pending.contains_key(&key) {
            let reassembly = Reassembly::try_new(envelope).ok()?;
            let cost = REQUEST_OVERHEAD + reassembly.total_len() + reassembly.expected_chunks() * CHUNK_OVERHEAD;
            if let Err(why) = self.charged.charge(key, peer.ip(), cost, now) {
                tracing::debug!("multi-datagram request from {peer} dropped: {why:?}");
                return None;
            }
            self.pending.insert(key, reassembly);
        }
        let reassembly = self.pending.get_mut(&key)?;
        let outcome = reassembly.add(envelope.sequence, &datagram[ENVELOPE_LEN..]);
        if !matches!(outcome, Ok(None)) {
            self.pending.remove(&key);
            self.charged.release(&key);
        }
        match outcome {
            Ok(Some(message)) => {
                let mut unit = Vec::with_capacity(ENVELOPE_LEN + message.len());
                unit.extend_from_slice(&datagram[..ENVELOPE_LEN]);
                unit.extend_from_slice(&message);
                Some(unit)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::debug!("dropping inconsistent multi-datagram request from {peer}: {e}");
                None
            }
        }
    }

    /// Drop requests unfinished for [`REASSEMBLY_TIMEOUT`].
    pub fn sweep(&mut self, now: Instant) {
        for key in self.charged.expire(REASSEMBLY_TIMEOUT, now) {
            self.pending.remove(&key);
        }
        if self.pending.len() < self.pending.capacity() / 4 {
            self.pending.shrink_to_fit();
        }
    }

    /// Unfinished requests and the bytes charged for them.
    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        (self.charged.len(), self.charged.bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_proto::envelope::Version;
    use handled_proto::udp::split_datagrams;

    fn datagrams(request_id: i32, len: usize) -> Vec<Vec<u8>> {
        let mut envelope = Envelope::new(Version::V2_10, Version::V2_10, request_id);
        envelope.message_length = len as i32;
        split_datagrams(&envelope, &vec![7; len], true)
    }

    fn add(r: &mut Reassemblies, peer: SocketAddr, datagram: &[u8], now: Instant) -> Option<Vec<u8>> {
        r.add(peer, &Envelope::parse(datagram).unwrap(), datagram, now)
    }

    fn peer(n: u8) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, n], 4000))
    }

    /// F7: unfinished requests were bounded only in count (1,024 per socket,
    /// ~300 MB) and dropped only when that was full. Now they are bounded per
    /// peer and in bytes, dropped by age, and others' requests still complete.
    #[test]
    fn unfinished_requests_are_bounded_per_peer_and_in_bytes_and_dropped_by_age() {
        let budget = 8 << 20;
        let mut r = Reassemblies::new(Quota { max_bytes: budget, per_peer: 8 });
        let t0 = Instant::now();
        // Every datagram of a 256 KiB request but the last, from many peers.
        let big = datagrams(1, 256 * 1024);
        for n in 1..=40 {
            for d in &big[..big.len() - 1] {
                assert!(add(&mut r, peer(n), d, t0).is_none());
            }
        }
        let (count, bytes) = r.held();
        assert!(bytes <= budget && count <= 32, "{count} unfinished requests, {bytes} bytes");
        // A flood of small unfinished requests from one peer: its share only.
        for id in 100..1200 {
            add(&mut r, peer(50), &datagrams(id, 900)[0], t0);
        }
        assert!(r.held().0 <= count + 8);
        // Others' requests still complete (the budget is not all one peer's).
        let mut fresh = Reassemblies::new(Quota { max_bytes: budget, per_peer: 8 });
        for id in 100..1200 {
            add(&mut fresh, peer(50), &datagrams(id, 900)[0], t0);
        }
        let small = datagrams(5, 900); // two datagrams
        assert!(add(&mut fresh, peer(60), &small[0], t0).is_none());
        let unit = add(&mut fresh, peer(60), &small[1], t0).expect("another peer's request completes");
        assert_eq!(unit.len(), ENVELOPE_LEN + 900);
        // Unfinished requests go by age, with whatever datagram comes next.
        add(&mut r, peer(60), &small[0], t0 + REASSEMBLY_TIMEOUT);
        assert_eq!(r.held().0, 1, "only the newest is left");
        r.sweep(t0 + 2 * REASSEMBLY_TIMEOUT);
        assert_eq!(r.held(), (0, 0));
        assert!(r.pending.is_empty());
    }
}
