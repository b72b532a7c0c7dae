//! A real `handled serve` process (in memory, or on a data directory) for the
//! hostile-peer and backup tests, and plain-socket clients (so an attack is
//! byte-exact and nothing is hidden by a client library). Each test binary uses
//! part of this.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A running `serve --ephemeral`, killed on drop.
pub struct Server {
    pub child: Child,
    pub tcp: SocketAddr,
    pub http: SocketAddr,
    pub registry: SocketAddr,
    /// The server's log lines (stderr) so far.
    pub log: Arc<Mutex<Vec<String>>>,
    /// The configuration file and the admin credentials (`creds.json`).
    pub dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address after `label` in a start-up line (`… http 127.0.0.1:PORT …`).
fn address_after(line: &str, label: &str) -> Option<SocketAddr> {
    let rest = line.split(label).nth(1)?;
    rest.split(|c: char| c.is_whitespace() || c == '/').find(|w| !w.is_empty())?.parse().ok()
}

pub fn start() -> Server {
    start_with("")
}

/// A server with these lines of TOML configuration (flags set the ports).
pub fn start_with(config: &str) -> Server {
    start_in(None, config)
}

/// [`start_with`] on the embedded store in `data_dir` (`None`: in memory).
pub fn start_in(data_dir: Option<&std::path::Path>, config: &str) -> Server {
    start_logging(data_dir, config, "warn")
}

/// [`start_in`] with the log filter `HANDLED_LOG=filter` (e.g. `warn,access=info`).
pub fn start_logging(data_dir: Option<&std::path::Path>, config: &str, filter: &str) -> Server {
    let mut command = Command::new(env!("CARGO_BIN_EXE_handled"));
    command.arg("serve").env("HANDLED_LOG", filter);
    match data_dir {
        Some(d) => command.arg("--data-dir").arg(d),
        None => command.arg("--ephemeral"),
    };
    command.args(["--listen", "127.0.0.1", "--port", "0", "--http-port", "0"]);
    command.args(["--registry-port", "0", "--prefix", "TEST"]);
    let dir = tempfile::tempdir().unwrap();
    command.arg("--admin-credentials").arg(dir.path().join("creds.json"));
    if !config.is_empty() {
        let path = dir.path().join("handled.toml");
        std::fs::write(&path, config).unwrap();
        command.arg("--config").arg(&path);
    }
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn handled");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let (mut tcp, mut http, mut registry) = (None, None, None);
    let mut line = String::new();
    while registry.is_none() && stderr.read_line(&mut line).unwrap() > 0 {
        tcp = tcp.or_else(|| address_after(&line, " tcp "));
        http = http.or_else(|| address_after(&line, " http "));
        registry = registry.or_else(|| address_after(&line, "http://"));
        line.clear();
    }
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    assert_eq!(ready.trim(), "ready");
    // Keep draining stderr so the server never blocks on a full pipe.
    let log = Arc::new(Mutex::new(Vec::new()));
    let lines = log.clone();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            lines.lock().unwrap().push(line);
        }
    });
    Server {
        child,
        tcp: tcp.expect("tcp address"),
        http: http.expect("http address"),
        registry: registry.expect("registry address"),
        log,
        dir,
    }
}

impl Server {
    /// Panics if the process has exited (with how it exited).
    pub fn assert_alive(&mut self, after: &str) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("the server died after {after}: {status:?}");
        }
    }

    /// The admin credentials file serve wrote (TEST/ADMIN, secret key at index 300).
    pub fn credentials(&self) -> std::path::PathBuf {
        self.dir.path().join("creds.json")
    }

    /// The admin's secret key.
    pub fn admin_secret(&self) -> String {
        let creds: serde_json::Value = serde_json::from_slice(&std::fs::read(self.credentials()).unwrap()).unwrap();
        creds["secret_key"]["secret"].as_str().unwrap().to_owned()
    }

    /// Run a `handled` admin subcommand against this server with its credentials.
    pub fn admin(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_handled"))
            .args(args)
            .args(["--port", &self.tcp.port().to_string(), "--credentials"])
            .arg(self.credentials())
            .output()
            .expect("run handled")
    }

    /// Log lines containing `text`.
    pub fn log_lines_with(&self, text: &str) -> usize {
        self.log.lock().unwrap().iter().filter(|l| l.contains(text)).count()
    }
}

/// A connection to `addr` from the loopback address `source` (each 127.x.y.z is
/// a different peer to the server's per-address limits).
pub fn connect_from(source: IpAddr, addr: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&SocketAddr::new(source, 0).into()).unwrap();
    s.connect_timeout(&addr.into(), Duration::from_secs(5)).expect("connect");
    s.into()
}

/// The full answer on `s` (until the server closes, at most 5 s).
pub fn read_answer(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).expect("read answer");
    String::from_utf8_lossy(&answer).into_owned()
}

/// A request with optional Basic credentials and a JSON body; returns the whole answer.
pub fn request(addr: SocketAddr, method: &str, path: &str, basic: Option<(&str, &str)>, body: &str) -> String {
    request_with(addr, method, path, basic, &[], body)
}

/// [`request`] with more header lines (`name`, `value`).
pub fn request_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    basic: Option<(&str, &str)>,
    headers: &[(&str, &str)],
    body: &str,
) -> String {
    let mut s = connect_from("127.0.0.1".parse().unwrap(), addr);
    let auth = basic.map_or(String::new(), |(user, password)| {
        use base64::Engine as _;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Authorization: Basic {token}\r\n")
    });
    let more: String = headers.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}{more}Content-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    read_answer(&mut s)
}

/// One ordinary request on a fresh connection; returns the status line.
pub fn get(addr: SocketAddr, path: &str) -> String {
    get_from("127.0.0.1".parse().unwrap(), addr, path)
}

/// One ordinary request from the loopback address `source`; returns the status line.
pub fn get_from(source: IpAddr, addr: SocketAddr, path: &str) -> String {
    let mut s = connect_from(source, addr);
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    read_answer(&mut s).lines().next().unwrap_or_default().to_owned()
}
