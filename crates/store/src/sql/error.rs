//! Database errors as [`StoreError`]s, with the cases an operator must tell
//! apart (timeouts, an unreachable database, a value too large) said plainly,
//! and the ones a write may try again (a lost race) recognised, on either
//! database: PostgreSQL by SQLSTATE, MariaDB/MySQL by error number.

use sqlx::error::DatabaseError;
use sqlx::mysql::MySqlDatabaseError;

use crate::StoreError;

#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Timeout,
    TooLarge,
    Unique,
    Deadlock,
    /// The server ended the session (restart, `pg_terminate_backend`, `KILL`).
    Lost,
    Other,
}

fn kind(db: &dyn DatabaseError) -> Kind {
    if let Some(my) = db.try_downcast_ref::<MySqlDatabaseError>() {
        return match my.number() {
            // max_statement_time (MariaDB), max_execution_time (MySQL), innodb_lock_wait_timeout.
            1969 | 3024 | 1205 => Kind::Timeout,
            // Data too long for column (strict mode): a value over the `blob` column's 64 kB.
            1406 => Kind::TooLarge,
            1062 => Kind::Unique,
            1213 => Kind::Deadlock,
            // Connection killed; server shutdown in progress.
            1927 | 1053 => Kind::Lost,
            _ => Kind::Other,
        };
    }
    match db.code().as_deref() {
        // query_canceled: statement_timeout (a lock held too long included).
        Some("57014") => Kind::Timeout,
        // program_limit_exceeded: a value too large for `dataindex`.
        Some("54000") => Kind::TooLarge,
        Some("23505") => Kind::Unique,
        Some("40P01") => Kind::Deadlock,
        // admin_shutdown, crash_shutdown, cannot_connect_now; class 08, connection exceptions.
        Some("57P01" | "57P02" | "57P03") => Kind::Lost,
        Some(code) if code.starts_with("08") => Kind::Lost,
        _ => Kind::Other,
    }
}

pub(crate) fn backend(e: sqlx::Error) -> StoreError {
    match &e {
        sqlx::Error::PoolClosed => StoreError::Closed,
        sqlx::Error::PoolTimedOut => {
            StoreError::Backend("sql: no database connection within connect_timeout_ms (is the database up?)".into())
        }
        sqlx::Error::Database(db) => match kind(db.as_ref()) {
            Kind::Timeout => StoreError::Backend(format!("sql: statement timed out (statement_timeout_ms): {db}")),
            Kind::TooLarge if db.try_downcast_ref::<MySqlDatabaseError>().is_some() => StoreError::Backend(format!(
                "sql: the database refused a value as too large ({db}); Handle.Net's `blob` column holds \
                 65535 bytes (make `data` a mediumblob to hold more)"
            )),
            Kind::TooLarge => StoreError::Backend(format!(
                "sql: the database refused a value as too large ({db}); Handle.Net's dataindex limits \
                 a value's data to about 2.7 kB"
            )),
            _ => StoreError::Backend(format!("sql: {db}")),
        },
        _ => StoreError::Backend(format!("sql: {e}")),
    }
}

/// Whether a failed read may be tried again on another connection: the
/// connection broke (database restarted, connection cut), not the statement.
pub(crate) fn is_connection_lost(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::Tls(_) => true,
        sqlx::Error::Database(db) => kind(db.as_ref()) == Kind::Lost,
        _ => false,
    }
}

/// Whether a failed transaction of several writes may have failed for one of
/// them (the database refused a statement: a value, a key, a lock wait cut
/// by the statement timeout), so that each is worth trying alone
/// (write_batch.rs); not when the database could not be reached at all.
pub(crate) fn may_be_one_writes_fault(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if kind(db.as_ref()) != Kind::Lost)
}

/// A unique-key violation: another writer inserted the same row first
/// (one that does not take our lock, e.g. Handle.Net itself).
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if kind(db.as_ref()) == Kind::Unique)
}

/// A write that lost a race and may be tried again: a unique violation, or
/// a deadlock the database broke by rolling this transaction back.
pub(crate) fn is_retryable_write(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if matches!(kind(db.as_ref()), Kind::Unique | Kind::Deadlock))
}
