//! The embedded store with and without its key directory (issue 45,
//! `EmbeddedOptions::key_directory`), on the records of `read_path_bench`
//! (`TEST/<k>`, a URL and an EMAIL value), one thread, uniform keys, through
//! `EmbeddedStore::get` as the server calls it (64 MiB redb cache):
//!
//! * the import (`put_many` chunks of 10,000 in key order) with the directory,
//!   and with `--compare-import` the same into a second store without it;
//! * bytes per handle on disk (redb file, segments), the directory's memory;
//! * per round: open with the directory (written from redb if the store was
//!   last checkpointed without it: "first"), two restarts timed (from the hint
//!   file the close wrote; without it, reading the segments), warm gets; then the same store opened
//!   without the directory (redb's B-tree, the file read once first; that open
//!   first moves every record the directory holds back into redb, and is timed
//!   with it), warm gets;
//! * at the end a cold restart: segments and redb file dropped from the page
//!   cache, open timed, then `--cold-secs` of gets.
//!
//! `cargo run --release -p handled-store --example keydir_bench -- DIR N
//! [--secs S] [--rounds R] [--cold-secs S] [--compare-import] [--keydir-only]`
//! (DIR is created and left for reruns: delete it afterwards; `--keydir-only`
//! skips the redb-only gets, which leave the records in redb and the directory
//! to be written again by the next open).

use std::path::Path;
use std::time::Instant;

use handled_store::{EmbeddedOptions, EmbeddedStore, RecordStore};

mod bench_fixtures;
use bench_fixtures::{bytes_on_disk, drop_cached, put_in_key_order, time_gets, BenchArgs};

fn preread(p: &Path) {
    let _ = std::fs::read(p).map(|b| std::hint::black_box(b.len()));
}

/// A `name: N kB` line of a /proc file, in MB.
fn proc_mb(file: &str, name: &str) -> u64 {
    let s = std::fs::read_to_string(file).unwrap_or_default();
    let line = s.lines().find(|l| l.starts_with(name));
    line.and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()).map_or(0, |kb| kb / 1024)
}

/// (VmRSS, RssAnon, of it on transparent huge pages) in MB.
fn rss() -> (u64, u64, u64) {
    let status = |name| proc_mb("/proc/self/status", name);
    (status("VmRSS:"), status("RssAnon:"), proc_mb("/proc/self/smaps_rollup", "AnonHugePages:"))
}

fn options(key_directory: bool, warm: bool) -> EmbeddedOptions {
    EmbeddedOptions { cache_bytes: Some(64 << 20), key_directory, warm_on_open: warm, ..Default::default() }
}

fn load(file: &Path, n: u64, key_directory: bool) -> f64 {
    let s = EmbeddedStore::open(file, options(key_directory, false)).unwrap();
    let t = Instant::now();
    put_in_key_order(&s, n);
    drop(s);
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{{\"import\": \"{}\", \"keys\": {n}, \"secs\": {secs:.2}, \"per_sec\": {:.0}}}",
        if key_directory { "keydir" } else { "redb" },
        n as f64 / secs
    );
    secs
}

fn report(what: &str, n: u64, (mean, p50, p99, p999, gets): (f64, f64, f64, f64, usize)) {
    let (rss, anon, huge) = rss();
    println!(
        "{{\"candidate\": \"{what}\", \"keys\": {n}, \"gets\": {gets}, \"mean_us\": {mean:.3}, \"p50_us\": {p50:.3}, \
         \"p99_us\": {p99:.3}, \"p999_us\": {p999:.3}, \"rss_mb\": {rss}, \"rss_anon_mb\": {anon}, \"anon_huge_mb\": {huge}, \"file_pmd_mb\": {}}}", proc_mb("/proc/self/smaps_rollup", "FilePmdMapped:")
    );
}

fn timed_open(file: &Path, opts: EmbeddedOptions, what: &str) -> EmbeddedStore {
    let t = Instant::now();
    let s = EmbeddedStore::open(file, opts).unwrap();
    println!("{{\"open\": \"{what}\", \"secs\": {:.3}}}", t.elapsed().as_secs_f64());
    s
}

fn main() {
    let args = BenchArgs::from_env();
    let (dir, n) = (&args.dir, args.n);
    let (secs, rounds, cold_secs) = args.timing();
    let file = dir.join("handles.redb");
    let segs = dir.join("handles.redb.keydir");
    if !file.exists() {
        load(&file, n, true);
    }
    if args.switch("--compare-import") {
        let other = dir.join("redb-only");
        std::fs::create_dir_all(&other).unwrap();
        load(&other.join("handles.redb"), n, false);
        std::fs::remove_dir_all(&other).unwrap();
    }
    println!(
        "{{\"on_disk\": {n}, \"redb_b_per_handle\": {}, \"segments_b_per_handle\": {}}}",
        bytes_on_disk(&file) / n,
        bytes_on_disk(&segs) / n
    );
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    for round in 0..rounds {
        // Written from redb if the last round's redb-only store left it stale.
        drop(timed_open(&file, options(true, false), &format!("keydir-first-{round}")));
        preread(&file);
        // A clean restart, from the hint file the close wrote ...
        drop(timed_open(&file, options(true, false), &format!("keydir-restart-hint-{round}")));
        // ... and one that reads the segments instead (after a crash, or a stale hint).
        let _ = std::fs::remove_file(segs.join("hint"));
        let (rss0, anon0, _) = rss();
        let store = timed_open(&file, options(true, false), &format!("keydir-restart-nohint-{round}"));
        let (rss1, anon1, _) = rss();
        let st = store.key_directory_stats().unwrap();
        println!(
            "{{\"keydir\": {n}, \"keys\": {}, \"memory_b_per_handle\": {:.1}, \"segment_bytes\": {}, \"live_bytes\": {}, \
             \"rss_open_delta_mb\": {}, \"anon_open_delta_mb\": {}}}",
            st.keys,
            st.memory_bytes as f64 / n as f64,
            st.segment_bytes,
            st.live_bytes,
            rss1.saturating_sub(rss0),
            anon1.saturating_sub(anon0)
        );
        let mut get = |k: &[u8]| rt.block_on(store.get(k)).unwrap().is_some();
        time_gets(n, secs / 4.0, &mut get);
        report(&format!("keydir-warm-{round}"), n, time_gets(n, secs, &mut get));
        drop(store);
        if args.switch("--keydir-only") {
            continue;
        }

        preread(&file);
        let store = timed_open(&file, options(false, false), &format!("redb-{round}"));
        let mut get = |k: &[u8]| rt.block_on(store.get(k)).unwrap().is_some();
        time_gets(n, secs / 4.0, &mut get);
        report(&format!("redb-warm-{round}"), n, time_gets(n, secs, &mut get));
        drop(store);
    }
    if cold_secs > 0.0 {
        // The last redb-only round left the directory stale: write it, then restart cold.
        drop(timed_open(&file, options(true, false), "keydir-first-cold"));
        drop_cached(&file);
        drop_cached(&segs);
        let _ = std::fs::remove_file(segs.join("hint"));
        let store = timed_open(&file, options(true, false), "keydir-restart-cold-nohint");
        let mut get = |k: &[u8]| rt.block_on(store.get(k)).unwrap().is_some();
        report("keydir-after-cold-restart", n, time_gets(n, cold_secs, &mut get));
    }
}
