//! What a run measured, and the recorder that workers feed. `Stats` is serde
//! (histograms as HdrHistogram V2 + base64) so that several bench processes can
//! send theirs to a coordinator which merges them into one report.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Resolution of the time series.
pub const BUCKET: Duration = Duration::from_millis(100);

pub fn new_histogram() -> Histogram<u64> {
    // 1 µs .. 10 min, 3 significant digits (0.1 %).
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("static histogram bounds are valid")
}

/// One 100 ms slice of a run, by completion time.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Bucket {
    pub ok: u64,
    pub errors: u64,
    pub latency_sum_us: u64,
    pub latency_max_us: u64,
    /// Sockets in use when the slice ended (sampled).
    pub sockets: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stats {
    pub label: String,
    /// Measured time (after warm-up), seconds.
    pub elapsed_s: f64,
    pub ok: u64,
    /// Failures by kind: a response code name, `timeout`, `io`, `http 503`, ...
    pub errors: BTreeMap<String, u64>,
    /// Latency of answered requests: from the intended start in open-loop runs
    /// (coordinated omission corrected), from the send otherwise.
    #[serde(with = "hist_b64")]
    pub latency_us: Histogram<u64>,
    /// From the actual send to the answer (what an uncorrected tool reports).
    #[serde(with = "hist_b64")]
    pub service_us: Histogram<u64>,
    /// The server's own time, from `Server-Timing`, where it sent one.
    #[serde(with = "hist_b64")]
    pub server_us: Histogram<u64>,
    /// From the send to the answer, of requests refused as too busy
    /// (`SERVER_TOO_BUSY`, HTTP 503): how fast overload is turned away.
    #[serde(with = "hist_b64", default = "new_histogram")]
    pub too_busy_us: Histogram<u64>,
    pub sockets_opened: u64,
    pub peak_sockets: u64,
    pub series: Vec<Bucket>,
    /// Seconds from the start of measurement to the first failure.
    pub first_error_s: Option<f64>,
    pub server_cpu_s: Option<f64>,
    /// Requests per second asked for (open loop and sweeps).
    pub solicited_rate: Option<f64>,
    pub clients: usize,
    /// Connections (sessions) completed, for the httperf-style sweep.
    pub sessions: u64,
    /// Sockets to the target port left in TIME_WAIT after the run.
    pub time_wait_after: Option<u64>,
    /// Per operation kind (`create`, `resolve`, ...), for mixed loops.
    #[serde(default)]
    pub by_op: BTreeMap<String, OpStats>,
    /// The disk's raw fsync rate measured just before the run (`--fsync-probe`).
    #[serde(default)]
    pub disk_fsync_per_s: Option<f64>,
}

/// One operation kind's share of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpStats {
    pub ok: u64,
    pub errors: BTreeMap<String, u64>,
    /// As [`Stats::latency_us`], answered requests of this kind only.
    #[serde(with = "hist_b64")]
    pub latency_us: Histogram<u64>,
}

impl Default for OpStats {
    fn default() -> Self {
        OpStats {
            ok: 0,
            errors: BTreeMap::new(),
            latency_us: new_histogram(),
        }
    }
}

impl OpStats {
    pub fn total(&self) -> u64 {
        self.ok + self.errors.values().sum::<u64>()
    }

    pub fn ms(&self, q: f64) -> f64 {
        self.latency_us.value_at_quantile(q) as f64 / 1000.0
    }

    fn merge(&mut self, other: &OpStats) {
        self.ok += other.ok;
        for (k, v) in &other.errors {
            *self.errors.entry(k.clone()).or_default() += v;
        }
        self.latency_us.add(&other.latency_us).expect("same bounds");
    }
}

impl Stats {
    pub fn empty(label: impl Into<String>) -> Stats {
        Stats {
            label: label.into(),
            elapsed_s: 0.0,
            ok: 0,
            errors: BTreeMap::new(),
            latency_us: new_histogram(),
            service_us: new_histogram(),
            server_us: new_histogram(),
            too_busy_us: new_histogram(),
            sockets_opened: 0,
            peak_sockets: 0,
            series: Vec::new(),
            first_error_s: None,
            server_cpu_s: None,
            solicited_rate: None,
            clients: 0,
            sessions: 0,
            time_wait_after: None,
            by_op: BTreeMap::new(),
            disk_fsync_per_s: None,
        }
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    pub fn total(&self) -> u64 {
        self.ok + self.error_count()
    }

    /// Requests completed (answered or failed) per second.
    pub fn throughput(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.total() as f64 / self.elapsed_s
        } else {
            0.0
        }
    }

    pub fn per_server_core_second(&self) -> Option<f64> {
        self.server_cpu_s
            .filter(|c| *c > 0.0)
            .map(|c| self.total() as f64 / c)
    }

    /// Latency at quantile `q`, in milliseconds.
    pub fn ms(&self, q: f64) -> f64 {
        self.latency_us.value_at_quantile(q) as f64 / 1000.0
    }

    /// Time from the first failure to the start of the first whole second
    /// without failures (with answers in it); None without failures, and
    /// `Some(f64::INFINITY)` if the run never had such a second after it.
    pub fn recovery_s(&self) -> Option<f64> {
        let first = self.first_error_s?;
        let per_s = (Duration::from_secs(1).as_millis() / BUCKET.as_millis()) as usize;
        let start = (first / BUCKET.as_secs_f64()) as usize;
        for b in start..self.series.len().saturating_sub(per_s - 1) {
            let window = &self.series[b..b + per_s];
            if window.iter().all(|x| x.errors == 0) && window.iter().any(|x| x.ok > 0) {
                return Some((b as f64 * BUCKET.as_secs_f64() - first).max(0.0));
            }
        }
        Some(f64::INFINITY)
    }

    /// Fold another process's (or worker's) figures into these. Runs are
    /// assumed to have started together (green flag), so series add slice by slice.
    pub fn merge(&mut self, other: &Stats) {
        self.elapsed_s = self.elapsed_s.max(other.elapsed_s);
        self.ok += other.ok;
        for (k, v) in &other.errors {
            *self.errors.entry(k.clone()).or_default() += v;
        }
        self.latency_us.add(&other.latency_us).expect("same bounds");
        self.service_us.add(&other.service_us).expect("same bounds");
        self.server_us.add(&other.server_us).expect("same bounds");
        self.too_busy_us.add(&other.too_busy_us).expect("same bounds");
        self.sockets_opened += other.sockets_opened;
        // Peaks of separate processes need not coincide: the sum is an upper bound.
        self.peak_sockets += other.peak_sockets;
        merge_series(&mut self.series, &other.series);
        self.first_error_s = match (self.first_error_s, other.first_error_s) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.clients += other.clients;
        self.sessions += other.sessions;
        for (op, o) in &other.by_op {
            self.by_op.entry(op.clone()).or_default().merge(o);
        }
        self.solicited_rate = match (self.solicited_rate, other.solicited_rate) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }
}

fn merge_series(into: &mut Vec<Bucket>, from: &[Bucket]) {
    if into.len() < from.len() {
        into.resize(from.len(), Bucket::default());
    }
    for (a, b) in into.iter_mut().zip(from) {
        a.ok += b.ok;
        a.errors += b.errors;
        a.latency_sum_us += b.latency_sum_us;
        a.latency_max_us = a.latency_max_us.max(b.latency_max_us);
        a.sockets += b.sockets;
    }
}

mod hist_b64 {
    use base64::Engine;
    use hdrhistogram::serialization::{Deserializer as HDe, Serializer as _, V2Serializer};
    use hdrhistogram::Histogram;
    use serde::{de::Error as _, ser::Error as _, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = Vec::new();
        V2Serializer::new()
            .serialize(h, &mut buf)
            .map_err(|e| S::Error::custom(format!("{e:?}")))?;
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(buf))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        let text = String::deserialize(d)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(D::Error::custom)?;
        let h: Histogram<u64> = HDe::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| D::Error::custom(format!("{e:?}")))?;
        // Merging needs the same bounds as ours.
        let mut out = super::new_histogram();
        out.add(&h)
            .map_err(|e| D::Error::custom(format!("{e:?}")))?;
        Ok(out)
    }
}

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
        let now = self
            .in_use
            .fetch_add(before.in_use.load(Ordering::Relaxed), Ordering::Relaxed)
            + before.in_use.load(Ordering::Relaxed);
        self.peak.fetch_max(
            now.max(before.peak.load(Ordering::Relaxed)),
            Ordering::Relaxed,
        );
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

struct Shard {
    ok: u64,
    errors: BTreeMap<String, u64>,
    latency: Histogram<u64>,
    service: Histogram<u64>,
    server: Histogram<u64>,
    too_busy: Histogram<u64>,
    series: Vec<Bucket>,
    first_error: Option<Duration>,
    by_op: BTreeMap<&'static str, OpStats>,
}

/// Shared by a run's workers; sharded locks keep contention low without a
/// histogram per worker (hundreds of workers × 3 histograms would be large).
pub struct Recorder {
    start: Instant,
    shards: Vec<Mutex<Shard>>,
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
        let shards = (0..8)
            .map(|_| {
                Mutex::new(Shard {
                    ok: 0,
                    errors: BTreeMap::new(),
                    latency: new_histogram(),
                    service: new_histogram(),
                    server: new_histogram(),
                    too_busy: new_histogram(),
                    series: Vec::new(),
                    first_error: None,
                    by_op: BTreeMap::new(),
                })
            })
            .collect();
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
        let latency = done
            .saturating_duration_since(intended.min(sent))
            .as_micros()
            .max(1) as u64;
        let service = done.saturating_duration_since(sent).as_micros().max(1) as u64;
        let slice =
            (done.saturating_duration_since(self.start).as_millis() / BUCKET.as_millis()) as usize;
        let mut s = self.shards[worker % self.shards.len()]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
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
            let per_op = s.by_op.entry(op).or_default();
            match error {
                None => per_op.ok += 1,
                Some(kind) => *per_op.errors.entry(kind.clone()).or_default() += 1,
            }
            if answered_server.is_some() {
                let _ = per_op.latency_us.record(latency);
            }
        }
        if let Some(server) = answered_server {
            let _ = s.latency.record(latency);
            let _ = s.service.record(service);
            if error.is_some_and(|k| is_too_busy(k)) {
                let _ = s.too_busy.record(service);
            }
            if let Some(t) = server {
                let _ = s.server.record(t.as_micros().max(1) as u64);
            }
            let b = &mut s.series[slice];
            b.latency_sum_us += latency;
            b.latency_max_us = b.latency_max_us.max(latency);
        }
        if matches!(outcome, Outcome::Ok { .. }) {
            s.series[slice].ok += 1;
        } else {
            s.series[slice].errors += 1;
            let at = done.saturating_duration_since(self.start);
            s.first_error = Some(s.first_error.map_or(at, |f| f.min(at)));
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        self.done.fetch_add(1, Ordering::Relaxed);
    }

    /// Called every BUCKET by the sampler.
    pub fn sample_sockets(&self) {
        let mut v = self
            .sampled_sockets
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        v.push(self.sockets.in_use());
    }

    pub fn finish(&self, label: &str, elapsed: Duration) -> Stats {
        let mut stats = Stats::empty(label);
        stats.elapsed_s = elapsed.as_secs_f64();
        let mut first: Option<Duration> = None;
        for shard in &self.shards {
            let s = shard.lock().unwrap_or_else(|e| e.into_inner());
            stats.ok += s.ok;
            for (k, v) in &s.errors {
                *stats.errors.entry(k.clone()).or_default() += v;
            }
            stats.latency_us.add(&s.latency).expect("same bounds");
            stats.service_us.add(&s.service).expect("same bounds");
            stats.server_us.add(&s.server).expect("same bounds");
            stats.too_busy_us.add(&s.too_busy).expect("same bounds");
            merge_series(&mut stats.series, &s.series);
            first = match (first, s.first_error) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            for (op, o) in &s.by_op {
                stats.by_op.entry(op.to_string()).or_default().merge(o);
            }
        }
        stats.first_error_s = first.map(|d| d.as_secs_f64());
        let sampled = self
            .sampled_sockets
            .lock()
            .unwrap_or_else(|e| e.into_inner());
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
    fn histograms_survive_serialization_and_merge() {
        let mut a = Stats::empty("a");
        let mut b = Stats::empty("b");
        for v in 1..=1000u64 {
            a.latency_us.record(v).unwrap();
            b.latency_us.record(v * 1000).unwrap();
        }
        a.ok = 1000;
        b.ok = 1000;
        let text = serde_json::to_string(&b).unwrap();
        let back: Stats = serde_json::from_str(&text).unwrap();
        assert_eq!(back.latency_us.len(), 1000);
        assert_eq!(back.latency_us.max(), b.latency_us.max());
        a.merge(&back);
        assert_eq!(a.ok, 2000);
        assert_eq!(a.latency_us.len(), 2000);
        // Half the merged samples are ≤ 1 ms.
        assert!(a.latency_us.value_at_quantile(0.5) <= 1001);
        assert!(a.latency_us.value_at_quantile(0.51) >= 10_000);
    }

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
    fn recovery_is_first_failure_to_first_clean_second() {
        let mut s = Stats::empty("r");
        s.series = vec![
            Bucket {
                ok: 5,
                ..Default::default()
            };
            40
        ];
        for b in &mut s.series[10..=17] {
            b.errors = 3; // failures from 1.0 s to 1.8 s
        }
        s.first_error_s = Some(1.02);
        let r = s.recovery_s().unwrap();
        assert!((r - 0.78).abs() < 1e-9, "{r}");
        s.series[39].errors = 1;
        s.series[25].errors = 1; // 2.5 s: no clean second between 1.8 s and 3.9 s other than 2.6..3.6
        assert!((s.recovery_s().unwrap() - 1.58).abs() < 1e-9);
        s.series.truncate(30); // not enough time after the last failure
        assert_eq!(s.recovery_s(), Some(f64::INFINITY));
        assert_eq!(Stats::empty("none").recovery_s(), None);
    }

    #[test]
    fn recorder_counts_corrected_and_uncorrected_latency() {
        let t0 = Instant::now();
        let r = Recorder::new(t0);
        let intended = t0 + Duration::from_millis(1);
        let sent = intended + Duration::from_millis(100); // sent late: queued behind a stall
        let done = sent + Duration::from_millis(2);
        r.record(
            0,
            Some("resolve"),
            intended,
            sent,
            done,
            &Outcome::Ok {
                server: Some(Duration::from_micros(500)),
            },
        );
        r.record(
            1,
            Some("create"),
            intended,
            sent,
            done,
            &Outcome::Failed {
                kind: "timeout".into(),
            },
        );
        r.record(
            2,
            Some("create"),
            t0 - Duration::from_millis(5),
            t0,
            done,
            &Outcome::Ok { server: None },
        ); // warm-up: ignored
        let s = r.finish("x", Duration::from_secs(1));
        assert_eq!((s.ok, s.error_count()), (1, 1));
        assert!((s.latency_us.max() as i64 - 102_000).abs() < 200);
        assert!((s.service_us.max() as i64 - 2_000).abs() < 10);
        assert_eq!(s.server_us.len(), 1);
        assert_eq!(s.series[1].ok, 1);
        assert!(s.first_error_s.unwrap() > 0.1);
        // Per operation kind: the same requests, split.
        assert_eq!(
            (s.by_op["resolve"].ok, s.by_op["resolve"].latency_us.len()),
            (1, 1)
        );
        assert_eq!(
            (s.by_op["create"].ok, s.by_op["create"].errors["timeout"]),
            (0, 1)
        );
        let back: Stats = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        let mut merged = s.clone();
        merged.merge(&back);
        assert_eq!(merged.by_op["resolve"].total(), 2);
    }
}
