//! The embedded store's read path against the candidates of issue 45, on the
//! same records (`TEST/<k>`, k in 0..N, a URL and an EMAIL value each, as
//! `scripts/bench_capacity.py` imports them), one thread, uniform keys:
//!
//! * `redb`: `EmbeddedStore::get` as the server calls it (64 MiB page cache
//!   unless `--cache-mb`), the records loaded in key order through `put_many`;
//! * `lmdb`: the same stored values (`crc32 ‖ record`) in an LMDB B+tree (heed),
//!   read through its `mmap` in a read transaction per get;
//! * `hash`: Bitcask's layout: the values appended to one file read through
//!   `mmap`, a hash of every key in memory pointing at its value.
//!
//! Each get also checks the checksum and decodes the record, as the store does.
//! Warm: the files read once in order (as the store's warm-up does), a warm-up
//! pass of gets, then a timed one, candidates alternating over
//! `--rounds`. Cold: each file dropped from the OS page cache
//! (`posix_fadvise(DONTNEED)`) and reopened, then the first `--cold-secs` timed.
//!
//! `cargo run --release -p handled-store --example read_path_bench -- DIR N
//! [--secs S] [--rounds R] [--cold-secs S] [--cache-mb M] [--no-cold]`; with
//! `--warm-up`, only the store's own warm-up after a cold start (its time, then
//! `--cold-secs` of gets).
//! (DIR is created and left for reruns: delete it afterwards.)

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use handled_store::{EmbeddedOptions, EmbeddedStore, HandleRecord, RecordStore, StoreAdmin};
use heed::types::Bytes;
use heed::{CommitOrAbort, EnvFlags, EnvOpenOptions, PutFlags, WithoutTls};

mod bench_fixtures;
use bench_fixtures::{bytes_on_disk, drop_cached, key, key_order, put_in_key_order, record, time_gets, BenchArgs};

/// The embedded store's stored value: `crc32(key ‖ payload) LE ‖ payload`.
fn sealed(key: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut h = crc32fast::Hasher::new();
    h.update(key);
    h.update(payload);
    let mut out = h.finalize().to_le_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

fn unseal_decode(key: &[u8], stored: &[u8]) -> HandleRecord {
    let (sum, payload) = stored.split_at(4);
    let mut h = crc32fast::Hasher::new();
    h.update(key);
    h.update(payload);
    assert_eq!(h.finalize().to_le_bytes(), sum, "checksum");
    HandleRecord::decode(payload).expect("record")
}

fn siphash(key: &[u8]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    h.write(key);
    h.finish()
}

/// The keys of the hash index are hashes already.
#[derive(Default)]
struct Identity(u64);
impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("u64 keys only")
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}
type Index = HashMap<u64, u64, BuildHasherDefault<Identity>>;

/// Read `p` (a file, or the files of a directory) once in order, as the store's
/// warm-up does: the OS page cache then holds it, as far as memory allows.
fn preread(p: &Path) {
    use std::io::Read;
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            preread(&e.unwrap().path());
        }
        return;
    }
    let t = Instant::now();
    let mut f = std::fs::File::open(p).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0usize;
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        total += n;
    }
    let el = t.elapsed().as_secs_f64();
    println!("read {} in order: {} MiB in {el:.2} s", p.display(), total >> 20);
}

fn load_redb(file: &Path, n: u64) {
    let s = EmbeddedStore::open(file, EmbeddedOptions::default()).unwrap();
    let t = Instant::now();
    put_in_key_order(&s, n);
    drop(s);
    println!("load redb: {n} in {:.1} s, {} B/handle", t.elapsed().as_secs_f64(), bytes_on_disk(file) / n);
}

fn open_lmdb(dir: &Path, n: u64) -> heed::Env<WithoutTls> {
    std::fs::create_dir_all(dir).unwrap();
    let mut o = EnvOpenOptions::new().read_txn_without_tls();
    o.map_size(((n as usize) * 1024).max(1 << 30)).max_dbs(2);
    // SAFETY: one process opens this environment, and its files are not edited outside LMDB.
    unsafe { o.flags(EnvFlags::NO_READ_AHEAD).open(dir) }.unwrap()
}

fn lmdb_handles(env: &heed::Env<WithoutTls>) -> heed::Database<'_, Bytes, Bytes> {
    let w = env.write_txn().unwrap();
    env.create_databases_and_commit(w, |wdo, w| {
        wdo.create_database::<Bytes, Bytes>(w, Some("handles")).map(CommitOrAbort::<_, ()>::Commit)
    })
    .unwrap()
    .unwrap_commit()
}

fn load_lmdb(dir: &Path, n: u64) {
    let env = open_lmdb(dir, n);
    let db = lmdb_handles(&env);
    let t = Instant::now();
    let mut order = key_order(n).peekable();
    while order.peek().is_some() {
        let mut w = env.write_txn().unwrap();
        for k in order.by_ref().take(100_000) {
            let kb = key(k);
            db.put_with_flags(&mut w, PutFlags::APPEND, &kb, &sealed(&kb, &record(k).encode())).unwrap();
        }
        w.commit().unwrap();
    }
    println!("load lmdb: {n} in {:.1} s, {} B/handle", t.elapsed().as_secs_f64(), bytes_on_disk(dir) / n);
}

/// The log file: `u32 key length ‖ u32 value length ‖ key ‖ value`, appended.
fn load_hash(file: &Path, n: u64) {
    let t = Instant::now();
    let mut out = BufWriter::new(std::fs::File::create(file).unwrap());
    for k in 0..n {
        let kb = key(k);
        let v = sealed(&kb, &record(k).encode());
        out.write_all(&(kb.len() as u32).to_le_bytes()).unwrap();
        out.write_all(&(v.len() as u32).to_le_bytes()).unwrap();
        out.write_all(&kb).unwrap();
        out.write_all(&v).unwrap();
    }
    out.into_inner().unwrap().sync_all().unwrap();
    println!("load hash log: {n} in {:.1} s, {} B/handle", t.elapsed().as_secs_f64(), bytes_on_disk(file) / n);
}

/// The in-memory index of a log (a Bitcask start without a hint file: one sequential read).
fn index_hash(file: &Path, n: u64) -> (memmap2::Mmap, Index) {
    let t = Instant::now();
    let f = std::fs::File::open(file).unwrap();
    // SAFETY: the file is not changed while mapped (this program wrote it and is done).
    let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
    let mut index = Index::with_capacity_and_hasher(n as usize, Default::default());
    let mut at = 0usize;
    while at < map.len() {
        let kl = u32::from_le_bytes(map[at..at + 4].try_into().unwrap()) as usize;
        let vl = u32::from_le_bytes(map[at + 4..at + 8].try_into().unwrap()) as usize;
        index.insert(siphash(&map[at + 8..at + 8 + kl]), at as u64);
        at += 8 + kl + vl;
    }
    let mem = index.capacity() * 17;
    println!(
        "hash index: {} keys in {:.2} s, ~{} MB ({} B/handle) in memory",
        index.len(),
        t.elapsed().as_secs_f64(),
        mem >> 20,
        mem as u64 / n
    );
    (map, index)
}

fn hash_get(map: &[u8], index: &Index, k: &[u8]) -> Option<HandleRecord> {
    let at = *index.get(&siphash(k))? as usize;
    let kl = u32::from_le_bytes(map[at..at + 4].try_into().unwrap()) as usize;
    let vl = u32::from_le_bytes(map[at + 4..at + 8].try_into().unwrap()) as usize;
    let kb = &map[at + 8..at + 8 + kl];
    (kb == k).then(|| unseal_decode(k, &map[at + 8 + kl..at + 8 + kl + vl]))
}

fn report(what: &str, n: u64, (mean, p50, p99, p999, gets): (f64, f64, f64, f64, usize)) {
    println!(
        "{{\"candidate\": \"{what}\", \"keys\": {n}, \"gets\": {gets}, \"mean_us\": {mean:.3}, \"p50_us\": {p50:.3}, \
         \"p99_us\": {p99:.3}, \"p999_us\": {p999:.3}}}"
    );
}

/// Before a phase on a candidate's files `p`: out of the page cache when
/// cold, read into it when warm.
fn cold_or_warm(phase: &str, p: &Path) {
    if phase == "cold" {
        drop_cached(p);
    } else {
        preread(p);
    }
}

/// `t` seconds of gets reported as `what`; when warm, a quarter of that
/// first, not reported.
fn measure(what: &str, warm: bool, n: u64, t: f64, mut get: impl FnMut(&[u8]) -> bool) {
    if warm {
        time_gets(n, t / 4.0, &mut get);
    }
    report(what, n, time_gets(n, t, &mut get));
}

fn main() {
    let args = BenchArgs::from_env();
    let (dir, n) = (&args.dir, args.n);
    let (secs, rounds, cold_secs) = args.timing();
    let cache_mb = args.flag("--cache-mb", 64.0) as usize;
    let (redb_file, lmdb_dir, log_file) = (dir.join("handles.redb"), dir.join("lmdb"), dir.join("handles.log"));
    if !redb_file.exists() {
        load_redb(&redb_file, n);
    }
    if !lmdb_dir.join("data.mdb").exists() {
        load_lmdb(&lmdb_dir, n);
    }
    if !log_file.exists() {
        load_hash(&log_file, n);
    }
    println!(
        "on disk: redb {} B/handle, lmdb {} B/handle, hash log {} B/handle",
        bytes_on_disk(&redb_file) / n,
        bytes_on_disk(&lmdb_dir) / n,
        bytes_on_disk(&log_file) / n
    );

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let redb_opts = EmbeddedOptions { cache_bytes: Some(cache_mb << 20), ..Default::default() };
    if args.switch("--warm-up") {
        // The store's warm-up after a cold start: how long, and the gets after it.
        drop_cached(&redb_file);
        let t = Instant::now();
        let store = EmbeddedStore::open(&redb_file, redb_opts.clone()).unwrap();
        while store.warming().is_some() {
            std::thread::sleep(Duration::from_millis(10));
        }
        println!("redb cold open + warm-up: {:.2} s", t.elapsed().as_secs_f64());
        let mut get = |k: &[u8]| rt.block_on(store.get(k)).unwrap().is_some();
        report(&format!("redb-{cache_mb}MiB-after-warm-up"), n, time_gets(n, cold_secs, &mut get));
        return;
    }
    let phases: &[&str] = if args.switch("--no-cold") { &["warm"] } else { &["cold", "warm"] };
    for &phase in phases {
        for round in 0..if phase == "cold" { 1 } else { rounds } {
            let (t, label) = if phase == "cold" { (cold_secs, "cold") } else { (secs, "warm") };
            // redb, through the store.
            cold_or_warm(phase, &redb_file);
            // Cold is without the store's own warm-up (timed apart below).
            let opts = EmbeddedOptions { warm_on_open: phase == "warm", ..redb_opts.clone() };
            let store = EmbeddedStore::open(&redb_file, opts).unwrap();
            let get = |k: &[u8]| rt.block_on(store.get(k)).unwrap().is_some();
            measure(&format!("redb-{cache_mb}MiB-{label}-{round}"), phase == "warm", n, t, get);
            drop(store);
            // LMDB.
            cold_or_warm(phase, &lmdb_dir);
            let env = open_lmdb(&lmdb_dir, n);
            let db = lmdb_handles(&env);
            let get = |k: &[u8]| {
                let r = env.read_txn().unwrap();
                db.get(&r, k).unwrap().map(|v| unseal_decode(k, v)).is_some()
            };
            measure(&format!("lmdb-{label}-{round}"), phase == "warm", n, t, get);
            drop(env);
            // Hash index over the log.
            cold_or_warm(phase, &log_file);
            let (map, index) = index_hash(&log_file, n);
            let get = |k: &[u8]| hash_get(&map, &index, k).is_some();
            measure(&format!("hash-{label}-{round}"), phase == "warm", n, t, get);
        }
    }
}
