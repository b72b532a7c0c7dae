//! F14 (issue 13): `/readyz` tells the balancer when the store's disk is full, and
//! says ready again once space returns, without a restart. Before, it said ready
//! while every write failed. Runs `handled serve` on a small tmpfs mounted for the
//! test (needs root); skips with a message when mounting is not permitted, and
//! always unmounts.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

mod spawn;

use handled_testenv::tmpfs::Tmpfs;

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
    let data = fs.path().join("data");
    let config = fs.path().join("handled.toml");
    std::fs::write(&config, "store_min_free_mb = 2\n").unwrap();
    // Dropped (killed) before the tmpfs is unmounted, also when an assertion fails.
    let server = spawn::serve(fs.path(), &["--data-dir", data.to_str().unwrap(), "--config", config.to_str().unwrap()]);
    let http: SocketAddr = format!("127.0.0.1:{}", server.http_port).parse().unwrap();
    assert_eq!(get(http, "/readyz").0, 200);
    let filler = fs.fill();
    let (code, body) = wait_ready(http, 503);
    assert_eq!(code, 503, "not ready while the disk is full: {body}");
    assert!(body.contains("disk full"), "{body}");
    std::fs::remove_file(filler).unwrap();
    let (code, body) = wait_ready(http, 200);
    assert_eq!(code, 200, "ready again once space returns: {body}");
}
