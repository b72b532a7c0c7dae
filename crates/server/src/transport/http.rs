//! The HTTP port: a thin router. Connections are set up in [`super::unify`]
//! (TLS or plain from the first byte, keep-alive, Server-Timing, access log);
//! here requests go to the native tunnel (§4.3: POST `application/x-hdl-message`,
//! any path), the operations endpoints, or the JSON API and reverse lookup
//! ([`crate::rest`], `/api/...`, `/hrls/...`), and every other path to the
//! web handle proxy ([`crate::proxy`]) unless `enable_proxy` is off.

use super::serve_unit;
use crate::native::Transport;
use crate::rest::{Conn, Rest};
use crate::state::ServerState;
use bytes::Bytes;
use handled_proto::envelope::{ENVELOPE_LEN, MAX_MESSAGE_LEN};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, LOCATION};
use hyper::{Method, Request, Response, StatusCode};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

pub const HDL_MESSAGE: &str = "application/x-hdl-message";
/// Envelope + largest message + one tolerated leading CR/LF.
const MAX_TUNNEL_BODY: usize = ENVELOPE_LEN + MAX_MESSAGE_LEN + 1;

/// What every connection on the HTTP port shares.
pub struct HttpShared {
    pub state: Arc<ServerState>,
    pub rest: Rest,
    /// None when the TLS setup failed (logged at start): plain HTTP only.
    pub tls: Option<TlsAcceptor>,
    /// Idle / header-read limit, advertised as `Keep-Alive: timeout=`.
    pub keep_alive: Duration,
    /// Requests per connection, advertised as `Keep-Alive: max=`.
    pub max_requests: u64,
}

impl HttpShared {
    pub fn new(state: Arc<ServerState>) -> HttpShared {
        let keep_alive = Duration::from_secs(state.config.http_keep_alive_secs.max(1));
        let tls = match super::tls::acceptor(&state.config, &state.key) {
            Ok(a) => Some(a),
            Err(e) => {
                tracing::error!("HTTPS disabled on the HTTP port: {e}");
                None
            }
        };
        HttpShared {
            rest: Rest::new(state.clone(), keep_alive),
            max_requests: state.config.http_max_requests,
            state,
            tls,
            keep_alive,
        }
    }
}

pub async fn serve(state: Arc<ServerState>, listener: TcpListener) {
    let shared = Arc::new(HttpShared::new(state.clone()));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("http accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        tokio::spawn(async move {
            let _open = shared.state.metrics.connection("http");
            super::unify::serve(shared, stream, peer).await;
        });
    }
}

fn is_hdl(req: &Request<Incoming>) -> bool {
    req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains(HDL_MESSAGE))
}

pub(super) async fn route(shared: &HttpShared, conn: Conn, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let state = &*shared.state;
    // Operations endpoints answer even when the server is saturated.
    if req.method() == Method::GET {
        match req.uri().path() {
            "/healthz" => return text(StatusCode::OK, "text/plain", "ok\n".into()),
            "/readyz" => return readiness(state).await,
            "/metrics" => return text(StatusCode::OK, "text/plain; version=0.0.4", metrics_text(state)),
            _ => {}
        }
    }
    if req.method() == Method::POST && is_hdl(&req) {
        // Admission happens per native message, like on the other transports.
        return tunnel(state, req).await;
    }
    let started = Instant::now();
    let path = req.uri().path();
    let under = |base: &str| path == base || path.strip_prefix(base).is_some_and(|r| r.starts_with('/'));
    let api = under("/api") || under("/hrls");
    let service = if !api && state.config.enable_proxy { "proxy" } else { "api" };
    let _permit = match state.admission.admit().await {
        Ok(p) => p,
        Err(why) => {
            let mut r = json_error(StatusCode::SERVICE_UNAVAILABLE, 3, &format!("Server too busy ({})", why.as_str()));
            r.headers_mut().insert("retry-after", HeaderValue::from(state.admission.retry_after_secs()));
            state.metrics.observe_http(service, 503, started.elapsed());
            return r;
        }
    };
    let response = if api {
        shared.rest.handle(conn, req).await
    } else if state.config.enable_proxy {
        crate::proxy::serve(state, conn, req, shared.keep_alive).await
    } else if req.method() == Method::GET && path.len() > 1 && path[1..].contains('/') {
        // Like Handle.Net without its HTML proxy: /PREFIX/SUFFIX → the JSON API.
        redirect(&format!("/api/handles{path}"))
    } else {
        let message = format!("Unknown HTTP API endpoint {} {}", req.method(), req.uri().path());
        json_error(StatusCode::NOT_FOUND, 4, &message)
    };
    state.metrics.observe_http(service, response.status().as_u16(), started.elapsed());
    response
}

fn redirect(location: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::FOUND;
    if let Ok(v) = HeaderValue::from_str(location) {
        response.headers_mut().insert(LOCATION, v);
    }
    response
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn metrics_text(state: &ServerState) -> String {
    let cache = state.cache.as_ref().map(|c| c.cache_stats());
    state.metrics.render(&state.admission.stats(), cache.as_ref(), &state.store.stats())
}

/// Ready when the listeners are serving and the store answers.
async fn readiness(state: &ServerState) -> Response<Full<Bytes>> {
    let store = state.store.count().await;
    let listening = state.is_ready();
    let ok = store.is_ok() && listening;
    let body = serde_json::json!({
        "ready": ok,
        "listeners": listening,
        "store": match &store { Ok(_) => "open".to_string(), Err(e) => e.to_string() },
    });
    let status = if ok { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    text(status, "application/json", body.to_string())
}

async fn tunnel(state: &ServerState, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let body = match Limited::new(req.into_body(), MAX_TUNNEL_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return json_error(StatusCode::PAYLOAD_TOO_LARGE, 4, &format!("Cannot read message: {e}")),
    };
    // The Java server tolerates one CR or LF before the envelope.
    let unit = match body.first() {
        Some(b'\r' | b'\n') => &body[1..],
        _ => &body[..],
    };
    let responses = serve_unit(state, unit, Transport::Http).await;
    if responses.is_empty() {
        return json_error(StatusCode::BAD_REQUEST, 4, "Message shorter than an envelope");
    }
    let mut response = Response::new(Full::new(Bytes::from(responses.concat())));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(HDL_MESSAGE));
    response
}

/// The JSON error shape of the Handle.Net HTTP API (§4.5).
pub fn json_error(status: StatusCode, response_code: u32, message: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({ "responseCode": response_code, "message": message });
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
