//! Server configuration: one TOML file, overridden by command-line flags and
//! environment variables (the CLI applies those on top of [`Config::load`]).

use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where the store, the server key and the generated credentials live.
    pub data_dir: PathBuf,
    /// Keep everything in memory and forget it on exit (tests, CI); same as
    /// `store = "memory"`.
    pub ephemeral: bool,
    /// Where handles live: `embedded` (one crash-safe file in the data directory,
    /// the default), `memory`, `cassandra` (shared by several nodes; see
    /// the `[cassandra]` table) or `sql` (Handle.Net's SQL tables; the `[sql]` table).
    pub store: StoreKind,
    /// The Cassandra cluster, when `store = "cassandra"`.
    pub cassandra: CassandraConfig,
    /// The database, when `store = "sql"` (`config_sql.rs`).
    pub sql: crate::config_sql::SqlConfig,
    /// Template handles (`config_templates.rs`).
    pub templates: crate::config_templates::TemplatesConfig,
    /// Resolving handles homed elsewhere (`config_resolver.rs`).
    pub resolver: crate::config_resolver::ResolverConfig,
    /// Address every listener binds to.
    pub listen: IpAddr,
    /// Address published in the site record; defaults to `listen`.
    pub public_address: Option<IpAddr>,
    /// Native protocol port, UDP and TCP.
    pub port: u16,
    /// HTTP port (native tunnel, later the JSON API).
    pub http_port: u16,
    /// Prefixes homed at first start (e.g. `TEST` or `20.5000`).
    pub prefixes: Vec<String>,
    /// Compare handle suffixes case-sensitively (the prefix never is).
    pub case_sensitive: bool,
    /// Free-text description published in the site record.
    pub description: String,
    /// UDP sockets (with SO_REUSEPORT); 0 = one per core.
    pub udp_sockets: usize,
    /// While refusing (overload), run the UDP receiving threads at realtime
    /// priority (SCHED_FIFO 1) if the process may (root, CAP_SYS_NICE or
    /// LimitRTPRIO=1), so refusals do not wait for the scheduler to preempt
    /// the workers (up to 4 ms); normal priority otherwise.
    pub udp_realtime_refusals: bool,
    /// Memory per UDP socket for multi-datagram requests being put together,
    /// in MiB (each may announce up to 256 KiB); beyond it new ones are dropped.
    pub udp_reassembly_mb: usize,
    /// Unfinished multi-datagram requests one peer may have per UDP socket.
    pub udp_reassembly_per_peer: usize,
    /// Largest answer sent over UDP, in bytes (all its datagrams); a larger one
    /// is replaced by a short "ask over TCP" refusal (RC 500, on which the Java
    /// client moves to TCP), so a small request cannot bring back 250 KB.
    pub udp_max_response_bytes: usize,
    /// UDP answer bytes per second (and burst) per source address, in KiB, like
    /// DNS response-rate limiting; beyond it the "ask over TCP" refusal. 0 = no
    /// limit. Loopback sources are never limited (they cannot be spoofed).
    /// Behind a UDP balancer every client has its address: raise it or set 0.
    pub udp_rate_limit_kb: usize,
    /// Seconds an idle TCP connection may stay open between requests.
    pub tcp_idle_timeout_secs: u64,
    /// Memory for the embedded store's page cache, in MiB (the OS page cache
    /// still holds the rest of the file).
    pub store_cache_mb: usize,
    /// Longest time between durable commits of the store file (checkpoints,
    /// which run beside the writes; each 1 MiB of log starts one sooner); in
    /// between, every acknowledged write is in the synced write-ahead log.
    /// Longer: more log to replay after a crash.
    pub store_checkpoint_ms: u64,
    /// Free space (MiB) kept on the embedded store's filesystem: below it writes
    /// are refused with a clear error and `/readyz` says not ready, until space
    /// returns (no restart needed). 0: no reserve.
    pub store_min_free_mb: u64,
    /// Seconds between returns of freed heap memory to the OS (glibc's
    /// `malloc_trim`); 0 = never.
    pub memory_trim_secs: u64,
    /// Byte budget of the record cache in MiB; 0 (the default) switches it off.
    /// With the embedded store, redb's page cache already serves hot records from
    /// memory and the record cache cost ~20% under uniformly random 1M-key load
    /// (BENCHMARKS.md); it pays off with a remote store or skewed keys.
    pub cache_mb: usize,
    /// With `store = "cassandra"` and `cache_mb > 0`: this node's cluster
    /// channel (`ip:port`, a private address the other nodes reach). Writes
    /// are announced over it to every node serving from its cache before they
    /// are answered (docs/cluster.md, "A record cache coherent across nodes").
    pub cluster_listen: Option<std::net::SocketAddr>,
    /// Length of a node's lease to serve from its cache, renewed every quarter.
    pub cluster_lease_ms: u64,
    /// Clock skew allowed between nodes (keep them on NTP): a node stops
    /// serving from its cache this long before its lease ends.
    pub cluster_margin_ms: u64,
    /// Oldest view of the cluster's members a write is announced to.
    pub cluster_view_refresh_ms: u64,
    /// Longest wait for a node's acknowledgement of an announced write before
    /// it is fenced (and its lease waited out, once).
    pub cluster_ack_timeout_ms: u64,
    /// Admission control: requests processed at once...
    pub max_concurrent: usize,
    /// ...requests allowed to wait for a turn...
    pub queue_length: usize,
    /// ...and for how long, before being refused as too busy.
    pub max_queue_wait_ms: u64,
    /// Server-wide administrators, `index:handle` or `handle` (= index 0, any
    /// key of that handle), as in Handle.Net's `server_admins`. Empty: no
    /// server-wide admin; each `<prefix>/ADMIN` administers its own prefix only
    /// (a multi-tenant server), and prefix operations (home/unhome/list homed
    /// prefixes, backups) are refused. Not set at all on a single-prefix
    /// server: that prefix's admin (see [`Config::default_server_admins`]).
    pub server_admins: Vec<String>,
    /// Whether the configuration file named `server_admins` (even as `[]`).
    #[serde(skip)]
    pub server_admins_given: bool,
    /// The root (global) site record(s) — a binary HS_SITE record as
    /// GET_SITE_INFO answers, Handle.Net's binary `root_info`, or its
    /// `siteinfo.json` form (or a JSON array of them). With it, identities held on other servers (e.g. a
    /// `server_admins` entry `300:0.NA/20.5000`) are verified at the server
    /// responsible for them, found through these sites as a Handle client
    /// finds a prefix's site; without it, only local identities count.
    pub root_info: Option<PathBuf>,
    /// Longest time one remote identity check (site lookups and the
    /// verification itself) may take before it fails (406).
    pub remote_auth_timeout_ms: u64,
    /// Remote identity checks in progress at once; beyond them (after a short
    /// wait) too busy.
    pub remote_auth_concurrent: usize,
    /// Server administrators may do anything, not only home/unhome/list prefixes.
    pub server_admin_full_access: bool,
    // Replication source (crate::replication::source; Handle.Net's key names).
    /// Who may pull the transaction log and dumps (RETRIEVE_TXN_LOG,
    /// DUMP_HANDLES): `index:handle` references to HS_PUBKEY/HS_SECKEY values
    /// or HS_VLIST groups; `server_admins` may too.
    pub replication_admins: Vec<String>,
    /// Who may ask for a checkpoint (BACKUP_SERVER), besides `server_admins`.
    pub backup_admins: Vec<String>,
    /// Who may read the status handle `0.SITE/status`, besides `server_admins`
    /// (Handle.Net's key; same `index:handle` form).
    pub status_handle_admins: Vec<String>,
    /// The status handle also carries the monitor's JSON figures (index 2: disks,
    /// load, system memory, request counts), as Handle.Net's key of that name.
    pub enable_monitor_daemon: bool,
    /// Days of transaction log kept (pruned daily); a mirror further behind
    /// must be dumped again. 0 = forever.
    pub txnlog_num_days_to_keep: u64,
    /// Replication streams (log pulls and dumps) served at once; more are
    /// refused as too busy.
    pub replication_max_streams: usize,
    /// Longest wait for a mirror to take the next piece of a stream before the
    /// stream is cut (a slow reader holds at most one page meanwhile).
    pub replication_write_timeout_secs: u64,
    /// Log pulls one mirror address may hold open waiting for changes (the
    /// long-poll extension); more are answered at once.
    pub replication_waits_per_peer: usize,
    /// Longest idle time of a session; clients ask for a timeout (86 400 s by
    /// default) and get at most this.
    pub max_session_secs: u64,
    /// Longest life of a session that has not (yet) authenticated, from its
    /// setup; once authenticated it lives up to `max_session_secs` idle.
    pub unauthenticated_session_secs: u64,
    /// Memory for unauthenticated sessions, in MiB; when spent, the oldest
    /// unauthenticated session is ended to make room.
    pub session_budget_mb: usize,
    /// Unauthenticated sessions one peer (IPv4 address or IPv6 /64) may hold.
    /// Behind a TCP balancer every client has the balancer's address: raise it
    /// (and `challenges_per_peer`) there.
    pub sessions_per_peer: usize,
    /// How long a challenge waits for its answer.
    pub challenge_timeout_secs: u64,
    /// Memory for pending challenges (each keeps the challenged request, up to
    /// 256 KiB), in MiB; beyond it new challenges are refused as too busy.
    pub challenge_budget_mb: usize,
    /// Pending challenges one peer (IPv4 address or IPv6 /64) may hold.
    pub challenges_per_peer: usize,
    /// Most PBKDF2 work the server does for one secret-key answer, in
    /// iterations of 160 bits (iterations × ⌈key bits / 160⌉); the Java client
    /// sends 10,000 × 160. Answers asking for more fail authentication.
    pub max_pbkdf2_iterations: u32,
    /// CPU-heavy proof checks (PBKDF2, signatures) run at once, apart from
    /// request admission; beyond them (after a short wait) too busy.
    pub auth_workers: usize,
    /// Allow LIST_HANDLES (§3.5: a server may disable it).
    pub allow_list_handles: bool,
    // Domain registry (crate handled-registry, served by crate::registry_port).
    /// Port of the domain registry API (served at its root); unset: not served.
    pub registry_port: Option<u16>,
    /// `EXPIRES_MAX`: larger `expires` values are clamped to this many seconds.
    pub registry_expires_max: u64,
    /// Seconds between sweeps that mark expired endpoints (0: only on reads)
    /// and purge old disconnected ones.
    pub registry_sweep_secs: u64,
    /// A disconnected (expired or deleted) record is removed this many seconds
    /// after the change feed (`/registry/updated`) handed it out; until then
    /// reads still answer it (408) as the original does.
    pub registry_retention_secs: u64,
    /// ...and this long after it went, when no one reads the change feed.
    pub registry_unseen_retention_secs: u64,
    /// Hyperties one user may have (disconnected ones count until removed);
    /// beyond, a create is refused (403). 0 = no limit.
    pub registry_max_hyperties_per_user: usize,
    /// Records (hyperties and data objects) one client address may create;
    /// beyond, 403. Not applied behind `LOAD_BALANCER_IP` (every request comes
    /// from the balancer). 0 = no limit.
    pub registry_max_records_per_peer: usize,
    /// Write newly generated admin credentials here instead of the data
    /// directory (with several prefixes, `-<prefix>` goes before the extension).
    pub admin_credentials: Option<PathBuf>,
    /// The site's RSA signing key, PKCS#8 DER (e.g. a Handle.Net server key
    /// converted by `handled import-config`). Unset: `server_key.pk8` in the
    /// data directory, made at first start (or, on Cassandra, the shared one).
    pub server_key_file: Option<PathBuf>,
    // HTTP port: HTTPS, JSON API, keep-alive (crate::rest, transport::unify).
    /// PEM certificate chain and private key for HTTPS on the HTTP port;
    /// neither: a self-signed certificate made from the server key at start.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Let JSON API credentials count over plain HTTP (Handle.Net ignores them there).
    pub allow_plain_http_admin: bool,
    /// Idle seconds before a keep-alive connection is closed (also the limit
    /// for receiving a request's headers); advertised in `Keep-Alive`.
    pub http_keep_alive_secs: u64,
    /// Requests served on one HTTP connection before it is closed.
    pub http_max_requests: u64,
    /// Open TCP connections (native TCP, HTTP/HTTPS and registry ports
    /// together); beyond, a connection is refused at once (HTTP 503). Lowered at
    /// start to fit the file-descriptor limit (whose soft value is raised to the hard one).
    pub max_connections: usize,
    /// Open TCP connections from one client address; 0 = only `max_connections`.
    /// Raise it when clients arrive through a proxy or load balancer.
    pub max_connections_per_peer: usize,
    /// MiB that request bodies being received may hold together (all HTTP
    /// ports), a quarter of it from one client address; a body that does not
    /// fit is refused at once (HTTP 503).
    pub http_body_budget_mb: usize,
    // Reverse lookup (`/hrls`, crate::rest::hrls): what one search may cost.
    /// Deepest result a search may page to (`page × limit + limit`, for
    /// pages after the first).
    pub hrls_max_offset: usize,
    /// Index entries one search may read; beyond, it is refused as too broad.
    pub hrls_max_examined: usize,
    /// Longest run of one search before it is stopped (HTTP 503).
    pub hrls_search_timeout_ms: u64,
    /// Searches reading more than one batch (1000) of index entries that may
    /// run at once; more are refused at once (HTTP 503, `Retry-After`).
    pub hrls_max_scans: usize,
    /// Searches by pattern (`*`) need an authenticated caller; exact-value
    /// searches stay anonymous.
    pub hrls_patterns_need_auth: bool,
    /// Which requests get an access line (UDP, TCP and HTTP; shown with
    /// `HANDLED_LOG=warn,access=info`): "full", "sampled" or "off". Requests
    /// refused as too busy get none (the metrics count them).
    pub access_log: crate::logging::AccessLogMode,
    /// With `access_log = "sampled"`: one request in this many.
    pub access_log_sample_every: u64,
    /// Serve the web handle proxy on the HTTP port (`GET /{handle}` redirects to
    /// the handle's URL, as hdl.handle.net does); false: such a GET answers 302
    /// to `/api/handles/{handle}`, as Handle.Net with `enable_proxy = no`.
    pub enable_proxy: bool,
    // Replication mirror (crate::replication::mirror, docs/replication.md).
    /// Pull every handle from this replication source and serve it read-only:
    /// a site record file (Handle.Net's `siteinfo.json`, or `siteinfo.bin`), the
    /// `host:port` of the source's native TCP interface (its key is taken from
    /// its GET_SITE_INFO answer on first contact and pinned), or `index:handle`
    /// of an HS_SITE value (resolved at `replication_resolver`, else in our own
    /// store). Unset: this server is a primary.
    pub replication_source: Option<String>,
    /// Where to resolve an `index:handle` source, `host:port` (native TCP).
    pub replication_resolver: Option<String>,
    /// The mirror's identity, Handle.Net's form: `secretkey:INDEX:HANDLE` (the
    /// secret in `replication_secret`) or `privatekey:INDEX:HANDLE` (an RSA
    /// PKCS#8 key, DER or PEM, in `replication_private_key`). The source must
    /// list it in its `replication_admins` (or `server_admins`).
    pub replication_authentication: Option<String>,
    /// The secret of a `secretkey:` identity (or `HANDLED_REPLICATION_SECRET`).
    pub replication_secret: Option<String>,
    pub replication_private_key: Option<PathBuf>,
    /// Or the identity as a credentials file `handled serve` writes
    /// (`admin-<prefix>.json`), with `replication_credentials_key` = "secret"
    /// (default) or "public_key" choosing which of its keys answers.
    pub replication_credentials: Option<PathBuf>,
    pub replication_credentials_key: String,
    /// Time between pulls of the source's transaction log, ms (the original's
    /// code: 30 000). In low-latency mode, how long the source may hold a pull
    /// open waiting for a transaction.
    pub replication_interval_ms: u64,
    /// Longest wait for any read from the source (connect, answer, each piece
    /// of a stream), ms; the original's default is 300 000.
    pub replication_timeout_ms: u64,
    /// Long-poll: ask again at once, and let a `handled` source hold the
    /// request until a transaction arrives (a trailing wait time in
    /// RETRIEVE_TXN_LOG, which Handle.Net sources ignore), so this mirror is
    /// milliseconds behind instead of up to an interval.
    pub replication_low_latency: bool,
    /// Only these prefixes (and their dotted children, `20.5000` → `20.5000.1`)
    /// are taken from the source: handles, and homing. Empty: whatever the
    /// source homes. Either way, a prefix in `prefixes` is never unhomed by
    /// the source, and malformed prefix names are never homed.
    pub replication_prefixes: Vec<String>,
}

/// A prefix as `prefixes` takes it (without `0.NA/`).
pub fn is_prefix_name(p: &str) -> bool {
    !p.is_empty() && !p.contains('/') && !p.chars().any(|c| c.is_control() || c.is_whitespace())
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from("data"),
            ephemeral: false,
            store: StoreKind::Embedded,
            cassandra: CassandraConfig::default(),
            sql: crate::config_sql::SqlConfig::default(),
            templates: Default::default(),
            resolver: Default::default(),
            listen: IpAddr::from([127, 0, 0, 1]),
            public_address: None,
            port: 2641,
            http_port: 8000,
            prefixes: vec!["TEST".to_string()],
            case_sensitive: false,
            description: "handled".to_string(),
            udp_sockets: 0,
            udp_realtime_refusals: true,
            udp_reassembly_mb: 4,
            udp_reassembly_per_peer: 8,
            udp_max_response_bytes: 8192,
            udp_rate_limit_kb: 1024,
            tcp_idle_timeout_secs: 60,
            server_admins: Vec::new(),
            server_admins_given: false,
            store_cache_mb: 64,
            store_checkpoint_ms: 2000,
            store_min_free_mb: 64,
            memory_trim_secs: 30,
            cache_mb: 0,
            cluster_listen: None,
            cluster_lease_ms: 2000,
            cluster_margin_ms: 250,
            cluster_view_refresh_ms: 500,
            cluster_ack_timeout_ms: 200,
            max_concurrent: 256,
            queue_length: 2048,
            max_queue_wait_ms: 1000,
            server_admin_full_access: true,
            root_info: None,
            remote_auth_timeout_ms: 5_000,
            remote_auth_concurrent: 4,
            replication_admins: Vec::new(),
            backup_admins: Vec::new(),
            status_handle_admins: Vec::new(),
            enable_monitor_daemon: false,
            txnlog_num_days_to_keep: 0,
            replication_max_streams: 4,
            replication_write_timeout_secs: 60,
            replication_waits_per_peer: 2,
            max_session_secs: 86_400,
            unauthenticated_session_secs: 30,
            session_budget_mb: 16,
            sessions_per_peer: 256,
            challenge_timeout_secs: 60,
            challenge_budget_mb: 32,
            challenges_per_peer: 256,
            max_pbkdf2_iterations: 10_000,
            auth_workers: 1,
            allow_list_handles: true,
            registry_port: None,
            registry_expires_max: 3600,
            registry_sweep_secs: 60,
            registry_retention_secs: 86_400,
            registry_unseen_retention_secs: 7 * 86_400,
            registry_max_hyperties_per_user: 1_000,
            registry_max_records_per_peer: 100_000,
            admin_credentials: None,
            server_key_file: None,
            tls_cert: None,
            tls_key: None,
            allow_plain_http_admin: false,
            http_keep_alive_secs: 15,
            http_max_requests: 100_000,
            max_connections: 10_000,
            max_connections_per_peer: 2_000,
            http_body_budget_mb: 256,
            hrls_max_offset: 10_000,
            hrls_max_examined: 100_000,
            hrls_search_timeout_ms: 2_000,
            hrls_max_scans: 1,
            hrls_patterns_need_auth: false,
            access_log: crate::logging::AccessLogMode::Full,
            access_log_sample_every: 100,
            enable_proxy: true,
            replication_source: None,
            replication_resolver: None,
            replication_authentication: None,
            replication_secret: None,
            replication_private_key: None,
            replication_credentials: None,
            replication_credentials_key: "secret".into(),
            replication_interval_ms: 30_000,
            replication_timeout_ms: 300_000,
            replication_low_latency: false,
            replication_prefixes: Vec::new(),
        }
    }
}

/// The store backend (`store = "…"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    #[default]
    Embedded,
    Memory,
    Cassandra,
    Sql,
}

impl std::str::FromStr for StoreKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "embedded" => Ok(StoreKind::Embedded),
            "memory" => Ok(StoreKind::Memory),
            "cassandra" => Ok(StoreKind::Cassandra),
            "sql" => Ok(StoreKind::Sql),
            other => Err(format!("unknown store {other:?}: embedded, memory, cassandra or sql")),
        }
    }
}

/// The `[cassandra]` table: how nodes reach the shared cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CassandraConfig {
    /// `host:port` of some nodes; the driver discovers the others.
    pub contact_points: Vec<String>,
    /// Keyspace of this registry (created with `replication` when missing).
    pub keyspace: String,
    /// `"3"` (SimpleStrategy, replication factor 3) or `"dc1:3,dc2:3"`.
    pub replication: String,
    /// Reads and writes: `QUORUM` (default) or `LOCAL_QUORUM` with several data centres.
    pub consistency: String,
    /// Lightweight transactions: `SERIAL` (default) or `LOCAL_SERIAL`.
    pub serial_consistency: String,
    /// Plain-text authentication (the password from `HANDLED_CASSANDRA_PASSWORD`
    /// or `password`).
    pub username: Option<String>,
    pub password: Option<String>,
    /// PEM CA certificate of the cluster: TLS to every node.
    pub tls_ca: Option<PathBuf>,
    /// Longest time of one request to the cluster.
    pub request_timeout_ms: u64,
    /// A read not answered in this time is also sent to another replica (0: off).
    pub speculative_read_ms: u64,
    /// Keep the transaction log Handle.Net mirrors pull (replication source).
    /// Off by default: it costs three more lightweight transactions per change
    /// (about half the creates/s on one node, docs/cluster.md). Set it alike on
    /// every node; mirrors attached after turning it on start with a dump.
    pub replication_log: bool,
}

impl Default for CassandraConfig {
    fn default() -> Self {
        CassandraConfig {
            contact_points: vec!["127.0.0.1:9042".into()],
            keyspace: "handled".into(),
            replication: "3".into(),
            consistency: "QUORUM".into(),
            serial_consistency: "SERIAL".into(),
            username: None,
            password: None,
            tls_ca: None,
            request_timeout_ms: 5000,
            speculative_read_ms: 50,
            replication_log: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    /// One line: where in the file, and what is wrong there.
    #[error("invalid config file {}:{line}:{column}: {message}", path.display())]
    Parse { path: PathBuf, line: usize, column: usize, message: String },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// toml's error names the line in a multi-line drawing and, for an unknown key,
/// lists every known one: keep the position and say which key was meant.
fn parse_error(path: &Path, text: &str, e: &toml::de::Error) -> ConfigError {
    let at = e.span().map_or(0, |s| s.start.min(text.len()));
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    let message = e.message().trim();
    let message = match unknown_key(message) {
        Some((key, known)) => match known.iter().min_by_key(|k| strsim::levenshtein(key, k)) {
            Some(best) if strsim::levenshtein(key, best) <= 3 => format!("unknown key `{key}`; did you mean `{best}`?"),
            _ => format!("unknown key `{key}` (README's Configuration lists every key)"),
        },
        None => message.to_string(),
    };
    ConfigError::Parse { path: path.to_owned(), line, column, message }
}

/// `unknown field `x`, expected one of `a`, `b`` → ("x", ["a", "b"]).
fn unknown_key(message: &str) -> Option<(&str, Vec<&str>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (key, rest) = rest.split_once('`')?;
    let known = rest.split('`').skip(1).step_by(2).collect();
    Some((key, known))
}

impl Config {
    /// Read a TOML file; a missing `path` means all defaults.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let Some(path) = path else { return Ok(Config::default()) };
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        let mut config: Config = toml::from_str(&text).map_err(|e| parse_error(path, &text, &e))?;
        config.server_admins_given = text.parse::<toml::Table>().is_ok_and(|t| t.contains_key("server_admins"));
        Ok(config)
    }

    /// Handle.Net's setup makes the admin of the server's prefix a server
    /// administrator (`300:0.NA/<prefix>` in `server_admins`), so that it may
    /// also take backups and home prefixes. Likewise here: a server homing one
    /// prefix whose configuration does not set `server_admins` has
    /// `300:<prefix>/ADMIN` and `301:<prefix>/ADMIN` (its secret and RSA keys)
    /// as server administrators. `server_admins = []` keeps none.
    pub fn default_server_admins(&mut self) {
        if let Some(defaults) = self.default_admins() {
            if !self.server_admins_given && self.server_admins.is_empty() {
                self.server_admins = defaults;
            }
        }
    }

    /// A single-prefix server's default server admins (300: and 301:<prefix>/ADMIN).
    fn default_admins(&self) -> Option<Vec<String>> {
        match &self.prefixes[..] {
            [prefix] => Some(vec![format!("300:{prefix}/ADMIN"), format!("301:{prefix}/ADMIN")]),
            _ => None,
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        self.templates.validate().map_err(ConfigError::Invalid)?;
        self.resolver.validate(self.root_info.as_deref()).map_err(ConfigError::Invalid)?;
        if self.prefixes.is_empty() {
            return Err(ConfigError::Invalid("at least one prefix must be homed".into()));
        }
        for p in self.prefixes.iter().chain(&self.replication_prefixes) {
            if !is_prefix_name(p) {
                return Err(ConfigError::Invalid(format!("bad prefix {p:?}: no '/', spaces or control characters")));
            }
        }
        self.parsed_server_admins()?;
        if let Some(path) = &self.root_info {
            handled_client::sites::load_root_info(path).map_err(ConfigError::Invalid)?;
        }
        parse_admin_list(&self.replication_admins)?;
        parse_admin_list(&self.backup_admins)?;
        parse_admin_list(&self.status_handle_admins)?;
        if self.store_kind() == StoreKind::Sql {
            self.sql.options().map_err(ConfigError::Invalid)?;
            let (registry, mirror) = (self.registry_port.is_some(), self.replication_source.is_some());
            crate::config_sql::check_compatible(self.cache_mb, registry, mirror).map_err(ConfigError::Invalid)?;
        }
        if self.store_kind() == StoreKind::Cassandra {
            self.cassandra_options()?;
            if self.cache_mb > 0 && self.cluster_listen.is_none() {
                // A per-node cache alone would answer with an old record after
                // another node's write.
                return Err(ConfigError::Invalid(
                    "cache_mb > 0 with store = \"cassandra\" needs cluster_listen (this node's cluster channel \
                     address), so that writes on other nodes reach its cache"
                        .into(),
                ));
            }
        } else if self.cluster_listen.is_some() {
            return Err(ConfigError::Invalid("cluster_listen is for nodes sharing store = \"cassandra\"".into()));
        }
        if let Some(addr) = self.cluster_listen {
            if addr.ip().is_unspecified() || addr.port() == 0 {
                return Err(ConfigError::Invalid(format!(
                    "cluster_listen {addr}: the other nodes connect to it, so it needs an address and a port"
                )));
            }
            let lease = self.cluster_lease_ms;
            if lease < 400
                || self.cluster_margin_ms * 4 > lease
                || self.cluster_view_refresh_ms * 2 > lease
                || self.cluster_ack_timeout_ms == 0
            {
                return Err(ConfigError::Invalid(
                    "cluster timings: cluster_lease_ms ≥ 400, cluster_margin_ms ≤ lease/4, \
                     cluster_view_refresh_ms ≤ lease/2, cluster_ack_timeout_ms > 0"
                        .into(),
                ));
            }
        }
        Ok(())
    }

    /// The cluster timings from the `cluster_*` keys.
    pub fn cluster_timings(&self) -> crate::cluster::coherence::Timings {
        let ms = std::time::Duration::from_millis;
        crate::cluster::coherence::Timings {
            lease: ms(self.cluster_lease_ms),
            margin: ms(self.cluster_margin_ms),
            view_refresh: ms(self.cluster_view_refresh_ms),
            ack_timeout: ms(self.cluster_ack_timeout_ms),
        }
    }

    /// Which backend to open (`ephemeral` wins over `store`).
    pub fn store_kind(&self) -> StoreKind {
        if self.ephemeral {
            StoreKind::Memory
        } else {
            self.store
        }
    }

    /// The backend to open and its settings (`store`, `ephemeral`, the
    /// `store_*` keys, the `[cassandra]` table), for `handled_store::open_store`.
    pub fn store_config(&self) -> Result<handled_store::StoreConfig, ConfigError> {
        use handled_store::{EmbeddedOptions, StoreConfig};
        Ok(match self.store_kind() {
            StoreKind::Memory => StoreConfig::Memory,
            StoreKind::Embedded => StoreConfig::Embedded {
                file: self.data_dir.join(handled_store::STORE_FILE_NAME),
                options: EmbeddedOptions {
                    cache_bytes: Some(self.store_cache_mb.max(1) << 20),
                    checkpoint_interval: std::time::Duration::from_millis(self.store_checkpoint_ms.max(1)),
                    min_free_bytes: self.store_min_free_mb << 20,
                    ..EmbeddedOptions::default()
                },
            },
            StoreKind::Cassandra => StoreConfig::Cassandra(self.cassandra_options()?),
            StoreKind::Sql => StoreConfig::Sql(self.sql.options().map_err(ConfigError::Invalid)?),
        })
    }

    /// The driver options of the `[cassandra]` table.
    pub fn cassandra_options(&self) -> Result<handled_store::CassandraOptions, ConfigError> {
        use handled_store::cassandra::{parse_consistency, parse_serial_consistency};
        let c = &self.cassandra;
        let invalid = |e: String| ConfigError::Invalid(format!("cassandra: {e}"));
        if c.contact_points.is_empty() {
            return Err(invalid("contact_points is empty".into()));
        }
        let password = std::env::var("HANDLED_CASSANDRA_PASSWORD").ok().or_else(|| c.password.clone());
        let credentials = match (&c.username, password) {
            (Some(u), Some(p)) => Some((u.clone(), p)),
            (Some(_), None) => return Err(invalid("username without a password (HANDLED_CASSANDRA_PASSWORD)".into())),
            (None, _) => None,
        };
        Ok(handled_store::CassandraOptions {
            contact_points: c.contact_points.clone(),
            keyspace: c.keyspace.clone(),
            replication: c.replication.clone(),
            consistency: parse_consistency(&c.consistency).map_err(invalid)?,
            serial_consistency: parse_serial_consistency(&c.serial_consistency).map_err(invalid)?,
            credentials,
            tls_ca_file: c.tls_ca.clone(),
            request_timeout: std::time::Duration::from_millis(c.request_timeout_ms.max(1)),
            speculative_read_after: (c.speculative_read_ms > 0)
                .then(|| std::time::Duration::from_millis(c.speculative_read_ms)),
            txn_log: c.replication_log,
            ..handled_store::CassandraOptions::default()
        })
    }

    /// The server-wide administrators as (handle, index) references.
    pub fn parsed_server_admins(&self) -> Result<Vec<(Vec<u8>, i32)>, ConfigError> {
        parse_admin_list(&self.server_admins)
    }

    /// Without `server_admins`, each configured prefix's `<prefix>/ADMIN` and
    /// the prefix handle (`0.NA/<PREFIX>`) it administers.
    pub fn prefix_admins(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        // Defaulted server admins (not written by the operator) keep the
        // prefix's other keys (`303:TEST/ADMIN`) the prefix admins they were.
        let defaulted = !self.server_admins_given && self.default_admins().as_ref() == Some(&self.server_admins);
        if !self.server_admins.is_empty() && !defaulted {
            return Vec::new();
        }
        let prefix_handle = |p: &str| handled_proto::handle::normalize(format!("0.NA/{p}").as_bytes(), false);
        self.prefixes.iter().map(|p| (format!("{p}/ADMIN").into_bytes(), prefix_handle(p))).collect()
    }

    pub fn public_address(&self) -> IpAddr {
        self.public_address.unwrap_or(self.listen)
    }

    pub fn udp_socket_count(&self) -> usize {
        if self.udp_sockets > 0 {
            self.udp_sockets
        } else {
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
        }
    }
}

/// A list of admin references (`server_admins`, `replication_admins`, ...).
pub fn parse_admin_list(list: &[String]) -> Result<Vec<(Vec<u8>, i32)>, ConfigError> {
    list.iter().map(|a| parse_admin_ref(a)).collect()
}

/// `300:TEST/ADMIN` or `TEST/ADMIN` (index 0).
pub fn parse_admin_ref(text: &str) -> Result<(Vec<u8>, i32), ConfigError> {
    let bad = || ConfigError::Invalid(format!("bad admin reference {text:?}: expected INDEX:PREFIX/SUFFIX"));
    let (index, handle) = match text.split_once(':') {
        Some((i, h)) if !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()) => (i.parse().map_err(|_| bad())?, h),
        _ => (0, text),
    };
    if !handle.contains('/') || handle.starts_with('/') {
        return Err(bad());
    }
    Ok((handle.as_bytes().to_vec(), index))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.toml");
        std::fs::write(&path, text).unwrap();
        Config::load(Some(&path)).unwrap_err().to_string()
    }

    #[test]
    fn a_misspelt_key_is_one_line_with_its_place_and_the_key_meant() {
        let e = load_text("port = 2641\nmax_concurent = 5\n");
        assert!(e.ends_with("h.toml:2:1: unknown key `max_concurent`; did you mean `max_concurrent`?"), "{e}");
        assert_eq!(e.lines().count(), 1);
        let e = load_text("port = 2641\nzzzzzz = 1\n");
        assert!(e.ends_with("h.toml:2:1: unknown key `zzzzzz` (README's Configuration lists every key)"), "{e}");
        let e = load_text("port = \"x\"\n");
        assert!(e.contains("h.toml:1:8: ") && e.lines().count() == 1, "{e}");
    }

    #[test]
    fn replication_admin_lists_are_checked_at_start() {
        let c: Config = toml::from_str("replication_admins = [\"300:TEST/MIRROR\", \"200:TEST/GROUP\"]\n").unwrap();
        assert!(c.validate().is_ok());
        assert_eq!(parse_admin_list(&c.replication_admins).unwrap()[1], (b"TEST/GROUP".to_vec(), 200));
        let c = Config { backup_admins: vec!["nohandle".into()], ..Config::default() };
        assert!(c.validate().is_err());
    }

    #[test]
    fn parses_toml_and_rejects_unknown_keys() {
        let c: Config = toml::from_str("port = 3000\nprefixes = [\"20.5000\"]\n").unwrap();
        assert_eq!(c.port, 3000);
        assert_eq!(c.http_port, 8000);
        assert!(toml::from_str::<Config>("prot = 1").is_err());
    }

    #[test]
    fn cassandra_table_parses_and_validates() {
        let c: Config = toml::from_str(
            "store = \"cassandra\"\n[cassandra]\ncontact_points = [\"127.0.0.2:9042\"]\nconsistency = \"LOCAL_QUORUM\"\n",
        )
        .unwrap();
        assert_eq!(c.store_kind(), StoreKind::Cassandra);
        let o = c.cassandra_options().unwrap();
        assert_eq!(o.contact_points, ["127.0.0.2:9042"]);
        assert_eq!(o.replication, "3");
        let bad: Config = toml::from_str("store = \"cassandra\"\n[cassandra]\nconsistency = \"MOST\"\n").unwrap();
        assert!(bad.validate().is_err());
        assert!(toml::from_str::<Config>("store = \"postgres\"").is_err());
        assert!(
            Config { cache_mb: 8, ..c.clone() }.validate().is_err(),
            "no lone per-node record cache on a shared store"
        );
        let node = Config { cache_mb: 8, cluster_listen: Some("127.0.0.1:7400".parse().unwrap()), ..c.clone() };
        node.validate().unwrap();
        assert!(Config { cluster_lease_ms: 100, ..node.clone() }.validate().is_err());
        assert!(Config { cluster_listen: Some("0.0.0.0:7400".parse().unwrap()), ..node }.validate().is_err());
        assert_eq!(Config { ephemeral: true, ..c }.store_kind(), StoreKind::Memory);
    }

    #[test]
    fn validates_prefixes() {
        let mut c = Config { prefixes: vec!["A/B".into()], ..Config::default() };
        assert!(c.validate().is_err());
        c.prefixes.clear();
        assert!(c.validate().is_err());
    }

    #[test]
    fn a_single_prefix_server_without_server_admins_has_its_admin_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let load = |text: &str, prefixes: &[&str]| {
            let path = dir.path().join("c.toml");
            std::fs::write(&path, text).unwrap();
            let mut c = Config::load(Some(&path)).unwrap();
            c.prefixes = prefixes.iter().map(|p| p.to_string()).collect();
            c.default_server_admins();
            c.server_admins
        };
        assert_eq!(load("", &["20.5000"]), ["300:20.5000/ADMIN", "301:20.5000/ADMIN"]);
        assert_eq!(load("", &["A", "B"]), Vec::<String>::new(), "several prefixes: each admin its own");
        assert_eq!(load("server_admins = []\n", &["A"]), Vec::<String>::new(), "none, as written");
        assert_eq!(load("server_admins = [\"300:0.NA/A\"]\n", &["A"]), ["300:0.NA/A"]);
        let mut c = Config::default();
        c.default_server_admins();
        assert_eq!(c.server_admins, ["300:TEST/ADMIN", "301:TEST/ADMIN"], "no file at all");
        // The defaults add server admins; the prefix's other keys stay its admins.
        assert_eq!(c.prefix_admins(), vec![(b"TEST/ADMIN".to_vec(), b"0.NA/TEST".to_vec())]);
        c.server_admins_given = true;
        assert!(c.prefix_admins().is_empty(), "written by the operator: Handle.Net's semantics");
    }

    #[test]
    fn server_admins_default_and_parse() {
        let mut c = Config { prefixes: vec!["A".into(), "20.5000".into()], ..Config::default() };
        assert_eq!(c.parsed_server_admins().unwrap(), vec![]);
        assert_eq!(
            c.prefix_admins(),
            vec![(b"A/ADMIN".to_vec(), b"0.NA/A".to_vec()), (b"20.5000/ADMIN".to_vec(), b"0.NA/20.5000".to_vec())]
        );
        c.server_admins = vec!["300:X/Y".into(), "X/Z".into()];
        assert_eq!(c.parsed_server_admins().unwrap(), vec![(b"X/Y".to_vec(), 300), (b"X/Z".to_vec(), 0)]);
        assert!(c.prefix_admins().is_empty(), "explicit server admins: Handle.Net's semantics");
        c.server_admins = vec!["nohandle".into()];
        assert!(c.validate().is_err());
    }
}
