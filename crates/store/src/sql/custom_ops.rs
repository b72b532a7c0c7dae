//! Reads through custom statements (custom.rs): a handle's values, homed
//! prefixes, listing and counting, with columns read by position and as
//! leniently as JDBC reads them, since another application's tables and the
//! expressions of a SELECT (`'URL'`, `1`, `true`) have types of their own.

use handled_proto::HandleValue;
use sqlx::mysql::MySqlRow;
use sqlx::postgres::PgRow;
use sqlx::Row;

use super::custom::{KeyBind, Prepared, Stmt};
use super::db::on_pool;
use super::error::backend;
use super::values::NullableRow;
use super::SqlCore;
use crate::{HandleRecord, StoreError};

/// A column by position, read as the kind Handle.Net's `getX` asks for.
pub(crate) trait Cols {
    fn bytes(&self, i: usize) -> Result<Option<Vec<u8>>, sqlx::Error>;
    fn int(&self, i: usize) -> Result<Option<i64>, sqlx::Error>;

    /// JDBC's `getBoolean`: a boolean, a number (non-zero is true), or text.
    fn boolean(&self, i: usize) -> Result<Option<bool>, sqlx::Error> {
        match self.int(i) {
            Ok(n) => Ok(n.map(|n| n != 0)),
            Err(_) => Ok(self.bytes(i)?.map(|b| {
                let t = String::from_utf8_lossy(&b).trim().to_ascii_lowercase();
                ["true", "t", "1", "yes", "y"].contains(&t.as_str())
            })),
        }
    }
}

/// One body for both drivers' rows: the first type the column decodes as wins.
macro_rules! lenient_cols {
    ($row:ty) => {
        impl Cols for $row {
            fn bytes(&self, i: usize) -> Result<Option<Vec<u8>>, sqlx::Error> {
                match self.try_get::<Option<Vec<u8>>, _>(i) {
                    Ok(b) => Ok(b),
                    Err(_) => Ok(self.try_get::<Option<String>, _>(i)?.map(String::into_bytes)),
                }
            }

            fn int(&self, i: usize) -> Result<Option<i64>, sqlx::Error> {
                if let Ok(n) = self.try_get::<Option<i64>, _>(i) {
                    return Ok(n);
                }
                if let Ok(n) = self.try_get::<Option<i32>, _>(i) {
                    return Ok(n.map(i64::from));
                }
                if let Ok(n) = self.try_get::<Option<i16>, _>(i) {
                    return Ok(n.map(i64::from));
                }
                if let Ok(n) = self.try_get::<Option<i8>, _>(i) {
                    return Ok(n.map(i64::from));
                }
                Ok(self.try_get::<Option<bool>, _>(i)?.map(i64::from))
            }
        }
    };
}

lenient_cols!(PgRow);
lenient_cols!(MySqlRow);

/// A row of `get_handle_stmt` (Handle.Net's eleven columns, in order) as a value.
pub(super) fn value_of(row: &impl Cols) -> Result<HandleValue, sqlx::Error> {
    let int32 = |i| row.int(i).map(|n| n.map(|n| n.clamp(i32::MIN as i64, i32::MAX as i64) as i32));
    Ok(NullableRow {
        idx: int32(0)?.unwrap_or(0),
        value_type: row.bytes(1)?,
        data: row.bytes(2)?,
        ttl_type: row.int(3)?.map(|n| n.clamp(0, 1) as i16),
        ttl: int32(4)?,
        timestamp: int32(5)?,
        refs: row.bytes(6)?.map(|b| String::from_utf8_lossy(&b).into_owned()),
        admin_read: row.boolean(7)?,
        admin_write: row.boolean(8)?,
        pub_read: row.boolean(9)?,
        pub_write: row.boolean(10)?,
    }
    .into_value())
}

/// The handle or prefix as the statement's first parameter takes it.
pub(super) enum Param {
    Bytes(Vec<u8>),
    Text(String),
    /// Not text where the parameter is: NULL, which matches no row (none can exist).
    Null,
}

pub(super) fn key_param(p: &Prepared, key: &[u8]) -> Param {
    match (p.key, std::str::from_utf8(key)) {
        (KeyBind::Bytes, _) => Param::Bytes(key.to_vec()),
        (KeyBind::Text, Ok(s)) => Param::Text(s.to_owned()),
        (KeyBind::Text, Err(_)) => Param::Null,
    }
}

/// Run `$p` (a [`Prepared`]) with `$key` bound as [`key_param`] says, then
/// `$fetch` on the query and the connection `$via` (`on_pool` or `on_tx`)
/// gives of `$on`, on either database.
macro_rules! run_with_key {
    ($via:ident, $on:expr, $p:expr, $key:expr, |$q:ident, $c:ident| $fetch:expr) => {{
        let param = key_param($p, $key);
        $via!($on, $c => {
            let $q = sqlx::query(&$p.sql);
            let $q = match param {
                Param::Bytes(bytes) => $q.bind(bytes),
                Param::Text(text) => $q.bind(text),
                Param::Null => $q.bind(Option::<String>::None),
            };
            $fetch
        })
    }};
}
pub(super) use run_with_key;

/// A handle's values in index order (a statement's order kept for equal
/// indexes); none: no handle.
pub(super) fn record_of_values(mut values: Vec<HandleValue>) -> Option<HandleRecord> {
    values.sort_by_key(|v| v.index);
    (!values.is_empty()).then(|| HandleRecord::new(values))
}

impl SqlCore {
    /// `get_handle_stmt`: the handle's values, in index order (the statement's
    /// order is kept for equal indexes).
    pub(super) async fn custom_get(&self, p: &Prepared, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        let values = self
            .pool
            .retrying_lost(|| async {
                Ok(run_with_key!(on_pool, &self.pool, p, key, |q, c| {
                    let rows = q.fetch_all(c).await?;
                    rows.iter().map(value_of).collect::<Result<Vec<_>, _>>()?
                }))
            })
            .await
            .map_err(backend)?;
        Ok(record_of_values(values))
    }

    /// `have_na_stmt`: one row, one number, > 0 when the prefix is homed here.
    pub(super) async fn custom_have_na(&self, p: &Prepared, na: &[u8]) -> Result<bool, StoreError> {
        let n = run_with_key!(on_pool, &self.pool, p, na, |q, c| {
            let row = q.fetch_optional(c).await.map_err(backend)?;
            match row {
                Some(r) => r.int(0).map_err(backend)?.unwrap_or(0),
                None => 0,
            }
        });
        Ok(n > 0)
    }

    /// Every key a scan statement returns (the first column), sorted and distinct.
    /// `scan_by_prefix_stmt` is given `PREFIX%` as Handle.Net gives it
    /// (`like ?`); the prefix is checked here again, since `_` and `%` in it
    /// match more in a `like`.
    pub(super) async fn custom_keys(&self, s: Stmt, prefix: &[u8]) -> Result<Option<Vec<Vec<u8>>>, StoreError> {
        let Some(p) = self.custom.get(s) else { return Ok(None) };
        let mut keys: Vec<Vec<u8>> = if s == Stmt::ScanByPrefix {
            let mut pattern = prefix.to_vec();
            pattern.push(b'%');
            run_with_key!(on_pool, &self.pool, p, &pattern, |q, c| {
                let rows = q.fetch_all(c).await.map_err(backend)?;
                rows.iter().map(|r| r.bytes(0)).collect::<Result<Vec<_>, _>>().map_err(backend)?
            })
        } else {
            on_pool!(&self.pool, c => {
                let rows = sqlx::query(&p.sql).fetch_all(c).await.map_err(backend)?;
                rows.iter().map(|r| r.bytes(0)).collect::<Result<Vec<_>, _>>().map_err(backend)?
            })
        }
        .into_iter()
        .flatten()
        .filter(|k| k.starts_with(prefix))
        .collect();
        keys.sort();
        keys.dedup();
        Ok(Some(keys))
    }

    /// Listing through `scan_by_prefix_stmt` (when a prefix is asked for) or
    /// `scan_handles_stmt`: the whole answer is read for each page, as
    /// Handle.Net's statements have no `start after` to page with.
    pub(super) async fn custom_scan(
        &self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        let by_prefix = if prefix.is_empty() { None } else { self.custom_keys(Stmt::ScanByPrefix, prefix).await? };
        let keys = match by_prefix {
            Some(k) => k,
            None => self.custom_keys(Stmt::ScanHandles, prefix).await?.ok_or_else(|| no_statement("listing"))?,
        };
        Ok(keys.into_iter().filter(|k| start_after.is_none_or(|a| k.as_slice() > a)).take(limit).collect())
    }

    /// The rows of `scan_handles_stmt`, counted by the database.
    pub(super) async fn custom_count(&self) -> Result<u64, StoreError> {
        let p = self.custom.get(Stmt::ScanHandles).ok_or_else(|| no_statement("counting handles"))?;
        let sql = format!("select count(*) from ({}) scanned", p.sql);
        let n: i64 = on_pool!(&self.pool, c => sqlx::query_scalar(&sql).fetch_one(c).await).map_err(backend)?;
        Ok(n.max(0) as u64)
    }
}

/// What a view without a scan statement cannot do.
fn no_statement(what: &str) -> StoreError {
    StoreError::Unsupported(format!(
        "sql: {what} needs scan_handles_stmt when get_handle_stmt is custom (the handles are another \
         application's rows)"
    ))
}
