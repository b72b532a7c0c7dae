//! Database errors as [`StoreError`]s, with the cases an operator must tell
//! apart (timeouts, an unreachable database, a value too large for an index)
//! said plainly.

use crate::StoreError;

pub(crate) fn backend(e: sqlx::Error) -> StoreError {
    match &e {
        sqlx::Error::PoolClosed => StoreError::Closed,
        sqlx::Error::PoolTimedOut => {
            StoreError::Backend("sql: no database connection within connect_timeout_ms (is the database up?)".into())
        }
        sqlx::Error::Database(db) => match db.code().as_deref() {
            // query_canceled: statement_timeout (a lock held too long included).
            Some("57014") => StoreError::Backend(format!("sql: statement timed out (statement_timeout_ms): {db}")),
            // program_limit_exceeded: a value too large for `dataindex`.
            Some("54000") => StoreError::Backend(format!(
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
    matches!(e, sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::Tls(_))
}

/// A unique-key violation: another writer inserted the same row first
/// (one that does not take our advisory lock, e.g. Handle.Net itself).
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("23505"))
}
