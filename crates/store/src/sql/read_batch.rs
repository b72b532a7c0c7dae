//! Point reads taken together. A resolution is one `select` of a handle's
//! rows, and under load most of the database's work per `select` is the
//! statement's round itself (bind, execute, sync, a wake-up of its backend),
//! not the index lookup. So at most `lanes` reads are in flight at once
//! (lanes.rs); lookups that arrive while all lanes are busy wait and go
//! together in the lane's next statement (`handle = any($1)` on PostgreSQL,
//! `handle in (…)` on MariaDB), up to [`MOST_KEYS`] a statement.
//!
//! A quiet server answers as before (a lookup that finds a free lane is sent
//! at once, alone). Every statement is
//! sent after its lookups arrived, so a row committed before a request came
//! is in its answer (deposits by other programs are seen at once, as
//! without batching), and each handle's rows come from one statement's
//! snapshot. Custom `get_handle_stmt`s (one parameter, any SQL) are not batched.
//!
//! Bounds: the lookups waiting are requests the server admitted (its
//! admission control bounds them), a statement carries at most
//! [`MOST_KEYS`], and a lookup waits at most for the statement in flight
//! and its own, each cut by the database's statement timeout.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sqlx::Row;
use tokio::sync::oneshot;

use handled_proto::HandleValue;

use super::db::{Pool, Tx};
use super::error::backend;
use super::lanes::Lanes;
use super::layout::{Col, Layout, PgKeys, Queries};
use super::records::{record_of, value_of};
use super::values::NullableRow;
use crate::{HandleRecord, StoreError};

/// Most keys one statement asks for: bounds its parameters and its answer.
pub(crate) const MOST_KEYS: usize = 64;

type Answer = Result<Option<HandleRecord>, StoreError>;

struct Waiter {
    key: Vec<u8>,
    reply: oneshot::Sender<Answer>,
}

/// The batched point reads of one store.
pub(crate) struct ReadBatches {
    pool: Pool,
    select: Select,
    lanes: Lanes<Waiter>,
    lookups: AtomicU64,
    statements: AtomicU64,
}

/// How many lookups went in how many statements, since the store was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LookupCounts {
    pub lookups: u64,
    pub statements: u64,
}

/// The statement for `n` keys: PostgreSQL takes one array whatever `n`;
/// MariaDB a list of `?`, made for powers of two (short lists are padded by
/// repeating a key) so that few distinct statements are prepared. Each in two
/// forms: `[plain, locking]` (`for update`, inside a write's transaction).
enum Select {
    Postgres { pool: sqlx::PgPool, sql: [String; 2], text: bool },
    MySql { pool: sqlx::MySqlPool, by_size: Vec<(usize, [String; 2])> },
}

fn plain_and_locking(select: String) -> [String; 2] {
    let locking = format!("{select} for update");
    [select, locking]
}

impl ReadBatches {
    pub(crate) fn new(pool: Pool, queries: &Queries, layout: Layout, lanes: usize) -> Arc<ReadBatches> {
        // A value's columns (value_of! reads 0..=10), then the handle's bytes.
        let handle = layout.bytes(pool.dialect(), Col::Handle);
        let select = format!("select {}, {handle} as h from handles where", queries.value_columns);
        let select = match &pool {
            Pool::Postgres(pool) => {
                let sql = plain_and_locking(format!("{select} {} order by idx", layout.pg_any_handle()));
                Select::Postgres { pool: pool.clone(), sql, text: layout.text(Col::Handle) }
            }
            Pool::MySql(pool) => {
                let sizes = std::iter::successors(Some(1usize), |n| (*n < MOST_KEYS).then_some(n * 2));
                let by_size = sizes
                    .map(|n| {
                        let sql = format!("{select} handle in ({}) order by idx", vec!["?"; n].join(", "));
                        (n, plain_and_locking(sql))
                    })
                    .collect();
                Select::MySql { pool: pool.clone(), by_size }
            }
        };
        Arc::new(ReadBatches {
            pool,
            select,
            lanes: Lanes::new(lanes),
            lookups: AtomicU64::new(0),
            statements: AtomicU64::new(0),
        })
    }

    /// The record of `key` (a key the column can hold: `SqlStore::storable_key`).
    pub(crate) async fn get(self: &Arc<Self>, key: &[u8]) -> Answer {
        let (reply, answer) = oneshot::channel();
        if self.lanes.push(Waiter { key: key.to_vec(), reply }) {
            let me = Arc::clone(self);
            tokio::spawn(async move { me.serve_lane().await });
        }
        answer.await.unwrap_or_else(|_| Err(StoreError::Backend("sql: a batched read was dropped".into())))
    }

    /// The pool the batched reads take their connections from (options.rs's
    /// `point_read_pool` on PostgreSQL).
    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    pub(crate) fn counts(&self) -> LookupCounts {
        LookupCounts {
            lookups: self.lookups.load(Ordering::Relaxed),
            statements: self.statements.load(Ordering::Relaxed),
        }
    }

    /// Send statements for the waiting lookups until none waits, then free the lane.
    async fn serve_lane(&self) {
        let mut lane = self.lanes.reserved();
        while let Some(batch) = lane.next(|w| w.drain(..w.len().min(MOST_KEYS)).collect()) {
            let keys: Vec<&[u8]> = batch.iter().map(|w| w.key.as_slice()).collect();
            self.lookups.fetch_add(keys.len() as u64, Ordering::Relaxed);
            self.statements.fetch_add(1, Ordering::Relaxed);
            match self.pool.retrying_lost(|| self.fetch(&keys, None)).await {
                Ok(found) => {
                    for w in batch {
                        let values = found.get(&w.key).cloned().unwrap_or_default();
                        let _ = w.reply.send(Ok(record_of(values)));
                    }
                }
                Err(e) => {
                    let e = backend(e);
                    for w in batch {
                        let _ = w.reply.send(Err(e.duplicate()));
                    }
                }
            }
        }
    }

    /// The values of each of `keys` that has rows, in index order; inside
    /// `tx`, its rows locked for the rest of the transaction (write_batch.rs).
    pub(crate) async fn fetch(
        &self,
        keys: &[&[u8]],
        tx: Option<&mut Tx>,
    ) -> Result<HashMap<Vec<u8>, Vec<HandleValue>>, sqlx::Error> {
        let mut found: HashMap<Vec<u8>, Vec<HandleValue>> = HashMap::with_capacity(keys.len());
        let mut keep = |handle: Vec<u8>, value: HandleValue| {
            // MariaDB's `in` matched by collation (case, trailing spaces): the bytes decide.
            if keys.contains(&handle.as_slice()) {
                found.entry(handle).or_default().push(value);
            }
        };
        let form = usize::from(tx.is_some());
        let other_database = || sqlx::Error::Protocol("internal: a transaction on another database".into());
        match &self.select {
            Select::Postgres { pool, sql, text } => {
                let query = sqlx::query(&sql[form]).bind(PgKeys::new(keys, *text));
                let rows = match tx {
                    None => query.fetch_all(pool).await?,
                    Some(Tx::Postgres(t)) => query.fetch_all(&mut **t).await?,
                    Some(_) => return Err(other_database()),
                };
                for r in rows {
                    keep(r.try_get(11)?, value_of!(&r)?);
                }
            }
            Select::MySql { pool, by_size } => {
                let (size, sql) = by_size.iter().find(|(n, _)| *n >= keys.len()).expect("batches hold MOST_KEYS");
                let mut query = sqlx::query(&sql[form]);
                for i in 0..*size {
                    query = query.bind(keys[i.min(keys.len() - 1)]);
                }
                let rows = match tx {
                    None => query.fetch_all(pool).await?,
                    Some(Tx::MySql(t)) => query.fetch_all(&mut **t).await?,
                    Some(_) => return Err(other_database()),
                };
                for r in rows {
                    keep(r.try_get(11)?, value_of!(&r)?);
                }
            }
        }
        Ok(found)
    }
}
