//! One battery of replication behaviours, run against every store that keeps
//! a transaction log, as the store conformance suite is run against every
//! store: a `handled` source on the store, and a `handled` mirror on a store
//! of the same family (memory → memory, embedded → embedded, PostgreSQL →
//! MariaDB and MariaDB → PostgreSQL, Cassandra → Cassandra), both started
//! in-process as `handled serve` starts them. A store whose database is
//! missing says "skipped" (`handled_testkit::skipped`).
//!
//! The battery: the dump carries what the source held before the mirror
//! came; each kind of change (create, add, modify, remove values, delete,
//! home and unhome a prefix) is pulled and applied; the mirror refuses
//! administration (301, "not a primary"); and the mirror's log continues the
//! source's ids, entry for entry, as a promoted mirror needs.

use std::path::Path;
use std::time::{Duration, Instant};

use handled_client::ResolveOptions;
use handled_client::{resolved_values, AdminSession, ConnectParams, Connection, Credentials, KeyChoice, Protocol};
use handled_proto::header::ResponseCode;
use handled_proto::value::{HandleValue, ValuePermissions};
use handled_server::config::{Config, StoreKind};
use handled_testkit::TestServer;

const SECRET: &str = "mirror secret";
const TIMEOUT: Duration = Duration::from_secs(5);

/// How a server keeps its store: a change to the test configuration.
type StoreSetup = Box<dyn Fn(&mut Config) + Send + Sync>;

fn sql(url: String, dir: &Path) -> StoreSetup {
    let dir = dir.to_owned();
    Box::new(move |c: &mut Config| {
        c.ephemeral = false;
        c.data_dir = dir.clone();
        c.storage.store = StoreKind::Sql;
        c.storage.sql.url = url.clone();
        c.storage.sql.create_schema = true;
        c.storage.sql.replication_log = true;
    })
}

fn embedded(dir: &Path) -> StoreSetup {
    let dir = dir.to_owned();
    Box::new(move |c: &mut Config| {
        c.ephemeral = false;
        c.data_dir = dir.clone();
        c.storage.store = StoreKind::Embedded;
    })
}

/// A fresh keyspace on the node `HANDLED_TEST_CASSANDRA` names, or None (skipped).
fn cassandra(name: &str, dir: &Path) -> Option<StoreSetup> {
    let Some(contact) = std::env::var("HANDLED_TEST_CASSANDRA").ok().filter(|v| !v.is_empty()) else {
        handled_testkit::skipped(
            "HANDLED_TEST_CASSANDRA is not set (tests/cassandra/run.sh starts a node and sets it)",
        );
        return None;
    };
    let keyspace = format!("battery_{name}_{}", std::process::id());
    let dir = dir.to_owned();
    Some(Box::new(move |c: &mut Config| {
        c.ephemeral = false;
        c.data_dir = dir.clone();
        c.storage.store = StoreKind::Cassandra;
        c.storage.record_cache_mb = 0;
        c.storage.cassandra.contact_points = vec![contact.clone()];
        c.storage.cassandra.keyspace = keyspace.clone();
        c.storage.cassandra.replication = "1".into();
        c.storage.cassandra.replication_log = true;
    }))
}

/// The values' data of `handle` on the server at `addr` (empty: not found),
/// or the answer's code when it is neither.
async fn resolve(addr: std::net::SocketAddr, handle: &[u8]) -> Result<Vec<Vec<u8>>, ResponseCode> {
    let mut c = Connection::open(Protocol::Tcp, addr, TIMEOUT, false).await.unwrap();
    let r = c.resolve(handle, &ResolveOptions::default()).await.unwrap();
    if r.code() == ResponseCode::HANDLE_NOT_FOUND {
        return Ok(Vec::new());
    }
    Ok(resolved_values(&r).ok_or(r.code())?.iter().map(|v| v.data.clone()).collect())
}

/// Wait (up to a minute) until `handle` on the mirror is `want`.
async fn until_mirrored(mirror: &TestServer, handle: &[u8], want: &[&str]) {
    let want: Vec<Vec<u8>> = want.iter().map(|w| w.as_bytes().to_vec()).collect();
    let started = Instant::now();
    loop {
        let got = resolve(mirror.addrs.tcp, handle).await;
        if got.as_ref() == Ok(&want) {
            return;
        }
        let shown = String::from_utf8_lossy(handle);
        assert!(started.elapsed() < Duration::from_secs(60), "{shown} on the mirror is {got:?}, not {want:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Wait (up to a minute) until the mirror lists `prefix` as homed or not.
async fn until_homed(mirror: &mut AdminSession, prefix: &[u8], homed: bool) {
    let started = Instant::now();
    loop {
        let listed = mirror.list_homed_prefixes().await.unwrap();
        if listed.iter().any(|p| p.eq_ignore_ascii_case(prefix)) == homed {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "homed on the mirror: {listed:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn url(i: &str) -> HandleValue {
    HandleValue::new(1, "URL", format!("https://example.org/{i}"))
}

/// The battery, with the source's store set up by `source` and the mirror's by `mirror`.
async fn battery(source_store: StoreSetup, mirror_store: StoreSetup) {
    let mut source = handled_testkit::start(|c| {
        source_store(c);
        c.replication.admins = vec!["300:TEST/MIRROR".into()];
        c.access.server_admins = vec!["300:TEST/ADMIN".into()];
    })
    .await;
    let creds = Credentials::load(source.credentials.first().unwrap(), KeyChoice::Secret).unwrap();
    let mut admin =
        AdminSession::open(ConnectParams::new(Protocol::Tcp, source.addrs.tcp), creds.clone()).await.unwrap();
    let mut secret = HandleValue::new(300, "HS_SECKEY", SECRET);
    secret.permissions = ValuePermissions(0x0c);
    admin.create(b"TEST/MIRROR", &[secret]).await.unwrap();
    for i in 0..20 {
        admin.create(format!("TEST/before{i}").as_bytes(), &[url(&format!("before{i}"))]).await.unwrap();
    }

    let mut mirror = handled_testkit::start(|c| {
        mirror_store(c);
        c.replication.source = Some(format!("127.0.0.1:{}", source.addrs.tcp.port()));
        c.replication.authentication = Some("secretkey:300:TEST/MIRROR".into());
        c.replication.secret = Some(SECRET.into());
        c.replication.interval_ms = 200;
        c.replication.low_latency = true;
        // Listing every homed prefix is for server administrators.
        c.access.server_admins = vec!["300:TEST/ADMIN".into()];
    })
    .await;

    // The dump.
    for i in [0, 7, 19] {
        until_mirrored(&mirror, format!("TEST/BEFORE{i}").as_bytes(), &[&format!("https://example.org/before{i}")])
            .await;
    }
    // Each kind of change.
    admin.create(b"TEST/after", &[url("after")]).await.unwrap();
    until_mirrored(&mirror, b"TEST/AFTER", &["https://example.org/after"]).await;
    admin.add_values(b"TEST/after", &[HandleValue::new(2, "EMAIL", "a@example.org")], false).await.unwrap();
    until_mirrored(&mirror, b"TEST/AFTER", &["https://example.org/after", "a@example.org"]).await;
    admin.modify_values(b"TEST/after", &[url("moved")]).await.unwrap();
    until_mirrored(&mirror, b"TEST/AFTER", &["https://example.org/moved", "a@example.org"]).await;
    admin.remove_values(b"TEST/after", &[2]).await.unwrap();
    until_mirrored(&mirror, b"TEST/AFTER", &["https://example.org/moved"]).await;
    admin.delete(b"TEST/before3").await.unwrap();
    until_mirrored(&mirror, b"TEST/BEFORE3", &[]).await;
    let mirror_creds = Credentials::load(source.credentials.first().unwrap(), KeyChoice::Secret).unwrap();
    let mut on_mirror =
        AdminSession::open(ConnectParams::new(Protocol::Tcp, mirror.addrs.tcp), mirror_creds).await.unwrap();
    admin.home_prefix(b"0.NA/OTHER").await.unwrap();
    until_homed(&mut on_mirror, b"0.NA/OTHER", true).await;
    admin.unhome_prefix(b"0.NA/OTHER").await.unwrap();
    until_homed(&mut on_mirror, b"0.NA/OTHER", false).await;

    // Administration on the mirror: "not a primary".
    let refused = on_mirror.create(b"TEST/on-mirror", &[url("x")]).await.unwrap_err();
    assert_eq!(refused.code(), Some(ResponseCode::SERVER_NOT_RESP), "{refused}");
    assert_eq!(resolve(mirror.addrs.tcp, b"TEST/on-mirror").await, Ok(Vec::new()));

    // The mirror's log continues the source's ids, entry for entry.
    let (src, mir) =
        (source.state.txn_log().txn_log_bounds().await.unwrap(), mirror.state.txn_log().txn_log_bounds().await);
    let mir = mir.unwrap();
    assert_eq!(mir.last, src.last, "source {src:?}, mirror {mir:?}");
    let pulled = mirror.state.txn_log().txn_log_read(mir.floor, 1000).await.unwrap();
    let source_log = source.state.txn_log().txn_log_read(mir.floor, 1000).await.unwrap();
    let ids = |v: &[handled_store::TxnEntry]| v.iter().map(|e| (e.id, e.action, e.handle.clone())).collect::<Vec<_>>();
    assert_eq!(ids(&pulled), ids(&source_log));
    assert!(pulled.len() >= 7, "the changes after the dump: {pulled:?}");

    mirror.shutdown(Duration::from_secs(2)).await;
    source.shutdown(Duration::from_secs(2)).await;
}

fn memory() -> StoreSetup {
    Box::new(|_: &mut Config| {})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_to_memory() {
    battery(memory(), memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_to_embedded() {
    let (s, m) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    battery(embedded(s.path()), embedded(m.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_to_mariadb() {
    let Some(source) = handled_testkit::db::postgres::database("battery_pg_source").await else { return };
    let Some(mirror) = handled_testkit::db::mariadb::database("battery_maria_mirror").await else { return };
    let (s, m) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    battery(sql(source, s.path()), sql(mirror, m.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_to_postgres() {
    let Some(source) = handled_testkit::db::mariadb::database("battery_maria_source").await else { return };
    let Some(mirror) = handled_testkit::db::postgres::database("battery_pg_mirror").await else { return };
    let (s, m) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    battery(sql(source, s.path()), sql(mirror, m.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_to_cassandra() {
    let (s, m) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (Some(source), Some(mirror)) = (cassandra("source", s.path()), cassandra("mirror", m.path())) else { return };
    battery(source, mirror).await;
}
