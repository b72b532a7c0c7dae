//! Giving freed memory back to the operating system.
//!
//! glibc's malloc keeps what a burst freed in its arenas: after tens of
//! thousands of short TCP connections RSS stayed at the peak (measured on 1M
//! handles: 144 MB after four different loads, 83 MB right after
//! `malloc_trim(0)`; BENCHMARKS.md "Memory"). A thread that trims every so
//! often returns it; when nothing is free the call costs microseconds.

use std::time::{Duration, Instant};

/// Start the trimming thread (`every` zero: don't). A no-op where the C
/// library is not glibc.
pub fn spawn_trimmer(every: Duration) -> std::io::Result<()> {
    if every.is_zero() || !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return Ok(());
    }
    std::thread::Builder::new().name("handled-trim".into()).spawn(move || loop {
        std::thread::sleep(every);
        let started = Instant::now();
        let released = trim();
        tracing::debug!(released, took_us = started.elapsed().as_micros() as u64, "malloc_trim");
    })?;
    Ok(())
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
}
