//! Where handles live: the backend (`store`), the embedded store's page cache
//! and checkpoints, the record cache, and the `[cassandra]` and `[sql]` tables.

use super::ConfigError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct StorageConfig {
    /// Where handles live: `embedded` (one crash-safe file in the data directory,
    /// the default), `memory`, `cassandra` (shared by several nodes; see
    /// the `[cassandra]` table) or `sql` (Handle.Net's SQL tables; the `[sql]` table).
    pub store: StoreKind,
    /// Memory for the embedded store's page cache, in MiB (the OS page cache
    /// still holds the rest of the file).
    #[serde(rename = "store_cache_mb")]
    pub page_cache_mb: usize,
    /// Longest time between durable commits of the store file (checkpoints,
    /// which run beside the writes; each 1 MiB of log starts one sooner); in
    /// between, every acknowledged write is in the synced write-ahead log.
    /// Longer: more log to replay after a crash.
    #[serde(rename = "store_checkpoint_ms")]
    pub checkpoint_ms: u64,
    /// Free space (MiB) kept on the embedded store's filesystem: below it writes
    /// are refused with a clear error and `/readyz` says not ready, until space
    /// returns (no restart needed). 0: no reserve.
    #[serde(rename = "store_min_free_mb")]
    pub min_free_mb: u64,
    /// Read the embedded store's file once in order after a start (at most
    /// half the available memory), so that a file the OS page cache dropped
    /// comes back at disk speed rather than a random read per lookup; `/readyz`
    /// says not ready until it is done. Off: lookups warm it as they come.
    #[serde(rename = "store_warm_on_start")]
    pub warm_on_start: bool,
    /// Serve handle lookups from the embedded store through a key directory
    /// (a hash of every key in memory pointing into append-only record files
    /// read through `mmap`; ~20–40 bytes of memory per handle, and on disk
    /// ~105 bytes of its files against ~65 fewer in the store file): a lookup
    /// stays flat as the store grows (at 30M handles, 0.77 of the 10k rate
    /// against 0.26 without). The first start with it writes the directory
    /// from the store file, and records written with it are kept there alone
    /// (the store file holds their locations); a start with it off moves them
    /// back into the store file first (docs/architecture.md, BENCHMARKS.md). On
    /// by default; off saves the memory where the store is small.
    #[serde(rename = "store_key_directory")]
    pub key_directory: bool,
    /// Byte budget of the record cache in MiB; 0 (the default) switches it off.
    /// With the embedded store, redb's page cache already serves hot records from
    /// memory and the record cache cost ~20% under uniformly random 1M-key load
    /// (BENCHMARKS.md); it pays off with a remote store or skewed keys.
    #[serde(rename = "cache_mb")]
    pub record_cache_mb: usize,
    /// The Cassandra cluster, when `store = "cassandra"`.
    pub cassandra: CassandraConfig,
    /// The database, when `store = "sql"` (`config/sql.rs`).
    pub sql: super::sql::SqlConfig,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            store: StoreKind::Embedded,
            page_cache_mb: 64,
            checkpoint_ms: 2000,
            min_free_mb: 64,
            warm_on_start: true,
            key_directory: true,
            record_cache_mb: 0,
            cassandra: CassandraConfig::default(),
            sql: super::sql::SqlConfig::default(),
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

/// What the rest of the server asks of a backend before it is open: the
/// answers live here, beside the names, so nothing else branches on the kind.
impl StoreKind {
    /// Dates each change in the commit that makes it, as a multi-primary
    /// group and a mirror pulling every queue need (docs/multi-primary.md).
    pub fn dates_changes(self) -> bool {
        matches!(self, StoreKind::Embedded | StoreKind::Memory)
    }

    /// Keeps its data in the data directory (the embedded store's files).
    pub fn in_data_dir(self) -> bool {
        self == StoreKind::Embedded
    }

    /// `handled compact` can rewrite its file (the embedded store's); the
    /// others are compacted by their database's own tools.
    pub fn compactable(self) -> bool {
        self == StoreKind::Embedded
    }

    /// What it holds outlives the process (not the memory store).
    pub fn keeps_data(self) -> bool {
        self != StoreKind::Memory
    }

    /// The domain registry's name for it (the reThink registry's `STORAGE_TYPE`).
    pub fn registry_storage_type(self) -> &'static str {
        match self {
            StoreKind::Memory => "Ram",
            StoreKind::Embedded => "Embedded",
            StoreKind::Cassandra => "Cassandra",
            StoreKind::Sql => "Sql", // refused at start (config::sql::check_compatible)
        }
    }
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

impl CassandraConfig {
    /// The driver options of the `[cassandra]` table.
    pub fn options(&self) -> Result<handled_store::CassandraOptions, ConfigError> {
        use handled_store::cassandra::{parse_consistency, parse_serial_consistency};
        let c = self;
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
}
