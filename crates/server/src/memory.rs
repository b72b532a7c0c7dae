//! Giving freed memory back to the operating system.
//!
//! glibc's malloc keeps what a burst freed in its arenas: after tens of
//! thousands of short TCP connections RSS stayed at the peak (measured on 1M
//! handles: 144 MB after four different loads, 83 MB right after
//! `malloc_trim(0)`; BENCHMARKS.md "Memory"). A thread that trims every so
//! often returns it; when nothing is free the call costs microseconds.

use std::time::{Duration, Instant};

/// Trim every `every` for as long as it is polled (the server runs it until
/// it drains); `every` zero, or a C library that is not glibc: return at once.
pub async fn trim_every(every: Duration) {
    if every.is_zero() || !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let started = Instant::now();
        // A large heap takes milliseconds to walk: not on a runtime worker.
        let released = tokio::task::spawn_blocking(trim).await.unwrap_or(false);
        tracing::debug!(released, took_us = started.elapsed().as_micros() as u64, "malloc_trim");
    }
}

/// Return free heap memory to the OS; true if some was released.
pub fn trim() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only walks the allocator's own free lists, under
        // its own locks; it has no preconditions.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trim_gives_back_a_freed_burst() {
        if !cfg!(all(target_os = "linux", target_env = "gnu")) {
            return;
        }
        // Many small blocks (kept in the arena when freed, unlike big ones
        // that are unmapped at once), then free them all.
        let blocks: Vec<Vec<u8>> = (0..200_000).map(|i| vec![i as u8; 256]).collect();
        drop(blocks);
        assert!(trim(), "a 50 MB freed burst should leave something to trim");
    }

    #[tokio::test]
    async fn trimming_runs_until_dropped_and_never_when_off() {
        tokio::time::timeout(Duration::from_millis(100), trim_every(Duration::ZERO)).await.expect("off: returns");
        let on = tokio::time::timeout(Duration::from_millis(300), trim_every(Duration::from_millis(20))).await;
        assert!(on.is_err() || !cfg!(all(target_os = "linux", target_env = "gnu")), "on: runs until dropped");
    }
}
