//! Lookups while the key directory's hash grows (issue 45): N/4 handles
//! imported into a fresh store with the directory, then one thread makes
//! uniform gets of those while the rest are imported (`put_many` chunks of
//! 10,000, each checkpoint installing its records; the hash doubles on the
//! way), and the gets' latency is reported: the longest, p99.99, how many
//! waited over 1 ms, and the minor page faults meanwhile (a segment mapped
//! anew at each checkpoint is faulted in again by the gets). A hash grown
//! under the write lock shows as gets that wait for the copy of every entry.
//! For scale, the example also times such a copy alone: the longest insert
//! into a hash of N entries, its last doubling.
//!
//! `cargo run --release -p handled-store --example keydir_growth -- DIR N`
//! (DIR is created; delete it afterwards).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use handled_store::{EmbeddedOptions, EmbeddedStore, RecordStore, StoreAdmin};
use rand::Rng;

mod bench_fixtures;
use bench_fixtures::{key, record, BenchArgs};

fn import(store: &EmbeddedStore, rt: &tokio::runtime::Runtime, keys: std::ops::Range<u64>) {
    let mut keys = keys.peekable();
    while keys.peek().is_some() {
        let chunk: Vec<_> = keys.by_ref().take(10_000).map(|k| (key(k), record(k))).collect();
        rt.block_on(store.put_many(chunk)).unwrap();
    }
}

/// Minor page faults of this process so far.
fn minor_faults() -> i64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_minflt
}

fn main() {
    let args = BenchArgs::from_env();
    let (dir, n) = (&args.dir, args.n);
    let first = n / 4;
    let opts = EmbeddedOptions {
        cache_bytes: Some(64 << 20),
        key_directory: true,
        warm_on_open: false,
        checkpoint_interval: Duration::from_millis(200),
        ..Default::default()
    };
    let store = Arc::new(EmbeddedStore::open(&dir.join("handles.redb"), opts).unwrap());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    import(&store, &rt, 0..first);
    rt.block_on(store.checkpoint()).unwrap();
    let memory_before = store.key_directory_stats().unwrap().memory_bytes;

    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (store, done) = (store.clone(), done.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let mut rng = rand::rng();
            let mut lat = Vec::with_capacity(1 << 24);
            while !done.load(Ordering::Relaxed) {
                let k = key(rng.random_range(0..first));
                let t = Instant::now();
                let found = rt.block_on(store.get(&k)).unwrap().is_some();
                lat.push(t.elapsed().as_nanos() as u64);
                assert!(found, "{} missing", String::from_utf8_lossy(&k));
            }
            lat
        })
    };
    let t = Instant::now();
    let faults = minor_faults();
    import(&store, &rt, first..n);
    rt.block_on(store.checkpoint()).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let faults = minor_faults() - faults;
    done.store(true, Ordering::Relaxed);
    let mut lat = reader.join().unwrap();
    lat.sort_unstable();
    let c = lat.len();
    let at = |q: usize| lat[(c * q / 10_000).min(c - 1)] as f64 / 1e3;
    let memory_after = store.key_directory_stats().unwrap().memory_bytes;
    // What a lookup waited for when the hash grew in place, under the write
    // lock: the longest single insert into such a hash is its last doubling.
    let mut alone = std::collections::HashMap::new();
    let mut longest = (0, Duration::ZERO);
    for k in 0..n {
        let t = Instant::now();
        alone.insert(k.wrapping_mul(0x9E37_79B9_7F4A_7C15), k);
        if t.elapsed() > longest.1 {
            longest = (alone.len(), t.elapsed());
        }
    }
    drop(alone);
    println!("{{\"in_place_growth_at_entries\": {}, \"ms\": {:.1}}}", longest.0, longest.1.as_secs_f64() * 1e3);
    println!(
        "{{\"keys\": {n}, \"grown_from_mb\": {}, \"grown_to_mb\": {}, \"import_secs\": {secs:.1}, \"gets\": {c}, \
         \"p50_us\": {:.2}, \"p99_us\": {:.2}, \"p9999_us\": {:.1}, \"max_ms\": {:.2}, \"over_1ms\": {}, \"minor_faults\": {faults}}}",
        memory_before >> 20,
        memory_after >> 20,
        at(5_000),
        at(9_900),
        at(9_999),
        lat[c - 1] as f64 / 1e6,
        lat.iter().filter(|l| **l > 1_000_000).count()
    );
}
