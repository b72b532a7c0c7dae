//! Printing results: a human table and one JSON object per run.

use crate::run::BenchResult;
use handled_client::Protocol;

fn protocol_name(r: &BenchResult) -> &'static str {
    match (r.config.protocol, r.config.persistent) {
        (Protocol::Udp, _) => "udp",
        (Protocol::Tcp, false) => "tcp (new connection per request)",
        (Protocol::Tcp, true) => "tcp (persistent)",
        (Protocol::Http, _) => "http tunnel (keep-alive)",
    }
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

pub fn human(r: &BenchResult) -> String {
    let h = &r.latency_us;
    let mut out = format!(
        "{}  {} clients  {:.1} s\n  requests {}  ok {}  throughput {:.0}/s\n  latency ms  p50 {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}\n",
        protocol_name(r),
        r.config.concurrency,
        r.elapsed.as_secs_f64(),
        r.total(),
        r.ok,
        r.throughput(),
        ms(h.value_at_quantile(0.50)),
        ms(h.value_at_quantile(0.90)),
        ms(h.value_at_quantile(0.99)),
        ms(h.max()),
    );
    if r.connections_opened > 0 {
        out += &format!("  connections opened {}\n", r.connections_opened);
    }
    if let (Some(cpu), Some(per)) = (r.server_cpu, r.per_server_core_second()) {
        out += &format!("  server cpu {:.2} s  → {:.0} requests per server core-second\n", cpu.as_secs_f64(), per);
    }
    if !r.errors.is_empty() {
        let list: Vec<String> = r.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        out += &format!("  errors: {}\n", list.join(", "));
    }
    out
}

pub fn json(r: &BenchResult) -> serde_json::Value {
    let h = &r.latency_us;
    serde_json::json!({
        "protocol": protocol_name(r),
        "concurrency": r.config.concurrency,
        "elapsed_s": r.elapsed.as_secs_f64(),
        "requests": r.total(),
        "ok": r.ok,
        "throughput": r.throughput(),
        "latency_ms": {
            "mean": h.mean() / 1000.0,
            "p50": ms(h.value_at_quantile(0.50)),
            "p90": ms(h.value_at_quantile(0.90)),
            "p99": ms(h.value_at_quantile(0.99)),
            "max": ms(h.max()),
        },
        "errors": r.errors,
        "connections_opened": r.connections_opened,
        "server_cpu_s": r.server_cpu.map(|c| c.as_secs_f64()),
        "per_server_core_second": r.per_server_core_second(),
    })
}
