//! PostgreSQL (`initdb`, `pg_ctl`). The binaries are looked for in
//! `$HANDLED_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin` (Debian's
//! `postgresql` package).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::{client, free_port, fresh_database, run_as, server_dir, watchdog};

pub struct PgServer {
    pub port: u16,
    pub dir: PathBuf,
}

static SERVER: OnceLock<Result<PgServer, String>> = OnceLock::new();

fn bin_dir() -> Result<PathBuf, String> {
    if let Ok(dir) = std::env::var("HANDLED_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|_| "PostgreSQL is not installed (no /usr/lib/postgresql; apt-get install postgresql)".to_string())?
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin)| bin.join("initdb").exists())
        .collect();
    found.sort();
    found.pop().map(|(_, b)| b).ok_or_else(|| "no /usr/lib/postgresql/*/bin/initdb".to_string())
}

/// `program args…`, as the `postgres` user when we are root.
fn run(bin: &Path, program: &str, args: &[&str]) -> Result<(), String> {
    run_as("postgres", &bin.join(program), args).map(drop)
}

fn start() -> Result<PgServer, String> {
    let bin = bin_dir()?;
    let dir = server_dir("pg", "postgres")?;
    let data = dir.join("data");
    let (data_s, dir_s) = (data.to_string_lossy().into_owned(), dir.to_string_lossy().into_owned());
    run(&bin, "initdb", &["-D", &data_s, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "-N"])?;
    let port = free_port();
    // fsync off: these databases are thrown away, and the box is shared.
    let mut opts = format!(
        "-c listen_addresses=127.0.0.1 -p {port} -k {dir_s} -c fsync=off -c max_connections=300 \
         -c shared_buffers=32MB"
    );
    // What the server plans and runs, for tests that count it (`statement_counts`).
    if pg_stat_statements_here(&bin) {
        opts.push_str(" -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track_planning=on");
    }
    let log = dir.join("server.log").to_string_lossy().into_owned();
    run(&bin, "pg_ctl", &["-D", &data_s, "-l", &log, "-w", "-t", "60", "-o", &opts, "start"])?;
    // Stop it (immediate shutdown) and clean up once this test binary is gone.
    watchdog(&format!("kill -QUIT $(head -1 {data_s}/postmaster.pid)"), &dir)?;
    Ok(PgServer { port, dir })
}

/// Whether this installation has the pg_stat_statements module (Debian's
/// server package does), in the `lib` beside `bin`.
fn pg_stat_statements_here(bin: &Path) -> bool {
    bin.parent().is_some_and(|d| d.join("lib/pg_stat_statements.so").exists())
}

/// How often statements whose text contains `needle` were planned and run in
/// database `db` since it was made: `(plans, calls)`, or why they cannot be
/// counted here (no pg_stat_statements).
pub fn statement_counts(server: &PgServer, db: &str, needle: &str) -> Result<(u64, u64), String> {
    if !pg_stat_statements_here(&bin_dir()?) {
        return Err("this PostgreSQL has no pg_stat_statements module".into());
    }
    psql(server, db, "create extension if not exists pg_stat_statements")?;
    let sql = format!(
        "select coalesce(sum(plans), 0) || ' ' || coalesce(sum(calls), 0) from pg_stat_statements \
         where dbid = (select oid from pg_database where datname = current_database()) \
         and strpos(query, '{}') > 0",
        needle.replace('\'', "''")
    );
    let out = psql(server, db, &sql)?;
    let mut n = out.split_whitespace().map(|w| w.parse::<u64>().map_err(|e| format!("{out:?}: {e}")));
    match (n.next(), n.next()) {
        (Some(plans), Some(calls)) => Ok((plans?, calls?)),
        _ => Err(format!("unexpected answer {out:?}")),
    }
}

/// The shared server, or why there is none.
pub fn server() -> Result<&'static PgServer, String> {
    SERVER.get_or_init(start).as_ref().map_err(Clone::clone)
}

/// A fresh, empty database: its URL (`postgres://postgres@127.0.0.1:PORT/NAME`),
/// or `None` after printing why the test is skipped.
pub async fn database(name: &str) -> Option<String> {
    let (server, db) =
        fresh_database("PostgreSQL", server(), name, |s, db| psql(s, "postgres", &format!("create database {db}")))?;
    Some(format!("postgres://postgres@127.0.0.1:{}/{db}", server.port))
}

/// Run `sql` with `psql` on database `db`, as a program other than `handled`
/// would: its output (tuples only, unaligned), or the error.
pub fn psql(server: &PgServer, db: &str, sql: &str) -> Result<String, String> {
    let mut cmd = Command::new(bin_dir()?.join("psql"));
    cmd.args(["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-U", "postgres"]).args([
        "-p",
        &server.port.to_string(),
        "-d",
        db,
        "-c",
        sql,
    ]);
    client(cmd, "psql")
}
