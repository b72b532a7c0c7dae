//! Listeners: each turns its framing into calls of [`serve_unit`], which applies
//! admission control and records metrics around [`crate::native::handle_unit`].

pub mod accept;
pub mod http;
pub mod limits;
mod realtime;
mod reassembly;
pub mod tcp;
mod tcp_early;
pub mod timing;
pub mod udp;
mod udp_answers;
pub mod unify;

use crate::admission::Rejection;
use crate::native::respond::{error_response, RequestContext};
use crate::native::{handle_unit, read_envelope, Answer, Transport};
use crate::state::ServerState;
use handled_proto::codec::Codec;
use handled_proto::codec::Reader;
use handled_proto::envelope::ENVELOPE_LEN;
use handled_proto::header::{Header, OpCode, OpFlags, ResponseCode, HEADER_LEN};
use handled_proto::message::parse_message;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Largest read buffer of an HTTP/1 connection (hyper's default is ~400 KB):
/// a request head must fit, so a peer dribbling an endless head holds at most
/// this until the header timeout; larger heads get 431.
pub const MAX_HTTP_BUFFER: usize = 64 * 1024;

/// Serve an HTTP/1 connection; once the server stops taking work, the request
/// under way is answered and the connection closed (at once when idle).
pub async fn until_stopped<I, S>(
    connection: hyper::server::conn::http1::Connection<I, S>,
    stop: &crate::lifecycle::Stop,
) -> hyper::Result<()>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::ResBody: 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        done = connection.as_mut() => return done,
        _ = stop.draining() => {}
    }
    connection.as_mut().graceful_shutdown();
    connection.await
}

/// Answer one native request unit, or refuse it at once when the server is too busy.
/// `peer` is who sent it (what it makes the server keep is charged to its address).
/// A replication stream in the answer runs after the permit is given back
/// (streams have limits of their own).
pub async fn serve_unit(state: &ServerState, unit: &[u8], transport: Transport, peer: SocketAddr) -> Answer {
    let arrived = Instant::now();
    match state.admission.admit().await {
        Ok(_permit) => serve_admitted(state, unit, transport, peer).await,
        Err(why) => Answer::units(refuse(state, unit, transport, why, arrived)),
    }
}

/// The too-busy answer to a refused request, counted like any other answer;
/// its latency runs from `arrived` (so a refusal after a queue wait shows the wait).
pub fn refuse(
    state: &ServerState,
    unit: &[u8],
    transport: Transport,
    why: Rejection,
    arrived: Instant,
) -> Vec<Vec<u8>> {
    let responses: Vec<Vec<u8>> = busy_response(state, unit, why).into_iter().collect();
    state.metrics.observe(transport.name(), &responses, arrived.elapsed());
    responses
}

/// Answer a request that already holds an admission permit.
pub async fn serve_admitted(state: &ServerState, unit: &[u8], transport: Transport, peer: SocketAddr) -> Answer {
    let started = Instant::now();
    let answer = handle_unit(&state.native, unit, transport, peer).await;
    let elapsed = started.elapsed();
    state.metrics.observe(transport.name(), &answer.units, elapsed);
    if state.logs.wants_access_line() {
        access_line(unit, &answer.units, transport, peer, elapsed);
    }
    answer
}

/// One access line for a native request: peer, operation, handle, result.
fn access_line(unit: &[u8], responses: &[Vec<u8>], transport: Transport, peer: SocketAddr, elapsed: Duration) {
    let request = unit.get(ENVELOPE_LEN..).and_then(|m| parse_message(m).ok());
    let op = request.as_ref().map_or(0, |r| r.header.op_code.0);
    // The operations whose body starts with the handle (or prefix) they act on.
    let handle = match (op, request.as_ref().map(|r| r.body)) {
        (1 | 100..=105 | 300 | 301, Some(body)) => Reader::new(body).bytes("handle").ok().map(|h| {
            let h = &h[..h.len().min(128)];
            String::from_utf8_lossy(h).into_owned()
        }),
        _ => None,
    };
    let code = responses.last().and_then(|r| r.get(ENVELOPE_LEN..ENVELOPE_LEN + HEADER_LEN));
    let code = code.and_then(|h| Header::from_bytes(h).ok()).map_or("-", |h| h.response_code.name());
    let dur_ms = elapsed.as_secs_f64() * 1000.0;
    // The operation's name, as /metrics has it; its number when it has none.
    let op = match OpCode(op).name() {
        "UNKNOWN" => op.to_string(),
        name => name.to_string(),
    };
    tracing::info!(target: "access", %peer, transport = transport.name(), op, handle = handle.as_deref().unwrap_or("-"), code, dur_ms = format_args!("{dur_ms:.3}"));
}

/// RC_SERVER_TOO_BUSY with the request id echoed (and the op code, when the header reads).
/// Never signed, even when the request asks for certification: a refusal must
/// cost next to nothing, or refusing a surge of certified requests would take as
/// much CPU (one RSA signature each) as serving them.
fn busy_response(state: &ServerState, unit: &[u8], why: Rejection) -> Option<Vec<u8>> {
    let message = match why {
        Rejection::QueueFull => "Server too busy: request queue full",
        Rejection::WaitedTooLong => "Server too busy: request waited too long",
        Rejection::WouldWaitTooLong => "Server too busy: the queue would not reach this request in time",
    };
    unsigned_answer(state, unit, ResponseCode::SERVER_TOO_BUSY, message)
}

/// An unsigned error answer to `unit` without handling it.
fn unsigned_answer(state: &ServerState, unit: &[u8], code: ResponseCode, message: &str) -> Option<Vec<u8>> {
    let envelope = read_envelope(unit)?;
    let header = unit.get(ENVELOPE_LEN..ENVELOPE_LEN + HEADER_LEN).and_then(|h| Header::from_bytes(h).ok());
    // The request digest (RD) covers header and body, when they are all there.
    let header_and_body =
        header.and_then(|h| unit.get(ENVELOPE_LEN..ENVELOPE_LEN + HEADER_LEN + h.body_length as usize)).unwrap_or(&[]);
    let header = header.map(|h| Header { op_flags: h.op_flags.without(OpFlags::CT), ..h });
    let ctx = RequestContext { envelope, header, header_and_body };
    Some(error_response(&state.native, &ctx, code, message))
}
