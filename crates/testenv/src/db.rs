//! Throwaway database servers for tests, PostgreSQL ([`postgres`]) and
//! MariaDB ([`mariadb`]): each initialised in a temporary directory from the
//! Debian binaries, listening on a free loopback port (and a socket in that
//! directory), one database per test. Each is started once per test binary;
//! a watchdog process stops it and removes the directory when the binary
//! exits (test binaries run no destructors of statics). Without the binaries,
//! `database` says why and returns `None`, and the test is skipped. As root,
//! the server runs as its Debian system user (`postgres`, `mysql`): neither
//! runs as root.

pub mod mariadb;
pub mod postgres;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

pub(crate) fn is_root() -> bool {
    // /proc/self belongs to the process's effective user (no libc needed, so
    // other crates' tests can include this file).
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

/// `exe args…`, as `user` when we are root; its stdout, or why it failed.
pub(crate) fn run_as(user: &str, exe: &Path, args: &[&str]) -> Result<String, String> {
    let mut cmd = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", user, "--"]).arg(exe);
        c
    } else {
        Command::new(exe)
    };
    let out = cmd.args(args).stdin(Stdio::null()).output().map_err(|e| format!("{}: {e}", exe.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed: {}{}",
            exe.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(55432)
}

/// A fresh temporary directory for a server, handed to `user` when we are root.
pub(crate) fn server_dir(kind: &str, user: &str) -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("handled-{kind}-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if is_root() {
        let ok = Command::new("chown").arg(format!("{user}:")).arg(&dir).status().map(|s| s.success()).unwrap_or(false);
        if !ok {
            return Err(format!("running as root and cannot hand the data directory to a `{user}` user"));
        }
    }
    Ok(dir)
}

/// Once this test binary is gone: `stop` (a shell command), then remove `dir`.
pub(crate) fn watchdog(stop: &str, dir: &Path) -> Result<(), String> {
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop}; sleep 2; rm -rf {dir}",
        pid = std::process::id(),
        dir = dir.display()
    );
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(drop)
        .map_err(|e| format!("watchdog: {e}"))
}

/// A database name unique in this test binary, from the test's name.
pub(crate) fn database_name(test: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let short: String = test.chars().filter(|c| c.is_ascii_alphanumeric()).take(40).collect();
    format!("t{}_{}", N.fetch_add(1, Ordering::Relaxed), short.to_ascii_lowercase())
}

/// A fresh database named after the test on the shared server of one kind,
/// made by `create(server, name)`: the server and the name, or `None` after
/// printing why the test is skipped.
pub(crate) fn fresh_database<S>(
    kind: &str,
    server: Result<&'static S, String>,
    test: &str,
    create: impl FnOnce(&S, &str) -> Result<String, String>,
) -> Option<(&'static S, String)> {
    let server = match server {
        Ok(s) => s,
        Err(why) => {
            crate::skipped(&format!("no {kind} for this test: {why}"));
            return None;
        }
    };
    let db = database_name(test);
    create(server, &db).expect("create database");
    Some((server, db))
}

/// A database client run as another program would: its output, or the error.
pub(crate) fn client(mut cmd: Command, name: &str) -> Result<String, String> {
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| format!("{name}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{name}: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
}
