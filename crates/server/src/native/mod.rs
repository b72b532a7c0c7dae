//! The native Handle protocol: one function turns a received unit (envelope +
//! message) into the response units to send back, whatever the transport.
//! Sessions (decryption, MAC and counter checks) and challenges are handled
//! here; what operations do is in [`crate::ops`], who may do it in [`crate::auth`].

mod auth;
mod context;
mod dispatch;
pub mod respond;
mod session;

use crate::auth::Caller;
use crate::replication::source;
use crate::session::Session;
pub use context::NativeContext;
use handled_proto::codec::{Codec, Reader};
use handled_proto::credential::Credential;
use handled_proto::crypto::session as session_crypto;
use handled_proto::envelope::{Envelope, ENVELOPE_LEN};
use handled_proto::header::{Header, OpCode, OpFlags, ResponseCode, HEADER_LEN};
use handled_proto::message::parse_message;
use handled_proto::request::RequestBody;
use handled_proto::response::ResponseBody;
use respond::{encode_response, error_reply, error_response, Reply, RequestContext};
use std::net::SocketAddr;
use std::sync::Arc;

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

/// What answering a request unit produced: the response units, and after a
/// RETRIEVE_TXN_LOG or DUMP_HANDLES response (native TCP only) the stream the
/// same connection carries next.
pub struct Answer {
    pub units: Vec<Vec<u8>>,
    pub stream: Option<source::Stream>,
}

impl Answer {
    /// Response units with nothing to follow.
    pub fn units(units: Vec<Vec<u8>>) -> Self {
        Answer { units, stream: None }
    }
}

/// Read just the envelope; None when fewer than 20 bytes arrived (nothing to
/// echo, so nothing can be answered).
pub fn read_envelope(unit: &[u8]) -> Option<Envelope> {
    Envelope::read(&mut Reader::new(unit)).ok()
}

/// Answer one request unit from `peer`. Never panics; malformed input gets a
/// protocol error carrying the request id whenever the envelope could be read.
pub async fn handle_unit(state: &NativeContext, unit: &[u8], transport: Transport, peer: SocketAddr) -> Answer {
    let Some(envelope) = read_envelope(unit) else { return Answer::units(Vec::new()) };
    let message = &unit[ENVELOPE_LEN..];
    let bare = RequestContext { envelope, header: None, header_and_body: &[] };

    if let Err(e) = envelope.check_message_length() {
        return Answer::units(vec![error_response(
            state,
            &bare,
            ResponseCode::PROTOCOL_ERROR,
            &format!("Invalid message length: {e}"),
        )]);
    }
    if message.len() != envelope.message_length as usize {
        let text = format!("Expecting {} bytes, only received {}", envelope.message_length, message.len());
        return Answer::units(vec![error_response(state, &bare, ResponseCode::PROTOCOL_ERROR, &text)]);
    }
    let session = if envelope.session_id != 0 { state.sessions.get(envelope.session_id).await } else { None };
    let decrypted;
    let message = if envelope.encrypted {
        // Encrypted messages need the session's key (§1.6).
        let Some(s) = &session else {
            let code =
                if envelope.session_id == 0 { ResponseCode::SESSION_FAILED } else { ResponseCode::SESSION_TIMEOUT };
            return Answer::units(vec![error_response(state, &bare, code, "Unknown session")]);
        };
        match session_crypto::decrypt(&s.key, message) {
            Ok(plain) => {
                decrypted = plain;
                &decrypted[..]
            }
            Err(e) => {
                return Answer::units(vec![error_response(
                    state,
                    &bare,
                    ResponseCode::SESSION_FAILED,
                    &format!("Cannot decrypt message: {e}"),
                )])
            }
        }
    } else {
        message
    };

    let view = match parse_message(message) {
        Ok(view) => view,
        Err(e) => {
            // Echo the op code when at least the header decoded.
            let header =
                (message.len() >= HEADER_LEN).then(|| Header::from_bytes(&message[..HEADER_LEN]).ok()).flatten();
            let ctx = RequestContext { header, ..bare };
            return Answer::units(vec![error_response(
                state,
                &ctx,
                ResponseCode::PROTOCOL_ERROR,
                &format!("Invalid message: {e}"),
            )]);
        }
    };
    let ctx = RequestContext { envelope, header: Some(view.header), header_and_body: view.header_and_body };
    let request = match RequestBody::decode_at(envelope.version, view.header.op_code, view.body) {
        Ok(r) => r,
        Err(e) => {
            return Answer::units(vec![error_response(
                state,
                &ctx,
                ResponseCode::PROTOCOL_ERROR,
                &format!("Invalid request body: {e}"),
            )])
        }
    };

    match &request {
        RequestBody::GetSiteInfo { .. } => {
            return Answer::units(vec![encode_response(
                state,
                &ctx,
                ResponseCode::SUCCESS,
                &ResponseBody::SiteInfo(state.site_bytes.clone()),
                false,
            )]);
        }
        RequestBody::Unsupported(op) if !is_known_op(*op) => {
            return Answer::units(vec![error_response(
                state,
                &ctx,
                ResponseCode::PROTOCOL_ERROR,
                &format!("Unknown operation code {}", op.0),
            )]);
        }
        // Answers carry the challenge id (not necessarily a session) in the envelope.
        // Boxed: authentication's futures are KBs that resolution would carry too.
        RequestBody::ChallengeAnswer(a) => return Box::pin(auth::answer(state, &ctx, a, transport, peer)).await,
        RequestBody::VerifyChallenge(v) => {
            return Answer::units(vec![Box::pin(auth::verify_challenge(state, &ctx, v)).await]);
        }
        RequestBody::SessionSetup(s) => return Answer::units(vec![session::setup(state, &ctx, s, peer.ip()).await]),
        _ => {}
    }

    // Everything else may come inside a session: check MAC and counter first.
    let mut caller = Caller::Anonymous;
    let session = match (envelope.session_id, session) {
        (0, _) => None,
        (_, None) => {
            return Answer::units(vec![error_response(
                state,
                &ctx,
                ResponseCode::SESSION_TIMEOUT,
                "Session expired or unknown",
            )])
        }
        (_, Some(s)) => {
            let reply = Reply { session: Some(&s), ..Reply::default() };
            match check_session_message(state, &s, &envelope, view.header_and_body, view.credential.as_ref()).await {
                Err((code, text)) => return Answer::units(vec![error_reply(state, &ctx, code, text, reply)]),
                Ok(true) => {
                    if let Some(identity) = s.identity() {
                        caller = Caller::Authenticated(identity);
                    }
                }
                Ok(false) if s.identity().is_some() && is_admin_op(request.op_code()) => {
                    return Answer::units(vec![error_reply(
                        state,
                        &ctx,
                        ResponseCode::INVALID_CREDENTIAL,
                        "Session requests must carry the session MAC",
                        reply,
                    )]);
                }
                Ok(false) => {}
            }
            Some(s)
        }
    };
    let reply = Reply {
        session: session.as_deref(),
        encrypt: session.as_ref().is_some_and(|s| s.encrypt_all) || ctx.flags().contains(OpFlags::ENC),
        ..Reply::default()
    };

    match &request {
        RequestBody::SessionTerminate { .. } => match &session {
            Some(s) => Answer::units(vec![session::terminate(state, &ctx, s).await]),
            None => Answer::units(vec![error_response(state, &ctx, ResponseCode::SESSION_TIMEOUT, "Not in a session")]),
        },
        other if transport == Transport::Udp && is_admin_op(other.op_code()) => Answer::units(vec![error_reply(
            state,
            &ctx,
            ResponseCode::PROTOCOL_ERROR,
            "Administrative requests are not accepted over UDP",
            reply,
        )]),
        // §3.3: with PO clear, a request in a session is always authenticated.
        RequestBody::Resolution(_)
            if !ctx.flags().contains(OpFlags::PO) && caller == Caller::Anonymous && session.is_some() =>
        {
            Answer::units(vec![auth::challenge(state, &ctx, session.as_deref(), peer.ip()).await])
        }
        other if is_admin_op(other.op_code()) || other.op_code() == OpCode::RESOLUTION => {
            match dispatch::run(state, &ctx, other, ctx.flags(), &caller, reply, Origin { transport, peer }).await {
                Ok(answer) => answer,
                Err(e) if e.is_authentication_needed() => {
                    Answer::units(vec![auth::challenge(state, &ctx, session.as_deref(), peer.ip()).await])
                }
                Err(e) => Answer::units(vec![error_reply(state, &ctx, e.code, &e.message, reply)]),
            }
        }
        other => {
            let op = other.op_code();
            let text = format!("Operation {} ({}) is not supported by this server", op.0, op.name());
            Answer::units(vec![error_reply(state, &ctx, ResponseCode::OPERATION_NOT_SUPPORTED, &text, reply)])
        }
    }
}

/// MAC and replay check of a message in session `s`. Ok(true): MAC verified;
/// Ok(false): no MAC (the message counts as unauthenticated).
async fn check_session_message(
    state: &NativeContext,
    s: &Arc<Session>,
    envelope: &Envelope,
    header_and_body: &[u8],
    credential: Option<&Credential>,
) -> Result<bool, (ResponseCode, &'static str)> {
    match credential.filter(|c| c.is_mac()) {
        Some(c) => {
            if !session_crypto::verify_mac(&s.key, envelope, header_and_body, c) {
                return Err((ResponseCode::INVALID_SESSION_KEY, "Session MAC does not verify"));
            }
            s.accept_counter(c.session_counter)
                .map_err(|_| (ResponseCode::SESSION_MESSAGE_REJECTED, "Session counter already used"))?;
            // Other nodes of the site may have seen it (a replay sent elsewhere).
            if !state.sessions.first_use_everywhere(s, c.session_counter).await {
                return Err((ResponseCode::SESSION_MESSAGE_REJECTED, "Session counter already used"));
            }
            Ok(true)
        }
        None => {
            s.touch();
            Ok(false)
        }
    }
}

/// Run a request whose challenge was just answered: the caller is proven, so
/// a second request for authentication means the identity can't do this.
async fn run_authenticated(
    state: &NativeContext,
    ctx: &RequestContext<'_>,
    request: &RequestBody,
    flags: OpFlags,
    caller: &Caller,
    reply: Reply<'_>,
    origin: Origin,
) -> Answer {
    let Origin { transport, .. } = origin;
    if transport == Transport::Udp && is_admin_op(request.op_code()) {
        return Answer::units(vec![error_reply(
            state,
            ctx,
            ResponseCode::PROTOCOL_ERROR,
            "Administrative requests are not accepted over UDP",
            reply,
        )]);
    }
    match dispatch::run(state, ctx, request, flags, caller, reply, origin).await {
        Ok(answer) => answer,
        Err(e) if e.is_authentication_needed() => Answer::units(vec![error_reply(
            state,
            ctx,
            ResponseCode::AUTHENTICATION_FAILED,
            "Authenticated identity not accepted",
            reply,
        )]),
        Err(e) => Answer::units(vec![error_reply(state, ctx, e.code, &e.message, reply)]),
    }
}

/// Where a request came from: the listener and the peer.
#[derive(Clone, Copy)]
pub(crate) struct Origin {
    transport: Transport,
    peer: SocketAddr,
}

fn is_admin_op(op: OpCode) -> bool {
    // 1000–1003: the replication source's operations (admin requests in Handle.Net).
    matches!(op.0, 100..=105 | 300..=302 | 1000..=1003)
}

/// Op codes of the protocol (§3.1); 0 is reserved, no operation.
fn is_known_op(op: OpCode) -> bool {
    op.is_known() && op != OpCode::RESERVED
}
