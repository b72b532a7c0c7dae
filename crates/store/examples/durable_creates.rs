//! Durable creates straight into the embedded store, no server in between: the
//! store's own cost per create (e.g. of keeping the transaction log), without
//! the protocol, sessions and signatures that dominate `handled bench`.
//!
//! `cargo run --release -p handled-store --example durable_creates -- DIR [CLIENTS] [SECONDS]`
//! prints creates/s and the process's CPU time per create.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use handled_store::conformance::url_record;
use handled_store::{EmbeddedOptions, EmbeddedStore, Expect, Store};

fn cpu_seconds() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we pass.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).expect("usage: durable_creates DIR [CLIENTS] [SECONDS]"));
    let clients: u64 = args.get(2).map_or(64, |a| a.parse().expect("clients"));
    let seconds: u64 = args.get(3).map_or(10, |a| a.parse().expect("seconds"));
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open_dir(&dir, EmbeddedOptions::default()).unwrap());
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (store, done, stop) = (store.clone(), done.clone(), stop.clone());
            tokio::spawn(async move {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("20.5000/bench-{c}-{i}");
                    let out = store.swap(key.as_bytes(), Expect::Absent, Some(url_record(&key))).await.unwrap();
                    assert!(out.is_done());
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let (n, secs, cpu) = (done.load(Ordering::Relaxed), t0.elapsed().as_secs_f64(), cpu_seconds() - cpu0);
    println!(
        "{clients} clients, {secs:.1} s: {n} creates, {:.0} creates/s, {:.2} µs CPU per create, {} fsyncs",
        n as f64 / secs,
        cpu / n as f64 * 1e6,
        store.stats().fsyncs
    );
    store.close();
}
