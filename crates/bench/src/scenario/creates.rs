//! `durable-creates`: authenticated `CREATE_HANDLE`s, each client in its own
//! DH session (as the Java client works), over TCP (persistent) and the HTTP
//! tunnel at 1, 16, 64 and 128 clients, every create acknowledged after the
//! store's fsync; the disk's raw fsync rate is probed before each row so the
//! figures read as "creates per fsync". The table is BENCHMARKS.md's
//! "Durable creates" layout. Without `--host` the scenario starts `handled
//! serve` on a fresh data directory (durable, not `--ephemeral`).

use super::env::{report, ScenarioEnv, ScenarioOutput, Server};
use crate::admin::default_prefix;
use crate::html::{concurrency_charts, runs_section};
use crate::run::{run as run_model, Model, Plan};
use crate::spec::{TargetSpec, Transport};
use crate::stats::Stats;
use crate::workload::{OpKind, Workload};
use handled_client::{Credentials, KeyChoice};
use std::path::PathBuf;
use std::time::Duration;

/// The server under test, with what creation needs.
struct CreateTarget {
    host: String,
    port: u16,
    http_port: u16,
    credentials: Credentials,
    prefix: String,
    fsync_dir: PathBuf,
    server_pid: Option<u32>,
    // Kept alive for the run: the started server and its data directory.
    _server: Option<(Server, tempfile::TempDir)>,
}

fn started(env: &ScenarioEnv) -> Result<CreateTarget, String> {
    let bin = env.handled_bin.as_deref().ok_or("no handled binary to start a server; pass --host")?;
    let dir = tempfile::Builder::new()
        .prefix("handled-bench-creates")
        .tempdir()
        .map_err(|e| format!("data directory: {e}"))?;
    let data = dir.path().display().to_string();
    let creds_path = dir.path().join("admin.json");
    let server =
        Server::spawn_with(bin, &["--data-dir", &data, "--admin-credentials", &creds_path.display().to_string()])?;
    let credentials = Credentials::load(&creds_path, KeyChoice::Secret).map_err(|e| e.to_string())?;
    let prefix = env
        .prefix
        .clone()
        .or_else(|| default_prefix(&credentials))
        .ok_or("the started server's credentials have no prefix")?;
    Ok(CreateTarget {
        host: server.native.ip().to_string(),
        port: server.native.port(),
        http_port: server.http.port(),
        credentials,
        prefix,
        fsync_dir: dir.path().to_path_buf(),
        server_pid: Some(server.pid()),
        _server: Some((server, dir)),
    })
}

fn existing(env: &ScenarioEnv, host: &str) -> Result<CreateTarget, String> {
    let path = env.credentials.as_ref().ok_or("durable-creates on an existing server needs --credentials FILE")?;
    let credentials = Credentials::load(path, KeyChoice::Secret).map_err(|e| e.to_string())?;
    let prefix = env
        .prefix
        .clone()
        .or_else(|| default_prefix(&credentials))
        .ok_or("--prefix is needed: the credentials handle has none")?;
    let fsync_dir = env
        .fsync_probe
        .clone()
        .ok_or("durable-creates on an existing server needs --fsync-probe DIR (a directory on its data disk)")?;
    Ok(CreateTarget {
        host: host.to_string(),
        port: env.port,
        http_port: env.http_port,
        credentials,
        prefix,
        fsync_dir,
        server_pid: env.server_pid,
        _server: None,
    })
}

/// The BENCHMARKS.md table: one markdown row per transport and client count.
fn creates_table(runs: &[(&str, Stats)]) -> String {
    let mut t = String::from(
        "| transport | clients | creates/s | p50 ms | p99 ms | p99.9 ms | errors | disk fsync/s | creates per fsync |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (transport, s) in runs {
        let rate = s.ok as f64 / s.elapsed_s.max(1e-9);
        let fsyncs = s.disk_fsync_per_s.unwrap_or(f64::NAN);
        t += &format!(
            "| {transport} | {} | {rate:.0} | {:.2} | {:.2} | {:.2} | {} | {fsyncs:.0} | {:.1} |\n",
            s.clients,
            s.ms(0.5),
            s.ms(0.99),
            s.ms(0.999),
            s.error_count(),
            rate / fsyncs
        );
    }
    let errors: Vec<String> = runs
        .iter()
        .filter(|(_, s)| !s.errors.is_empty())
        .map(|(_, s)| format!("{}: {:?}", s.label, s.errors))
        .collect();
    if !errors.is_empty() {
        t += &format!("errors by kind: {}\n", errors.join("; "));
    }
    t
}

pub(crate) async fn durable_creates(env: &ScenarioEnv) -> Result<ScenarioOutput, String> {
    let target = match &env.host {
        Some(host) => existing(env, host)?,
        None => started(env)?,
    };
    let pick = |full: f64, quick: f64| Duration::from_secs_f64(if env.quick { quick } else { full });
    let levels: Vec<usize> = if env.quick { vec![1, 4] } else { vec![1, 16, 64, 128] };
    let mut rows = Vec::new();
    let mut sections = Vec::new();
    for (name, transport, port) in
        [("TCP", Transport::TcpPersistent, target.port), ("HTTP", Transport::Http, target.http_port)]
    {
        let mut spec = TargetSpec::new(transport, &target.host, Some(port));
        spec.credentials = Some(target.credentials.clone());
        let mut runs = Vec::new();
        for &clients in &levels {
            let workload = Workload::admin(&target.prefix, vec![OpKind::Create]);
            let mut plan = Plan::new(format!("{name} c={clients}"), spec.build()?, workload);
            plan.server_pid = target.server_pid;
            plan.fsync_probe = Some(target.fsync_dir.clone());
            let model = Model::Closed {
                clients,
                requests_per_client: None,
                duration: Some(pick(10.0, 0.5)),
                pause: Duration::ZERO,
                warmup: pick(1.0, 0.2),
            };
            runs.push(run_model(&plan, &model).await?);
        }
        let mut section = runs_section(
            &format!("Durable creates over {name}"),
            "A session per client, opened and authenticated before the clock starts; creates only in the window.",
            &runs,
            0,
        );
        section.charts.splice(0..0, concurrency_charts(&runs));
        sections.push(section);
        rows.extend(runs.into_iter().map(|s| (name, s)));
    }
    let table = format!(
        "Durable creates under {}, one URL value each, a session per client (as the Java client)\n{}",
        target.prefix,
        creates_table(&rows)
    );
    let runs = rows.into_iter().map(|(_, s)| s).collect();
    Ok(ScenarioOutput { report: report("durable-creates", &table, sections), table, runs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_reads_as_creates_per_fsync() {
        let mut s = Stats::empty("TCP c=16");
        s.clients = 16;
        s.ok = 2000;
        s.elapsed_s = 10.0;
        s.disk_fsync_per_s = Some(250.0);
        s.latency_us.record(6_000).unwrap();
        let t = creates_table(&[("TCP", s)]);
        assert!(t.contains("| TCP | 16 | 200 | 6.00 | 6.00 | 6.00 | 0 | 250 | 0.8 |"), "{t}");
    }
}
