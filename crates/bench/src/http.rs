//! The bench's HTTP/1.1 engine, for the Handle HTTP tunnel, the JSON API and any
//! URL: plain or TLS, keep-alive or `Connection: close`, with every socket
//! counted from connect to close and the `Server-Timing` header read.

use crate::recorder::Recorder;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

#[derive(Clone)]
pub struct Tls {
    pub config: Arc<ClientConfig>,
    pub server_name: ServerName<'static>,
}

/// Where and how to send HTTP requests.
#[derive(Clone)]
pub struct HttpTarget {
    /// Tried in order; a connection failure moves a client to the next.
    pub addrs: Vec<SocketAddr>,
    /// The Host header.
    pub authority: String,
    pub tls: Option<Tls>,
    /// false: `Connection: close` and one connection per request.
    pub keep_alive: bool,
}

pub struct HttpReply {
    pub status: u16,
    pub server_time: Option<Duration>,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

/// One client's connection (reopened as needed).
#[derive(Default)]
pub struct HttpConn {
    sender: Option<SendRequest<Full<Bytes>>>,
    pub addr_index: usize,
}

#[derive(Debug)]
pub struct HttpError {
    pub kind: String,
    /// The connection could not be made or broke: worth trying the next address.
    pub connection: bool,
}

fn io_kind(e: &std::io::Error) -> String {
    format!("io {:?}", e.kind())
}

async fn start<S>(io: S, recorder: Arc<Recorder>) -> Result<SendRequest<Full<Bytes>>, HttpError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(io)).await {
        Ok(x) => x,
        Err(e) => {
            recorder.sockets.close();
            return Err(HttpError { kind: format!("http handshake: {e}"), connection: true });
        }
    };
    // The socket is in use until hyper's connection task ends (server close,
    // error, or our sender dropped).
    tokio::spawn(async move {
        let _ = conn.await;
        recorder.sockets.close();
    });
    Ok(sender)
}

async fn connect(
    target: &HttpTarget,
    addr: SocketAddr,
    recorder: &Arc<Recorder>,
) -> Result<SendRequest<Full<Bytes>>, HttpError> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| HttpError { kind: format!("connect {}", io_kind(&e)), connection: true })?;
    recorder.sockets.open();
    let _ = stream.set_nodelay(true);
    match &target.tls {
        None => start(stream, recorder.clone()).await,
        Some(tls) => {
            let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
            match connector.connect(tls.server_name.clone(), stream).await {
                Ok(s) => start(s, recorder.clone()).await,
                Err(e) => {
                    recorder.sockets.close();
                    Err(HttpError { kind: format!("tls {}", e), connection: true })
                }
            }
        }
    }
}

/// The server's own time: the `dur` of the `app` metric, else the first `dur`.
pub fn parse_server_timing(value: &str) -> Option<Duration> {
    let mut first = None;
    for metric in value.split(',') {
        let mut parts = metric.split(';').map(str::trim);
        let name = parts.next().unwrap_or("");
        let dur = parts.find_map(|p| p.strip_prefix("dur=")).and_then(|v| v.trim_matches('"').parse::<f64>().ok());
        if let Some(ms) = dur.filter(|ms| ms.is_finite() && *ms >= 0.0) {
            let d = Duration::from_secs_f64(ms / 1000.0);
            if name == "app" {
                return Some(d);
            }
            first = first.or(Some(d));
        }
    }
    first
}

impl HttpConn {
    /// Drop the connection (the socket closes when hyper's task sees it).
    pub fn reset(&mut self) {
        self.sender = None;
    }

    pub async fn send(
        &mut self,
        target: &HttpTarget,
        recorder: &Arc<Recorder>,
        request: hyper::http::request::Builder,
        body: Bytes,
    ) -> Result<HttpReply, HttpError> {
        let reusable = match &mut self.sender {
            Some(s) => s.ready().await.is_ok(),
            None => false,
        };
        if !reusable {
            let addr = target.addrs[self.addr_index % target.addrs.len()];
            self.sender = Some(connect(target, addr, recorder).await?);
        }
        let sender = self.sender.as_mut().expect("connected above");
        let mut request = request.header(hyper::header::HOST, target.authority.as_str());
        if !target.keep_alive {
            request = request.header(hyper::header::CONNECTION, "close");
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| HttpError { kind: format!("request: {e}"), connection: false })?;
        let result = async {
            let response =
                sender.send_request(request).await.map_err(|e| HttpError { kind: http_kind(&e), connection: true })?;
            let status = response.status().as_u16();
            let server_time =
                response.headers().get("server-timing").and_then(|v| v.to_str().ok()).and_then(parse_server_timing);
            let (parts, body) = response.into_parts();
            let headers = parts.headers;
            let body =
                body.collect().await.map_err(|e| HttpError { kind: http_kind(&e), connection: true })?.to_bytes();
            Ok(HttpReply { status, server_time, headers, body })
        }
        .await;
        if !target.keep_alive || result.is_err() {
            self.sender = None;
        }
        result
    }
}

fn http_kind(e: &hyper::Error) -> String {
    if e.is_incomplete_message() {
        "http connection closed".into()
    } else if e.is_parse() {
        "http malformed".into()
    } else {
        "http io".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_timing_prefers_app() {
        assert_eq!(parse_server_timing("app;dur=1.5"), Some(Duration::from_micros(1500)));
        assert_eq!(parse_server_timing("db;dur=2, app;desc=\"x\";dur=0.25"), Some(Duration::from_micros(250)));
        assert_eq!(parse_server_timing("db;dur=2"), Some(Duration::from_millis(2)));
        assert_eq!(parse_server_timing("cache;desc=hit"), None);
        assert_eq!(parse_server_timing("app;dur=-1"), None);
    }
}
