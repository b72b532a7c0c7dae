//! S5: what a server on `store = "sql"` answers when its database fails, on a
//! PostgreSQL and on a MariaDB the test starts (skipped, saying why, without
//! one). While the database is out of reach an authenticated write is
//! "storage unavailable" (RC 7, HTTP 503), not a failed authentication
//! (406 / 401: clients would rotate or lock keys); a write the database can
//! never take (a value over its column or index, a name over its
//! `varchar(255)`, a handle its collation takes for another) is refused at
//! once naming what (HTTP 4xx), not "try again later".

use handled_testkit::db;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use handled_client::{AdminSession, ConnectParams, Credentials, KeyChoice, Protocol};
use handled_proto::header::ResponseCode;
use handled_proto::value::HandleValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};

const TIMEOUT: Duration = Duration::from_secs(10);

/// The database's address as the server reaches it, through a relay the test
/// can cut: the database "stops" for this server alone, while the other
/// tests go on with the shared database server.
struct Relay {
    port: u16,
    accept: JoinHandle<()>,
    links: Arc<Mutex<Vec<AbortHandle>>>,
}

impl Relay {
    async fn to(db_port: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let links = Arc::new(Mutex::new(Vec::new()));
        let kept = links.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let link = tokio::spawn(async move {
                    if let Ok(mut db) = TcpStream::connect(("127.0.0.1", db_port)).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut db).await;
                    }
                });
                kept.lock().unwrap().push(link.abort_handle());
            }
        });
        Relay { port, accept, links }
    }

    /// The database stops: new connections are refused, open ones cut.
    async fn cut(self) {
        self.accept.abort();
        let _ = self.accept.await; // the listener is closed once the task is gone
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }
}

/// A fresh database (URL and server port) of either kind.
struct Db {
    url: String,
    port: u16,
    mariadb: bool,
}

async fn postgres(name: &str) -> Option<Db> {
    let url = db::postgres::database(name).await?;
    Some(Db { url, port: db::postgres::server().unwrap().port, mariadb: false })
}

async fn mariadb(name: &str) -> Option<Db> {
    let url = db::mariadb::database(name).await?;
    Some(Db { url, port: db::mariadb::server().unwrap().port, mariadb: true })
}

/// A server on `url`, taking Basic credentials over plain HTTP (its data
/// directory, the server key, in `dir`).
async fn server(url: String, dir: &std::path::Path) -> handled_testkit::TestServer {
    handled_testkit::start(|c| {
        c.ephemeral = false;
        c.data_dir = dir.to_owned();
        c.storage.store = handled_server::config::StoreKind::Sql;
        c.storage.sql.url = url;
        c.storage.sql.create_schema = true;
        // Out of reach is said within a second.
        c.storage.sql.connect_timeout_ms = 1000;
        c.access.allow_plain_http_admin = true;
    })
    .await
}

fn credentials(s: &handled_testkit::TestServer) -> Credentials {
    Credentials::load(s.credentials.first().expect("bootstrap wrote TEST/ADMIN"), KeyChoice::Secret).unwrap()
}

/// `PUT /api/handles/{path}` of one URL value of `data`, as TEST/ADMIN with
/// Basic credentials: the status and the body.
async fn put(s: &handled_testkit::TestServer, path: &str, data: &str) -> (u16, String) {
    let secret = match credentials(s).key {
        handled_client::credentials::Key::Secret(k) => k,
        _ => unreachable!("asked for the secret key"),
    };
    let user = format!("300%3ATEST%2FADMIN:{}", String::from_utf8(secret).unwrap());
    let auth = base64::engine::general_purpose::STANDARD.encode(user);
    let body = format!(r#"{{"values":[{{"index":1,"type":"URL","data":{{"format":"string","value":"{data}"}}}}]}}"#);
    let request = format!(
        "PUT /api/handles/{path} HTTP/1.1\r\nHost: t\r\nAuthorization: Basic {auth}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut http = TcpStream::connect(s.addrs.http).await.unwrap();
    http.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(TIMEOUT, http.read_to_end(&mut answer)).await.expect("an answer in time").unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{answer}"));
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// `len` letters and digits that do not compress (PostgreSQL compresses
/// what it indexes).
fn letters(len: usize) -> String {
    let mut x: u32 = 7;
    (0..len)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[(x >> 16) as usize % 36])
        })
        .collect()
}

/// The `responseCode` of a JSON answer.
fn response_code(body: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v["responseCode"].as_u64().unwrap_or_else(|| panic!("{body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_while_postgres_is_stopped_is_unavailable_not_unauthorized() {
    let Some(db) = postgres("write_while_stopped").await else { return };
    write_while_stopped(db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_while_mariadb_is_stopped_is_unavailable_not_unauthorized() {
    let Some(db) = mariadb("write_while_stopped").await else { return };
    write_while_stopped(db).await;
}

async fn write_while_stopped(db: Db) {
    let relay = Relay::to(db.port).await;
    let url = db.url.replacen(&format!(":{}/", db.port), &format!(":{}/", relay.port), 1);
    let dir = tempfile::tempdir().unwrap();
    let mut s = server(url, dir.path()).await;
    let (status, body) = put(&s, "TEST/before", "https://example.org/b").await;
    assert!(status == 201 || status == 200, "{status} {body}");

    relay.cut().await;
    // JSON API: the Basic credentials are checked against TEST/ADMIN's keys,
    // which cannot be read: 503 with code 7, not 401 (a credentials failure).
    let (status, body) = put(&s, "TEST/during", "https://example.org/d").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(response_code(&body), u64::from(ResponseCode::SERVER_BACKUP.0), "{body}");
    assert!(body.contains("Storage unavailable"), "{body}");
    // Native protocol: the challenge's answer cannot be checked either: 7, not 406.
    let params =
        ConnectParams { timeout: TIMEOUT, use_session: false, ..ConnectParams::new(Protocol::Tcp, s.addrs.tcp) };
    let mut admin = AdminSession::open(params, credentials(&s)).await.unwrap();
    let e = admin.create(b"TEST/during", &[HandleValue::new(1, "URL", "https://example.org/d")]).await.unwrap_err();
    assert_eq!(e.code(), Some(ResponseCode::SERVER_BACKUP), "{e}");
    s.shutdown(Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_postgres_can_never_hold_is_refused_at_once() {
    let Some(db) = postgres("never_hold").await else { return };
    never_hold(db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_mariadb_can_never_hold_is_refused_at_once() {
    let Some(db) = mariadb("never_hold").await else { return };
    never_hold(db).await;
}

/// Each refusal is a 4xx naming what was refused (the store tries each once:
/// sql_common's and sql_mariadb's tests count the tries), never 503.
async fn never_hold(db: Db) {
    let mariadb = db.mariadb;
    let dir = tempfile::tempdir().unwrap();
    let mut s = server(db.url, dir.path()).await;
    // 70 kB that do not compress: over MariaDB's `blob` and PostgreSQL's dataindex.
    let (status, body) = put(&s, "TEST/big", &letters(70_000)).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(response_code(&body), u64::from(ResponseCode::INVALID_VALUE.0), "{body}");
    assert!(body.contains("too large"), "{body}");
    if mariadb {
        // 300 characters: over the manual's `varchar(255)`.
        let (status, body) = put(&s, &format!("TEST/{}", "n".repeat(295)), "https://example.org/n").await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(response_code(&body), u64::from(ResponseCode::INVALID_HANDLE.0), "{body}");
        assert!(body.contains("handle name"), "{body}");
        // MySQL's collations ignore trailing spaces (PAD SPACE): `TEST/a ` is
        // `TEST/A` (handles are kept upper case) to the table.
        let (status, body) = put(&s, "TEST/a", "https://example.org/a").await;
        assert!(status == 201 || status == 200, "{status} {body}");
        let (status, body) = put(&s, "TEST/a%20", "https://example.org/a2").await;
        assert_eq!(status, 409, "{body}");
        assert_eq!(response_code(&body), u64::from(ResponseCode::HANDLE_ALREADY_EXISTS.0), "{body}");
        assert!(body.contains("collation"), "{body}");
    }
    s.shutdown(Duration::from_secs(2)).await;
}
