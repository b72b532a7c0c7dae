//! Database errors as [`StoreError`]s, with the cases an operator must tell
//! apart (timeouts, an unreachable database) said plainly, the ones a write
//! may try again (a lost race) recognised, and the ones that can never
//! succeed (a name or value the table cannot hold, a key its collation takes
//! for another's) made [`StoreError::Refused`], on either database:
//! PostgreSQL by SQLSTATE, MariaDB/MySQL by error number.

use sqlx::error::DatabaseError;
use sqlx::mysql::MySqlDatabaseError;
use sqlx::postgres::PgDatabaseError;

use crate::{Refused, StoreError};

#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Timeout,
    /// A deadlock or serialization failure: the database rolled this
    /// transaction back for another's sake; trying again may succeed.
    LostRace,
    /// A unique-key violation on PostgreSQL: a writer that takes no lock of
    /// ours (Handle.Net, an application's `insert`) may have inserted first.
    Unique,
    /// The server ended the session (restart, `pg_terminate_backend`, `KILL`).
    Lost,
    /// Refused for good: the same statement can never succeed.
    Refused(Refused),
    Other,
}

fn kind(db: &dyn DatabaseError) -> Kind {
    if let Some(my) = db.try_downcast_ref::<MySqlDatabaseError>() {
        return match my.number() {
            // max_statement_time (MariaDB), max_execution_time (MySQL), innodb_lock_wait_timeout.
            1969 | 3024 | 1205 => Kind::Timeout,
            1213 => Kind::LostRace,
            // A duplicate key is no lost race here: every write first reads or
            // deletes its handles with locking statements (next-key locks on
            // the key's range by the table's collation, mysql.rs; SERIALIZABLE
            // for a writable view), so a racing creator meets it in a lock wait
            // or a deadlock (1213). The row it clashes with was there already:
            // equal by the collation (letter case, trailing spaces), or by
            // another unique key of an operator's table.
            1062 | 1586 => Kind::Refused(Refused::Taken),
            // Data too long, incorrect string value, out of range, truncated,
            // incorrect value (strict mode, options.rs): the column cannot hold it.
            1406 | 1366 | 1264 | 1265 | 1292 => Kind::Refused(column_of(db.message())),
            // Null in a not-null column, foreign keys, check constraints (MariaDB,
            // MySQL), a row or packet over the server's limits.
            1048 | 1451 | 1452 | 4025 | 3819 | 1118 | 1153 => Kind::Refused(Refused::Value),
            // Connection killed; server shutdown in progress.
            1927 | 1053 => Kind::Lost,
            _ => Kind::Other,
        };
    }
    let column = || match db.try_downcast_ref::<PgDatabaseError>().and_then(|pg| pg.column()) {
        Some(c) => column_named(c),
        None => column_of(db.message()),
    };
    match db.code().as_deref() {
        // query_canceled: statement_timeout (a lock held too long included); lock_not_available.
        Some("57014" | "55P03") => Kind::Timeout,
        Some("40P01" | "40001") => Kind::LostRace,
        Some("23505") => Kind::Unique,
        // admin_shutdown, crash_shutdown, cannot_connect_now; class 08, connection exceptions.
        Some("57P01" | "57P02" | "57P03") => Kind::Lost,
        Some(code) if code.starts_with("08") => Kind::Lost,
        // program_limit_exceeded: a key too large for its index (dataindex, the primary key).
        Some("54000") => Kind::Refused(column()),
        // Class 22, data exceptions (too long for a varchar, not UTF-8, out of
        // range); class 23, integrity constraints (not null, foreign key, check).
        Some(code) if code.starts_with("22") || code.starts_with("23") => Kind::Refused(column()),
        _ => Kind::Other,
    }
}

/// Which part of a handle a column named in the database's message holds:
/// MariaDB's "for column 'handle'", PostgreSQL's index "handles_pkey".
fn column_of(message: &str) -> Refused {
    let names_key = ["'handle'", "`handle`", "'na'", "`na`", "handles_pkey", "handleindex", "nas_pkey"]
        .iter()
        .any(|c| message.contains(c));
    if names_key {
        Refused::Name
    } else {
        Refused::Value
    }
}

fn column_named(column: &str) -> Refused {
    match column {
        "handle" | "na" => Refused::Name,
        _ => Refused::Value,
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
            Kind::Refused(what) => refused(what, db.as_ref()),
            _ => StoreError::Backend(format!("sql: {db}")),
        },
        _ => StoreError::Backend(format!("sql: {e}")),
    }
}

/// A definite refusal, saying what was refused and, for Handle.Net's own
/// limits, what would hold more.
fn refused(what: Refused, db: &dyn DatabaseError) -> StoreError {
    let mariadb = db.try_downcast_ref::<MySqlDatabaseError>();
    let too_large = match (mariadb.map(|m| m.number()), db.code().as_deref()) {
        (Some(n), _) => matches!(n, 1406 | 1118 | 1153),
        (None, code) => code == Some("54000"),
    };
    let message = match what {
        Refused::Name => format!("sql: the database refused the handle name: its column cannot hold it ({db})"),
        Refused::Taken => format!(
            "sql: the database refused the handle: it holds another that its table takes for the same one (the \
             table's collation ignores letter case or trailing spaces; Handle.Net's case-insensitive servers \
             store handles upper case, §8.1.3), or a unique key of the table refused it ({db})"
        ),
        Refused::Value if too_large && mariadb.is_some() => format!(
            "sql: the database refused a value as too large ({db}); Handle.Net's `blob` column holds \
             65535 bytes (make `data` a mediumblob to hold more)"
        ),
        Refused::Value if too_large => format!(
            "sql: the database refused a value as too large ({db}); Handle.Net's dataindex limits \
             a value's data to about 2.7 kB"
        ),
        Refused::Value => format!("sql: the database refused a value: its table cannot hold it ({db})"),
    };
    StoreError::Refused { what, message }
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

/// A unique-key violation on PostgreSQL (another writer inserted the same
/// row first); on MariaDB a duplicate key is a refusal ([`kind`]).
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if kind(db.as_ref()) == Kind::Unique)
}

/// A deadlock or serialization failure: the database rolled this
/// transaction back for another's sake, which may still be running.
pub(crate) fn is_lost_race(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if kind(db.as_ref()) == Kind::LostRace)
}

/// A write that lost a race and may be tried again: a unique violation
/// (PostgreSQL), or a deadlock or serialization failure the database broke by
/// rolling this transaction back. Never a refusal: it would be refused again.
pub(crate) fn is_retryable_write(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if matches!(kind(db.as_ref()), Kind::Unique | Kind::LostRace))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refused_column_is_read_from_the_message() {
        assert_eq!(column_of("Data too long for column 'handle' at row 1"), Refused::Name);
        assert_eq!(
            column_of("Incorrect string value: '\\xF0' for column `db`.`handles`.`handle` at row 1"),
            Refused::Name
        );
        assert_eq!(column_of("Data too long for column 'na' at row 1"), Refused::Name);
        assert_eq!(column_of("index row size 2720 exceeds maximum 2704 for index \"handles_pkey\""), Refused::Name);
        assert_eq!(column_of("Data too long for column 'data' at row 1"), Refused::Value);
        assert_eq!(column_of("Incorrect string value for column `db`.`handles`.`type` at row 1"), Refused::Value);
        assert_eq!(column_of("index row requires 70016 bytes, maximum size is 8191"), Refused::Value);
        assert_eq!(column_named("handle"), Refused::Name);
        assert_eq!(column_named("data"), Refused::Value);
    }
}
