//! Closed- and open-loop resolution scenarios against one server: the CNRI
//! method, keep-alive vs close, the concurrency curve, wrk2's fixed rates and
//! the admission-control surge.

use super::env::{one_section_output, phase_rows, report, wrk2_block, Ctx, ScenarioOutput};
use crate::html::{concurrency_charts, runs_section};
use crate::run::{concurrency_sweep, run as run_model, Model, Schedule};
use crate::spec::Transport;
use crate::stats::Stats;
use std::time::Duration;

fn per_core(s: &Stats) -> String {
    s.per_server_core_second().map_or("-".into(), |v| format!("{v:.0}"))
}

pub(super) async fn cnri(ctx: &Ctx) -> Result<ScenarioOutput, String> {
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
    let section = (
        "Closed loop per protocol",
        "Each thread sends its next request when the previous one is answered, then pauses.",
    );
    Ok(one_section_output("cnri", section, 3, table, runs))
}

pub(super) async fn keepalive(ctx: &Ctx) -> Result<ScenarioOutput, String> {
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
    let section = (
        "Socket reuse",
        "Sockets opened and in use by the bench; TIME_WAIT+ is the growth of TIME_WAIT sockets on the server port.",
    );
    Ok(one_section_output("keepalive", section, 4, table, runs))
}

pub(super) async fn concurrency(ctx: &Ctx) -> Result<ScenarioOutput, String> {
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

pub(super) async fn open_loop(ctx: &Ctx) -> Result<ScenarioOutput, String> {
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
    let section =
        ("Fixed-rate runs", "Corrected latency counts queueing behind slow answers; the bracketed figures do not.");
    Ok(one_section_output("open-loop", section, runs.len(), table, runs))
}

pub(super) async fn surge(ctx: &Ctx) -> Result<ScenarioOutput, String> {
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
    let section = ("Surge", "Requests due on a ramp whatever the answers; latency counted from when each was due.");
    Ok(one_section_output("surge", section, 1, table, runs))
}
