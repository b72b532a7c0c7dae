//! MariaDB (`mariadb-install-db`, `mariadbd`, Debian's `mariadb-server`). The
//! binaries are looked for in `$HANDLED_MARIADB_BIN` (a directory holding
//! all three programs), else `/usr/bin` and `/usr/sbin`. The server's
//! character set and collation are Debian's defaults (utf8mb4,
//! case-insensitive), the case the store must handle; durability is off
//! (these databases are thrown away, and the box is shared).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::{client, free_port, fresh_database, is_root, run_as, server_dir, watchdog};

pub struct MariaDbServer {
    pub port: u16,
    pub dir: PathBuf,
}

static SERVER: OnceLock<Result<MariaDbServer, String>> = OnceLock::new();

/// The path of one of MariaDB's programs.
fn program(name: &str) -> Result<PathBuf, String> {
    let dirs: Vec<PathBuf> = match std::env::var("HANDLED_MARIADB_BIN") {
        Ok(d) => vec![d.into()],
        Err(_) => vec!["/usr/sbin".into(), "/usr/bin".into()],
    };
    dirs.iter().map(|d| d.join(name)).find(|p| p.exists()).ok_or_else(|| {
        format!("MariaDB is not installed (no {name}; apt-get install mariadb-server, or set HANDLED_MARIADB_BIN)")
    })
}

fn start() -> Result<MariaDbServer, String> {
    let (install, server) = (program("mariadb-install-db")?, program("mariadbd")?);
    program("mariadb")?;
    let dir = server_dir("mariadb", "mysql")?;
    let data = dir.join("data");
    let user = if is_root() { vec!["--user=mysql".to_string()] } else { Vec::new() };
    let mut args = vec![
        "--no-defaults".to_string(),
        format!("--datadir={}", data.display()),
        "--auth-root-authentication-method=normal".into(),
        "--skip-test-db".into(),
    ];
    args.extend(user.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_as("mysql", &install, &args)?;
    let port = free_port();
    let pid_file = dir.join("mariadbd.pid");
    let mut cmd = Command::new(&server);
    cmd.arg("--no-defaults")
        .args(&user)
        .arg(format!("--datadir={}", data.display()))
        .arg(format!("--socket={}", dir.join("mariadbd.sock").display()))
        .arg(format!("--pid-file={}", pid_file.display()))
        .arg(format!("--log-error={}", dir.join("server.log").display()))
        .arg(format!("--port={port}"))
        .args(["--skip-networking=0", "--bind-address=127.0.0.1", "--skip-name-resolve"])
        .args(["--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci"])
        .args(["--innodb-flush-log-at-trx-commit=0", "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=16M"])
        .args(["--skip-log-bin", "--performance-schema=0", "--max-connections=300"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd.spawn().map_err(|e| format!("{}: {e}", server.display()))?;
    watchdog(&format!("kill -TERM $(cat {})", pid_file.display()), &dir)?;
    let s = MariaDbServer { port, dir };
    let started = Instant::now();
    loop {
        match sql(&s, "", "select 1") {
            Ok(_) => return Ok(s),
            Err(e) if started.elapsed() > Duration::from_secs(60) => {
                let log = std::fs::read_to_string(s.dir.join("server.log")).unwrap_or_default();
                return Err(format!("mariadbd did not answer within 60 s: {e}\n{log}"));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// The shared server, or why there is none.
pub fn server() -> Result<&'static MariaDbServer, String> {
    SERVER.get_or_init(start).as_ref().map_err(Clone::clone)
}

/// A fresh, empty database: its URL (`mariadb://root@127.0.0.1:PORT/NAME`),
/// or `None` after printing why the test is skipped.
pub async fn database(name: &str) -> Option<String> {
    let (server, db) = fresh_database("MariaDB", server(), name, |s, db| sql(s, "", &format!("create database {db}")))?;
    Some(format!("mariadb://root@127.0.0.1:{}/{db}", server.port))
}

/// Run `statements` with the `mariadb` client on database `db` ("" for
/// none), as a program other than `handled` would: its output (tab-separated,
/// no column names), or the error.
pub fn sql(server: &MariaDbServer, db: &str, statements: &str) -> Result<String, String> {
    let mut cmd = Command::new(program("mariadb")?);
    cmd.args(["--no-defaults", "--batch", "--skip-column-names", "--protocol=tcp", "-h", "127.0.0.1", "-u", "root"])
        .args(["-P", &server.port.to_string(), "-e", statements])
        .args((!db.is_empty()).then_some(db));
    client(cmd, "mariadb")
}
