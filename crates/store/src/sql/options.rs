//! How to reach the database: the connection string, the pool, timeouts and TLS.

use std::path::PathBuf;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions, MySqlSslMode};
use sqlx::pool::PoolOptions;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgSslMode};
use sqlx::Executor;

use super::db::{Dialect, Pool};
use crate::StoreError;

/// A pooled connection idle this long is pinged before a request gets it.
const IDLE_PING: Duration = Duration::from_secs(1);

/// Whether the server's own metadata goes in the table `handled_meta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetaTable {
    /// When the table exists (or `create_schema` makes it, or the transaction
    /// log needs it), else in [`SqlOptions::local_meta_file`]: a writable
    /// server starts on Handle.Net's untouched schema, and one that kept its
    /// serial in the table goes on doing so.
    #[default]
    IfPresent,
    /// In the table: a missing one stops the start (with its statement).
    Required,
    /// Never in the database.
    Never,
}

/// Options of a [`super::SqlStore`].
#[derive(Debug, Clone)]
pub struct SqlOptions {
    /// `postgres://user@host:port/database` (or `postgresql://`), or
    /// `mariadb://…`/`mysql://…`; the password is better given in
    /// [`SqlOptions::password`] than in the URL.
    pub url: String,
    /// Overrides a password in the URL.
    pub password: Option<String>,
    /// Most connections the pool opens (on PostgreSQL, the lookups' own
    /// pool of [`SqlOptions::read_lanes`] connections besides).
    pub max_connections: u32,
    /// Most handle lookups (point-read statements) in flight at once; lookups
    /// beyond wait and go together in the next statement (read_batch.rs).
    /// `None`: half this machine's CPUs, at least one ([`SqlOptions::read_lanes`]).
    pub read_statements: Option<u32>,
    /// Most write transactions in flight at once; writes beyond wait and go
    /// together in the next transaction (write_batch.rs). `None`: half this
    /// machine's CPUs, at least one ([`SqlOptions::write_lanes`]).
    pub write_transactions: Option<u32>,
    /// Longest wait for a connection (new or from the pool).
    pub connect_timeout: Duration,
    /// The database cancels any statement running longer (lock waits included),
    /// so a stuck row lock costs a request an error, not a task forever.
    pub statement_timeout: Duration,
    /// PEM CA certificate: TLS is then required and the server's certificate
    /// and host name are verified (`sslmode=verify-full`).
    pub tls_ca_file: Option<PathBuf>,
    /// Handle.Net's `sql_read_only`: never modify the database.
    pub read_only: bool,
    /// Create missing tables (Handle.Net's `nas` and `handles`, and
    /// `handled_meta` when [`SqlOptions::meta_table`]) at open. Off by default:
    /// a Handle.Net database is the DBA's; a missing table is then an error
    /// that shows the statement to run.
    pub create_schema: bool,
    /// Create an index on `handles.data` at open when there is none, for the
    /// reverse lookup (`/hrls`, search.rs): PostgreSQL has §8.2's `dataindex`
    /// already; the manual's MySQL tables have none. Off by default: an index
    /// on a Handle.Net database is the DBA's to add.
    pub value_index: bool,
    /// Where `handled`'s own metadata (site serial, replication progress)
    /// lives: the table `handled_meta`, which Handle.Net ignores, or
    /// [`SqlOptions::local_meta_file`]. Homed prefixes are rows of `nas` either way.
    pub meta_table: MetaTable,
    /// The server's own metadata when `handled_meta` is not used: a file in the
    /// data directory, as Handle.Net keeps its site record in its server
    /// directory (local_meta.rs). `None`: such keys are refused.
    pub local_meta_file: Option<PathBuf>,
    /// Handle.Net's `store_handle_as_string`, `store_na_as_string` and
    /// `store_handle_value_type_as_string`: which name columns are text (layout.rs).
    pub layout: super::layout::Layout,
    /// Handle.Net's custom statements (§8.1.4), by setting (custom.rs).
    pub statements: super::custom::Statements,
    /// Keep the transaction log Handle.Net mirrors pull (replication source,
    /// and mirror) in our tables `handled_txnlog` and `handled_txnlog_state`
    /// (txn_log.rs). Off by default: nothing of ours in the database then.
    pub txn_log: bool,
    /// How often the log's state row is read, so that subscribers wake for
    /// changes other nodes on the same database logged.
    pub txn_poll_interval: Duration,
}

impl Default for SqlOptions {
    fn default() -> Self {
        SqlOptions {
            url: "postgres://handleserver@127.0.0.1:5432/handlesystem".into(),
            password: None,
            max_connections: 16,
            read_statements: None,
            write_transactions: None,
            connect_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(5),
            tls_ca_file: None,
            read_only: false,
            create_schema: false,
            value_index: false,
            meta_table: MetaTable::IfPresent,
            local_meta_file: None,
            layout: Default::default(),
            statements: Default::default(),
            txn_log: false,
            txn_poll_interval: Duration::from_secs(1),
        }
    }
}

impl SqlOptions {
    pub fn dialect(&self) -> Result<Dialect, StoreError> {
        let scheme = self.url.split_once("://").map(|(s, _)| s.to_ascii_lowercase()).unwrap_or_default();
        match scheme.as_str() {
            "postgres" | "postgresql" => Ok(Dialect::Postgres),
            "mysql" | "mariadb" => Ok(Dialect::MySql),
            _ => Err(StoreError::Backend(format!(
                "sql: url must start with postgres:// (or postgresql://), mariadb:// or mysql://, got {:?}",
                redact(&self.url)
            ))),
        }
    }

    /// Read statements in flight at once. Fewer statements of more lookups
    /// cost the database less per lookup; on 2 CPUs shared by `handled` and
    /// PostgreSQL one statement at a time served the most (BENCHMARKS.md,
    /// "Lookups together"), so the default grows with the CPUs, not the pool.
    pub(crate) fn read_lanes(&self) -> usize {
        self.read_statements.map_or_else(half_the_cpus, |n| n as usize)
    }

    /// Write transactions in flight at once; as for reads, fewer transactions
    /// of more writes cost the database less per write (BENCHMARKS.md,
    /// "Writes together").
    pub(crate) fn write_lanes(&self) -> usize {
        self.write_transactions.map_or_else(half_the_cpus, |n| n as usize)
    }

    /// The pool, connected lazily: the first connection is made (and the
    /// schema checked) by [`super::SqlStore::connect`].
    pub(crate) fn pool(&self) -> Result<Pool, StoreError> {
        if self.max_connections == 0 {
            return Err(StoreError::Backend("sql: max_connections must be at least 1".into()));
        }
        if self.read_statements == Some(0) {
            return Err(StoreError::Backend("sql: read_statements must be at least 1".into()));
        }
        if self.write_transactions == Some(0) {
            return Err(StoreError::Backend("sql: write_transactions must be at least 1".into()));
        }
        let bad_url = |e: sqlx::Error| StoreError::Backend(format!("sql: bad url {:?}: {e}", redact(&self.url)));
        match self.dialect()? {
            Dialect::Postgres => {
                let connect = self.pg_connect()?;
                Ok(Pool::Postgres(self.pool_options(PgPoolOptions::new()).connect_lazy_with(connect)))
            }
            Dialect::MySql => {
                // sqlx parses `mysql://`; `mariadb://` is the same protocol.
                let url = match self.url.split_once("://") {
                    Some((_, rest)) => format!("mysql://{rest}"),
                    None => self.url.clone(),
                };
                let mut connect: MySqlConnectOptions = url.parse().map_err(bad_url)?;
                if let Some(p) = &self.password {
                    connect = connect.password(p);
                }
                if let Some(ca) = &self.tls_ca_file {
                    connect = connect.ssl_mode(MySqlSslMode::VerifyIdentity).ssl_ca(ca);
                }
                // Handles and prefixes are UTF-8 text in `varchar` columns.
                connect = connect.charset("utf8mb4");
                let serializable = super::custom::Custom::writes_through_view(&self.statements, self.read_only);
                let session = mysql_session(self.statement_timeout, serializable);
                let options = self.pool_options(MySqlPoolOptions::new()).after_connect(move |conn, _| {
                    let session = session.clone();
                    Box::pin(async move {
                        for stmt in &session.always {
                            conn.execute(stmt.as_str()).await?;
                        }
                        // MariaDB's statement timeout, else MySQL's (SELECT only there).
                        if conn.execute(session.mariadb_timeout.as_str()).await.is_err() {
                            conn.execute(session.mysql_timeout.as_str()).await?;
                        }
                        Ok(())
                    })
                });
                Ok(Pool::MySql(options.connect_lazy_with(connect)))
            }
        }
    }

    /// On PostgreSQL, the pool of the batched point reads (read_batch.rs): one
    /// connection a lane, whose sessions plan a statement once. PostgreSQL
    /// otherwise plans `handle = any($1)` again at every execution (the
    /// custom plan of a short array looks cheaper than the generic one), and
    /// planning cost it more than running it (measured: BENCHMARKS.md, "SQL
    /// storage"). Only these sessions: a generic plan of a range scan with a
    /// `limit $n` (listings) may choose worse. `None` on MariaDB/MySQL, whose
    /// prepared statements are planned as they run anyway.
    pub(crate) fn point_read_pool(&self) -> Result<Option<Pool>, StoreError> {
        if self.dialect()? != Dialect::Postgres {
            return Ok(None);
        }
        let connect = self.pg_connect()?;
        let lanes = u32::try_from(self.read_lanes()).unwrap_or(u32::MAX);
        let options = self.pool_options(PgPoolOptions::new()).max_connections(lanes).after_connect(|conn, _| {
            Box::pin(async move {
                // The setting exists from PostgreSQL 12; older servers plan as before.
                if conn.server_version_num().is_some_and(|v| v >= 120_000) {
                    conn.execute("set plan_cache_mode = force_generic_plan").await?;
                }
                Ok(())
            })
        });
        Ok(Some(Pool::Postgres(options.connect_lazy_with(connect))))
    }

    fn pg_connect(&self) -> Result<PgConnectOptions, StoreError> {
        let bad_url = |e: sqlx::Error| StoreError::Backend(format!("sql: bad url {:?}: {e}", redact(&self.url)));
        let mut connect: PgConnectOptions = self.url.parse().map_err(bad_url)?;
        if let Some(p) = &self.password {
            connect = connect.password(p);
        }
        if let Some(ca) = &self.tls_ca_file {
            connect = connect.ssl_mode(PgSslMode::VerifyFull).ssl_root_cert(ca);
        }
        // A startup parameter, so every pooled connection (reconnects too) has it.
        let ms = self.statement_timeout.as_millis().max(1).to_string();
        Ok(connect.options([("statement_timeout", ms.as_str())]).application_name("handled"))
    }

    fn pool_options<DB: sqlx::Database>(&self, o: PoolOptions<DB>) -> PoolOptions<DB> {
        o.max_connections(self.max_connections)
            .acquire_timeout(self.connect_timeout)
            // A connection the database dropped (restart, failover, idle cut)
            // is noticed by a ping and replaced, not handed to a request. sqlx
            // pings every connection it takes back, so one idle for less than
            // IDLE_PING answered a moment ago; pinging it again on every
            // acquire would be a third round trip per read (measured: the
            // database's CPU per resolution, BENCHMARKS.md "SQL storage").
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= IDLE_PING {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .idle_timeout(Some(Duration::from_secs(300)))
            .max_lifetime(Some(Duration::from_secs(1800)))
    }
}

/// Session settings of every MariaDB/MySQL connection (reconnects too).
#[derive(Clone)]
struct MySqlSession {
    always: Vec<String>,
    mariadb_timeout: String,
    mysql_timeout: String,
}

/// `serializable`: writes read through a custom `get_handle_stmt`, which
/// locks nothing by itself (custom_writes.rs).
fn mysql_session(timeout: Duration, serializable: bool) -> std::sync::Arc<MySqlSession> {
    let secs = timeout.as_secs_f64().max(0.001);
    std::sync::Arc::new(MySqlSession {
        always: vec![
            // The locking reads that serialise writers of one handle take
            // next-key locks only under REPEATABLE READ (records.rs), whatever
            // the server's default; a view's plain reads, only under
            // SERIALIZABLE (inside a transaction: reads alone stay unlocked).
            format!(
                "set session transaction isolation level {}",
                if serializable { "serializable" } else { "repeatable read" }
            ),
            // Lock waits end too (whole seconds, at least one).
            format!("set session innodb_lock_wait_timeout = {}", secs.ceil() as u64),
            // Values are bytes in `blob` columns: refuse, never truncate.
            "set session sql_mode = concat_ws(',', nullif(@@sql_mode, ''), 'STRICT_ALL_TABLES')".into(),
        ],
        mariadb_timeout: format!("set session max_statement_time = {secs:.3}"),
        mysql_timeout: format!("set session max_execution_time = {}", timeout.as_millis().max(1)),
    })
}

/// The URL without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

fn half_the_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get() / 2).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialect_by_scheme() {
        let o = |url: &str| SqlOptions { url: url.into(), ..SqlOptions::default() };
        assert_eq!(o("postgres://u@h/db").dialect().unwrap(), Dialect::Postgres);
        assert_eq!(o("PostgreSQL://u@h/db").dialect().unwrap(), Dialect::Postgres);
        assert_eq!(o("mysql://u@h/db").dialect().unwrap(), Dialect::MySql);
        assert_eq!(o("MariaDB://u@h/db").dialect().unwrap(), Dialect::MySql);
        let e = o("jdbc:postgresql://h/db").dialect().unwrap_err().to_string();
        assert!(e.contains("postgres://"), "{e}");
    }

    #[test]
    fn bad_options_are_errors() {
        let o = SqlOptions { url: "postgres://u@h:notaport/db".into(), ..SqlOptions::default() };
        assert!(o.pool().is_err());
        let o = SqlOptions { url: "mariadb://u@h:notaport/db".into(), ..SqlOptions::default() };
        assert!(o.pool().is_err());
        let o = SqlOptions { max_connections: 0, ..SqlOptions::default() };
        assert!(o.pool().err().unwrap().to_string().contains("max_connections"));
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("nonsense"), "nonsense");
    }
}
