//! Admission control, one policy for every transport: at most `max_concurrent`
//! requests are processed at once; up to `queue` more wait in FIFO order (tokio's
//! semaphore is fair) for at most `max_wait`. Anything beyond is refused at once,
//! so a surge is answered honestly (RC_SERVER_TOO_BUSY / HTTP 503) instead of
//! growing latency and memory without bound.
//!
//! "At once" includes requests that would only be refused later: the queue's
//! drain rate is measured (time between turns granted while others kept
//! waiting), and a request that would wait longer than `max_wait` behind those
//! already queued is refused on arrival rather than after `max_wait`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// The queue was full when the request arrived.
    QueueFull,
    /// It waited `max_wait` without getting its turn.
    WaitedTooLong,
    /// At the measured drain rate it would have waited longer than `max_wait`.
    WouldWaitTooLong,
}

impl Rejection {
    pub fn as_str(self) -> &'static str {
        match self {
            Rejection::QueueFull => "queue_full",
            Rejection::WaitedTooLong => "queue_timeout",
            Rejection::WouldWaitTooLong => "queue_wait_predicted",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionLimits {
    pub max_concurrent: usize,
    pub queue: usize,
    pub max_wait: Duration,
}

/// Counters and gauges, read by metrics and `handled status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AdmissionStats {
    pub admitted: u64,
    /// Admitted or not, requests that had to wait.
    pub queued: u64,
    pub rejected_queue_full: u64,
    pub rejected_timeout: u64,
    pub rejected_predicted: u64,
    pub in_flight: u64,
    pub waiting: u64,
    pub max_concurrent: u64,
    pub queue_capacity: u64,
}

#[derive(Clone)]
pub struct Admission {
    inner: Arc<Inner>,
}

struct Inner {
    config: AdmissionLimits,
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
    admitted: AtomicU64,
    queued: AtomicU64,
    rejected_full: AtomicU64,
    rejected_timeout: AtomicU64,
    rejected_predicted: AtomicU64,
    /// Mean time between turns granted from the queue (ns, moving average; 0 =
    /// not measured yet), and when the last one was granted with others still
    /// waiting behind it.
    drain_interval_ns: AtomicU64,
    last_grant: parking_lot::Mutex<Option<(Instant, bool)>>,
}

impl Inner {
    /// A queued request got its turn: update the drain rate. Only an interval
    /// during which the queue never emptied says how fast it drains.
    fn note_grant(&self) {
        let now = Instant::now();
        let others_waiting = self.waiting.load(Ordering::Acquire) > 1;
        let mut last = self.last_grant.lock();
        if let Some((previous, true)) = *last {
            let dt = now.saturating_duration_since(previous).as_nanos().min(u64::MAX as u128) as u64;
            let old = self.drain_interval_ns.load(Ordering::Relaxed);
            let new = if old == 0 { dt } else { old - old / 8 + dt / 8 };
            self.drain_interval_ns.store(new.max(1), Ordering::Relaxed);
        }
        *last = Some((now, others_waiting));
    }

    /// Would a request joining the queue behind `ahead` others wait too long?
    fn would_wait_too_long(&self, ahead: usize) -> bool {
        let interval = self.drain_interval_ns.load(Ordering::Relaxed);
        interval > 0 && (ahead as u128 + 1) * interval as u128 > self.config.max_wait.as_nanos()
    }
}

/// The outcome of asking for a turn without waiting.
pub enum Turn {
    /// Processing may start now; it lasts as long as the permit lives.
    Now(OwnedSemaphorePermit),
    /// A place in the queue was taken (counted at once, so a burst cannot
    /// overfill the queue before its requests start waiting).
    Queued(QueuedTurn),
}

impl Turn {
    /// The permit: at once, or after waiting in the queue (at most the
    /// configured time).
    pub async fn permit(self) -> Result<OwnedSemaphorePermit, Rejection> {
        match self {
            Turn::Now(permit) => Ok(permit),
            Turn::Queued(turn) => turn.wait().await,
        }
    }
}

/// A counted place in the admission queue.
pub struct QueuedTurn {
    inner: Arc<Inner>,
}

impl QueuedTurn {
    /// Wait for the turn, at most the configured time.
    pub async fn wait(self) -> Result<OwnedSemaphorePermit, Rejection> {
        let turn = tokio::time::timeout(self.inner.config.max_wait, self.inner.permits.clone().acquire_owned()).await;
        match turn {
            Ok(Ok(permit)) => {
                self.inner.admitted.fetch_add(1, Ordering::Relaxed);
                self.inner.note_grant();
                Ok(permit)
            }
            _ => {
                self.inner.rejected_timeout.fetch_add(1, Ordering::Relaxed);
                Err(Rejection::WaitedTooLong)
            }
        }
    }
}

impl Drop for QueuedTurn {
    fn drop(&mut self) {
        self.inner.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Admission {
    pub fn new(config: AdmissionLimits) -> Self {
        Admission {
            inner: Arc::new(Inner {
                config,
                permits: Arc::new(Semaphore::new(config.max_concurrent.max(1))),
                waiting: AtomicUsize::new(0),
                admitted: AtomicU64::new(0),
                queued: AtomicU64::new(0),
                rejected_full: AtomicU64::new(0),
                rejected_timeout: AtomicU64::new(0),
                rejected_predicted: AtomicU64::new(0),
                drain_interval_ns: AtomicU64::new(0),
                last_grant: parking_lot::Mutex::new(None),
            }),
        }
    }

    /// Decide at once: a turn now, a place in the queue, or a refusal.
    pub fn request(&self) -> Result<Turn, Rejection> {
        let inner = &self.inner;
        if let Ok(permit) = inner.permits.clone().try_acquire_owned() {
            inner.admitted.fetch_add(1, Ordering::Relaxed);
            return Ok(Turn::Now(permit));
        }
        let ahead = inner.waiting.fetch_add(1, Ordering::AcqRel);
        if ahead >= inner.config.queue {
            inner.waiting.fetch_sub(1, Ordering::AcqRel);
            inner.rejected_full.fetch_add(1, Ordering::Relaxed);
            return Err(Rejection::QueueFull);
        }
        if inner.would_wait_too_long(ahead) {
            inner.waiting.fetch_sub(1, Ordering::AcqRel);
            inner.rejected_predicted.fetch_add(1, Ordering::Relaxed);
            return Err(Rejection::WouldWaitTooLong);
        }
        inner.queued.fetch_add(1, Ordering::Relaxed);
        Ok(Turn::Queued(QueuedTurn { inner: inner.clone() }))
    }

    /// A turn only if one is free now; nothing is counted otherwise (the
    /// caller then asks again with [`Self::request`]).
    pub fn try_now(&self) -> Option<OwnedSemaphorePermit> {
        let permit = self.inner.permits.clone().try_acquire_owned().ok()?;
        self.inner.admitted.fetch_add(1, Ordering::Relaxed);
        Some(permit)
    }

    /// Wait for a turn, or learn at once (queue full) or after `max_wait` that
    /// there is none. Processing lasts as long as the returned permit lives.
    pub async fn admit(&self) -> Result<OwnedSemaphorePermit, Rejection> {
        self.request()?.permit().await
    }

    /// Seconds a refused client should wait before retrying (HTTP Retry-After).
    pub fn retry_after_secs(&self) -> u64 {
        self.inner.config.max_wait.as_secs().max(1)
    }

    pub fn stats(&self) -> AdmissionStats {
        let inner = &self.inner;
        let max = inner.config.max_concurrent.max(1);
        AdmissionStats {
            admitted: inner.admitted.load(Ordering::Relaxed),
            queued: inner.queued.load(Ordering::Relaxed),
            rejected_queue_full: inner.rejected_full.load(Ordering::Relaxed),
            rejected_timeout: inner.rejected_timeout.load(Ordering::Relaxed),
            rejected_predicted: inner.rejected_predicted.load(Ordering::Relaxed),
            in_flight: (max - inner.permits.available_permits().min(max)) as u64,
            waiting: inner.waiting.load(Ordering::Relaxed) as u64,
            max_concurrent: max as u64,
            queue_capacity: inner.config.queue as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(max_wait_ms: u64) -> Arc<Admission> {
        Arc::new(Admission::new(AdmissionLimits {
            max_concurrent: 2,
            queue: 3,
            max_wait: Duration::from_millis(max_wait_ms),
        }))
    }

    #[tokio::test]
    async fn full_queue_is_refused_at_once() {
        let a = small(10_000);
        let p1 = a.admit().await.unwrap();
        let _p2 = a.admit().await.unwrap();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let a = a.clone();
                tokio::spawn(async move { a.admit().await.map(|_| ()) })
            })
            .collect();
        while a.stats().waiting < 3 {
            tokio::task::yield_now().await;
        }
        let t = std::time::Instant::now();
        assert_eq!(a.admit().await.err(), Some(Rejection::QueueFull));
        assert!(t.elapsed() < Duration::from_millis(50));
        drop(p1);
        drop(_p2);
        for w in waiters {
            w.await.unwrap().unwrap();
        }
        let s = a.stats();
        assert_eq!((s.admitted, s.queued, s.rejected_queue_full, s.in_flight, s.waiting), (5, 3, 1, 0, 0));
    }

    #[tokio::test]
    async fn waiting_too_long_is_refused() {
        let a = small(30);
        let _p1 = a.admit().await.unwrap();
        let _p2 = a.admit().await.unwrap();
        assert_eq!(a.admit().await.err(), Some(Rejection::WaitedTooLong));
        assert_eq!(a.stats().rejected_timeout, 1);
        assert_eq!(a.stats().in_flight, 2);
    }

    /// Once the drain rate is known, a request that could not be served within
    /// `max_wait` is refused on arrival instead of after waiting `max_wait`.
    #[tokio::test]
    async fn hopeless_waits_are_refused_on_arrival() {
        let a = Arc::new(Admission::new(AdmissionLimits {
            max_concurrent: 1,
            queue: 100,
            max_wait: Duration::from_millis(100),
        }));
        let first = a.admit().await.unwrap();
        // Six waiters, each holding its turn 30 ms: the queue drains at ~30 ms a turn.
        let waiters: Vec<_> = (0..6)
            .map(|_| {
                let a = a.clone();
                tokio::spawn(async move {
                    if let Ok(_turn) = a.admit().await {
                        tokio::time::sleep(Duration::from_millis(30)).await;
                    }
                })
            })
            .collect();
        while a.stats().waiting < 6 {
            tokio::task::yield_now().await;
        }
        drop(first);
        // After two turns from the queue the rate is known; four still wait.
        while a.stats().admitted < 3 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let t = std::time::Instant::now();
        assert_eq!(a.admit().await.err(), Some(Rejection::WouldWaitTooLong));
        assert!(t.elapsed() < Duration::from_millis(20));
        assert_eq!(a.stats().rejected_predicted, 1);
        for w in waiters {
            w.await.unwrap();
        }
    }

    #[tokio::test]
    async fn queue_is_first_in_first_out() {
        let a = small(10_000);
        let p1 = a.admit().await.unwrap();
        let p2 = a.admit().await.unwrap();
        let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..3 {
            let (a2, order) = (a.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _p = a2.admit().await.unwrap();
                order.lock().push(i);
            }));
            while a.stats().waiting < i + 1 {
                tokio::task::yield_now().await;
            }
        }
        drop(p1);
        drop(p2);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock(), vec![0, 1, 2]);
    }
}
