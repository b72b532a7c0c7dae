//! The native Handle protocol: one function turns a received unit (envelope +
//! message) into the response units to send back, whatever the transport.

mod resolve;
pub mod respond;

use crate::state::ServerState;
use handled_proto::codec::{Codec, Reader};
use handled_proto::envelope::{Envelope, ENVELOPE_LEN};
use handled_proto::header::{Header, OpCode, ResponseCode, HEADER_LEN};
use handled_proto::message::parse_message;
use handled_proto::request::RequestBody;
use handled_proto::response::ResponseBody;
use respond::{encode_response, error_response, RequestContext};

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

/// Read just the envelope; None when fewer than 20 bytes arrived (nothing to
/// echo, so nothing can be answered).
pub fn read_envelope(unit: &[u8]) -> Option<Envelope> {
    Envelope::read(&mut Reader::new(unit)).ok()
}

/// Answer one request unit. Never panics; malformed input gets a protocol
/// error carrying the request id whenever the envelope could be read.
pub async fn handle_unit(state: &ServerState, unit: &[u8], transport: Transport) -> Vec<Vec<u8>> {
    let Some(envelope) = read_envelope(unit) else { return Vec::new() };
    let message = &unit[ENVELOPE_LEN..];
    let bare = RequestContext { envelope, header: None, header_and_body: &[] };

    if let Err(e) = envelope.check_message_length() {
        return vec![error_response(state, &bare, ResponseCode::PROTOCOL_ERROR, &format!("Invalid message length: {e}"))];
    }
    if message.len() != envelope.message_length as usize {
        let text = format!("Expecting {} bytes, only received {}", envelope.message_length, message.len());
        return vec![error_response(state, &bare, ResponseCode::PROTOCOL_ERROR, &text)];
    }
    if envelope.encrypted {
        // No session can exist yet, so nothing encrypted can be for us (§1.6).
        let code = if envelope.session_id == 0 { ResponseCode::SESSION_FAILED } else { ResponseCode::SESSION_TIMEOUT };
        return vec![error_response(state, &bare, code, "Unknown session")];
    }

    let view = match parse_message(message) {
        Ok(view) => view,
        Err(e) => {
            // Echo the op code when at least the header decoded.
            let header = (message.len() >= HEADER_LEN).then(|| Header::from_bytes(&message[..HEADER_LEN]).ok()).flatten();
            let ctx = RequestContext { header, ..bare };
            return vec![error_response(state, &ctx, ResponseCode::PROTOCOL_ERROR, &format!("Invalid message: {e}"))];
        }
    };
    let ctx = RequestContext { envelope, header: Some(view.header), header_and_body: view.header_and_body };
    let request = match RequestBody::decode(view.header.op_code, view.body) {
        Ok(r) => r,
        Err(e) => return vec![error_response(state, &ctx, ResponseCode::PROTOCOL_ERROR, &format!("Invalid request body: {e}"))],
    };

    match request {
        RequestBody::Resolution(req) => vec![resolve::resolve(state, &ctx, &req).await],
        RequestBody::GetSiteInfo { .. } => {
            vec![encode_response(state, &ctx, ResponseCode::SUCCESS, &ResponseBody::SiteInfo(state.site_bytes.clone()), false)]
        }
        RequestBody::Unsupported(op) if !is_known_op(op) => {
            vec![error_response(state, &ctx, ResponseCode::PROTOCOL_ERROR, &format!("Unknown operation code {}", op.0))]
        }
        other if transport == Transport::Udp && is_admin_op(other.op_code()) => {
            vec![error_response(state, &ctx, ResponseCode::PROTOCOL_ERROR, "Administrative requests are not accepted over UDP")]
        }
        other => {
            let op = other.op_code();
            vec![error_response(state, &ctx, ResponseCode::OPERATION_NOT_SUPPORTED, &format!("Operation {} ({}) is not supported by this server", op.0, op_name(op)))]
        }
    }
}

fn is_admin_op(op: OpCode) -> bool {
    matches!(op.0, 100..=105 | 300..=302)
}

fn is_known_op(op: OpCode) -> bool {
    op_name(op) != "unknown"
}

fn op_name(op: OpCode) -> &'static str {
    match op.0 {
        1 => "resolution",
        2 => "get site info",
        100 => "create handle",
        101 => "delete handle",
        102 => "add value",
        103 => "remove value",
        104 => "modify value",
        105 => "list handles",
        200 => "challenge response",
        201 => "verify challenge",
        300 => "home prefix",
        301 => "unhome prefix",
        302 => "list homed prefixes",
        400 => "session setup",
        401 => "session terminate",
        402 => "session key exchange",
        1000 => "get next transaction id",
        1001 => "retrieve transaction log",
        1002 => "dump handles",
        1003 => "backup server",
        _ => "unknown",
    }
}
