//! Object rows (handles and documents), metadata and the handle count: reads and
//! the compare-and-set batch.

use std::collections::HashMap;

use scylla::client::session::Session;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::value::{CqlValue, Row};

use super::entries::bucket;
use super::schema::BUCKETS;
use super::{backend_error, rows_of};
use crate::StoreError;

/// One row of `objects` as read: absent, deleted (body `None`, version kept) or live.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectRow {
    exists: bool,
    body: Option<Vec<u8>>,
    version: i64,
}

impl ObjectRow {
    /// A row a read returned (a missing version reads as 0).
    pub fn read(body: Option<Vec<u8>>, version: Option<i64>) -> Self {
        ObjectRow { exists: true, body, version: version.unwrap_or(0) }
    }

    pub fn body(&self) -> Option<&[u8]> {
        self.body.as_deref()
    }

    pub fn into_body(self) -> Option<Vec<u8>> {
        self.body
    }

    /// 0 for a row never written.
    pub fn version(&self) -> i64 {
        self.version
    }
}

/// The rows of one partition, by `coll`.
#[derive(Debug, Default)]
pub struct Partition(HashMap<String, ObjectRow>);

impl Partition {
    /// The row of `coll` (an absent row if there is none).
    pub fn row(&self, coll: &str) -> ObjectRow {
        self.0.get(coll).cloned().unwrap_or_default()
    }

    #[cfg(test)]
    pub fn of(rows: impl IntoIterator<Item = (String, ObjectRow)>) -> Self {
        Partition(rows.into_iter().collect())
    }
}

/// What a compare-and-set did.
#[derive(Debug)]
pub enum Cas {
    Applied,
    /// A row's version had moved: nothing written.
    Moved,
    /// No answer says (why, for the message): it may apply, now or later.
    Lost(String),
}

/// One row of a compare-and-set: from `old` to `new_body` (`None`: deleted).
#[derive(Debug, Clone)]
pub struct RowWrite {
    pub coll: String,
    pub old: ObjectRow,
    pub new_body: Option<Vec<u8>>,
}

impl RowWrite {
    pub fn new_version(&self) -> i64 {
        self.old.version + 1
    }
}

pub struct RowStatements {
    partition: PreparedStatement,
    partition_serial: PreparedStatement,
    row: PreparedStatement,
    cas: PreparedStatement,
    meta_get: PreparedStatement,
    meta_put: PreparedStatement,
    meta_delete: PreparedStatement,
    meta_scan: PreparedStatement,
    count_add: PreparedStatement,
    count_all: PreparedStatement,
}

impl RowStatements {
    pub async fn prepare(session: &Session, ks: &str) -> Result<Self, StoreError> {
        let prep = |cql: String, idempotent: bool, serial: bool| super::prepare(session, cql, idempotent, serial);
        let partition = format!("SELECT coll, body, version FROM {ks}.objects WHERE pk = ?");
        let row = format!("SELECT body, version FROM {ks}.objects WHERE pk = ? AND coll = ?");
        Ok(RowStatements {
            partition: prep(partition.clone(), true, false).await?,
            partition_serial: prep(partition, true, true).await?,
            row: prep(row, true, false).await?,
            cas: prep(
                format!("UPDATE {ks}.objects SET body = ?, version = ? WHERE pk = ? AND coll = ? IF version = ?"),
                false,
                false,
            )
            .await?,
            meta_get: prep(format!("SELECT value FROM {ks}.meta WHERE part = 0 AND key = ?"), true, false).await?,
            meta_put: prep(format!("INSERT INTO {ks}.meta (part, key, value) VALUES (0, ?, ?)"), true, false).await?,
            meta_delete: prep(format!("DELETE FROM {ks}.meta WHERE part = 0 AND key = ?"), true, false).await?,
            meta_scan: prep(format!("SELECT key, value FROM {ks}.meta WHERE part = 0 AND key >= ?"), true, false)
                .await?,
            count_add: prep(format!("UPDATE {ks}.counts SET n = n + ? WHERE bucket = ?"), false, false).await?,
            count_all: prep(format!("SELECT n FROM {ks}.counts"), true, false).await?,
        })
    }

    /// Every row of partition `pk`; at SERIAL to see the outcome of any transaction
    /// in progress (used before reporting a conflict).
    pub async fn read_partition(&self, session: &Session, pk: &[u8], serial: bool) -> Result<Partition, StoreError> {
        let stmt = if serial { &self.partition_serial } else { &self.partition };
        let rows = rows_of::<(String, Option<Vec<u8>>, Option<i64>)>(
            session.execute_unpaged(stmt, (pk,)).await,
            "objects read",
        )?;
        Ok(Partition(rows.into_iter().map(|(coll, body, version)| (coll, ObjectRow::read(body, version))).collect()))
    }

    pub async fn read_row(&self, session: &Session, pk: &[u8], coll: &str) -> Result<ObjectRow, StoreError> {
        let rows = rows_of::<(Option<Vec<u8>>, Option<i64>)>(
            session.execute_unpaged(&self.row, (pk, coll)).await,
            "objects read",
        )?;
        Ok(rows.into_iter().next().map(|(body, version)| ObjectRow::read(body, version)).unwrap_or_default())
    }

    /// One lightweight transaction over `writes` (rows of partition `pk`): each row
    /// must still have the version it was read with. A failure may have applied,
    /// now or later: it is `Cas::Lost`, for the caller to settle (`lost.rs`).
    pub async fn compare_and_set(&self, session: &Session, pk: &[u8], writes: &[RowWrite]) -> Cas {
        let values: Vec<_> = writes
            .iter()
            .map(|w| {
                (w.new_body.as_deref(), w.new_version(), pk, w.coll.as_str(), w.old.exists.then_some(w.old.version))
            })
            .collect();
        let result = if values.len() == 1 {
            session.execute_unpaged(&self.cas, &values[0]).await
        } else {
            let mut batch = Batch::new(BatchType::Unlogged);
            for _ in &values {
                batch.append_statement(self.cas.clone());
            }
            session.batch(&batch, &values).await
        };
        match rows_of::<Row>(result, "compare-and-set") {
            Ok(rows) => match rows.first().and_then(|r| r.columns.first()).cloned().flatten() {
                Some(CqlValue::Boolean(true)) => Cas::Applied,
                Some(CqlValue::Boolean(false)) => Cas::Moved,
                other => Cas::Lost(format!("cassandra: compare-and-set answered {other:?}")),
            },
            Err(e) => Cas::Lost(e.to_string()),
        }
    }

    pub async fn meta_get(&self, session: &Session, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let rows = rows_of::<(Option<Vec<u8>>,)>(session.execute_unpaged(&self.meta_get, (key,)).await, "meta read")?;
        Ok(rows.into_iter().next().map(|(v,)| v.unwrap_or_default()))
    }

    pub async fn meta_put(&self, session: &Session, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        let result = match value {
            Some(v) => session.execute_unpaged(&self.meta_put, (key, v)).await,
            None => session.execute_unpaged(&self.meta_delete, (key,)).await,
        };
        result.map(|_| ()).map_err(|e| backend_error("meta write", e))
    }

    pub async fn meta_scan(&self, session: &Session, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let rows = rows_of::<(String, Option<Vec<u8>>)>(
            session.execute_unpaged(&self.meta_scan, (prefix,)).await,
            "meta scan",
        )?;
        Ok(rows
            .into_iter()
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k, v.unwrap_or_default()))
            .collect())
    }

    /// Adjust the approximate handle count (counters are not idempotent, so a
    /// retried increment may count twice: the figure is for metrics only).
    pub async fn count_add(&self, session: &Session, key: &[u8], delta: i64) {
        if delta == 0 {
            return;
        }
        let b = bucket(key) % BUCKETS;
        if let Err(e) = session.execute_unpaged(&self.count_add, (scylla::value::Counter(delta), b)).await {
            tracing::warn!("cassandra: handle count not updated: {e}");
        }
    }

    pub async fn count(&self, session: &Session) -> Result<u64, StoreError> {
        let rows =
            rows_of::<(Option<scylla::value::Counter>,)>(session.execute_unpaged(&self.count_all, ()).await, "count")?;
        Ok(rows.into_iter().map(|(n,)| n.map_or(0, |c| c.0)).sum::<i64>().max(0) as u64)
    }
}
