//! Hostile peers against a real `handled serve` process (regression tests of
//! the black-box attack; the attack tools themselves are in `tests/hostile/`).
//! Each test attacks on loopback, boundedly, then checks that the server process
//! is still alive and still serves an ordinary client.

mod common;

use common::{get, start};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Pipelines many requests and closes without reading a byte of the answers, so
/// the server's next write meets a closed socket (EPIPE / ECONNRESET).
fn pipeline_and_close(addr: SocketAddr, path: &str) {
    for _ in 0..20 {
        let mut s = TcpStream::connect(addr).expect("connect");
        let burst = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").repeat(200);
        let _ = s.write_all(burst.as_bytes());
        drop(s);
    }
    std::thread::sleep(Duration::from_millis(300));
}

/// F1: a peer that closes early used to kill the whole process with SIGPIPE
/// (`serve` ran with the default disposition, and hyper writes with writev).
#[test]
fn a_peer_closing_early_does_not_kill_the_server() {
    let mut server = start();
    pipeline_and_close(server.http, "/healthz");
    server.assert_alive("pipelined /healthz requests on closed connections");
    pipeline_and_close(server.registry, "/live");
    server.assert_alive("pipelined registry /live requests on closed connections");
    assert!(get(server.http, "/healthz").contains(" 200"), "healthz still answers");
    assert!(get(server.registry, "/live").contains(" 200"), "registry /live still answers");
}

/// F10: an unparsable `LOAD_BALANCER_IP` used to be ignored with a warning, so
/// every peer could write to the registry. Now `serve` refuses to start.
#[test]
fn an_unparsable_load_balancer_ip_stops_the_start() {
    for bad in ["lb.example.org", "10.0.0.1 ", "nonsense"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_handled"))
            .args(["serve", "--ephemeral", "--listen", "127.0.0.1", "--port", "0", "--http-port", "0"])
            .args(["--registry-port", "0"])
            .env("LOAD_BALANCER_IP", bad)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run handled");
        // Bounded: a server that starts anyway is killed and reported.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if child.try_wait().unwrap().is_none() {
            let _ = child.kill();
        }
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{bad:?}: {err}");
        assert!(err.contains("LOAD_BALANCER_IP") && err.contains(bad), "{bad:?}: {err}");
        assert!(!String::from_utf8_lossy(&o.stdout).contains("ready"), "{bad:?}: the server must not come up");
    }
}
