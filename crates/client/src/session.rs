//! Client side of sessions (§5.7): DH setup, MACed and encrypted requests,
//! decryption of encrypted responses.

use crate::{AdminError, CLIENT_VERSION};
use handled_proto::codec::{put_u32, Codec, Reader};
use handled_proto::crypto::{dh, session as crypto};
use handled_proto::data::pubkey::{unsigned, PublicKey};
use handled_proto::envelope::{Envelope, Version, ENVELOPE_LEN};
use handled_proto::header::{Header, OpFlags, ResponseCode};
use handled_proto::message::encode_unit;
use handled_proto::request::RequestBody;
use handled_proto::session::{KeyData, KeyExchange, SessionSetupRequest};
use std::sync::atomic::{AtomicI32, Ordering};

/// An established session: id, agreed key, version, and our message counter.
pub struct ClientSession {
    pub id: i32,
    pub key: [u8; 32],
    pub version: Version,
    counter: AtomicI32,
}

impl ClientSession {
    pub fn next_counter(&self) -> i32 {
        self.counter.fetch_add(1, Ordering::Relaxed)
    }
}

/// What goes into one request unit besides body and flags.
#[derive(Clone, Copy)]
pub struct UnitOptions<'a> {
    pub version: Version,
    pub session_id: i32,
    /// MAC with this session (counter taken from it) and possibly encrypt.
    pub session: Option<&'a ClientSession>,
    pub encrypt: bool,
    /// The envelope's suggested version; None: the highest we speak. A peer
    /// answers at most this version (a replication source picks its stream by it).
    pub suggested: Option<Version>,
}

impl Default for UnitOptions<'_> {
    fn default() -> Self {
        UnitOptions { version: CLIENT_VERSION, session_id: 0, session: None, encrypt: false, suggested: None }
    }
}

/// Encode a request unit: header+body, HS_MAC credential inside a session,
/// the whole message encrypted when asked. Also returns the plaintext
/// header+body (what request digests cover).
pub fn encode_unit_with(
    body: &RequestBody,
    flags: OpFlags,
    request_id: i32,
    opts: UnitOptions<'_>,
) -> (Vec<u8>, Vec<u8>) {
    let mut body_bytes = Vec::with_capacity(64);
    body.encode(&mut body_bytes);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let header = Header {
        op_code: body.op_code(),
        response_code: ResponseCode(0),
        op_flags: flags,
        site_serial: 0xffff,
        recursion_count: 0,
        expiration: (now + 12 * 3600) as u32,
        body_length: body_bytes.len() as u32,
    };
    let mut envelope =
        Envelope::new(opts.version, opts.suggested.unwrap_or(CLIENT_VERSION.max(opts.version)), request_id);
    envelope.session_id = opts.session_id;
    let mut message = Vec::with_capacity(24 + body_bytes.len() + 96);
    header.encode(&mut message);
    message.extend_from_slice(&body_bytes);
    let header_and_body = message.clone();
    let credential = opts.session.and_then(|s| crypto::mac_credential(&s.key, &envelope, &message, s.next_counter()));
    match credential {
        Some(c) => {
            let bytes = c.to_bytes();
            put_u32(&mut message, bytes.len() as u32);
            message.extend_from_slice(&bytes);
        }
        None => put_u32(&mut message, 0),
    }
    if let (true, Some(s)) = (opts.encrypt, opts.session) {
        if let Ok(ct) = crypto::encrypt(&s.key, &rand::random(), &message) {
            envelope.encrypted = true;
            message = ct;
        }
    }
    (encode_unit(&envelope, &message), header_and_body)
}

/// Decrypt an encrypted response unit in place of its message part.
pub fn decrypt_unit(unit: &[u8], session: Option<&ClientSession>) -> Result<Vec<u8>, AdminError> {
    let envelope = Envelope::read(&mut Reader::new(unit)).map_err(crate::ClientError::from)?;
    if !envelope.encrypted {
        return Ok(unit.to_vec());
    }
    let s = session.ok_or_else(|| AdminError::Session("encrypted response outside a session".into()))?;
    let plain = crypto::decrypt(&s.key, &unit[ENVELOPE_LEN..]).map_err(|e| AdminError::Session(e.to_string()))?;
    Ok(encode_unit(&Envelope { encrypted: false, ..envelope }, &plain))
}

/// A fresh DH key pair in the RFC 2409 group and the setup request carrying it.
pub fn setup_request(identity: Option<(&[u8], i32)>, timeout: i32) -> ([u8; dh::SECRET_LEN], RequestBody) {
    let p = dh::rfc2409_group2_p();
    let secret: [u8; dh::SECRET_LEN] = rand::random();
    let y = dh::public_value(&p, &[2], &secret).expect("the built-in group is valid");
    let key = PublicKey::dh(&y, &p, &[2]).to_bytes();
    let (handle, index) = identity.map_or((Vec::new(), -1), |(h, i)| (h.to_vec(), i));
    let req = SessionSetupRequest {
        timeout,
        identity_handle: handle,
        identity_index: index,
        exchange: KeyExchange::DiffieHellman(key),
    };
    (secret, RequestBody::SessionSetup(req))
}

/// The session from a setup response's data (`u32 cipher ‖ server DH key`).
pub fn finish_setup(
    secret: &[u8; dh::SECRET_LEN],
    id: i32,
    version: Version,
    data: &[u8],
) -> Result<ClientSession, AdminError> {
    let kd = KeyData::decode(data).map_err(crate::ClientError::from)?;
    if kd.cipher != handled_proto::session::cipher::AES {
        return Err(AdminError::Session(format!("server chose cipher {}, only AES is supported", kd.cipher)));
    }
    let PublicKey::Dh { y, p, .. } = PublicKey::decode_data(&kd.key).map_err(crate::ClientError::from)? else {
        return Err(AdminError::Session("setup response without a DH key".into()));
    };
    let shared = dh::shared_secret(unsigned(&p), &y, secret).map_err(|e| AdminError::Session(e.to_string()))?;
    let key = crypto::session_key_from_dh(&shared).ok_or_else(|| AdminError::Session("DH secret too short".into()))?;
    Ok(ClientSession { id, key, version, counter: AtomicI32::new(1) })
}
