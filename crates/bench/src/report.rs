//! Text outputs: the human table and one JSON object per run (JSON lines).

use crate::stats::Stats;
use serde_json::json;

fn q(s: &Stats, q: f64) -> f64 {
    s.ms(q)
}

/// Network (and client) time: mean latency from send minus the server's own mean time.
pub fn network_mean_ms(s: &Stats) -> Option<f64> {
    (!s.server_us.is_empty()).then(|| (s.service_us.mean() - s.server_us.mean()).max(0.0) / 1000.0)
}

/// The published registry figure: the highest step of a rate sweep whose
/// mean response time (from send) stays under `limit_ms`, counting only steps
/// up to the first that crosses it, as one reads autobench's table.
pub fn under_limit(runs: &[Stats], limit_ms: f64) -> Option<&Stats> {
    runs.iter().take_while(|s| s.total() > 0 && s.service_us.mean() / 1000.0 < limit_ms).last()
}

pub fn table(runs: &[Stats]) -> String {
    let op_width = runs
        .iter()
        .filter(|s| s.by_op.len() > 1)
        .flat_map(|s| s.by_op.keys())
        .map(|op| op.len() + 2)
        .max()
        .unwrap_or(0);
    let width = runs.iter().map(|s| s.label.len()).max().unwrap_or(3).max(3).max(op_width);
    let mut out = format!(
        "{:<width$}  {:>9} {:>7} {:>9}  {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}  {:>8} {:>5}\n",
        "run", "requests", "errors", "req/s", "mean ms", "p50", "p90", "p99", "p99.9", "max", "sockets", "peak"
    );
    for s in runs {
        out += &format!(
            "{:<width$}  {:>9} {:>7} {:>9.0}  {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3}  {:>8} {:>5}\n",
            s.label,
            s.total(),
            s.error_count(),
            s.throughput(),
            s.latency_us.mean() / 1000.0,
            q(s, 0.5),
            q(s, 0.9),
            q(s, 0.99),
            q(s, 0.999),
            s.latency_us.max() as f64 / 1000.0,
            s.sockets_opened,
            s.peak_sockets,
        );
        // A mixed loop: each operation kind's share, under the run.
        if s.by_op.len() > 1 {
            for (op, o) in &s.by_op {
                out += &format!(
                    "{:<width$}  {:>9} {:>7} {:>9.0}  {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3}\n",
                    format!("  {op}"),
                    o.total(),
                    o.total() - o.ok,
                    per_second(o.total(), s.elapsed_s),
                    o.latency_us.mean() / 1000.0,
                    o.ms(0.5),
                    o.ms(0.9),
                    o.ms(0.99),
                    o.ms(0.999),
                    o.latency_us.max() as f64 / 1000.0,
                );
            }
        }
    }
    for s in runs {
        let mut notes = Vec::new();
        if let Some(r) = s.solicited_rate {
            notes.push(format!("solicited {r:.0}/s, effective {:.0}/s", s.throughput()));
        }
        if s.latency_us.max() > s.service_us.max() + 1000
            || s.ms(0.99) > s.service_us.value_at_quantile(0.99) as f64 / 1000.0 * 1.5
        {
            notes.push(format!(
                "uncorrected (from send) p50 {:.3} p99 {:.3} max {:.3} ms",
                s.service_us.value_at_quantile(0.5) as f64 / 1000.0,
                s.service_us.value_at_quantile(0.99) as f64 / 1000.0,
                s.service_us.max() as f64 / 1000.0
            ));
        }
        if !s.too_busy_us.is_empty() {
            let h = &s.too_busy_us;
            let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
            notes.push(format!(
                "refused as too busy: {} answered in p50 {:.3} p99 {:.3} max {:.3} ms (from send)",
                h.len(),
                ms(0.5),
                ms(0.99),
                h.max() as f64 / 1000.0
            ));
        }
        if let Some(net) = network_mean_ms(s) {
            notes.push(format!(
                "server time mean {:.3} ms p99 {:.3} ms; network+client mean {net:.3} ms",
                s.server_us.mean() / 1000.0,
                s.server_us.value_at_quantile(0.99) as f64 / 1000.0
            ));
        }
        if let Some(disk) = s.disk_fsync_per_s {
            notes.push(format!(
                "disk {disk:.0} fsync/s (4 KiB write + fsync) → {:.1} successful requests per fsync",
                s.ok as f64 / s.elapsed_s.max(1e-9) / disk.max(1e-9)
            ));
        }
        if let (Some(cpu), Some(per)) = (s.server_cpu_s, s.per_server_core_second()) {
            notes.push(format!("server cpu {cpu:.2} s → {per:.0} requests per server core-second"));
        }
        if let (Some(cpu), Some(per)) = (s.db_cpu_s, s.per_server_and_db_core_second()) {
            notes.push(format!("database cpu {cpu:.2} s → {per:.0} requests per server-and-database core-second"));
        }
        if let (Some(cpu), Some(per)) = (s.client_cpu_s, s.per_client_core_second()) {
            notes.push(format!("bench cpu {cpu:.2} s → {per:.0} requests per client core-second"));
        }
        if s.sockets_opened > 0 {
            notes.push(format!("{:.1} requests per socket", s.total() as f64 / s.sockets_opened as f64));
        }
        if let Some(tw) = s.time_wait_after.filter(|n| *n > 0) {
            notes.push(format!("{tw} more sockets in TIME_WAIT"));
        }
        if !s.errors.is_empty() {
            let list: Vec<String> = s.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
            notes.push(format!("errors: {}", list.join(", ")));
        }
        match s.recovery_s() {
            Some(r) if r.is_finite() => notes
                .push(format!("recovery {r:.1} s after the first failure at {:.1} s", s.first_error_s.unwrap_or(0.0))),
            Some(_) => notes.push("no second without failures after the first failure".into()),
            None => {}
        }
        if !notes.is_empty() {
            out += &format!("  {}: {}\n", s.label, notes.join("; "));
        }
    }
    out
}

fn per_second(n: u64, elapsed_s: f64) -> f64 {
    if elapsed_s > 0.0 {
        n as f64 / elapsed_s
    } else {
        0.0
    }
}

fn pct(h: &hdrhistogram::Histogram<u64>) -> serde_json::Value {
    json!({
        "mean": h.mean() / 1000.0,
        "p50": h.value_at_quantile(0.5) as f64 / 1000.0,
        "p90": h.value_at_quantile(0.9) as f64 / 1000.0,
        "p99": h.value_at_quantile(0.99) as f64 / 1000.0,
        "p99.9": h.value_at_quantile(0.999) as f64 / 1000.0,
        "max": h.max() as f64 / 1000.0,
    })
}

/// One JSON object summarising a run (percentiles in ms).
pub fn json_line(s: &Stats) -> serde_json::Value {
    let ops: serde_json::Map<String, serde_json::Value> = s
        .by_op
        .iter()
        .map(|(op, o)| {
            let v = json!({
                "requests": o.total(),
                "ok": o.ok,
                "errors": o.errors,
                "throughput": per_second(o.total(), s.elapsed_s),
                "latency_ms": pct(&o.latency_us),
            });
            (op.clone(), v)
        })
        .collect();
    json!({
        "label": s.label,
        "clients": s.clients,
        "elapsed_s": s.elapsed_s,
        "requests": s.total(),
        "ok": s.ok,
        "errors": s.errors,
        "throughput": s.throughput(),
        "solicited_rate": s.solicited_rate,
        "latency_ms": pct(&s.latency_us),
        "service_ms": pct(&s.service_us),
        "server_ms": (!s.server_us.is_empty()).then(|| pct(&s.server_us)),
        "too_busy_ms": (!s.too_busy_us.is_empty()).then(|| pct(&s.too_busy_us)),
        "network_mean_ms": network_mean_ms(s),
        "sockets_opened": s.sockets_opened,
        "peak_sockets": s.peak_sockets,
        "time_wait_after": s.time_wait_after,
        "sessions": s.sessions,
        "server_cpu_s": s.server_cpu_s,
        "per_server_core_second": s.per_server_core_second(),
        "db_cpu_s": s.db_cpu_s,
        "per_server_and_db_core_second": s.per_server_and_db_core_second(),
        "client_cpu_s": s.client_cpu_s,
        "per_client_core_second": s.per_client_core_second(),
        "first_error_s": s.first_error_s,
        "recovery_s": s.recovery_s().map(|r| if r.is_finite() { json!(r) } else { json!("not recovered") }),
        "ops": ops,
        "disk_fsync_per_s": s.disk_fsync_per_s,
        "series_100ms": s.series.iter().map(|b| json!([b.ok, b.errors, b.latency_max_us, b.sockets])).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_shows_rates_errors_and_sockets() {
        let mut s = Stats::empty("close");
        s.ok = 990;
        s.errors.insert("timeout".into(), 10);
        s.elapsed_s = 2.0;
        s.sockets_opened = 1000;
        s.peak_sockets = 12;
        s.solicited_rate = Some(600.0);
        for v in 1..=990 {
            s.latency_us.record(v * 10).unwrap();
            s.service_us.record(v * 10).unwrap();
        }
        let t = table(&[s.clone()]);
        assert!(t.contains("close") && t.contains(" 1000 ") && t.contains("500"), "{t}");
        assert!(t.contains("solicited 600/s, effective 500/s"), "{t}");
        assert!(t.contains("errors: timeout 10") && t.contains("1.0 requests per socket"), "{t}");
        let j = json_line(&s);
        assert_eq!(j["requests"], 1000);
        assert_eq!(j["peak_sockets"], 12);
        assert!((j["latency_ms"]["p50"].as_f64().unwrap() - 4.95).abs() < 0.01);
    }

    #[test]
    fn sweep_limit_is_the_last_step_before_the_mean_crosses_it() {
        let step = |rate: f64, mean_ms: u64| {
            let mut s = Stats::empty(format!("{rate}"));
            s.ok = 10;
            s.solicited_rate = Some(rate);
            s.service_us.record(mean_ms * 1000).unwrap();
            s
        };
        let runs = [step(1000.0, 2), step(2000.0, 30), step(3000.0, 80), step(4000.0, 20)];
        assert_eq!(under_limit(&runs, 50.0).and_then(|s| s.solicited_rate), Some(2000.0));
        assert!(under_limit(&runs[2..3], 50.0).is_none());
    }

    #[test]
    fn mixed_runs_show_each_operation() {
        let mut s = Stats::empty("mixed");
        s.elapsed_s = 2.0;
        s.ok = 30;
        for (op, ms) in [("create", 8), ("delete", 4), ("resolve", 1)] {
            let o = s.by_op.entry(op.into()).or_default();
            o.ok = 10;
            for _ in 0..10 {
                o.latency_us.record(ms * 1000).unwrap();
            }
        }
        s.disk_fsync_per_s = Some(5.0);
        let t = table(std::slice::from_ref(&s));
        let create = t.lines().find(|l| l.trim_start().starts_with("create")).unwrap();
        assert!(create.contains(" 10 ") && create.contains(" 8.00"), "{t}");
        assert!(t.contains("disk 5 fsync/s") && t.contains("3.0 successful requests per fsync"), "{t}");
        let j = json_line(&s);
        assert_eq!(j["ops"]["resolve"]["throughput"], 5.0);
        assert!((j["ops"]["delete"]["latency_ms"]["p99"].as_f64().unwrap() - 4.0).abs() < 0.01);
    }
}
