//! `handled serve`: configuration from file, environment and flags; bind, bootstrap, serve.

use anyhow::Context;
use clap::Args;
use handled_server::bootstrap::open_store;
use handled_server::config::{Config, StoreKind};
use handled_server::import::ImportOptions;
use handled_server::replication::mirror::MirrorSettings;
use handled_server::replication::multi_primary::GroupSettings;
use handled_server::Server;
use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// How long requests in flight at SIGTERM may take to finish (systemd's stop
/// timeout is 90 s by default).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The Cassandra flags apart, so the common ones (and the global
/// `--log-format`, listed after them) are read first.
const CASSANDRA: &str = "Cassandra store (--store cassandra)";

#[derive(Args)]
pub struct ServeArgs {
    /// TOML configuration file.
    #[arg(long, short, env = "HANDLED_CONFIG")]
    config: Option<PathBuf>,
    /// Data directory (store, server key, credentials); default `data`,
    /// relative to the working directory.
    #[arg(long, env = "HANDLED_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Keep everything in memory; nothing is written to disk but the admin
    /// credentials file, which goes to the temp directory and is removed at exit.
    #[arg(long, env = "HANDLED_EPHEMERAL")]
    ephemeral: bool,
    /// Address to bind [default: the configuration's `listen`, else 127.0.0.1].
    #[arg(long, env = "HANDLED_LISTEN")]
    listen: Option<IpAddr>,
    /// Address published in the site record (HS_SITE) for clients to connect
    /// to; default: --listen. Required when listening on 0.0.0.0 or ::.
    #[arg(long, env = "HANDLED_PUBLIC_ADDRESS")]
    public_address: Option<IpAddr>,
    /// Native protocol port, UDP and TCP [default: the configuration's `port`, else 2641].
    #[arg(long, env = "HANDLED_PORT")]
    port: Option<u16>,
    /// HTTP port [default: the configuration's `http_port`, else 8000].
    #[arg(long, env = "HANDLED_HTTP_PORT")]
    http_port: Option<u16>,
    /// Domain registry API port (not served unless set).
    #[arg(long, env = "HANDLED_REGISTRY_PORT")]
    registry_port: Option<u16>,
    /// Prefix to home (repeatable); replaces the configured list.
    #[arg(long = "prefix", env = "HANDLED_PREFIX", value_delimiter = ',')]
    prefixes: Vec<String>,
    /// Load these JSON-lines handle records before serving.
    #[arg(long)]
    import: Option<PathBuf>,
    /// Write newly generated admin credentials to this file (default: the
    /// data directory, or the temp directory with --ephemeral).
    #[arg(long, env = "HANDLED_ADMIN_CREDENTIALS")]
    admin_credentials: Option<PathBuf>,
    /// Store backend: embedded (default), memory, cassandra or sql.
    #[arg(long, env = "HANDLED_STORE")]
    store: Option<StoreKind>,
    /// Cassandra nodes to contact first, host:port (comma-separated).
    #[arg(long, env = "HANDLED_CASSANDRA_CONTACT_POINTS", help_heading = CASSANDRA, value_delimiter = ',')]
    cassandra_contact_points: Vec<String>,
    /// Cassandra keyspace of this registry.
    #[arg(long, env = "HANDLED_CASSANDRA_KEYSPACE", help_heading = CASSANDRA)]
    cassandra_keyspace: Option<String>,
    /// Replication of a keyspace created at start: "3" or "dc1:3,dc2:3".
    #[arg(long, env = "HANDLED_CASSANDRA_REPLICATION", help_heading = CASSANDRA)]
    cassandra_replication: Option<String>,
    /// Consistency of reads and writes (QUORUM, LOCAL_QUORUM, …).
    #[arg(long, env = "HANDLED_CASSANDRA_CONSISTENCY", help_heading = CASSANDRA)]
    cassandra_consistency: Option<String>,
    /// Consistency of lightweight transactions (SERIAL or LOCAL_SERIAL).
    #[arg(long, env = "HANDLED_CASSANDRA_SERIAL_CONSISTENCY", help_heading = CASSANDRA)]
    cassandra_serial_consistency: Option<String>,
    /// Cassandra user (password from HANDLED_CASSANDRA_PASSWORD).
    #[arg(long, env = "HANDLED_CASSANDRA_USERNAME", help_heading = CASSANDRA)]
    cassandra_username: Option<String>,
    /// PEM CA certificate of the Cassandra nodes (TLS).
    #[arg(long, env = "HANDLED_CASSANDRA_TLS_CA", help_heading = CASSANDRA)]
    cassandra_tls_ca: Option<PathBuf>,
    /// Record cache budget in MiB (0 = off; on cassandra it needs --cluster-listen).
    #[arg(long, env = "HANDLED_CACHE_MB")]
    cache_mb: Option<usize>,
    /// This node's cluster channel, ip:port (cassandra nodes with a record cache).
    #[arg(long, env = "HANDLED_CLUSTER_LISTEN")]
    cluster_listen: Option<std::net::SocketAddr>,
}

impl ServeArgs {
    fn config(&self) -> anyhow::Result<Config> {
        let mut c = Config::load(self.config.as_deref())?;
        let file_store = self.config.as_deref().and_then(|path| store_set_in(path, &c));
        if let Some(d) = &self.data_dir {
            c.data_dir = d.clone();
        }
        c.ephemeral |= self.ephemeral;
        if let Some(l) = self.listen {
            c.listen = l;
        }
        if let Some(a) = self.public_address {
            c.public_address = Some(a);
        }
        if let Some(p) = self.port {
            c.port = p;
        }
        if let Some(p) = self.http_port {
            c.http_port = p;
        }
        if let Some(p) = self.registry_port {
            c.registry.port = Some(p);
        }
        if !self.prefixes.is_empty() {
            c.prefixes = self.prefixes.clone();
        }
        c.default_server_admins();
        if let Some(p) = &self.admin_credentials {
            c.admin_credentials = Some(p.clone());
        }
        if let Some(s) = self.store {
            c.storage.store = s;
        }
        if let Some(mb) = self.cache_mb {
            c.storage.record_cache_mb = mb;
        }
        if let Some(a) = self.cluster_listen {
            c.cluster.listen = Some(a);
        }
        let cass = &mut c.storage.cassandra;
        if !self.cassandra_contact_points.is_empty() {
            cass.contact_points = self.cassandra_contact_points.clone();
        }
        let overrides = [
            (&self.cassandra_keyspace, &mut cass.keyspace),
            (&self.cassandra_replication, &mut cass.replication),
            (&self.cassandra_consistency, &mut cass.consistency),
            (&self.cassandra_serial_consistency, &mut cass.serial_consistency),
        ];
        for (flag, key) in overrides {
            if let Some(v) = flag {
                *key = v.clone();
            }
        }
        if let Some(u) = &self.cassandra_username {
            cass.username = Some(u.clone());
        }
        if let Some(p) = &self.cassandra_tls_ca {
            cass.tls_ca = Some(p.clone());
        }
        if let Some(warning) = store_override(file_store, self.ephemeral, &c) {
            eprintln!("warning: {warning}");
        }
        c.validate()?;
        check_published_address(&c)?;
        Ok(c)
    }
}

/// The store the configuration file names, if it names one (`c` read from it).
fn store_set_in(path: &std::path::Path, c: &Config) -> Option<StoreKind> {
    let text = std::fs::read_to_string(path).ok()?;
    text.parse::<toml::Table>().ok()?.contains_key("store").then_some(c.storage.store)
}

/// A flag (or its variable) that runs another store than the file names
/// says so: `--ephemeral` beside `store = "sql"` once ran in memory silently.
fn store_override(file_store: Option<StoreKind>, ephemeral_flag: bool, c: &Config) -> Option<String> {
    let file_store = file_store?;
    let running = c.store_kind();
    if running == file_store {
        return None;
    }
    let flag = match (ephemeral_flag, c.ephemeral) {
        (true, _) => "--ephemeral (HANDLED_EPHEMERAL)",
        (false, true) => "ephemeral = true",
        (false, false) => "--store (HANDLED_STORE)",
    };
    let name = |k: StoreKind| format!("{k:?}").to_ascii_lowercase();
    Some(format!(
        "{flag} overrides the configuration's store = \"{}\": serving from the {} store{}",
        name(file_store),
        name(running),
        if running.keeps_data() { "" } else { " (nothing is kept)" }
    ))
}

/// The site record tells clients where to connect: an unspecified address
/// (0.0.0.0, ::) there is unusable, and a loopback one only works on this machine.
fn check_published_address(c: &Config) -> anyhow::Result<()> {
    let published = c.public_address();
    if published.is_unspecified() {
        anyhow::bail!(
            "the site record would publish {published}, which clients cannot connect to: \
             set --public-address (public_address in the config) to this server's reachable address"
        );
    }
    if published.is_loopback() && !c.listen.is_loopback() {
        eprintln!(
            "warning: listening on {} but publishing {published} (loopback) in the site record: \
             remote clients that follow it will not reach this server (set --public-address)",
            c.listen
        );
    }
    Ok(())
}

pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let config = args.config()?;
    let mirror =
        MirrorSettings::from_config(&config.replication).map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?;
    let group = GroupSettings::from_config(&config).map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?;
    if config.replication.pull_other_transactions && !config.store_kind().dates_changes() {
        anyhow::bail!(
            "invalid configuration: replication_pull_other_transactions needs the embedded (or memory) store: the \
             queues' changes are applied by date, as in a multi-primary group (docs/multi-primary.md)"
        );
    }
    let bound = Server::bind(config).context("cannot listen")?;
    let config = &bound.config;
    let store = open_store(config).await?;
    if let Some(path) = &args.import {
        // Loading before serving replaces what is there, as the flag always did.
        let options = ImportOptions { replace: true, ..ImportOptions::for_server(config, &*store).await? };
        let spill = handled_server::import::spill_dir(config);
        let (checked, parsed) = crate::import::check_file(&*store, path, &options, spill).await?;
        let n = crate::import::load_file(&*store, parsed, path, config.case_sensitive, |_| {}).await?;
        eprintln!("{}", crate::import::summary(n, &checked, path));
    }
    // Credentials an ephemeral server put in the temp directory die with it.
    let temporary_credentials = config.ephemeral && config.admin_credentials.is_none();
    if !config.ephemeral && config.storage.store.in_data_dir() {
        eprintln!("data directory {}", absolute(&config.data_dir).display());
    }
    let booted = bound.bootstrap(store).await?;
    for path in &booted.new_credentials {
        eprintln!("admin credentials written to {} (keep this file secret)", absolute(path).display());
    }
    let _remove_at_exit = RemoveAtExit(if temporary_credentials { booted.new_credentials.clone() } else { Vec::new() });
    if let Some(settings) = mirror {
        let source = settings.source_text.clone();
        booted.start_mirror(settings).await?;
        if booted.state.mirror().is_some_and(|m| m.is_read_only()) {
            eprintln!("replication mirror of {source}: resolving from the copy, administration requests answered 301");
        }
    }
    let member = group.is_some();
    booted.start_group(group).await?;
    if member {
        eprintln!("multi-primary member: taking writes and pulling from the other primaries");
    }
    let mut server = booted.serve()?;
    let a = server.addrs;
    let homed: Vec<String> =
        server.state.homed_prefixes().iter().map(|p| String::from_utf8_lossy(p).into_owned()).collect();
    eprintln!("handled serving {} on udp {} tcp {} http {}", homed.join(", "), a.udp, a.tcp, a.http);
    if let Some(r) = a.registry {
        eprintln!("domain registry on http://{r}/");
    }
    // Handlers first: a SIGTERM right after "ready" must stop the server cleanly.
    let shutdown = shutdown_signal().context("cannot install the signal handlers")?;
    server
        .reload_on_hangup(args.config.clone(), |line| eprintln!("SIGHUP: {line}"))
        .context("cannot install the signal handlers")?;
    // Test harnesses wait for this line.
    println!("ready");
    let _ = std::io::stdout().flush();
    tokio::select! {
        _ = server.stopped_unexpectedly() => anyhow::bail!("a listener stopped unexpectedly"),
        _ = shutdown => {}
    }
    eprintln!("shutting down");
    // Requests in flight finish (within the grace), then the store closes with
    // nothing left to use it: queued writes commit and the file is left clean.
    if !server.shutdown(SHUTDOWN_GRACE).await {
        eprintln!("requests still running after {SHUTDOWN_GRACE:?} were cut");
    }
    Ok(ExitCode::SUCCESS)
}

/// Files removed when dropped: on every way out of `run`.
struct RemoveAtExit(Vec<PathBuf>);

impl Drop for RemoveAtExit {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// `path` from the root, so that a printed path means the same from any directory.
fn absolute(path: &std::path::Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// SIGTERM or SIGINT, with both handlers installed before this returns.
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = term.recv() => {}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_overriding_the_files_store_is_named() {
        let mut c = Config::default();
        c.storage.store = StoreKind::Sql;
        assert_eq!(store_override(Some(StoreKind::Sql), false, &c), None, "the file's own store");
        c.ephemeral = true;
        let warning = store_override(Some(StoreKind::Sql), true, &c).unwrap();
        assert!(warning.starts_with("--ephemeral (HANDLED_EPHEMERAL) overrides the configuration's store = \"sql\""));
        assert!(warning.contains("memory store (nothing is kept)"), "{warning}");
        c.ephemeral = false;
        c.storage.store = StoreKind::Memory;
        let warning = store_override(Some(StoreKind::Embedded), false, &c).unwrap();
        assert!(warning.starts_with("--store (HANDLED_STORE) overrides"), "{warning}");
        assert_eq!(store_override(None, true, &c), None, "no store in the file: nothing overridden");
    }
}
