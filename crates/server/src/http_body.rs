//! Reading HTTP request bodies on every HTTP port (native tunnel, JSON API,
//! domain registry): a time limit, a size limit, and a byte budget shared by all
//! bodies being received at once. A peer that sends part of a body and stalls
//! holds what it sent until the time limit; the budget caps the sum over all
//! such peers (F2: each stalled tunnel POST could pin ~256 KB, and the JSON API
//! reads up to 4 MB), and a body that does not fit is refused at once with 503.
//! One client address may hold at most a quarter of the budget, so a single
//! peer cannot make everyone else's bodies wait.

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::{Body as _, Incoming};
use hyper::StatusCode;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Budget granularity: one permit per KiB.
const UNIT: usize = 1024;

/// The byte budget of bodies in flight; shared by every HTTP port.
pub struct BodyBudget {
    kib: Arc<Semaphore>,
    total_kib: usize,
    /// KiB each client address holds now (entries only while it holds some).
    by_peer: Mutex<HashMap<IpAddr, usize>>,
}

/// One peer's share of the budget, given back on drop.
struct PeerShare {
    budget: Arc<BodyBudget>,
    peer: IpAddr,
    kib: usize,
}

impl Drop for PeerShare {
    fn drop(&mut self) {
        let mut by_peer = self.budget.by_peer.lock();
        if let Some(held) = by_peer.get_mut(&self.peer) {
            *held -= self.kib;
            if *held == 0 {
                by_peer.remove(&self.peer);
            }
        }
    }
}

impl BodyBudget {
    pub fn new(bytes: usize) -> Arc<BodyBudget> {
        let total_kib = bytes.div_ceil(UNIT).max(1);
        Arc::new(BodyBudget { kib: Arc::new(Semaphore::new(total_kib)), total_kib, by_peer: Mutex::default() })
    }

    fn per_peer_kib(&self) -> usize {
        (self.total_kib / 4).max(1)
    }

    fn take_share(self: &Arc<Self>, peer: IpAddr, kib: usize) -> Option<PeerShare> {
        let mut by_peer = self.by_peer.lock();
        let held = by_peer.entry(peer).or_insert(0);
        if *held + kib > self.per_peer_kib() {
            if *held == 0 {
                by_peer.remove(&peer);
            }
            return None;
        }
        *held += kib;
        Some(PeerShare { budget: self.clone(), peer, kib })
    }
}

#[derive(Debug)]
pub enum BodyError {
    /// The budget is spent by other bodies being received.
    Busy,
    /// Longer than allowed, or the connection failed.
    Unreadable(String),
    TimedOut,
}

impl BodyError {
    pub fn status(&self) -> StatusCode {
        match self {
            BodyError::Busy => StatusCode::SERVICE_UNAVAILABLE,
            BodyError::Unreadable(_) => StatusCode::BAD_REQUEST,
            BodyError::TimedOut => StatusCode::REQUEST_TIMEOUT,
        }
    }

    pub fn message(&self) -> String {
        match self {
            BodyError::Busy => "Server too busy (too many request bodies being received)".into(),
            BodyError::Unreadable(e) => format!("Cannot read request body: {e}"),
            BodyError::TimedOut => "Request body not received in time".into(),
        }
    }
}

/// How one HTTP port reads bodies.
#[derive(Clone)]
pub struct BodyReader {
    pub timeout: Duration,
    budget: Arc<BodyBudget>,
}

impl BodyReader {
    pub fn new(timeout: Duration, budget: Arc<BodyBudget>) -> BodyReader {
        BodyReader { timeout, budget }
    }

    /// The whole body from `peer`, at most `max` bytes, within the timeout; the
    /// bytes it may grow to (its Content-Length, else `max`) are reserved from
    /// the budget and the peer's share while it arrives.
    pub async fn read(&self, body: Incoming, max: usize, peer: IpAddr) -> Result<Bytes, BodyError> {
        let announced = body.size_hint().exact().map_or(max, |n| (n as usize).min(max));
        // A body larger than a share still gets in alone.
        let kib = announced.div_ceil(UNIT).clamp(1, self.budget.per_peer_kib());
        let _share = self.budget.take_share(peer, kib).ok_or(BodyError::Busy)?;
        let _reserved = self.budget.kib.clone().try_acquire_many_owned(kib as u32).map_err(|_| BodyError::Busy)?;
        match tokio::time::timeout(self.timeout, Limited::new(body, max).collect()).await {
            Ok(Ok(b)) => Ok(b.to_bytes()),
            Ok(Err(e)) => Err(BodyError::Unreadable(e.to_string())),
            Err(_) => Err(BodyError::TimedOut),
        }
    }
}
