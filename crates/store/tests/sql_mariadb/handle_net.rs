//! Handle.Net's MySQL tables and rows: the schema `create_schema` makes is
//! §8.1.2's, rows are written as Handle.Net writes them (§8.1.4; `refs` a
//! blob), and rows another program inserts or changes with the `mariadb`
//! client are read at once.

use handled_store::{Expect, RecordStore, SqlStore};

use crate::{mariadb, options};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_schema_is_handle_nets() {
    let Some(o) = options("the_schema_is_handle_nets").await else { return };
    let _s = SqlStore::connect(&o).await.unwrap();
    let got = mariadb(
        &o.url,
        "select table_name, column_name, column_type, is_nullable, column_key from information_schema.columns \
         where table_schema = database() and table_name in ('nas', 'handles') \
         order by table_name, ordinal_position",
    );
    let want = [
        "handles\thandle\tvarchar(255)\tNO\tPRI",
        "handles\tidx\tint(11)\tNO\tPRI",
        "handles\ttype\tblob\tYES\t",
        "handles\tdata\tblob\tYES\t",
        "handles\tttl_type\tsmallint(6)\tYES\t",
        "handles\tttl\tint(11)\tYES\t",
        "handles\ttimestamp\tint(11)\tYES\t",
        "handles\trefs\tblob\tYES\t",
        "handles\tadmin_read\ttinyint(1)\tYES\t",
        "handles\tadmin_write\ttinyint(1)\tYES\t",
        "handles\tpub_read\ttinyint(1)\tYES\t",
        "handles\tpub_write\ttinyint(1)\tYES\t",
        "nas\tna\tvarchar(255)\tNO\tPRI",
    ];
    assert_eq!(got.lines().collect::<Vec<_>>(), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rows_are_written_as_handle_net_writes_them() {
    let Some(o) = crate::sql_common::every_column_record_written("rows_as_handle_net").await else { return };
    let rows = mariadb(
        &o.url,
        "select idx, type, hex(data), ttl_type, ttl, timestamp, refs, admin_read, admin_write, pub_read, pub_write \
         from handles where handle = 'TEST/1' order by idx",
    );
    let rows: Vec<&str> = rows.lines().collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0], "1\tURL\t68747470733A2F2F6578616D706C652E6F72672F\t0\t86400\t0\t\t1\t1\t1\t0");
    // As Handle.Net 9.0.0 writes it: the separating tab as `%0009` (the
    // client prints a backslash in the data as `\\`).
    assert_eq!(
        rows[1],
        "100\tHS_ADMIN\t0FF2\t1\t1900000000\t1700000000\t200:0.NA/TEST%0009-1:TEST/tab\\\\there\t1\t0\t0\t1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rows_another_program_writes_are_read_at_once() {
    let Some(o) = options("rows_from_elsewhere").await else { return };
    let s = SqlStore::connect(&o).await.unwrap();
    // As §8.1.3 says a depositing program should: upper-case handles, plain inserts.
    mariadb(
        &o.url,
        "insert into handles values ('APP/42', 1, 'URL', 'https://example.org/42', 0, 86400, 1700000000, '', \
         true, true, true, false), ('APP/42', 2, 'EMAIL', 'a@example.org', null, null, null, null, null, null, \
         null, null); \
         insert into handles values ('APP/43', 1, 'URL', 'x', 0, 86400, 1700000000, \
         '1:TEST/ADMIN%0009300:TEST/R%00E9%0025', true, true, true, false), \
         ('APP/43', 2, 'URL', 'x', 0, 86400, 1700000000, '1:A\\t2:B\\\\tC', true, true, true, false)",
    );
    crate::sql_common::deposited_references_read(&s.get(b"APP/43").await.unwrap().unwrap());
    crate::sql_common::deposited_values_read(&s.get(b"APP/42").await.unwrap().unwrap());
    // A change by the other program shows on the next read: nothing is cached.
    mariadb(&o.url, "update handles set data = 'https://example.org/moved' where handle = 'APP/42' and idx = 1");
    assert_eq!(s.get(b"APP/42").await.unwrap().unwrap().values[0].data, b"https://example.org/moved");
    assert_eq!(s.scan_keys(b"APP/", None, 10).await.unwrap(), vec![b"APP/42".to_vec(), b"APP/43".to_vec()]);
    assert_eq!(s.count().await.unwrap(), 2);
    mariadb(&o.url, "delete from handles where handle = 'APP/42'");
    assert_eq!(s.get(b"APP/42").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn homing_is_the_nas_table() {
    let Some(o) = options("homing_is_nas").await else { return };
    let s = SqlStore::connect(&o).await.unwrap();
    s.meta_put("homed/0.NA/TEST", Some(Vec::new())).await.unwrap();
    s.meta_put("homed/0.NA/TEST", Some(Vec::new())).await.unwrap(); // twice: still one row
    mariadb(&o.url, "insert into nas values ('0.NA/OTHER')");
    assert_eq!(mariadb(&o.url, "select na from nas order by na"), "0.NA/OTHER\n0.NA/TEST");
    s.meta_put("site/serial", Some(vec![0, 1])).await.unwrap();
    let homed = s.meta_scan("homed/").await.unwrap();
    assert_eq!(homed, vec![("homed/0.NA/OTHER".into(), vec![]), ("homed/0.NA/TEST".into(), vec![])]);
    assert_eq!(s.meta_scan("").await.unwrap().len(), 3);
    assert_eq!(s.meta_get("homed/0.NA/OTHER").await.unwrap(), Some(Vec::new()));
    assert_eq!(s.meta_get("homed/0.na/other").await.unwrap(), None, "prefixes are exact bytes too");
    s.meta_put("homed/0.NA/TEST", None).await.unwrap();
    assert_eq!(s.meta_get("homed/0.NA/TEST").await.unwrap(), None);
    assert_eq!(mariadb(&o.url, "select count(*) from nas"), "1");
    assert_eq!(mariadb(&o.url, "select hex(v) from handled_meta where k = 'site/serial'"), "0001");
}

/// Handle.Net's `store_*_as_string` options on MariaDB: `create_schema` makes
/// `type` a `varchar(255)` (the names are the manual's `varchar` already);
/// rows read as the text they are; and, as for Handle.Net's driver, which
/// converts, a table of either layout is served with the options on or off.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_text_layout_is_handle_nets_store_as_string() {
    use crate::sql_common::TEXT_LAYOUT;
    use handled_store::SqlOptions;
    let Some(o) = options("text_layout").await else { return };
    let s = SqlStore::connect(&SqlOptions { layout: TEXT_LAYOUT, ..o.clone() }).await.unwrap();
    let got = mariadb(
        &o.url,
        "select table_name, column_name, column_type from information_schema.columns where table_schema = database() \
         and column_name in ('na', 'handle', 'type', 'data') order by table_name, ordinal_position",
    );
    let want = [
        "handles\thandle\tvarchar(255)",
        "handles\ttype\tvarchar(255)",
        "handles\tdata\tblob",
        "nas\tna\tvarchar(255)",
    ];
    assert_eq!(got.lines().collect::<Vec<_>>(), want);
    s.swap("TEST/é1".as_bytes(), Expect::Absent, Some(crate::sql_common::every_column_record())).await.unwrap();
    assert_eq!(mariadb(&o.url, "select type from handles where handle = 'TEST/é1' order by idx"), "URL\nHS_ADMIN");
    let bad_type = handled_store::HandleRecord::new(vec![handled_proto::HandleValue::new(1, &b"T\xff"[..], "x")]);
    let e = s.swap(b"TEST/t", Expect::Absent, Some(bad_type)).await.unwrap_err();
    assert!(e.to_string().contains("store_handle_value_type_as_string"), "{e}");
    // The default layout on the text table, and the text layout on the manual's tables.
    let bytes = SqlStore::connect(&SqlOptions { create_schema: false, ..o.clone() }).await.unwrap();
    assert_eq!(bytes.get("TEST/é1".as_bytes()).await.unwrap(), s.get("TEST/é1".as_bytes()).await.unwrap());
    let Some(manual) = options("manual_tables").await else { return };
    SqlStore::connect(&manual).await.unwrap();
    let text = SqlStore::connect(&SqlOptions { layout: TEXT_LAYOUT, create_schema: false, ..manual }).await.unwrap();
    text.swap(b"TEST/2", Expect::Absent, Some(crate::sql_common::every_column_record())).await.unwrap();
    assert_eq!(text.get(b"TEST/2").await.unwrap().unwrap().values.len(), 2);
}
