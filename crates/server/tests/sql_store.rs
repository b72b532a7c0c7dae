//! A server on `store = "sql"` end to end, on a PostgreSQL and on a MariaDB
//! the test starts (skipped, saying why, without one): bootstrap writes Handle.Net's rows
//! (the prefix homed in `nas`, the admin handle in `handles`), rows another
//! program inserts with plain SQL resolve at once over UDP, TCP and HTTP, a
//! delete by that program is seen at once, and a restart on the same database
//! keeps the site serial; `/hrls` finds it by its URL from the rows
//! themselves; with `read_only` nothing is written at all. And a
//! server that is a view over another application's table through a custom
//! `get_handle_stmt` (docs/sql-dspace-example.toml, DSpace's `handle` table).

use handled_testkit::db;
mod global_common;

/// A database as another program reaches it (`psql`, `mariadb`), and the
/// few spellings in which the two differ.
struct Db {
    url: String,
    run: Box<dyn Fn(&str) -> String>,
    /// A text literal as the `handles`/`nas` key columns take it.
    key: fn(&str) -> String,
    /// A text literal as a `blob`/`bytea` value column takes it.
    bytes: fn(&str) -> String,
    /// Hex (lower case) of a bytes column.
    hex: fn(&str) -> String,
    /// A key column as text.
    text: fn(&str) -> String,
}

async fn postgres(name: &str) -> Option<Db> {
    let url = db::postgres::database(name).await?;
    let server = db::postgres::server().unwrap();
    let db = url.rsplit('/').next().unwrap().to_owned();
    Some(Db {
        url,
        run: Box::new(move |sql| db::postgres::psql(server, &db, sql).unwrap()),
        key: |s| format!("'{s}'::bytea"),
        bytes: |s| format!("'{s}'::bytea"),
        hex: |c| format!("encode({c}, 'hex')"),
        text: |c| format!("convert_from({c}, 'UTF8')"),
    })
}

async fn mariadb(name: &str) -> Option<Db> {
    let url = db::mariadb::database(name).await?;
    let server = db::mariadb::server().unwrap();
    let db = url.rsplit('/').next().unwrap().to_owned();
    Some(Db {
        url,
        run: Box::new(move |sql| db::mariadb::sql(server, &db, sql).unwrap()),
        key: |s| format!("'{s}'"),
        bytes: |s| format!("'{s}'"),
        hex: |c| format!("lower(hex({c}))"),
        text: |c| c.to_owned(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_net_database_on_postgres_served_by_handled() {
    let Some(db) = postgres("served_by_handled").await else { return };
    served_by_handled(db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_net_database_on_mariadb_served_by_handled() {
    let Some(db) = mariadb("served_by_handled").await else { return };
    served_by_handled(db).await;
}

use handled_client::{
    resolved_values, AdminSession, ConnectParams, Connection, Credentials, KeyChoice, Protocol, ResolveOptions,
};
use handled_proto::header::ResponseCode;
use handled_proto::value::HandleValue;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(5);

/// A durable server on the database at `url`, its data directory `dir`.
fn on_sql(c: &mut handled_server::config::Config, url: &str, dir: &std::path::Path) {
    c.ephemeral = false;
    c.storage.store = handled_server::config::StoreKind::Sql;
    c.data_dir = dir.to_owned();
    c.storage.sql.url = url.to_owned();
}

async fn served_by_handled(db: Db) {
    let psql = |sql: &str| (db.run)(sql);
    let (k, b, hex, text) = (db.key, db.bytes, db.hex, db.text);
    let url = db.url.clone();
    let dir = tempfile::tempdir().unwrap();
    let tweak = |c: &mut handled_server::config::Config| {
        on_sql(c, &url, dir.path());
        c.storage.sql.create_schema = true;
        // An index on data for /hrls: PostgreSQL's dataindex is there; MariaDB's made.
        c.storage.sql.value_index = true;
    };
    let mut s = handled_testkit::start(tweak).await;

    // Bootstrap homed the prefix in Handle.Net's table and wrote its handles there.
    assert_eq!(psql(&format!("select {} from nas", text("na"))), "0.NA/TEST");
    let admin =
        psql(&format!("select idx, {} from handles where handle = {} order by idx", text("type"), k("TEST/ADMIN")));
    assert!(admin.contains("HS_ADMIN"), "{admin}");
    assert!(psql(&format!("select count(*) from handles where handle = {}", k("0.NA/TEST"))) != "0");

    // A program deposits a handle with plain SQL, as §8.1.3 describes.
    psql(&format!(
        "insert into handles values ({}, 1, {}, {}, 0, 86400, 1700000000, '', true, true, true, false)",
        k("TEST/DEPOSIT"),
        b("URL"),
        b("https://example.org/d")
    ));
    for p in [Protocol::Udp, Protocol::Tcp, Protocol::Http] {
        let addr = match p {
            Protocol::Udp => s.addrs.udp,
            Protocol::Tcp => s.addrs.tcp,
            _ => s.addrs.http,
        };
        let mut c = Connection::open(p, addr, TIMEOUT, false).await.unwrap();
        // Case-insensitive like Handle.Net: the row is upper case, the request need not be.
        let r = c.resolve(b"test/deposit", &ResolveOptions::default()).await.unwrap();
        let values = resolved_values(&r).unwrap_or_else(|| panic!("{p:?}: {:?}", r.code()));
        assert_eq!(values.len(), 1, "{p:?}");
        assert_eq!(values[0].data, b"https://example.org/d", "{p:?}");
    }
    // Found by its URL through the rows themselves (the database's index on
    // data), exactly as stored; other spellings and prefixes as /hrls says.
    let search = |addr, query: &'static str| async move {
        let (head, body) = global_common::http_get(addr, &format!("/hrls/handles{query}")).await;
        (head[9..12].parse::<u16>().unwrap(), body)
    };
    let found = (200, r#"["TEST/DEPOSIT"]"#.to_owned());
    assert_eq!(search(s.addrs.http, "?URL=https://example.org/d").await, found);
    assert_eq!(search(s.addrs.http, "/TEST?URL=https://example.org/d").await, found);
    assert_eq!(search(s.addrs.http, "/OTHER?URL=https://example.org/d").await, (200, "[]".to_owned()));
    assert_eq!(search(s.addrs.http, "?URL=https://EXAMPLE.org/d").await, (200, "[]".to_owned()), "bytes as stored");
    assert_eq!(search(s.addrs.http, "?EMAIL=https://example.org/d").await, (200, "[]".to_owned()));
    assert_eq!(search(s.addrs.http, "?URL=https://example.org/*").await, found, "a prefix: a range on the index");
    assert_eq!(search(s.addrs.http, "?URL=*/d").await, found, "a pattern: the type's rows in data order");
    // Changed and deleted by the other program: seen on the next request.
    psql(&format!("update handles set data = {} where handle = {}", b("https://example.org/moved"), k("TEST/DEPOSIT")));
    let mut tcp = Connection::open(Protocol::Tcp, s.addrs.tcp, TIMEOUT, false).await.unwrap();
    let r = tcp.resolve(b"TEST/DEPOSIT", &ResolveOptions::default()).await.unwrap();
    assert_eq!(resolved_values(&r).unwrap()[0].data, b"https://example.org/moved");
    psql(&format!("delete from handles where handle = {}", k("TEST/DEPOSIT")));
    let mut tcp = Connection::open(Protocol::Tcp, s.addrs.tcp, TIMEOUT, false).await.unwrap();
    let r = tcp.resolve(b"TEST/DEPOSIT", &ResolveOptions::default()).await.unwrap();
    assert_eq!(r.code(), ResponseCode::HANDLE_NOT_FOUND);
    assert_eq!(search(s.addrs.http, "?URL=https://example.org/*").await, (200, "[]".to_owned()));
    // How many lookups went in how many statements (read_statements), for operators.
    let (_, metrics) = global_common::http_get(s.addrs.http, "/metrics").await;
    let figure = |name: &str| -> u64 {
        let line = metrics.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name}: {metrics}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let (lookups, statements) =
        (figure("handled_store_lookups_total "), figure("handled_store_lookup_statements_total "));
    assert!(lookups >= 6 && (1..=lookups).contains(&statements), "{lookups} lookups, {statements} statements");

    // Our metadata stays out of Handle.Net's tables; a restart carries the
    // site serial on (its ports are new, so the site record changed: 1 → 2).
    let serial_sql = format!("select {} from handled_meta where k = {}", hex("v"), b("site/serial"));
    assert_eq!(psql(&serial_sql), "0001");
    s.shutdown(Duration::from_secs(2)).await;
    let mut again = handled_testkit::start(tweak).await;
    assert_eq!(psql(&serial_sql), "0002");
    assert_eq!(psql("select count(*) from nas"), "1");
    again.shutdown(Duration::from_secs(2)).await;

    // sql_read_only: the database is served as it is, nothing is written at
    // start, and administration is answered as a mirror answers it.
    let admin_credentials = s.credentials.first().expect("the first start made TEST/ADMIN").clone();
    psql(&format!(
        "insert into handles values ({}, 1, {}, {}, 0, 86400, 1700000000, '', true, true, true, false)",
        k("TEST/RO"),
        b("URL"),
        b("https://example.org/ro")
    ));
    let meta = format!("select {} from handled_meta order by k", hex("v"));
    let everything = || psql("select count(*) from handles") + "\n" + &psql(&meta);
    let rows = everything();
    let mut ro = handled_testkit::start(|c| {
        tweak(c);
        c.storage.sql.create_schema = false;
        c.storage.sql.value_index = false;
        c.storage.sql.read_only = true;
    })
    .await;
    let mut tcp = Connection::open(Protocol::Tcp, ro.addrs.tcp, TIMEOUT, false).await.unwrap();
    let r = tcp.resolve(b"TEST/RO", &ResolveOptions::default()).await.unwrap();
    assert_eq!(resolved_values(&r).unwrap()[0].data, b"https://example.org/ro");
    let creds = Credentials::load(&admin_credentials, KeyChoice::Secret).unwrap();
    let mut admin = AdminSession::open(ConnectParams::new(Protocol::Tcp, ro.addrs.tcp), creds).await.unwrap();
    let refused = admin.create(b"TEST/NEW", &[HandleValue::new(1, "URL", "https://example.org/n")]).await.unwrap_err();
    assert_eq!(refused.code(), Some(ResponseCode::SERVER_NOT_RESP), "{refused}");
    assert_eq!(everything(), rows, "a read-only server wrote to the database");
    ro.shutdown(Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writable_server_on_postgres_with_handle_nets_tables_only() {
    let Some(db) = postgres("untouched_schema").await else { return };
    untouched_schema(db, handled_store::sql::schema::HANDLE_NET_POSTGRES, "current_schema()").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writable_server_on_mariadb_with_handle_nets_tables_only() {
    let Some(db) = mariadb("untouched_schema").await else { return };
    untouched_schema(db, handled_store::sql::schema::HANDLE_NET_MYSQL, "database()").await;
}

/// Handle.Net's tables as its Manual makes them, nothing of ours: a writable
/// server starts (as Handle.Net would, its own state in its directory), writes
/// Handle.Net's rows, and keeps the site serial in the data directory.
async fn untouched_schema(db: Db, manual_tables: &[&str], this_schema: &str) {
    let psql = |sql: &str| (db.run)(sql);
    for ddl in manual_tables {
        psql(ddl);
    }
    let url = db.url.clone();
    let dir = tempfile::tempdir().unwrap();
    let tweak = |c: &mut handled_server::config::Config| on_sql(c, &url, dir.path());
    let ours = format!(
        "select count(*) from information_schema.tables where table_schema = {this_schema} and table_name like 'handled%'"
    );
    let serial = || {
        let text = std::fs::read_to_string(dir.path().join(handled_store::SQL_META_FILE_NAME)).unwrap();
        let entries: std::collections::BTreeMap<String, String> = serde_json::from_str(&text).unwrap();
        entries["site/serial"].clone()
    };
    let mut s = handled_testkit::start(tweak).await;
    assert_eq!(psql(&ours), "0", "a table of ours was made");
    assert_eq!(serial(), "0001");
    assert_eq!(psql(&format!("select {} from nas", (db.text)("na"))), "0.NA/TEST");
    let creds = Credentials::load(s.credentials.first().unwrap(), KeyChoice::Secret).unwrap();
    let mut admin = AdminSession::open(ConnectParams::new(Protocol::Tcp, s.addrs.tcp), creds).await.unwrap();
    admin.create(b"TEST/NEW", &[HandleValue::new(1, "URL", "https://example.org/n")]).await.unwrap();
    let row = format!("select count(*) from handles where handle = {}", (db.key)("TEST/NEW"));
    assert_eq!(psql(&row), "1");
    s.shutdown(Duration::from_secs(2)).await;
    // Its ports are new, so the site record changed: the serial goes on, 1 → 2.
    let mut again = handled_testkit::start(tweak).await;
    assert_eq!(serial(), "0002");
    assert_eq!(psql(&ours), "0");
    let mut tcp = Connection::open(Protocol::Tcp, again.addrs.tcp, TIMEOUT, false).await.unwrap();
    let r = tcp.resolve(b"TEST/NEW", &ResolveOptions::default()).await.unwrap();
    assert_eq!(resolved_values(&r).unwrap()[0].data, b"https://example.org/n");
    again.shutdown(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn what_the_schema_cannot_hold_is_refused_at_start() {
    let mut c = handled_testkit::config();
    c.ephemeral = false;
    c.storage.store = handled_server::config::StoreKind::Sql;
    c.storage.record_cache_mb = 8;
    assert!(c.validate().unwrap_err().to_string().contains("stale"));
    c.storage.record_cache_mb = 0;
    c.registry.port = Some(0);
    assert!(c.validate().unwrap_err().to_string().contains("documents"));
    c.registry.port = None;
    // A mirror keeps the transaction log: only with replication_log.
    c.replication.source = Some("127.0.0.1:2641".into());
    assert!(c.validate().unwrap_err().to_string().contains("replication_log = true"));
    c.storage.sql.replication_log = true;
    assert!(c.validate().is_ok());
    c.storage.sql.meta_table = Some(false);
    assert!(c.validate().unwrap_err().to_string().contains("meta_table"));
}

/// An example configuration of docs/ as the server loads it: what a reader copies is what is tested.
fn example(file: &str) -> handled_server::config::Config {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs").join(file);
    handled_server::config::Config::load(Some(&path)).unwrap_or_else(|e| panic!("docs/{file}: {e}"))
}

/// DSpace's `handle` table, as DSpace creates it (its own columns, no Handle.Net table).
const DSPACE_TABLE: &str = "create table handle (handle_id integer primary key, handle varchar(256) unique, \
     resource_type_id integer, resource_id integer)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dspace_handle_table_on_postgres_served_through_a_custom_statement() {
    let Some(db) = postgres("dspace_view").await else { return };
    dspace_view(db, "sql-dspace-example.toml").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dspace_handle_table_on_mariadb_served_through_a_custom_statement() {
    let Some(db) = mariadb("dspace_view").await else { return };
    dspace_view(db, "sql-dspace-example-mariadb.toml").await;
}

/// A read-only server answering `123456789/<n>` from DSpace's table: the URL
/// built in the SELECT, "handle not found" for an absent row, a row inserted
/// after start seen at once, over the native protocol (TCP) and the JSON API.
async fn dspace_view(db: Db, example_file: &str) {
    let psql = |sql: &str| (db.run)(sql);
    psql(DSPACE_TABLE);
    psql("insert into handle values (1, '123456789/5', 2, 17), (2, '123456789/6', 3, 4)");
    let example = example(example_file).storage.sql;
    let get = example.get_handle_stmt.clone().expect("the example's get_handle_stmt");
    let dir = tempfile::tempdir().unwrap();
    let url = db.url.clone();
    let tweak = |c: &mut handled_server::config::Config| {
        c.ephemeral = false;
        c.data_dir = dir.path().to_owned();
        c.prefixes = vec!["123456789".into()];
        c.storage.store = handled_server::config::StoreKind::Sql;
        c.storage.sql.url = url.clone();
        c.storage.sql.read_only = example.read_only;
        c.storage.sql.get_handle_stmt = Some(get.clone());
        c.storage.sql.scan_handles_stmt = example.scan_handles_stmt.clone();
        c.storage.sql.scan_by_prefix_stmt = example.scan_by_prefix_stmt.clone();
    };

    // Refused at start, naming the key: writable, or a statement of the wrong shape.
    let mut writable = handled_testkit::config();
    tweak(&mut writable);
    writable.storage.sql.read_only = false;
    let e = handled_server::bootstrap::open_store(&writable).await.err().expect("refused").to_string();
    assert!(e.contains("get_handle_stmt") && e.contains("read_only"), "{e}");
    let mut short = handled_testkit::config();
    tweak(&mut short);
    short.storage.sql.get_handle_stmt = Some("select 1, handle from handle where handle = ?".into());
    let e = handled_server::bootstrap::open_store(&short).await.err().expect("refused").to_string();
    assert!(e.contains("get_handle_stmt") && e.contains("11"), "{e}");
    let mut broken = handled_testkit::config();
    tweak(&mut broken);
    broken.storage.sql.get_handle_stmt = Some(get.replace("from handle", "from no_such_table"));
    let e = handled_server::bootstrap::open_store(&broken).await.err().expect("refused").to_string();
    assert!(e.contains("get_handle_stmt") && e.contains("prepare"), "{e}");

    let mut s = handled_testkit::start(tweak).await;
    let mut tcp = Connection::open(Protocol::Tcp, s.addrs.tcp, TIMEOUT, false).await.unwrap();
    let opts = ResolveOptions::default();
    let r = tcp.resolve(b"123456789/5", &opts).await.unwrap();
    let values = resolved_values(&r).unwrap_or_else(|| panic!("{:?}", r.code()));
    assert_eq!(values.len(), 1);
    assert_eq!((values[0].index, values[0].value_type.as_slice()), (1, &b"URL"[..]));
    assert_eq!(values[0].data, b"https://repo.example.org/handle/123456789/5");
    assert_eq!(tcp.resolve(b"123456789/7", &opts).await.unwrap().code(), ResponseCode::HANDLE_NOT_FOUND);

    // DSpace deposits an item: resolvable on the next request, both ways.
    psql("insert into handle values (3, '123456789/7', 2, 18)");
    let r = tcp.resolve(b"123456789/7", &opts).await.unwrap();
    assert_eq!(resolved_values(&r).unwrap()[0].data, b"https://repo.example.org/handle/123456789/7");
    let (head, body) = global_common::http_get(s.addrs.http, "/api/handles/123456789/6").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    assert!(
        body.contains("\"responseCode\":1") && body.contains("https://repo.example.org/handle/123456789/6"),
        "{body}"
    );
    let (head, body) = global_common::http_get(s.addrs.http, "/api/handles/123456789/8").await;
    assert!(head.starts_with("HTTP/1.1 404") && body.contains("\"responseCode\":100"), "{head}\n{body}");
    // No handles table to search by value.
    let (head, body) = global_common::http_get(s.addrs.http, "/hrls/handles?URL=x").await;
    assert!(head.starts_with("HTTP/1.1 501") && body.contains("custom statements"), "{head}\n{body}");
    // Ready, though it neither writes nor counts.
    let (head, body) = global_common::http_get(s.addrs.http, "/readyz").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    s.shutdown(Duration::from_secs(2)).await;
}
