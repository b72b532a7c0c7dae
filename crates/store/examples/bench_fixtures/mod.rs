//! What the store's read-path examples share (`keydir_bench`, `keydir_growth`,
//! `read_path_bench`): the records and keys they load, the order a bulk load
//! writes them in, dropping a file from the OS page cache, timing uniform gets,
//! the disk space a file takes, and their arguments.
// Each example uses a part of it.
#![allow(dead_code)]

use handled_proto::HandleValue;
use handled_store::{EmbeddedStore, HandleRecord, RecordStore};
use rand::Rng;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The arguments both take: `DIR N` (created; N keys), then `--NAME VALUE`
/// flags and bare switches.
pub struct BenchArgs {
    pub dir: PathBuf,
    pub n: u64,
    argv: Vec<String>,
}

impl BenchArgs {
    pub fn from_env() -> BenchArgs {
        let argv: Vec<String> = std::env::args().skip(1).collect();
        let (dir, n) = (PathBuf::from(&argv[0]), argv[1].parse().unwrap());
        std::fs::create_dir_all(&dir).unwrap();
        BenchArgs { dir, n, argv }
    }

    /// The number after `name`, or `default`.
    pub fn flag(&self, name: &str, default: f64) -> f64 {
        let at = self.argv.iter().position(|x| x == name);
        at.and_then(|i| self.argv.get(i + 1)?.parse::<f64>().ok()).unwrap_or(default)
    }

    pub fn switch(&self, name: &str) -> bool {
        self.argv.iter().any(|a| a == name)
    }

    /// Seconds of gets per phase, rounds of phases, and seconds of cold gets.
    pub fn timing(&self) -> (f64, usize, f64) {
        (self.flag("--secs", 4.0), self.flag("--rounds", 2.0) as usize, self.flag("--cold-secs", 2.0))
    }
}

/// The disk space `p` (a file, or the files of a directory) takes; 0 if it
/// does not exist.
pub fn bytes_on_disk(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::metadata(p) else { return 0 };
    if m.is_dir() {
        std::fs::read_dir(p).unwrap().map(|e| bytes_on_disk(&e.unwrap().path())).sum()
    } else {
        m.blocks() * 512
    }
}

pub fn record(k: u64) -> HandleRecord {
    HandleRecord::new(vec![
        HandleValue::new(1, "URL", format!("https://example.org/objects/{k}")),
        HandleValue::new(2, "EMAIL", format!("owner{}@example.org", k % 977)),
    ])
}

pub fn key(k: u64) -> Vec<u8> {
    format!("TEST/{k}").into_bytes()
}

/// 0..n in the byte order of their keys (a preorder walk of the decimal digit trie).
pub fn key_order(n: u64) -> impl Iterator<Item = u64> {
    let mut cur = 1u64;
    let rest = (1..n).map(move |_| {
        let out = cur;
        if cur * 10 < n {
            cur *= 10;
        } else {
            while cur % 10 == 9 || cur + 1 >= n {
                cur /= 10;
            }
            cur += 1;
        }
        out
    });
    std::iter::once(0).take(n.min(1) as usize).chain(rest)
}

pub fn drop_cached(p: &Path) {
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            drop_cached(&e.unwrap().path());
        }
        return;
    }
    let f = std::fs::File::open(p).unwrap();
    // SAFETY: a plain advice call on an open descriptor.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

/// Uniform gets for `secs`: (mean, p50, p99, p99.9 µs, gets).
pub fn time_gets(n: u64, secs: f64, mut get: impl FnMut(&[u8]) -> bool) -> (f64, f64, f64, f64, usize) {
    let mut rng = rand::rng();
    let mut lat = Vec::with_capacity(1 << 20);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs_f64(secs) && lat.len() < 10_000_000 {
        let k = key(rng.random_range(0..n));
        let t = Instant::now();
        let found = get(&k);
        lat.push(t.elapsed().as_nanos() as u64);
        assert!(found, "{} missing", String::from_utf8_lossy(&k));
    }
    lat.sort_unstable();
    let c = lat.len();
    let at = |q: usize| lat[c * q / 1000] as f64 / 1e3;
    (lat.iter().sum::<u64>() as f64 / c as f64 / 1e3, at(500), at(990), at(999), c)
}

/// Write `record(k)` for 0..n into `store` in key order, 10,000 a batch, as an import does.
pub fn put_in_key_order(store: &EmbeddedStore, n: u64) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut order = key_order(n).peekable();
    rt.block_on(async {
        while order.peek().is_some() {
            let chunk: Vec<_> = order.by_ref().take(10_000).map(|k| (key(k), record(k))).collect();
            store.put_many(chunk).await.unwrap();
        }
    });
}
