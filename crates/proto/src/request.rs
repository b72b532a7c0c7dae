//! Request bodies (§3.1). Handles stay bytes, as the Java code treats them.
//! Decoders read field by field and ignore bytes after the last field (§3.1 note).

use crate::codec::{put_bytes, put_i32, put_u32, Codec, DecodeError, DecodeResult, Reader};
use crate::envelope::Version;
use crate::header::OpCode;
use crate::replication::{DumpHandlesRequest, RetrieveTxnRequest};
use crate::session::{SessionSetupRequest, VerifyChallengeRequest};
use crate::value::HandleValue;

/// Most values a value list may hold (§1.8, §7.1).
pub const MAX_VALUES: usize = 2048;
pub use crate::handle::MAX_HANDLE_LEN;
/// Smallest encoded value record: fixed fields and three empty length words.
const MIN_VALUE_LEN: usize = 4 + 4 + 1 + 4 + 1 + 4 + 4 + 4;

/// RESOLUTION request body.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResolutionRequest {
    pub handle: Vec<u8>,
    /// Empty with `types` empty = all values.
    pub indexes: Vec<i32>,
    pub types: Vec<Vec<u8>>,
}

/// RESPONSE_TO_CHALLENGE body (op 200).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ChallengeAnswer {
    /// `HS_SECKEY` or `HS_PUBKEY`.
    pub auth_type: Vec<u8>,
    pub identity_handle: Vec<u8>,
    pub identity_index: i32,
    /// Decode with `session::SecretKeyAnswer` or `session::PublicKeyAnswer`.
    pub answer: Vec<u8>,
}

pub const AUTH_TYPE_SECKEY: &[u8] = b"HS_SECKEY";
pub const AUTH_TYPE_PUBKEY: &[u8] = b"HS_PUBKEY";

/// A decoded request body, one variant per op code.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RequestBody {
    Resolution(ResolutionRequest),
    GetSiteInfo {
        handle: Vec<u8>,
    },
    CreateHandle {
        handle: Vec<u8>,
        values: Vec<HandleValue>,
    },
    DeleteHandle {
        handle: Vec<u8>,
    },
    AddValue {
        handle: Vec<u8>,
        values: Vec<HandleValue>,
    },
    RemoveValue {
        handle: Vec<u8>,
        indexes: Vec<i32>,
    },
    ModifyValue {
        handle: Vec<u8>,
        values: Vec<HandleValue>,
    },
    ListHandles {
        prefix: Vec<u8>,
    },
    ChallengeAnswer(ChallengeAnswer),
    VerifyChallenge(VerifyChallengeRequest),
    HomeNa {
        prefix: Vec<u8>,
    },
    UnhomeNa {
        prefix: Vec<u8>,
    },
    ListHomedNas {
        handle: Vec<u8>,
    },
    SessionSetup(SessionSetupRequest),
    SessionTerminate {
        handle: Vec<u8>,
    },
    SessionExchangeKey {
        encrypted_key: Vec<u8>,
    },
    GetNextTxnId {
        handle: Vec<u8>,
    },
    RetrieveTxnLog(RetrieveTxnRequest),
    DumpHandles(DumpHandlesRequest),
    BackupServer {
        handle: Vec<u8>,
    },
    /// An op code whose body we don't parse (unknown or 0).
    /// The body is ignored; encoding it writes nothing.
    Unsupported(OpCode),
}

/// `u32 n ‖ n value records`, at most [`MAX_VALUES`].
pub(crate) fn read_values(r: &mut Reader<'_>) -> DecodeResult<Vec<HandleValue>> {
    let n = r.len("value count")?;
    if n > MAX_VALUES {
        return Err(DecodeError::BadLength { what: "value count", len: n as i64 });
    }
    if n * MIN_VALUE_LEN > r.remaining() {
        return Err(DecodeError::Truncated { what: "values", needed: n * MIN_VALUE_LEN - r.remaining() });
    }
    (0..n).map(|_| HandleValue::read(r)).collect()
}

/// Anything that can lend a [`HandleValue`]: a value, `&HandleValue`,
/// `&&HandleValue`, so encoders take slices of values or of references alike.
pub trait AsHandleValue {
    fn as_handle_value(&self) -> &HandleValue;
}

impl AsHandleValue for HandleValue {
    fn as_handle_value(&self) -> &HandleValue {
        self
    }
}

impl<T: AsHandleValue + ?Sized> AsHandleValue for &T {
    fn as_handle_value(&self) -> &HandleValue {
        (**self).as_handle_value()
    }
}

pub(crate) fn put_values<V: AsHandleValue>(out: &mut Vec<u8>, values: impl IntoIterator<Item = V>) {
    let at = out.len();
    put_u32(out, 0);
    let mut n: u32 = 0;
    for v in values {
        v.as_handle_value().encode(out);
        n += 1;
    }
    out[at..at + 4].copy_from_slice(&n.to_be_bytes());
}

/// `list<bytes>` (handles, types).
pub(crate) fn read_byte_strings(r: &mut Reader<'_>, what: &'static str) -> DecodeResult<Vec<Vec<u8>>> {
    r.list(what, 4, |r| Ok(r.bytes(what)?.to_vec()))
}

pub(crate) fn put_byte_strings(out: &mut Vec<u8>, items: &[Vec<u8>]) {
    put_u32(out, items.len() as u32);
    for i in items {
        put_bytes(out, i);
    }
}

fn read_indexes(r: &mut Reader<'_>) -> DecodeResult<Vec<i32>> {
    r.list("index list", 4, |r| r.i32("index"))
}

fn put_indexes(out: &mut Vec<u8>, indexes: &[i32]) {
    put_u32(out, indexes.len() as u32);
    for &i in indexes {
        put_i32(out, i);
    }
}

impl RequestBody {
    /// Decode the body of a request with op code `op`, as if it came in an
    /// envelope of the current version (2.10); see [`RequestBody::decode_at`].
    pub fn decode(op: OpCode, body: &[u8]) -> DecodeResult<Self> {
        Self::decode_at(Version::V2_10, op, body)
    }

    /// Decode the body of a request with op code `op` that arrived in an envelope
    /// of `version` (the envelope's own version, not the suggested one): the
    /// RETRIEVE_TXN_LOG body has a different layout below 2.9.
    pub fn decode_at(version: Version, op: OpCode, body: &[u8]) -> DecodeResult<Self> {
        let r = &mut Reader::new(body);
        let handle = |r: &mut Reader<'_>| -> DecodeResult<Vec<u8>> { Ok(r.bytes("handle")?.to_vec()) };
        Ok(match op {
            OpCode::RESOLUTION => RequestBody::Resolution(ResolutionRequest {
                handle: handle(r)?,
                indexes: read_indexes(r)?,
                types: read_byte_strings(r, "type list")?,
            }),
            OpCode::GET_SITE_INFO => RequestBody::GetSiteInfo { handle: handle(r)? },
            OpCode::CREATE_HANDLE => RequestBody::CreateHandle { handle: handle(r)?, values: read_values(r)? },
            OpCode::DELETE_HANDLE => RequestBody::DeleteHandle { handle: handle(r)? },
            OpCode::ADD_VALUE => RequestBody::AddValue { handle: handle(r)?, values: read_values(r)? },
            OpCode::REMOVE_VALUE => RequestBody::RemoveValue { handle: handle(r)?, indexes: read_indexes(r)? },
            OpCode::MODIFY_VALUE => RequestBody::ModifyValue { handle: handle(r)?, values: read_values(r)? },
            OpCode::LIST_HANDLES => RequestBody::ListHandles { prefix: handle(r)? },
            OpCode::RESPONSE_TO_CHALLENGE => RequestBody::ChallengeAnswer(ChallengeAnswer {
                auth_type: r.bytes("auth type")?.to_vec(),
                identity_handle: r.bytes("identity handle")?.to_vec(),
                identity_index: r.i32("identity index")?,
                answer: r.bytes("challenge answer")?.to_vec(),
            }),
            OpCode::VERIFY_CHALLENGE => RequestBody::VerifyChallenge(VerifyChallengeRequest::read(r)?),
            OpCode::HOME_NA => RequestBody::HomeNa { prefix: handle(r)? },
            OpCode::UNHOME_NA => RequestBody::UnhomeNa { prefix: handle(r)? },
            OpCode::LIST_HOMED_NAS => RequestBody::ListHomedNas { handle: handle(r)? },
            OpCode::SESSION_SETUP => RequestBody::SessionSetup(SessionSetupRequest::read(r)?),
            OpCode::SESSION_TERMINATE => RequestBody::SessionTerminate { handle: handle(r)? },
            OpCode::SESSION_EXCHANGEKEY => {
                RequestBody::SessionExchangeKey { encrypted_key: r.bytes("encrypted session key")?.to_vec() }
            }
            OpCode::GET_NEXT_TXN_ID => RequestBody::GetNextTxnId { handle: handle(r)? },
            OpCode::RETRIEVE_TXN_LOG => RequestBody::RetrieveTxnLog(RetrieveTxnRequest::decode(version, r)?),
            OpCode::DUMP_HANDLES => RequestBody::DumpHandles(DumpHandlesRequest::decode(r)?),
            OpCode::BACKUP_SERVER => RequestBody::BackupServer { handle: handle(r)? },
            other => RequestBody::Unsupported(other),
        })
    }

    /// Append the body's wire form to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            RequestBody::Resolution(req) => {
                put_bytes(out, &req.handle);
                put_indexes(out, &req.indexes);
                put_byte_strings(out, &req.types);
            }
            RequestBody::CreateHandle { handle, values }
            | RequestBody::AddValue { handle, values }
            | RequestBody::ModifyValue { handle, values } => {
                put_bytes(out, handle);
                put_values(out, values);
            }
            RequestBody::RemoveValue { handle, indexes } => {
                put_bytes(out, handle);
                put_indexes(out, indexes);
            }
            RequestBody::ChallengeAnswer(a) => {
                put_bytes(out, &a.auth_type);
                put_bytes(out, &a.identity_handle);
                put_i32(out, a.identity_index);
                put_bytes(out, &a.answer);
            }
            RequestBody::VerifyChallenge(v) => v.encode(out),
            RequestBody::SessionSetup(s) => s.encode(out),
            RequestBody::SessionExchangeKey { encrypted_key } => put_bytes(out, encrypted_key),
            RequestBody::RetrieveTxnLog(r) => r.encode(out),
            RequestBody::DumpHandles(d) => d.encode(out),
            RequestBody::GetSiteInfo { handle }
            | RequestBody::DeleteHandle { handle }
            | RequestBody::ListHandles { prefix: handle }
            | RequestBody::HomeNa { prefix: handle }
            | RequestBody::UnhomeNa { prefix: handle }
            | RequestBody::ListHomedNas { handle }
            | RequestBody::SessionTerminate { handle }
            | RequestBody::GetNextTxnId { handle }
            | RequestBody::BackupServer { handle } => put_bytes(out, handle),
            RequestBody::Unsupported(_) => {}
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    pub fn op_code(&self) -> OpCode {
        match self {
            RequestBody::Resolution(_) => OpCode::RESOLUTION,
            RequestBody::GetSiteInfo { .. } => OpCode::GET_SITE_INFO,
            RequestBody::CreateHandle { .. } => OpCode::CREATE_HANDLE,
            RequestBody::DeleteHandle { .. } => OpCode::DELETE_HANDLE,
            RequestBody::AddValue { .. } => OpCode::ADD_VALUE,
            RequestBody::RemoveValue { .. } => OpCode::REMOVE_VALUE,
            RequestBody::ModifyValue { .. } => OpCode::MODIFY_VALUE,
            RequestBody::ListHandles { .. } => OpCode::LIST_HANDLES,
            RequestBody::ChallengeAnswer(_) => OpCode::RESPONSE_TO_CHALLENGE,
            RequestBody::VerifyChallenge(_) => OpCode::VERIFY_CHALLENGE,
            RequestBody::HomeNa { .. } => OpCode::HOME_NA,
            RequestBody::UnhomeNa { .. } => OpCode::UNHOME_NA,
            RequestBody::ListHomedNas { .. } => OpCode::LIST_HOMED_NAS,
            RequestBody::SessionSetup(_) => OpCode::SESSION_SETUP,
            RequestBody::SessionTerminate { .. } => OpCode::SESSION_TERMINATE,
            RequestBody::SessionExchangeKey { .. } => OpCode::SESSION_EXCHANGEKEY,
            RequestBody::GetNextTxnId { .. } => OpCode::GET_NEXT_TXN_ID,
            RequestBody::RetrieveTxnLog(_) => OpCode::RETRIEVE_TXN_LOG,
            RequestBody::DumpHandles(_) => OpCode::DUMP_HANDLES,
            RequestBody::BackupServer { .. } => OpCode::BACKUP_SERVER,
            RequestBody::Unsupported(op) => *op,
        }
    }

    /// The handle (or prefix handle) the request is about, if it names one.
    /// Challenge answers, session setup, key exchange and the replication
    /// pulls (1001, 1002) name none.
    pub fn handle(&self) -> Option<&[u8]> {
        match self {
            RequestBody::Resolution(r) => Some(&r.handle),
            RequestBody::VerifyChallenge(v) => Some(&v.handle),
            RequestBody::GetSiteInfo { handle }
            | RequestBody::CreateHandle { handle, .. }
            | RequestBody::DeleteHandle { handle }
            | RequestBody::AddValue { handle, .. }
            | RequestBody::RemoveValue { handle, .. }
            | RequestBody::ModifyValue { handle, .. }
            | RequestBody::ListHandles { prefix: handle }
            | RequestBody::HomeNa { prefix: handle }
            | RequestBody::UnhomeNa { prefix: handle }
            | RequestBody::ListHomedNas { handle }
            | RequestBody::SessionTerminate { handle }
            | RequestBody::GetNextTxnId { handle }
            | RequestBody::BackupServer { handle } => Some(handle),
            RequestBody::ChallengeAnswer(_)
            | RequestBody::SessionSetup(_)
            | RequestBody::SessionExchangeKey { .. }
            | RequestBody::RetrieveTxnLog(_)
            | RequestBody::DumpHandles(_)
            | RequestBody::Unsupported(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_example_body() {
        let body = [&[0, 0, 0, 14][..], b"20.5000/test-1", &[0, 0, 0, 0, 0, 0, 0, 0]].concat();
        let req = RequestBody::decode(OpCode::RESOLUTION, &body).unwrap();
        assert_eq!(req.handle(), Some(&b"20.5000/test-1"[..]));
        assert_eq!(req.to_vec(), body);
        // Trailing bytes are tolerated.
        let mut padded = body.clone();
        padded.extend([0, 0]);
        assert_eq!(RequestBody::decode(OpCode::RESOLUTION, &padded).unwrap(), req);
        assert!(RequestBody::decode(OpCode::RESOLUTION, &body[..body.len() - 1]).is_err());
    }

    #[test]
    fn lying_counts_fail_cheaply() {
        let mut body = vec![0, 0, 0, 1, b'x'];
        body.extend(1000u32.to_be_bytes());
        assert!(RequestBody::decode(OpCode::CREATE_HANDLE, &body).is_err());
        let mut body = vec![0, 0, 0, 1, b'x'];
        body.extend(3000u32.to_be_bytes());
        body.extend(vec![0; 3000 * MIN_VALUE_LEN]);
        assert!(matches!(RequestBody::decode(OpCode::ADD_VALUE, &body), Err(DecodeError::BadLength { .. })));
        assert_eq!(RequestBody::decode(OpCode(7), b"zz").unwrap(), RequestBody::Unsupported(OpCode(7)));
    }
}
