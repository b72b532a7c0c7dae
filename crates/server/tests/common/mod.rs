#![allow(dead_code)] // each test binary uses part of the harness

//! A server started in-process on ephemeral ports with a few known handles.

use handled_proto::value::{HandleValue, ValuePermissions};
use handled_server::bootstrap::{bootstrap, open_store};
use handled_server::config::Config;
use handled_server::{BoundAddrs, Listeners};
use handled_store::HandleRecord;

pub struct TestServer {
    pub addrs: BoundAddrs,
    pub public_key: Vec<u8>,
}

/// Values of `TEST/BIG`: one URL long enough to need several UDP datagrams.
pub fn big_url() -> String {
    format!("https://example.org/{}", "x".repeat(3000))
}

pub async fn start() -> TestServer {
    let mut config = Config { ephemeral: true, port: 0, http_port: 0, udp_sockets: 2, ..Config::default() };
    let listeners = Listeners::bind(&config).expect("bind");
    listeners.apply_ports(&mut config);
    let store = open_store(&config).await.expect("store");
    let mut secret = HandleValue::new(300, "HS_SECKEY", "secret");
    secret.permissions = ValuePermissions(0x0c);
    let records = vec![
        (
            b"TEST/1".to_vec(),
            vec![
                HandleValue::new(1, "URL", "https://example.org/1"),
                HandleValue::new(2, "EMAIL", "a@example.org"),
                HandleValue::new(3, "URL.alt", "https://alt.example.org"),
            ],
        ),
        (b"TEST/BIG".to_vec(), vec![HandleValue::new(1, "URL", big_url())]),
        (b"TEST/SECRET".to_vec(), vec![HandleValue::new(1, "URL", "https://example.org/s"), secret]),
    ];
    store
        .put_many(records.into_iter().map(|(k, values)| (k, HandleRecord::new(values))).collect())
        .await
        .expect("seed");
    let booted = bootstrap(config, store).await.expect("bootstrap");
    for p in &booted.new_credentials {
        let _ = std::fs::remove_file(p);
    }
    let public_key = booted.state.key.hs_pubkey();
    let running = listeners.serve(booted.state).expect("serve");
    let addrs = running.addrs;
    tokio::spawn(running.wait());
    TestServer { addrs, public_key }
}
