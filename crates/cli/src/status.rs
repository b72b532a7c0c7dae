//! `handled status`: live admission, cache and store figures of a running
//! server, read from its `/metrics` endpoint (which is never throttled).

use crate::target::{resolve_host, unreachable, Via};
use anyhow::bail;
use clap::Args;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
pub struct StatusArgs {
    /// Server host.
    #[arg(long, env = "HANDLED_HOST", default_value = "127.0.0.1")]
    host: String,
    /// The server's HTTP port.
    #[arg(long, env = "HANDLED_HTTP_PORT", default_value_t = crate::target::HTTP_PORT)]
    http_port: u16,
    /// Print the raw Prometheus text instead.
    #[arg(long)]
    raw: bool,
}

fn fetch_metrics(host: &str, port: u16) -> anyhow::Result<String> {
    let addr = resolve_host(host, port)?;
    let reach = |e: std::io::Error| unreachable(addr, Via::Http, &e.to_string());
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(3)).map_err(reach)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").map_err(reach)?;
    // Bytes, not text: a native port answers in binary.
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(reach)?;
    let raw = String::from_utf8_lossy(&raw);
    let Some((head, body)) = raw.split_once("\r\n\r\n").filter(|(h, _)| h.starts_with("HTTP/")) else {
        return Err(unreachable(addr, Via::Http, "malformed HTTP response"));
    };
    if !head.starts_with("HTTP/1.1 200") {
        bail!("{addr} answered {}", head.lines().next().unwrap_or(""));
    }
    Ok(body.to_string())
}

/// `name{labels} value` lines, summed over labels per name, plus labelled ones kept whole.
fn parse(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let Ok(value) = value.parse::<f64>() else { continue };
        out.insert(series.to_string(), value);
        if let Some((name, _)) = series.split_once('{') {
            *out.entry(name.to_string()).or_insert(0.0) += value;
        }
    }
    out
}

pub async fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let text = tokio::task::spawn_blocking(move || fetch_metrics(&args.host, args.http_port)).await??;
    if args.raw {
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let m = parse(&text);
    let get = |k: &str| m.get(k).copied().unwrap_or(0.0);
    let handles = m.get("handled_handles").map_or("? handles".to_string(), |n| format!("{n:.0} handles"));
    println!("server      handled {}   up {}   {handles}", build_of(&text), uptime(get("handled_uptime_seconds")));
    println!(
        "admission   in flight {:.0}/{:.0}   waiting {:.0}/{:.0}   admitted {:.0}   queued {:.0}   rejected {:.0} (queue full {:.0}, waited too long {:.0}, would wait too long {:.0})",
        get("handled_admission_in_flight"),
        get("handled_admission_max_concurrent"),
        get("handled_admission_waiting"),
        get("handled_admission_queue_capacity"),
        get("handled_admission_admitted_total"),
        get("handled_admission_queued_total"),
        get("handled_admission_rejected_total"),
        get(r#"handled_admission_rejected_total{reason="queue_full"}"#),
        get(r#"handled_admission_rejected_total{reason="queue_timeout"}"#),
        get(r#"handled_admission_rejected_total{reason="queue_wait_predicted"}"#),
    );
    println!(
        "requests    {:.0} answered   open connections {:.0}",
        get("handled_requests_total"),
        get("handled_open_connections")
    );
    if m.contains_key("handled_cache_hits_total") {
        let (hits, misses) = (get("handled_cache_hits_total"), get("handled_cache_misses_total"));
        let ratio = if hits + misses > 0.0 { 100.0 * hits / (hits + misses) } else { 0.0 };
        println!(
            "cache       {:.1}/{:.1} MB   {:.0} entries   hit ratio {ratio:.1}%   evictions {:.0}   invalidations {:.0}",
            get("handled_cache_bytes") / 1e6,
            get("handled_cache_capacity_bytes") / 1e6,
            get("handled_cache_entries"),
            get("handled_cache_evictions_total"),
            get("handled_cache_invalidations_total"),
        );
    } else {
        println!("cache       off");
    }
    let commits = get("handled_store_commits_total");
    let per_commit = if commits > 0.0 { get("handled_store_write_ops_total") / commits } else { 0.0 };
    println!(
        "store       {:.0} commits   {:.0} fsyncs   {per_commit:.1} writes per commit   largest group commit {:.0}",
        commits,
        get("handled_store_fsyncs_total"),
        get("handled_store_max_group_commit"),
    );
    if let Some(line) = replication_line(&m) {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// A mirror's progress: `replication  from SOURCE  pulling  txn N  lag 0.3 s  ...`.
fn replication_line(m: &BTreeMap<String, f64>) -> Option<String> {
    let (series, last_txn) = m.iter().find(|(k, _)| k.starts_with("handled_replication_last_txn_id{"))?;
    let source = series.split("source=\"").nth(1)?.split('"').next()?.to_string();
    let get = |name: &str| m.get(&format!("{name}{{source=\"{source}\"}}")).copied().unwrap_or(0.0);
    let phase = m
        .iter()
        .filter(|(k, v)| {
            k.starts_with("handled_replication_phase{") && k.contains(&format!("source=\"{source}\"")) && **v == 1.0
        })
        .find_map(|(k, _)| k.split("phase=\"").nth(1)?.split('"').next().map(str::to_string))
        .unwrap_or_else(|| "?".into());
    Some(format!(
        "replication from {source}   {phase}   last txn {last_txn:.0}   lag {:.1} s   dumped {:.0} records   pull errors {:.0}   redumps {:.0}",
        get("handled_replication_lag_seconds"),
        get("handled_replication_dump_handles"),
        get("handled_replication_pull_errors"),
        get("handled_replication_redumps"),
    ))
}

/// `0.1.0 (commit abc)` from the `handled_build_info` labels.
fn build_of(text: &str) -> String {
    let line = text.lines().find(|l| l.starts_with("handled_build_info{")).unwrap_or("");
    let label = |name: &str| {
        line.split(&format!("{name}=\"")).nth(1).and_then(|rest| rest.split('"').next()).unwrap_or("?").to_string()
    };
    format!("{} (commit {})", label("version"), label("commit"))
}

/// `3d 04h 05m 06s`, leading zero units left out.
fn uptime(seconds: f64) -> String {
    let s = seconds as u64;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s:02}s"),
        (0, _, _) => format!("{h}h {m:02}m {s:02}s"),
        _ => format!("{d}d {h:02}h {m:02}m {s:02}s"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sums_labelled_series() {
        let m = super::parse(
            "# HELP x\nhandled_requests_total{a=\"1\"} 2\nhandled_requests_total{a=\"2\"} 3\nhandled_cache_bytes 10\n",
        );
        assert_eq!(m["handled_requests_total"], 5.0);
        assert_eq!(m["handled_cache_bytes"], 10.0);
        assert_eq!(m[r#"handled_requests_total{a="2"}"#], 3.0);
    }

    #[test]
    fn replication_of_a_mirror() {
        let m = super::parse(concat!(
            "handled_replication_last_txn_id{source=\"h:1\"} 42\n",
            "handled_replication_lag_seconds{source=\"h:1\"} 0.3\n",
            "handled_replication_phase{source=\"h:1\",phase=\"dumping\"} 0\n",
            "handled_replication_phase{source=\"h:1\",phase=\"pulling\"} 1\n",
        ));
        let line = super::replication_line(&m).unwrap();
        assert!(line.starts_with("replication from h:1   pulling   last txn 42   lag 0.3 s"), "{line}");
        assert!(super::replication_line(&super::parse("handled_uptime_seconds 1\n")).is_none(), "not a mirror");
    }

    #[test]
    fn build_and_uptime() {
        let text = "handled_build_info{version=\"0.1.0\",commit=\"abc123\"} 1\n";
        assert_eq!(super::build_of(text), "0.1.0 (commit abc123)");
        assert_eq!(super::uptime(5.2), "5s");
        assert_eq!(super::uptime(3725.0), "1h 02m 05s");
        assert_eq!(super::uptime(90_061.0), "1d 01h 01m 01s");
    }
}
