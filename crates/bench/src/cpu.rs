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

/// CPU time of `pid` and of every process descended from it, the children
/// it already reaped included: a database such as PostgreSQL serves each
/// connection from a process of its own, forked and reaped while a run goes.
pub fn process_tree_cpu_time(pid: u32) -> std::io::Result<Duration> {
    let ticks = clock_ticks_per_second();
    let mut stats = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let Some(p) = entry.ok().and_then(|e| e.file_name().to_str()?.parse::<u32>().ok()) else { continue };
        // Processes come and go while /proc is read: one that left is skipped.
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
            stats.push((p, stat));
        }
    }
    let parent =
        |stat: &str| -> Option<u32> { stat[stat.rfind(')')? + 2..].split_ascii_whitespace().nth(1)?.parse().ok() };
    let mut tree = vec![pid];
    let mut total = Duration::ZERO;
    let mut found = false;
    // Breadth first: stats are few (a few hundred on a busy box), the tree shallow.
    while let Some(p) = tree.pop() {
        let Some((_, stat)) = stats.iter().find(|(q, _)| *q == p) else { continue };
        found = true;
        total += parse_stat_cpu_with_children(stat, ticks).unwrap_or_default();
        tree.extend(stats.iter().filter(|(_, s)| parent(s) == Some(p)).map(|(q, _)| *q));
    }
    if !found {
        return Err(std::io::Error::new(std::io::ErrorKind::NotFound, format!("no process {pid}")));
    }
    Ok(total)
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

/// utime + stime + cutime + cstime (fields 14–17): the process and the
/// children it waited for.
fn parse_stat_cpu_with_children(stat: &str, ticks: u64) -> Option<Duration> {
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<u64> =
        after.split_ascii_whitespace().skip(11).take(4).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    (fields.len() == 4).then(|| Duration::from_micros(fields.iter().sum::<u64>() * 1_000_000 / ticks))
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
    fn tree_time_counts_children_live_and_reaped() {
        let stat = "1234 (post master) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 100 100 20 0 4 0 100 1000 200";
        assert_eq!(parse_stat_cpu_with_children(stat, 100), Some(Duration::from_secs(5)));
        // A child that burns CPU: the tree's time grows by about what it used.
        let me = std::process::id();
        let before = process_tree_cpu_time(me).unwrap();
        let child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 5"])
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        let mut live = Duration::ZERO;
        while t0.elapsed() < Duration::from_secs(20) && live < Duration::from_millis(50) {
            std::thread::sleep(Duration::from_millis(20));
            live = process_cpu_time(child.id()).unwrap_or_default();
        }
        let during = process_tree_cpu_time(me).unwrap();
        assert!(during >= before + live, "{before:?} + {live:?} > {during:?}");
        let mut child = child;
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(process_tree_cpu_time(me).unwrap() >= during);
        assert!(process_tree_cpu_time(u32::MAX).is_err());
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
