//! Open-connection limits shared by every TCP listener (native TCP, the HTTP
//! port, the domain registry): a total and a per-peer-address cap. Each open
//! socket costs a file descriptor, and running out of them stops every listener
//! at once (F2: 21,000 stalled tunnel POSTs did), so a connection beyond a cap is
//! refused at once instead of held.

use crate::http_body::BodyBudget;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

/// Descriptors kept free for the store, UDP sockets, logs and refusing.
const FD_RESERVE: u64 = 256;

/// Which cap a refused connection met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Total,
    PerPeer,
}

impl Refusal {
    /// Metric label.
    pub fn label(self) -> &'static str {
        match self {
            Refusal::Total => "total",
            Refusal::PerPeer => "per_peer",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Total => "too many open connections",
            Refusal::PerPeer => "too many open connections from this address",
        }
    }
}

pub struct ConnectionLimits {
    total: usize,
    /// 0: no per-peer cap.
    per_peer: usize,
    /// Open connections per peer address (entries only while some are open, so
    /// the map holds at most `total` entries).
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
    /// What their partly received request bodies may hold, together.
    pub bodies: Arc<BodyBudget>,
}

/// One admitted connection; its slot is given back when this is dropped.
pub struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    peer: IpAddr,
}

impl ConnectionLimits {
    pub fn new(total: usize, per_peer: usize, body_bytes: usize) -> Arc<ConnectionLimits> {
        let open = Mutex::new((0, HashMap::new()));
        Arc::new(ConnectionLimits { total: total.max(1), per_peer, open, bodies: BodyBudget::new(body_bytes) })
    }

    /// The configured limits, the total lowered to what the descriptor limit
    /// allows (after raising the soft limit to the hard one).
    pub fn from_config(config: &crate::config::TransportConfig) -> Arc<ConnectionLimits> {
        let (mut total, mut per_peer) = (config.max_connections, config.max_connections_per_peer);
        if let Some(fds) = raise_fd_limit() {
            let fit = fds.saturating_sub(FD_RESERVE).max(1) as usize;
            if fit < total {
                total = fit;
                // One address must still not be able to take every slot.
                if per_peer == 0 || per_peer > total / 4 {
                    per_peer = (total / 4).max(1);
                }
                tracing::warn!(
                    "max_connections = {} does not fit in {fds} file descriptors (RLIMIT_NOFILE): \
                     using {total}, at most {per_peer} per client address",
                    config.max_connections
                );
            }
        }
        ConnectionLimits::new(total, per_peer, config.http_body_budget_mb << 20)
    }

    /// A slot for a connection from `peer`, or which cap it meets.
    pub fn try_open(self: &Arc<Self>, peer: IpAddr) -> Result<ConnectionSlot, Refusal> {
        let mut guard = self.open.lock();
        let (count, per_peer) = &mut *guard;
        if *count >= self.total {
            return Err(Refusal::Total);
        }
        let mine = per_peer.entry(peer).or_insert(0);
        if self.per_peer > 0 && *mine >= self.per_peer {
            return Err(Refusal::PerPeer);
        }
        *mine += 1;
        *count += 1;
        Ok(ConnectionSlot { limits: self.clone(), peer })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.lock().0
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut guard = self.limits.open.lock();
        let (count, per_peer) = &mut *guard;
        *count -= 1;
        if let Some(n) = per_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                per_peer.remove(&self.peer);
            }
        }
    }
}

/// Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now
/// in force (None when it cannot be read, or is unlimited).
pub fn raise_fd_limit() -> Option<u64> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = lim.rlim_max;
        }
    }
    (lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_total_and_per_peer_and_gives_slots_back() {
        let limits = ConnectionLimits::new(3, 2, 1 << 20);
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
        let a1 = limits.try_open(a).unwrap();
        let _a2 = limits.try_open(a).unwrap();
        assert_eq!(limits.try_open(a).err(), Some(Refusal::PerPeer));
        let _b1 = limits.try_open(b).unwrap();
        assert_eq!(limits.try_open(b).err(), Some(Refusal::Total));
        drop(a1);
        assert_eq!(limits.open(), 2);
        assert!(limits.try_open(a).is_ok(), "a closed connection frees its slot");
        assert_eq!(limits.open.lock().1.len(), 2, "no entries for peers without connections");
    }

    #[test]
    fn zero_per_peer_means_only_the_total() {
        let limits = ConnectionLimits::new(2, 0, 1 << 20);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let _s = (limits.try_open(a).unwrap(), limits.try_open(a).unwrap());
        assert_eq!(limits.try_open(a).err(), Some(Refusal::Total));
    }
}
