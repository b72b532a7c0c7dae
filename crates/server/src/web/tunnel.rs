//! Native messages tunnelled over HTTP (§4.3: POST `application/x-hdl-message`,
//! any path). The body is read like the JSON API's; the message goes to the
//! native protocol through [`Tunnel`], which the composition root implements.

use super::json_error;
use super::routes::HDL_MESSAGE;
use crate::http_body::{BodyError, BodyReader};
use bytes::Bytes;
use handled_proto::envelope::{ENVELOPE_LEN, MAX_MESSAGE_LEN};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use std::future::Future;
use std::net::SocketAddr;

/// Envelope + largest message + one tolerated leading CR/LF.
const MAX_TUNNEL_BODY: usize = ENVELOPE_LEN + MAX_MESSAGE_LEN + 1;

/// Where a tunnelled message goes: the native protocol, admission control and
/// metrics included, as on the other transports.
pub trait Tunnel: Send + Sync + 'static {
    /// The answer's units to the native request `unit` from `peer`.
    fn serve(&self, unit: &[u8], peer: SocketAddr) -> impl Future<Output = Vec<Vec<u8>>> + Send;
}

/// A tunnelled message; its body is read with a time limit (a stalled sender
/// used to hold the socket and its partial message forever, F2) and from the
/// shared body budget.
pub(super) async fn tunnel(
    native: &impl Tunnel,
    req: Request<Incoming>,
    bodies: &BodyReader,
    peer: SocketAddr,
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
    let responses = native.serve(unit, peer).await;
    if responses.is_empty() {
        return json_error(StatusCode::BAD_REQUEST, 4, "Message shorter than an envelope");
    }
    let mut response = Response::new(Full::new(Bytes::from(responses.concat())));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(HDL_MESSAGE));
    response
}
