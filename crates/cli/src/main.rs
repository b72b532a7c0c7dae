//! `handled`: the thin binary. Each subcommand lives in its own module.

mod admin;
mod backup;
mod bar;
mod bench;
mod compact;
mod counted;
mod credentials_file;
mod handle_syntax;
mod import;
mod import_config;
mod import_online;
mod printable;
mod promote;
mod resolve;
mod restore;
mod serve;
mod status;
mod stopped;
mod target;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// mimalloc, not glibc's malloc: an import spent a third of its CPU in glibc's
/// allocator (consolidating freed chunks) and 30% less CPU with mimalloc; the
/// server answers 2-11% more requests per core-second with it, for ~15 MB more RSS
/// (BENCHMARKS.md, "Import: where the time and the bytes go").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "handled",
    version = handled_server::build::LONG_VERSION,
    about = "A Handle System registry server",
    after_help = "Exit codes: 0 done; 1 local error (arguments, files, no connection); 2 not found; \
                  3 refused by the server; 4 authentication or permission denied."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log lines (stderr) as text, or as one JSON object each.
    #[arg(long, global = true, env = "HANDLED_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Logs to stderr, filtered by `HANDLED_LOG` (default: warnings); colours only on a terminal.
fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("HANDLED_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (initialises an empty data directory on first start).
    Serve(serve::ServeArgs),
    /// Resolve a handle over UDP, TCP or the HTTP tunnel.
    Resolve(resolve::ResolveArgs),
    /// Measure a Handle server under load.
    Bench(bench::BenchArgs),
    /// Live admission, cache and store figures of a running server.
    Status(status::StatusArgs),
    /// Bulk-load handle records from a JSON-lines file: into a stopped server's data directory, or --online through a running one.
    Import(import::ImportArgs),
    /// Back up a running server (store, server key, admin credentials) into one file.
    Backup(backup::BackupArgs),
    /// Make a data directory from a backup file.
    Restore(restore::RestoreArgs),
    /// Write the handled configuration and keys equivalent to a Handle.Net 9 server directory.
    ImportConfig(import_config::ImportConfigArgs),
    #[command(flatten)]
    Admin(admin::AdminCommand),
    /// Make an RSA key pair for an admin handle (private key file + HS_PUBKEY JSON).
    Keygen(admin::KeygenArgs),
    /// Turn a stopped replication mirror into a primary (running: SIGHUP without replication_source).
    Promote(promote::PromoteArgs),
    /// Give a stopped embedded store's free pages back to the file system.
    Compact(compact::CompactArgs),
}

impl Command {
    /// One-shot clients whose output is read through pipes; not the long-running
    /// network programs, which must survive peers that go away.
    fn prints_for_pipes(&self) -> bool {
        !matches!(self, Command::Serve(_) | Command::Bench(_))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.command.prints_for_pipes() {
        // Rust ignores SIGPIPE, which turns `handled list … | head` into a panic on
        // the next print; the default disposition ends a client quietly instead.
        // Never for `serve` or `bench`: hyper and rustls write with writev (no
        // MSG_NOSIGNAL), so a peer that closes early would kill the process.
        // SAFETY: called before any thread exists; SIG_DFL is a valid disposition.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    init_logging(cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::run(args).await,
            Command::Status(args) => status::run(args).await,
            Command::Resolve(args) => resolve::run(args).await,
            Command::Import(args) => import::run(args).await,
            Command::Backup(args) => backup::run(args).await,
            Command::Restore(args) => restore::run(args).await,
            Command::ImportConfig(args) => import_config::run(args).await,
            Command::Bench(args) => bench::run(args).await,
            Command::Admin(command) => admin::run(command).await,
            Command::Keygen(args) => admin::keygen(args),
            Command::Promote(args) => promote::run(args).await,
            Command::Compact(args) => compact::run(args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::from(1)
        }
    }
}

/// An error and its causes on one line, each cause once: wrappers that repeat
/// their source's text (`Connection refused: Connection refused`) print it once.
fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn causes_print_once() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let text = io.to_string();
        let e = anyhow::Error::new(io).context(text.clone()).context("cannot reach 127.0.0.1:2641");
        assert_eq!(super::one_line(&e), format!("cannot reach 127.0.0.1:2641: {text}"));
    }
}

#[cfg(test)]
mod help_tests {
    use clap::CommandFactory;

    /// Every argument of every subcommand says what it is for.
    #[test]
    fn every_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
                // clap renders `{n}` as a line break, so it would vanish from the help.
                if help.trim().is_empty() || help.contains("{n}") {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "handled", &mut missing);
        assert!(missing.is_empty(), "arguments without (whole) help: {missing:#?}");
    }
}
