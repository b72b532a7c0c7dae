//! README's "Using it" works as written (issue 28.3): a fresh `handled serve`
//! with its defaults (data in `./data`, prefix TEST), then every line of the
//! section's shell block, in order, from the same directory, with `handled`
//! on PATH; and the http:// addresses the section names answer. Only the ports
//! differ (chosen by the OS, given through HANDLED_PORT / HANDLED_HTTP_PORT as
//! a user would), so that the test never collides with a running server.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The "## Using it" section of README.md.
fn using_it() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let start = readme.find("\n## Using it\n").expect("README has a \"Using it\" section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_string()
}

/// The lines of the section's first ```sh block, trailing comments (after two
/// spaces and `#`) removed.
fn commands(section: &str) -> Vec<String> {
    let block = section.split("```sh\n").nth(1).expect("a sh block").split("```").next().unwrap();
    block
        .lines()
        .map(|l| l.split("  #").next().unwrap().trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// The plain-HTTP addresses on the default HTTP port named in the section.
fn http_addresses(section: &str) -> Vec<String> {
    section
        .split("http://127.0.0.1:8000")
        .skip(1)
        .map(|rest| rest.split(|c: char| c.is_whitespace() || c == ')' || c == ',').next().unwrap().to_string())
        .collect()
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `handled serve` as README starts it, in `dir`: (server, native port, HTTP port).
fn serve(dir: &Path) -> (Server, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_handled"))
        .arg("serve")
        .current_dir(dir)
        .env("HANDLED_PORT", "0")
        .env("HANDLED_HTTP_PORT", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let (mut line, mut banner) = (String::new(), String::new());
    let ports = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "serve stopped: {banner}");
        banner.push_str(&line);
        let port_after = |word: &str| line.split(word).nth(1)?.split_whitespace().next()?.rsplit(':').next();
        if let (Some(native), Some(http)) = (port_after(" tcp "), port_after(" http ")) {
            break (native.to_string(), http.to_string());
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    assert_eq!(ready.trim(), "ready", "{banner}");
    (Server(child), ports.0, ports.1)
}

fn http_status(port: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).unwrap();
    String::from_utf8_lossy(&answer).lines().next().unwrap_or("").to_string()
}

#[test]
fn the_readme_commands_work_as_written_on_the_default_set_up() {
    let section = using_it();
    let lines = commands(&section);
    assert!(lines.iter().filter(|l| l.starts_with("handled ")).count() >= 5, "{lines:?}");
    let dir = tempfile::tempdir().unwrap();
    let (_server, native, http) = serve(dir.path());
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_handled")).parent().unwrap().to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();
    for line in &lines {
        let o = Command::new("sh")
            .args(["-c", line])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("HANDLED_PORT", &native)
            .env("HANDLED_HTTP_PORT", &http)
            .env_remove("HANDLED_CREDENTIALS")
            .env_remove("HANDLED_HOST")
            .output()
            .unwrap();
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "README line failed ({}): {line}\nstdout: {out}\nstderr: {err}", o.status);
    }
    assert!(dir.path().join("data-restored/handles.redb").is_file(), "restore made no data directory");
    let addresses = http_addresses(&section);
    assert!(addresses.len() >= 3, "{addresses:?}");
    for address in addresses {
        let status = http_status(&http, &address);
        assert!(status.starts_with("HTTP/1.1 2") || status.starts_with("HTTP/1.1 3"), "{address}: {status}");
    }
}
