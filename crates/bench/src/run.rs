//! The load models. Closed loop: N clients each send their next request when
//! the previous one is answered (plus a pause). Open loop: requests are due on
//! a schedule whatever the answers, and latency counts from when a request was
//! due, not when it went out (coordinated omission corrected, as wrk2 does).

use crate::batched_udp::{BatchedRun, ClosedLoop};
use crate::cpu::{own_cpu_time, process_cpu_time, process_tree_cpu_time};
use crate::recorder::{Recorder, SocketGauge};
use crate::stats::{Stats, BUCKET};
use crate::target::{Conn, Target};
use crate::workload::Workload;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to run against, independent of the load model.
#[derive(Clone)]
pub struct Plan {
    pub label: String,
    pub target: Arc<Target>,
    pub workload: Workload,
    /// A request not answered within this is an error.
    pub timeout: Duration,
    pub server_pid: Option<u32>,
    /// A database the server uses: the CPU time of this process and its
    /// descendants is counted too (requests per server-and-database core-second).
    pub db_pid: Option<u32>,
    /// Print a live progress line on stderr.
    pub progress: bool,
    /// Run this shell command this long after measurement starts (induced failure).
    pub induce: Option<(Duration, String)>,
    /// Measure the raw fsync rate of this directory's disk before the run.
    pub fsync_probe: Option<PathBuf>,
    /// Closed UDP loops on the batched engine ([`BatchedRun`]); false: a task per client.
    pub batched_udp: bool,
}

impl Plan {
    pub fn new(label: impl Into<String>, target: Target, workload: Workload) -> Plan {
        Plan {
            label: label.into(),
            target: Arc::new(target),
            workload,
            timeout: Duration::from_secs(5),
            server_pid: None,
            db_pid: None,
            progress: false,
            induce: None,
            fsync_probe: None,
            batched_udp: true,
        }
    }
}

#[derive(Debug, Clone)]
pub enum Model {
    Closed {
        clients: usize,
        /// Each client stops after this many (CNRI: 2000)...
        requests_per_client: Option<u64>,
        /// ...or after this long, whichever comes first.
        duration: Option<Duration>,
        pause: Duration,
        warmup: Duration,
    },
    Open {
        schedule: Schedule,
        connections: usize,
        warmup: Duration,
    },
}

/// Requests per second as a piecewise-linear function of time; request j is
/// due when the integral of the rate reaches j.
#[derive(Debug, Clone)]
pub struct Schedule {
    segments: Vec<Segment>,
}

#[derive(Debug, Clone)]
struct Segment {
    start: f64,
    length: f64,
    r0: f64,
    r1: f64,
    /// Requests due before this segment.
    before: f64,
}

impl Schedule {
    /// Segments of (seconds, rate at start, rate at end).
    pub fn new(parts: &[(f64, f64, f64)]) -> Schedule {
        let (mut start, mut before) = (0.0, 0.0);
        let mut segments = Vec::new();
        for &(length, r0, r1) in parts.iter().filter(|p| p.0 > 0.0) {
            segments.push(Segment { start, length, r0: r0.max(0.0), r1: r1.max(0.0), before });
            start += length;
            before += (r0.max(0.0) + r1.max(0.0)) / 2.0 * length;
        }
        Schedule { segments }
    }

    pub fn fixed(rate: f64, seconds: f64) -> Schedule {
        Schedule::new(&[(seconds, rate, rate)])
    }

    /// Ramp from `base` to `peak`, hold, ramp back down.
    pub fn surge(base: f64, peak: f64, up: f64, hold: f64, down: f64) -> Schedule {
        Schedule::new(&[(up, base, peak), (hold, peak, peak), (down, peak, base)])
    }

    pub fn duration(&self) -> f64 {
        self.segments.last().map_or(0.0, |s| s.start + s.length)
    }

    pub fn total(&self) -> f64 {
        self.segments.last().map_or(0.0, |s| s.before + (s.r0 + s.r1) / 2.0 * s.length)
    }

    /// Seconds from the start at which request `j` is due; None past the end.
    pub fn time_of(&self, j: u64) -> Option<f64> {
        let x = j as f64;
        let seg = self.segments.iter().find(|s| x < s.before + (s.r0 + s.r1) / 2.0 * s.length)?;
        let need = x - seg.before;
        let a = (seg.r1 - seg.r0) / seg.length;
        // r0·τ + a·τ²/2 = need
        let tau = if a.abs() < 1e-12 {
            need / seg.r0
        } else {
            (-seg.r0 + (seg.r0 * seg.r0 + 2.0 * a * need).max(0.0).sqrt()) / a
        };
        Some(seg.start + tau.clamp(0.0, seg.length))
    }

    /// Rate at `t` seconds from the start.
    pub fn rate_at(&self, t: f64) -> f64 {
        self.segments
            .iter()
            .find(|s| t < s.start + s.length)
            .map_or(0.0, |s| s.r0 + (s.r1 - s.r0) * (t - s.start) / s.length)
    }
}

/// Sockets in TIME_WAIT with `port` at either end, from /proc/net/tcp{,6}.
pub fn time_wait_count(port: u16) -> Option<u64> {
    let mut n = 0;
    let mut any = false;
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        any = true;
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 4 || f[3] != "06" {
                continue;
            }
            let port_of = |a: &str| a.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
            if port_of(f[1]) == Some(port) || port_of(f[2]) == Some(port) {
                n += 1;
            }
        }
    }
    any.then_some(n)
}

/// Everything around the workers: progress, socket sampling, server CPU,
/// the induced failure, TIME_WAIT accounting.
pub(crate) struct Harness {
    pub recorder: Arc<Recorder>,
    stop: Arc<AtomicU64>,
    sampler: tokio::task::JoinHandle<()>,
    cpu_before: Option<tokio::task::JoinHandle<Option<Duration>>>,
    db_cpu_before: Option<tokio::task::JoinHandle<Option<Duration>>>,
    own_cpu_before: tokio::task::JoinHandle<Option<Duration>>,
    time_wait_before: Option<u64>,
}

impl Harness {
    /// `prepared`: the gauge that counted sockets opened before the run (sessions).
    pub fn start(plan: &Plan, start: Instant, prepared: Option<&SocketGauge>) -> Harness {
        let recorder = Arc::new(Recorder::new(start));
        if let Some(gauge) = prepared {
            recorder.sockets.carry_over(gauge);
        }
        let stop = Arc::new(AtomicU64::new(0));
        let sampler = tokio::spawn(sample(recorder.clone(), stop.clone(), plan.progress, plan.label.clone()));
        let cpu_before = plan.server_pid.map(|pid| {
            tokio::spawn(async move {
                tokio::time::sleep_until(start.into()).await;
                process_cpu_time(pid).ok()
            })
        });
        let db_cpu_before = plan.db_pid.map(|pid| {
            tokio::spawn(async move {
                tokio::time::sleep_until(start.into()).await;
                process_tree_cpu_time(pid).ok()
            })
        });
        let own_cpu_before = tokio::spawn(async move {
            tokio::time::sleep_until(start.into()).await;
            own_cpu_time().ok()
        });
        if let Some((after, command)) = plan.induce.clone() {
            tokio::spawn(async move {
                tokio::time::sleep_until((start + after).into()).await;
                match tokio::process::Command::new("sh").arg("-c").arg(&command).status().await {
                    Ok(s) if s.success() => {}
                    other => eprintln!("induced failure command {command:?}: {other:?}"),
                }
            });
        }
        let time_wait_before = time_wait_count(plan.target.first_addr().port());
        Harness { recorder, stop, sampler, cpu_before, db_cpu_before, own_cpu_before, time_wait_before }
    }

    pub async fn finish(self, plan: &Plan, clients: usize) -> Stats {
        let elapsed = self.recorder.start().elapsed();
        self.stop.store(1, Ordering::Relaxed);
        let _ = self.sampler.await;
        let own_after = own_cpu_time().ok();
        let mut stats = self.recorder.finish(&plan.label, elapsed);
        let own_before = self.own_cpu_before.await.ok().flatten();
        stats.client_cpu_s = own_before.zip(own_after).map(|(a, b)| b.saturating_sub(a).as_secs_f64());
        stats.clients = clients;
        if let (Some(pid), Some(before)) = (plan.server_pid, self.cpu_before) {
            let before = before.await.ok().flatten();
            let after = process_cpu_time(pid).ok();
            stats.server_cpu_s = before.zip(after).map(|(a, b)| b.saturating_sub(a).as_secs_f64());
        }
        if let (Some(pid), Some(before)) = (plan.db_pid, self.db_cpu_before) {
            let before = before.await.ok().flatten();
            let after = process_tree_cpu_time(pid).ok();
            stats.db_cpu_s = before.zip(after).map(|(a, b)| b.saturating_sub(a).as_secs_f64());
        }
        let after = time_wait_count(plan.target.first_addr().port());
        stats.time_wait_after = after.zip(self.time_wait_before).map(|(a, b)| a.saturating_sub(b));
        stats
    }
}

async fn sample(recorder: Arc<Recorder>, stop: Arc<AtomicU64>, progress: bool, label: String) {
    let start = recorder.start();
    tokio::time::sleep_until(start.into()).await;
    let mut tick = tokio::time::interval_at((start + BUCKET).into(), BUCKET);
    let mut n = 0u64;
    let mut last_done = 0;
    while stop.load(Ordering::Relaxed) == 0 {
        tick.tick().await;
        recorder.sample_sockets();
        n += 1;
        if progress && n.is_multiple_of(10) {
            let done = recorder.done.load(Ordering::Relaxed);
            let _ = write!(
                std::io::stderr(),
                "\r{label}  {:>6.1} s  {done:>9} requests  {:>8}/s  errors {:>6}  sockets {:>5}   ",
                n as f64 * BUCKET.as_secs_f64(),
                done - last_done,
                recorder.failed.load(Ordering::Relaxed),
                recorder.sockets.in_use()
            );
            last_done = done;
        }
    }
    if progress && n >= 10 {
        let _ = writeln!(std::io::stderr());
    }
}

/// Run one load model.
pub async fn run(plan: &Plan, model: &Model) -> Result<Stats, String> {
    let mut clients_state = Vec::new();
    let clients = match model {
        Model::Closed { clients, .. } => *clients,
        Model::Open { connections, .. } => *connections,
    }
    .max(1);
    for _ in 0..clients {
        clients_state.push(plan.workload.client()?);
    }
    check_supported(plan)?;
    let warmup = match model {
        Model::Closed { warmup, .. } | Model::Open { warmup, .. } => *warmup,
    };
    let disk_fsync_per_s = match &plan.fsync_probe {
        Some(dir) => Some(crate::fsync::probe(dir).await?),
        None => None,
    };
    if let Some(batched) = batched_udp(plan, model) {
        let origin = Instant::now();
        let harness = Harness::start(plan, origin + warmup, None);
        batched.run(clients_state, harness.recorder.clone(), origin).await?;
        let mut stats = harness.finish(plan, clients).await;
        stats.disk_fsync_per_s = disk_fsync_per_s;
        return Ok(stats);
    }
    let prepared = Arc::new(Recorder::new(Instant::now()));
    let conns = prepare(&plan.target, clients, &prepared, plan.timeout).await?;
    let origin = Instant::now();
    let start = origin + warmup;
    let harness = Harness::start(plan, start, Some(&prepared.sockets));
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(clients);
    for (i, (mut client, mut conn)) in clients_state.into_iter().zip(conns).enumerate() {
        let (target, recorder, timeout, model, next) =
            (plan.target.clone(), harness.recorder.clone(), plan.timeout, model.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::from_rng(&mut rand::rng());
            match model {
                Model::Closed { requests_per_client, duration, pause, .. } => {
                    while Instant::now() < start {
                        let op = client.next(&mut rng);
                        target.call(&mut conn, &op, &recorder, timeout).await;
                    }
                    let deadline = duration.map(|d| start + d);
                    let mut sent = 0u64;
                    while requests_per_client.is_none_or(|r| sent < r) && deadline.is_none_or(|d| Instant::now() < d) {
                        let op = client.next(&mut rng);
                        let t0 = Instant::now();
                        let outcome = target.call(&mut conn, &op, &recorder, timeout).await;
                        recorder.record(i, Some(op.name()), t0, t0, Instant::now(), &outcome);
                        sent += 1;
                        if !pause.is_zero() {
                            tokio::time::sleep(pause).await;
                        }
                    }
                }
                Model::Open { schedule, .. } => {
                    while let Some(at) = schedule.time_of(next.fetch_add(1, Ordering::Relaxed)) {
                        let due = origin + Duration::from_secs_f64(at);
                        // The timer ticks in whole milliseconds: aim half a tick early.
                        // A request sent early is timed from its send.
                        let wake = due.checked_sub(Duration::from_micros(500)).unwrap_or(due);
                        if wake > Instant::now() {
                            tokio::time::sleep_until(wake.into()).await;
                        }
                        let op = client.next(&mut rng);
                        let sent = Instant::now();
                        let outcome = target.call(&mut conn, &op, &recorder, timeout).await;
                        recorder.record(i, Some(op.name()), due, sent, Instant::now(), &outcome);
                    }
                }
            }
            target.close(conn, &recorder);
        }));
    }
    for t in tasks {
        t.await.map_err(|e| format!("client task: {e}"))?;
    }
    let mut stats = harness.finish(plan, clients).await;
    stats.disk_fsync_per_s = disk_fsync_per_s;
    if let Model::Open { schedule, warmup, .. } = model {
        let measured = schedule.duration() - warmup.as_secs_f64();
        if measured > 0.0 {
            let due_after_warmup = schedule.total() - count_before(schedule, warmup.as_secs_f64());
            stats.solicited_rate = Some(due_after_warmup / measured);
        }
    }
    Ok(stats)
}

/// The batched UDP engine, when it can carry this run: closed loop, no pause,
/// no induced failure (the async loop times those), not switched off.
fn batched_udp(plan: &Plan, model: &Model) -> Option<BatchedRun> {
    let Model::Closed { clients, requests_per_client, duration, pause, warmup } = model else { return None };
    if !plan.batched_udp || !pause.is_zero() || plan.induce.is_some() {
        return None;
    }
    let shape = ClosedLoop {
        clients: *clients,
        requests_per_client: *requests_per_client,
        duration: *duration,
        warmup: *warmup,
    };
    BatchedRun::new(&plan.target, &plan.workload, shape, plan.timeout)
}

/// Every operation of the loop must be one the target can carry.
pub(crate) fn check_supported(plan: &Plan) -> Result<(), String> {
    plan.workload.validate()?;
    match plan.workload.ops.iter().find(|op| !plan.target.supports(**op)) {
        Some(op) if op.is_admin() => Err(format!(
            "{} needs an authenticated target (--credentials FILE with --transport tcp, tcp-persistent, http, json-api or json-api-https); not {}",
            op.name(),
            plan.target.describe()
        )),
        Some(op) => Err(format!("{} cannot go over {}", op.name(), plan.target.describe())),
        None => Ok(()),
    }
}

/// One connection per client, with admin sessions opened and authenticated
/// (concurrently) before the clock starts, so the run measures operations only.
async fn prepare(
    target: &Arc<Target>,
    clients: usize,
    recorder: &Arc<Recorder>,
    timeout: Duration,
) -> Result<Vec<Conn>, String> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let (target, recorder) = (target.clone(), recorder.clone());
        set.spawn(async move {
            let mut conn = target.conn();
            target.prepare(&mut conn, &recorder, timeout).await.map(|()| conn)
        });
    }
    let mut conns = Vec::with_capacity(clients);
    while let Some(joined) = set.join_next().await {
        conns.push(joined.map_err(|e| format!("preparing a client: {e}"))??);
    }
    Ok(conns)
}

fn count_before(schedule: &Schedule, t: f64) -> f64 {
    // Requests due before t (binary search on time_of).
    let (mut lo, mut hi) = (0u64, schedule.total().ceil() as u64 + 1);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if schedule.time_of(mid).is_some_and(|x| x < t) {
            lo = mid + 1
        } else {
            hi = mid
        }
    }
    lo as f64
}

/// Throughput and latency for each client count (1, 2, 4, ... by default).
pub async fn concurrency_sweep(
    plan: &Plan,
    levels: &[usize],
    duration: Duration,
    warmup: Duration,
) -> Result<Vec<Stats>, String> {
    let mut out = Vec::new();
    for &clients in levels {
        let mut p = plan.clone();
        p.label = format!("{} c={clients}", plan.label);
        let model = Model::Closed {
            clients,
            requests_per_client: None,
            duration: Some(duration),
            pause: Duration::ZERO,
            warmup,
        };
        out.push(run(&p, &model).await?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_schedule_is_evenly_spaced() {
        let s = Schedule::fixed(1000.0, 2.0);
        assert_eq!(s.time_of(0), Some(0.0));
        assert!((s.time_of(500).unwrap() - 0.5).abs() < 1e-9);
        assert!(s.time_of(1999).is_some());
        assert_eq!(s.time_of(2000), None);
        assert!((count_before(&s, 1.0) - 1000.0).abs() < 1.0);
    }

    #[test]
    fn surge_schedule_follows_the_ramp() {
        // 0 → 1000/s over 2 s (1000 requests), hold 1 s (1000), down over 2 s (1000).
        let s = Schedule::surge(0.0, 1000.0, 2.0, 1.0, 2.0);
        assert!((s.total() - 3000.0).abs() < 1e-9);
        // Half-way up the ramp (1 s) only a quarter of its requests are due.
        assert!((s.time_of(250).unwrap() - 1.0).abs() < 1e-6);
        assert!((s.time_of(1500).unwrap() - 2.5).abs() < 1e-6);
        // Down-ramp mirrors the up-ramp.
        assert!((s.time_of(2750).unwrap() - 4.0).abs() < 1e-6);
        assert_eq!(s.time_of(3000), None);
        assert!((s.rate_at(1.0) - 500.0).abs() < 1e-9);
        let mut last = 0.0;
        for j in 0..3000 {
            let t = s.time_of(j).unwrap();
            assert!(t >= last);
            last = t;
        }
    }

    #[test]
    fn time_wait_reader_parses_proc() {
        // Whatever the count, reading must work on Linux.
        assert!(time_wait_count(1).is_some());
    }
}
