//! What the native transports (`crate::transport`: UDP, TCP, the HTTP
//! tunnel) ask of the application, after hickory-dns's `RequestHandler`: a
//! transport frames bytes into [`Unit`]s, read once where they arrive, takes
//! turns from admission control and hands each unit to a [`NativeHandler`];
//! it knows nothing of sessions, operations or replication. The handler is
//! built once at start (`native::NativeService`, in `ServerState::new`).
//!
//! Transports are generic over the handler, so that the receive thread's
//! calls are direct and its futures are not boxed.

use crate::admission::{Admission, Rejection};
use handled_proto::envelope::Envelope;
use handled_proto::header::ResponseCode;
use handled_proto::unit::Unit;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Instant;
use tokio::net::TcpStream;

/// Which listener a request came in on: UDP is query-only in our site record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
    Http,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
            Transport::Http => "http",
        }
    }
}

/// Where a request is answered, which bounds what it may wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// On the thread or task that received it (the UDP receive thread, the
    /// TCP accepting task), because [`NativeHandler::is_cheap`] said so: it
    /// must never wait on the network, so a resolution recursing elsewhere is
    /// answered from the resolver's cache only.
    Inline,
    /// On a task of its own: it may wait.
    Worker,
}

/// What answering a request unit produced: the response units, and after a
/// RETRIEVE_TXN_LOG or DUMP_HANDLES response (native TCP only) the stream the
/// same connection carries next.
pub struct Answer {
    pub units: Vec<Vec<u8>>,
    pub stream: Option<Box<dyn FollowOn>>,
}

impl Answer {
    /// Response units with nothing to follow.
    pub fn units(units: Vec<Vec<u8>>) -> Self {
        Answer { units, stream: None }
    }
}

/// What a connection carries after an answer (a replication source's
/// stream): the transport only drives it, and the connection ends with it.
pub trait FollowOn: Send {
    fn run(self: Box<Self>, connection: TcpStream) -> Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>>;
}

/// The application behind the native transports.
pub trait NativeHandler: Send + Sync + 'static {
    /// Admission control: the transports take a turn before they serve (the
    /// UDP thread decides before any task exists) and refuse without one.
    fn admission(&self) -> &Admission;

    /// Answered in microseconds from this process alone, without a signature
    /// (site info, a resolution every source answers locally): the UDP thread
    /// runs it inline, the TCP accepting task answers it at once.
    fn is_cheap(&self, unit: &Unit<impl AsRef<[u8]>>) -> bool;

    /// Answer a unit that holds an admission turn. Never panics; malformed
    /// units get a protocol error carrying the request id.
    fn serve(
        &self,
        unit: &Unit<impl AsRef<[u8]> + Sync>,
        transport: Transport,
        peer: SocketAddr,
        mode: Mode,
    ) -> impl Future<Output = Answer> + Send;

    /// The too-busy answer to a unit refused a turn, counted like any other
    /// answer; its latency runs from `arrived` (a refusal after a queue wait
    /// shows the wait).
    fn refuse(
        &self,
        unit: &Unit<impl AsRef<[u8]>>,
        transport: Transport,
        why: Rejection,
        arrived: Instant,
    ) -> Vec<Vec<u8>>;

    /// An unsigned error answer to `unit` without handling it (UDP's "ask
    /// over TCP").
    fn unhandled_error(&self, unit: &Unit<impl AsRef<[u8]>>, code: ResponseCode, message: &str) -> Vec<u8>;

    /// An error answer to a unit of which only the envelope arrived (TCP: the
    /// rest of the message never came).
    fn envelope_error(&self, envelope: &Envelope, code: ResponseCode, message: &str) -> Vec<u8>;
}
