//! A tiny HTTP server answering every request with a fixed JSON body and a
//! `Server-Timing` header, able to freeze for a set time: the known stall
//! against which the coordinated-omission correction is checked (wrk2's own
//! validation method), and a target for report tests.

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

pub const BODY: &str = r#"{"responseCode":1,"handle":"TEST/1","values":[{"index":1,"type":"URL","data":{"format":"string","value":"https://example.org/1"}}]}"#;

#[derive(Clone, Default)]
pub struct Stub {
    /// [from, until): requests seen in this window are held until `until`.
    stall: Arc<Mutex<Option<(Instant, Instant)>>>,
    served: Arc<std::sync::atomic::AtomicU64>,
}

impl Stub {
    /// Freeze the server from `from` for `length`.
    pub fn stall(&self, from: Instant, length: Duration) {
        *self.stall.lock().unwrap_or_else(|e| e.into_inner()) = Some((from, from + length));
    }

    pub fn served(&self) -> u64 {
        self.served.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Serve on `addr` (port 0 for any) until the runtime ends.
    pub async fn start(&self, addr: SocketAddr) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let stub = self.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let stub = stub.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |_req| {
                        let stub = stub.clone();
                        async move { Ok::<_, Infallible>(stub.answer().await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(local)
    }

    async fn answer(&self) -> Response<Full<Bytes>> {
        let started = Instant::now();
        let hold = *self.stall.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((from, until)) = hold {
            if started >= from && started < until {
                tokio::time::sleep_until(until.into()).await;
            }
        }
        self.served.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        Response::builder()
            .header("content-type", "application/json")
            .header("server-timing", format!("app;dur={ms:.3}"))
            .body(Full::new(Bytes::from_static(BODY.as_bytes())))
            .expect("static response")
    }
}
