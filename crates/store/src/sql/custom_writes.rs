//! Writes through custom statements (custom.rs), made as Handle.Net 9's
//! SQLHandleStorage makes them: a new handle is `create_handle_stmt` once per
//! value; a changed one is `delete_handle_stmt`, then its values again; a
//! deleted one is `delete_handle_stmt`. `handled` runs them inside its own
//! write (records.rs): the lock, the read through `get_handle_stmt`, the
//! compare, then these statements, all in one transaction.
//!
//! Writers of one handle are serialised as with the built-in statements. On
//! PostgreSQL, the advisory lock every write takes (postgres.rs) comes first,
//! and `get_handle_stmt` then reads what the last writer committed (READ
//! COMMITTED). On MariaDB, a writable view's connections run SERIALIZABLE
//! (options.rs), under which InnoDB takes shared next-key locks for a
//! transaction's reads, whatever tables `get_handle_stmt` reads: a second
//! writer of the handle waits, or deadlocks and is tried again (records.rs).
//!
//! Parameters are bound as Handle.Net binds them (`setBytes`, `setInt`,
//! `setString`, `setBoolean`), converted where PostgreSQL typed the
//! parameter otherwise (a handle in a `text` column, a permission in a
//! `smallint`). A value that cannot be converted (data that is not UTF-8 for
//! a `text` parameter) is refused before anything is written.

use sqlx::mysql::MySqlArguments;
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::{MySql, Postgres};

use super::custom::{Custom, Kind, Prepared, Stmt, VALUE_COLUMNS};
use super::custom_ops::{key_param, record_of_values, run_with_key, value_of, Param};
use super::db::{on_pool, on_tx, Tx};
use super::values::ValueRow;
use super::SqlCore;
use crate::{HandleRecord, InvalidRecord, StoreError};

/// `create_handle_stmt`'s parameters in Handle.Net's order: the handle, then
/// `get_handle_stmt`'s columns; name, and what Handle.Net sets there.
fn create_param(i: usize) -> (&'static str, Kind) {
    match i {
        0 => ("handle", Kind::Bytes),
        i => VALUE_COLUMNS.get(i - 1).copied().unwrap_or(("?", Kind::Bytes)),
    }
}

/// One parameter's value.
#[derive(Debug, Clone, Copy)]
enum Arg<'a> {
    Bytes(&'a [u8]),
    Int(i64),
    Text(&'a str),
    Bool(bool),
}

impl Arg<'_> {
    fn bytes(self) -> Vec<u8> {
        match self {
            Arg::Bytes(b) => b.to_vec(),
            Arg::Text(t) => t.as_bytes().to_vec(),
            Arg::Int(n) => n.to_string().into_bytes(),
            Arg::Bool(b) => b.to_string().into_bytes(),
        }
    }

    /// Text (bytes that are not UTF-8 were refused by [`check_create_row`]).
    fn text(self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }

    fn int(self) -> i64 {
        match self {
            Arg::Int(n) => n,
            Arg::Bool(b) => i64::from(b),
            // Refused by check_create_params: no such parameter is bound.
            Arg::Bytes(_) | Arg::Text(_) => 0,
        }
    }
}

fn create_args<'a>(key: &'a [u8], r: &'a ValueRow) -> [Arg<'a>; 12] {
    [
        Arg::Bytes(key),
        Arg::Int(r.idx.into()),
        Arg::Bytes(&r.value_type),
        Arg::Bytes(&r.data),
        Arg::Int(r.ttl_type.into()),
        Arg::Int(r.ttl.into()),
        Arg::Int(r.timestamp.into()),
        Arg::Text(&r.refs),
        Arg::Bool(r.admin_read),
        Arg::Bool(r.admin_write),
        Arg::Bool(r.pub_read),
        Arg::Bool(r.pub_write),
    ]
}

/// A PostgreSQL parameter type, as this binds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PgParam {
    Bytes,
    Text,
    Int2,
    Int4,
    Int8,
    Bool,
}

fn pg_param(ty: &str) -> Option<PgParam> {
    Some(match ty.to_ascii_uppercase().as_str() {
        "BYTEA" => PgParam::Bytes,
        "TEXT" | "VARCHAR" | "CHAR" | "BPCHAR" | "NAME" | "CITEXT" => PgParam::Text,
        "INT2" | "SMALLINT" => PgParam::Int2,
        "INT4" | "INT" | "INTEGER" => PgParam::Int4,
        "INT8" | "BIGINT" => PgParam::Int8,
        "BOOL" | "BOOLEAN" => PgParam::Bool,
        _ => return None,
    })
}

/// Whether a parameter of type `p` can take what Handle.Net sets as `kind`
/// (`setBytes` or `setString`, `setInt`, `setBoolean`).
fn takes(p: PgParam, kind: Kind) -> bool {
    let int = matches!(p, PgParam::Int2 | PgParam::Int4 | PgParam::Int8);
    match kind {
        Kind::Bytes => matches!(p, PgParam::Bytes | PgParam::Text),
        Kind::Int => int,
        Kind::Bool => int || p == PgParam::Bool,
    }
}

/// Every parameter of `create_handle_stmt` (PostgreSQL's inferred types;
/// none on MariaDB) can take what Handle.Net sets there.
fn check_create_params(params: &[String]) -> Result<(), String> {
    for (i, ty) in params.iter().enumerate() {
        let (name, kind) = create_param(i);
        if !pg_param(ty).is_some_and(|p| takes(p, kind)) {
            return Err(format!(
                "parameter {} ({name}) is of type {ty}, which cannot take Handle.Net's {}; cast it in the statement",
                i + 1,
                match kind {
                    Kind::Bytes => "text or bytes",
                    Kind::Int => "integer",
                    Kind::Bool => "boolean",
                }
            ));
        }
    }
    Ok(())
}

/// At start, after the statements were prepared: a custom
/// `create_handle_stmt` can take Handle.Net's parameters (the key named).
pub(crate) fn check_create(custom: &Custom) -> Result<(), StoreError> {
    match custom.get(Stmt::CreateHandle) {
        Some(p) => check_create_params(&p.params)
            .map_err(|m| StoreError::Backend(format!("sql: {}: {m}", Stmt::CreateHandle.key()))),
        None => Ok(()),
    }
}

/// Before a write: the row's values fit `create_handle_stmt`'s parameters
/// (text parameters take UTF-8 only, a `smallint` a small number).
pub(crate) fn check_create_row(p: &Prepared, key: &[u8], row: &ValueRow) -> Result<(), InvalidRecord> {
    for (i, (ty, arg)) in p.params.iter().zip(create_args(key, row)).enumerate() {
        let name = create_param(i).0;
        let fits = match (pg_param(ty), arg) {
            (Some(PgParam::Text), Arg::Bytes(b)) => std::str::from_utf8(b).is_ok(),
            (Some(PgParam::Int2), a) => i16::try_from(a.int()).is_ok(),
            (Some(PgParam::Int4), a) => i32::try_from(a.int()).is_ok(),
            _ => true,
        };
        if !fits {
            return Err(InvalidRecord(format!(
                "sql: create_handle_stmt's parameter {name} is of type {ty}, which cannot hold this value's {name} \
                 (index {})",
                row.idx
            )));
        }
    }
    Ok(())
}

fn bind_pg<'q>(q: Query<'q, Postgres, PgArguments>, p: PgParam, arg: Arg<'_>) -> Query<'q, Postgres, PgArguments> {
    let n = arg.int();
    match p {
        PgParam::Bytes => q.bind(arg.bytes()),
        PgParam::Text => q.bind(arg.text()),
        PgParam::Int2 => q.bind(n.clamp(i16::MIN.into(), i16::MAX.into()) as i16),
        PgParam::Int4 => q.bind(n.clamp(i32::MIN.into(), i32::MAX.into()) as i32),
        PgParam::Int8 => q.bind(n),
        PgParam::Bool => q.bind(n != 0),
    }
}

/// MariaDB's parameters are untyped: each is sent as Handle.Net sets it.
fn bind_mysql<'q>(q: Query<'q, MySql, MySqlArguments>, arg: Arg<'_>) -> Query<'q, MySql, MySqlArguments> {
    match arg {
        Arg::Bytes(b) => q.bind(b.to_vec()),
        Arg::Int(n) => q.bind(n),
        Arg::Text(t) => q.bind(t.to_owned()),
        Arg::Bool(b) => q.bind(b),
    }
}

impl Tx {
    /// `get_handle_stmt` inside a write: the values the compare sees.
    pub(super) async fn custom_read(&mut self, p: &Prepared, key: &[u8]) -> Result<Option<HandleRecord>, sqlx::Error> {
        let values = run_with_key!(on_tx, self, p, key, |q, c| {
            let rows = q.fetch_all(c).await?;
            rows.iter().map(value_of).collect::<Result<Vec<_>, _>>()?
        });
        Ok(record_of_values(values))
    }

    /// `delete_handle_stmt` for each key.
    pub(super) async fn custom_delete(&mut self, p: &Prepared, keys: &[&[u8]]) -> Result<(), sqlx::Error> {
        for key in keys {
            run_with_key!(on_tx, &mut *self, p, key, |q, c| q.execute(c).await.map(drop)?);
        }
        Ok(())
    }

    /// `create_handle_stmt` for each value of each key.
    pub(super) async fn custom_create(&mut self, p: &Prepared, rows: &[(&[u8], &ValueRow)]) -> Result<(), sqlx::Error> {
        for (key, row) in rows {
            let args = create_args(key, row);
            match self {
                Tx::Postgres(t) => {
                    let mut q = sqlx::query(&p.sql);
                    for (ty, arg) in p.params.iter().zip(args) {
                        q = bind_pg(q, pg_param(ty).unwrap_or(PgParam::Bytes), arg);
                    }
                    q.execute(&mut **t).await?;
                }
                Tx::MySql(t) => {
                    let mut q = sqlx::query(&p.sql);
                    for arg in args {
                        q = bind_mysql(q, arg);
                    }
                    q.execute(&mut **t).await?;
                }
            }
        }
        Ok(())
    }
}

impl SqlCore {
    /// Home (or unhome) `na` through `add_na_stmt` (`del_na_stmt`), as
    /// Handle.Net's `setHaveNA` does: only if it is not so already, so that
    /// homing twice leaves one row.
    pub(super) async fn custom_home(&self, p: &Prepared, key: &str, na: &[u8], home: bool) -> Result<(), StoreError> {
        if self.meta_read(key).await?.is_some() == home {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let done = run_with_key!(on_pool, &self.pool, p, na, |q, c| q.execute(c).await.map(drop));
        self.counted_write(started, done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_take_what_handle_net_sets_or_are_refused_at_start() {
        let all = |t: &str| vec![t.to_string(); 12];
        let mut ok: Vec<String> = ["BYTEA", "INT4", "TEXT", "BYTEA", "INT2", "INT8", "INT4", "TEXT", "BOOL", "INT2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        ok.extend(["BOOL".into(), "BOOL".into()]);
        assert_eq!(check_create_params(&ok), Ok(()));
        assert_eq!(check_create_params(&[]), Ok(()), "MariaDB: untyped");
        let e = check_create_params(&all("TEXT")).unwrap_err();
        assert!(e.contains("parameter 2 (idx)") && e.contains("integer"), "{e}");
        let mut bad = ok.clone();
        bad[3] = "TIMESTAMPTZ".into();
        assert!(check_create_params(&bad).unwrap_err().contains("parameter 4 (data)"));
    }

    #[test]
    fn rows_that_a_text_or_small_parameter_cannot_hold_are_refused() {
        let mut params = vec!["TEXT".to_string(), "INT2".into(), "TEXT".into(), "TEXT".into()];
        params.extend(std::iter::repeat_n("INT4".to_string(), 3));
        params.push("TEXT".into());
        params.extend(std::iter::repeat_n("BOOL".to_string(), 4));
        let p = Prepared { sql: String::new(), key: super::super::custom::KeyBind::Text, params };
        let row = |idx: i32, data: &[u8]| ValueRow {
            idx,
            value_type: b"URL".to_vec(),
            data: data.to_vec(),
            ttl_type: 0,
            ttl: 86400,
            timestamp: 0,
            refs: String::new(),
            admin_read: true,
            admin_write: true,
            pub_read: true,
            pub_write: false,
        };
        assert!(check_create_row(&p, b"T/1", &row(1, b"https://a")).is_ok());
        let e = check_create_row(&p, b"T/1", &row(1, &[0xff, 0xfe])).unwrap_err().0;
        assert!(e.contains("parameter data is of type TEXT"), "{e}");
        let e = check_create_row(&p, b"T/1", &row(40_000, b"x")).unwrap_err().0;
        assert!(e.contains("parameter idx is of type INT2"), "{e}");
        assert!(check_create_row(&p, &[0xff], &row(1, b"x")).is_err(), "a key that is not UTF-8");
    }

    #[test]
    fn values_convert_to_the_parameter_types() {
        assert_eq!(Arg::Bool(true).int(), 1);
        assert_eq!(Arg::Text("a\tb").bytes(), b"a\tb");
        assert_eq!(Arg::Bytes(b"URL").text(), "URL");
    }
}
