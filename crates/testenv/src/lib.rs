//! What tests find, or do not find, where they run: throwaway database
//! servers ([`db`]), a small filesystem to fill ([`tmpfs`]), and how a test
//! that cannot run here says so ([`skipped`]).
//! Below every crate of the workspace (it depends on none of them), so the
//! store's tests and the server's share one copy; `handled-testkit` re-exports it.

pub mod db;
pub mod tmpfs;

/// A test that cannot run here (no database server, no Cassandra node, no
/// root) says so rather than passing silently: on stderr, and as a line in
/// `$HANDLED_SKIP_FILE` when set, which `scripts/test-all.sh` shows in its
/// summary table beside the step that passed. The test then returns.
pub fn skipped(why: &str) {
    eprintln!("skipped: {why}");
    if let Some(path) = std::env::var_os("HANDLED_SKIP_FILE") {
        use std::io::Write;
        let line = format!("{why}\n");
        // One short append per line: concurrent test processes do not interleave.
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path);
        if let Err(e) = file.and_then(|mut f| f.write_all(line.as_bytes())) {
            eprintln!("cannot note the skip in HANDLED_SKIP_FILE: {e}");
        }
    }
}
