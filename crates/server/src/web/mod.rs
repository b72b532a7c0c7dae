//! The HTTP port's application: the operations endpoints, the JSON API and
//! reverse lookup ([`crate::rest`], `/api/...`, `/hrls/...`), the admin console,
//! and every other path to the web handle proxy ([`crate::proxy`]) unless
//! `enable_proxy` is off. Connections, TLS, keep-alive and the native tunnel
//! are the transport's ([`crate::transport`]), which hands other requests here.

mod operations;

use crate::http_body::BodyReader;
use crate::rest::{Conn, Rest};
use crate::state::ServerState;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, LOCATION};
use hyper::{Method, Request, Response, StatusCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the HTTP port serves besides the native tunnel.
pub struct Web {
    pub state: Arc<ServerState>,
    rest: Rest,
    /// The connection's idle limit, which the proxy's pages advertise.
    keep_alive: Duration,
}

impl Web {
    pub fn new(state: Arc<ServerState>, bodies: BodyReader, keep_alive: Duration) -> Web {
        Web { rest: Rest::new(state.clone(), bodies), state, keep_alive }
    }

    /// Answer one request.
    pub async fn route(&self, conn: Conn, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let state = &*self.state;
        // Operations endpoints answer even when the server is saturated.
        if req.method() == Method::GET {
            if let Some(response) = operations::answer(state, req.uri().path()).await {
                return response;
            }
        }
        let started = Instant::now();
        let path = req.uri().path();
        let under = |base: &str| path == base || path.strip_prefix(base).is_some_and(|r| r.starts_with('/'));
        let api = under("/api") || under("/hrls");
        let service = if !api && state.config.transport.enable_proxy { "proxy" } else { "api" };
        let _permit = match state.admission.admit().await {
            Ok(p) => p,
            Err(why) => {
                let mut r =
                    json_error(StatusCode::SERVICE_UNAVAILABLE, 3, &format!("Server too busy ({})", why.as_str()));
                r.headers_mut().insert("retry-after", HeaderValue::from(state.admission.retry_after_secs()));
                state.metrics.observe_http(service, 503, started.elapsed());
                return r;
            }
        };
        // Every service's future is boxed: held inline, the largest of them sets
        // the size of each request's future, which hyper moves (memcpy) twice per
        // request: 24% of a JSON GET's user-space instructions (callgrind).
        let response = if api {
            Box::pin(self.rest.handle(conn, req)).await
        } else if crate::console::is_console_path(path) {
            crate::console::serve(&req, conn.secure, state.live().allow_plain_http_admin)
        } else if state.config.transport.enable_proxy {
            Box::pin(crate::proxy::serve(state, conn, req, self.keep_alive)).await
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

/// The JSON error shape of the Handle.Net HTTP API (§4.5).
pub fn json_error(status: StatusCode, response_code: u32, message: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({ "responseCode": response_code, "message": message });
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
