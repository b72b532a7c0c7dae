//! CPU time of a process from `/proc/PID/stat` (utime + stime), so a run can
//! report requests per server core-second: meaningful even when client and
//! server share a small machine.

use std::time::Duration;

/// Total user + system CPU time consumed so far by `pid`.
pub fn process_cpu_time(pid: u32) -> std::io::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_stat_cpu(&stat, clock_ticks_per_second()).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, format!("unexpected /proc/{pid}/stat format"))
    })
}

/// Resident set size of `pid` in bytes, from `/proc/PID/status`.
pub fn process_rss_bytes(pid: u32) -> std::io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "no VmRSS line"))
}

/// User + system CPU time this process (every thread) has used so far: the
/// bench's own cost, set beside the server's.
pub fn own_cpu_time() -> std::io::Result<Duration> {
    // SAFETY: getrusage writes only into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let micros = |t: libc::timeval| t.tv_sec.max(0) as u64 * 1_000_000 + t.tv_usec.max(0) as u64;
    Ok(Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime)))
}

fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// utime and stime are fields 14 and 15; the command name (field 2) may hold
/// spaces and parentheses, so count from the last ')'.
fn parse_stat_cpu(stat: &str, ticks: u64) -> Option<Duration> {
    let after = &stat[stat.rfind(')')? + 2..];
    let mut fields = after.split_ascii_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_micros((utime + stime) * 1_000_000 / ticks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_command_names() {
        let stat = "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 4 0 100 1000 200";
        assert_eq!(parse_stat_cpu(stat, 100), Some(Duration::from_secs(3)));
        assert_eq!(parse_stat_cpu("garbage", 100), None);
    }

    #[test]
    fn reads_own_process() {
        let pid = std::process::id();
        process_cpu_time(pid).unwrap();
        assert!(process_rss_bytes(pid).unwrap() > 0);
        // Burn a little CPU: our own time must grow.
        let before = own_cpu_time().unwrap();
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while t0.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        assert!(own_cpu_time().unwrap() > before, "{x}");
    }
}
