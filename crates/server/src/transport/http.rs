//! The HTTP port's transport. Connections are set up in [`super::unify`]
//! (TLS or plain from the first byte, keep-alive, Server-Timing, access log);
//! here a request is either a native message tunnelled over HTTP (§4.3: POST
//! `application/x-hdl-message`, any path) or goes to the application
//! ([`crate::web`]: operations endpoints, JSON API, console, web proxy).

use super::serve_unit;
use crate::http_body::{BodyBudget, BodyError, BodyReader};
use crate::native::Transport;
use crate::rest::Conn;
use crate::state::ServerState;
use crate::web::{json_error, Web};
use bytes::Bytes;
use handled_proto::envelope::{ENVELOPE_LEN, MAX_MESSAGE_LEN};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::TlsAcceptor;

pub const HDL_MESSAGE: &str = "application/x-hdl-message";
/// Envelope + largest message + one tolerated leading CR/LF.
const MAX_TUNNEL_BODY: usize = ENVELOPE_LEN + MAX_MESSAGE_LEN + 1;

/// What every connection on the HTTP port shares.
pub struct HttpShared {
    /// Everything but the tunnel.
    pub web: Web,
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
        let client_certificates = state.config.transport.https_client_certificates;
        let tls = state.tls.as_ref().map(|slot| slot.acceptor(client_certificates));
        let bodies = BodyReader::new(keep_alive, budget);
        HttpShared {
            max_requests: state.config.transport.http_max_requests,
            web: Web::new(state, bodies.clone(), keep_alive),
            bodies,
            tls,
            keep_alive,
        }
    }
}

fn is_hdl(req: &Request<Incoming>) -> bool {
    req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains(HDL_MESSAGE))
}

pub(super) async fn route(shared: &HttpShared, conn: Conn, req: Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() == Method::POST && is_hdl(&req) {
        // Admission happens per native message, like on the other transports.
        return Box::pin(tunnel(&shared.web.state, req, &shared.bodies, conn.peer)).await;
    }
    shared.web.route(conn, req).await
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
    let responses = serve_unit(&*state.native_service, unit, Transport::Http, peer).await.units;
    if responses.is_empty() {
        return json_error(StatusCode::BAD_REQUEST, 4, "Message shorter than an envelope");
    }
    let mut response = Response::new(Full::new(Bytes::from(responses.concat())));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(HDL_MESSAGE));
    response
}
