//! Handle.Net's tables and rows: the schema `create_schema` makes is §8.2's,
//! rows are written as Handle.Net writes them (§8.1.4), and rows another
//! program inserts or changes with plain SQL are read at once.

use handled_proto::HandleValue;
use handled_store::{Expect, HandleRecord, RecordStore, SqlOptions, SqlStore};
use sqlx::{Connection, Executor, Row};

use super::options;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_schema_is_handle_nets() {
    let Some(o) = options("the_schema_is_handle_nets").await else { return };
    let _s = SqlStore::connect(&o).await.unwrap();
    let mut c = sqlx::PgConnection::connect(&o.url).await.unwrap();
    let cols: Vec<(String, String, String, String)> = sqlx::query_as(
        "select table_name::text, column_name::text, data_type::text, is_nullable::text \
         from information_schema.columns where table_name in ('nas', 'handles') \
         order by table_name, ordinal_position",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    let got: Vec<String> = cols.iter().map(|(t, c, d, n)| format!("{t}.{c} {d} {n}")).collect();
    let want = [
        "handles.handle bytea NO",
        "handles.idx integer NO",
        "handles.type bytea YES",
        "handles.data bytea YES",
        "handles.ttl_type smallint YES",
        "handles.ttl integer YES",
        "handles.timestamp integer YES",
        "handles.refs text YES",
        "handles.admin_read boolean YES",
        "handles.admin_write boolean YES",
        "handles.pub_read boolean YES",
        "handles.pub_write boolean YES",
        "nas.na bytea NO",
    ];
    assert_eq!(got, want);
    let indexes: Vec<(String,)> =
        sqlx::query_as("select indexdef::text from pg_indexes where tablename = 'handles' order by indexname")
            .fetch_all(&mut c)
            .await
            .unwrap();
    let defs: Vec<&str> = indexes.iter().map(|(d,)| d.as_str()).collect();
    assert_eq!(defs.len(), 3, "{defs:?}");
    assert!(defs[0].contains("dataindex ON public.handles USING btree (data)"), "{defs:?}");
    assert!(defs[1].contains("handleindex ON public.handles USING btree (handle)"), "{defs:?}");
    assert!(defs[2].contains("UNIQUE INDEX handles_pkey ON public.handles USING btree (handle, idx)"), "{defs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rows_are_written_as_handle_net_writes_them() {
    let Some(o) = crate::sql_common::every_column_record_written("rows_as_handle_net").await else { return };
    let mut c = sqlx::PgConnection::connect(&o.url).await.unwrap();
    let rows = sqlx::query(
        "select idx, encode(type, 'escape'), encode(data, 'hex'), ttl_type, ttl, timestamp, refs, \
         admin_read, admin_write, pub_read, pub_write from handles where handle = 'TEST/1'::bytea order by idx",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    assert_eq!(rows.len(), 2);
    let r = &rows[1];
    assert_eq!(r.get::<i32, _>(0), 100);
    assert_eq!(r.get::<String, _>(1), "HS_ADMIN");
    assert_eq!(r.get::<String, _>(2), "0ff2");
    assert_eq!((r.get::<i16, _>(3), r.get::<i32, _>(4), r.get::<i32, _>(5)), (1, 1_900_000_000, 1_700_000_000));
    // As Handle.Net 9.0.0 writes it (tests/sql-handle-net): the separating tab as `%0009`.
    assert_eq!(r.get::<String, _>(6), "200:0.NA/TEST%0009-1:TEST/tab\\there");
    let perms: (bool, bool, bool, bool) = (r.get(7), r.get(8), r.get(9), r.get(10));
    assert_eq!(perms, (true, false, false, true));
    assert_eq!(rows[0].get::<String, _>(6), "", "no references: an empty string");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rows_another_program_writes_are_read_at_once() {
    let Some(o) = options("rows_from_elsewhere").await else { return };
    let s = SqlStore::connect(&o).await.unwrap();
    let mut c = sqlx::PgConnection::connect(&o.url).await.unwrap();
    // As §8.1.3 says a depositing program should: upper-case handles, plain inserts.
    c.execute(
        "insert into handles values ('APP/42'::bytea, 1, 'URL'::bytea, 'https://example.org/42'::bytea, 0, 86400, \
         1700000000, '', true, true, true, false), \
         ('APP/42'::bytea, 2, 'EMAIL'::bytea, 'a@example.org'::bytea, null, null, null, null, null, null, null, null)",
    )
    .await
    .unwrap();
    // References as Handle.Net 9.0.0 wrote them (`%XXXX`), and as §8.1.4 describes (raw tabs).
    c.execute(
        "insert into handles values ('APP/43'::bytea, 1, 'URL'::bytea, 'x'::bytea, 0, 86400, 1700000000, \
         '1:TEST/ADMIN%0009300:TEST/R%00E9%0025', true, true, true, false), \
         ('APP/43'::bytea, 2, 'URL'::bytea, 'x'::bytea, 0, 86400, 1700000000, E'1:A\t2:B\\\\tC', true, true, true, false)",
    )
    .await
    .unwrap();
    crate::sql_common::deposited_references_read(&s.get(b"APP/43").await.unwrap().unwrap());
    c.execute("delete from handles where handle = 'APP/43'::bytea").await.unwrap();
    crate::sql_common::deposited_values_read(&s.get(b"APP/42").await.unwrap().unwrap());
    // A change by the other program shows on the next read: nothing is cached.
    c.execute(
        "update handles set data = 'https://example.org/moved'::bytea where handle = 'APP/42'::bytea and idx = 1",
    )
    .await
    .unwrap();
    assert_eq!(s.get(b"APP/42").await.unwrap().unwrap().values[0].data, b"https://example.org/moved");
    assert_eq!(s.scan_keys(b"APP/", None, 10).await.unwrap(), vec![b"APP/42".to_vec()]);
    assert_eq!(s.count().await.unwrap(), 1);
    c.execute("delete from handles where handle = 'APP/42'::bytea").await.unwrap();
    assert_eq!(s.get(b"APP/42").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn homing_is_the_nas_table() {
    let Some(o) = options("homing_is_nas").await else { return };
    let s = SqlStore::connect(&o).await.unwrap();
    let mut c = sqlx::PgConnection::connect(&o.url).await.unwrap();
    s.meta_put("homed/0.NA/TEST", Some(Vec::new())).await.unwrap();
    s.meta_put("homed/0.NA/TEST", Some(Vec::new())).await.unwrap(); // twice: still one row
    c.execute("insert into nas values ('0.NA/OTHER'::bytea)").await.unwrap();
    let nas: Vec<(Vec<u8>,)> = sqlx::query_as("select na from nas order by na").fetch_all(&mut c).await.unwrap();
    assert_eq!(nas, vec![(b"0.NA/OTHER".to_vec(),), (b"0.NA/TEST".to_vec(),)]);
    s.meta_put("site/serial", Some(vec![0, 1])).await.unwrap();
    let homed = s.meta_scan("homed/").await.unwrap();
    assert_eq!(homed, vec![("homed/0.NA/OTHER".into(), vec![]), ("homed/0.NA/TEST".into(), vec![])]);
    assert_eq!(s.meta_scan("").await.unwrap().len(), 3);
    assert_eq!(s.meta_get("homed/0.NA/OTHER").await.unwrap(), Some(Vec::new()));
    assert!(s.meta_put("homed/0.NA/X", Some(vec![1])).await.is_err(), "nas rows carry no value");
    s.meta_put("homed/0.NA/TEST", None).await.unwrap();
    assert_eq!(s.meta_get("homed/0.NA/TEST").await.unwrap(), None);
    // The server's own metadata is not in Handle.Net's tables.
    let in_nas: i64 = sqlx::query_scalar("select count(*) from nas").fetch_one(&mut c).await.unwrap();
    assert_eq!(in_nas, 1);
    assert_eq!(s.count().await.unwrap(), 0);
    assert_eq!(s.get(b"TEST/x").await.unwrap(), None);
}

/// Handle.Net's `store_*_as_string` options: text columns for the names,
/// rows written and read as Handle.Net 9.0.0 binds them (`setString` of the
/// UTF-8 name), deposits by plain SQL with text literals read at once, and a
/// table of the other layout refused at start, naming the option.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_text_layout_is_handle_nets_store_as_string() {
    use crate::sql_common::TEXT_LAYOUT;
    let Some(o) = options("text_layout").await else { return };
    let text = SqlOptions { layout: TEXT_LAYOUT, ..o.clone() };
    let s = SqlStore::connect(&text).await.unwrap();
    let mut c = sqlx::PgConnection::connect(&o.url).await.unwrap();
    let cols: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "select table_name || '.' || column_name, data_type::text, collation_name::text \
         from information_schema.columns where (table_name, column_name) in \
         (('nas', 'na'), ('handles', 'handle'), ('handles', 'type'), ('handles', 'data')) order by 1",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    let got: Vec<String> = cols.iter().map(|(n, t, co)| format!("{n} {t} {}", co.as_deref().unwrap_or("-"))).collect();
    assert_eq!(got, ["handles.data bytea -", "handles.handle text C", "handles.type text -", "nas.na text C"]);

    s.swap("TEST/é1".as_bytes(), Expect::Absent, Some(crate::sql_common::every_column_record())).await.unwrap();
    let types: Vec<(String, String)> =
        sqlx::query_as("select handle, type from handles where handle = 'TEST/é1' order by idx")
            .fetch_all(&mut c)
            .await
            .unwrap();
    assert_eq!(types, [("TEST/é1".into(), "URL".into()), ("TEST/é1".into(), "HS_ADMIN".into())]);
    c.execute(
        "insert into handles values ('APP/42', 1, 'URL', 'https://example.org/42'::bytea, 0, 86400, 1700000000, '', \
         true, true, true, false), ('APP/42', 2, 'EMAIL', 'a@example.org'::bytea, null, null, null, null, null, null, \
         null, null); insert into nas values ('0.NA/APP')",
    )
    .await
    .unwrap();
    crate::sql_common::deposited_values_read(&s.get(b"APP/42").await.unwrap().unwrap());
    assert_eq!(s.meta_scan("homed/").await.unwrap(), vec![("homed/0.NA/APP".to_string(), vec![])]);
    assert_eq!(s.scan_keys(b"TEST/", None, 10).await.unwrap(), vec!["TEST/é1".as_bytes().to_vec()]);
    assert_eq!(s.scan_keys(b"TEST/\xc3", None, 10).await.unwrap().len(), 1, "a byte prefix that is not text");
    // Names that text cannot hold are refused before anything is written.
    for bad in [&b"TEST/\xff"[..], b"TEST/a\0b"] {
        let e = s.swap(bad, Expect::Absent, Some(crate::sql_common::every_column_record())).await.unwrap_err();
        assert!(e.to_string().contains("store_handle_as_string"), "{e}");
        assert_eq!(s.get(bad).await.unwrap(), None);
    }
    let bad_type = HandleRecord::new(vec![HandleValue::new(1, &b"T\xff"[..], "x")]);
    let e = s.swap(b"TEST/t", Expect::Absent, Some(bad_type)).await.unwrap_err();
    assert!(e.to_string().contains("store_handle_value_type_as_string"), "{e}");

    // The other layout on each database: refused at start, naming the option.
    let e = SqlStore::connect(&SqlOptions { create_schema: false, ..o.clone() }).await.err().unwrap().to_string();
    assert!(e.contains("nas.na is text (text)") && e.contains("set store_na_as_string = true"), "{e}");
    let Some(bytes) = options("bytes_layout").await else { return };
    SqlStore::connect(&bytes).await.unwrap();
    let e = SqlStore::connect(&SqlOptions { layout: TEXT_LAYOUT, create_schema: false, ..bytes }).await.err().unwrap();
    assert!(e.to_string().contains("nas.na is bytea"), "{e}");
}
