//! `store = "sql"`: handles in a relational database, in Handle.Net's own
//! schema (Technical Manual §8), so that a Handle.Net 9 installation on SQL
//! can switch to `handled` (and back) without moving a row, and programs that
//! deposit handles by writing rows keep working.
//!
//! **Driver: sqlx** (0.8, runtime queries only, no macros). The backend is to
//! serve PostgreSQL and MariaDB/MySQL; sqlx covers both with one API and one
//! connection pool (health-checked connections, so one the database dropped
//! is replaced before a request gets it), TLS through rustls with aws-lc-rs,
//! the TLS stack the rest of `handled` already builds. The alternative,
//! tokio-postgres with deadpool plus mysql_async, is two drivers and two
//! pools to keep in step for the same statements. sqlx 0.8 rather than 0.9:
//! 0.9 needs a newer Rust than the workspace's `rust-version`.
//!
//! **Two databases, one store.** PostgreSQL (`postgres://`) and MariaDB or
//! MySQL (`mariadb://`, `mysql://`) run the same code: [`db`] expands one body
//! per driver and holds each statement's two spellings side by side; what has
//! no common SQL is in [`postgres`] (advisory locks, array binds) and
//! [`mysql`] (parameter lists; why InnoDB's next-key locks serialise writers).
//! On MariaDB the handle and prefix columns are `varchar` as in the manual's
//! MySQL tables: handles are UTF-8 there, and matched by their bytes whatever
//! the table's collation.
//!
//! The four concerns of a store, one file each:
//! * handles: [`records`] (rows of `handles`; [`values`] encodes them);
//! * metadata and homing: [`meta`] (`nas`, and our optional `handled_meta`);
//! * documents: [`declined`] (no place in the schema);
//! * the transaction log, optional, in tables of ours: [`txn_log`] (the log
//!   itself), [`txn_apply`] (logged homing and bulk loads, a mirror's pulls);
//! * administration: [`schema`] (the tables), [`options`] (pool, timeouts, TLS),
//!   [`layout`] (Handle.Net's `store_*_as_string`: text or bytes names);
//! * Handle.Net's custom statements (`get_handle_stmt` …): [`custom`] checks
//!   them at start, [`custom_ops`] reads through them;
//! * the reverse lookup by a value's data (`/hrls`): [`search`];
//! * handle lookups, several a statement under load: [`read_batch`]; writes,
//!   several a transaction: [`write_batch`]; both through [`lanes`].

use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;

use crate::{
    Backup, Capabilities, DocWrite, DocumentStore, Expect, HandleRecord, IndexHit, IndexMatch, RecordStore,
    StatCounters, StoreAdmin, StoreError, StoreStats, SwapOutcome,
};

mod custom;
mod custom_ops;
mod custom_writes;
mod db;
mod declined;
mod error;
mod lanes;
mod layout;
mod local_meta;
mod meta;
mod mysql;
mod options;
mod postgres;
mod read_batch;
mod records;
mod refs;
pub mod schema;
mod search;
mod store_core;
mod txn_apply;
mod txn_log;
mod values;
mod write_batch;

pub use custom::{writable_view_lacks, Statements as SqlStatements, Stmt as SqlStmt};
pub use db::Dialect;
pub use layout::Layout as SqlLayout;
pub use local_meta::SQL_META_FILE_NAME;
/// The `refs` column's codec, for the fuzz target of the same name.
#[cfg(feature = "fuzzing")]
pub mod fuzz_refs {
    pub use super::refs::{decode_refs, encode_refs};
}
pub use options::{MetaTable, SqlOptions};
pub use read_batch::LookupCounts;
use store_core::SqlCore;
pub use write_batch::WriteCounts;

/// Handle storage in Handle.Net's SQL tables (PostgreSQL, MariaDB/MySQL).
pub struct SqlStore {
    /// Shared with the tasks that run writes together (write_batch.rs).
    core: std::sync::Arc<SqlCore>,
}

impl std::ops::Deref for SqlStore {
    type Target = SqlCore;

    fn deref(&self) -> &SqlCore {
        &self.core
    }
}

impl SqlStore {
    /// Connect, then check (or, with `create_schema`, create) the tables.
    pub async fn connect(options: &SqlOptions) -> Result<SqlStore, StoreError> {
        let pool = options.pool()?;
        if options.create_schema && options.read_only {
            return Err(StoreError::Backend("sql: create_schema and read_only together: choose one".into()));
        }
        if options.value_index && options.read_only {
            return Err(StoreError::Backend("sql: value_index and read_only together: choose one".into()));
        }
        // A read-only server writes nothing, the log's entries included: its
        // log would hold only what other nodes logged, and it could not be a mirror.
        if options.txn_log && options.read_only {
            return Err(StoreError::Backend(
                "sql: replication_log and read_only together: a read-only server keeps no transaction log; \
                 choose one"
                    .into(),
            ));
        }
        let in_database = |e| {
            let url = options::redact(&options.url);
            match e {
                StoreError::Backend(m) => StoreError::Backend(format!("{m} (database {url})")),
                other => other,
            }
        };
        let custom =
            custom::Custom::prepare(&pool, &options.statements, options.read_only).await.map_err(in_database)?;
        custom_writes::check_create(&custom).map_err(in_database)?;
        let options = options.clone();
        // A read-only view reads the operator's tables only: Handle.Net's are
        // not required, and ours (handled_meta) not either.
        let meta_in_table = match options.meta_table {
            _ if custom.is_view() && options.read_only => false,
            MetaTable::Required => true,
            MetaTable::Never => false,
            MetaTable::IfPresent => {
                options.create_schema
                    || options.txn_log
                    || schema::table_exists(&pool, "handled_meta").await.map_err(in_database)?
            }
        };
        schema::ensure(&pool, options.create_schema, !custom.is_view(), meta_in_table, options.txn_log, options.layout)
            .await
            .map_err(in_database)?;
        let local_meta = match (&options.local_meta_file, meta_in_table) {
            (Some(path), false) => Some(local_meta::LocalMeta::open(path.clone())?),
            _ => None,
        };
        let value_search =
            search::ValueSearch::prepare(&pool, options.value_index, custom.is_view()).await.map_err(in_database)?;
        let queries = layout::Queries::new(pool.dialect(), options.layout);
        let read_pool = options.point_read_pool()?.unwrap_or_else(|| pool.clone());
        let reads = read_batch::ReadBatches::new(read_pool, &queries, options.layout, options.read_lanes());
        let txn = match options.txn_log {
            true => Some(txn_log::SqlTxnLog::open(&pool, options.txn_poll_interval).await.map_err(in_database)?),
            false => None,
        };
        let core = SqlCore {
            reads,
            writes: write_batch::WriteBatches::new(options.write_lanes()),
            pool,
            options,
            custom,
            queries,
            value_search,
            meta_in_table,
            local_meta,
            closed: AtomicBool::new(false),
            stats: StatCounters::default(),
            txn,
            bulk: tokio::sync::Mutex::new(()),
        };
        Ok(SqlStore { core: std::sync::Arc::new(core) })
    }

    /// Handle lookups so far, and the statements that answered them (read_batch.rs).
    pub fn lookup_counts(&self) -> LookupCounts {
        self.reads.counts()
    }

    /// Swaps so far, and the transactions that made them (write_batch.rs).
    pub fn write_counts(&self) -> WriteCounts {
        self.writes.counts()
    }
}

impl SqlCore {
    fn check_open(&self) -> Result<(), StoreError> {
        if self.closed.load(Ordering::Acquire) {
            Err(StoreError::Closed)
        } else {
            Ok(())
        }
    }

    fn check_writable(&self) -> Result<(), StoreError> {
        self.check_open()?;
        if self.options.read_only {
            return Err(StoreError::Backend("sql: read_only is set (sql_read_only): this server never writes".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl RecordStore for SqlStore {
    async fn get(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        self.get_record(key).await
    }

    async fn swap_with_docs(
        &self,
        key: &[u8],
        expect: Expect,
        new: Option<HandleRecord>,
        docs: Vec<DocWrite>,
    ) -> Result<SwapOutcome, StoreError> {
        if !docs.is_empty() {
            return Err(declined::no_documents());
        }
        self.swap_record(key, expect, new).await
    }

    async fn scan_keys(
        &self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        self.scan(prefix, start_after, limit).await
    }

    async fn find_by_value(
        &self,
        value_type: &[u8],
        data: IndexMatch<'_>,
        start_after: Option<&IndexHit>,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        self.find_values(value_type, data, start_after, limit).await
    }

    async fn put_many_with_docs(
        &self,
        records: Vec<(Vec<u8>, HandleRecord)>,
        docs: Vec<DocWrite>,
    ) -> Result<(), StoreError> {
        if !docs.is_empty() {
            return Err(declined::no_documents());
        }
        self.put_records(records).await
    }

    async fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.meta_read(key).await
    }

    async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        self.meta_write(key, value).await
    }

    async fn meta_scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.meta_list(prefix).await
    }

    async fn count(&self) -> Result<u64, StoreError> {
        self.count_handles().await
    }
}

/// Handle.Net's schema has no place for documents: the seam's defaults
/// decline them ([`declined`] says so for writes that carry documents). The
/// transaction log is in tables of ours, when asked for (`txn_apply.rs`).
impl DocumentStore for SqlStore {}

#[async_trait]
impl StoreAdmin for SqlStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // Several nodes may share one database, but sessions and the site
            // key would need documents: each node keeps its own (README).
            shared: false,
            durable: true,
            documents: false,
            txn_log: self.txn.is_some(),
            backup: Backup::Refused(
                "this server's store is a SQL database (Handle.Net's tables): back it up with the database's own \
                 tools (`pg_dump DATABASE -F t | gzip -c > handles.tgz`, Technical Manual §8.2; \
                 `mariadb-dump --single-transaction DATABASE`) and keep the data directory (server key)",
            ),
            read_only: self.options.read_only,
            remote: true,
        }
    }

    fn stats(&self) -> StoreStats {
        let lookups = self.reads.counts();
        StoreStats { lookups: lookups.lookups, lookup_statements: lookups.statements, ..self.stats.snapshot() }
    }

    fn writable(&self) -> Result<(), StoreError> {
        self.check_writable()
    }

    /// Every acknowledged write is a committed transaction, durable in the
    /// database already (its own WAL and checkpoints do the rest).
    async fn checkpoint(&self) -> Result<(), StoreError> {
        self.check_open()
    }

    fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        // Closing waits for connections in use to come back: not on the caller.
        let pools = [self.pool.clone(), self.reads.pool().clone()];
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    for pool in pools {
                        pool.close().await;
                    }
                });
            }
            Err(_) => drop(pools), // connections close as the pools are dropped
        }
    }
}
