//! The HTTP port: a thin router. Connections are set up in [`super::unify`]
//! (TLS or plain from the first byte, keep-alive, Server-Timing, access log);
//! here requests go to the native tunnel (§4.3: POST `application/x-hdl-message`,
//! any path), the operations endpoints, or the JSON API and reverse lookup
//! ([`crate::rest`], `/api/...`, `/hrls/...`), and every other path to the
//! web handle proxy ([`crate::proxy`]) unless `enable_proxy` is off.

use super::serve_unit;
use crate::http_body::{BodyBudget, BodyError, BodyReader};
use crate::native::Transport;
use crate::rest::{Conn, Rest};
use crate::state::ServerState;
use bytes::Bytes;
use handled_proto::envelope::{ENVELOPE_LEN, MAX_MESSAGE_LEN};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, LOCATION};
use hyper::{Method, Request, Response, StatusCode};
use std::sync::Arc;
use std::time::{Duration, Instant};
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
    /// Request bodies must arrive within the keep-alive time, like heads.
    pub bodies: BodyReader,
}

impl HttpShared {
    pub fn new(state: Arc<ServerState>, budget: Arc<BodyBudget>) -> HttpShared {
        let keep_alive = Duration::from_secs(state.config.transport.http_keep_alive_secs.max(1));
        let tls = state.tls.as_ref().map(|slot| slot.acceptor());
        let bodies = BodyReader::new(keep_alive, budget);
        HttpShared {
            rest: Rest::new(state.clone(), bodies.clone()),
            bodies,
            max_requests: state.config.transport.http_max_requests,
            state,
            tls,
            keep_alive,
        }
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
            "/readyz" => return Box::pin(readiness(state)).await,
            "/metrics" => {
                return text(StatusCode::OK, "text/plain; version=0.0.4", Box::pin(metrics_text(state)).await)
            }
            _ => {}
        }
    }
    if req.method() == Method::POST && is_hdl(&req) {
        // Admission happens per native message, like on the other transports.
        return Box::pin(tunnel(state, req, &shared.bodies, conn.peer)).await;
    }
    let started = Instant::now();
    let path = req.uri().path();
    let under = |base: &str| path == base || path.strip_prefix(base).is_some_and(|r| r.starts_with('/'));
    let api = under("/api") || under("/hrls");
    let service = if !api && state.config.transport.enable_proxy { "proxy" } else { "api" };
    let _permit = match state.admission.admit().await {
        Ok(p) => p,
        Err(why) => {
            let mut r = json_error(StatusCode::SERVICE_UNAVAILABLE, 3, &format!("Server too busy ({})", why.as_str()));
            r.headers_mut().insert("retry-after", HeaderValue::from(state.admission.retry_after_secs()));
            state.metrics.observe_http(service, 503, started.elapsed());
            return r;
        }
    };
    // Every service's future is boxed: held inline, the largest of them sets
    // the size of each request's future, which hyper moves (memcpy) twice per
    // request: 24% of a JSON GET's user-space instructions (callgrind).
    let response = if api {
        Box::pin(shared.rest.handle(conn, req)).await
    } else if crate::console::is_console_path(path) {
        crate::console::serve(&req, conn.secure, state.live().allow_plain_http_admin)
    } else if state.config.transport.enable_proxy {
        Box::pin(crate::proxy::serve(state, conn, req, shared.keep_alive)).await
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

async fn metrics_text(state: &ServerState) -> String {
    let cache = state.cache.as_ref().map(|c| c.cache_stats());
    let handles = state.store.count().await.ok();
    if let Ok(bounds) = state.store.txn_log_bounds().await {
        state.metrics.replication.txn_log_last_id.set(bounds.last as i64);
    }
    state.metrics.render(&state.admission.stats(), cache.as_ref(), &state.store.stats(), handles)
}

/// Ready when the listeners are serving and the store answers.
async fn readiness(state: &ServerState) -> Response<Full<Bytes>> {
    // A store that cannot take writes (disk full) is not ready: the balancer
    // sends writes elsewhere until it is.
    let store = state.store.count().await.and_then(|_| state.store.writable());
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

/// A tunnelled message; its body is read like the JSON API's, with a time
/// limit (a stalled sender used to hold the socket and its partial message
/// forever, F2) and from the shared body budget.
async fn tunnel(
    state: &ServerState,
    req: Request<Incoming>,
    bodies: &BodyReader,
    peer: std::net::SocketAddr,
) -> Response<Full<Bytes>> {
    let body = match bodies.read(req.into_body(), MAX_TUNNEL_BODY, peer.ip()).await {
        Ok(b) => b,
        Err(BodyError::Unreadable(e)) => {
            return json_error(StatusCode::PAYLOAD_TOO_LARGE, 4, &format!("Cannot read message: {e}"))
        }
        Err(e @ BodyError::Busy) => return json_error(e.status(), 3, &e.message()),
        Err(e @ BodyError::TimedOut) => return json_error(e.status(), 4, &e.message()),
    };
    // The Java server tolerates one CR or LF before the envelope.
    let unit = match body.first() {
        Some(b'\r' | b'\n') => &body[1..],
        _ => &body[..],
    };
    let responses = serve_unit(state, unit, Transport::Http, peer).await.units;
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
