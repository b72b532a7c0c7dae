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
//! Two refinements make a restart's warm-up cost what the page cache lacks:
//! a step whose pages the OS already holds (`mincore` on a read-only map of the
//! file) is not read again, so a restart with the files cached is not held up
//! copying every byte of them (4.9–5.1 s to ready at 10M handles before); and
//! readiness waits only for the files lookups read (the key directory's
//! segments, when there is one), the rest (the store file, which then serves
//! writes' reads) warming on behind it.
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
    /// The bytes of the files lookups read, the first of `total`: readiness waits for these.
    serving: u64,
    done: AtomicBool,
    stop: AtomicBool,
}

impl Warmer {
    /// Start reading the first `min(length, budget)` bytes of `paths`, one file
    /// after the other (budget `None`: half the available memory), on a thread
    /// of its own. The first `serving` files are those lookups read.
    pub(super) fn start(paths: &[PathBuf], serving: usize, budget: Option<u64>) -> Warmer {
        let lens: Vec<u64> = paths.iter().map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)).collect();
        let budget = budget.or_else(|| available_memory().map(|m| m / 2)).unwrap_or(u64::MAX);
        let total = lens.iter().sum::<u64>().min(budget);
        let state = Arc::new(State {
            read: AtomicU64::new(0),
            total,
            serving: lens.iter().take(serving).sum::<u64>().min(total),
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
        let state = State {
            read: AtomicU64::new(0),
            total: 0,
            serving: 0,
            done: AtomicBool::new(true),
            stop: AtomicBool::new(false),
        };
        Warmer { state: Arc::new(state), thread: Mutex::new(None) }
    }

    /// How far it got through the files lookups read; `None` once they are
    /// warm (or it gave up), the others perhaps still warming.
    pub(super) fn progress(&self) -> Option<Warming> {
        let read = self.state.read.load(Ordering::Relaxed);
        if self.state.done.load(Ordering::Acquire) || read >= self.state.serving {
            return None;
        }
        Some(Warming { read_bytes: read, total_bytes: self.state.serving })
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
    let mut yielded = false;
    for p in paths {
        path = p;
        if !yielded && state.read.load(Ordering::Relaxed) >= state.serving {
            yield_to_serving();
            yielded = true;
        }
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

/// Past the files lookups read, the rest (the store file) serves writes'
/// reads only: from then on this thread yields the CPU and the disk to the
/// server's (the lowest nice value and the idle I/O class, this thread alone).
/// Measured at 30M handles on a 2-core VM, `serve` pinned to one CPU: rounds
/// that warmed the store file beside their lookups were the slowest
/// (BENCHMARKS.md, issue 45). Advisory: where refused, warming goes on as before.
fn yield_to_serving() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain system calls on this thread's own id.
        let tid = unsafe { libc::gettid() };
        // On Linux a thread id given to PRIO_PROCESS names that thread alone.
        // SAFETY: as above.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19) };
        const IOPRIO_WHO_PROCESS: libc::c_long = 1;
        const IOPRIO_CLASS_IDLE: libc::c_long = 3;
        // SAFETY: as above; ioprio_set has no libc wrapper.
        unsafe {
            libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, libc::c_long::from(tid), IOPRIO_CLASS_IDLE << 13)
        };
    }
}

/// Read `path` in order, counting into `state.read` (what earlier files read
/// included) until `state.total`; a step the page cache holds already is counted, not read.
fn read_in_order(path: &Path, state: &State) -> std::io::Result<()> {
    let file = File::open(path)?;
    let mut cached = Residency::of(&file);
    let mut buf = vec![0u8; STEP];
    let mut at = 0u64;
    let mut read = state.read.load(Ordering::Relaxed);
    while read < state.total && !state.stop.load(Ordering::Acquire) {
        let want = (state.total - read).min(STEP as u64) as usize;
        let n =
            if cached.as_mut().is_some_and(|c| c.holds(at, want)) { want } else { file.read_at(&mut buf[..want], at)? };
        if n == 0 {
            break; // The file shrank (compacted or replaced): nothing more to read.
        }
        at += n as u64;
        read += n as u64;
        state.read.store(read, Ordering::Relaxed);
    }
    Ok(())
}

/// Which of a file's pages the OS page cache holds: `mincore` on a read-only
/// map of it, which asks the kernel without touching (or faulting in) a page.
struct Residency {
    map: memmap2::Mmap,
    page: usize,
    flags: Vec<u8>,
}

impl Residency {
    fn of(file: &File) -> Option<Residency> {
        // SAFETY: the map is never read through, only handed to mincore, so a
        // file changed or truncated under it cannot fault this process.
        let map = unsafe { memmap2::MmapOptions::new().map(file) }.ok()?;
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok().filter(|p| *p > 0)?;
        Some(Residency { map, page, flags: vec![0; STEP.div_ceil(page)] })
    }

    /// Whether every page of `len` bytes at `at` (a multiple of the page
    /// size, within the file as mapped) is in the page cache; false when unsure.
    fn holds(&mut self, at: u64, len: usize) -> bool {
        let Ok(at) = usize::try_from(at) else { return false };
        if len == 0 || len > STEP || at % self.page != 0 || at.saturating_add(len) > self.map.len() {
            return false;
        }
        let pages = len.div_ceil(self.page);
        // SAFETY: the range lies within the live map and is page-aligned;
        // `flags` has room for one byte per page of it.
        let rc = unsafe { libc::mincore(self.map.as_ptr().add(at) as *mut libc::c_void, len, self.flags.as_mut_ptr()) };
        rc == 0 && self.flags[..pages].iter().all(|f| f & 1 == 1)
    }
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

    /// Until every file is read (readiness may come earlier: `progress`).
    fn wait_done(w: &Warmer) {
        let start = Instant::now();
        while !w.state.done.load(Ordering::Acquire) {
            assert!(start.elapsed() < Duration::from_secs(30), "warm-up did not finish");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn reads_the_whole_file_then_reports_done() {
        let (_dir, path) = file_of(3 * STEP + 17);
        let w = Warmer::start(std::slice::from_ref(&path), 1, None);
        wait_done(&w);
        assert_eq!(w.state.read.load(Ordering::Relaxed), 3 * STEP as u64 + 17);
    }

    #[test]
    fn stops_at_the_budget() {
        let (_dir, path) = file_of(3 * STEP);
        let w = Warmer::start(std::slice::from_ref(&path), 1, Some(STEP as u64 + 1));
        wait_done(&w);
        assert_eq!(w.state.read.load(Ordering::Relaxed), STEP as u64 + 1);
    }

    #[test]
    fn a_missing_file_is_done_at_once_and_stop_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let w = Warmer::start(&[dir.path().join("none")], 1, None);
        wait_done(&w);
        w.stop();
        w.stop();
        assert!(Warmer::done().progress().is_none());
    }

    #[test]
    fn progress_never_passes_the_total() {
        let (_dir, path) = file_of(2 * STEP);
        let w = Warmer::start(std::slice::from_ref(&path), 1, None);
        while let Some(p) = w.progress() {
            assert!(p.read_bytes <= p.total_bytes);
        }
        w.stop();
    }

    #[test]
    fn readiness_waits_for_the_files_lookups_read_only() {
        let warmer = |read: u64, done: bool| Warmer {
            state: Arc::new(State {
                read: AtomicU64::new(read),
                total: 300,
                serving: 100,
                done: AtomicBool::new(done),
                stop: AtomicBool::new(false),
            }),
            thread: Mutex::new(None),
        };
        let p = warmer(99, false).progress().expect("the lookups' files not yet read");
        assert_eq!((p.read_bytes, p.total_bytes), (99, 100));
        assert!(warmer(100, false).progress().is_none(), "the store file warms on behind readiness");
        assert!(warmer(0, true).progress().is_none());
        // Two files, the first serving: done reading both, the budget counted across them.
        let (_dir, path) = file_of(STEP + 5);
        let w = Warmer::start(&[path.clone(), path], 1, None);
        wait_done(&w);
        assert_eq!(w.state.serving, STEP as u64 + 5);
        assert_eq!(w.state.read.load(Ordering::Relaxed), 2 * (STEP as u64 + 5));
    }

    #[test]
    fn pages_the_page_cache_holds_are_found_without_reading() {
        let (_dir, path) = file_of(2 * STEP + 100);
        let file = File::open(&path).unwrap();
        let mut buf = vec![0u8; 2 * STEP + 100];
        file.read_exact_at(&mut buf, 0).unwrap(); // Just written and read: cached.
        let mut cached = Residency::of(&file).expect("a map of a regular file");
        assert!(cached.holds(0, STEP));
        assert!(cached.holds(2 * STEP as u64, 100), "the last, partial page");
        assert!(!cached.holds(1, STEP), "not page-aligned: unsure");
        assert!(!cached.holds(2 * STEP as u64, STEP), "past the end: unsure");
        assert!(!cached.holds(0, 0));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn yielding_lowers_this_thread_alone() {
        // SAFETY: reading the nice value of the calling thread.
        let nice = || unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        let before = nice();
        let inside = std::thread::spawn(move || {
            yield_to_serving();
            nice()
        });
        assert_eq!(inside.join().unwrap(), 19);
        assert_eq!(nice(), before, "the caller's thread keeps its priority");
    }

    #[test]
    fn meminfo_parses_here() {
        assert!(available_memory().is_some_and(|m| m > 0));
    }
}
