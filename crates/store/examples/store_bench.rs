//! Measurements of the embedded store on this machine.
//!
//! `cargo run --release -p handled-store --example store_bench -- [DIR] [--keys N]
//! [--chunk N] [--secs S] [--quick-repair]`
//!
//! 1. fsync rate of the disk (plain write+fsync loop on a file in DIR);
//! 2. import of N small records (sorted chunks through `put_many`);
//! 3. clean reopen time;
//! 4. point-read latency and throughput (random keys);
//! 5. group-commit throughput of creates at 1, 16 and 64 concurrent tasks;
//! 6. reopen time after a crash (a child process aborts with the store open).
//!
//! Every loop is bounded in time.
//!
//! `store_bench --reads-on FILE N [--cache-mb M] [--secs S]` instead times point
//! reads alone on an existing store (`TEST/<k>`, k uniform in 0..N, as
//! `scripts/bench_capacity.py` imports them) with an M MiB page cache (the
//! server's `store_cache_mb`, 64 by default): the store's share of a lookup,
//! without the network or the protocol.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use handled_proto::HandleValue;
use handled_store::{EmbeddedOptions, EmbeddedStore, Expect, HandleRecord, RecordStore, StoreAdmin};
use rand::{Rng, SeedableRng};

struct Args {
    dir: PathBuf,
    keys: u64,
    chunk: usize,
    secs: f64,
    quick_repair: bool,
    /// Import in random key order (each chunk sorted, as `handled import` does).
    shuffle: bool,
}

fn args() -> Args {
    let mut a = Args {
        dir: PathBuf::from("store-bench"),
        keys: 1_000_000,
        chunk: 10_000,
        secs: 3.0,
        quick_repair: false,
        shuffle: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--keys" => a.keys = it.next().unwrap().parse().unwrap(),
            "--chunk" => a.chunk = it.next().unwrap().parse().unwrap(),
            "--secs" => a.secs = it.next().unwrap().parse().unwrap(),
            "--quick-repair" => a.quick_repair = true,
            "--shuffle" => a.shuffle = true,
            "--open-only" => {
                // Time opens of an existing store (no writes).
                let f = PathBuf::from(it.next().unwrap());
                for _ in 0..5 {
                    let t = Instant::now();
                    let s = EmbeddedStore::open(&f, EmbeddedOptions::default()).unwrap();
                    let el = t.elapsed();
                    let t2 = Instant::now();
                    drop(s);
                    println!("open {:.2} ms, close {:.2} ms", el.as_secs_f64() * 1e3, t2.elapsed().as_secs_f64() * 1e3);
                }
                std::process::exit(0);
            }
            "--reads-on" => {
                let file = PathBuf::from(it.next().unwrap());
                let keys: u64 = it.next().unwrap().parse().unwrap();
                reads_on(&file, keys, std::env::args().skip(1).collect());
            }
            "--crash-child" => {
                crash_child(Path::new(&it.next().unwrap()), a.quick_repair);
            }
            d => a.dir = PathBuf::from(d),
        }
    }
    a
}

/// Point reads alone on an existing store (see the module's comment); exits.
fn reads_on(file: &Path, keys: u64, argv: Vec<String>) -> ! {
    let flag = |name: &str| argv.iter().position(|x| x == name).and_then(|i| argv.get(i + 1)?.parse::<f64>().ok());
    let cache_mb = flag("--cache-mb").unwrap_or(64.0) as usize;
    let secs = flag("--secs").unwrap_or(4.0);
    let opts = EmbeddedOptions { cache_bytes: Some(cache_mb << 20), ..Default::default() };
    let store = Arc::new(EmbeddedStore::open(file, opts).unwrap());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let key = |k: u64| format!("TEST/{k}").into_bytes();
    let (mean, _, n) = point_reads(&rt, &store, keys, secs / 4.0, key);
    eprintln!("warm-up: {n} gets, mean {mean:.2} µs");
    let (mean, p99, n) = point_reads(&rt, &store, keys, secs, key);
    println!(
        "{{\"keys\": {keys}, \"cache_mb\": {cache_mb}, \"gets\": {n}, \"mean_us\": {mean:.3}, \"p99_us\": {p99:.3}, \"gets_per_s\": {:.0}}}",
        1e6 / mean
    );
    std::process::exit(0)
}

/// Uniformly random gets on one task for `secs`: (mean µs, p99 µs, gets).
fn point_reads(
    rt: &tokio::runtime::Runtime,
    store: &Arc<EmbeddedStore>,
    keys: u64,
    secs: f64,
    key: impl Fn(u64) -> Vec<u8>,
) -> (f64, f64, usize) {
    let mut lat = rt.block_on(async {
        let mut rng = rand::rng();
        let mut lat = Vec::with_capacity(1 << 20);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs_f64(secs) && lat.len() < 5_000_000 {
            let k = key(rng.random_range(0..keys));
            let t = Instant::now();
            let r = store.get(&k).await.unwrap();
            lat.push(t.elapsed().as_nanos() as u64);
            assert!(r.is_some(), "{} is missing", String::from_utf8_lossy(&k));
        }
        lat
    });
    lat.sort_unstable();
    let n = lat.len();
    let mean = lat.iter().sum::<u64>() as f64 / n as f64 / 1e3;
    (mean, lat[n * 99 / 100] as f64 / 1e3, n)
}

fn key(i: u64) -> Vec<u8> {
    format!("20.5000/{i:010}").into_bytes()
}

fn record(i: u64) -> HandleRecord {
    HandleRecord::new(vec![HandleValue::new(1, "URL", format!("https://example.org/objects/{i}"))])
}

fn options(a: &Args) -> EmbeddedOptions {
    EmbeddedOptions { quick_repair: a.quick_repair, ..Default::default() }
}

fn main() {
    let a = args();
    std::fs::create_dir_all(&a.dir).unwrap();
    let file = a.dir.join(handled_store::STORE_FILE_NAME);
    let _ = std::fs::remove_file(&file);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    println!(
        "dir {} keys {} chunk {} quick_repair {} shuffle {}",
        a.dir.display(),
        a.keys,
        a.chunk,
        a.quick_repair,
        a.shuffle
    );

    // 1. fsync rate (measured again before each group-commit run: it varies).
    fsync_rate(&a.dir, a.secs.min(2.0));

    // 2. Import.
    {
        let s = EmbeddedStore::open(&file, options(&a)).unwrap();
        let start = Instant::now();
        // Key numbers in import order: sequential, or a permutation.
        let order: Box<dyn Fn(u64) -> u64> = if a.shuffle {
            // i ↦ i·p mod n with p prime to n: a cheap permutation that scatters.
            let n = a.keys;
            let p = (n / 2..).find(|p| gcd(*p, n) == 1 && p % 2 == 1).unwrap() + 7_919;
            let p = (p..).find(|p| gcd(*p, n) == 1).unwrap();
            Box::new(move |i| ((i as u128 * p as u128) % n as u128) as u64)
        } else {
            Box::new(|i| i)
        };
        rt.block_on(async {
            let mut i = 0;
            while i < a.keys {
                let end = (i + a.chunk as u64).min(a.keys);
                let mut recs: Vec<_> = (i..end).map(|j| (key(order(j)), record(order(j)))).collect();
                recs.sort_by(|x, y| x.0.cmp(&y.0));
                s.put_many(recs).await.unwrap();
                i = end;
            }
        });
        let el = start.elapsed().as_secs_f64();
        let st = s.stats();
        println!(
            "import: {} records in {:.1} s = {:.0} records/s ({} commits); file {:.1} MiB",
            a.keys,
            el,
            a.keys as f64 / el,
            st.commits,
            std::fs::metadata(&file).unwrap().len() as f64 / (1 << 20) as f64
        );
    }

    if a.shuffle {
        let t = Instant::now();
        let (b, af) = EmbeddedStore::compact_file(&file).unwrap();
        println!(
            "compact after import: {:.1} → {:.1} MiB in {:.1} s",
            b as f64 / 1048576.0,
            af as f64 / 1048576.0,
            t.elapsed().as_secs_f64()
        );
    }

    // 3. Clean reopen.
    let start = Instant::now();
    let s = Arc::new(EmbeddedStore::open(&file, options(&a)).unwrap());
    let open = start.elapsed();
    let count = rt.block_on(s.count()).unwrap();
    println!(
        "clean open: {:.2} ms, count {count} (count call incl.: {:.2} ms)",
        open.as_secs_f64() * 1e3,
        start.elapsed().as_secs_f64() * 1e3
    );

    // 4. Point reads.
    {
        let keys = a.keys;
        let secs = a.secs;
        // Single task: latency per get.
        let (mean, p99, n) = point_reads(&rt, &s, keys, secs, key);
        println!("point read, 1 task: {n} gets, mean {mean:.2} µs, p99 {p99:.2} µs → {:.0} gets/s", 1e6 / mean);
        // Two tasks on the two workers: throughput.
        let done = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        rt.block_on(async {
            let mut js = Vec::new();
            for _ in 0..2 {
                let st = Arc::clone(&s);
                let done = done.clone();
                js.push(tokio::spawn(async move {
                    let mut rng = rand::rngs::StdRng::from_rng(&mut rand::rng());
                    let t0 = Instant::now();
                    let mut n = 0;
                    while t0.elapsed() < Duration::from_secs_f64(secs) {
                        for _ in 0..256 {
                            st.get(&key(rng.random_range(0..keys))).await.unwrap();
                        }
                        n += 256;
                    }
                    done.fetch_add(n, Ordering::Relaxed);
                }));
            }
            for j in js {
                j.await.unwrap();
            }
        });
        let el = start.elapsed().as_secs_f64();
        println!("point read, 2 tasks: {:.0} gets/s", done.load(Ordering::Relaxed) as f64 / el);
    }

    // 5. Group-commit throughput.
    for conc in [1usize, 16, 64] {
        fsync_rate(&a.dir, 1.0);
        let before = s.stats();
        let done = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        rt.block_on(async {
            let mut js = Vec::new();
            for t in 0..conc {
                let st = Arc::clone(&s);
                let done = done.clone();
                let secs = a.secs;
                js.push(tokio::spawn(async move {
                    let t0 = Instant::now();
                    let mut i = 0u64;
                    while t0.elapsed() < Duration::from_secs_f64(secs) {
                        let k = format!("20.5001/c{conc}-t{t}-{i}").into_bytes();
                        let out = st.swap(&k, Expect::Absent, Some(record(i))).await.unwrap();
                        assert!(out.is_done());
                        i += 1;
                    }
                    done.fetch_add(i, Ordering::Relaxed);
                }));
            }
            for j in js {
                j.await.unwrap();
            }
        });
        let el = start.elapsed().as_secs_f64();
        let after = s.stats();
        let commits = after.commits - before.commits;
        let ops = after.write_ops - before.write_ops;
        println!(
            "group commit, {conc:>2} tasks: {:.0} swaps/s, {:.0} commits(fsyncs)/s, mean batch {:.1}, mean commit {:.2} ms",
            done.load(Ordering::Relaxed) as f64 / el,
            commits as f64 / el,
            ops as f64 / commits as f64,
            (after.commit_micros - before.commit_micros) as f64 / commits as f64 / 1e3
        );
    }
    let st = s.stats();
    println!("stats: {st:?}");
    drop(s);

    // 6. Reopen after a crash.
    let exe = std::env::current_exe().unwrap();
    let mut cmd = std::process::Command::new(exe);
    if a.quick_repair {
        cmd.arg("--quick-repair");
    }
    let status = cmd.arg("--crash-child").arg(&file).status().unwrap();
    let start = Instant::now();
    let s = EmbeddedStore::open(&file, options(&a)).unwrap();
    println!(
        "open after crash ({status}): {:.1} ms, repaired {}, count {}",
        start.elapsed().as_secs_f64() * 1e3,
        s.was_repaired(),
        rt.block_on(s.count()).unwrap()
    );
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Plain write + fsync loops on a file in `dir` (redb commits with one fdatasync).
fn fsync_rate(dir: &Path, secs: f64) {
    let p = dir.join("fsync-test");
    let mut f = std::fs::File::create(&p).unwrap();
    let buf = vec![7u8; 4096];
    let mut line = String::from("fsync loop:");
    for data_only in [false, true] {
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < Duration::from_secs_f64(secs / 2.0) {
            f.write_all(&buf).unwrap();
            if data_only {
                f.sync_data().unwrap();
            } else {
                f.sync_all().unwrap();
            }
            n += 1;
        }
        let el = start.elapsed().as_secs_f64();
        let name = if data_only { "fdatasync" } else { "fsync" };
        line += &format!(" {name} {:.0}/s ({:.2} ms);", n as f64 / el, el * 1e3 / n as f64);
    }
    println!("{line}");
    drop(f);
    std::fs::remove_file(&p).unwrap();
}

/// Open, write a little, and die without closing.
fn crash_child(file: &Path, quick_repair: bool) -> ! {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let s = EmbeddedStore::open(file, EmbeddedOptions { quick_repair, ..Default::default() }).unwrap();
    rt.block_on(async {
        for i in 0..10 {
            s.swap(format!("20.5002/{i}").as_bytes(), Expect::Any, Some(record(i))).await.unwrap();
        }
    });
    std::process::abort();
}
