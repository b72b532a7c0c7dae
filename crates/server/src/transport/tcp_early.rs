//! A connection's first request, read right after accept and, when it is cheap
//! (as the UDP receive thread judges it: site info, or a resolution answered
//! locally without a signature), answered on the accepting task before the
//! connection gets a task of its own. The Java client sends one request per
//! connection; waiting for the event loop to report the new socket readable
//! and for its task to be scheduled cost a wake-up per request, and the
//! native port defers accept until the request's first bytes are there
//! (tcp.rs, `DEFER_ACCEPT`; BENCHMARKS.md, "TCP, a connection per request:
//! where the time goes").

use super::tcp_reset::reset_if_all_delivered;
use crate::handler::{Answer, Mode, NativeHandler, Transport};
use futures_util::FutureExt;
use handled_proto::codec::{Codec, Reader};
use handled_proto::envelope::{Envelope, ENVELOPE_LEN};
use handled_proto::header::{Header, OpFlags, ResponseCode};
use handled_proto::unit::Unit;
use std::future::Future;
use std::io::Read;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use tokio::net::TcpStream;

/// Read at most this much right after accept: a resolution request is ~100
/// bytes; a larger request's rest is read by the connection's task.
const EARLY_READ: usize = 2048;

/// What the accepting task leaves to the connection's task.
pub struct Early {
    /// Bytes read but not served yet: the first request when it was not
    /// answered here, or whatever followed the answered one.
    pub carried: Vec<u8>,
    pub reply: EarlyReply,
}

pub enum EarlyReply {
    /// Nothing to send (no request answered here, or its answer all sent).
    Sent,
    /// The rest of an answer the socket did not take at once.
    Unsent(Vec<u8>),
    /// An answer that needs the connection's task: one still being worked
    /// out, or one that goes on with a replication stream.
    Later(Pin<Box<dyn Future<Output = Answer> + Send>>),
    /// Answered, acknowledged, and closed with a reset once dropped: no task at all.
    Reset,
}

impl Early {
    fn nothing(carried: Vec<u8>) -> Early {
        Early { carried, reply: EarlyReply::Sent }
    }
}

/// Read what already arrived on `stream` (never waiting) and answer it here
/// when it is one whole cheap request and a turn is free at once; anything
/// else is left to the connection's task, as if nothing had been read.
pub fn first_request<H: NativeHandler>(handler: &Arc<H>, stream: &TcpStream, peer: SocketAddr) -> Early {
    let mut bytes = [0u8; EARLY_READ];
    // socket2 reads the (non-blocking) descriptor directly: tokio's own
    // try_read gives up before the event loop has reported the socket readable.
    // An error is nothing yet (WouldBlock), or one the task's read meets again.
    let n = (&*socket2::SockRef::from(stream)).read(&mut bytes).unwrap_or(0);
    let read = &bytes[..n];
    let Some((envelope, len)) = whole_unit(read) else { return Early::nothing(read.to_vec()) };
    let (unit, rest) = (Unit::with_envelope(envelope, read[..len].to_vec()), &read[len..]);
    let keep_alive = unit.header().is_some_and(|h| h.op_flags.contains(OpFlags::KA));
    // Only a turn free now: waiting in the admission queue is the task's business.
    let permit = match handler.is_cheap(&unit).then(|| handler.admission().try_now()).flatten() {
        Some(permit) => permit,
        None => {
            let mut carried = unit.into_bytes();
            carried.extend_from_slice(rest);
            return Early::nothing(carried);
        }
    };
    let carried = rest.to_vec();
    let serving = handler.clone();
    // Inline: cheap requests finish in one poll, from the resolver's cache
    // only, as on the UDP thread, so that the accepting task never waits on an
    // upstream server (nor does the rest, should it not finish here).
    let mut answer: Pin<Box<dyn Future<Output = Answer> + Send>> = Box::pin(async move {
        let answer = serving.serve(&unit, Transport::Tcp, peer, Mode::Inline).await;
        drop(permit);
        answer
    });
    let Some(answer) = (&mut answer).now_or_never() else {
        return Early { carried, reply: EarlyReply::Later(answer) };
    };
    if answer.stream.is_some() {
        return Early { carried, reply: EarlyReply::Later(Box::pin(async move { answer })) };
    }
    let reply = answer.units.concat();
    let sent = socket2::SockRef::from(stream).send(&reply).unwrap_or(0);
    if sent < reply.len() {
        return Early { carried, reply: EarlyReply::Unsent(reply[sent..].to_vec()) };
    }
    // Without KA (RFC 3652: the Java client never sets it) the client sends
    // nothing more; if it already holds the whole answer (acknowledged at
    // once: loopback), the connection ends here with a reset, sparing both
    // sides a FIN each and the server a task and a wake-up. A challenge (402)
    // is answered on the same connection, so it is never ended here.
    let reset = !keep_alive && carried.is_empty() && ends_the_exchange(&reply) && reset_if_all_delivered(stream);
    Early { carried, reply: if reset { EarlyReply::Reset } else { EarlyReply::Sent } }
}

/// Is the answer's first message one the client answers no further: any but
/// a challenge (or one whose header does not decode)?
fn ends_the_exchange(reply: &[u8]) -> bool {
    let header = reply.get(ENVELOPE_LEN..).map(|m| Header::read(&mut Reader::new(m)));
    matches!(header, Some(Ok(h)) if h.response_code != ResponseCode::AUTHENTICATION_NEEDED)
}

/// The envelope and length of the unit at the start of `bytes` when all of it
/// is there and its length is acceptable; None otherwise (the task reads on,
/// or answers a bad length as it always does).
fn whole_unit(bytes: &[u8]) -> Option<(Envelope, usize)> {
    let envelope = Envelope::parse(bytes).ok()?;
    let len = ENVELOPE_LEN.checked_add(envelope.check_message_length().ok()?)?;
    (bytes.len() >= len).then_some((envelope, len))
}
