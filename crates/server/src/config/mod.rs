//! Server configuration: one TOML file, overridden by command-line flags and
//! environment variables (the CLI applies those on top of [`Config::load`]).

mod access;
mod admission;
mod auth;
mod cluster;
mod diagnostics;
mod registry;
mod replication;
pub mod resolver;
mod reverse_lookup;
pub mod sql;
mod storage;
pub mod templates;
mod transport;

pub use access::AccessConfig;
pub use admission::AdmissionConfig;
pub use auth::{parse_admin_list, parse_admin_ref, AuthConfig};
pub use cluster::ClusterConfig;
pub use registry::RegistryConfig;
pub use replication::ReplicationConfig;
pub use reverse_lookup::ReverseLookupConfig;
pub use storage::{CassandraConfig, StorageConfig, StoreKind};
pub use transport::TransportConfig;

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
    /// Template handles (the `[templates]` table).
    pub templates: templates::TemplatesConfig,
    /// Resolving handles homed elsewhere (the `[resolver]` table).
    pub resolver: resolver::ResolverConfig,
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
    /// Seconds between returns of freed heap memory to the OS (glibc's
    /// `malloc_trim`); 0 = never.
    pub memory_trim_secs: u64,
    /// The root (global) site record(s) — a binary HS_SITE record as
    /// GET_SITE_INFO answers, Handle.Net's binary `root_info`, or its
    /// `siteinfo.json` form (or a JSON array of them). With it, identities held on other servers (e.g. a
    /// `server_admins` entry `300:0.NA/20.5000`) are verified at the server
    /// responsible for them, found through these sites as a Handle client
    /// finds a prefix's site; without it, only local identities count.
    pub root_info: Option<PathBuf>,
    /// The status handle also carries the monitor's JSON figures (index 2: disks,
    /// load, system memory, request counts), as Handle.Net's key of that name.
    pub enable_monitor_daemon: bool,
    /// Write newly generated admin credentials here instead of the data
    /// directory (with several prefixes, `-<prefix>` goes before the extension).
    pub admin_credentials: Option<PathBuf>,
    /// The site's RSA signing key, PKCS#8 DER (e.g. a Handle.Net server key
    /// converted by `handled import-config`). Unset: `server_key.pk8` in the
    /// data directory, made at first start (or, on Cassandra, the shared one).
    pub server_key_file: Option<PathBuf>,
    // Per-subsystem sections. Their keys stay top-level in the file (the
    // documented spellings); each section is its own type for the code.
    /// Where handles live (`store`, `store_*`, `cache_mb`, `[cassandra]`, `[sql]`).
    #[serde(flatten)]
    pub storage: StorageConfig,
    /// UDP, TCP and the HTTP port.
    #[serde(flatten)]
    pub transport: TransportConfig,
    /// Requests at once, waiting, and for how long.
    #[serde(flatten)]
    pub admission: AdmissionConfig,
    /// Who may do what (the keys SIGHUP reloads).
    #[serde(flatten)]
    pub access: AccessConfig,
    /// What authentication may cost, backup admins.
    #[serde(flatten)]
    pub auth: AuthConfig,
    /// The cluster channel of nodes sharing Cassandra (`cluster_*`).
    #[serde(flatten)]
    pub cluster: ClusterConfig,
    /// The domain registry API (`registry_*`).
    #[serde(flatten)]
    pub registry: RegistryConfig,
    /// Replication source and mirror (`replication_*`).
    #[serde(flatten)]
    pub replication: ReplicationConfig,
    /// Reverse lookup (`hrls_*`).
    #[serde(flatten)]
    pub reverse_lookup: ReverseLookupConfig,
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
            templates: Default::default(),
            resolver: Default::default(),
            listen: IpAddr::from([127, 0, 0, 1]),
            public_address: None,
            port: 2641,
            http_port: 8000,
            prefixes: vec!["TEST".to_string()],
            case_sensitive: false,
            description: "handled".to_string(),
            memory_trim_secs: 30,
            root_info: None,
            enable_monitor_daemon: false,
            admin_credentials: None,
            server_key_file: None,
            storage: StorageConfig::default(),
            transport: TransportConfig::default(),
            admission: AdmissionConfig::default(),
            access: AccessConfig::default(),
            auth: AuthConfig::default(),
            cluster: ClusterConfig::default(),
            registry: RegistryConfig::default(),
            replication: ReplicationConfig::default(),
            reverse_lookup: ReverseLookupConfig::default(),
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

impl Config {
    /// Read a TOML file; a missing `path` means all defaults.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let Some(path) = path else { return Ok(Config::default()) };
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        let mut config: Config = toml::from_str(&text).map_err(|e| diagnostics::parse_error(path, &text, &e))?;
        config.access.server_admins_given = text.parse::<toml::Table>().is_ok_and(|t| t.contains_key("server_admins"));
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
            if !self.access.server_admins_given && self.access.server_admins.is_empty() {
                self.access.server_admins = defaults;
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
        for p in self.prefixes.iter().chain(&self.replication.prefixes) {
            if !is_prefix_name(p) {
                return Err(ConfigError::Invalid(format!("bad prefix {p:?}: no '/', spaces or control characters")));
            }
        }
        self.parsed_server_admins()?;
        if let Some(path) = &self.root_info {
            handled_client::sites::load_root_info(path).map_err(ConfigError::Invalid)?;
        }
        parse_admin_list(&self.replication.admins)?;
        parse_admin_list(&self.auth.backup_admins)?;
        parse_admin_list(&self.access.status_handle_admins)?;
        if self.store_kind() == StoreKind::Sql {
            self.storage.sql.options().map_err(ConfigError::Invalid)?;
            let (registry, mirror) = (self.registry.port.is_some(), self.replication.source.is_some());
            let log = self.storage.sql.replication_log;
            sql::check_compatible(self.storage.record_cache_mb, registry, mirror, log).map_err(ConfigError::Invalid)?;
            if mirror && self.storage.sql.meta_table == Some(false) {
                // The pull's progress is server metadata, kept in handled_meta.
                return Err(ConfigError::Invalid(
                    "replication_source with store = \"sql\" needs the handled_meta table (the mirror's progress, \
                     committed with each change): leave [sql] meta_table unset or true"
                        .into(),
                ));
            }
        }
        if self.store_kind() == StoreKind::Cassandra {
            self.storage.cassandra.options()?;
            if self.storage.record_cache_mb > 0 && self.cluster.listen.is_none() {
                // A per-node cache alone would answer with an old record after
                // another node's write.
                return Err(ConfigError::Invalid(
                    "cache_mb > 0 with store = \"cassandra\" needs cluster_listen (this node's cluster channel \
                     address), so that writes on other nodes reach its cache"
                        .into(),
                ));
            }
        } else if self.cluster.listen.is_some() {
            return Err(ConfigError::Invalid("cluster_listen is for nodes sharing store = \"cassandra\"".into()));
        }
        if let Some(addr) = self.cluster.listen {
            if addr.ip().is_unspecified() || addr.port() == 0 {
                return Err(ConfigError::Invalid(format!(
                    "cluster_listen {addr}: the other nodes connect to it, so it needs an address and a port"
                )));
            }
            let lease = self.cluster.lease_ms;
            if lease < 400
                || self.cluster.margin_ms * 4 > lease
                || self.cluster.view_refresh_ms * 2 > lease
                || self.cluster.ack_timeout_ms == 0
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

    /// Which backend to open (`ephemeral` wins over `store`).
    pub fn store_kind(&self) -> StoreKind {
        if self.ephemeral {
            StoreKind::Memory
        } else {
            self.storage.store
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
                    cache_bytes: Some(self.storage.page_cache_mb.max(1) << 20),
                    checkpoint_interval: std::time::Duration::from_millis(self.storage.checkpoint_ms.max(1)),
                    min_free_bytes: self.storage.min_free_mb << 20,
                    warm_on_open: self.storage.warm_on_start,
                    key_directory: self.storage.key_directory,
                    ..EmbeddedOptions::default()
                },
            },
            StoreKind::Cassandra => StoreConfig::Cassandra(self.storage.cassandra.options()?),
            StoreKind::Sql => StoreConfig::Sql(handled_store::SqlOptions {
                local_meta_file: Some(self.data_dir.join(handled_store::SQL_META_FILE_NAME)),
                ..self.storage.sql.options().map_err(ConfigError::Invalid)?
            }),
        })
    }

    /// The server-wide administrators as (handle, index) references.
    pub fn parsed_server_admins(&self) -> Result<Vec<(Vec<u8>, i32)>, ConfigError> {
        parse_admin_list(&self.access.server_admins)
    }

    /// Without `server_admins`, each configured prefix's `<prefix>/ADMIN` and
    /// the prefix handle (`0.NA/<PREFIX>`) it administers.
    pub fn prefix_admins(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        // Defaulted server admins (not written by the operator) keep the
        // prefix's other keys (`303:TEST/ADMIN`) the prefix admins they were.
        let defaulted =
            !self.access.server_admins_given && self.default_admins().as_ref() == Some(&self.access.server_admins);
        if !self.access.server_admins.is_empty() && !defaulted {
            return Vec::new();
        }
        let prefix_handle = |p: &str| handled_proto::handle::normalize(format!("0.NA/{p}").as_bytes(), false);
        self.prefixes.iter().map(|p| (format!("{p}/ADMIN").into_bytes(), prefix_handle(p))).collect()
    }

    pub fn public_address(&self) -> IpAddr {
        self.public_address.unwrap_or(self.listen)
    }
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
        // Keys of the per-subsystem sections keep their place too.
        let e = load_text("port = 2641\n\nmax_concurrent = \"many\"\n");
        assert!(e.contains("h.toml:3:18: ") && e.contains("expected usize"), "{e}");
        let e = load_text("registry_prot = 1\n");
        assert!(e.ends_with("h.toml:1:1: unknown key `registry_prot`; did you mean `registry_port`?"), "{e}");
        let e = load_text("[cassandra]\nkeyspce = \"x\"\n");
        assert!(e.ends_with("h.toml:2:1: unknown key `keyspce`; did you mean `keyspace`?"), "{e}");
    }

    #[test]
    fn sections_take_the_documented_top_level_keys() {
        let c: Config = toml::from_str(
            "store_cache_mb = 7\ncache_mb = 3\nudp_sockets = 2\nmax_concurrent = 9\nserver_admins = [\"300:A/B\"]\n\
             backup_admins = [\"300:A/C\"]\ncluster_lease_ms = 900\nregistry_port = 8100\n\
             replication_source = \"127.0.0.1:2641\"\ntxnlog_num_days_to_keep = 4\nhrls_max_scans = 3\n",
        )
        .unwrap();
        assert_eq!((c.storage.page_cache_mb, c.storage.record_cache_mb), (7, 3));
        assert_eq!((c.transport.udp_sockets, c.admission.max_concurrent), (2, 9));
        assert_eq!((c.access.server_admins.len(), c.auth.backup_admins.len()), (1, 1));
        assert_eq!((c.cluster.lease_ms, c.registry.port), (900, Some(8100)));
        assert_eq!(c.replication.source.as_deref(), Some("127.0.0.1:2641"));
        assert_eq!((c.replication.txnlog_num_days_to_keep, c.reverse_lookup.max_scans), (4, 3));
        // The listing `import-config` and the unknown-key hint use: flat, every key.
        let keys = diagnostics::top_level_keys();
        for key in ["store", "cassandra", "sql", "templates", "cluster_listen", "hrls_max_offset", "port"] {
            assert!(keys.iter().any(|k| k == key), "{key} in {keys:?}");
        }
        assert!(!keys.iter().any(|k| k == "server_admins_given" || k == "storage" || k == "transport"));
    }

    #[test]
    fn replication_admin_lists_are_checked_at_start() {
        let c: Config = toml::from_str("replication_admins = [\"300:TEST/MIRROR\", \"200:TEST/GROUP\"]\n").unwrap();
        assert!(c.validate().is_ok());
        assert_eq!(parse_admin_list(&c.replication.admins).unwrap()[1], (b"TEST/GROUP".to_vec(), 200));
        let mut c = Config::default();
        c.auth.backup_admins = vec!["nohandle".into()];
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
        let o = c.storage.cassandra.options().unwrap();
        assert_eq!(o.contact_points, ["127.0.0.2:9042"]);
        assert_eq!(o.replication, "3");
        let bad: Config = toml::from_str("store = \"cassandra\"\n[cassandra]\nconsistency = \"MOST\"\n").unwrap();
        assert!(bad.validate().is_err());
        assert!(toml::from_str::<Config>("store = \"postgres\"").is_err());
        let mut cached = c.clone();
        cached.storage.record_cache_mb = 8;
        assert!(cached.validate().is_err(), "no lone per-node record cache on a shared store");
        let mut node = cached.clone();
        node.cluster.listen = Some("127.0.0.1:7400".parse().unwrap());
        node.validate().unwrap();
        let mut short = node.clone();
        short.cluster.lease_ms = 100;
        assert!(short.validate().is_err());
        node.cluster.listen = Some("0.0.0.0:7400".parse().unwrap());
        assert!(node.validate().is_err());
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
            c.access.server_admins
        };
        assert_eq!(load("", &["20.5000"]), ["300:20.5000/ADMIN", "301:20.5000/ADMIN"]);
        assert_eq!(load("", &["A", "B"]), Vec::<String>::new(), "several prefixes: each admin its own");
        assert_eq!(load("server_admins = []\n", &["A"]), Vec::<String>::new(), "none, as written");
        assert_eq!(load("server_admins = [\"300:0.NA/A\"]\n", &["A"]), ["300:0.NA/A"]);
        let mut c = Config::default();
        c.default_server_admins();
        assert_eq!(c.access.server_admins, ["300:TEST/ADMIN", "301:TEST/ADMIN"], "no file at all");
        // The defaults add server admins; the prefix's other keys stay its admins.
        assert_eq!(c.prefix_admins(), vec![(b"TEST/ADMIN".to_vec(), b"0.NA/TEST".to_vec())]);
        c.access.server_admins_given = true;
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
        c.access.server_admins = vec!["300:X/Y".into(), "X/Z".into()];
        assert_eq!(c.parsed_server_admins().unwrap(), vec![(b"X/Y".to_vec(), 300), (b"X/Z".to_vec(), 0)]);
        assert!(c.prefix_admins().is_empty(), "explicit server admins: Handle.Net's semantics");
        c.access.server_admins = vec!["nohandle".into()];
        assert!(c.validate().is_err());
    }
}
