//! Custom statements (Technical Manual §8.1.4): Handle.Net's `sql_settings`
//! may replace any of its SQL statements, so that a handle server can be a
//! view over another application's tables (DSpace's `handle` table, say).
//! They are accepted under the same names, checked at start, and run in
//! place of the built-in statement (reads in `custom_ops.rs`).
//!
//! **Parameters** are JDBC's `?`, bound as Handle.Net binds them (the handle,
//! the prefix, or `PREFIX/%` for `scan_by_prefix_stmt`). PostgreSQL numbers
//! them (`$1`…): every `?` outside quotes and comments becomes the next `$n`,
//! and a statement already written with `$n` is taken as it is.
//!
//! **Columns** are read by position, as Handle.Net's `ResultSet.getX(i)`
//! reads them, and as leniently: text or bytes for `type`, `data` and
//! `refs`, any integer for the numbers, a boolean, an integer or
//! `true`/`false` text for the permissions.
//!
//! **Writes** go through `delete_handle_stmt` and `create_handle_stmt` as
//! Handle.Net's make them, inside `handled`'s own locked transaction
//! (custom_writes.rs), and prefixes through `add_na_stmt`/`del_na_stmt`. A
//! writable view (a custom `get_handle_stmt`) must give all of those, so that
//! nothing it writes lands in tables it does not read. `modify_value_stmt`,
//! `handle_exists_stmt` and the two `delete_all_*` are checked but never run,
//! as in Handle.Net 9 (which replaces a changed handle's rows, and deletes
//! everything only as a mirror, which a SQL store is not).

use std::collections::BTreeMap;

use sqlx::{Column, Either, Executor, Statement, TypeInfo};

use super::db::{on_pool, Dialect, Pool};
use crate::StoreError;

/// One of Handle.Net's `*_stmt` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stmt {
    GetHandle,
    HaveNa,
    DelNa,
    AddNa,
    ScanHandles,
    ScanHandlesFrom,
    ScanByPrefix,
    ScanNas,
    ScanNasFrom,
    DeleteAllHandles,
    DeleteAllNas,
    CreateHandle,
    HandleExists,
    DeleteHandle,
    ModifyValue,
}

/// What a column must hold, as the lenient readers (`custom_ops.rs`) take
/// it; for a parameter, what Handle.Net sets there (custom_writes.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Int,
    /// Bytes or text.
    Bytes,
    /// A boolean, an integer, or text.
    Bool,
}

/// `get_handle_stmt`'s columns, in Handle.Net's order.
pub(crate) const VALUE_COLUMNS: &[(&str, Kind)] = &[
    ("idx", Kind::Int),
    ("type", Kind::Bytes),
    ("data", Kind::Bytes),
    ("ttl_type", Kind::Int),
    ("ttl", Kind::Int),
    ("timestamp", Kind::Int),
    ("refs", Kind::Bytes),
    ("admin_read", Kind::Bool),
    ("admin_write", Kind::Bool),
    ("pub_read", Kind::Bool),
    ("pub_write", Kind::Bool),
];

impl Stmt {
    pub const ALL: [Stmt; 15] = [
        Stmt::GetHandle,
        Stmt::HaveNa,
        Stmt::DelNa,
        Stmt::AddNa,
        Stmt::ScanHandles,
        Stmt::ScanHandlesFrom,
        Stmt::ScanByPrefix,
        Stmt::ScanNas,
        Stmt::ScanNasFrom,
        Stmt::DeleteAllHandles,
        Stmt::DeleteAllNas,
        Stmt::CreateHandle,
        Stmt::HandleExists,
        Stmt::DeleteHandle,
        Stmt::ModifyValue,
    ];

    /// The setting's name, in Handle.Net's `sql_settings` and in `[sql]`.
    pub fn key(self) -> &'static str {
        match self {
            Stmt::GetHandle => "get_handle_stmt",
            Stmt::HaveNa => "have_na_stmt",
            Stmt::DelNa => "del_na_stmt",
            Stmt::AddNa => "add_na_stmt",
            Stmt::ScanHandles => "scan_handles_stmt",
            Stmt::ScanHandlesFrom => "scan_handles_from_stmt",
            Stmt::ScanByPrefix => "scan_by_prefix_stmt",
            Stmt::ScanNas => "scan_nas_stmt",
            Stmt::ScanNasFrom => "scan_nas_from_stmt",
            Stmt::DeleteAllHandles => "delete_all_handles_stmt",
            Stmt::DeleteAllNas => "delete_all_nas_stmt",
            Stmt::CreateHandle => "create_handle_stmt",
            Stmt::HandleExists => "handle_exists_stmt",
            Stmt::DeleteHandle => "delete_handle_stmt",
            Stmt::ModifyValue => "modify_value_stmt",
        }
    }

    pub fn from_key(key: &str) -> Option<Stmt> {
        Stmt::ALL.into_iter().find(|s| s.key() == key)
    }

    /// How many parameters Handle.Net binds.
    fn params(self) -> usize {
        match self {
            Stmt::ScanHandles | Stmt::ScanNas | Stmt::DeleteAllHandles | Stmt::DeleteAllNas => 0,
            Stmt::CreateHandle | Stmt::ModifyValue => 12,
            _ => 1,
        }
    }

    /// The columns a query must return; `None` for statements that return none.
    fn columns(self) -> Option<Vec<(&'static str, Kind)>> {
        match self {
            Stmt::GetHandle => Some(VALUE_COLUMNS.to_vec()),
            Stmt::HaveNa | Stmt::HandleExists => Some(vec![("count", Kind::Int)]),
            Stmt::ScanHandles | Stmt::ScanHandlesFrom | Stmt::ScanByPrefix => Some(vec![("handle", Kind::Bytes)]),
            Stmt::ScanNas | Stmt::ScanNasFrom => Some(vec![("na", Kind::Bytes)]),
            _ => None,
        }
    }
}

/// The custom statements of a configuration, by setting.
pub type Statements = BTreeMap<Stmt, String>;

/// How the first parameter (a handle or prefix) is bound: as PostgreSQL
/// typed it (a `bytea` column or a text one), bytes on MariaDB, whose
/// `varchar` compares with bytes as the built-in statements do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyBind {
    Bytes,
    Text,
}

/// A statement checked against the database, ready to run.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub sql: String,
    pub key: KeyBind,
    /// Parameter types as PostgreSQL infers them (sqlx's names); none on
    /// MariaDB/MySQL, whose parameters are untyped.
    pub params: Vec<String>,
}

/// What a writable view must give besides `get_handle_stmt`: its handles'
/// writes, and its homed prefixes (read at every start, and written).
const VIEW_WRITES: [Stmt; 6] =
    [Stmt::CreateHandle, Stmt::DeleteHandle, Stmt::HaveNa, Stmt::ScanNas, Stmt::AddNa, Stmt::DelNa];

/// What a writable view given `given` lacks ([`VIEW_WRITES`]), by key.
pub fn writable_view_lacks(given: impl IntoIterator<Item = Stmt>) -> Vec<&'static str> {
    let given: Vec<Stmt> = given.into_iter().collect();
    VIEW_WRITES.iter().filter(|s| !given.contains(s)).map(|s| s.key()).collect()
}

/// The custom statements in use.
#[derive(Debug, Clone, Default)]
pub(crate) struct Custom {
    prepared: BTreeMap<Stmt, Prepared>,
}

impl Custom {
    pub fn get(&self, s: Stmt) -> Option<&Prepared> {
        self.prepared.get(&s)
    }

    /// A custom `get_handle_stmt` makes the store a view: handles come from
    /// the operator's tables, and Handle.Net's (`handles`, `nas`) and ours
    /// (`handled_meta`) are neither required nor read, except through the
    /// custom statements given.
    pub fn is_view(&self) -> bool {
        self.prepared.contains_key(&Stmt::GetHandle)
    }

    /// Whether writes run through custom statements whose reads lock nothing
    /// (a writable view): MariaDB's connections then run SERIALIZABLE (options.rs).
    pub fn writes_through_view(statements: &Statements, read_only: bool) -> bool {
        !read_only && statements.contains_key(&Stmt::GetHandle)
    }

    /// Check every statement: it must prepare, take Handle.Net's parameters
    /// and return its columns. The first problem stops the start, naming the key.
    pub(crate) async fn prepare(pool: &Pool, statements: &Statements, read_only: bool) -> Result<Custom, StoreError> {
        if statements.is_empty() {
            return Ok(Custom::default());
        }
        if Custom::writes_through_view(statements, read_only) {
            let missing = writable_view_lacks(statements.keys().copied());
            if !missing.is_empty() {
                return Err(StoreError::Backend(format!(
                    "sql: a custom get_handle_stmt makes this server a view over your tables; to write to them \
                     (read_only = false) give also {}, so that what it writes is what it reads (or set \
                     read_only = true)",
                    missing.join(", ")
                )));
            }
        }
        let d = pool.dialect();
        let mut prepared = BTreeMap::new();
        for (&s, text) in statements {
            let p = check(pool, d, s, text).await.map_err(|m| StoreError::Backend(format!("sql: {}: {m}", s.key())))?;
            prepared.insert(s, p);
        }
        Ok(Custom { prepared })
    }
}

async fn check(pool: &Pool, d: Dialect, s: Stmt, text: &str) -> Result<Prepared, String> {
    if text.trim().is_empty() {
        return Err("empty statement".into());
    }
    let sql = placeholders(d, text);
    // Parameter types (PostgreSQL), parameter count, and columns as (name, type).
    let (params, count, columns): (Vec<String>, Option<usize>, Vec<(String, String)>) = on_pool!(pool, p => {
        let st = p.prepare(sql.as_str()).await.map_err(|e| format!("does not prepare: {e}"))?;
        let (params, count) = match st.parameters() {
            Some(Either::Left(types)) => (types.iter().map(|t| t.name().to_owned()).collect(), Some(types.len())),
            Some(Either::Right(n)) => (Vec::new(), Some(n)),
            None => (Vec::new(), None),
        };
        let columns = st.columns().iter().map(|c| (c.name().to_owned(), c.type_info().name().to_owned())).collect();
        (params, count, columns)
    });
    if let Some(n) = count {
        if n != s.params() {
            return Err(format!("takes {n} parameter(s); Handle.Net binds {} (statement as sent: {sql})", s.params()));
        }
    }
    if let Some(want) = s.columns() {
        if columns.len() != want.len() {
            let names: Vec<&str> = want.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "returns {} column(s); it must return {}: {}",
                columns.len(),
                want.len(),
                names.join(", ")
            ));
        }
        for (i, ((name, kind), (got_name, ty))) in want.iter().zip(&columns).enumerate() {
            if !fits(*kind, ty) {
                return Err(format!(
                    "column {} ({name}, here {got_name:?}) is of type {ty}, which cannot be read as {}; cast it",
                    i + 1,
                    match kind {
                        Kind::Int => "an integer",
                        Kind::Bytes => "text or bytes",
                        Kind::Bool => "a boolean",
                    }
                ));
            }
        }
    }
    let key = match params.first().map(|t| t.to_ascii_uppercase()) {
        Some(t) if t != "BYTEA" => KeyBind::Text,
        _ => KeyBind::Bytes,
    };
    Ok(Prepared { sql, key, params })
}

/// Whether a column of database type `ty` (sqlx's name for it) can be read as `kind`.
fn fits(kind: Kind, ty: &str) -> bool {
    let ty = ty.to_ascii_uppercase();
    let int = ty.contains("INT");
    let text = ["CHAR", "TEXT", "NAME", "UNKNOWN", "ENUM"].iter().any(|t| ty.contains(t));
    let bytes = ["BYTEA", "BLOB", "BINARY"].iter().any(|t| ty.contains(t));
    let boolean = ty.starts_with("BOOL");
    match kind {
        Kind::Int => int || boolean,
        Kind::Bytes => text || bytes,
        Kind::Bool => boolean || int || text,
    }
}

/// JDBC's `?` as the database wants it: `$1`, `$2`… on PostgreSQL (outside
/// quoted text, quoted names and comments) unless the statement numbers its
/// parameters itself, unchanged on MariaDB/MySQL.
pub(crate) fn placeholders(d: Dialect, sql: &str) -> String {
    // Numbered already: its `?` are PostgreSQL's operators (jsonb's `?`, `?|`).
    if d == Dialect::MySql || sql.contains("$1") {
        return sql.to_owned();
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                // Copy through the closing quote (a doubled quote closes and reopens).
                out.push(c);
                for q in chars.by_ref() {
                    out.push(q);
                    if q == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for q in chars.by_ref() {
                    out.push(q);
                    if q == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                out.push(c);
                let mut prev = ' ';
                for q in chars.by_ref() {
                    out.push(q);
                    if prev == '*' && q == '/' {
                        break;
                    }
                    prev = q;
                }
            }
            '?' => {
                n += 1;
                out.push_str(&format!("${n}"));
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn question_marks_become_numbered_parameters_on_postgres() {
        let pg = |s| placeholders(Dialect::Postgres, s);
        assert_eq!(pg("select a from t where h = ? and i = ?"), "select a from t where h = $1 and i = $2");
        assert_eq!(
            pg("select '?', \"a?\" from t where h = ? -- why?\n and 1=1"),
            "select '?', \"a?\" from t where h = $1 -- why?\n and 1=1"
        );
        assert_eq!(pg("select 'it''s ?' /* ? */ from t where h = ?"), "select 'it''s ?' /* ? */ from t where h = $1");
        assert_eq!(pg("select a from t where h = $1"), "select a from t where h = $1");
        assert_eq!(pg("select a from t where h = $1 and j ? 'k'"), "select a from t where h = $1 and j ? 'k'");
        assert_eq!(placeholders(Dialect::MySql, "select ? from t"), "select ? from t");
    }

    #[test]
    fn every_key_round_trips() {
        for s in Stmt::ALL {
            assert_eq!(Stmt::from_key(s.key()), Some(s));
        }
        assert_eq!(Stmt::from_key("get_handle"), None);
    }

    #[test]
    fn column_types_are_taken_as_jdbc_takes_them() {
        assert!(fits(Kind::Int, "INT4") && fits(Kind::Int, "BIGINT UNSIGNED") && fits(Kind::Int, "BOOLEAN"));
        assert!(!fits(Kind::Int, "NUMERIC") && !fits(Kind::Int, "TEXT"));
        assert!(fits(Kind::Bytes, "TEXT") && fits(Kind::Bytes, "VARCHAR") && fits(Kind::Bytes, "BYTEA"));
        assert!(fits(Kind::Bytes, "VARBINARY") && fits(Kind::Bytes, "BLOB") && !fits(Kind::Bytes, "INT4"));
        assert!(fits(Kind::Bool, "BOOL") && fits(Kind::Bool, "TINYINT") && !fits(Kind::Bool, "TIMESTAMPTZ"));
    }
}
