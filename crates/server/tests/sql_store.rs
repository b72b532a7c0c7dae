//! A server on `store = "sql"` end to end, on a PostgreSQL and on a MariaDB
//! the test starts (skipped, saying why, without one): bootstrap writes Handle.Net's rows
//! (the prefix homed in `nas`, the admin handle in `handles`), rows another
//! program inserts with plain SQL resolve at once over UDP, TCP and HTTP, a
//! delete by that program is seen at once, and a restart on the same database
//! keeps the site serial; with `read_only` nothing is written at all.

#[path = "../../store/tests/db_server/mod.rs"]
mod db_server;

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
    let url = db_server::postgres::database(name).await?;
    let server = db_server::postgres::server().unwrap();
    let db = url.rsplit('/').next().unwrap().to_owned();
    Some(Db {
        url,
        run: Box::new(move |sql| db_server::postgres::psql(server, &db, sql).unwrap()),
        key: |s| format!("'{s}'::bytea"),
        bytes: |s| format!("'{s}'::bytea"),
        hex: |c| format!("encode({c}, 'hex')"),
        text: |c| format!("convert_from({c}, 'UTF8')"),
    })
}

async fn mariadb(name: &str) -> Option<Db> {
    let url = db_server::mariadb::database(name).await?;
    let server = db_server::mariadb::server().unwrap();
    let db = url.rsplit('/').next().unwrap().to_owned();
    Some(Db {
        url,
        run: Box::new(move |sql| db_server::mariadb::sql(server, &db, sql).unwrap()),
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

async fn served_by_handled(db: Db) {
    let psql = |sql: &str| (db.run)(sql);
    let (k, b, hex, text) = (db.key, db.bytes, db.hex, db.text);
    let url = db.url.clone();
    let dir = tempfile::tempdir().unwrap();
    let tweak = |c: &mut handled_server::config::Config| {
        c.ephemeral = false;
        c.storage.store = handled_server::config::StoreKind::Sql;
        c.data_dir = dir.path().to_owned();
        c.storage.sql.url = url.clone();
        c.storage.sql.create_schema = true;
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
    // Changed and deleted by the other program: seen on the next request.
    psql(&format!("update handles set data = {} where handle = {}", b("https://example.org/moved"), k("TEST/DEPOSIT")));
    let mut tcp = Connection::open(Protocol::Tcp, s.addrs.tcp, TIMEOUT, false).await.unwrap();
    let r = tcp.resolve(b"TEST/DEPOSIT", &ResolveOptions::default()).await.unwrap();
    assert_eq!(resolved_values(&r).unwrap()[0].data, b"https://example.org/moved");
    psql(&format!("delete from handles where handle = {}", k("TEST/DEPOSIT")));
    let mut tcp = Connection::open(Protocol::Tcp, s.addrs.tcp, TIMEOUT, false).await.unwrap();
    let r = tcp.resolve(b"TEST/DEPOSIT", &ResolveOptions::default()).await.unwrap();
    assert_eq!(r.code(), ResponseCode::HANDLE_NOT_FOUND);

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
}
