//! `handled bench scenario NAME`: named reproductions of the published methods,
//! at a size that fits a 2-core box, each printing its table in the layout of
//! the original report and building an HTML report. Without `--host` a scenario
//! starts its own `handled serve --ephemeral` (and measures its CPU).

use crate::html::{concurrency_charts, runs_section, Report, Section};
use crate::run::{concurrency_sweep, run as run_model, Model, Plan, Schedule};
use crate::scenario_more;
use crate::spec::{TargetSpec, Transport};
use crate::stats::{Stats, BUCKET};
use crate::workload::{KeySet, Workload};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct ScenarioInfo {
    pub name: &'static str,
    pub about: &'static str,
}

pub const SCENARIOS: &[ScenarioInfo] = &[
    ScenarioInfo { name: "cnri", about: "CNRI closed loop: 200 threads × N requests × 10 ms pause over UDP, TCP and the HTTP tunnel" },
    ScenarioInfo { name: "autobench", about: "autobench/httperf rate sweep on the HTTP tunnel, 10 requests per connection: effective vs solicited rate" },
    ScenarioInfo { name: "keepalive", about: "100,000 messages with keep-alive vs Connection: close (HTTP) and persistent vs per-request (TCP): socket counts" },
    ScenarioInfo { name: "green-flag", about: "3 bench processes released together by a coordinator, histograms merged" },
    ScenarioInfo { name: "failover", about: "two servers, the primary killed mid-run: recovery time from first failure to the first clean second" },
    ScenarioInfo { name: "registry-get", about: "domain-registry style GET rate sweep, 10 requests per connection, against any URL template (--url)" },
    ScenarioInfo { name: "concurrency", about: "closed-loop UDP at 1, 2, 4 ... 32 clients: throughput/latency curves" },
    ScenarioInfo { name: "open-loop", about: "wrk2 method: fixed request rates, latency from intended start (corrected) and from send (uncorrected)" },
    ScenarioInfo { name: "surge", about: "open-loop ramp up, hold, ramp down beyond capacity (admission control)" },
    ScenarioInfo {
        name: "durable-creates",
        about: "authenticated creates in a session per client over TCP and the HTTP tunnel, 1/16/64/128 clients, on a real data directory, disk fsync rate beside",
    },
];

/// Where a scenario runs.
#[derive(Debug, Clone)]
pub struct ScenarioEnv {
    /// The `handled` binary, to start servers and child bench processes.
    pub handled_bin: Option<PathBuf>,
    /// An existing server instead of a started one.
    pub host: Option<String>,
    pub port: u16,
    pub http_port: u16,
    pub handle: String,
    pub url: Option<String>,
    pub server_pid: Option<u32>,
    /// A tiny run (CI): seconds, not minutes.
    pub quick: bool,
    /// Admin credentials file of an existing server (durable-creates).
    pub credentials: Option<PathBuf>,
    /// Prefix to create handles under (default: the credentials handle's).
    pub prefix: Option<String>,
    /// A directory on the server's data disk, for the fsync probe.
    pub fsync_probe: Option<PathBuf>,
}

pub struct ScenarioOutput {
    pub table: String,
    pub report: Report,
    pub runs: Vec<Stats>,
}

/// A `handled serve --ephemeral` child on OS-chosen ports; killed on drop.
pub struct Server {
    child: Child,
    pub native: SocketAddr,
    pub http: SocketAddr,
}

impl Server {
    pub fn spawn(bin: &Path) -> Result<Server, String> {
        Server::spawn_with(bin, &["--ephemeral"])
    }

    /// `handled serve` on OS-chosen ports with further arguments (a data directory, ...).
    pub fn spawn_with(bin: &Path, args: &[&str]) -> Result<Server, String> {
        let mut child = Command::new(bin)
            .arg("serve")
            .args(args)
            .args(["--port", "0", "--http-port", "0"])
            .env("HANDLED_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
        // "handled serving TEST on udp A tcp B http C"
        let found = loop {
            let Some(Ok(line)) = lines.next() else {
                break None;
            };
            if let Some(rest) = line.split_once(" on udp ").map(|x| x.1) {
                let words: Vec<&str> = rest.split_whitespace().collect();
                if let (Some(tcp), Some(http)) = (words.get(2), words.get(4)) {
                    break tcp.parse().ok().zip(http.parse().ok());
                }
            }
        };
        std::thread::spawn(move || for _ in lines.by_ref() {});
        match found {
            Some((native, http)) => Ok(Server { child, native, http }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err("the server did not report its addresses".into())
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server under test: started here or given.
pub(crate) struct Ctx {
    pub host: String,
    pub port: u16,
    pub http_port: u16,
    pub handle: String,
    pub server_pid: Option<u32>,
    pub quick: bool,
    pub env: ScenarioEnv,
    _server: Option<Server>,
}

impl Ctx {
    pub fn new(env: &ScenarioEnv) -> Result<Ctx, String> {
        if let Some(host) = &env.host {
            return Ok(Ctx {
                host: host.clone(),
                port: env.port,
                http_port: env.http_port,
                handle: env.handle.clone(),
                server_pid: env.server_pid,
                quick: env.quick,
                env: env.clone(),
                _server: None,
            });
        }
        let server =
            Server::spawn(env.handled_bin.as_deref().ok_or("no handled binary to start a server; pass --host")?)?;
        Ok(Ctx {
            host: server.native.ip().to_string(),
            port: server.native.port(),
            http_port: server.http.port(),
            handle: "TEST/ADMIN".into(),
            server_pid: Some(server.pid()),
            quick: env.quick,
            env: env.clone(),
            _server: Some(server),
        })
    }

    pub fn spec(&self, transport: Transport) -> TargetSpec {
        let port = match transport {
            Transport::Http | Transport::Https => self.http_port,
            _ => self.port,
        };
        TargetSpec::new(transport, &self.host, Some(port))
    }

    pub fn plan(&self, label: &str, spec: &TargetSpec) -> Result<Plan, String> {
        let mut p = Plan::new(label, spec.build()?, Workload::resolve(KeySet::One(self.handle.clone())));
        p.server_pid = self.server_pid;
        Ok(p)
    }

    /// Full size, or the quick (CI) size.
    pub fn pick<T>(&self, full: T, quick: T) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }
}

pub async fn run(name: &str, env: &ScenarioEnv) -> Result<ScenarioOutput, String> {
    match name {
        "cnri" => cnri(&Ctx::new(env)?).await,
        "keepalive" => keepalive(&Ctx::new(env)?).await,
        "concurrency" => concurrency(&Ctx::new(env)?).await,
        "open-loop" => open_loop(&Ctx::new(env)?).await,
        "surge" => surge(&Ctx::new(env)?).await,
        "autobench" => scenario_more::autobench(&Ctx::new(env)?).await,
        "registry-get" => scenario_more::registry_get(&Ctx::new(env)?).await,
        "failover" => scenario_more::failover(env).await,
        "green-flag" => scenario_more::green_flag(&Ctx::new(env)?).await,
        "durable-creates" => crate::scenario_creates::durable_creates(env).await,
        other => Err(format!("unknown scenario {other:?}; see `handled bench scenario --list`")),
    }
}

pub(crate) fn report(name: &str, intro: &str, sections: Vec<Section>) -> Report {
    Report { title: format!("handled bench scenario {name}"), intro: intro.into(), sections }
}

fn per_core(s: &Stats) -> String {
    s.per_server_core_second().map_or("-".into(), |v| format!("{v:.0}"))
}

async fn cnri(ctx: &Ctx) -> Result<ScenarioOutput, String> {
    let (threads, per, pause) = (ctx.pick(200, 20), ctx.pick(100u64, 10), Duration::from_millis(10));
    let mut runs = Vec::new();
    for (name, t) in [("UDP", Transport::Udp), ("TCP", Transport::Tcp), ("HTTP", Transport::Http)] {
        let plan = ctx.plan(name, &ctx.spec(t))?;
        let model = Model::Closed {
            clients: threads,
            requests_per_client: Some(per),
            duration: None,
            pause,
            warmup: Duration::from_secs_f64(ctx.pick(1.0, 0.2)),
        };
        runs.push(run_model(&plan, &model).await?);
    }
    let mut table = format!(
        "CNRI closed-loop resolution ({threads} threads × {per} requests, {} ms pause; original 200 × 2000 × 10 ms)\n{:<9}{:>9}{:>12}{:>10}{:>10}{:>10}{:>10}{:>14}{:>10}{:>8}{:>14}\n",
        pause.as_millis(), "Protocol", "Threads", "Req/thread", "Pause ms", "Requests", "Time s", "Req/s", "Avg resp ms", "p99 ms", "Errors", "Req/core-s"
    );
    for s in &runs {
        table += &format!(
            "{:<9}{:>9}{:>12}{:>10}{:>10}{:>10.2}{:>10.0}{:>14.3}{:>10.3}{:>8}{:>14}\n",
            s.label,
            threads,
            per,
            pause.as_millis(),
            s.total(),
            s.elapsed_s,
            s.throughput(),
            s.latency_us.mean() / 1000.0,
            s.ms(0.99),
            s.error_count(),
            per_core(s)
        );
    }
    let section = runs_section(
        "Closed loop per protocol",
        "Each thread sends its next request when the previous one is answered, then pauses.",
        &runs,
        3,
    );
    Ok(ScenarioOutput { report: report("cnri", &table, vec![section]), table, runs })
}

async fn keepalive(ctx: &Ctx) -> Result<ScenarioOutput, String> {
    let messages: u64 = ctx.pick(100_000, 2_000);
    let clients = 50usize;
    let modes = [
        ("HTTP keep-alive", Transport::Http, true),
        ("HTTP Connection: close", Transport::Http, false),
        ("TCP persistent", Transport::TcpPersistent, true),
        ("TCP per request", Transport::Tcp, true),
    ];
    let mut runs = Vec::new();
    for (name, t, keep_alive) in modes {
        let mut spec = ctx.spec(t);
        spec.keep_alive = keep_alive;
        let plan = ctx.plan(name, &spec)?;
        let model = Model::Closed {
            clients,
            requests_per_client: Some(messages / clients as u64),
            duration: None,
            pause: Duration::ZERO,
            warmup: Duration::ZERO,
        };
        runs.push(run_model(&plan, &model).await?);
    }
    let mut table = format!(
        "Keep-alive vs close over {messages} messages ({clients} clients)\n{:<24}{:>10}{:>16}{:>14}{:>14}{:>12}{:>10}{:>10}{:>8}\n",
        "Mode", "Messages", "Sockets opened", "Msgs/socket", "Peak sockets", "TIME_WAIT+", "Req/s", "p99 ms", "Errors"
    );
    for s in &runs {
        table += &format!(
            "{:<24}{:>10}{:>16}{:>14.1}{:>14}{:>12}{:>10.0}{:>10.3}{:>8}\n",
            s.label,
            s.total(),
            s.sockets_opened,
            s.total() as f64 / s.sockets_opened.max(1) as f64,
            s.peak_sockets,
            s.time_wait_after.map_or("-".into(), |n| n.to_string()),
            s.throughput(),
            s.ms(0.99),
            s.error_count()
        );
    }
    let section = runs_section(
        "Socket reuse",
        "Sockets opened and in use by the bench; TIME_WAIT+ is the growth of TIME_WAIT sockets on the server port.",
        &runs,
        4,
    );
    Ok(ScenarioOutput { report: report("keepalive", &table, vec![section]), table, runs })
}

async fn concurrency(ctx: &Ctx) -> Result<ScenarioOutput, String> {
    let levels: Vec<usize> = ctx.pick(vec![1, 2, 4, 8, 16, 32], vec![1, 2, 4]);
    let plan = ctx.plan("UDP", &ctx.spec(Transport::Udp))?;
    let runs = concurrency_sweep(
        &plan,
        &levels,
        Duration::from_secs_f64(ctx.pick(3.0, 0.4)),
        Duration::from_secs_f64(ctx.pick(0.5, 0.1)),
    )
    .await?;
    let mut table = format!(
        "Concurrency sweep, closed loop over UDP\n{:>8}{:>10}{:>10}{:>10}{:>10}{:>10}{:>8}{:>14}\n",
        "Clients", "Req/s", "Mean ms", "p50", "p90", "p99", "Errors", "Req/core-s"
    );
    for s in &runs {
        table += &format!(
            "{:>8}{:>10.0}{:>10.3}{:>10.3}{:>10.3}{:>10.3}{:>8}{:>14}\n",
            s.clients,
            s.throughput(),
            s.latency_us.mean() / 1000.0,
            s.ms(0.5),
            s.ms(0.9),
            s.ms(0.99),
            s.error_count(),
            per_core(s)
        );
    }
    let mut section = runs_section("Throughput and latency by clients", "", &runs, 0);
    section.charts.splice(0..0, concurrency_charts(&runs));
    Ok(ScenarioOutput { report: report("concurrency", &table, vec![section]), table, runs })
}

const WRK2_QUANTILES: [f64; 7] = [0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1.0];

/// wrk2's "Latency Distribution (HdrHistogram - Recorded Latency)" block.
pub fn wrk2_block(s: &Stats) -> String {
    let mut out = String::from("  Latency Distribution (HdrHistogram - Recorded Latency)   [uncorrected, from send]\n");
    for q in WRK2_QUANTILES {
        out += &format!(
            "  {:>7.3}%  {:>10.3}ms   [{:>10.3}ms]\n",
            q * 100.0,
            s.latency_us.value_at_quantile(q) as f64 / 1000.0,
            s.service_us.value_at_quantile(q) as f64 / 1000.0
        );
    }
    out + &format!(
        "  {} requests in {:.2}s, {} errors\nRequests/sec: {:>10.2}   (solicited {:.0})\n",
        s.total(),
        s.elapsed_s,
        s.error_count(),
        s.throughput(),
        s.solicited_rate.unwrap_or(0.0)
    )
}

async fn open_loop(ctx: &Ctx) -> Result<ScenarioOutput, String> {
    let rates: Vec<f64> = ctx.pick(vec![2000.0, 8000.0, 16000.0], vec![200.0, 500.0]);
    let (secs, warm) = (ctx.pick(5.0, 1.0), ctx.pick(1.0, 0.2));
    let mut runs = Vec::new();
    let mut table =
        String::from("Open loop at fixed rates over UDP (wrk2 method: latency from each request's intended start)\n");
    for rate in rates {
        let plan = ctx.plan(&format!("UDP {rate:.0}/s"), &ctx.spec(Transport::Udp))?;
        let model = Model::Open {
            schedule: Schedule::fixed(rate, warm + secs),
            connections: 32,
            warmup: Duration::from_secs_f64(warm),
        };
        let s = run_model(&plan, &model).await?;
        table += &format!("{}\n{}", s.label, wrk2_block(&s));
        runs.push(s);
    }
    let section = runs_section(
        "Fixed-rate runs",
        "Corrected latency counts queueing behind slow answers; the bracketed figures do not.",
        &runs,
        runs.len(),
    );
    Ok(ScenarioOutput { report: report("open-loop", &table, vec![section]), table, runs })
}

/// Per-phase figures from the 100 ms series (phases as [start, end) seconds).
pub(crate) fn phase_rows(s: &Stats, phases: &[(&str, f64, f64, f64)]) -> String {
    let mut out = format!(
        "{:<10}{:>14}{:>12}{:>10}{:>12}{:>12}\n",
        "Phase", "Solicited/s", "Answered/s", "Errors", "Mean ms", "Max ms"
    );
    for &(name, from, to, solicited) in phases {
        let slice = |t: f64| ((t / BUCKET.as_secs_f64()).round() as usize).min(s.series.len());
        let b = &s.series[slice(from)..slice(to)];
        let ok: u64 = b.iter().map(|x| x.ok).sum();
        let err: u64 = b.iter().map(|x| x.errors).sum();
        let sum: u64 = b.iter().map(|x| x.latency_sum_us).sum();
        let max = b.iter().map(|x| x.latency_max_us).max().unwrap_or(0);
        out += &format!(
            "{:<10}{:>14.0}{:>12.0}{:>10}{:>12.3}{:>12.3}\n",
            name,
            solicited,
            ok as f64 / (to - from).max(1e-9),
            err,
            sum as f64 / (ok + err).max(1) as f64 / 1000.0,
            max as f64 / 1000.0
        );
    }
    out
}

async fn surge(ctx: &Ctx) -> Result<ScenarioOutput, String> {
    let (base, peak, up, hold, down) = ctx.pick((2000.0, 40000.0, 3.0, 3.0, 3.0), (50.0, 400.0, 0.5, 0.5, 0.5));
    let plan = ctx.plan("UDP surge", &ctx.spec(Transport::Udp))?;
    let model =
        Model::Open { schedule: Schedule::surge(base, peak, up, hold, down), connections: 64, warmup: Duration::ZERO };
    let s = run_model(&plan, &model).await?;
    let mut table =
        format!("Surge over UDP: {base:.0}/s → {peak:.0}/s in {up} s, hold {hold} s, back in {down} s (open loop)\n");
    table += &phase_rows(
        &s,
        &[
            ("ramp-up", 0.0, up, (base + peak) / 2.0),
            ("hold", up, up + hold, peak),
            ("ramp-down", up + hold, up + hold + down, (base + peak) / 2.0),
        ],
    );
    table += &crate::report::table(std::slice::from_ref(&s));
    let runs = vec![s];
    let section = runs_section(
        "Surge",
        "Requests due on a ramp whatever the answers; latency counted from when each was due.",
        &runs,
        1,
    );
    Ok(ScenarioOutput { report: report("surge", &table, vec![section]), table, runs })
}
