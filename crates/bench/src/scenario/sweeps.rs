//! The scenarios with rate sweeps, several servers or several processes.

use super::env::{one_section_output, report, Ctx, ScenarioEnv, ScenarioOutput, Server};
use crate::coord::{coordinate, merge};
use crate::html::{rate_charts, runs_section, Section};
use crate::run::{run as run_model, Model};
use crate::spec::{TargetSpec, Transport};
use crate::stats::{Stats, BUCKET};
use crate::sweep::{rate_sweep, reply_rate_summary, RateSweep};
use std::process::{Command, Stdio};
use std::time::Duration;

/// autobench's TSV columns (one row per demanded rate).
fn autobench_table(title: &str, runs: &[Stats], per_conn: u64) -> String {
    let mut t = format!(
        "{title}\n{:>12}{:>10}{:>10}{:>14}{:>14}{:>14}{:>17}{:>11}{:>8}\n",
        "dem_req_rate",
        "req_rate",
        "con_rate",
        "min_rep_rate",
        "avg_rep_rate",
        "max_rep_rate",
        "stddev_rep_rate",
        "resp_time",
        "errors"
    );
    for s in runs {
        let (min, avg, max, sd) = reply_rate_summary(s);
        t += &format!(
            "{:>12.0}{:>10.1}{:>10.1}{:>14.1}{:>14.1}{:>14.1}{:>17.1}{:>11.2}{:>8}\n",
            s.solicited_rate.unwrap_or(0.0),
            s.throughput(),
            s.throughput() / per_conn as f64,
            min,
            avg,
            max,
            sd,
            s.service_us.mean() / 1000.0,
            s.error_count()
        );
    }
    t
}

fn sweep_section(heading: &str, runs: &[Stats]) -> Section {
    let mut s = runs_section(
        heading,
        "Connections opened on schedule at rate/10 per second, 10 requests each; resp_time in ms from send.",
        runs,
        0,
    );
    s.charts.splice(0..0, rate_charts(runs));
    s
}

/// autobench's sweep: 10 requests per connection, at most 1024 open, from
/// `step` to `top` requests/s `step` apart (quick: 100 to 300).
fn ten_per_connection(ctx: &Ctx, step: f64, top: f64) -> RateSweep {
    RateSweep {
        from: ctx.pick(step, 100.0),
        to: ctx.pick(top, 300.0),
        step: ctx.pick(step, 100.0),
        per_connection: 10,
        step_duration: Duration::from_secs_f64(ctx.pick(3.0, 0.6)),
        max_open: 1024,
    }
}

pub(crate) async fn autobench(ctx: &Ctx) -> Result<ScenarioOutput, String> {
    let sweep = ten_per_connection(ctx, 2000.0, 20000.0);
    let plan = ctx.plan("tunnel", &ctx.spec(Transport::Http))?;
    let runs = rate_sweep(&plan, &sweep).await?;
    let table = autobench_table(
        "autobench/httperf sweep of the HTTP tunnel (--num-calls 10, keep-alive within a connection)",
        &runs,
        10,
    );
    Ok(ScenarioOutput { report: report("autobench", &table, vec![sweep_section("Rate sweep", &runs)]), table, runs })
}

pub(crate) async fn registry_get(ctx: &Ctx) -> Result<ScenarioOutput, String> {
    let url =
        ctx.env.url.clone().unwrap_or_else(|| format!("http://{}:{}/api/handles/{{handle}}", ctx.host, ctx.http_port));
    let sweep = ten_per_connection(ctx, 1000.0, 10000.0);
    let plan = ctx.plan("GET", &TargetSpec::get(&url))?;
    let runs = rate_sweep(&plan, &sweep).await?;
    let table = autobench_table(&format!("Registry GET sweep of {url} (10 requests per connection)"), &runs, 10);
    Ok(ScenarioOutput {
        report: report("registry-get", &table, vec![sweep_section("GET rate sweep", &runs)]),
        table,
        runs,
    })
}

pub(crate) async fn failover(env: &ScenarioEnv) -> Result<ScenarioOutput, String> {
    let bin = env.handled_bin.as_deref().ok_or("failover starts its own two servers: needs the handled binary")?;
    let (primary, backup) = (Server::spawn(bin)?, Server::spawn(bin)?);
    let quick = env.quick;
    let (kill_at, secs, clients) = if quick { (1.0, 3.0, 4) } else { (2.0, 6.0, 8) };
    let mut spec = TargetSpec::new(Transport::Tcp, &primary.native.ip().to_string(), Some(primary.native.port()));
    spec.failover = vec![backup.native.to_string()];
    let mut plan = crate::run::Plan::new(
        "TCP fail-over",
        spec.build()?,
        crate::workload::Workload::resolve(crate::workload::KeySet::One("TEST/ADMIN".into())),
    );
    plan.timeout = Duration::from_secs(if quick { 1 } else { 5 });
    plan.induce = Some((Duration::from_secs_f64(kill_at), format!("kill -9 {}", primary.pid())));
    let model = Model::Closed {
        clients,
        requests_per_client: None,
        duration: Some(Duration::from_secs_f64(secs)),
        pause: Duration::ZERO,
        warmup: Duration::from_millis(300),
    };
    let s = run_model(&plan, &model).await?;
    drop(primary);
    let rate = |from: f64, to: f64| {
        let i = |t: f64| ((t / BUCKET.as_secs_f64()) as usize).min(s.series.len());
        s.series[i(from)..i(to)].iter().map(|b| b.ok).sum::<u64>() as f64 / (to - from).max(1e-9)
    };
    let recovery = s.recovery_s();
    let first = s.first_error_s;
    let mut table = format!(
        "Fail-over: {clients} clients over TCP to a primary and a backup; primary killed (SIGKILL) at {kill_at:.1} s\n{:>10}{:>8}{:>18}{:>14}{:>16}{:>16}\n",
        "Requests", "Errors", "First failure s", "Recovery s", "Req/s before", "Req/s after"
    );
    table += &format!(
        "{:>10}{:>8}{:>18}{:>14}{:>16.0}{:>16.0}\n",
        s.total(),
        s.error_count(),
        first.map_or("-".into(), |f| format!("{f:.2}")),
        match recovery {
            Some(r) if r.is_finite() => format!("{r:.2}"),
            Some(_) => "not recovered".into(),
            None => "no failure".into(),
        },
        rate(0.0, kill_at),
        rate(first.unwrap_or(kill_at) + recovery.filter(|r| r.is_finite()).unwrap_or(0.0), s.elapsed_s)
    );
    let runs = vec![s];
    let section = (
        "Fail-over",
        "Recovery time: from the first failed request to the start of the first whole second without failures.",
    );
    Ok(one_section_output("failover", section, 1, table, runs))
}

pub(crate) async fn green_flag(ctx: &Ctx) -> Result<ScenarioOutput, String> {
    let bin = ctx.env.handled_bin.as_deref().ok_or("green-flag starts bench processes: needs the handled binary")?;
    let (n, clients, secs) = (3usize, ctx.pick(8, 2), ctx.pick(4.0, 0.6));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?.to_string();
    let mut children = Vec::new();
    for i in 0..n {
        let mut cmd = Command::new(bin);
        cmd.arg("bench");
        if let Some(pid) = ctx.server_pid {
            cmd.args(["--server-pid", &pid.to_string()]);
        }
        let child = cmd
            .args(["--green-flag", &addr, "--host", &ctx.host, "--port", &ctx.port.to_string(), "--transport", "udp"])
            .args(["-c", &clients.to_string(), "-d", &secs.to_string(), "--warmup", "0.2", "--quiet", "--json"])
            .args(["--handle", &ctx.handle, "--label", &format!("client {}", i + 1)])
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start a bench process: {e}"))?;
        children.push(child);
    }
    let results = coordinate(listener, n, Duration::from_millis(300), Duration::from_secs_f64(secs + 60.0)).await;
    for mut c in children {
        let _ = c.wait();
    }
    let results = results?;
    let mut runs: Vec<Stats> = results.iter().flat_map(|(_, r)| r.iter().cloned()).collect();
    // Every process measured the same server over the same window: the merged
    // run keeps the first one's CPU figure rather than a sum (Stats::merge).
    let mut merged = merge(&results);
    let mut table = format!(
        "Green flag: {n} bench processes × {clients} clients over UDP, released together, histograms merged\n{:<28}{:>10}{:>10}{:>10}{:>10}{:>10}{:>8}\n",
        "Client", "Requests", "Req/s", "p50 ms", "p99 ms", "max ms", "Errors"
    );
    runs.append(&mut merged);
    for s in &runs {
        table += &format!(
            "{:<28}{:>10}{:>10.0}{:>10.3}{:>10.3}{:>10.3}{:>8}\n",
            s.label,
            s.total(),
            s.throughput(),
            s.ms(0.5),
            s.ms(0.99),
            s.latency_us.max() as f64 / 1000.0,
            s.error_count()
        );
    }
    let section = runs_section("Fleet", "Per-process rows, then the merged histograms and summed series.", &runs, 0);
    let mut section = section;
    if let Some(m) = runs.last() {
        section.charts.extend(crate::html::series_charts(m));
    }
    Ok(ScenarioOutput { report: report("green-flag", &table, vec![section]), table, runs })
}
