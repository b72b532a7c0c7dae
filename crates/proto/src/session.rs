//! Wire forms of authentication and sessions (§5): session setup, verify
//! challenge, and challenge answers. Byte layouts only; no cryptography.

use crate::codec::{put_bytes, put_i32, put_u16, put_u32, put_u8, DecodeError, DecodeResult, Reader};
use crate::digest::DigestAlg;

/// Key-exchange modes of SESSION_SETUP (§5.7).
pub mod mode {
    pub const CLIENT_KEY: u16 = 1;
    pub const SERVER_KEY: u16 = 2;
    pub const HANDLE_KEY: u16 = 3;
    pub const DIFFIE_HELLMAN: u16 = 4;
}

/// Session cipher codes (§5.7).
pub mod cipher {
    pub const DES: u32 = 1;
    pub const DESEDE: u32 = 2;
    pub const AES: u32 = 3;
}

/// The Java encoder sizes the 2-byte mode as 4 bytes and leaves 2 zero bytes at
/// the end of setup bodies; we write them too so our bodies match its bytes.
const SETUP_PADDING: [u8; 2] = [0, 0];

/// Mode-specific part of a session setup request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KeyExchange {
    /// Mode 1: the client's RSA public key (HS_PUBKEY encoding).
    ClientKey(Vec<u8>),
    /// Mode 2: use the server's RSA key; nothing on the wire.
    ServerKey,
    /// Mode 3: RSA key stored in a handle value.
    HandleKey { handle: Vec<u8>, index: i32 },
    /// Mode 4: the client's DH public key (DH_PUB_KEY encoding).
    DiffieHellman(Vec<u8>),
    /// Any other mode; nothing read after the identity.
    Other(u16),
}

impl KeyExchange {
    pub fn mode(&self) -> u16 {
        match self {
            KeyExchange::ClientKey(_) => mode::CLIENT_KEY,
            KeyExchange::ServerKey => mode::SERVER_KEY,
            KeyExchange::HandleKey { .. } => mode::HANDLE_KEY,
            KeyExchange::DiffieHellman(_) => mode::DIFFIE_HELLMAN,
            KeyExchange::Other(m) => *m,
        }
    }
}

/// SESSION_SETUP request body (op 400).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SessionSetupRequest {
    /// Requested idle timeout in seconds.
    pub timeout: i32,
    /// Empty = anonymous.
    pub identity_handle: Vec<u8>,
    /// −1 = anonymous.
    pub identity_index: i32,
    pub exchange: KeyExchange,
}

impl SessionSetupRequest {
    pub fn mode(&self) -> u16 {
        self.exchange.mode()
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        put_u16(out, self.mode());
        put_i32(out, self.timeout);
        put_bytes(out, &self.identity_handle);
        put_i32(out, self.identity_index);
        match &self.exchange {
            KeyExchange::ClientKey(k) | KeyExchange::DiffieHellman(k) => put_bytes(out, k),
            KeyExchange::HandleKey { handle, index } => {
                put_bytes(out, handle);
                put_i32(out, *index);
            }
            KeyExchange::ServerKey | KeyExchange::Other(_) => {}
        }
        out.extend_from_slice(&SETUP_PADDING);
    }

    /// Decode; bytes after the fields (the padding) are ignored.
    pub fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let m = r.u16("key exchange mode")?;
        let timeout = r.i32("session timeout")?;
        let identity_handle = r.bytes("identity handle")?.to_vec();
        let identity_index = r.i32("identity index")?;
        let exchange = match m {
            mode::CLIENT_KEY => KeyExchange::ClientKey(r.bytes("exchange public key")?.to_vec()),
            mode::SERVER_KEY => KeyExchange::ServerKey,
            mode::HANDLE_KEY => KeyExchange::HandleKey {
                handle: r.bytes("exchange key handle")?.to_vec(),
                index: r.i32("exchange key index")?,
            },
            mode::DIFFIE_HELLMAN => KeyExchange::DiffieHellman(r.bytes("DH public key")?.to_vec()),
            other => KeyExchange::Other(other),
        };
        Ok(SessionSetupRequest { timeout, identity_handle, identity_index, exchange })
    }
}

/// Successful SESSION_SETUP response body, after any digest prefix.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SessionSetupResponse {
    pub mode: u16,
    /// Mode 4 (≥ 2.4): [`KeyData`] with the server's DH key; modes 1/3: RSA ciphertext;
    /// mode 2: the server's RSA public key.
    pub data: Vec<u8>,
}

impl SessionSetupResponse {
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_u16(out, self.mode);
        put_bytes(out, &self.data);
        out.extend_from_slice(&SETUP_PADDING);
    }

    /// Decode; the padding and anything else after `data` is ignored.
    pub fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        Ok(SessionSetupResponse { mode: r.u16("key exchange mode")?, data: r.bytes("session setup data")?.to_vec() })
    }
}

/// `u32 cipher code ‖ key`, unprefixed key running to the end. In a DH setup
/// response the key is the server's DH_PUB_KEY encoding; in the RSA modes it is
/// the session key itself (what gets RSA-encrypted).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeyData {
    pub cipher: u32,
    pub key: Vec<u8>,
}

impl KeyData {
    pub fn decode(data: &[u8]) -> DecodeResult<Self> {
        let mut r = Reader::new(data);
        let cipher = r.u32("cipher code")?;
        Ok(KeyData { cipher, key: r.take_rest().to_vec() })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        put_u32(out, self.cipher);
        out.extend_from_slice(&self.key);
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.key.len());
        self.encode(&mut out);
        out
    }
}

/// VERIFY_CHALLENGE request body (op 201, §5.2).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VerifyChallengeRequest {
    pub handle: Vec<u8>,
    pub index: i32,
    pub nonce: Vec<u8>,
    pub request_digest: Vec<u8>,
    /// `None`: the digest is a `bytes` (current form, any length). `Some`: the
    /// older form, a hash code byte and a digest of that hash's fixed size.
    pub digest_alg: Option<DigestAlg>,
    /// The client's answer (§5.3 / §5.4 bytes).
    pub answer: Vec<u8>,
}

impl VerifyChallengeRequest {
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_bytes(out, &self.handle);
        put_i32(out, self.index);
        put_bytes(out, &self.nonce);
        match self.digest_alg {
            None => put_bytes(out, &self.request_digest),
            Some(alg) => {
                put_u8(out, alg.code());
                out.extend_from_slice(&self.request_digest);
            }
        }
        put_bytes(out, &self.answer);
    }

    pub fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let handle = r.bytes("verify handle")?.to_vec();
        let index = r.i32("verify index")?;
        let nonce = r.bytes("verify nonce")?.to_vec();
        // A 0 first byte is the top of a length word; 1/2/3 name a fixed-size hash.
        let first = *r.rest().first().ok_or(DecodeError::Truncated { what: "verify request digest", needed: 1 })?;
        let (digest_alg, request_digest) = if first == 0 {
            (None, r.bytes("verify request digest")?.to_vec())
        } else {
            let alg = DigestAlg::from_code(first)
                .ok_or_else(|| DecodeError::Invalid { what: "verify digest hash code", detail: first.to_string() })?;
            r.u8("verify digest hash code")?;
            (Some(alg), r.take(alg.output_len(), "verify request digest")?.to_vec())
        };
        let answer = r.bytes("verify answer")?.to_vec();
        Ok(VerifyChallengeRequest { handle, index, nonce, request_digest, digest_alg, answer })
    }
}

/// Algorithm codes that start a secret-key answer (§5.3).
pub mod answer_code {
    pub const MD5: u8 = 0x01;
    pub const SHA1: u8 = 0x02;
    pub const SHA256: u8 = 0x03;
    pub const HMAC_SHA1: u8 = 0x12;
    pub const HMAC_SHA256: u8 = 0x13;
    pub const PBKDF2_HMAC_SHA1: u8 = 0x22;
}

/// Length of the pre-2.1 answer (a bare MD5). No coded answer with a MAC of
/// its algorithm's size is this short, so the length identifies it.
const LEGACY_MD5_LEN: usize = 16;

/// A secret-key (HS_SECKEY) challenge answer (§5.3).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SecretKeyAnswer {
    /// `HMAC-SHA1(PBKDF2-HMAC-SHA1(K, salt, iterations, key_bits/8), m)`.
    Pbkdf2HmacSha1 {
        salt: Vec<u8>,
        iterations: i32,
        key_bits: i32,
        mac: Vec<u8>,
    },
    HmacSha256(Vec<u8>),
    HmacSha1(Vec<u8>),
    /// `SHA256(K ‖ m ‖ K)`.
    Sha256(Vec<u8>),
    /// `SHA1(K ‖ m ‖ K)`.
    Sha1(Vec<u8>),
    /// `MD5(K ‖ m ‖ K)`.
    Md5(Vec<u8>),
    /// Pre-2.1: bare 16-byte `MD5(K ‖ m ‖ K)`, no code byte.
    LegacyMd5(Vec<u8>),
}

impl SecretKeyAnswer {
    /// Decode an answer. Bytes after the PBKDF2 fields are ignored (verifiers
    /// compare the whole re-encoding anyway); the MAC of the other forms runs to the end.
    pub fn decode(answer: &[u8]) -> DecodeResult<Self> {
        if answer.len() == LEGACY_MD5_LEN {
            return Ok(SecretKeyAnswer::LegacyMd5(answer.to_vec()));
        }
        let mut r = Reader::new(answer);
        let code = r.u8("secret key answer code")?;
        let mac = |r: &mut Reader<'_>| r.take_rest().to_vec();
        Ok(match code {
            answer_code::PBKDF2_HMAC_SHA1 => SecretKeyAnswer::Pbkdf2HmacSha1 {
                salt: r.bytes("PBKDF2 salt")?.to_vec(),
                iterations: r.i32("PBKDF2 iterations")?,
                key_bits: r.i32("PBKDF2 key length")?,
                mac: r.bytes("PBKDF2 MAC")?.to_vec(),
            },
            answer_code::HMAC_SHA256 => SecretKeyAnswer::HmacSha256(mac(&mut r)),
            answer_code::HMAC_SHA1 => SecretKeyAnswer::HmacSha1(mac(&mut r)),
            answer_code::SHA256 => SecretKeyAnswer::Sha256(mac(&mut r)),
            answer_code::SHA1 => SecretKeyAnswer::Sha1(mac(&mut r)),
            answer_code::MD5 => SecretKeyAnswer::Md5(mac(&mut r)),
            other => {
                return Err(DecodeError::Invalid { what: "secret key answer code", detail: format!("{other:#04x}") })
            }
        })
    }

    /// The code byte (`None` for the legacy form).
    pub fn code(&self) -> Option<u8> {
        Some(match self {
            SecretKeyAnswer::Pbkdf2HmacSha1 { .. } => answer_code::PBKDF2_HMAC_SHA1,
            SecretKeyAnswer::HmacSha256(_) => answer_code::HMAC_SHA256,
            SecretKeyAnswer::HmacSha1(_) => answer_code::HMAC_SHA1,
            SecretKeyAnswer::Sha256(_) => answer_code::SHA256,
            SecretKeyAnswer::Sha1(_) => answer_code::SHA1,
            SecretKeyAnswer::Md5(_) => answer_code::MD5,
            SecretKeyAnswer::LegacyMd5(_) => return None,
        })
    }

    /// The MAC or hash carried by the answer.
    pub fn mac(&self) -> &[u8] {
        match self {
            SecretKeyAnswer::Pbkdf2HmacSha1 { mac, .. }
            | SecretKeyAnswer::HmacSha256(mac)
            | SecretKeyAnswer::HmacSha1(mac)
            | SecretKeyAnswer::Sha256(mac)
            | SecretKeyAnswer::Sha1(mac)
            | SecretKeyAnswer::Md5(mac)
            | SecretKeyAnswer::LegacyMd5(mac) => mac,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        if let Some(code) = self.code() {
            put_u8(out, code);
        }
        if let SecretKeyAnswer::Pbkdf2HmacSha1 { salt, iterations, key_bits, mac } = self {
            put_bytes(out, salt);
            put_i32(out, *iterations);
            put_i32(out, *key_bits);
            put_bytes(out, mac);
        } else {
            out.extend_from_slice(self.mac());
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }
}

/// A public-key (HS_PUBKEY) challenge answer (§5.4): `utf8 hash-name ‖ bytes signature`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PublicKeyAnswer {
    pub hash_name: Vec<u8>,
    pub signature: Vec<u8>,
}

impl PublicKeyAnswer {
    /// Decode; trailing bytes are ignored.
    pub fn decode(answer: &[u8]) -> DecodeResult<Self> {
        let mut r = Reader::new(answer);
        Ok(PublicKeyAnswer {
            hash_name: r.bytes("answer hash name")?.to_vec(),
            signature: r.bytes("answer signature")?.to_vec(),
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        put_bytes(out, &self.hash_name);
        put_bytes(out, &self.signature);
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// The hash named by `hash_name`, if recognised.
    pub fn digest_alg(&self) -> Option<DigestAlg> {
        DigestAlg::from_name(&self.hash_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_key_answers() {
        let pb =
            SecretKeyAnswer::Pbkdf2HmacSha1 { salt: vec![1; 16], iterations: 10_000, key_bits: 160, mac: vec![2; 20] };
        for a in [
            pb,
            SecretKeyAnswer::HmacSha256(vec![3; 32]),
            SecretKeyAnswer::HmacSha1(vec![3; 20]),
            SecretKeyAnswer::Sha256(vec![3; 32]),
            SecretKeyAnswer::Sha1(vec![3; 20]),
            SecretKeyAnswer::Md5(vec![3; 16]),
            SecretKeyAnswer::LegacyMd5(vec![3; 16]),
        ] {
            assert_eq!(SecretKeyAnswer::decode(&a.to_vec()).unwrap(), a);
        }
        assert!(SecretKeyAnswer::decode(&[0x44, 1]).is_err());
        assert!(SecretKeyAnswer::decode(&[]).is_err());
        assert!(SecretKeyAnswer::decode(&[0x22, 0, 0]).is_err());
    }

    #[test]
    fn verify_request_forms() {
        let mut v = VerifyChallengeRequest {
            handle: b"20.5000/ADMIN".to_vec(),
            index: 300,
            nonce: vec![9; 16],
            request_digest: vec![1; 32],
            digest_alg: None,
            answer: vec![5; 3],
        };
        for alg in [None, Some(DigestAlg::Sha256)] {
            v.digest_alg = alg;
            let mut b = Vec::new();
            v.encode(&mut b);
            assert_eq!(VerifyChallengeRequest::read(&mut Reader::new(&b)).unwrap(), v);
        }
    }

    #[test]
    fn setup_request_modes() {
        for exchange in [
            KeyExchange::ClientKey(vec![1, 2]),
            KeyExchange::ServerKey,
            KeyExchange::HandleKey { handle: b"h".to_vec(), index: 2 },
            KeyExchange::DiffieHellman(vec![3]),
            KeyExchange::Other(9),
        ] {
            let req = SessionSetupRequest { timeout: 86_400, identity_handle: vec![], identity_index: -1, exchange };
            let mut b = Vec::new();
            req.encode(&mut b);
            assert_eq!(&b[b.len() - 2..], &[0, 0]);
            assert_eq!(SessionSetupRequest::read(&mut Reader::new(&b)).unwrap(), req);
        }
        let kd = KeyData { cipher: cipher::AES, key: vec![7; 5] };
        assert_eq!(KeyData::decode(&kd.to_vec()).unwrap(), kd);
    }
}
