//! `store = "sql"` with `[sql] replication_log = true`, end to end: a
//! `handled` on PostgreSQL is the replication source of a `handled` mirror
//! on MariaDB (each database started by the test; skipped, saying why,
//! without one). The mirror takes the dump, then follows creates, changes and
//! deletes, and logs them under the source's ids, as a promoted mirror needs.

#[path = "../../store/tests/db_server/mod.rs"]
mod db_server;

use std::time::{Duration, Instant};

use handled_client::ResolveOptions;
use handled_client::{resolved_values, AdminSession, ConnectParams, Connection, Credentials, KeyChoice, Protocol};
use handled_proto::header::ResponseCode;
use handled_proto::value::{HandleValue, ValuePermissions};
use handled_server::config::{Config, StoreKind};
use handled_server::replication::mirror::MirrorSettings;
use handled_server::Server;

const SECRET: &str = "mirror secret";
const TIMEOUT: Duration = Duration::from_secs(5);

fn sql(c: &mut Config, url: &str, dir: &std::path::Path) {
    c.ephemeral = false;
    c.data_dir = dir.to_owned();
    c.storage.store = StoreKind::Sql;
    c.storage.sql.url = url.to_owned();
    c.storage.sql.create_schema = true;
    c.storage.sql.replication_log = true;
}

/// The values of `handle` on the server at `addr` (empty: not found), or
/// the answer's code (a mirror before its dump refers elsewhere).
async fn resolve(addr: std::net::SocketAddr, handle: &[u8]) -> Result<Vec<Vec<u8>>, ResponseCode> {
    let mut c = Connection::open(Protocol::Tcp, addr, TIMEOUT, false).await.unwrap();
    let r = c.resolve(handle, &ResolveOptions::default()).await.unwrap();
    if r.code() == ResponseCode::HANDLE_NOT_FOUND {
        return Ok(Vec::new());
    }
    Ok(resolved_values(&r).ok_or(r.code())?.iter().map(|v| v.data.clone()).collect())
}

/// Wait (up to a minute) until `handle` on the mirror is `want`.
async fn until_mirrored(addr: std::net::SocketAddr, handle: &[u8], want: Vec<Vec<u8>>) {
    let started = Instant::now();
    loop {
        let got = resolve(addr, handle).await;
        if got.as_ref() == Ok(&want) {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{handle:?} on the mirror is {got:?}, not {want:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handled_on_sql_with_the_log_is_the_source_of_a_mirror_on_sql() {
    let Some(source_url) = db_server::postgres::database("sql_source").await else { return };
    let Some(mirror_url) = db_server::mariadb::database("sql_mirror").await else { return };
    let (source_dir, mirror_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut source = handled_testkit::start(|c| {
        sql(c, &source_url, source_dir.path());
        c.replication.admins = vec!["300:TEST/MIRROR".into()];
    })
    .await;
    let creds = Credentials::load(source.credentials.first().unwrap(), KeyChoice::Secret).unwrap();
    let mut admin = AdminSession::open(ConnectParams::new(Protocol::Tcp, source.addrs.tcp), creds).await.unwrap();
    let mut secret = HandleValue::new(300, "HS_SECKEY", SECRET);
    secret.permissions = ValuePermissions(0x0c);
    admin.create(b"TEST/MIRROR", &[secret]).await.unwrap();
    admin.create(b"TEST/before", &[HandleValue::new(1, "URL", "https://example.org/before")]).await.unwrap();

    // The mirror, as `handled serve` starts one.
    let mut config = handled_testkit::config();
    sql(&mut config, &mirror_url, mirror_dir.path());
    config.replication.source = Some(format!("127.0.0.1:{}", source.addrs.tcp.port()));
    config.replication.authentication = Some("secretkey:300:TEST/MIRROR".into());
    config.replication.secret = Some(SECRET.into());
    config.replication.interval_ms = 200;
    config.replication.low_latency = true;
    let settings = MirrorSettings::from_config(&config.replication).unwrap().unwrap();
    let bound = Server::bind(config).expect("bind");
    let store = handled_server::bootstrap::open_store(&bound.config).await.expect("mirror store");
    let booted = bound.bootstrap(store).await.expect("bootstrap");
    booted.start_mirror(settings).await.expect("start the mirror");
    let mirror = booted.serve().expect("serve");
    let at = mirror.addrs.tcp;

    // The dump, then each kind of change.
    until_mirrored(at, b"TEST/BEFORE", vec![b"https://example.org/before".to_vec()]).await;
    admin.create(b"TEST/after", &[HandleValue::new(1, "URL", "https://example.org/after")]).await.unwrap();
    until_mirrored(at, b"TEST/AFTER", vec![b"https://example.org/after".to_vec()]).await;
    admin.modify_values(b"TEST/after", &[HandleValue::new(1, "URL", "https://example.org/moved")]).await.unwrap();
    until_mirrored(at, b"TEST/AFTER", vec![b"https://example.org/moved".to_vec()]).await;
    admin.delete(b"TEST/before").await.unwrap();
    until_mirrored(at, b"TEST/BEFORE", Vec::new()).await;

    // The mirror's log continues the source's ids (what it pulled after the dump).
    let (src, mir) = (source.state.store.txn_log_bounds().await.unwrap(), mirror.state.store.txn_log_bounds().await);
    let mir = mir.unwrap();
    assert_eq!(mir.last, src.last, "source {src:?}, mirror {mir:?}");
    let pulled = mirror.state.store.txn_log_read(mir.floor, 100).await.unwrap();
    let source_log = source.state.store.txn_log_read(mir.floor, 100).await.unwrap();
    let ids = |v: &[handled_store::TxnEntry]| v.iter().map(|e| (e.id, e.action, e.handle.clone())).collect::<Vec<_>>();
    assert_eq!(ids(&pulled), ids(&source_log));
    assert!(!pulled.is_empty());

    mirror.shutdown(Duration::from_secs(2)).await;
    source.shutdown(Duration::from_secs(2)).await;
}
