//! Warming the store file into the OS page cache after open.
//!
//! A lookup in a store file the OS has dropped from its page cache (after a
//! reboot, a restore, another program's memory use) waits on a random disk read:
//! issue 45 measured uniform resolution over 5M handles at 7% of its warm rate
//! until random reads had warmed the file, and one sequential read of it (3.2 s
//! for 2.4 GB) brought it back. So a thread reads the file once, in order, in
//! 1 MiB steps, up to half the memory the OS says is available (more would only
//! push out what it read first), and reports how far it got: until it is done the
//! store is not yet serving at speed, which readiness says.
//!
//! Warming is only an optimization: a read error ends it (logged), never the store.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;

use crate::Warming;

/// Bytes read per step (one buffer, reused).
const STEP: usize = 1 << 20;

/// A running (or finished) warm-up of one file.
pub(super) struct Warmer {
    state: Arc<State>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct State {
    read: AtomicU64,
    total: u64,
    done: AtomicBool,
    stop: AtomicBool,
}

impl Warmer {
    /// Start reading the first `min(length, budget)` bytes of `paths`, one file
    /// after the other (budget `None`: half the available memory), on a thread
    /// of its own.
    pub(super) fn start(paths: &[PathBuf], budget: Option<u64>) -> Warmer {
        let len = paths.iter().map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)).sum::<u64>();
        let budget = budget.or_else(|| available_memory().map(|m| m / 2)).unwrap_or(u64::MAX);
        let state = Arc::new(State {
            read: AtomicU64::new(0),
            total: len.min(budget),
            done: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let thread = {
            let state = state.clone();
            let paths = paths.to_vec();
            std::thread::Builder::new().name("store-warm".into()).spawn(move || warm(&paths, &state))
        };
        let thread = match thread {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!("store warm-up not started: {e}");
                state.done.store(true, Ordering::Release);
                None
            }
        };
        Warmer { state, thread: Mutex::new(thread) }
    }

    /// A warmer that has nothing to do (warming turned off).
    pub(super) fn done() -> Warmer {
        let state =
            State { read: AtomicU64::new(0), total: 0, done: AtomicBool::new(true), stop: AtomicBool::new(false) };
        Warmer { state: Arc::new(state), thread: Mutex::new(None) }
    }

    /// How far it got, while it runs; `None` once it is done (or gave up).
    pub(super) fn progress(&self) -> Option<Warming> {
        if self.state.done.load(Ordering::Acquire) {
            return None;
        }
        Some(Warming { read_bytes: self.state.read.load(Ordering::Relaxed), total_bytes: self.state.total })
    }

    /// Stop reading (at the next step) and wait for the thread.
    pub(super) fn stop(&self) {
        self.state.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

impl Drop for Warmer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn warm(paths: &[PathBuf], state: &State) {
    let started = std::time::Instant::now();
    let mut outcome = Ok(());
    let mut path = Path::new("");
    for p in paths {
        path = p;
        outcome = read_in_order(p, state);
        if outcome.is_err() || state.read.load(Ordering::Relaxed) >= state.total {
            break;
        }
    }
    state.done.store(true, Ordering::Release);
    let read = state.read.load(Ordering::Relaxed);
    match outcome {
        Ok(()) if read > 0 => tracing::info!(
            path = %path.display(),
            "store file warmed: {} MiB in {:.1} s",
            read >> 20,
            started.elapsed().as_secs_f64()
        ),
        Ok(()) => {}
        Err(e) => tracing::warn!(path = %path.display(), "store warm-up ended after {} MiB: {e}", read >> 20),
    }
}

/// Read `path` in order, counting into `state.read` (what earlier files read
/// included) until `state.total`.
fn read_in_order(path: &Path, state: &State) -> std::io::Result<()> {
    let file = File::open(path)?;
    let mut buf = vec![0u8; STEP];
    let mut at = 0u64;
    let mut read = state.read.load(Ordering::Relaxed);
    while read < state.total && !state.stop.load(Ordering::Acquire) {
        let want = (state.total - read).min(STEP as u64) as usize;
        let n = file.read_at(&mut buf[..want], at)?;
        if n == 0 {
            break; // The file shrank (compacted or replaced): nothing more to read.
        }
        at += n as u64;
        read += n as u64;
        state.read.store(read, Ordering::Relaxed);
    }
    Ok(())
}

/// `MemAvailable` of /proc/meminfo, in bytes (None where there is none).
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    fn file_of(len: usize) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; len]).unwrap();
        (dir, path)
    }

    fn wait_done(w: &Warmer) {
        let start = Instant::now();
        while w.progress().is_some() {
            assert!(start.elapsed() < Duration::from_secs(30), "warm-up did not finish");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn reads_the_whole_file_then_reports_done() {
        let (_dir, path) = file_of(3 * STEP + 17);
        let w = Warmer::start(std::slice::from_ref(&path), None);
        wait_done(&w);
        assert_eq!(w.state.read.load(Ordering::Relaxed), 3 * STEP as u64 + 17);
    }

    #[test]
    fn stops_at_the_budget() {
        let (_dir, path) = file_of(3 * STEP);
        let w = Warmer::start(std::slice::from_ref(&path), Some(STEP as u64 + 1));
        wait_done(&w);
        assert_eq!(w.state.read.load(Ordering::Relaxed), STEP as u64 + 1);
    }

    #[test]
    fn a_missing_file_is_done_at_once_and_stop_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let w = Warmer::start(&[dir.path().join("none")], None);
        wait_done(&w);
        w.stop();
        w.stop();
        assert!(Warmer::done().progress().is_none());
    }

    #[test]
    fn progress_never_passes_the_total() {
        let (_dir, path) = file_of(2 * STEP);
        let w = Warmer::start(std::slice::from_ref(&path), None);
        while let Some(p) = w.progress() {
            assert!(p.read_bytes <= p.total_bytes);
        }
        w.stop();
    }

    #[test]
    fn meminfo_parses_here() {
        assert!(available_memory().is_some_and(|m| m > 0));
    }
}
