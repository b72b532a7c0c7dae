//! Server metadata. Homed prefixes (`homed/<prefix handle>`) are rows of
//! Handle.Net's `nas` table, so that either server sees what the other homed;
//! every other key lives in our optional `handled_meta` table, or without it
//! in a file of the data directory (local_meta.rs).

use std::time::Instant;

use super::custom::Stmt;
use super::db::{bind_key, on_pool, Sql};
use super::error::backend;
use super::layout::{Col, Name};
use super::SqlCore;
use crate::{StoreError, HOMED_META_PREFIX};

const GET_META: Sql =
    Sql { pg: "select v from handled_meta where k = $1", my: "select v from handled_meta where k = ?" };
const PUT_META: Sql = Sql {
    pg: "insert into handled_meta (k, v) values ($1, $2) on conflict (k) do update set v = $2",
    my: "insert into handled_meta (k, v) values (?, ?) on duplicate key update v = values(v)",
};
const DEL_META: Sql = Sql { pg: "delete from handled_meta where k = $1", my: "delete from handled_meta where k = ?" };

/// Where a meta key lives.
enum Place<'a> {
    /// A prefix handle, a row of `nas`.
    Nas(&'a [u8]),
    Meta,
}

fn place(key: &str) -> Place<'_> {
    match key.strip_prefix(HOMED_META_PREFIX) {
        Some(na) => Place::Nas(na.as_bytes()),
        None => Place::Meta,
    }
}

impl SqlCore {
    pub(super) fn meta_table_or_refuse(&self, key: &str) -> Result<(), StoreError> {
        if self.meta_in_table {
            Ok(())
        } else {
            Err(StoreError::Backend(format!(
                "sql: meta key {key:?} needs the handled_meta table: create it (create_schema = true once, or \
                 the statement in docs/configuration.md) and leave meta_table unset or true; Handle.Net's schema \
                 holds only homed prefixes"
            )))
        }
    }

    pub(super) async fn meta_read(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.check_open()?;
        match place(key) {
            Place::Nas(na) if self.custom.get(Stmt::HaveNa).is_some() || self.custom.is_view() => {
                let homed = match self.custom.get(Stmt::HaveNa) {
                    Some(p) => self.custom_have_na(p, na).await?,
                    None => false, // a view homes no prefix: read_only serves the configured ones
                };
                Ok(homed.then(Vec::new))
            }
            Place::Nas(na) => {
                let d = self.pool.dialect();
                let sql = self.queries.have_na.as_str();
                let na = self.options.layout.name(d, Col::Na, na);
                let n: i64 = on_pool!(&self.pool, p => bind_key!(sqlx::query_scalar(sql), d, na).fetch_one(p).await)
                    .map_err(backend)?;
                Ok((n > 0).then(Vec::new))
            }
            Place::Meta if !self.meta_in_table => Ok(self.local_meta.as_ref().and_then(|m| m.get(key))),
            Place::Meta => {
                let sql = self.pool.dialect().sql(&GET_META);
                on_pool!(&self.pool, p => sqlx::query_scalar(sql).bind(key.as_bytes()).fetch_optional(p).await)
                    .map_err(backend)
            }
        }
    }

    pub(super) async fn meta_write(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        self.check_writable()?;
        if let Place::Nas(na) = place(key) {
            if self.txn.is_some() && value.as_ref().is_none_or(|v| v.is_empty()) {
                return self.logged_home(key, na, value.is_some()).await; // txn_apply.rs
            }
            let stmt = if value.is_some() { Stmt::AddNa } else { Stmt::DelNa };
            if let Some(p) = self.custom.get(stmt) {
                if value.as_ref().is_some_and(|v| !v.is_empty()) {
                    return Err(StoreError::Backend(format!("sql: {key:?}: nas rows carry no value")));
                }
                return self.custom_home(p, key, na, value.is_some()).await;
            }
        }
        if let (Place::Meta, Some(local)) = (place(key), &self.local_meta) {
            return local.put(key, value);
        }
        let started = Instant::now();
        let (d, l) = (self.pool.dialect(), self.options.layout);
        // The statement and what it binds, in order.
        let (sql, binds): (&str, Vec<Name>) = match (place(key), &value) {
            (Place::Nas(_), Some(v)) if !v.is_empty() => {
                return Err(StoreError::Backend(format!("sql: {key:?}: nas rows carry no value")));
            }
            (Place::Nas(na), Some(_)) => (self.queries.add_na.as_str(), vec![l.name(d, Col::Na, na)]),
            (Place::Nas(na), None) => (self.queries.del_na.as_str(), vec![l.name(d, Col::Na, na); d.key_binds()]),
            (Place::Meta, Some(v)) => {
                self.meta_table_or_refuse(key)?;
                (d.sql(&PUT_META), vec![Name::bytes(key.as_bytes()), Name::bytes(v.as_slice())])
            }
            (Place::Meta, None) => {
                self.meta_table_or_refuse(key)?;
                (d.sql(&DEL_META), vec![Name::bytes(key.as_bytes())])
            }
        };
        let done = on_pool!(&self.pool, p => {
            let mut q = sqlx::query(sql);
            for b in &binds {
                q = q.bind(*b);
            }
            q.execute(p).await.map(drop)
        });
        self.counted_write(started, done)
    }

    /// One write's outcome, counted in the store's statistics.
    pub(super) fn counted_write(&self, started: Instant, done: Result<(), sqlx::Error>) -> Result<(), StoreError> {
        match done {
            Ok(()) => {
                self.stats.committed(1, 0, true, started.elapsed().as_micros() as u64);
                Ok(())
            }
            Err(e) => {
                self.stats.failed(1);
                Err(backend(e))
            }
        }
    }

    pub(super) async fn meta_list(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.check_open()?;
        let mut out = Vec::new();
        // Homed prefixes, when the scanned prefix can cover `homed/…`.
        if prefix.starts_with(HOMED_META_PREFIX) || HOMED_META_PREFIX.starts_with(prefix) {
            let na_prefix = prefix.strip_prefix(HOMED_META_PREFIX).unwrap_or("").as_bytes();
            let nas = match self.custom_keys(Stmt::ScanNas, na_prefix).await? {
                Some(nas) => nas,
                None if self.custom.is_view() => Vec::new(),
                None => self.nas_range(na_prefix).await?,
            };
            for na in nas {
                out.push((format!("{HOMED_META_PREFIX}{}", String::from_utf8_lossy(&na)), Vec::new()));
            }
        }
        if let Some(local) = &self.local_meta {
            out.extend(local.list(prefix));
        } else if self.meta_in_table {
            for (k, v) in self.meta_range(prefix.as_bytes()).await? {
                // Keys were written from `&str`; anything else was not ours.
                if let Ok(k) = String::from_utf8(k) {
                    out.push((k, v));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// Homed prefixes (rows of `nas`) that start with `prefix`, in byte order.
    async fn nas_range(&self, prefix: &[u8]) -> Result<Vec<Vec<u8>>, StoreError> {
        let (d, l) = (self.pool.dialect(), self.options.layout);
        let range = l.range(d, Col::Na, prefix, None);
        let sql = l.scan(d, "nas", Col::Na, &range);
        on_pool!(&self.pool, p => {
            let mut q = sqlx::query_scalar(&sql).bind(range.bound(prefix));
            if let Some(to) = &range.to {
                q = q.bind(range.bound(to));
            }
            q.bind(i64::MAX).fetch_all(p).await
        })
        .map_err(backend)
    }

    /// Rows of `handled_meta` whose key starts with `prefix`, in key order.
    async fn meta_range(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>, StoreError> {
        let d = self.pool.dialect();
        let key = d.bytes_of("k");
        let end = super::layout::prefix_end(prefix);
        let mut sql = format!("select {key} as k, v from handled_meta where {key} >= {}", d.param(1));
        if end.is_some() {
            sql.push_str(&format!(" and {key} < {}", d.param(2)));
        }
        sql.push_str(" order by k");
        on_pool!(&self.pool, p => {
            let mut q = sqlx::query_as(&sql).bind(prefix);
            if let Some(end) = &end {
                q = q.bind(end.as_slice());
            }
            q.fetch_all(p).await
        })
        .map_err(backend)
    }
}
