//! One HTTP-port connection: port unification (TLS or plain, from the first
//! byte), then HTTP/1.1 with keep-alive done right — `Keep-Alive: timeout=T,
//! max=N` advertised and honoured (the N-th request gets `Connection: close`;
//! a connection idle or dribbling its headers for T seconds is closed), every
//! response with `Server-Timing` and, when enabled, an access-log line
//! (tracing target `access`) with the same figure.

use super::accept::Acceptor;
use super::http::{Conn, HttpPort, WebHandler};
use crate::client_cert::ClientCertificate;
use crate::lifecycle::Stop;
use crate::tls::{sniff, TLS_HANDSHAKE};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue, CONNECTION};
use hyper::{Request, Version};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// HTTP connections accepted since start (the keep-alive test and metrics read it).
static ACCEPTED: AtomicU64 = AtomicU64::new(0);

pub fn accepted_connections() -> u64 {
    ACCEPTED.load(Ordering::Relaxed)
}

/// Accept connections on the HTTP port until dropped; connections run under `stop`.
pub async fn serve_port<H: WebHandler>(port: HttpPort<H>, mut listener: Acceptor, stop: Stop) {
    let shared = Arc::new(port);
    loop {
        let (stream, peer, slot) = listener.next().await;
        let _ = stream.set_nodelay(true);
        let (shared, draining) = (shared.clone(), stop.clone());
        stop.spawn(async move {
            let _open = (slot, shared.handler.opened());
            serve(shared, stream, peer, &draining).await;
        });
    }
}

/// Serve one accepted connection until it closes.
pub async fn serve<H: WebHandler>(shared: Arc<HttpPort<H>>, stream: TcpStream, peer: SocketAddr, stop: &Stop) {
    ACCEPTED.fetch_add(1, Ordering::Relaxed);
    let Some(first) = sniff(&stream, shared.keep_alive).await else { return };
    if first == TLS_HANDSHAKE {
        let Some(acceptor) = shared.tls.clone() else {
            tracing::debug!("TLS from {peer} but HTTPS is not configured");
            return;
        };
        match tokio::time::timeout(shared.keep_alive, acceptor.accept(stream)).await {
            Ok(Ok(tls)) => {
                // Parsed once per connection; checked against the handle per request.
                let certificate = tls.get_ref().1.peer_certificates().and_then(|c| c.first());
                let client_cert = certificate.and_then(|c| ClientCertificate::parse(c)).map(Arc::new);
                http1(shared, tls, Conn { secure: true, peer, client_cert }, stop).await
            }
            Ok(Err(e)) => tracing::debug!("TLS handshake with {peer}: {e}"),
            Err(_) => tracing::debug!("TLS handshake with {peer} timed out"),
        }
    } else {
        http1(shared, stream, Conn { secure: false, peer, client_cert: None }, stop).await;
    }
}

/// Does the client want this connection kept open after the response?
fn wants_keep_alive<B>(req: &Request<B>) -> bool {
    let conn = req.headers().get(CONNECTION).and_then(|v| v.to_str().ok()).unwrap_or("");
    let has = |t: &str| conn.split(',').any(|x| x.trim().eq_ignore_ascii_case(t));
    match req.version() {
        Version::HTTP_10 => has("keep-alive"),
        _ => !has("close"),
    }
}

const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");

/// `timeout=T, max=N`, written without format! (it is on every response).
fn keep_alive_value(timeout_secs: u64, left: u64) -> Option<HeaderValue> {
    let (mut timeout, mut max) = (itoa::Buffer::new(), itoa::Buffer::new());
    let value = [&b"timeout="[..], timeout.format(timeout_secs).as_bytes(), b", max=", max.format(left).as_bytes()];
    HeaderValue::from_bytes(&value.concat()).ok()
}

async fn http1<H, I>(shared: Arc<HttpPort<H>>, io: I, conn: Conn, stop: &Stop)
where
    H: WebHandler,
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let served = Arc::new(AtomicU64::new(0));
    let max = shared.max_requests.max(1);
    let keep_alive = shared.keep_alive;
    let timeout_secs = keep_alive.as_secs();
    let peer = conn.peer;
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let (shared, conn) = (shared.clone(), conn.clone());
        let n = served.fetch_add(1, Ordering::Relaxed) + 1;
        async move {
            let secure = conn.secure;
            let started = Instant::now();
            let keep = wants_keep_alive(&req);
            let log = shared.handler.wants_access_line();
            let line = log.then(|| (req.method().clone(), req.uri().clone(), req.version()));
            let mut response = shared.handler.respond(conn, req).await;
            let headers = response.headers_mut();
            if keep {
                if n >= max {
                    headers.insert(CONNECTION, HeaderValue::from_static("close"));
                } else if let Some(v) = keep_alive_value(timeout_secs, max - n) {
                    headers.insert(KEEP_ALIVE, v);
                }
            }
            let millis = super::timing::server_timing(headers, started);
            if let Some((method, uri, version)) = line {
                let status = response.status().as_u16();
                tracing::info!(target: "access", peer = %peer, tls = secure, %method, %uri, ?version, status, dur_ms = format_args!("{millis:.3}"));
            }
            Ok::<_, Infallible>(response)
        }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        // hyper starts this timer whenever it waits for a request head, so it
        // is both the keep-alive idle limit and the slowloris limit.
        .header_read_timeout(keep_alive)
        .max_buf_size(super::MAX_HTTP_BUFFER)
        .serve_connection(TokioIo::new(io), service);
    if let Err(e) = super::until_stopped(connection, stop).await {
        tracing::debug!("http connection from {peer}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_alive_wishes() {
        let req = |v: Version, c: Option<&str>| {
            let mut b = Request::builder().version(v);
            if let Some(c) = c {
                b = b.header(CONNECTION, c);
            }
            b.body(()).unwrap()
        };
        assert!(wants_keep_alive(&req(Version::HTTP_11, None)));
        assert!(!wants_keep_alive(&req(Version::HTTP_11, Some("Close"))));
        assert!(!wants_keep_alive(&req(Version::HTTP_10, None)));
        assert!(wants_keep_alive(&req(Version::HTTP_10, Some("keep-alive"))));
    }

    #[test]
    fn keep_alive_header() {
        assert_eq!(keep_alive_value(5, 99_999).unwrap(), "timeout=5, max=99999");
    }
}
