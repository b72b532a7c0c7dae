//! Response bodies (§3.1, §3.2) with their optional request-digest prefix (§1.4).

use crate::codec::{put_bytes, put_u64, put_u8, Codec, DecodeError, DecodeResult, Reader};
use crate::digest::{DigestAlg, RequestDigest};
use crate::envelope::Version;
use crate::header::{Header, OpCode, OpFlags, ResponseCode};
pub use crate::request::AsHandleValue;
use crate::request::{put_byte_strings, put_values, read_byte_strings, read_values, MAX_HANDLE_LEN};
use crate::session::SessionSetupResponse;
use crate::value::HandleValue;

/// A decoded response body. Which variant applies follows from the header's
/// op code and response code (see [`decode_response_body`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ResponseBody {
    /// Success of RESOLUTION.
    Resolution { handle: Vec<u8>, values: Vec<HandleValue> },
    /// Success of GET_SITE_INFO: the raw HS_SITE record, running to the end of the body.
    SiteInfo(Vec<u8>),
    /// Success of CREATE_HANDLE; `None` when the body is empty.
    Created { handle: Option<Vec<u8>> },
    /// Success of ops without a result (delete, add, remove, modify, home, unhome,
    /// session terminate/exchange key, backup).
    Empty,
    /// Success of LIST_HANDLES / LIST_HOMED_NAS (one message of a CN series).
    HandleList(Vec<Vec<u8>>),
    /// Code 402: the nonce to sign.
    Challenge { nonce: Vec<u8> },
    /// Success of VERIFY_CHALLENGE.
    VerifyResult { valid: bool },
    /// Success of SESSION_SETUP.
    SessionSetup(SessionSetupResponse),
    /// Success of GET_NEXT_TXN_ID.
    NextTxnId(u64),
    /// Success of RETRIEVE_TXN_LOG (`u8` flags, bit 0); the stream follows.
    RetrieveTxnLog { keep_alive: bool },
    /// Success of DUMP_HANDLES (empty body); the stream follows.
    DumpHandles,
    /// Codes 302/303. The value list is optional on the wire; a missing list
    /// decodes as empty and is always written (count 0 when empty).
    Referral { handle: Vec<u8>, values: Vec<HandleValue> },
    /// Every other code: a message (may be empty).
    Error { message: Vec<u8> },
}

impl ResponseBody {
    pub fn error(message: impl Into<Vec<u8>>) -> Self {
        ResponseBody::Error { message: message.into() }
    }
}

/// Bit of the RETRIEVE_TXN_LOG response flags: the connection stays open after the stream.
const KEEP_ALIVE: u8 = 0x01;

fn read_limited_handle(r: &mut Reader<'_>, what: &'static str) -> DecodeResult<Vec<u8>> {
    let n = r.len(what)?;
    if n > MAX_HANDLE_LEN {
        return Err(DecodeError::BadLength { what, len: n as i64 });
    }
    Ok(r.take(n, what)?.to_vec())
}

/// Decode a response body. `version` is the response envelope's version: it
/// selects the pre-2.1 layouts of challenges (nonce then `bytes` MD5 digest, no
/// prefix) and errors (message optional), and the pre-2.5 meaning of 303.
///
/// The digest prefix is read when the header has RD, or the code is 402 (which
/// always carries one from ≥ 2.1 responders).
pub fn decode_response_body(
    header: &Header,
    version: Version,
    body: &[u8],
) -> DecodeResult<(Option<RequestDigest>, ResponseBody)> {
    let code = header.response_code;
    let r = &mut Reader::new(body);
    let old_challenge = code == ResponseCode::AUTHENTICATION_NEEDED && version.is_pre_2_1();
    let mut digest =
        if !old_challenge && (header.op_flags.contains(OpFlags::RD) || code == ResponseCode::AUTHENTICATION_NEEDED) {
            Some(RequestDigest::read(r)?)
        } else {
            None
        };

    let body = match code {
        ResponseCode::SUCCESS => decode_success(header.op_code, r)?,
        ResponseCode::SERVICE_REFERRAL => decode_referral(r)?,
        // Before 2.5 this code meant "server backup", with a message body.
        ResponseCode::PREFIX_REFERRAL if version >= Version::V2_5 => decode_referral(r)?,
        ResponseCode::AUTHENTICATION_NEEDED => {
            let nonce = r.bytes("challenge nonce")?.to_vec();
            if old_challenge {
                let d = r.bytes("legacy challenge digest")?.to_vec();
                digest = Some(RequestDigest { alg: DigestAlg::Md5, legacy: true, digest: d });
            }
            ResponseBody::Challenge { nonce }
        }
        c if c.has_message_body() || c == ResponseCode::PREFIX_REFERRAL => {
            if version.is_pre_2_1() && r.remaining() < 4 {
                ResponseBody::Error { message: Vec::new() }
            } else {
                ResponseBody::Error { message: r.bytes("error message")?.to_vec() }
            }
        }
        other => return Err(DecodeError::Invalid { what: "response code", detail: other.to_string() }),
    };
    Ok((digest, body))
}

fn decode_success(op: OpCode, r: &mut Reader<'_>) -> DecodeResult<ResponseBody> {
    Ok(match op {
        OpCode::RESOLUTION => {
            ResponseBody::Resolution { handle: read_limited_handle(r, "handle")?, values: read_values(r)? }
        }
        OpCode::GET_SITE_INFO => ResponseBody::SiteInfo(r.take_rest().to_vec()),
        OpCode::CREATE_HANDLE => {
            if r.is_empty() {
                ResponseBody::Created { handle: None }
            } else {
                ResponseBody::Created { handle: Some(r.bytes("created handle")?.to_vec()) }
            }
        }
        OpCode::LIST_HANDLES | OpCode::LIST_HOMED_NAS => ResponseBody::HandleList(read_byte_strings(r, "handle list")?),
        OpCode::VERIFY_CHALLENGE => ResponseBody::VerifyResult { valid: r.u8("verify result")? & 0x01 != 0 },
        OpCode::SESSION_SETUP => ResponseBody::SessionSetup(SessionSetupResponse::read(r)?),
        OpCode::GET_NEXT_TXN_ID => ResponseBody::NextTxnId(r.u64("next transaction id")?),
        OpCode::RETRIEVE_TXN_LOG => {
            ResponseBody::RetrieveTxnLog { keep_alive: r.u8("retrieve-transactions flags")? & KEEP_ALIVE != 0 }
        }
        OpCode::DUMP_HANDLES => ResponseBody::DumpHandles,
        OpCode::DELETE_HANDLE
        | OpCode::ADD_VALUE
        | OpCode::REMOVE_VALUE
        | OpCode::MODIFY_VALUE
        | OpCode::HOME_NA
        | OpCode::UNHOME_NA
        | OpCode::SESSION_TERMINATE
        | OpCode::SESSION_EXCHANGEKEY
        | OpCode::BACKUP_SERVER => ResponseBody::Empty,
        other => return Err(DecodeError::Invalid { what: "op code of success response", detail: other.to_string() }),
    })
}

fn decode_referral(r: &mut Reader<'_>) -> DecodeResult<ResponseBody> {
    let handle = read_limited_handle(r, "referral handle")?;
    let values = if r.is_empty() { Vec::new() } else { read_values(r)? };
    Ok(ResponseBody::Referral { handle, values })
}

fn put_digest(digest: Option<&RequestDigest>, out: &mut Vec<u8>) {
    if let Some(d) = digest {
        d.encode(out);
    }
}

/// Append `[digest] ‖ body` in the ≥ 2.1 layout. The caller sets RD in the
/// header iff `digest` is given (or the code is 402).
pub fn encode_response_body(digest: Option<&RequestDigest>, body: &ResponseBody, out: &mut Vec<u8>) {
    put_digest(digest, out);
    match body {
        ResponseBody::Resolution { handle, values } | ResponseBody::Referral { handle, values } => {
            put_bytes(out, handle);
            put_values(out, values);
        }
        ResponseBody::SiteInfo(record) => out.extend_from_slice(record),
        ResponseBody::Created { handle } => {
            if let Some(h) = handle {
                put_bytes(out, h);
            }
        }
        ResponseBody::Empty => {}
        ResponseBody::HandleList(handles) => put_byte_strings(out, handles),
        ResponseBody::Challenge { nonce } => put_bytes(out, nonce),
        ResponseBody::VerifyResult { valid } => put_u8(out, u8::from(*valid)),
        ResponseBody::SessionSetup(s) => s.encode(out),
        ResponseBody::NextTxnId(id) => put_u64(out, *id),
        ResponseBody::RetrieveTxnLog { keep_alive } => put_u8(out, if *keep_alive { KEEP_ALIVE } else { 0 }),
        ResponseBody::DumpHandles => {}
        ResponseBody::Error { message } => put_bytes(out, message),
    }
}

/// Like [`encode_response_body`], but for a response at `version`: a challenge to
/// a pre-2.1 peer is written `bytes nonce ‖ bytes digest` with no prefix, the
/// layout those peers read.
pub fn encode_response_body_for_version(
    version: Version,
    digest: Option<&RequestDigest>,
    body: &ResponseBody,
    out: &mut Vec<u8>,
) {
    match body {
        ResponseBody::Challenge { nonce } if version.is_pre_2_1() => {
            put_bytes(out, nonce);
            put_bytes(out, digest.map_or(&[][..], |d| &d.digest));
        }
        _ => encode_response_body(digest, body, out),
    }
}

/// Resolution success body without building a [`ResponseBody`]: the server can
/// pass borrowed values (e.g. a filtered view of a stored record).
pub fn encode_resolution_body<V: AsHandleValue>(
    digest: Option<&RequestDigest>,
    handle: &[u8],
    values: impl IntoIterator<Item = V>,
    out: &mut Vec<u8>,
) {
    put_digest(digest, out);
    put_bytes(out, handle);
    put_values(out, values);
}

/// Resolution success body from already encoded value records (each one
/// complete §2.2 record), for servers that keep values in wire form.
pub fn encode_resolution_body_raw<'v>(
    digest: Option<&RequestDigest>,
    handle: &[u8],
    encoded_values: impl IntoIterator<Item = &'v [u8]>,
    out: &mut Vec<u8>,
) {
    put_digest(digest, out);
    put_bytes(out, handle);
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    let mut n: u32 = 0;
    for v in encoded_values {
        out.extend_from_slice(v);
        n += 1;
    }
    out[at..at + 4].copy_from_slice(&n.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(op: OpCode, code: ResponseCode, flags: OpFlags) -> Header {
        Header { response_code: code, ..Header::request(op, flags) }
    }

    #[test]
    fn variants_by_code() {
        let d = RequestDigest::compute(Version::V2_10, b"req");
        let cases = [
            (
                OpCode::RESOLUTION,
                ResponseCode::SUCCESS,
                ResponseBody::Resolution { handle: b"a/b".to_vec(), values: vec![HandleValue::new(1, "URL", "x")] },
            ),
            (OpCode::CREATE_HANDLE, ResponseCode::SUCCESS, ResponseBody::Created { handle: None }),
            (OpCode::CREATE_HANDLE, ResponseCode::SUCCESS, ResponseBody::Created { handle: Some(b"a/b".to_vec()) }),
            (OpCode::DELETE_HANDLE, ResponseCode::SUCCESS, ResponseBody::Empty),
            (OpCode::LIST_HOMED_NAS, ResponseCode::SUCCESS, ResponseBody::HandleList(vec![b"0.NA/1".to_vec()])),
            (OpCode::VERIFY_CHALLENGE, ResponseCode::SUCCESS, ResponseBody::VerifyResult { valid: true }),
            (OpCode::GET_NEXT_TXN_ID, ResponseCode::SUCCESS, ResponseBody::NextTxnId(u64::MAX - 3)),
            (OpCode::GET_SITE_INFO, ResponseCode::SUCCESS, ResponseBody::SiteInfo(vec![0, 1, 2])),
            (
                OpCode::RESOLUTION,
                ResponseCode::SERVICE_REFERRAL,
                ResponseBody::Referral { handle: vec![], values: vec![] },
            ),
            (
                OpCode::CREATE_HANDLE,
                ResponseCode::AUTHENTICATION_NEEDED,
                ResponseBody::Challenge { nonce: vec![1; 16] },
            ),
            (OpCode::RESERVED, ResponseCode::PROTOCOL_ERROR, ResponseBody::error("bad")),
        ];
        for (op, code, body) in cases {
            for dig in [None, Some(&d)] {
                let flags = if dig.is_some() || code == ResponseCode::AUTHENTICATION_NEEDED {
                    OpFlags::RD
                } else {
                    OpFlags::NONE
                };
                let dig = if code == ResponseCode::AUTHENTICATION_NEEDED { Some(&d) } else { dig };
                let mut out = Vec::new();
                encode_response_body(dig, &body, &mut out);
                let got = decode_response_body(&header(op, code, flags), Version::V2_10, &out).unwrap();
                assert_eq!(got, (dig.cloned(), body.clone()), "{op} {code}");
            }
        }
    }

    #[test]
    fn old_layouts() {
        let d = RequestDigest::compute(Version::V2_0, b"req");
        let ch = ResponseBody::Challenge { nonce: vec![4; 16] };
        let mut out = Vec::new();
        encode_response_body_for_version(Version::V2_0, Some(&d), &ch, &mut out);
        let h = header(OpCode::RESOLUTION, ResponseCode::AUTHENTICATION_NEEDED, OpFlags::NONE);
        assert_eq!(decode_response_body(&h, Version::V2_0, &out).unwrap(), (Some(d), ch));

        let h = header(OpCode::RESOLUTION, ResponseCode::HANDLE_NOT_FOUND, OpFlags::NONE);
        assert_eq!(decode_response_body(&h, Version::V2_0, &[]).unwrap().1, ResponseBody::error(""));
        assert!(decode_response_body(&h, Version::V2_1, &[]).is_err());

        let h = header(OpCode::RESOLUTION, ResponseCode::PREFIX_REFERRAL, OpFlags::NONE);
        assert_eq!(decode_response_body(&h, Version::V2_4, &[0, 0, 0, 0]).unwrap().1, ResponseBody::error(""));
        assert!(decode_response_body(&header(OpCode::RESOLUTION, ResponseCode(9), OpFlags::NONE), Version::V2_10, &[])
            .is_err());
    }

    #[test]
    fn fast_paths_match() {
        let vals = [HandleValue::new(1, "URL", "x"), HandleValue::new(2, "EMAIL", "y")];
        let d = RequestDigest::compute(Version::V2_10, b"req");
        let mut a = Vec::new();
        encode_response_body(
            Some(&d),
            &ResponseBody::Resolution { handle: b"h".to_vec(), values: vals.to_vec() },
            &mut a,
        );
        let mut b = Vec::new();
        encode_resolution_body(Some(&d), b"h", vals.iter(), &mut b);
        let refs: Vec<&HandleValue> = vals.iter().collect();
        let mut b2 = Vec::new();
        encode_resolution_body(Some(&d), b"h", &refs[..], &mut b2);
        assert_eq!(b, b2);
        let enc: Vec<Vec<u8>> = vals.iter().map(|v| v.to_bytes()).collect();
        let mut c = Vec::new();
        encode_resolution_body_raw(Some(&d), b"h", enc.iter().map(|v| &v[..]), &mut c);
        assert_eq!(a, b);
        assert_eq!(a, c);
    }
}
