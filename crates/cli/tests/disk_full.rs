//! F14 (issue 13): `/readyz` tells the balancer when the store's disk is full, and
//! says ready again once space returns, without a restart. Before, it said ready
//! while every write failed. Runs `handled serve` on a small tmpfs mounted for the
//! test (needs root); skips with a message when mounting is not permitted, and
//! always unmounts.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

mod spawn;

struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(mb: u32) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let out =
            Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "tmpfs"]).arg(dir.path()).output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs(dir)),
            other => {
                handled_testenv::skipped(&format!("cannot mount a tmpfs ({other:?}): run as root to test a full disk"));
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// Status code and body of `GET path`.
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, text)
}

fn fill(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0x55u8; 64 << 10];
    while f.write_all(&chunk).and_then(|_| f.sync_data()).is_ok() {}
    path
}

/// Poll `/readyz` until its status is `want` (10 s at most).
fn wait_ready(addr: SocketAddr, want: u16) -> (u16, String) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (code, body) = get(addr, "/readyz");
        if code == want || Instant::now() > deadline {
            return (code, body);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn readiness_follows_a_full_disk() {
    let Some(fs) = Tmpfs::mount(32) else { return };
    let data = fs.0.path().join("data");
    let config = fs.0.path().join("handled.toml");
    std::fs::write(&config, "store_min_free_mb = 2\n").unwrap();
    // Dropped (killed) before the tmpfs is unmounted, also when an assertion fails.
    let server =
        spawn::serve(fs.0.path(), &["--data-dir", data.to_str().unwrap(), "--config", config.to_str().unwrap()]);
    let http: SocketAddr = format!("127.0.0.1:{}", server.http_port).parse().unwrap();
    assert_eq!(get(http, "/readyz").0, 200);
    let filler = fill(fs.0.path());
    let (code, body) = wait_ready(http, 503);
    assert_eq!(code, 503, "not ready while the disk is full: {body}");
    assert!(body.contains("disk full"), "{body}");
    std::fs::remove_file(filler).unwrap();
    let (code, body) = wait_ready(http, 200);
    assert_eq!(code, 200, "ready again once space returns: {body}");
}
