//! What every scenario shares: where it runs (a given server or one it starts),
//! its output, and the table pieces several scenarios print.

use crate::html::{runs_section, Report, Section};
use crate::run::Plan;
use crate::spec::{TargetSpec, Transport};
use crate::stats::{Stats, BUCKET};
use crate::workload::{KeySet, Workload};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

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
    /// Where an ephemeral server writes its admin credentials: a directory of
    /// ours, removed on drop, since a server killed (here, or -9 by a scenario)
    /// cannot remove the file it would otherwise leave in the temp directory.
    _credentials_dir: Option<tempfile::TempDir>,
}

impl Server {
    pub fn spawn(bin: &Path) -> Result<Server, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temporary directory: {e}"))?;
        let credentials = dir.path().join("admin.json");
        let credentials = credentials.to_str().ok_or("the temporary directory's path is not UTF-8")?;
        let mut server = Server::spawn_with(bin, &["--ephemeral", "--admin-credentials", credentials])?;
        server._credentials_dir = Some(dir);
        Ok(server)
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
            Some((native, http)) => Ok(Server { child, native, http, _credentials_dir: None }),
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

pub(crate) fn report(name: &str, intro: &str, sections: Vec<Section>) -> Report {
    Report::new(format!("handled bench scenario {name}"), intro, sections)
}

/// The output of scenario `name` whose report is `table` and one section on
/// `runs`: [`runs_section`]`(heading, text, &runs, series_of)`.
pub(crate) fn one_section_output(
    name: &str,
    (heading, text): (&str, &str),
    series_of: usize,
    table: String,
    runs: Vec<Stats>,
) -> ScenarioOutput {
    let section = runs_section(heading, text, &runs, series_of);
    ScenarioOutput { report: report(name, &table, vec![section]), table, runs }
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
