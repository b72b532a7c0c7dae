//! The native protocol behind the transports: [`NativeService`] implements
//! [`NativeHandler`] with what answering a unit needs beyond the protocol
//! itself (admission control, metrics, the access line), built once at start
//! (`ServerState::new`).

use super::respond::{error_response, RequestContext};
use super::{handle_unit, NativeContext};
use crate::admission::{Admission, Rejection};
use crate::handler::{Answer, Mode, NativeHandler, Transport};
use crate::metrics::Metrics;
use crate::ops::resolve::Asked;
use handled_proto::codec::Codec;
use handled_proto::envelope::{Envelope, ENVELOPE_LEN};
use handled_proto::header::{Header, OpCode, OpFlags, ResponseCode, HEADER_LEN};
use handled_proto::unit::Unit;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct NativeService {
    pub native: Arc<NativeContext>,
    pub admission: Admission,
    pub metrics: Arc<Metrics>,
}

impl NativeHandler for NativeService {
    fn admission(&self) -> &Admission {
        &self.admission
    }

    /// Site info, or a resolution the chain answers locally, without a
    /// signature: microseconds of work. A source that may wait on the network
    /// (a resolver, a database server's store) sends resolutions to the
    /// workers, as do units that do not parse before a session is looked up.
    fn is_cheap(&self, unit: &Unit<impl AsRef<[u8]>>) -> bool {
        let Some(header) = unit.header() else { return false };
        let (op, flags) = (header.op_code, header.op_flags);
        let local = || {
            let asked = Asked {
                recursion: flags.contains(OpFlags::REC),
                do_not_refer: flags.contains(OpFlags::DNR),
                handle: unit.handle(),
            };
            self.native.chain.answers_locally(&asked)
        };
        !flags.contains(OpFlags::CT) && (op == OpCode::GET_SITE_INFO || (op == OpCode::RESOLUTION && local()))
    }

    async fn serve(
        &self,
        unit: &Unit<impl AsRef<[u8]> + Sync>,
        transport: Transport,
        peer: SocketAddr,
        mode: Mode,
    ) -> Answer {
        let started = Instant::now();
        let answer = handle_unit(&self.native, unit, transport, peer, mode).await;
        let elapsed = started.elapsed();
        self.metrics.observe(transport.name(), &answer.units, elapsed);
        if self.native.logs.wants_access_line() {
            access_line(unit, &answer.units, transport, peer, elapsed);
        }
        answer
    }

    /// RC_SERVER_TOO_BUSY with the request id echoed (and the op code, when
    /// the header reads). Never signed, even when the request asks for
    /// certification: a refusal must cost next to nothing, or refusing a surge
    /// of certified requests would take as much CPU (one RSA signature each)
    /// as serving them.
    fn refuse(
        &self,
        unit: &Unit<impl AsRef<[u8]>>,
        transport: Transport,
        why: Rejection,
        arrived: Instant,
    ) -> Vec<Vec<u8>> {
        let message = match why {
            Rejection::QueueFull => "Server too busy: request queue full",
            Rejection::WaitedTooLong => "Server too busy: request waited too long",
            Rejection::WouldWaitTooLong => "Server too busy: the queue would not reach this request in time",
        };
        let responses = vec![self.unhandled_error(unit, ResponseCode::SERVER_TOO_BUSY, message)];
        self.metrics.observe(transport.name(), &responses, arrived.elapsed());
        responses
    }

    fn unhandled_error(&self, unit: &Unit<impl AsRef<[u8]>>, code: ResponseCode, message: &str) -> Vec<u8> {
        // The request digest (RD) covers header and body, when they are all there.
        let header = unit.leading_header().map(|h| Header { op_flags: h.op_flags.without(OpFlags::CT), ..h });
        let ctx =
            RequestContext { envelope: *unit.envelope(), header, header_and_body: unit.leading_header_and_body() };
        error_response(&self.native, &ctx, code, message)
    }

    fn envelope_error(&self, envelope: &Envelope, code: ResponseCode, message: &str) -> Vec<u8> {
        let ctx = RequestContext { envelope: *envelope, header: None, header_and_body: &[] };
        error_response(&self.native, &ctx, code, message)
    }
}

/// One access line for a native request: peer, operation, handle, result.
fn access_line(
    unit: &Unit<impl AsRef<[u8]>>,
    responses: &[Vec<u8>],
    transport: Transport,
    peer: SocketAddr,
    elapsed: Duration,
) {
    let op = unit.header().map_or(0, |h| h.op_code.0);
    let handle = unit.handle().map(|h| String::from_utf8_lossy(&h[..h.len().min(128)]).into_owned());
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
