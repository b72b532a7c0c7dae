//! Listeners: each frames bytes into request units ([`Unit`], read once where
//! they arrive), takes a turn from admission control and hands them to a
//! [`NativeHandler`] (`crate::handler`), which the application implements:
//! nothing here knows of sessions, operations or replication.

pub mod accept;
pub mod http;
pub mod limits;
mod realtime;
mod reassembly;
pub mod tcp;
mod tcp_early;
pub mod tcp_reset;
pub mod timing;
pub mod udp;
mod udp_answers;
pub mod unify;

use crate::handler::{Answer, Mode, NativeHandler, Transport};
use handled_proto::unit::Unit;
use std::net::SocketAddr;
use std::time::Instant;

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

/// Answer one native request unit with `handler` once admission control gives
/// it a turn, or refuse it at once when the server is too busy. `peer` is who
/// sent it (what it makes the server keep is charged to its address). A
/// replication stream in the answer runs after the turn is given back
/// (streams have limits of their own).
pub async fn serve_parsed<H: NativeHandler>(
    handler: &H,
    unit: &Unit<impl AsRef<[u8]> + Sync>,
    transport: Transport,
    peer: SocketAddr,
) -> Answer {
    let arrived = Instant::now();
    match handler.admission().admit().await {
        Ok(_permit) => handler.serve(unit, transport, peer, Mode::Worker).await,
        Err(why) => Answer::units(handler.refuse(unit, transport, why, arrived)),
    }
}

/// [`serve_parsed`] for a unit framed elsewhere (the HTTP tunnel): no answer
/// when not even an envelope arrived.
pub async fn serve_unit<H: NativeHandler>(handler: &H, bytes: &[u8], transport: Transport, peer: SocketAddr) -> Answer {
    match Unit::parse(bytes) {
        Some(unit) => serve_parsed(handler, &unit, transport, peer).await,
        None => Answer::units(Vec::new()),
    }
}
