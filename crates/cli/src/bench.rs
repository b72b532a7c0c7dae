//! `handled bench`: closed-loop resolution load against any Handle server.

use anyhow::Context;
use clap::{Args, ValueEnum};
use handled_bench::report::{human, json};
use handled_bench::{run_closed_loop, BenchConfig, KeySet};
use handled_client::Protocol;
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Clone, Copy, ValueEnum)]
enum Transport {
    Udp,
    /// TCP, a new connection per request (what the Java client does).
    Tcp,
    /// TCP, one connection per client kept open.
    TcpPersistent,
    /// The HTTP tunnel with keep-alive.
    Http,
}

#[derive(Args)]
pub struct BenchArgs {
    /// Server host.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port (native port for udp/tcp, HTTP port for http); defaults 2641 / 8000.
    #[arg(long)]
    port: Option<u16>,
    #[arg(long, value_enum, default_value = "udp")]
    transport: Transport,
    /// Concurrent clients.
    #[arg(long, short = 'c', default_value_t = 16)]
    concurrency: usize,
    /// Seconds to run (default 10 unless --requests is given).
    #[arg(long, short = 'd')]
    duration: Option<f64>,
    /// Total requests to send.
    #[arg(long, short = 'n')]
    requests: Option<u64>,
    /// Seconds of warm-up before measuring.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Resolve this one handle...
    #[arg(long, default_value = "TEST/ADMIN")]
    handle: String,
    /// ...or random handles PREFIX/0 .. PREFIX/(N-1), with --keys N.
    #[arg(long)]
    key_prefix: Option<String>,
    #[arg(long, requires = "key_prefix")]
    keys: Option<u64>,
    /// Milliseconds each client pauses between requests.
    #[arg(long, default_value_t = 0.0)]
    pause_ms: f64,
    /// Seconds after which an unanswered request counts as an error.
    #[arg(long, default_value_t = 5.0)]
    timeout: f64,
    /// Measure this server process's CPU time over the run.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let (protocol, persistent, default_port) = match args.transport {
        Transport::Udp => (Protocol::Udp, false, 2641),
        Transport::Tcp => (Protocol::Tcp, false, 2641),
        Transport::TcpPersistent => (Protocol::Tcp, true, 2641),
        Transport::Http => (Protocol::Http, true, 8000),
    };
    let addr: SocketAddr = (args.host.as_str(), args.port.unwrap_or(default_port))
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve host {}", args.host))?
        .next()
        .context("host has no address")?;
    let keys = match (args.key_prefix, args.keys) {
        (Some(prefix), Some(count)) if count > 0 => KeySet::Uniform { prefix, count },
        (Some(_), _) => anyhow::bail!("--keys must be a positive count"),
        _ => KeySet::One(args.handle.into_bytes()),
    };
    let duration = match (args.duration, args.requests) {
        (Some(d), _) => Some(Duration::from_secs_f64(d)),
        (None, Some(_)) => None,
        (None, None) => Some(Duration::from_secs(10)),
    };
    let config = BenchConfig {
        protocol,
        addr,
        concurrency: args.concurrency.max(1),
        duration,
        requests: args.requests,
        warmup: Duration::from_secs_f64(args.warmup.max(0.0)),
        keys,
        persistent,
        timeout: Duration::from_secs_f64(args.timeout.max(0.001)),
        pause: Duration::from_secs_f64(args.pause_ms.max(0.0) / 1000.0),
        server_pid: args.server_pid,
    };
    let result = run_closed_loop(config).await.with_context(|| format!("cannot reach {addr}"))?;
    if args.json {
        println!("{}", json(&result));
    } else {
        print!("{}", human(&result));
    }
    Ok(if result.ok == 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
