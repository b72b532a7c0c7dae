//! An orderly shutdown under load: listeners, UDP threads and connection tasks
//! end before the store closes, so the store reopens clean (no repair) with
//! every acknowledged write, and clients in flight get answers or clean errors.

use handled_client::{AdminSession, ConnectParams, Connection, Credentials, KeyChoice, Protocol, ResolveOptions};
use handled_proto::value::HandleValue;
use handled_store::{EmbeddedOptions, EmbeddedStore, RecordStore, StoreAdmin, StoreError};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// Creates handles until the server stops answering; returns those acknowledged.
async fn writer(addr: SocketAddr, creds: Credentials, id: usize, acked: Arc<AtomicUsize>) -> Vec<Vec<u8>> {
    let params =
        ConnectParams { timeout: CLIENT_TIMEOUT, use_session: true, ..ConnectParams::new(Protocol::Tcp, addr) };
    let mut done = Vec::new();
    let Ok(mut admin) = AdminSession::open(params, creds).await else { return done };
    for n in 0.. {
        let handle = format!("TEST/w{id}-{n}").into_bytes();
        match admin.create(&handle, &[HandleValue::new(1, "URL", "https://example.org")]).await {
            Ok(_) => {
                done.push(handle);
                acked.fetch_add(1, Ordering::SeqCst);
            }
            Err(_) => break,
        }
    }
    done
}

/// Resolves until the server stops answering (a closed connection, or a UDP
/// timeout); returns how many were answered.
async fn reader(protocol: Protocol, addr: SocketAddr) -> usize {
    let mut answered = 0;
    let Ok(mut c) = Connection::open(protocol, addr, CLIENT_TIMEOUT, true).await else { return answered };
    while c.resolve(b"TEST/ADMIN", &ResolveOptions::default()).await.is_ok() {
        answered += 1;
    }
    answered
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_under_load_ends_every_task_before_the_store_closes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut s = handled_testkit::start(|c| {
        c.ephemeral = false;
        c.data_dir = data.clone();
        c.admin_credentials = Some(dir.path().join("admin.json"));
        c.registry.port = Some(0);
        c.transport.udp_sockets = 2;
    })
    .await;
    let creds = || Credentials::load(&s.credentials[0], KeyChoice::Secret).unwrap();
    let acked = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..4).map(|i| tokio::spawn(writer(s.addrs.tcp, creds(), i, acked.clone()))).collect();
    let readers: Vec<_> = [(Protocol::Tcp, s.addrs.tcp), (Protocol::Udp, s.addrs.udp), (Protocol::Http, s.addrs.http)]
        .into_iter()
        .map(|(p, a)| tokio::spawn(reader(p, a)))
        .collect();
    // Shut down while writes are coming in.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while acked.load(Ordering::SeqCst) < 20 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(acked.load(Ordering::SeqCst) >= 20, "writes were acknowledged before the shutdown");
    let state = s.state.clone();
    let addrs = s.addrs;
    assert!(s.shutdown(Duration::from_secs(10)).await, "requests in flight finished within the grace");

    // The store is closed, and nothing listens any more.
    assert!(matches!(state.records().get(b"TEST/ADMIN").await, Err(StoreError::Closed)));
    assert!(tokio::net::TcpStream::connect(addrs.tcp).await.is_err(), "native TCP closed");
    assert!(tokio::net::TcpStream::connect(addrs.http).await.is_err(), "HTTP closed");
    assert!(tokio::net::TcpStream::connect(addrs.registry.unwrap()).await.is_err(), "registry port closed");
    // Every client ends: answered, or a clean error (closed connection, or a UDP timeout).
    let mut written = Vec::new();
    for w in writers {
        written.extend(tokio::time::timeout(CLIENT_TIMEOUT * 3, w).await.expect("writer ended").unwrap());
    }
    for r in readers {
        tokio::time::timeout(CLIENT_TIMEOUT * 3, r).await.expect("reader ended").unwrap();
    }
    // Nothing holds the server's state but this test: every thread and task is gone.
    drop(s);
    assert_eq!(Arc::strong_count(&state), 1, "a task or thread outlived the shutdown");
    drop(state);

    // Reopened clean, with every write the clients saw acknowledged.
    let store = EmbeddedStore::open(&data.join("handles.redb"), EmbeddedOptions::default()).expect("reopen");
    assert!(!store.was_repaired(), "the store file was closed cleanly");
    assert!(written.len() >= 20);
    for h in &written {
        // The store keys handles as the server normalizes them (suffixes case-insensitive by default).
        let key = handled_proto::handle::normalize(h, false);
        assert!(store.get(&key).await.unwrap().is_some(), "{} acknowledged but lost", String::from_utf8_lossy(h));
    }
    store.close();
}

/// A server dropped without a shutdown serves on until its runtime ends (as
/// a test's does), and then lets its UDP port go with its TCP port: else a
/// server given that TCP port by the kernel would find the UDP half held (a
/// CI run's stray 301 came from such a leftover answering for another server).
#[test]
fn a_dropped_server_releases_its_udp_port_when_its_runtime_ends() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let udp = runtime.block_on(async {
        let server = handled_testkit::start(|_| {}).await;
        let udp = server.addrs.udp;
        drop(server);
        let mut c = Connection::open(Protocol::Udp, udp, CLIENT_TIMEOUT, false).await.unwrap();
        assert!(c.resolve(b"TEST/ADMIN", &ResolveOptions::default()).await.is_ok(), "serving on");
        udp
    });
    drop(runtime);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::UdpSocket::bind(udp).is_err() {
        assert!(std::time::Instant::now() < deadline, "UDP {udp} still held 30 s after the runtime ended");
        std::thread::sleep(Duration::from_millis(20));
    }
}
