//! What a run measured, and the recorder that workers feed. `Stats` is serde
//! (histograms as HdrHistogram V2 + base64) so that several bench processes can
//! send theirs to a coordinator which merges them into one report.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

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
    /// CPU time of the database behind the server (`--db-pid`), its
    /// per-connection processes included.
    #[serde(default)]
    pub db_cpu_s: Option<f64>,
    /// CPU time of the bench process itself over the measured time.
    #[serde(default)]
    pub client_cpu_s: Option<f64>,
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
        OpStats { ok: 0, errors: BTreeMap::new(), latency_us: new_histogram() }
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
            db_cpu_s: None,
            client_cpu_s: None,
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
        self.server_cpu_s.filter(|c| *c > 0.0).map(|c| self.total() as f64 / c)
    }

    /// Requests per core-second of the server and its database together:
    /// what a database-backed server costs, set against one with its store inside.
    pub fn per_server_and_db_core_second(&self) -> Option<f64> {
        let cpu = self.server_cpu_s? + self.db_cpu_s?;
        (cpu > 0.0).then(|| self.total() as f64 / cpu)
    }

    /// Requests per core-second of the bench's own CPU: to set beside the
    /// server's, so that a run shows whether the client or the server limits.
    pub fn per_client_core_second(&self) -> Option<f64> {
        self.client_cpu_s.filter(|c| *c > 0.0).map(|c| self.total() as f64 / c)
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
        // Separate processes: their CPU times add up.
        self.client_cpu_s = match (self.client_cpu_s, other.client_cpu_s) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
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
        V2Serializer::new().serialize(h, &mut buf).map_err(|e| S::Error::custom(format!("{e:?}")))?;
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(buf))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        let text = String::deserialize(d)?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(text).map_err(D::Error::custom)?;
        let h: Histogram<u64> =
            HDe::new().deserialize(&mut bytes.as_slice()).map_err(|e| D::Error::custom(format!("{e:?}")))?;
        // Merging needs the same bounds as ours.
        let mut out = super::new_histogram();
        out.add(&h).map_err(|e| D::Error::custom(format!("{e:?}")))?;
        Ok(out)
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
    fn recovery_is_first_failure_to_first_clean_second() {
        let mut s = Stats::empty("r");
        s.series = vec![Bucket { ok: 5, ..Default::default() }; 40];
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
}
