#![allow(dead_code)] // each test binary uses part of the harness

//! A server started in-process on ephemeral ports with a few known handles.

use handled_proto::value::{HandleValue, ValuePermissions};
use handled_server::BoundAddrs;
use handled_store::{HandleRecord, Store};
use std::sync::Arc;

pub struct TestServer {
    pub addrs: BoundAddrs,
    pub public_key: Vec<u8>,
}

/// Values of `TEST/BIG`: one URL long enough to need several UDP datagrams.
pub fn big_url() -> String {
    format!("https://example.org/{}", "x".repeat(3000))
}

pub async fn start() -> TestServer {
    let s = handled_testkit::start_seeded(|c| c.transport.udp_sockets = 2, seed).await;
    TestServer { addrs: s.addrs, public_key: s.state.key.hs_pubkey() }
}

async fn seed(store: Arc<dyn Store>) {
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
}
