//! Challenge–response on the native protocol (§5.1, §5.2): issuing 402
//! challenges, taking answers (op 200) and running the challenged request,
//! and answering VERIFY_CHALLENGE (op 201) for other servers.

use super::respond::{encode_reply, error_reply, Reply, RequestContext};
use super::Answer;
use crate::access::verify;
use crate::auth::challenge::{NotStored, Pending};
use crate::auth::Caller;
use crate::native::NativeContext;
use crate::session::Session;
use handled_proto::digest::RequestDigest;
use handled_proto::envelope::Envelope;
use handled_proto::header::{Header, ResponseCode};
use handled_proto::message::parse_message;
use handled_proto::request::{ChallengeAnswer, RequestBody, AUTH_TYPE_PUBKEY, AUTH_TYPE_SECKEY};
use handled_proto::response::ResponseBody;
use handled_proto::session::VerifyChallengeRequest;
use std::net::IpAddr;
use std::sync::Arc;

/// Answer a request with a challenge (402): a fresh nonce, the request digest,
/// and a challenge id in the envelope (the session's own id inside a session).
pub async fn challenge(
    state: &NativeContext,
    ctx: &RequestContext<'_>,
    session: Option<&Session>,
    peer: IpAddr,
) -> Vec<u8> {
    let nonce: [u8; 16] = rand::random();
    let digest = RequestDigest::compute(ctx.response_version(), ctx.header_and_body);
    let pending = Pending::new(
        nonce.to_vec(),
        digest.digest,
        ctx.envelope,
        ctx.header_and_body.to_vec(),
        session.map_or(0, |s| s.id),
    );
    let reply = Reply { session, ..Reply::default() };
    // A fresh id may be taken by another node sharing the store: try a few.
    let mut attempts = 0;
    let id = loop {
        let id = session.map_or_else(|| state.new_auth_id(), |s| s.id);
        match state.challenges.insert(id, peer, pending.clone(), session.is_some()).await {
            Ok(()) => break id,
            Err(NotStored::IdTaken) if attempts < 3 => attempts += 1,
            Err(NotStored::Store) => {
                return error_reply(state, ctx, ResponseCode::SERVER_BACKUP, "Authentication store unavailable", reply);
            }
            Err(_) => {
                return error_reply(state, ctx, ResponseCode::SERVER_TOO_BUSY, "Too many pending challenges", reply)
            }
        }
    };
    encode_reply(
        state,
        ctx,
        ResponseCode::AUTHENTICATION_NEEDED,
        &ResponseBody::Challenge { nonce: nonce.to_vec() },
        false,
        Reply { session_id: Some(id), ..reply },
    )
}

/// A challenge answer: verify it against the challenge it names, then run the
/// original request as the proven identity and answer it on this exchange.
pub async fn answer(
    state: &NativeContext,
    ctx: &RequestContext<'_>,
    answer: &ChallengeAnswer,
    origin: super::Origin,
) -> Answer {
    let peer = origin.peer;
    let Some(pending) = state.challenges.take(ctx.envelope.session_id).await else {
        let text = "No outstanding challenge for this id (expired or already answered)";
        return Answer::units(vec![error_reply(state, ctx, ResponseCode::AUTHEN_TIMEOUT, text, Reply::default())]);
    };
    let session: Option<Arc<Session>> =
        if pending.session_id != 0 { state.sessions.get(pending.session_id).await } else { None };
    // The challenged request was checked when it arrived; it decodes again.
    let unreadable = || {
        let text = "Challenged request unreadable";
        Answer::units(vec![error_reply(state, ctx, ResponseCode::ERROR, text, Reply::default())])
    };
    let Ok(view) = parse_message(&pending.message) else { return unreadable() };
    let Ok(original) = RequestBody::decode_at(pending.envelope.version, view.header.op_code, view.body) else {
        return unreadable();
    };
    // The final response is the original operation's, on the answer's exchange.
    let header = ctx.header.map(|h| Header { op_code: view.header.op_code, ..h });
    let rctx = RequestContext {
        envelope: Envelope { session_id: pending.session_id, ..ctx.envelope },
        header,
        header_and_body: ctx.header_and_body,
    };
    let reply = Reply { session: session.as_deref(), ..Reply::default() };

    let verified = if answer.auth_type == AUTH_TYPE_SECKEY {
        verify::secret_key_answer(
            state,
            &answer.identity_handle,
            answer.identity_index,
            &answer.answer,
            &pending.nonce,
            &pending.digest,
        )
        .await
    } else if answer.auth_type == AUTH_TYPE_PUBKEY {
        let signed = [pending.nonce.as_slice(), &pending.digest].concat();
        verify::public_key_answer(state, &answer.identity_handle, answer.identity_index, &answer.answer, &signed).await
    } else {
        Err(verify::AuthError::failed(format!(
            "Unknown authentication type {:?}",
            String::from_utf8_lossy(&answer.auth_type)
        )))
    };
    let identity = match verified {
        Ok(i) => i,
        Err(e) => {
            let identity = format!("{}:{}", answer.identity_index, String::from_utf8_lossy(&answer.identity_handle));
            if e.judged_credentials() {
                state.logs.auth_failed(&identity, Some(peer), &e.message);
            }
            return Answer::units(vec![error_reply(state, &rctx, e.code, &e.message, reply)]);
        }
    };
    if let Some(s) = &session {
        if s.authenticate(&identity) {
            state.sessions.save(s).await;
        }
    }
    super::run_authenticated(
        state,
        &rctx,
        &original,
        view.header.op_flags,
        &Caller::Authenticated(identity),
        reply,
        origin,
    )
    .await
}

/// VERIFY_CHALLENGE (201): does this answer prove the identity, whose handle
/// lives here? Replies `valid` true or false, signed when CT is set.
pub async fn verify_challenge(
    state: &NativeContext,
    ctx: &RequestContext<'_>,
    req: &VerifyChallengeRequest,
) -> Vec<u8> {
    let reply = Reply::default();
    if !state.is_homed(&req.handle).await {
        let e = crate::ops::OpError::not_responsible();
        return error_reply(state, ctx, e.code, &e.message, reply);
    }
    match state.record(&state.storage_key(&handled_proto::handle::canonical(&req.handle))).await {
        Ok(Some(_)) => {}
        Ok(None) => return error_reply(state, ctx, ResponseCode::HANDLE_NOT_FOUND, "Handle not found", reply),
        Err(e) => {
            let (code, message) = crate::store_answer::store_answer(&e);
            return error_reply(state, ctx, code, &message, reply);
        }
    }
    let valid =
        match verify::secret_key_answer(state, &req.handle, req.index, &req.answer, &req.nonce, &req.request_digest)
            .await
        {
            Ok(_) => true,
            // Not checked (too busy, the store out of reach): no verdict to give.
            Err(e) if !e.judged_credentials() => return error_reply(state, ctx, e.code, &e.message, reply),
            Err(_) => false,
        };
    encode_reply(state, ctx, ResponseCode::SUCCESS, &ResponseBody::VerifyResult { valid }, false, reply)
}
