//! The HTTP port (§4.3): the native protocol tunnelled in POST bodies
//! (`application/x-hdl-message`), HTTP/1.0 and HTTP/1.1 keep-alive alike. Every
//! response carries `Server-Timing` with the server's own time for the request.

use super::serve_unit;
use crate::native::Transport;
use crate::state::ServerState;
use bytes::Bytes;
use handled_proto::envelope::{ENVELOPE_LEN, MAX_MESSAGE_LEN};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

pub const HDL_MESSAGE: &str = "application/x-hdl-message";
/// An idle keep-alive connection, or one that dribbles its headers, is closed after this.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Envelope + largest message + one tolerated leading CR/LF.
const MAX_TUNNEL_BODY: usize = ENVELOPE_LEN + MAX_MESSAGE_LEN + 1;

pub async fn serve(state: Arc<ServerState>, listener: TcpListener) {
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
        let state = state.clone();
        tokio::spawn(async move {
            let _open = state.metrics.connection("http");
            let service = hyper::service::service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(timed(&state, req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!("http connection from {peer}: {e}");
            }
        });
    }
}

async fn timed(state: &ServerState, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let started = Instant::now();
    let mut response = route(state, req).await;
    let millis = started.elapsed().as_secs_f64() * 1000.0;
    if let Ok(v) = HeaderValue::from_str(&format!("app;dur={millis:.3}")) {
        response.headers_mut().insert("server-timing", v);
    }
    response
}

fn is_hdl(req: &Request<Incoming>) -> bool {
    req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains(HDL_MESSAGE))
}

async fn route(state: &ServerState, req: Request<Incoming>) -> Response<Full<Bytes>> {
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
    let _permit = match state.admission.admit().await {
        Ok(p) => p,
        Err(why) => {
            let mut r = json_error(StatusCode::SERVICE_UNAVAILABLE, 3, &format!("Server too busy ({})", why.as_str()));
            r.headers_mut().insert("retry-after", HeaderValue::from(state.admission.retry_after_secs()));
            state.metrics.observe_http("api", 503, started.elapsed());
            return r;
        }
    };
    let message = format!("Unknown HTTP API endpoint {} {}", req.method(), req.uri());
    let response = json_error(StatusCode::NOT_FOUND, 4, &message);
    state.metrics.observe_http("api", response.status().as_u16(), started.elapsed());
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
