//! Server metadata. Homed prefixes (`homed/<prefix handle>`) are rows of
//! Handle.Net's `nas` table, so that either server sees what the other homed;
//! every other key lives in our optional `handled_meta` table.

use std::time::Instant;

use super::error::backend;
use super::records::prefix_end;
use super::SqlStore;
use crate::{StoreError, HOMED_META_PREFIX};

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

impl SqlStore {
    fn meta_table_or_refuse(&self, key: &str) -> Result<(), StoreError> {
        if self.options.meta_table {
            Ok(())
        } else {
            Err(StoreError::Backend(format!(
                "sql: meta key {key:?} needs the handled_meta table (meta_table = true); Handle.Net's schema \
                 holds only homed prefixes"
            )))
        }
    }

    pub(super) async fn meta_read(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.check_open()?;
        match place(key) {
            Place::Nas(na) => {
                // Handle.Net's have_na_stmt.
                let n: i64 = sqlx::query_scalar("select count(*) from nas where na = $1")
                    .bind(na)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(backend)?;
                Ok((n > 0).then(Vec::new))
            }
            Place::Meta if !self.options.meta_table => Ok(None),
            Place::Meta => sqlx::query_scalar("select v from handled_meta where k = $1")
                .bind(key.as_bytes())
                .fetch_optional(&self.pool)
                .await
                .map_err(backend),
        }
    }

    pub(super) async fn meta_write(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        self.check_writable()?;
        let started = Instant::now();
        let q = match (place(key), &value) {
            (Place::Nas(_), Some(v)) if !v.is_empty() => {
                return Err(StoreError::Backend(format!("sql: {key:?}: nas rows carry no value")));
            }
            (Place::Nas(na), Some(_)) => {
                // add_na_stmt, once: homing an already homed prefix is a no-op.
                sqlx::query("insert into nas (na) values ($1) on conflict do nothing").bind(na)
            }
            (Place::Nas(na), None) => sqlx::query("delete from nas where na = $1").bind(na),
            (Place::Meta, Some(v)) => {
                self.meta_table_or_refuse(key)?;
                sqlx::query("insert into handled_meta (k, v) values ($1, $2) on conflict (k) do update set v = $2")
                    .bind(key.as_bytes())
                    .bind(v.as_slice())
            }
            (Place::Meta, None) => {
                self.meta_table_or_refuse(key)?;
                sqlx::query("delete from handled_meta where k = $1").bind(key.as_bytes())
            }
        };
        match q.execute(&self.pool).await {
            Ok(_) => {
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
            for na in self.range(&NAS, na_prefix).await? {
                out.push((format!("{HOMED_META_PREFIX}{}", String::from_utf8_lossy(&na.0)), Vec::new()));
            }
        }
        if self.options.meta_table {
            for (k, v) in self.range(&META, prefix.as_bytes()).await? {
                // Keys were written from `&str`; anything else was not ours.
                if let Ok(k) = String::from_utf8(k) {
                    out.push((k, v));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// Rows of a two-column table whose key starts with `prefix`, in key order.
    async fn range(&self, t: &Table, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>, StoreError> {
        let (key, value, table) = (t.key, t.value, t.name);
        let rows: Vec<(Vec<u8>, Vec<u8>)> = match prefix_end(prefix) {
            Some(end) => {
                sqlx::query_as(&format!(
                    "select {key}, {value} from {table} where {key} >= $1 and {key} < $2 order by {key}"
                ))
                .bind(prefix)
                .bind(end)
                .fetch_all(&self.pool)
                .await
            }
            None => {
                sqlx::query_as(&format!("select {key}, {value} from {table} where {key} >= $1 order by {key}"))
                    .bind(prefix)
                    .fetch_all(&self.pool)
                    .await
            }
        }
        .map_err(backend)?;
        Ok(rows)
    }
}

/// A table read by [`SqlStore::range`]: `nas` has no value column, so it reads
/// an empty one.
struct Table {
    name: &'static str,
    key: &'static str,
    value: &'static str,
}

const NAS: Table = Table { name: "nas", key: "na", value: "''::bytea" };
const META: Table = Table { name: "handled_meta", key: "k", value: "v" };
