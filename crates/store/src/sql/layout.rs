//! Handle.Net's `store_handle_as_string`, `store_na_as_string` and
//! `store_handle_value_type_as_string` (Technical Manual §8.1.1): which of the
//! three name columns (`handles.handle`, `nas.na`, `handles.type`) are text
//! rather than bytes, and the statements that follow from it.
//!
//! What Handle.Net 9.0.0 does with each (its `SQLHandleStorage`): the name is
//! bound with JDBC's `setString` of the bytes decoded as UTF-8, and read back
//! with `getString`, encoded as UTF-8; without the option, `setBytes` and
//! `getBytes`. `data` stays bytes and `refs` text whatever the options.
//!
//! **PostgreSQL** types parameters strictly: a text column takes no bytea
//! and a bytea column no text, so a table made for the other layout fails
//! every statement, Handle.Net's as ours. The store checks the column types
//! at start instead (schema.rs) and names the option to set. Its statements
//! bind a name as text ([`Name`]: the same UTF-8 bytes, typed `text`), so
//! that the comparison is in the column's own collation and its index
//! serves it (`convert_from($1, 'UTF8')` would not: its result takes the `C`
//! collation of the encoding's `name`); ranges and order are on the column
//! in the `C` collation (byte order of UTF-8), which `create_schema` gives
//! the text columns so that their index serves listing (and Handle.Net's
//! `like 'PREFIX/%'`).
//!
//! **MariaDB/MySQL** converts between the two: Handle.Net's driver binds
//! bytes into the manual's `varchar` handle columns by default, and text into
//! `blob` columns with the options. The options there choose what
//! `create_schema` makes (`varchar(255)` for `type`) and require names to be
//! UTF-8; text or bytes columns are read either way.

use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArgumentBuffer, PgTypeInfo};
use sqlx::{Encode, MySql, Postgres, Type};

use super::db::Dialect;

/// Which name columns are text (Handle.Net's three options, under its names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Layout {
    /// `handles.handle` is text.
    pub store_handle_as_string: bool,
    /// `nas.na` is text.
    pub store_na_as_string: bool,
    /// `handles.type` is text.
    pub store_handle_value_type_as_string: bool,
}

/// One of the three columns the options concern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Col {
    Handle,
    Na,
    Type,
}

impl Col {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Col::Handle => "handle",
            Col::Na => "na",
            Col::Type => "type",
        }
    }

    /// Handle.Net's option that makes this column text.
    pub(crate) fn option(self) -> &'static str {
        match self {
            Col::Handle => "store_handle_as_string",
            Col::Na => "store_na_as_string",
            Col::Type => "store_handle_value_type_as_string",
        }
    }
}

impl Layout {
    /// Whether the option makes `col` text.
    pub(crate) fn text(self, col: Col) -> bool {
        match col {
            Col::Handle => self.store_handle_as_string,
            Col::Na => self.store_na_as_string,
            Col::Type => self.store_handle_value_type_as_string,
        }
    }

    /// Whether the column holds text in this database: the manual's MariaDB
    /// tables have `varchar` handles and prefixes in either layout.
    fn holds_text(self, d: Dialect, col: Col) -> bool {
        self.text(col) || (d == Dialect::MySql && col != Col::Type)
    }

    /// Whether `bytes` can be a value of the column: text is UTF-8, and on
    /// PostgreSQL has no NUL.
    pub(crate) fn holds(self, d: Dialect, col: Col, bytes: &[u8]) -> bool {
        !self.holds_text(d, col) || is_text(d, bytes)
    }

    /// Why `bytes` cannot be a value of the column.
    pub(crate) fn refusal(self, d: Dialect, col: Col, bytes: &[u8]) -> String {
        let what = match d {
            Dialect::Postgres => "UTF-8 text without NUL",
            Dialect::MySql => "UTF-8 text",
        };
        let why = if self.text(col) { format!("{} is set", col.option()) } else { "a varchar column".into() };
        format!("{} {:?} is not {what} ({why})", col.name(), String::from_utf8_lossy(bytes))
    }

    /// A name of `col` to bind: text where the column is PostgreSQL text.
    pub(crate) fn name(self, d: Dialect, col: Col, bytes: &[u8]) -> Name<'_> {
        Name { bytes, text: d == Dialect::Postgres && self.text(col) }
    }

    /// The column's value as bytes.
    pub(crate) fn bytes(self, d: Dialect, col: Col) -> String {
        let c = col.name();
        match d {
            Dialect::Postgres if self.text(col) => format!("convert_to({c}, 'UTF8')"),
            Dialect::Postgres => c.to_owned(),
            Dialect::MySql => format!("cast({c} as binary)"),
        }
    }

    /// The column in byte order, through its index where it can: PostgreSQL's
    /// text in the `C` collation (UTF-8's byte order is its code points').
    fn ordered(self, d: Dialect, col: Col) -> String {
        match d {
            Dialect::Postgres if self.text(col) => format!("{} collate \"C\"", col.name()),
            _ => self.bytes(d, col),
        }
    }

    /// What equal names group by: PostgreSQL's own equality (bytes, or text
    /// in a deterministic collation), MariaDB's bytes (its collation may
    /// ignore case).
    fn grouped(self, d: Dialect, col: Col) -> String {
        match d {
            Dialect::Postgres => col.name().to_owned(),
            Dialect::MySql => self.bytes(d, col),
        }
    }

    /// PostgreSQL's `where` clause matching any handle of one array ([`PgKeys`]
    /// of the same layout): text keys as text, so that the column's index serves.
    pub(crate) fn pg_any_handle(self) -> &'static str {
        match self.text(Col::Handle) {
            true => "handle = any($1::text[])",
            false => "handle = any($1::bytea[])",
        }
    }

    /// `where` clause matching one name exactly; binds it [`Dialect::key_binds`] times.
    pub(crate) fn matches(self, d: Dialect, col: Col) -> String {
        let c = col.name();
        match d {
            Dialect::Postgres => format!("{c} = $1"),
            // The index finds the candidates by collation, the bytes decide (db.rs).
            Dialect::MySql => format!("{c} = ? and cast({c} as binary) = ?"),
        }
    }

    /// A range of names, `[from, to)` and above `after`, in byte order.
    pub(crate) fn range(self, d: Dialect, col: Col, from: &[u8], after: Option<&[u8]>) -> Range {
        // Text bounds go through the column's order (and index); a bound that
        // is not text (no such name can start with it) compares bytes.
        let text = d == Dialect::Postgres && self.text(col) && is_text(d, from) && after.is_none_or(|a| is_text(d, a));
        let (expr, to) = if text {
            let from = std::str::from_utf8(from).unwrap_or_default();
            (self.ordered(d, col), text_prefix_end(from).map(String::into_bytes))
        } else {
            (self.bytes(d, col), prefix_end(from))
        };
        let mut sql = format!("{expr} >= {}", d.param(1));
        let mut n = 1;
        if to.is_some() {
            n += 1;
            sql.push_str(&format!(" and {expr} < {}", d.param(n)));
        }
        if after.is_some() {
            n += 1;
            sql.push_str(&format!(" and {expr} > {}", d.param(n)));
        }
        Range { condition: sql, to, next_param: n + 1, text }
    }

    /// `select` of the distinct names of `table` in a [`Layout::range`]:
    /// `condition`'s parameters, then the limit.
    pub(crate) fn scan(self, d: Dialect, table: &str, col: Col, r: &Range) -> String {
        format!(
            "select {} as h from {table} where {} group by {} order by {} limit {}",
            self.bytes(d, col),
            r.condition,
            self.grouped(d, col),
            self.ordered(d, col),
            d.param(r.next_param)
        )
    }
}

/// The built-in statements whose text depends on the layout, made once at start.
pub(crate) struct Queries {
    /// The columns of a value, as records.rs's `value_of!` reads them.
    pub value_columns: String,
    /// `have_na_stmt`, `add_na_stmt` (once: homing twice is a no-op), `del_na_stmt`.
    pub have_na: String,
    pub add_na: String,
    pub del_na: String,
    /// PostgreSQL's bulk insert (arrays of bytes, names converted) and
    /// delete (keys as bytes, or text in the text layout; postgres.rs).
    pub pg_insert: String,
    pub pg_delete: String,
    /// Whether handles are bound as text ([`PgKeys`]).
    pub handle_text: bool,
}

const VALUE_COLUMNS: &str = "ttl_type, ttl, timestamp, refs, admin_read, admin_write, pub_read, pub_write";

impl Queries {
    pub(crate) fn new(d: Dialect, l: Layout) -> Queries {
        let value_columns = format!("idx, {} as type, data, {VALUE_COLUMNS}", l.bytes(d, Col::Type));
        let text = |col: Col, v: &str| match l.text(col) {
            true => format!("convert_from({v}, 'UTF8')"),
            false => v.to_owned(),
        };
        // Text keys bound as text, so that the column's index serves (postgres.rs).
        let pg_delete = format!("delete from handles where {}", l.pg_any_handle());
        Queries {
            value_columns,
            have_na: format!("select count(*) from nas where {}", l.matches(d, Col::Na)),
            add_na: match d {
                Dialect::Postgres => "insert into nas (na) values ($1) on conflict do nothing".into(),
                Dialect::MySql => "insert into nas (na) values (?) on duplicate key update na = na".into(),
            },
            del_na: format!("delete from nas where {}", l.matches(d, Col::Na)),
            pg_insert: format!(
                "insert into handles (handle, idx, type, data, {VALUE_COLUMNS}) select {}, i, {}, v, tt, t, ts, r, \
                 ar, aw, pr, pw from unnest($1::bytea[], $2::int4[], $3::bytea[], $4::bytea[], $5::int2[], \
                 $6::int4[], $7::int4[], $8::text[], $9::bool[], $10::bool[], $11::bool[], $12::bool[]) \
                 as u(h, i, ty, v, tt, t, ts, r, ar, aw, pr, pw)",
                text(Col::Handle, "h"),
                text(Col::Type, "ty")
            ),
            pg_delete,
            handle_text: l.text(Col::Handle),
        }
    }
}

/// A range's `where` condition, its upper bound to bind after the lower
/// (when there is one), then `after`; the next parameter's number.
pub(crate) struct Range {
    pub condition: String,
    pub to: Option<Vec<u8>>,
    pub next_param: usize,
    /// Bind the bounds as text ([`Range::bound`]).
    text: bool,
}

impl Range {
    /// A bound of the range, to bind.
    pub(crate) fn bound<'a>(&self, bytes: &'a [u8]) -> Name<'a> {
        Name { bytes, text: self.text }
    }
}

/// A name bound as a parameter: its bytes, typed `text` for PostgreSQL's text
/// columns (whose binary wire form is those UTF-8 bytes, as `bytea`'s is the
/// bytes), else `bytea`; MariaDB takes bytes for either (layout.rs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Name<'a> {
    bytes: &'a [u8],
    text: bool,
}

impl<'a> Name<'a> {
    /// Bytes, whatever the layout (`handled_meta`'s keys and values).
    pub(crate) fn bytes(bytes: &'a [u8]) -> Name<'a> {
        Name { bytes, text: false }
    }
}

/// Handles bound as one PostgreSQL array ([`Layout::pg_any_handle`]): text
/// in the text layout, where the keys were checked to be UTF-8.
pub(crate) enum PgKeys {
    Text(Vec<String>),
    Bytes(Vec<Vec<u8>>),
}

impl PgKeys {
    pub(crate) fn new(keys: &[&[u8]], text: bool) -> PgKeys {
        match text {
            true => PgKeys::Text(keys.iter().map(|k| String::from_utf8_lossy(k).into_owned()).collect()),
            false => PgKeys::Bytes(keys.iter().map(|k| k.to_vec()).collect()),
        }
    }
}

impl Type<Postgres> for PgKeys {
    fn type_info() -> PgTypeInfo {
        <Vec<Vec<u8>> as Type<Postgres>>::type_info()
    }

    fn compatible(ty: &PgTypeInfo) -> bool {
        <Vec<Vec<u8>> as Type<Postgres>>::compatible(ty) || <Vec<String> as Type<Postgres>>::compatible(ty)
    }
}

impl Encode<'_, Postgres> for PgKeys {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        match self {
            PgKeys::Text(keys) => <Vec<String> as Encode<Postgres>>::encode_by_ref(keys, buf),
            PgKeys::Bytes(keys) => <Vec<Vec<u8>> as Encode<Postgres>>::encode_by_ref(keys, buf),
        }
    }

    fn produces(&self) -> Option<PgTypeInfo> {
        Some(match self {
            PgKeys::Text(_) => <Vec<String> as Type<Postgres>>::type_info(),
            PgKeys::Bytes(_) => <Self as Type<Postgres>>::type_info(),
        })
    }
}

impl Type<Postgres> for Name<'_> {
    fn type_info() -> PgTypeInfo {
        <&[u8] as Type<Postgres>>::type_info()
    }

    fn compatible(ty: &PgTypeInfo) -> bool {
        <&[u8] as Type<Postgres>>::compatible(ty) || <&str as Type<Postgres>>::compatible(ty)
    }
}

impl Encode<'_, Postgres> for Name<'_> {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <&[u8] as Encode<Postgres>>::encode_by_ref(&self.bytes, buf)
    }

    fn produces(&self) -> Option<PgTypeInfo> {
        Some(if self.text { <&str as Type<Postgres>>::type_info() } else { <Self as Type<Postgres>>::type_info() })
    }
}

impl Type<MySql> for Name<'_> {
    fn type_info() -> sqlx::mysql::MySqlTypeInfo {
        <&[u8] as Type<MySql>>::type_info()
    }

    fn compatible(ty: &sqlx::mysql::MySqlTypeInfo) -> bool {
        <&[u8] as Type<MySql>>::compatible(ty)
    }
}

impl Encode<'_, MySql> for Name<'_> {
    fn encode_by_ref(&self, buf: &mut Vec<u8>) -> Result<IsNull, BoxDynError> {
        <&[u8] as Encode<MySql>>::encode_by_ref(&self.bytes, buf)
    }
}

fn is_text(d: Dialect, b: &[u8]) -> bool {
    std::str::from_utf8(b).is_ok() && (d == Dialect::MySql || !b.contains(&0))
}

/// The smallest key above every key that starts with `prefix`; `None` when
/// there is none (the prefix is empty or all 0xff).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The smallest text above every text that starts with `prefix`, in code
/// point order; `None` when there is none.
fn text_prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let mut next = last as u32 + 1;
        if (0xd800..0xe000).contains(&next) {
            next = 0xe000; // no surrogates in UTF-8
        }
        if let Some(c) = char::from_u32(next) {
            chars.push(c);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: Layout =
        Layout { store_handle_as_string: true, store_na_as_string: true, store_handle_value_type_as_string: true };

    #[test]
    fn prefix_end_bounds_the_range() {
        assert_eq!(prefix_end(b"20.5000/"), Some(b"20.50000".to_vec()));
        assert_eq!(prefix_end(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }

    #[test]
    fn text_prefix_end_is_the_next_code_point() {
        assert_eq!(text_prefix_end("TEST/").as_deref(), Some("TEST0"));
        assert_eq!(text_prefix_end("a\u{bf}").as_deref(), Some("a\u{c0}"));
        assert_eq!(text_prefix_end("a\u{d7ff}").as_deref(), Some("a\u{e000}"));
        assert_eq!(text_prefix_end("b\u{10ffff}").as_deref(), Some("c"));
        assert_eq!(text_prefix_end(""), None);
    }

    #[test]
    fn postgres_text_binds_bytes_and_converts() {
        let d = Dialect::Postgres;
        assert_eq!(TEXT.matches(d, Col::Handle), "handle = $1");
        assert_eq!(Layout::default().matches(d, Col::Handle), "handle = $1");
        let r = TEXT.range(d, Col::Handle, b"TEST/", Some(b"TEST/a"));
        assert_eq!(
            r.condition,
            "handle collate \"C\" >= $1 and handle collate \"C\" < $2 and handle collate \"C\" > $3"
        );
        assert!(r.text);
        assert_eq!((r.to.as_deref(), r.next_param), (Some(&b"TEST0"[..]), 4));
        // A bound that is not text compares bytes.
        let r = TEXT.range(d, Col::Handle, b"\xff", None);
        assert_eq!(r.condition, "convert_to(handle, 'UTF8') >= $1");
        assert!(r.to.is_none() && !r.text);
    }

    #[test]
    fn what_text_columns_hold() {
        let (pg, my) = (Dialect::Postgres, Dialect::MySql);
        assert!(TEXT.holds(pg, Col::Type, "é".as_bytes()));
        assert!(!TEXT.holds(pg, Col::Type, b"a\0b"));
        assert!(TEXT.holds(my, Col::Type, b"a\0b"));
        assert!(!TEXT.holds(my, Col::Type, b"\xff"));
        assert!(Layout::default().holds(my, Col::Type, b"\xff"), "a blob");
        assert!(!Layout::default().holds(my, Col::Handle, b"\xff"), "the manual's varchar");
        assert!(Layout::default().holds(pg, Col::Handle, b"\xff\0"));
        assert!(TEXT.refusal(pg, Col::Type, b"\xff").contains("store_handle_value_type_as_string"));
    }
}
