//! Point reads taken together. A resolution is one `select` of a handle's
//! rows, and under load most of the database's work per `select` is the
//! statement's round itself (bind, execute, sync, a wake-up of its backend),
//! not the index lookup. So at most `lanes` reads are in flight at once;
//! lookups that arrive while all lanes are busy wait and go together in the
//! lane's next statement (`handle = any($1)` on PostgreSQL, `handle in (…)`
//! on MariaDB), up to [`MOST_KEYS`] a statement.
//!
//! Nothing waits for a batch to fill: a lookup that finds a free lane is sent
//! at once, alone, so a quiet server answers as before. Every statement is
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

use parking_lot::Mutex;
use sqlx::Row;
use tokio::sync::oneshot;

use handled_proto::HandleValue;

use super::db::Pool;
use super::error::backend;
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

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiter>,
    /// Lanes sending a statement now (at most `lanes`).
    busy: usize,
}

/// The batched point reads of one store.
pub(crate) struct ReadBatches {
    pool: Pool,
    lanes: usize,
    select: Select,
    queue: Mutex<Queue>,
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
/// repeating a key) so that few distinct statements are prepared.
enum Select {
    Postgres { pool: sqlx::PgPool, sql: String, text: bool },
    MySql { pool: sqlx::MySqlPool, by_size: Vec<(usize, String)> },
}

impl ReadBatches {
    pub(crate) fn new(pool: Pool, queries: &Queries, layout: Layout, lanes: usize) -> Arc<ReadBatches> {
        // A value's columns (value_of! reads 0..=10), then the handle's bytes.
        let handle = layout.bytes(pool.dialect(), Col::Handle);
        let select = format!("select {}, {handle} as h from handles where", queries.value_columns);
        let select = match &pool {
            Pool::Postgres(pool) => {
                let sql = format!("{select} {} order by idx", layout.pg_any_handle());
                Select::Postgres { pool: pool.clone(), sql, text: layout.text(Col::Handle) }
            }
            Pool::MySql(pool) => {
                let sizes = std::iter::successors(Some(1usize), |n| (*n < MOST_KEYS).then_some(n * 2));
                let by_size = sizes
                    .map(|n| (n, format!("{select} handle in ({}) order by idx", vec!["?"; n].join(", "))))
                    .collect();
                Select::MySql { pool: pool.clone(), by_size }
            }
        };
        Arc::new(ReadBatches {
            pool,
            lanes: lanes.max(1),
            select,
            queue: Mutex::new(Queue::default()),
            lookups: AtomicU64::new(0),
            statements: AtomicU64::new(0),
        })
    }

    /// The record of `key` (a key the column can hold: `SqlStore::storable_key`).
    pub(crate) async fn get(self: &Arc<Self>, key: &[u8]) -> Answer {
        let (reply, answer) = oneshot::channel();
        let lead = {
            let mut q = self.queue.lock();
            q.waiting.push(Waiter { key: key.to_vec(), reply });
            let free = q.busy < self.lanes;
            q.busy += usize::from(free);
            free
        };
        if lead {
            // A task of its own, so that a lookup given up by its caller (a
            // timeout) cannot strand the others of its statement.
            let me = Arc::clone(self);
            tokio::spawn(async move { me.serve_lane().await });
        }
        answer.await.unwrap_or_else(|_| Err(StoreError::Backend("sql: a batched read was dropped".into())))
    }

    pub(crate) fn counts(&self) -> LookupCounts {
        LookupCounts {
            lookups: self.lookups.load(Ordering::Relaxed),
            statements: self.statements.load(Ordering::Relaxed),
        }
    }

    /// Send statements for the waiting lookups until none waits, then free the lane.
    async fn serve_lane(&self) {
        let mut lane = Lane { batches: self, held: true };
        loop {
            let batch: Vec<Waiter> = {
                let mut q = self.queue.lock();
                if q.waiting.is_empty() {
                    // Freed under the lock that saw the queue empty: a lookup
                    // queued after it finds the lane free and takes it.
                    q.busy -= 1;
                    lane.held = false;
                    return;
                }
                let n = q.waiting.len().min(MOST_KEYS);
                q.waiting.drain(..n).collect()
            };
            let keys: Vec<&[u8]> = batch.iter().map(|w| w.key.as_slice()).collect();
            self.lookups.fetch_add(keys.len() as u64, Ordering::Relaxed);
            self.statements.fetch_add(1, Ordering::Relaxed);
            match self.pool.retrying_lost(|| self.fetch(&keys)).await {
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

    /// The values of each of `keys` that has rows, in index order.
    async fn fetch(&self, keys: &[&[u8]]) -> Result<HashMap<Vec<u8>, Vec<HandleValue>>, sqlx::Error> {
        let mut found: HashMap<Vec<u8>, Vec<HandleValue>> = HashMap::with_capacity(keys.len());
        let mut keep = |handle: Vec<u8>, value: HandleValue| {
            // MariaDB's `in` matched by collation (case, trailing spaces): the bytes decide.
            if keys.contains(&handle.as_slice()) {
                found.entry(handle).or_default().push(value);
            }
        };
        match &self.select {
            Select::Postgres { pool, sql, text } => {
                let query = sqlx::query(sql).bind(PgKeys::new(keys, *text));
                for r in query.fetch_all(pool).await? {
                    keep(r.try_get(11)?, value_of!(&r)?);
                }
            }
            Select::MySql { pool, by_size } => {
                let (size, sql) = by_size.iter().find(|(n, _)| *n >= keys.len()).expect("batches hold MOST_KEYS");
                let mut query = sqlx::query(sql);
                for i in 0..*size {
                    query = query.bind(keys[i.min(keys.len() - 1)]);
                }
                for r in query.fetch_all(pool).await? {
                    keep(r.try_get(11)?, value_of!(&r)?);
                }
            }
        }
        Ok(found)
    }
}

/// A busy lane; frees itself if its task ends by a panic (lookups then
/// waiting are served by the next lookup's lane).
struct Lane<'a> {
    batches: &'a ReadBatches,
    held: bool,
}

impl Drop for Lane<'_> {
    fn drop(&mut self) {
        if self.held {
            self.batches.queue.lock().busy -= 1;
        }
    }
}
