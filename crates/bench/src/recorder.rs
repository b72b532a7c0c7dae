//! Recording a run as it happens: sockets in use, and every request's outcome
//! and latency into sharded histograms, turned into [`Stats`] at the end.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::stats::{Bucket, OpStats, Stats, BUCKET};

/// Sockets the bench opened and holds; peak tracked as it changes.
#[derive(Debug, Default)]
pub struct SocketGauge {
    opened: AtomicU64,
    in_use: AtomicI64,
    peak: AtomicI64,
}

impl SocketGauge {
    pub fn open(&self) {
        self.opened.fetch_add(1, Ordering::Relaxed);
        let now = self.in_use.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }
    pub fn close(&self) {
        self.in_use.fetch_sub(1, Ordering::Relaxed);
    }
    /// Take over the sockets counted by `before` (opened while preparing,
    /// before this run's recorder existed), so opens and closes still pair up.
    pub fn carry_over(&self, before: &SocketGauge) {
        self.opened.fetch_add(before.opened(), Ordering::Relaxed);
        let now = self.in_use.fetch_add(before.in_use.load(Ordering::Relaxed), Ordering::Relaxed)
            + before.in_use.load(Ordering::Relaxed);
        self.peak.fetch_max(now.max(before.peak.load(Ordering::Relaxed)), Ordering::Relaxed);
    }
    pub fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }
    pub fn in_use(&self) -> u64 {
        self.in_use.load(Ordering::Relaxed).max(0) as u64
    }
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed).max(0) as u64
    }
}

/// How one request ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    Ok {
        server: Option<Duration>,
    },
    /// Answered, but not with success (a response code, an HTTP status).
    Refused {
        kind: String,
        server: Option<Duration>,
    },
    /// No usable answer: timeout, I/O error, malformed reply.
    Failed {
        kind: String,
    },
}

/// Shared by a run's workers; sharded locks keep contention low without a
/// histogram per worker (hundreds of workers × 3 histograms would be large).
pub struct Recorder {
    start: Instant,
    /// Each shard holds the figures of the requests recorded into it; `finish`
    /// folds them together with [`Stats::merge`], as for separate processes.
    shards: Vec<Mutex<Stats>>,
    /// For the live progress line.
    pub done: AtomicU64,
    pub failed: AtomicU64,
    pub sockets: SocketGauge,
    sampled_sockets: Mutex<Vec<u64>>,
}

/// Error kinds that mean "refused as too busy".
pub fn is_too_busy(kind: &str) -> bool {
    kind == "SERVER_TOO_BUSY" || kind == "http 503"
}

impl Recorder {
    /// `start` is when measurement begins (after warm-up).
    pub fn new(start: Instant) -> Recorder {
        let shards = (0..8).map(|_| Mutex::new(Stats::empty(""))).collect();
        Recorder {
            start,
            shards,
            done: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            sockets: SocketGauge::default(),
            sampled_sockets: Mutex::new(Vec::new()),
        }
    }

    pub fn start(&self) -> Instant {
        self.start
    }

    /// Record one request of operation kind `op` (None: not an operation,
    /// e.g. a connection the client could not open): `intended` is when it
    /// should have started (open loop) or was sent (closed loop), `sent` when
    /// it was sent.
    pub fn record(
        &self,
        worker: usize,
        op: Option<&'static str>,
        intended: Instant,
        sent: Instant,
        done: Instant,
        outcome: &Outcome,
    ) {
        if intended < self.start {
            return; // warm-up
        }
        let latency = done.saturating_duration_since(intended.min(sent)).as_micros().max(1) as u64;
        let service = done.saturating_duration_since(sent).as_micros().max(1) as u64;
        let slice = (done.saturating_duration_since(self.start).as_millis() / BUCKET.as_millis()) as usize;
        let mut s = self.shards[worker % self.shards.len()].lock().unwrap_or_else(|e| e.into_inner());
        if s.series.len() <= slice {
            s.series.resize(slice + 1, Bucket::default());
        }
        let (answered_server, error) = match outcome {
            Outcome::Ok { server } => (Some(*server), None),
            Outcome::Refused { kind, server } => (Some(*server), Some(kind)),
            Outcome::Failed { kind } => (None, Some(kind)),
        };
        match error {
            None => s.ok += 1,
            Some(kind) => *s.errors.entry(kind.clone()).or_default() += 1,
        }
        if let Some(op) = op {
            if !s.by_op.contains_key(op) {
                s.by_op.insert(op.to_string(), OpStats::default());
            }
            let per_op = s.by_op.get_mut(op).expect("inserted above");
            match error {
                None => per_op.ok += 1,
                Some(kind) => *per_op.errors.entry(kind.clone()).or_default() += 1,
            }
            if answered_server.is_some() {
                let _ = per_op.latency_us.record(latency);
            }
        }
        if let Some(server) = answered_server {
            let _ = s.latency_us.record(latency);
            let _ = s.service_us.record(service);
            if error.is_some_and(|k| is_too_busy(k)) {
                let _ = s.too_busy_us.record(service);
            }
            if let Some(t) = server {
                let _ = s.server_us.record(t.as_micros().max(1) as u64);
            }
            let b = &mut s.series[slice];
            b.latency_sum_us += latency;
            b.latency_max_us = b.latency_max_us.max(latency);
        }
        if matches!(outcome, Outcome::Ok { .. }) {
            s.series[slice].ok += 1;
        } else {
            s.series[slice].errors += 1;
            let at = done.saturating_duration_since(self.start).as_secs_f64();
            s.first_error_s = Some(s.first_error_s.map_or(at, |f| f.min(at)));
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        self.done.fetch_add(1, Ordering::Relaxed);
    }

    /// Called every BUCKET by the sampler.
    pub fn sample_sockets(&self) {
        let mut v = self.sampled_sockets.lock().unwrap_or_else(|e| e.into_inner());
        v.push(self.sockets.in_use());
    }

    pub fn finish(&self, label: &str, elapsed: Duration) -> Stats {
        let mut stats = Stats::empty(label);
        for shard in &self.shards {
            stats.merge(&shard.lock().unwrap_or_else(|e| e.into_inner()));
        }
        stats.elapsed_s = elapsed.as_secs_f64();
        let sampled = self.sampled_sockets.lock().unwrap_or_else(|e| e.into_inner());
        for (b, n) in stats.series.iter_mut().zip(sampled.iter()) {
            b.sockets = *n;
        }
        stats.sockets_opened = self.sockets.opened();
        stats.peak_sockets = self.sockets.peak();
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_busy_refusals_are_timed_apart() {
        let start = Instant::now();
        let r = Recorder::new(start);
        let sent = start + Duration::from_millis(1);
        let busy = |kind: &str| Outcome::Refused { kind: kind.to_string(), server: None };
        r.record(0, None, sent, sent, sent + Duration::from_micros(300), &busy("SERVER_TOO_BUSY"));
        r.record(1, None, sent, sent, sent + Duration::from_micros(500), &busy("http 503"));
        r.record(2, None, sent, sent, sent + Duration::from_millis(9), &busy("HANDLE_NOT_FOUND"));
        r.record(3, None, sent, sent, sent + Duration::from_millis(7), &Outcome::Ok { server: None });
        let s = r.finish("t", Duration::from_secs(1));
        assert_eq!(s.too_busy_us.len(), 2);
        assert!(s.too_busy_us.max() < 600, "{}", s.too_busy_us.max());
        assert_eq!(s.latency_us.len(), 4);
    }

    #[test]
    fn recorder_counts_corrected_and_uncorrected_latency() {
        let t0 = Instant::now();
        let r = Recorder::new(t0);
        let intended = t0 + Duration::from_millis(1);
        let sent = intended + Duration::from_millis(100); // sent late: queued behind a stall
        let done = sent + Duration::from_millis(2);
        r.record(0, Some("resolve"), intended, sent, done, &Outcome::Ok { server: Some(Duration::from_micros(500)) });
        r.record(1, Some("create"), intended, sent, done, &Outcome::Failed { kind: "timeout".into() });
        r.record(2, Some("create"), t0 - Duration::from_millis(5), t0, done, &Outcome::Ok { server: None }); // warm-up: ignored
        let s = r.finish("x", Duration::from_secs(1));
        assert_eq!((s.ok, s.error_count()), (1, 1));
        assert!((s.latency_us.max() as i64 - 102_000).abs() < 200);
        assert!((s.service_us.max() as i64 - 2_000).abs() < 10);
        assert_eq!(s.server_us.len(), 1);
        assert_eq!(s.series[1].ok, 1);
        assert!(s.first_error_s.unwrap() > 0.1);
        // Per operation kind: the same requests, split.
        assert_eq!((s.by_op["resolve"].ok, s.by_op["resolve"].latency_us.len()), (1, 1));
        assert_eq!((s.by_op["create"].ok, s.by_op["create"].errors["timeout"]), (0, 1));
        let back: Stats = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        let mut merged = s.clone();
        merged.merge(&back);
        assert_eq!(merged.by_op["resolve"].total(), 2);
    }
}
