//! Durable creates under load, over TCP and the HTTP tunnel, each client in its
//! own authenticated DH session (as the Java client works), with the disk's
//! raw fsync rate probed in the same run so the result reads as "creates per
//! fsync". For BENCHMARKS.md ("Durable creates").
//!
//! ```text
//! cargo run --release -p handled-client --example admin_load -- \
//!     --credentials DATA/admin-TEST.json --tcp 127.0.0.1:2641 --http 127.0.0.1:8000 \
//!     --clients 1,16,64 --seconds 10 --fsync-dir DATA
//! ```

use handled_client::{AdminSession, ConnectParams, Credentials, KeyChoice, Protocol};
use handled_proto::value::HandleValue;
use hdrhistogram::Histogram;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

struct Args {
    credentials: PathBuf,
    targets: Vec<(Protocol, SocketAddr)>,
    clients: Vec<usize>,
    seconds: u64,
    fsync_dir: PathBuf,
}

fn args() -> Args {
    let mut a = Args { credentials: "data/admin-TEST.json".into(), targets: vec![], clients: vec![1, 16, 64], seconds: 10, fsync_dir: ".".into() };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--credentials" => a.credentials = val().into(),
            "--tcp" => a.targets.push((Protocol::Tcp, val().parse().expect("--tcp ADDR"))),
            "--http" => a.targets.push((Protocol::Http, val().parse().expect("--http ADDR"))),
            "--clients" => a.clients = val().split(',').map(|c| c.parse().expect("--clients N,N")).collect(),
            "--seconds" => a.seconds = val().parse().expect("--seconds N"),
            "--fsync-dir" => a.fsync_dir = val().into(),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!a.targets.is_empty(), "give --tcp and/or --http");
    a
}

/// fsync()s per second the disk sustains: 4 KiB write + fsync in a loop, one file.
fn fsync_rate(dir: &Path, secs: f64) -> f64 {
    let path = dir.join(".fsync-probe");
    let mut f = std::fs::File::create(&path).expect("probe file");
    let block = [0x5au8; 4096];
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        f.write_all(&block).unwrap();
        f.sync_all().unwrap();
        n += 1;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&path);
    rate
}

struct Outcome {
    ok: u64,
    errors: u64,
    hist: Histogram<u64>,
}

async fn run(protocol: Protocol, addr: SocketAddr, creds: &Credentials, clients: usize, secs: u64, tag: &str) -> Outcome {
    // Open and authenticate every session first: the measured window is creates only.
    let mut sessions = Vec::new();
    for c in 0..clients {
        let mut s = AdminSession::open(ConnectParams::new(protocol, addr), creds.clone()).await.expect("session");
        s.create(format!("TEST/warm-{tag}-{c}").as_bytes(), &[HandleValue::new(1, "URL", "https://example.org/w")]).await.expect("warm-up create");
        sessions.push(s);
    }
    let stop = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for (c, mut s) in sessions.into_iter().enumerate() {
        let tag = tag.to_string();
        tasks.push(tokio::spawn(async move {
            let mut out = Outcome { ok: 0, errors: 0, hist: Histogram::new_with_bounds(1, 60_000_000, 3).unwrap() };
            let value = [HandleValue::new(1, "URL", "https://example.org/landing/page")];
            let mut i = 0u64;
            while Instant::now() < stop {
                let h = format!("TEST/b-{tag}-{c}-{i}");
                i += 1;
                let t = Instant::now();
                match s.create(h.as_bytes(), &value).await {
                    Ok(_) => {
                        out.ok += 1;
                        out.hist.record(t.elapsed().as_micros().max(1) as u64).unwrap();
                    }
                    Err(_) => out.errors += 1,
                }
            }
            out
        }));
    }
    let mut total = Outcome { ok: 0, errors: 0, hist: Histogram::new_with_bounds(1, 60_000_000, 3).unwrap() };
    for t in tasks {
        let o = t.await.unwrap();
        total.ok += o.ok;
        total.errors += o.errors;
        total.hist.add(&o.hist).unwrap();
    }
    total
}

#[tokio::main]
async fn main() {
    let a = args();
    let creds = Credentials::load(&a.credentials, KeyChoice::Secret).expect("credentials");
    let run_id = std::process::id();
    println!("| transport | clients | creates/s | p50 ms | p99 ms | p99.9 ms | errors | disk fsync/s | creates per fsync |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &(protocol, addr) in &a.targets {
        for &clients in &a.clients {
            let fsyncs = fsync_rate(&a.fsync_dir, 2.0);
            let tag = format!("{run_id}-{protocol:?}-{clients}");
            let o = run(protocol, addr, &creds, clients, a.seconds, &tag).await;
            let rate = o.ok as f64 / a.seconds as f64;
            let ms = |q: f64| o.hist.value_at_quantile(q) as f64 / 1000.0;
            println!(
                "| {protocol:?} | {clients} | {rate:.0} | {:.2} | {:.2} | {:.2} | {} | {fsyncs:.0} | {:.1} |",
                ms(0.5),
                ms(0.99),
                ms(0.999),
                o.errors,
                rate / fsyncs
            );
        }
    }
}
