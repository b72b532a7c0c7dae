//! Listeners: each turns its framing into calls of [`serve_unit`], which applies
//! admission control and records metrics around [`crate::native::handle_unit`].

pub mod accept;
pub mod body;
pub mod http;
pub mod limits;
mod realtime;
mod reassembly;
pub mod tcp;
pub mod timing;
pub mod tls;
pub mod udp;
mod udp_answers;
pub mod unify;

use crate::admission::Rejection;
use crate::native::respond::{error_response, RequestContext};
use crate::native::{handle_unit, read_envelope, Transport};
use crate::state::ServerState;
use handled_proto::codec::Codec;
use handled_proto::envelope::ENVELOPE_LEN;
use handled_proto::header::{Header, OpFlags, ResponseCode, HEADER_LEN};
use std::net::IpAddr;
use std::time::Instant;

/// Largest read buffer of an HTTP/1 connection (hyper's default is ~400 KB):
/// a request head must fit, so a peer dribbling an endless head holds at most
/// this until the header timeout; larger heads get 431.
pub const MAX_HTTP_BUFFER: usize = 64 * 1024;

/// Answer one native request unit, or refuse it at once when the server is too busy.
/// `peer` is who sent it (what it makes the server keep is charged to it).
pub async fn serve_unit(state: &ServerState, unit: &[u8], transport: Transport, peer: IpAddr) -> Vec<Vec<u8>> {
    let arrived = Instant::now();
    match state.admission.admit().await {
        Ok(_permit) => serve_admitted(state, unit, transport, peer).await,
        Err(why) => refuse(state, unit, transport, why, arrived),
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
pub async fn serve_admitted(state: &ServerState, unit: &[u8], transport: Transport, peer: IpAddr) -> Vec<Vec<u8>> {
    let started = Instant::now();
    let responses = handle_unit(state, unit, transport, peer).await;
    state.metrics.observe(transport.name(), &responses, started.elapsed());
    responses
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
    Some(error_response(state, &ctx, code, message))
}
