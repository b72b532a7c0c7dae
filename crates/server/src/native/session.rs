//! SESSION_SETUP (mode 4, Diffie–Hellman) and SESSION_TERMINATE (§5.7).

use super::respond::{encode_reply, error_reply, Reply, RequestContext};
use crate::native::NativeContext;
use crate::session::{NotAdded, Session, MAX_IDENTITY_LEN};
use handled_proto::codec::Codec;
use handled_proto::crypto::{dh, session as session_crypto};
use handled_proto::data::pubkey::{unsigned, PublicKey};
use handled_proto::envelope::Version;
use handled_proto::header::ResponseCode;
use handled_proto::response::ResponseBody;
use handled_proto::session::{cipher, mode, KeyData, KeyExchange, SessionSetupRequest, SessionSetupResponse};
use std::net::IpAddr;
use std::time::Duration;

fn refuse(state: &NativeContext, ctx: &RequestContext<'_>, text: &str) -> Vec<u8> {
    error_reply(state, ctx, ResponseCode::INVALID_SESSIONSETUP_REQUEST, text, Reply::default())
}

/// Agree a session key with the client's DH key and answer with ours. The
/// response is signed with the server key (CT), never MACed.
pub async fn setup(
    state: &NativeContext,
    ctx: &RequestContext<'_>,
    req: &SessionSetupRequest,
    peer: IpAddr,
) -> Vec<u8> {
    let version = ctx.response_version();
    if version < Version::V2_7 {
        return refuse(state, ctx, "Sessions need protocol 2.7 or later");
    }
    let KeyExchange::DiffieHellman(key_bytes) = &req.exchange else {
        return refuse(state, ctx, "Only Diffie-Hellman key exchange (mode 4) is supported");
    };
    let Ok(PublicKey::Dh { y, p, g }) = PublicKey::decode_data(key_bytes) else {
        return refuse(state, ctx, "Mode 4 needs a DH_PUB_KEY");
    };
    let (p, g) = (unsigned(&p), unsigned(&g));
    let secret: [u8; dh::SECRET_LEN] = rand::random();
    let agreed = dh::public_value(p, g, &secret).and_then(|ours| Ok((ours, dh::shared_secret(p, &y, &secret)?)));
    let (ours, shared) = match agreed {
        Ok(x) => x,
        Err(e) => return refuse(state, ctx, &format!("Unusable DH key: {e}")),
    };
    let Some(key) = session_crypto::session_key_from_dh(&shared) else {
        return refuse(state, ctx, "DH secret too short");
    };
    if req.identity_handle.len() > MAX_IDENTITY_LEN {
        return refuse(state, ctx, &format!("Identity handle longer than {MAX_IDENTITY_LEN} bytes"));
    }
    let claimed = (!req.identity_handle.is_empty() && req.identity_index >= 0)
        .then(|| (req.identity_handle.clone(), req.identity_index));
    let max = state.max_session_secs.max(1);
    let timeout = if req.timeout > 0 { (req.timeout as u64).min(max) } else { max };
    let mut attempts = 0;
    let id = loop {
        let id = state.new_auth_id();
        let session = Session::new(id, key, version, claimed.clone(), Duration::from_secs(timeout), false);
        match state.sessions.add(session, peer).await {
            Ok(()) => break id,
            Err(NotAdded::IdTaken) if attempts < 3 => attempts += 1,
            Err(NotAdded::Store) => {
                return error_reply(
                    state,
                    ctx,
                    ResponseCode::SERVER_BACKUP,
                    "Session store unavailable",
                    Reply::default(),
                );
            }
            Err(_) => {
                return error_reply(state, ctx, ResponseCode::SERVER_TOO_BUSY, "Too many sessions", Reply::default())
            }
        }
    };
    let data = KeyData { cipher: cipher::AES, key: PublicKey::dh(&ours, p, g).to_bytes() }.to_vec();
    let body = ResponseBody::SessionSetup(SessionSetupResponse { mode: mode::DIFFIE_HELLMAN, data });
    encode_reply(state, ctx, ResponseCode::SUCCESS, &body, false, Reply { session_id: Some(id), ..Reply::default() })
}

/// End the session the (already MAC-checked) request came in.
pub async fn terminate(state: &NativeContext, ctx: &RequestContext<'_>, session: &Session) -> Vec<u8> {
    state.sessions.end(session.id).await;
    encode_reply(
        state,
        ctx,
        ResponseCode::SUCCESS,
        &ResponseBody::Empty,
        false,
        Reply { session: Some(session), ..Reply::default() },
    )
}
