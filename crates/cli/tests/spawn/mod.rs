//! Spawning `handled serve` and the client subcommands, for the CLI tests of
//! everyday use (the hostile-peer tests use `common`, with raw-socket clients).
#![allow(dead_code)] // each test file uses a part

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// A running `handled serve` (`--ephemeral` unless given `--data-dir`), killed when dropped.
pub struct Server {
    pub child: Child,
    pub tcp_port: String,
    pub http_port: String,
    /// stderr lines up to the "serving" line.
    pub banner: String,
    /// The rest of stderr, unless taken (else drained in the background).
    pub stderr: Option<BufReader<std::process::ChildStderr>>,
}

impl Server {
    /// Keep draining stderr so that a chatty server never blocks on a full pipe.
    pub fn drain_stderr(&mut self) {
        if let Some(mut stderr) = self.stderr.take() {
            std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `serve` homing TEST with its credentials in `dir/creds.json`, plus `extra` arguments.
pub fn serve(dir: &Path, extra: &[&str]) -> Server {
    let mut server = serve_keeping_stderr(dir, extra);
    server.drain_stderr();
    server
}

/// [`serve`], with the rest of stderr left to the caller in `Server::stderr`.
pub fn serve_keeping_stderr(dir: &Path, extra: &[&str]) -> Server {
    serve_with_env(dir, extra, &[])
}

/// [`serve_keeping_stderr`] with these environment variables set.
pub fn serve_with_env(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_handled"))
        .envs(env.iter().copied())
        .arg("serve")
        // With a data directory the server keeps its store there (restart tests).
        .args(if extra.contains(&"--data-dir") { &[][..] } else { &["--ephemeral"][..] })
        // Unless given (restart tests keep their ports), any free ports.
        .args(if extra.contains(&"--port") {
            &[][..]
        } else {
            &["--listen", "127.0.0.1", "--port", "0", "--http-port", "0"][..]
        })
        .args(if extra.contains(&"--prefix") { &[][..] } else { &["--prefix", "TEST"][..] })
        .args(extra)
        .arg("--admin-credentials")
        .arg(dir.join("creds.json"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn handled");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let (mut tcp_port, mut http_port, mut banner) = (String::new(), String::new(), String::new());
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 {
        banner.push_str(&line);
        let port_after = |word: &str| {
            line.split(word)
                .nth(1)
                .map(|rest| rest.split_whitespace().next().unwrap().rsplit(':').next().unwrap().to_string())
        };
        if let (Some(t), Some(h)) = (port_after(" tcp "), port_after(" http ")) {
            (tcp_port, http_port) = (t, h);
            break;
        }
        line.clear();
    }
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    assert_eq!(ready.trim(), "ready", "{banner}");
    Server { child, tcp_port, http_port, banner, stderr: Some(stderr) }
}

/// A client subcommand against `port` with the credentials in `dir/creds.json`.
pub fn handled(dir: &Path, port: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_handled"))
        .args(args)
        .args(["--port", port, "--credentials"])
        .arg(dir.join("creds.json"))
        .output()
        .expect("run handled")
}

/// Any `handled` invocation.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_handled")).args(args).output().expect("run handled")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
