//! The closed-loop load model: N clients, each sending its next request as soon
//! as the previous one is answered (or timed out, which counts as an error).

use crate::cpu::process_cpu_time;
use handled_client::{ClientError, Connection, Protocol, ResolveOptions};
use handled_proto::header::ResponseCode;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which handles the clients resolve.
#[derive(Debug, Clone)]
pub enum KeySet {
    /// Always the same handle.
    One(Vec<u8>),
    /// Uniformly random over `prefix/0 .. prefix/count-1`.
    Uniform { prefix: String, count: u64 },
}

impl KeySet {
    fn pick(&self, rng: &mut impl rand::Rng) -> Vec<u8> {
        match self {
            KeySet::One(h) => h.clone(),
            KeySet::Uniform { prefix, count } => format!("{prefix}/{}", rng.random_range(0..*count)).into_bytes(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct BenchConfig {
    pub protocol: Protocol,
    pub addr: SocketAddr,
    pub concurrency: usize,
    /// Stop after this long (whichever of duration and requests comes first).
    pub duration: Option<Duration>,
    /// Stop after this many requests in total.
    pub requests: Option<u64>,
    /// Requests sent before measuring starts.
    pub warmup: Duration,
    pub keys: KeySet,
    /// Keep TCP connections open between requests (the Java client does not).
    pub persistent: bool,
    pub timeout: Duration,
    /// Pause between a client's requests.
    pub pause: Duration,
    /// Server process whose CPU time is measured over the run.
    pub server_pid: Option<u32>,
}

/// What a run measured.
#[derive(Debug)]
pub struct BenchResult {
    pub config: BenchConfig,
    pub elapsed: Duration,
    /// Answered with SUCCESS.
    pub ok: u64,
    /// Failures by kind: a response code name, "timeout", "io", ...
    pub errors: BTreeMap<String, u64>,
    /// Latency of every answered request, in microseconds.
    pub latency_us: Histogram<u64>,
    pub connections_opened: u64,
    pub server_cpu: Option<Duration>,
}

impl BenchResult {
    pub fn total(&self) -> u64 {
        self.ok + self.errors.values().sum::<u64>()
    }

    pub fn throughput(&self) -> f64 {
        self.total() as f64 / self.elapsed.as_secs_f64()
    }

    /// Requests per second of server CPU time.
    pub fn per_server_core_second(&self) -> Option<f64> {
        self.server_cpu.filter(|c| !c.is_zero()).map(|c| self.total() as f64 / c.as_secs_f64())
    }
}

struct Worker {
    ok: u64,
    errors: BTreeMap<String, u64>,
    latency_us: Histogram<u64>,
    connections_opened: u64,
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("static histogram bounds are valid")
}

fn error_kind(e: &ClientError) -> String {
    match e {
        ClientError::Timeout(_) => "timeout".into(),
        ClientError::Io(_) => "io".into(),
        ClientError::Decode(_) => "malformed".into(),
        ClientError::Http(_) => "http".into(),
        ClientError::WrongRequestId { .. } => "wrong-request-id".into(),
    }
}

pub async fn run_closed_loop(config: BenchConfig) -> Result<BenchResult, ClientError> {
    // Open every connection first so set-up cost is not measured as latency.
    let mut connections = Vec::with_capacity(config.concurrency);
    for _ in 0..config.concurrency.max(1) {
        connections.push(Connection::open(config.protocol, config.addr, config.timeout, config.persistent).await?);
    }
    let budget = Arc::new(AtomicU64::new(config.requests.unwrap_or(u64::MAX)));
    let warmup_end = Instant::now() + config.warmup;
    let mut tasks = Vec::new();
    for mut conn in connections {
        let cfg = config.clone();
        let budget = budget.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::from_rng(&mut rand::rng());
            let options = ResolveOptions::default();
            while Instant::now() < warmup_end {
                let _ = conn.resolve(&cfg.keys.pick(&mut rng), &options).await;
            }
            let started = Instant::now();
            let deadline = cfg.duration.map(|d| started + d);
            let mut w = Worker { ok: 0, errors: BTreeMap::new(), latency_us: new_histogram(), connections_opened: 0 };
            let opened_before = conn.connections_opened();
            loop {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                if budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_err() {
                    break;
                }
                let key = cfg.keys.pick(&mut rng);
                let t0 = Instant::now();
                match conn.resolve(&key, &options).await {
                    Ok(r) if r.code() == ResponseCode::SUCCESS => {
                        w.ok += 1;
                        let _ = w.latency_us.record(t0.elapsed().as_micros().max(1) as u64);
                    }
                    Ok(r) => {
                        *w.errors.entry(r.code().name().to_string()).or_default() += 1;
                        let _ = w.latency_us.record(t0.elapsed().as_micros().max(1) as u64);
                    }
                    Err(e) => *w.errors.entry(error_kind(&e)).or_default() += 1,
                }
                if !cfg.pause.is_zero() {
                    tokio::time::sleep(cfg.pause).await;
                }
            }
            w.connections_opened = conn.connections_opened() - opened_before;
            w
        }));
    }
    tokio::time::sleep_until(warmup_end.into()).await;
    let cpu_before = config.server_pid.and_then(|p| process_cpu_time(p).ok());
    let started = Instant::now();
    let mut result = BenchResult {
        config: config.clone(),
        elapsed: Duration::ZERO,
        ok: 0,
        errors: BTreeMap::new(),
        latency_us: new_histogram(),
        connections_opened: 0,
        server_cpu: None,
    };
    for t in tasks {
        let w = t.await.map_err(|e| ClientError::Io(std::io::Error::other(e.to_string())))?;
        result.ok += w.ok;
        for (k, v) in w.errors {
            *result.errors.entry(k).or_default() += v;
        }
        result.latency_us.add(&w.latency_us).expect("histograms share bounds");
        result.connections_opened += w.connections_opened;
    }
    result.elapsed = started.elapsed();
    let cpu_after = config.server_pid.and_then(|p| process_cpu_time(p).ok());
    result.server_cpu = cpu_before.zip(cpu_after).map(|(a, b)| b.saturating_sub(a));
    Ok(result)
}
