//! `/readyz` while the store warms its files after a start: not ready (503, and
//! how far it got), then ready once the store says it is done.

use std::sync::Arc;
use std::time::{Duration, Instant};

use handled_server::bootstrap::open_store;
use handled_server::Server;
use handled_store::{Capabilities, Store, StoreAdmin, StoreError, StoreStats, Warming};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An in-memory store that says it is warming for as long as the test wants.
struct Warmable {
    inner: Arc<dyn Store>,
    warming: Mutex<Option<Warming>>,
}

handled_store::forward_store!(RecordStore for Warmable => inner);
handled_store::forward_store!(DocumentStore for Warmable => inner);
handled_store::forward_store!(TxnLogStore for Warmable => inner);

#[async_trait::async_trait]
impl StoreAdmin for Warmable {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn stats(&self) -> StoreStats {
        self.inner.stats()
    }
    fn writable(&self) -> Result<(), StoreError> {
        self.inner.writable()
    }
    fn warming(&self) -> Option<Warming> {
        *self.warming.lock()
    }
    async fn checkpoint(&self) -> Result<(), StoreError> {
        self.inner.checkpoint().await
    }
    fn close(&self) {
        self.inner.close()
    }
}

async fn readyz(addr: std::net::SocketAddr) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut raw)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0), body.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_the_store_to_warm() {
    let bound = Server::bind(handled_testkit::config()).unwrap();
    let inner = open_store(&bound.config).await.unwrap();
    let warming = Some(Warming { read_bytes: 3 << 20, total_bytes: 8 << 20 });
    let store = Arc::new(Warmable { inner, warming: Mutex::new(warming) });
    let booted = bound.bootstrap(store.clone()).await.unwrap();
    let credentials = booted.new_credentials.clone();
    let server = booted.serve().unwrap();
    let start = Instant::now();
    while !server.state.is_ready() {
        assert!(start.elapsed() < Duration::from_secs(10), "listeners never ready");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let (status, body) = readyz(server.addrs.http).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("\"ready\":false") && body.contains("warming: 3 of 8 MiB read"), "{body}");

    *store.warming.lock() = None;
    let (status, body) = readyz(server.addrs.http).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"ready\":true") && body.contains("\"store\":\"open\""), "{body}");

    server.shutdown(Duration::from_secs(1)).await;
    for p in credentials {
        let _ = std::fs::remove_file(p);
    }
}
