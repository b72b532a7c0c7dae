//! The native Handle protocol: one function turns a received unit (envelope +
//! message) into the response units to send back, whatever the transport.
//! Sessions (decryption, MAC and counter checks) and challenges are handled
//! here; what operations do is in [`crate::ops`], who may do it in [`crate::auth`].

mod auth;
mod context;
mod dispatch;
pub mod respond;
pub mod service;
mod session;

use crate::auth::Caller;
use crate::handler::Mode;
pub use crate::handler::{Answer, Transport};
use crate::session::Session;
pub use context::NativeContext;
use handled_proto::codec::Codec;
use handled_proto::credential::Credential;
use handled_proto::crypto::session as session_crypto;
use handled_proto::envelope::Envelope;
use handled_proto::header::{Header, OpCode, OpFlags, ResponseCode, HEADER_LEN};
use handled_proto::message::parse_message;
use handled_proto::request::RequestBody;
use handled_proto::response::ResponseBody;
use handled_proto::unit::{Framing, Message, Unit};
use respond::{encode_response, error_reply, error_response, Reply, RequestContext};
use std::net::SocketAddr;
use std::sync::Arc;

/// Answer one request unit from `peer`, read once where it arrived. Never
/// panics; malformed input gets a protocol error carrying the request id.
/// `mode` Inline: on the thread that received it, which must not wait on the
/// network (a recursive resolution answers from the resolver's cache only).
pub async fn handle_unit(
    state: &NativeContext,
    unit: &Unit<impl AsRef<[u8]>>,
    transport: Transport,
    peer: SocketAddr,
    mode: Mode,
) -> Answer {
    let envelope = *unit.envelope();
    let bare = RequestContext { envelope, header: None, header_and_body: &[] };
    let origin = Origin { transport, peer, cache_only: mode == Mode::Inline };
    match unit.framing() {
        Framing::BadLength(e) => {
            return Answer::units(vec![error_response(
                state,
                &bare,
                ResponseCode::PROTOCOL_ERROR,
                &format!("Invalid message length: {e}"),
            )]);
        }
        Framing::WrongLength => {
            let got = unit.message_bytes().len();
            let text = format!("Expecting {} bytes, only received {got}", envelope.message_length);
            return Answer::units(vec![error_response(state, &bare, ResponseCode::PROTOCOL_ERROR, &text)]);
        }
        _ => {}
    }
    let session = if envelope.session_id != 0 { state.sessions.get(envelope.session_id).await } else { None };
    // Echo the op code when at least the header decoded.
    let invalid = |header: Option<Header>, e: &handled_proto::DecodeError| {
        let ctx = RequestContext { header, ..bare };
        Answer::units(vec![error_response(state, &ctx, ResponseCode::PROTOCOL_ERROR, &format!("Invalid message: {e}"))])
    };
    let (decrypted, decrypted_view);
    let view: Message<'_> = match unit.framing() {
        Framing::Message(_) => match unit.message() {
            Some(view) => view,
            None => return Answer::units(Vec::new()),
        },
        Framing::Invalid(e) => return invalid(unit.leading_header(), e),
        // Framing::Encrypted (the wrong lengths were answered above):
        // encrypted messages need the session's key (§1.6).
        Framing::Encrypted | Framing::BadLength(_) | Framing::WrongLength => {
            let Some(s) = &session else {
                let code =
                    if envelope.session_id == 0 { ResponseCode::SESSION_FAILED } else { ResponseCode::SESSION_TIMEOUT };
                return Answer::units(vec![error_response(state, &bare, code, "Unknown session")]);
            };
            decrypted = match session_crypto::decrypt(&s.key, unit.message_bytes()) {
                Ok(plain) => plain,
                Err(e) => {
                    return Answer::units(vec![error_response(
                        state,
                        &bare,
                        ResponseCode::SESSION_FAILED,
                        &format!("Cannot decrypt message: {e}"),
                    )])
                }
            };
            decrypted_view = match parse_message(&decrypted) {
                Ok(view) => view,
                Err(e) => {
                    let header = decrypted.get(..HEADER_LEN).and_then(|h| Header::from_bytes(h).ok());
                    return invalid(header, &e);
                }
            };
            Message {
                header: decrypted_view.header,
                header_and_body: decrypted_view.header_and_body,
                body: decrypted_view.body,
                credential: decrypted_view.credential.as_ref(),
            }
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
        RequestBody::ChallengeAnswer(a) => return Box::pin(auth::answer(state, &ctx, a, origin)).await,
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
            match check_session_message(state, &s, &envelope, view.header_and_body, view.credential).await {
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
            match dispatch::run(state, &ctx, other, ctx.flags(), &caller, reply, origin).await {
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

/// Where a request came from (the listener and the peer), and whether it is
/// answered on the thread that received it (then from the resolver's cache only).
#[derive(Clone, Copy)]
pub(crate) struct Origin {
    transport: Transport,
    peer: SocketAddr,
    cache_only: bool,
}

fn is_admin_op(op: OpCode) -> bool {
    // 1000–1003: the replication source's operations (admin requests in Handle.Net).
    matches!(op.0, 100..=105 | 300..=302 | 1000..=1003)
}

/// Op codes of the protocol (§3.1); 0 is reserved, no operation.
fn is_known_op(op: OpCode) -> bool {
    op.is_known() && op != OpCode::RESERVED
}
