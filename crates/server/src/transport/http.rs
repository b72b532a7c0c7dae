//! The HTTP port (§4.3): the native protocol tunnelled in POST bodies
//! (`application/x-hdl-message`), HTTP/1.0 and HTTP/1.1 keep-alive alike. Every
//! response carries `Server-Timing` with the server's own time for the request.

use crate::native::{handle_unit, Transport};
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
    if req.method() == Method::POST && is_hdl(&req) {
        return tunnel(state, req).await;
    }
    let message = format!("Unknown HTTP API endpoint {} {}", req.method(), req.uri());
    json_error(StatusCode::NOT_FOUND, 4, &message)
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
    let responses = handle_unit(state, unit, Transport::Http).await;
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
