//! The `[sql]` table (`store = "sql"`): Handle.Net's SQL storage (Technical
//! Manual §8) on PostgreSQL or MariaDB/MySQL, through `handled_store::SqlStore`. Kept apart from
//! `config.rs`, which only holds the table and calls [`SqlConfig::options`].

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// Environment variable with the database password (wins over `password_file`).
pub const PASSWORD_ENV: &str = "HANDLED_SQL_PASSWORD";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SqlConfig {
    /// `postgres://user@host:port/database` or `mariadb://user@host:port/database`
    /// (`mysql://` too; Handle.Net's `sql_url` without `jdbc:`); the drivers'
    /// URL parameters work (`?sslmode=…` for PostgreSQL, `?ssl-mode=…` for MariaDB).
    pub url: String,
    /// A file holding the password (Handle.Net's `sql_passwd`), trailing newline
    /// ignored; `HANDLED_SQL_PASSWORD` wins over it.
    pub password_file: Option<PathBuf>,
    /// Most connections this server opens (on PostgreSQL, the lookups'
    /// `read_statements` connections besides).
    pub max_connections: u32,
    /// Most handle lookups (point-read statements) in flight at once: more
    /// lookups than this wait and go together, one statement for many handles.
    /// Unset: half this machine's CPUs, at least one.
    pub read_statements: Option<u32>,
    /// Most write transactions in flight at once: more writes than this wait
    /// and go together, one transaction (one commit) for many handles.
    /// Unset: half this machine's CPUs, at least one.
    pub write_transactions: Option<u32>,
    /// Longest wait for a connection.
    pub connect_timeout_ms: u64,
    /// The database cancels a statement (lock waits included) after this.
    pub statement_timeout_ms: u64,
    /// PEM CA certificate: TLS required, certificate and host name verified.
    pub tls_ca: Option<PathBuf>,
    /// Handle.Net's `sql_read_only`: never write to the database.
    pub read_only: bool,
    /// Create missing tables at start (Handle.Net's `nas` and `handles`, and
    /// `handled_meta` with `meta_table`).
    pub create_schema: bool,
    /// Create an index on `handles.data` at start when there is none (MariaDB:
    /// `handled_dataindex` on its first 255 bytes), so that `/hrls` can search.
    pub value_index: bool,
    /// Keep this server's own metadata (site serial) in table `handled_meta`
    /// (`true`: it must exist), or in the data directory (`false`). Unset: the
    /// table when it exists (or `create_schema` or `replication_log` wants
    /// it), else the data directory, as Handle.Net keeps its own.
    pub meta_table: Option<bool>,
    /// Handle.Net's layout options, under its names: handles (`handles.handle`),
    /// prefixes (`nas.na`) and value types (`handles.type`) in text columns
    /// rather than bytes (handled_store's sql/layout.rs).
    pub store_handle_as_string: bool,
    pub store_na_as_string: bool,
    pub store_handle_value_type_as_string: bool,
    /// Keep the transaction log Handle.Net mirrors pull, in tables of ours
    /// (`handled_txnlog`, `handled_txnlog_state`): a replication source, or a
    /// mirror. Off by default: one more row lock, insert and update per write,
    /// serialising every logged write on the database (README, "SQL storage").
    pub replication_log: bool,
    // Handle.Net's custom statements (Technical Manual §8.1.4), under its
    // names: SQL with JDBC's `?` parameters, run in place of the built-in
    // statement (handled_store's sql/custom.rs; they need `read_only`).
    pub get_handle_stmt: Option<String>,
    pub have_na_stmt: Option<String>,
    pub del_na_stmt: Option<String>,
    pub add_na_stmt: Option<String>,
    pub scan_handles_stmt: Option<String>,
    pub scan_handles_from_stmt: Option<String>,
    pub scan_by_prefix_stmt: Option<String>,
    pub scan_nas_stmt: Option<String>,
    pub scan_nas_from_stmt: Option<String>,
    pub delete_all_handles_stmt: Option<String>,
    pub delete_all_nas_stmt: Option<String>,
    pub create_handle_stmt: Option<String>,
    pub handle_exists_stmt: Option<String>,
    pub delete_handle_stmt: Option<String>,
    pub modify_value_stmt: Option<String>,
}

impl Default for SqlConfig {
    fn default() -> Self {
        let o = handled_store::SqlOptions::default();
        SqlConfig {
            url: o.url,
            password_file: None,
            max_connections: o.max_connections,
            read_statements: o.read_statements,
            write_transactions: o.write_transactions,
            connect_timeout_ms: o.connect_timeout.as_millis() as u64,
            statement_timeout_ms: o.statement_timeout.as_millis() as u64,
            tls_ca: None,
            read_only: o.read_only,
            create_schema: o.create_schema,
            value_index: o.value_index,
            meta_table: None,
            store_handle_as_string: o.layout.store_handle_as_string,
            store_na_as_string: o.layout.store_na_as_string,
            store_handle_value_type_as_string: o.layout.store_handle_value_type_as_string,
            replication_log: o.txn_log,
            get_handle_stmt: None,
            have_na_stmt: None,
            del_na_stmt: None,
            add_na_stmt: None,
            scan_handles_stmt: None,
            scan_handles_from_stmt: None,
            scan_by_prefix_stmt: None,
            scan_nas_stmt: None,
            scan_nas_from_stmt: None,
            delete_all_handles_stmt: None,
            delete_all_nas_stmt: None,
            create_handle_stmt: None,
            handle_exists_stmt: None,
            delete_handle_stmt: None,
            modify_value_stmt: None,
        }
    }
}

impl SqlConfig {
    /// The store's options, the password read; or what is wrong.
    pub fn options(&self) -> Result<handled_store::SqlOptions, String> {
        let password = match (std::env::var(PASSWORD_ENV).ok(), &self.password_file) {
            (Some(p), _) => Some(p),
            (None, Some(path)) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| format!("sql: password_file {}: {e}", path.display()))?
                    .trim_end_matches(['\r', '\n'])
                    .to_owned(),
            ),
            (None, None) => None,
        };
        let options = handled_store::SqlOptions {
            url: self.url.clone(),
            password,
            max_connections: self.max_connections,
            read_statements: self.read_statements,
            write_transactions: self.write_transactions,
            connect_timeout: Duration::from_millis(self.connect_timeout_ms.max(1)),
            statement_timeout: Duration::from_millis(self.statement_timeout_ms.max(1)),
            tls_ca_file: self.tls_ca.clone(),
            read_only: self.read_only,
            create_schema: self.create_schema,
            value_index: self.value_index,
            meta_table: match self.meta_table {
                None => handled_store::MetaTable::IfPresent,
                Some(true) => handled_store::MetaTable::Required,
                Some(false) => handled_store::MetaTable::Never,
            },
            layout: handled_store::sql::SqlLayout {
                store_handle_as_string: self.store_handle_as_string,
                store_na_as_string: self.store_na_as_string,
                store_handle_value_type_as_string: self.store_handle_value_type_as_string,
            },
            statements: self.statements()?,
            txn_log: self.replication_log,
            ..handled_store::SqlOptions::default()
        };
        options.dialect().map_err(|e| e.to_string())?;
        if self.max_connections == 0 {
            return Err("sql: max_connections must be at least 1".into());
        }
        if self.read_statements == Some(0) {
            return Err("sql: read_statements must be at least 1".into());
        }
        if self.write_transactions == Some(0) {
            return Err("sql: write_transactions must be at least 1".into());
        }
        if self.read_only && self.create_schema {
            return Err("sql: read_only and create_schema together: choose one".into());
        }
        if self.read_only && self.value_index {
            return Err("sql: read_only and value_index together: choose one".into());
        }
        if self.read_only && self.replication_log {
            return Err("sql: read_only and replication_log together: a read-only server keeps no transaction \
                        log; choose one"
                .into());
        }
        Ok(options)
    }
}

impl SqlConfig {
    /// The custom statements given, by Handle.Net's setting name.
    fn statements(&self) -> Result<handled_store::sql::SqlStatements, String> {
        let given = [
            ("get_handle_stmt", &self.get_handle_stmt),
            ("have_na_stmt", &self.have_na_stmt),
            ("del_na_stmt", &self.del_na_stmt),
            ("add_na_stmt", &self.add_na_stmt),
            ("scan_handles_stmt", &self.scan_handles_stmt),
            ("scan_handles_from_stmt", &self.scan_handles_from_stmt),
            ("scan_by_prefix_stmt", &self.scan_by_prefix_stmt),
            ("scan_nas_stmt", &self.scan_nas_stmt),
            ("scan_nas_from_stmt", &self.scan_nas_from_stmt),
            ("delete_all_handles_stmt", &self.delete_all_handles_stmt),
            ("delete_all_nas_stmt", &self.delete_all_nas_stmt),
            ("create_handle_stmt", &self.create_handle_stmt),
            ("handle_exists_stmt", &self.handle_exists_stmt),
            ("delete_handle_stmt", &self.delete_handle_stmt),
            ("modify_value_stmt", &self.modify_value_stmt),
        ];
        let mut out = handled_store::sql::SqlStatements::new();
        for (key, text) in given {
            if let Some(text) = text {
                let stmt = handled_store::sql::SqlStmt::from_key(key).ok_or_else(|| format!("sql: {key}: unknown"))?;
                out.insert(stmt, text.clone());
            }
        }
        Ok(out)
    }
}

/// What cannot run on Handle.Net's schema, refused at start rather than
/// failing on the first request that needs it. `replication_log`: the
/// transaction log is kept (in tables of ours), so this server can be a mirror.
pub fn check_compatible(cache_mb: usize, registry: bool, mirror: bool, replication_log: bool) -> Result<(), String> {
    if cache_mb > 0 {
        return Err("cache_mb > 0 with store = \"sql\": rows other programs write would be answered from a stale \
                    cache; the database's own cache serves repeated reads"
            .into());
    }
    if registry {
        return Err("registry_port with store = \"sql\": the domain registry keeps documents, which Handle.Net's \
                    schema has no place for"
            .into());
    }
    if mirror && !replication_log {
        return Err("replication_source with store = \"sql\": a mirror keeps the transaction log: set \
                    [sql] replication_log = true (tables handled_txnlog and handled_txnlog_state), or replicate \
                    the database with its own tools"
            .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_load_and_bad_values_are_refused() {
        let c = SqlConfig::default();
        let o = c.options().unwrap();
        assert_eq!(o.statement_timeout, Duration::from_secs(5));
        assert!(o.meta_table == handled_store::MetaTable::IfPresent && !o.read_only && !o.create_schema);
        let bad = SqlConfig { url: "jdbc:postgresql://h/db".into(), ..SqlConfig::default() };
        assert!(bad.options().unwrap_err().contains("postgres://"));
        let mariadb = SqlConfig { url: "mariadb://h/db".into(), ..SqlConfig::default() };
        assert_eq!(mariadb.options().unwrap().dialect().unwrap(), handled_store::sql::Dialect::MySql);
        let both = SqlConfig { read_only: true, create_schema: true, ..SqlConfig::default() };
        assert!(both.options().is_err());
        assert!(!c.options().unwrap().txn_log, "the log is off by default");
        let log: SqlConfig = toml::from_str("replication_log = true").unwrap();
        assert!(log.options().unwrap().txn_log);
        let ro_log = SqlConfig { read_only: true, replication_log: true, ..SqlConfig::default() };
        assert!(ro_log.options().unwrap_err().contains("replication_log"));
        let missing = SqlConfig { password_file: Some("/nonexistent/pw".into()), ..SqlConfig::default() };
        if std::env::var(PASSWORD_ENV).is_err() {
            assert!(missing.options().unwrap_err().contains("password_file"));
        }
    }

    #[test]
    fn password_file_is_read_without_its_newline() {
        if std::env::var(PASSWORD_ENV).is_ok() {
            return; // the environment wins; nothing to check here
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pw");
        std::fs::write(&path, "s3cret\n").unwrap();
        let c = SqlConfig { password_file: Some(path), ..SqlConfig::default() };
        assert_eq!(c.options().unwrap().password.as_deref(), Some("s3cret"));
    }

    #[test]
    fn custom_statements_are_read_under_handle_net_names() {
        let c: SqlConfig = toml::from_str(
            "read_only = true\nget_handle_stmt = \"select 1\"\nscan_nas_stmt = \"select na from prefixes\"",
        )
        .unwrap();
        let statements = c.options().unwrap().statements;
        let keys: Vec<&str> = statements.keys().map(|s| s.key()).collect();
        assert_eq!(keys, ["get_handle_stmt", "scan_nas_stmt"]);
        assert!(toml::from_str::<SqlConfig>("get_handle = \"select 1\"").is_err(), "a misspelt key is refused");
    }

    #[test]
    fn the_text_layout_is_read_under_handle_net_names() {
        let c: SqlConfig =
            toml::from_str("store_handle_as_string = true\nstore_handle_value_type_as_string = true").unwrap();
        let layout = c.options().unwrap().layout;
        assert!(layout.store_handle_as_string && layout.store_handle_value_type_as_string);
        assert!(!layout.store_na_as_string);
        assert_eq!(SqlConfig::default().options().unwrap().layout, handled_store::sql::SqlLayout::default());
    }

    #[test]
    fn what_the_schema_cannot_hold_is_refused() {
        assert!(check_compatible(0, false, false, false).is_ok());
        assert!(check_compatible(8, false, false, false).unwrap_err().contains("cache_mb"));
        assert!(check_compatible(0, true, false, false).unwrap_err().contains("registry_port"));
        assert!(check_compatible(0, false, true, false).unwrap_err().contains("replication_log = true"));
        assert!(check_compatible(0, false, true, true).is_ok(), "a mirror with the log");
    }
}
