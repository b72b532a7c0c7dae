//! The server's wall clock. Every date it writes or compares with another
//! node's (the transaction log, multi-primary change dates, the record cache's
//! leases, the timestamps of the values it creates) is read here, so that one
//! setting makes a test node's clock wrong where the design depends on it.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// Shifts this process's wall clock by this many ms (signed), for tests of a
/// node whose clock is wrong (tests/partition); read once. Never set it in
/// production.
pub const OFFSET_ENV: &str = "HANDLED_CLOCK_OFFSET_MS";

fn offset_ms() -> i64 {
    static OFFSET_MS: OnceLock<i64> = OnceLock::new();
    *OFFSET_MS.get_or_init(|| std::env::var(OFFSET_ENV).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(0))
}

/// Milliseconds since the epoch, shifted by [`OFFSET_ENV`]: the dates the
/// clock-dependent promises read (multi-primary change dates, the record
/// cache's leases) and the timestamps of new values.
pub fn now_ms() -> u64 {
    machine_ms().saturating_add_signed(offset_ms())
}

/// Milliseconds since the epoch by the machine's clock, never shifted: the
/// transaction log's dates and the replication streams' positions. Shifted
/// with the rest, members' logs dated up to 2 minutes off made the date rule
/// Handle.Net applies to relayed queues ask a proxied mirror to be dumped
/// again (docs/multi-primary.md, "Clocks"); until that is looked into, the
/// test setting leaves them alone.
pub fn machine_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Seconds since the epoch, as a handle value's timestamp (Java's `int`).
pub fn now_secs_i32() -> i32 {
    (now_ms() / 1000).min(i32::MAX as u64) as i32
}
