//! Crash test (issue 3, item 5): creates at full speed over the native
//! protocol against a real `handled serve` process, `kill -9` at a random
//! moment, restart on the same data directory, and every create the server
//! acknowledged must be there, with its transaction-log entry (the log ids
//! gap-free across the crashes). Odd rounds serve through the key directory
//! (`store_key_directory = true`), so the switch is crossed both ways on one
//! data directory and each crash lands once with it on.
//! Short form (2 rounds) in `cargo test`;
//! `HANDLED_CRASH_ROUNDS=20 cargo test -p handled --release --test crash -- --nocapture`
//! for the long form.

use handled_client::{AdminSession, ConnectParams, Connection, Credentials, KeyChoice, Protocol, ResolveOptions};
use handled_proto::header::ResponseCode;
use handled_proto::value::HandleValue;
use handled_store::StoreAdmin;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod spawn;

const WRITERS: usize = 8;

/// `handled serve` keeping its store in `dir` (through the key directory when
/// `key_directory`), and its TCP address.
fn start(dir: &Path, key_directory: bool) -> (spawn::Server, SocketAddr) {
    let config = dir.join("handled.toml");
    std::fs::write(&config, format!("store_key_directory = {key_directory}\n")).unwrap();
    let server = spawn::serve(dir, &["--data-dir", dir.to_str().unwrap(), "--config", config.to_str().unwrap()]);
    let tcp = format!("127.0.0.1:{}", server.tcp_port).parse().expect("tcp address");
    (server, tcp)
}

/// One round: writers create until the kill (`kill_after` past the first
/// acknowledged create); returns the acknowledged handles.
async fn round(dir: &Path, round: usize, kill_after: Duration) -> Vec<Vec<u8>> {
    let (mut server, tcp) = start(dir, round % 2 == 1);
    let creds = Credentials::load(&dir.join("creds.json"), KeyChoice::Secret).expect("credentials");
    let acked = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let (creds, acked, addr) = (creds.clone(), acked.clone(), tcp);
        tasks.push(tokio::spawn(async move {
            let params = ConnectParams { timeout: Duration::from_secs(5), ..ConnectParams::new(Protocol::Tcp, addr) };
            let Ok(mut admin) = AdminSession::open(params, creds).await else { return };
            for i in 0.. {
                let h = format!("TEST/crash-{round}-{w}-{i}").into_bytes();
                match admin.create(&h, &[HandleValue::new(1, "URL", "https://example.org/crash")]).await {
                    Ok(_) => acked.lock().unwrap().push(h),
                    Err(_) => return, // the server is gone
                }
            }
        }));
    }
    // Kill mid-stream: once creates are being acknowledged, at a random moment.
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked.lock().unwrap().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(kill_after).await;
    server.child.kill().expect("SIGKILL"); // std's kill is SIGKILL on Unix
    server.child.wait().unwrap();
    for t in tasks {
        let _ = t.await;
    }
    let v = acked.lock().unwrap().clone();
    v
}

/// Every acknowledged create resolves, read back with the key directory as
/// `key_directory` says (the next round starts the other way).
async fn check(dir: &Path, acked: &[Vec<u8>], key_directory: bool) {
    check_log(dir, acked).await;
    let (mut server, tcp) = start(dir, key_directory);
    let mut conn = Connection::open(Protocol::Tcp, tcp, Duration::from_secs(5), true).await.unwrap();
    for h in acked {
        let r = conn.resolve(h, &ResolveOptions::default()).await.unwrap();
        assert_eq!(r.code(), ResponseCode::SUCCESS, "acknowledged create of {} lost", String::from_utf8_lossy(h));
    }
    server.child.kill().unwrap();
    server.child.wait().unwrap();
}

/// With the server down: the store's transaction log holds ids 1..=last with no
/// gap, and a Create entry for every acknowledged create (keys are stored
/// normalized, so compared without case).
async fn check_log(dir: &Path, acked: &[Vec<u8>]) {
    let store = handled_store::EmbeddedStore::open(dir, Default::default()).expect("open the store");
    let entries = handled_store::conformance::read_whole_log(&store).await;
    let ids: Vec<u64> = entries.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>(), "log ids are not 1..=n without gaps");
    let created: std::collections::HashSet<Vec<u8>> = entries
        .iter()
        .filter(|e| e.action == handled_store::TxnAction::Create)
        .map(|e| e.handle.to_ascii_uppercase())
        .collect();
    for h in acked {
        assert!(
            created.contains(&h.to_ascii_uppercase()),
            "acknowledged create of {} has no log entry",
            String::from_utf8_lossy(h)
        );
    }
    store.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_creates_survive_kill_9() {
    let rounds: usize = std::env::var("HANDLED_CRASH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    let dir = tempfile::tempdir().unwrap();
    let mut all: Vec<Vec<u8>> = Vec::new();
    let started = Instant::now();
    for r in 0..rounds {
        let kill_after = Duration::from_millis(rand::random::<u64>() % 1500);
        let acked = round(dir.path(), r, kill_after).await;
        assert!(!acked.is_empty(), "round {r}: nothing was acknowledged before the kill");
        all.extend(acked.iter().cloned());
        // Every create acknowledged in this and all earlier rounds is still there.
        check(dir.path(), &all, r % 2 == 1).await;
        eprintln!("crash round {r} (key directory {}): killed {kill_after:?} into the stream, {} acknowledged creates, {} checked in total: all present", if r % 2 == 1 { "on" } else { "off" }, acked.len(), all.len());
    }
    eprintln!("crash test: {rounds} rounds, {} acknowledged creates, none lost ({:.1?})", all.len(), started.elapsed());
}
