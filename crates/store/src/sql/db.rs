//! The two databases behind one face. sqlx types every query by its driver,
//! so a statement that runs on both is written once and compiled twice:
//! [`on_pool!`] and [`on_tx!`] expand one body per driver. What differs
//! between the databases is text ([`Sql`]: one statement, its two spellings,
//! side by side) and three primitives with no common SQL (the lock a write
//! takes, bulk inserts, bulk deletes: `postgres.rs`, `mysql.rs`).
//!
//! Why not sqlx's `Any` driver: it has no arrays (PostgreSQL's bulk insert is
//! one `unnest` statement), decodes MariaDB's `blob` and `tinyint(1)` columns
//! by its own narrower rules, and hides each database's error numbers behind
//! one type, where the store must tell a deadlock from a timeout.

use super::error::is_connection_lost;
use sqlx::{MySql, MySqlPool, PgPool, Postgres, Transaction};

/// Which database the URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Postgres,
    /// MariaDB, or MySQL (one wire protocol, one driver).
    MySql,
}

#[derive(Clone)]
pub(crate) enum Pool {
    Postgres(PgPool),
    MySql(MySqlPool),
}

pub(crate) enum Tx {
    Postgres(Transaction<'static, Postgres>),
    MySql(Transaction<'static, MySql>),
}

/// `$body` with `$p` bound to the pool of either database.
macro_rules! on_pool {
    ($pool:expr, $p:ident => $body:expr) => {
        match $pool {
            $crate::sql::db::Pool::Postgres($p) => $body,
            $crate::sql::db::Pool::MySql($p) => $body,
        }
    };
}

/// `$body` with `$c` bound to the connection of a transaction of either database.
macro_rules! on_tx {
    ($tx:expr, $c:ident => $body:expr) => {
        match $tx {
            $crate::sql::db::Tx::Postgres(t) => {
                let $c = &mut **t;
                $body
            }
            $crate::sql::db::Tx::MySql(t) => {
                let $c = &mut **t;
                $body
            }
        }
    };
}

/// Bind `key` as many times as the statement names it ([`Dialect::key_binds`]).
macro_rules! bind_key {
    ($query:expr, $dialect:expr, $key:expr) => {{
        let mut q = $query;
        for _ in 0..$dialect.key_binds() {
            q = q.bind($key);
        }
        q
    }};
}

pub(crate) use {bind_key, on_pool, on_tx};

/// One statement in each database's spelling.
pub(crate) struct Sql {
    pub pg: &'static str,
    pub my: &'static str,
}

impl Dialect {
    pub(crate) fn sql(self, s: &Sql) -> &'static str {
        match self {
            Dialect::Postgres => s.pg,
            Dialect::MySql => s.my,
        }
    }

    /// The `n`th (from 1) parameter of a statement built at run time.
    pub(crate) fn param(self, n: usize) -> String {
        match self {
            Dialect::Postgres => format!("${n}"),
            Dialect::MySql => "?".into(),
        }
    }

    /// How many times a statement that selects one handle or prefix binds it.
    /// MariaDB's `varchar` columns compare by their collation, which in most
    /// databases ignores case and trailing spaces: the index finds the
    /// candidates (`handle = ?`), the bytes decide (`cast(handle as binary) = ?`),
    /// so a key is exactly its bytes on either database.
    pub(crate) fn key_binds(self) -> usize {
        match self {
            Dialect::Postgres => 1,
            Dialect::MySql => 2,
        }
    }

    /// The key column as bytes, for ranges and order: PostgreSQL's `bytea`
    /// sorts bytewise already; a MariaDB `varchar` sorts by collation.
    pub(crate) fn bytes_of(self, column: &str) -> String {
        match self {
            Dialect::Postgres => column.to_owned(),
            Dialect::MySql => format!("cast({column} as binary)"),
        }
    }
}

impl Pool {
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Pool::Postgres(_) => Dialect::Postgres,
            Pool::MySql(_) => Dialect::MySql,
        }
    }

    /// A transaction on a live connection: its `begin` fails before anything
    /// was done, so it is safe to try again ([`Pool::retrying_lost`]).
    pub(crate) async fn begin(&self) -> Result<Tx, sqlx::Error> {
        self.begin_with(None).await
    }

    /// [`Pool::begin`], on PostgreSQL with `pg_opening` as the opening
    /// statements (`begin; …`, one round trip: a write's lock, records.rs).
    pub(crate) async fn begin_with(&self, pg_opening: Option<String>) -> Result<Tx, sqlx::Error> {
        self.retrying_lost(|| async {
            Ok(match self {
                Pool::Postgres(p) => match pg_opening.clone() {
                    Some(opening) => Tx::Postgres(p.begin_with(opening).await?),
                    None => Tx::Postgres(p.begin().await?),
                },
                Pool::MySql(p) => Tx::MySql(p.begin().await?),
            })
        })
        .await
    }

    /// Run `op`, which must be safe to repeat (a read, a `begin`), again while
    /// it fails on a connection the database ended. A pooled connection is
    /// pinged only after a second idle (options.rs), so one cut within that
    /// second may be handed out; it is dropped, and the next one tried: at
    /// most as many times as the pool holds connections.
    pub(crate) async fn retrying_lost<T, F, Fut>(&self, mut op: F) -> Result<T, sqlx::Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
    {
        let most = on_pool!(self, p => p.options().get_max_connections() as usize);
        let mut tries = 0;
        loop {
            match op().await {
                Err(e) if is_connection_lost(&e) && tries < most => tries += 1,
                other => return other,
            }
        }
    }

    pub(crate) async fn close(&self) {
        on_pool!(self, p => p.close().await)
    }
}

impl Tx {
    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Tx::Postgres(t) => t.commit().await,
            Tx::MySql(t) => t.commit().await,
        }
    }

    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        match self {
            Tx::Postgres(t) => t.rollback().await,
            Tx::MySql(t) => t.rollback().await,
        }
    }
}
