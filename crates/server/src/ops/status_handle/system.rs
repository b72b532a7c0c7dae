//! The machine and process figures of the status handle, read from Linux's
//! `/proc` and `statvfs`. Handle.Net reports its JVM heap; `handled` has no
//! heap of its own, so index 1 maps onto the process (README, "The status
//! handle"). A figure that cannot be read is -1 (Handle.Net's own mark for
//! the disk queue it does not measure), never made up.

use serde::Serialize;
use std::time::Duration;

/// One mounted file system: `device:mount point`, KiB used and free (free
/// including the blocks reserved for root, as the original counts).
#[derive(Serialize, Debug)]
pub struct Disk {
    /// Disk queue length: measured by neither server.
    queue: f64,
    name: String,
    used: i64,
    free: i64,
}

/// Machine memory in bytes: used = total - available.
#[derive(Serialize, Debug)]
pub struct SystemMemory {
    used: i64,
    free: i64,
}

/// Network file systems can hang `statvfs` for minutes: not asked.
const NETWORK_FS: &[&str] = &["nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "9p", "fuse.sshfs"];

/// Index 1: `freemem` bytes free inside the allocator's heap (glibc), `totalmem`
/// resident bytes of the process, `maxmem` its memory limit (cgroup, else
/// the machine's memory), `runtime` milliseconds up, `numreqs` requests.
pub fn summary_line(uptime: Duration, requests: u64) -> String {
    format!(
        "freemem={}; totalmem={}; maxmem={}; runtime={}; numreqs={}",
        heap_free(),
        resident_bytes(),
        memory_limit(),
        uptime.as_millis(),
        requests
    )
}

fn heap_free() -> i64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's statistics under its locks.
        let info = unsafe { libc::mallinfo2() };
        info.fordblks as i64
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        -1
    }
}

fn page_size() -> i64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) }
}

fn resident_bytes() -> i64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    match statm.split_whitespace().nth(1).and_then(|p| p.parse::<i64>().ok()) {
        Some(pages) => pages * page_size(),
        None => -1,
    }
}

/// The cgroup (v2) limit of this process, else the machine's memory.
fn memory_limit() -> i64 {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let limit = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .and_then(|path| {
            std::fs::read_to_string(format!("/sys/fs/cgroup{}/memory.max", path.trim_end_matches('/'))).ok()
        })
        .and_then(|text| text.trim().parse::<i64>().ok());
    limit.unwrap_or_else(|| meminfo_kib("MemTotal:").map_or(-1, |k| k * 1024))
}

fn meminfo_kib(key: &str) -> Option<i64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

pub fn system_memory() -> SystemMemory {
    match (meminfo_kib("MemTotal:"), meminfo_kib("MemAvailable:")) {
        (Some(total), Some(available)) => SystemMemory { used: (total - available) * 1024, free: available * 1024 },
        _ => SystemMemory { used: -1, free: -1 },
    }
}

/// The 1, 5 and 15 minute load averages.
pub fn load_average() -> Vec<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).filter_map(|f| f.parse().ok()).collect()
}

pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default()
}

/// Every mount of this process's namespace, in `/proc/self/mounts` order.
pub fn disks() -> Vec<Disk> {
    let text = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let (device, mount, fs) = (fields.next()?, fields.next()?, fields.next()?);
            let (device, mount) = (unescape(device), unescape(mount));
            let (used, free) = if NETWORK_FS.contains(&fs) { (-1, -1) } else { usage_kib(&mount) };
            Some(Disk { queue: -1.0, name: format!("{device}:{mount}"), used, free })
        })
        .collect()
}

/// `/proc/mounts` writes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal =
            bytes.get(i + 1..i + 4).filter(|o| bytes[i] == b'\\' && o.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(o) => {
                out.push(o.iter().fold(0u8, |n, d| n.wrapping_mul(8) + (d - b'0')));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// (used, free) KiB of the file system at `mount`; (-1, -1) if it cannot be read.
fn usage_kib(mount: &str) -> (i64, i64) {
    let Ok(path) = std::ffi::CString::new(mount) else { return (-1, -1) };
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is NUL-terminated and `st` is a valid out-pointer for statvfs.
    if unsafe { libc::statvfs(path.as_ptr(), st.as_mut_ptr()) } != 0 {
        return (-1, -1);
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    let kib = |blocks: libc::fsblkcnt_t| (blocks as u128 * st.f_frsize as u128 / 1024) as i64;
    (kib(st.f_blocks.saturating_sub(st.f_bfree)), kib(st.f_bfree))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_fields_are_unescaped() {
        assert_eq!(unescape(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(unescape(r"/x\134y"), r"/x\y");
        assert_eq!(unescape(r"/plain\09"), r"/plain\09");
    }

    #[test]
    fn root_file_system_is_measured() {
        let root = disks().into_iter().find(|d| d.name.ends_with(":/")).expect("a mount on /");
        assert!(root.used > 0 && root.free >= 0, "{root:?}");
        let line = summary_line(Duration::from_millis(1500), 7);
        assert!(line.starts_with("freemem=") && line.ends_with("; runtime=1500; numreqs=7"), "{line}");
        let total: i64 = line.split("totalmem=").nth(1).unwrap().split(';').next().unwrap().parse().unwrap();
        assert!(total > 0, "{line}");
    }
}
