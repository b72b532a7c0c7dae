//! Building responses the way clients expect them (§1.3, §1.4, §1.5, §7.1):
//! request id echoed, version negotiated, expiration set, flags copied, the
//! request digest when asked for, and a server signature when CT is set.

use crate::native::NativeContext;
use crate::session::Session;
use crate::site::OUR_VERSION;
use handled_proto::codec::put_u32;
use handled_proto::codec::Codec;
use handled_proto::credential::{signed_input, Credential, HS_SIGNED};
use handled_proto::crypto::session as session_crypto;
use handled_proto::digest::RequestDigest;
use handled_proto::envelope::{Envelope, Version};
use handled_proto::header::{Header, OpCode, OpFlags, ResponseCode};
use handled_proto::message::encode_unit;
use handled_proto::response::{encode_response_body, ResponseBody};

/// Clients reject responses whose expiration has passed; Java uses now + 12 h.
const EXPIRATION_SECS: u64 = 12 * 3600;

/// Flags a response copies from its request (§1.3).
const COPIED_FLAGS: u32 =
    OpFlags::CT.0 | OpFlags::CA.0 | OpFlags::AT.0 | OpFlags::ENC.0 | OpFlags::PO.0 | OpFlags::DNR.0 | OpFlags::RD.0;

/// What a response needs to know about the request it answers.
#[derive(Clone)]
pub struct RequestContext<'a> {
    pub envelope: Envelope,
    /// None when the header itself could not be decoded.
    pub header: Option<Header>,
    /// Header and body exactly as received (for the RD digest).
    pub header_and_body: &'a [u8],
}

impl RequestContext<'_> {
    /// Version of our answer: the lower of the client's suggestion and ours (§1.7).
    pub fn response_version(&self) -> Version {
        self.envelope.suggested.min(OUR_VERSION)
    }

    pub fn op_code(&self) -> OpCode {
        self.header.map(|h| h.op_code).unwrap_or(OpCode(0))
    }

    pub fn flags(&self) -> OpFlags {
        self.header.map(|h| h.op_flags).unwrap_or(OpFlags(0))
    }
}

fn expiration() -> u32 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    (now + EXPIRATION_SECS) as u32
}

/// How a response relates to sessions: the session id its envelope carries,
/// the session whose key MACs (CT) and encrypts it, and whether to encrypt.
#[derive(Clone, Copy, Default)]
pub struct Reply<'s> {
    /// Envelope session id; `None` echoes the request's.
    pub session_id: Option<i32>,
    pub session: Option<&'s Session>,
    pub encrypt: bool,
    /// Flags to set beyond those copied from the request (OW after an overwrite).
    pub extra_flags: OpFlags,
}

/// Encode one complete response unit (envelope + message). `more` sets CN for
/// all but the last message of a multi-message answer.
pub fn encode_response(
    state: &NativeContext,
    ctx: &RequestContext<'_>,
    code: ResponseCode,
    body: &ResponseBody,
    more: bool,
) -> Vec<u8> {
    encode_reply(state, ctx, code, body, more, Reply::default())
}

/// [`encode_response`] with session handling: inside a live session CT is
/// answered with an HS_MAC (the server's own counter) instead of an RSA
/// signature, and the message is encrypted when asked to.
pub fn encode_reply(
    state: &NativeContext,
    ctx: &RequestContext<'_>,
    code: ResponseCode,
    body: &ResponseBody,
    more: bool,
    reply: Reply<'_>,
) -> Vec<u8> {
    let version = ctx.response_version();
    let request_flags = ctx.flags();
    let mut flags =
        OpFlags(request_flags.0 & COPIED_FLAGS).with(OpFlags::REC).with(OpFlags::AT).with(reply.extra_flags);
    if more {
        flags = flags.with(OpFlags::CN);
    }
    let wants_digest = request_flags.contains(OpFlags::RD) || code == ResponseCode::AUTHENTICATION_NEEDED;
    if wants_digest {
        flags = flags.with(OpFlags::RD);
    }
    let digest = (wants_digest && ctx.header.is_some()).then(|| RequestDigest::compute(version, ctx.header_and_body));

    let mut body_bytes = Vec::with_capacity(256);
    encode_response_body(digest.as_ref(), body, &mut body_bytes);
    let header = Header {
        op_code: ctx.op_code(),
        response_code: code,
        op_flags: flags,
        site_serial: state.site_serial,
        recursion_count: ctx.header.map(|h| h.recursion_count).unwrap_or(0),
        expiration: expiration(),
        body_length: body_bytes.len() as u32,
    };
    let mut envelope = Envelope {
        version,
        suggested: OUR_VERSION,
        compressed: false,
        encrypted: false,
        truncated: false,
        session_id: reply.session_id.unwrap_or(ctx.envelope.session_id),
        request_id: ctx.envelope.request_id,
        sequence: 0,
        message_length: 0,
    };

    let mut message = Vec::with_capacity(24 + body_bytes.len() + 300);
    header.encode(&mut message);
    message.extend_from_slice(&body_bytes);
    let credential = if request_flags.contains(OpFlags::CT) {
        match reply.session {
            Some(s) => session_crypto::mac_credential(&s.key, &envelope, &message, s.next_server_counter()),
            None => sign(state, &envelope, &message),
        }
    } else {
        None
    };
    match credential {
        Some(credential) => {
            let cred = credential.to_bytes();
            put_u32(&mut message, cred.len() as u32);
            message.extend_from_slice(&cred);
        }
        None => put_u32(&mut message, 0),
    }
    if let (true, Some(s)) = (reply.encrypt, reply.session) {
        match session_crypto::encrypt(&s.key, &rand::random(), &message) {
            Ok(ct) => {
                envelope.encrypted = true;
                message = ct;
            }
            Err(e) => tracing::error!("cannot encrypt response: {e}"),
        }
    }
    encode_unit(&envelope, &message)
}

/// HS_SIGNED credential over the response with the server key (§1.5).
fn sign(state: &NativeContext, envelope: &Envelope, header_and_body: &[u8]) -> Option<Credential> {
    let input = signed_input(envelope, header_and_body, 0);
    match state.key.sign(&input) {
        Ok((algorithm, signature)) => Some(Credential {
            version: 0,
            reserved: 0,
            flags: 0,
            signer_handle: Vec::new(),
            session_counter: 0,
            credential_type: HS_SIGNED.to_vec(),
            algorithm: algorithm.to_vec(),
            signature,
        }),
        Err(e) => {
            tracing::error!("cannot sign response: {e}");
            None
        }
    }
}

/// An error response with a message body.
pub fn error_response(state: &NativeContext, ctx: &RequestContext<'_>, code: ResponseCode, message: &str) -> Vec<u8> {
    encode_response(state, ctx, code, &ResponseBody::Error { message: message.as_bytes().to_vec() }, false)
}

/// [`error_response`] inside a session.
pub fn error_reply(
    state: &NativeContext,
    ctx: &RequestContext<'_>,
    code: ResponseCode,
    message: &str,
    reply: Reply<'_>,
) -> Vec<u8> {
    encode_reply(state, ctx, code, &ResponseBody::Error { message: message.as_bytes().to_vec() }, false, reply)
}
