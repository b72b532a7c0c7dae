//! `handled bench`: load against any Handle server (or any HTTP URL), its
//! green-flag coordinator, a stall-able stub server for validation, and the
//! named scenarios reproducing published benchmark methods.

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use handled_bench::admin::default_prefix;
use handled_bench::coord::{coordinate, merge, GreenFlag};
use handled_bench::html::{concurrency_charts, rate_charts, runs_section, Report};
use handled_bench::recorder::{Outcome, Recorder};
use handled_bench::report::{json_line, table, under_limit};
use handled_bench::scenario::{self, ScenarioEnv};
use handled_bench::workload::{Key, Op};
use handled_bench::{
    FreshNames, KeySet, Model, OpKind, Plan, RateSweep, Schedule, Stats, Target, TargetSpec, Transport, Workload,
};
use handled_client::{Credentials, KeyChoice};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, ValueEnum)]
enum TransportArg {
    Udp,
    /// TCP, a new connection per request (what the Java client does).
    Tcp,
    /// TCP, one connection per client kept open.
    TcpPersistent,
    /// The HTTP tunnel (keep-alive unless --close).
    Http,
    /// The HTTP tunnel over TLS.
    Https,
    /// The JSON API (/api/handles) over HTTP; writes need --credentials (and a server allowing Basic on plain HTTP).
    JsonApi,
    /// The JSON API over HTTPS.
    JsonApiHttps,
}

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: Option<BenchCommand>,
    // Boxed: the run options are large next to the other subcommands' arguments.
    #[command(flatten)]
    run: Box<RunArgs>,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Run a named, documented reproduction of a published method (`--list`).
    Scenario(ScenarioArgs),
    /// Release several `handled bench --green-flag ADDR` processes together and merge their figures.
    Coordinator(CoordinatorArgs),
    /// A static-JSON HTTP server that can stall on purpose (validation target).
    Stub(StubArgs),
}

#[derive(Args)]
struct RunArgs {
    /// Server host (any Handle server).
    #[arg(long, env = "HANDLED_HOST", default_value = "127.0.0.1")]
    host: String,
    /// Port: native (udp, tcp) default 2641 or HANDLED_PORT, HTTP (http, json-api) default 8000 or
    /// HANDLED_HTTP_PORT, as the other client commands read them.
    #[arg(long)]
    port: Option<u16>,
    /// How to send the requests.
    #[arg(long, value_enum, default_value = "udp")]
    transport: TransportArg,
    /// Requests to this URL template instead: {handle}, {handle_enc} (percent-encoded), {seq}
    /// (the key's number; also written as n in braces).
    /// E.g. http://127.0.0.1:8000/api/handles/{handle}
    #[arg(long)]
    url: Option<String>,
    /// HTTP method for --url (default GET), e.g. PUT.
    #[arg(long, requires = "url")]
    method: Option<String>,
    /// Request body for --url (sent as application/json), placeholders filled as in the URL.
    #[arg(long, requires = "url", conflicts_with = "body_file")]
    body: Option<String>,
    /// Like --body, read from a file.
    #[arg(long, requires = "url")]
    body_file: Option<PathBuf>,
    /// Admin credentials (the JSON file `handled serve --admin-credentials` writes):
    /// a session per client over tcp/tcp-persistent/http, Basic over json-api(-https) and --url.
    #[arg(long)]
    credentials: Option<PathBuf>,
    /// Answer challenges with the credentials' RSA key instead of the secret key (native only).
    #[arg(long, requires = "credentials")]
    rsa: bool,
    /// Prefix for created handles (PREFIX/bench-RUN-CLIENT-N); default: the credentials handle's prefix.
    #[arg(long)]
    prefix: Option<String>,
    /// Measure the raw fsync rate (4 KiB write + fsync, 2 s) in DIR before each run, shown beside the figures.
    #[arg(long)]
    fsync_probe: Option<PathBuf>,
    /// Count any reply carrying the request's id, without reading it as a Handle response
    /// (the echo references; udp, tcp, tcp-persistent, http, https).
    #[arg(long)]
    raw: bool,
    /// UDP closed loop: one async task per client instead of the batched threads (for comparison).
    #[arg(long)]
    async_udp: bool,
    /// HTTP: send `Connection: close` (a new connection per request).
    #[arg(long)]
    close: bool,
    /// HTTPS: accept any server certificate (self-signed servers).
    #[arg(long)]
    insecure: bool,
    /// HTTPS: trust this PEM CA file besides the Mozilla roots.
    #[arg(long)]
    cacert: Option<PathBuf>,
    /// Fail-over address host:port (repeatable): a client whose server fails moves on.
    #[arg(long)]
    failover: Vec<String>,
    /// Resolve this one handle...
    #[arg(long, default_value = "TEST/ADMIN")]
    handle: String,
    /// ...or handles PREFIX/0 .. PREFIX/(N-1) with --keys N (uniform, or --zipf S).
    #[arg(long)]
    key_prefix: Option<String>,
    /// Number of handles under --key-prefix.
    #[arg(long, requires = "key_prefix")]
    keys: Option<u64>,
    /// Zipf exponent S of the key popularity (default: uniform).
    #[arg(long, requires = "keys")]
    zipf: Option<f64>,
    /// Operations each client loops over, comma-separated: resolve, resolve-certified, site-info,
    /// and with --credentials create, modify, add-value, remove-value, delete; `mixed` is
    /// create,resolve,modify,add-value,remove-value,delete (a fresh handle per loop).
    #[arg(long, default_value = "resolve", value_parser = OpKind::parse_list)]
    ops: OpList,
    /// Concurrent clients (connections in open loop).
    #[arg(long, short = 'c', default_value_t = 16)]
    concurrency: usize,
    /// Seconds to measure (default 10 unless --requests/--per-client).
    #[arg(long, short = 'd')]
    duration: Option<f64>,
    /// Total requests (split evenly over clients).
    #[arg(long, short = 'n')]
    requests: Option<u64>,
    /// Requests per client (the CNRI method: 200 clients × 2000 requests).
    #[arg(long)]
    per_client: Option<u64>,
    /// Milliseconds each client pauses between requests.
    #[arg(long, default_value_t = 0.0)]
    pause_ms: f64,
    /// Seconds of warm-up before measuring.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Open loop at this many requests/s (latency from the intended start).
    #[arg(long)]
    rate: Option<f64>,
    /// Open-loop surge BASE,PEAK,UP,HOLD,DOWN (rates /s, seconds).
    #[arg(long, value_delimiter = ',')]
    surge: Option<Vec<f64>>,
    /// httperf/autobench rate sweep FROM,TO,STEP (requests/s), --per-conn requests per connection.
    #[arg(long, value_delimiter = ',')]
    rate_sweep: Option<Vec<f64>>,
    /// Requests per connection in --rate-sweep.
    #[arg(long, default_value_t = 10)]
    per_conn: u64,
    /// Seconds per sweep step.
    #[arg(long, default_value_t = 5.0)]
    step_duration: f64,
    /// Closed-loop runs at each of these client counts, e.g. 1,2,4,8,16,32.
    #[arg(long, value_delimiter = ',')]
    concurrency_sweep: Option<Vec<usize>>,
    /// Seconds after which an unanswered request is an error.
    #[arg(long, default_value_t = 5.0)]
    timeout: f64,
    /// Measure this server process's CPU time (requests per server core-second).
    #[arg(long)]
    server_pid: Option<u32>,
    /// The database the server uses (e.g. PostgreSQL's postmaster): its CPU time and its
    /// descendants' is added (requests per server-and-database core-second).
    #[arg(long, requires = "server_pid")]
    db_pid: Option<u32>,
    /// Induce a failure: run this shell command --induce-at seconds into the run.
    #[arg(long, requires = "induce_at")]
    induce: Option<String>,
    /// Seconds into the run at which --induce runs.
    #[arg(long)]
    induce_at: Option<f64>,
    /// Wait for the green flag from this coordinator (host:port), report back to it.
    #[arg(long)]
    green_flag: Option<String>,
    /// Name of the run in tables.
    #[arg(long)]
    label: Option<String>,
    /// JSON lines instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write a self-contained HTML report.
    #[arg(long)]
    html: Option<PathBuf>,
    /// No live progress line.
    #[arg(long)]
    quiet: bool,
}

type OpList = Vec<OpKind>;

#[derive(Args)]
struct ScenarioArgs {
    /// Scenario name; --list shows them.
    name: Option<String>,
    /// List the scenarios and what each reproduces.
    #[arg(long)]
    list: bool,
    /// Minutes-to-seconds: a tiny run (CI).
    #[arg(long)]
    quick: bool,
    /// Target an existing server instead of starting `handled serve --ephemeral`.
    #[arg(long)]
    host: Option<String>,
    /// Native port of the existing server.
    #[arg(long, default_value_t = 2641)]
    port: u16,
    /// HTTP port of the existing server.
    #[arg(long, default_value_t = 8000)]
    http_port: u16,
    /// Handle to resolve on an existing server (any prefix).
    #[arg(long, default_value = "TEST/ADMIN")]
    handle: String,
    /// URL template for registry-get (default: the started server's JSON API).
    #[arg(long)]
    url: Option<String>,
    /// The existing server's process id, to measure its CPU time.
    #[arg(long)]
    server_pid: Option<u32>,
    /// durable-creates on an existing server: its admin credentials file...
    #[arg(long)]
    credentials: Option<PathBuf>,
    /// ...the prefix to create under (default: the credentials handle's prefix)...
    #[arg(long)]
    prefix: Option<String>,
    /// ...and a directory on the server's data disk for the fsync probe.
    #[arg(long)]
    fsync_probe: Option<PathBuf>,
    /// HTML report (default: bench-NAME.html).
    #[arg(long)]
    html: Option<PathBuf>,
    /// JSON lines instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct CoordinatorArgs {
    /// Address (host:port) the bench processes report to (their --green-flag).
    #[arg(long, default_value = "127.0.0.1:7900")]
    listen: String,
    /// Number of bench processes to wait for.
    #[arg(long)]
    clients: usize,
    /// Seconds to wait for clients and for their results.
    #[arg(long, default_value_t = 600.0)]
    deadline: f64,
    /// JSON lines instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write a self-contained HTML report.
    #[arg(long)]
    html: Option<PathBuf>,
}

#[derive(Args)]
struct StubArgs {
    /// Address to serve on (port 0: any; the chosen one is printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// Freeze every answer from this many seconds after start...
    #[arg(long)]
    stall_at: Option<f64>,
    /// ...for this many seconds.
    #[arg(long, default_value_t = 1.0)]
    stall_for: f64,
}

pub async fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        None => run_load(*args.run).await,
        Some(BenchCommand::Scenario(a)) => run_scenario(a).await,
        Some(BenchCommand::Coordinator(a)) => run_coordinator(a).await,
        Some(BenchCommand::Stub(a)) => run_stub(a).await,
    }
}

/// `--port`, else the port the environment names for the transport's kind
/// of port (one flag serves both kinds, as it always did here).
fn port_of(a: &RunArgs) -> anyhow::Result<Option<u16>> {
    if a.port.is_some() {
        return Ok(a.port);
    }
    let native = matches!(a.transport, TransportArg::Udp | TransportArg::Tcp | TransportArg::TcpPersistent);
    let var = if native { "HANDLED_PORT" } else { "HANDLED_HTTP_PORT" };
    match std::env::var(var) {
        Ok(v) => v.trim().parse().map(Some).with_context(|| format!("{var}={v:?} is not a port number")),
        Err(_) => Ok(None),
    }
}

fn spec(a: &RunArgs, credentials: Option<Credentials>) -> anyhow::Result<TargetSpec> {
    let transport = match a.transport {
        TransportArg::Udp => Transport::Udp,
        TransportArg::Tcp => Transport::Tcp,
        TransportArg::TcpPersistent => Transport::TcpPersistent,
        TransportArg::Http => Transport::Http,
        TransportArg::Https => Transport::Https,
        TransportArg::JsonApi => Transport::JsonApi,
        TransportArg::JsonApiHttps => Transport::JsonApiHttps,
    };
    let mut s = TargetSpec::new(transport, &a.host, port_of(a)?);
    s.url = a.url.clone();
    s.method = a.method.clone();
    s.body = match &a.body_file {
        Some(path) => Some(std::fs::read_to_string(path).with_context(|| format!("--body-file {}", path.display()))?),
        None => a.body.clone(),
    };
    s.credentials = credentials;
    s.keep_alive = !a.close;
    s.raw = a.raw;
    s.insecure = a.insecure;
    s.cacert = a.cacert.clone();
    s.failover = a.failover.clone();
    Ok(s)
}

fn load_credentials(path: &std::path::Path, rsa: bool) -> anyhow::Result<Credentials> {
    let choice = if rsa { KeyChoice::PublicKey } else { KeyChoice::Secret };
    Credentials::load(path, choice).with_context(|| "--credentials")
}

/// Where created handles go: --prefix, else the credentials handle's prefix.
fn creation_prefix(prefix: Option<&str>, credentials: Option<&Credentials>) -> anyhow::Result<String> {
    match prefix.map(str::to_string).or_else(|| credentials.and_then(default_prefix)) {
        Some(p) => Ok(p),
        None => bail!("creating handles needs --prefix (or --credentials whose handle has one)"),
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

async fn run_load(a: RunArgs) -> anyhow::Result<ExitCode> {
    let credentials = a.credentials.as_deref().map(|p| load_credentials(p, a.rsa)).transpose()?;
    let target = spec(&a, credentials.clone())?.build().map_err(anyhow::Error::msg)?;
    let keys = match (&a.key_prefix, a.keys, a.zipf) {
        (Some(prefix), Some(count), None) if count > 0 => KeySet::Uniform { prefix: prefix.clone(), count },
        (Some(prefix), Some(count), Some(s)) if count > 0 => KeySet::Zipf { prefix: prefix.clone(), count, s },
        (Some(_), _, _) => bail!("--key-prefix needs --keys N > 0"),
        _ => KeySet::One(a.handle.clone()),
    };
    let label = a.label.clone().unwrap_or_else(|| target.describe());
    if let Some(op) = a.ops.iter().find(|op| op.is_admin()) {
        if credentials.is_none() {
            bail!("{} is an administrator's operation: give --credentials FILE (the JSON file `handled serve --admin-credentials` writes)", op.name());
        }
    }
    let fresh = if a.ops.contains(&OpKind::Create) {
        Some(FreshNames::new(&creation_prefix(a.prefix.as_deref(), credentials.as_ref())?))
    } else {
        None
    };
    if a.green_flag.is_none() {
        let handle = match &keys {
            KeySet::One(h) => h.clone(),
            KeySet::Uniform { prefix, .. } | KeySet::Zipf { prefix, .. } => format!("{prefix}/0"),
        };
        probe(&target, handle, secs(a.timeout).max(Duration::from_millis(1))).await?;
    }
    let mut plan = Plan::new(label, target, Workload { keys, ops: a.ops.clone(), fresh });
    plan.fsync_probe = a.fsync_probe.clone();
    plan.timeout = secs(a.timeout).max(Duration::from_millis(1));
    plan.server_pid = a.server_pid;
    plan.db_pid = a.db_pid;
    plan.batched_udp = !a.async_udp;
    plan.progress = !a.quiet && !a.json;
    plan.induce = a.induce.clone().zip(a.induce_at).map(|(cmd, at)| (secs(at), cmd));
    if a.rate_sweep.as_ref().is_some_and(|r| r.len() != 3) {
        bail!("--rate-sweep takes FROM,TO,STEP");
    }
    if a.surge.as_ref().is_some_and(|s| s.len() != 5) {
        bail!("--surge takes BASE,PEAK,UP,HOLD,DOWN");
    }
    let clients = a.concurrency.max(1);
    let warmup = secs(a.warmup);
    let flag = match &a.green_flag {
        Some(addr) => Some(GreenFlag::wait(addr, &plan.label).await.map_err(anyhow::Error::msg)?),
        None => None,
    };
    let (runs, charts) = if let Some(r) = &a.rate_sweep {
        let sweep = RateSweep {
            from: r[0],
            to: r[1],
            step: r[2],
            per_connection: a.per_conn,
            step_duration: secs(a.step_duration),
            max_open: 4096,
        };
        let runs = handled_bench::rate_sweep(&plan, &sweep).await.map_err(anyhow::Error::msg)?;
        let charts = rate_charts(&runs);
        (runs, charts)
    } else if let Some(levels) = &a.concurrency_sweep {
        let d = secs(a.duration.unwrap_or(5.0));
        let runs = handled_bench::run::concurrency_sweep(&plan, levels, d, warmup).await.map_err(anyhow::Error::msg)?;
        let charts = concurrency_charts(&runs);
        (runs, charts)
    } else {
        let model = if let Some(s) = &a.surge {
            Model::Open {
                schedule: Schedule::surge(s[0], s[1], s[2], s[3], s[4]),
                connections: clients,
                warmup: Duration::ZERO,
            }
        } else if let Some(rate) = a.rate {
            let d = a.duration.unwrap_or(10.0);
            Model::Open { schedule: Schedule::fixed(rate, a.warmup.max(0.0) + d), connections: clients, warmup }
        } else {
            let per_client = a.per_client.or(a.requests.map(|n| n.div_ceil(clients as u64)));
            let duration = match (a.duration, per_client) {
                (Some(d), _) => Some(secs(d)),
                (None, Some(_)) => None,
                (None, None) => Some(Duration::from_secs(10)),
            };
            Model::Closed {
                clients,
                requests_per_client: per_client,
                duration,
                pause: secs(a.pause_ms / 1000.0),
                warmup,
            }
        };
        (vec![handled_bench::run(&plan, &model).await.map_err(anyhow::Error::msg)?], Vec::new())
    };
    if let Some(flag) = flag {
        flag.report(&runs).await.map_err(anyhow::Error::msg)?;
    }
    output(&runs, a.json, a.html.as_deref(), &plan.label, charts)?;
    if a.rate_sweep.is_some() && !a.json {
        match under_limit(&runs, 50.0) {
            Some(s) => println!(
                "mean response time under 50 ms up to the {:.0}/s step ({:.0}/s achieved)",
                s.solicited_rate.unwrap_or(0.0),
                s.throughput()
            ),
            None => println!("mean response time at or over 50 ms from the first step"),
        }
    }
    Ok(if runs.iter().all(|r| r.ok == 0) { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// One resolution before the run: a server that cannot be reached at all is
/// a clear error now, not a whole run of 100% errors.
async fn probe(target: &Target, handle: String, timeout: Duration) -> anyhow::Result<()> {
    let recorder = Arc::new(Recorder::new(Instant::now()));
    let mut conn = target.conn();
    let outcome = match target.prepare(&mut conn, &recorder, timeout).await {
        Ok(()) => target.call(&mut conn, &Op::Resolve(Key { handle, n: 0 }), &recorder, timeout).await,
        Err(e) => bail!("{e}; nothing measured"),
    };
    target.close(conn, &recorder);
    match outcome {
        Outcome::Failed { kind } => {
            bail!("cannot reach {} at {}: {kind}; nothing measured", target.describe(), target.first_addr())
        }
        // Answered (a refusal too): the server is there.
        _ => Ok(()),
    }
}

fn output(
    runs: &[Stats],
    json: bool,
    html: Option<&std::path::Path>,
    title: &str,
    extra: Vec<String>,
) -> anyhow::Result<()> {
    if json {
        for r in runs {
            println!("{}", json_line(r));
        }
    } else {
        print!("{}", table(runs));
    }
    if let Some(path) = html {
        let mut section = runs_section(title, "", runs, if runs.len() == 1 { 1 } else { 0 });
        section.charts.splice(0..0, extra);
        let mut report = Report::new(format!("handled bench: {title}"), "", vec![section]);
        report.meta.push(("Run".into(), title.into()));
        std::fs::write(path, report.to_html()).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("report written to {}", path.display());
    }
    Ok(())
}

async fn run_coordinator(a: CoordinatorArgs) -> anyhow::Result<ExitCode> {
    let listener =
        tokio::net::TcpListener::bind(&a.listen).await.with_context(|| format!("cannot listen on {}", a.listen))?;
    eprintln!("coordinator on {}: waiting for {} clients", listener.local_addr()?, a.clients);
    let results = coordinate(listener, a.clients, Duration::from_millis(200), secs(a.deadline))
        .await
        .map_err(anyhow::Error::msg)?;
    let mut rows: Vec<Stats> = results.iter().flat_map(|(_, runs)| runs.iter().cloned()).collect();
    rows.extend(merge(&results));
    output(&rows, a.json, a.html.as_deref(), "green-flag fleet", Vec::new())?;
    Ok(ExitCode::SUCCESS)
}

async fn run_stub(a: StubArgs) -> anyhow::Result<ExitCode> {
    let stub = handled_bench::stub::Stub::default();
    let addr = stub.start(a.listen.parse().context("--listen host:port")?).await?;
    if let Some(at) = a.stall_at {
        stub.stall(std::time::Instant::now() + secs(at), secs(a.stall_for));
    }
    println!("stub serving on http://{addr}/");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    tokio::signal::ctrl_c().await?;
    Ok(ExitCode::SUCCESS)
}

async fn run_scenario(a: ScenarioArgs) -> anyhow::Result<ExitCode> {
    if a.list || a.name.is_none() {
        for s in scenario::SCENARIOS {
            println!("{:<18} {}", s.name, s.about);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let name = a.name.clone().unwrap_or_default();
    let env = ScenarioEnv {
        handled_bin: std::env::current_exe().ok(),
        host: a.host.clone(),
        port: a.port,
        http_port: a.http_port,
        handle: a.handle.clone(),
        url: a.url.clone(),
        server_pid: a.server_pid,
        quick: a.quick,
        credentials: a.credentials.clone(),
        prefix: a.prefix.clone(),
        fsync_probe: a.fsync_probe.clone(),
    };
    let out = scenario::run(&name, &env).await.map_err(anyhow::Error::msg)?;
    if a.json {
        for r in &out.runs {
            println!("{}", json_line(r));
        }
    } else {
        print!("{}", out.table);
    }
    let path = a.html.clone().unwrap_or_else(|| PathBuf::from(format!("bench-{name}.html")));
    std::fs::write(&path, out.report.to_html()).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("report written to {}", path.display());
    Ok(ExitCode::SUCCESS)
}
