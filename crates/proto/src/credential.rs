//! The credential section after a message body (§1.5) and the bytes it signs.

use crate::codec::{put_bytes, put_i32, put_u16, put_u32, put_u8, Codec, DecodeError, DecodeResult, Reader};
use crate::digest::DigestAlg;
use crate::envelope::{Envelope, Version};

/// Public-key signature credential.
pub const HS_SIGNED: &[u8] = b"HS_SIGNED";
/// Session MAC credential.
pub const HS_MAC: &[u8] = b"HS_MAC";
/// Legacy name for a DSA signature; treated as [`HS_SIGNED`].
pub const HS_DSAPUBKEY: &[u8] = b"HS_DSAPUBKEY";

/// Algorithm names the Java code writes.
pub mod alg_names {
    pub const SHA_256: &[u8] = b"SHA-256";
    pub const SHA1: &[u8] = b"SHA1";
    pub const HMAC_SHA256: &[u8] = b"HMAC-SHA256";
}

/// A non-empty credential: the bytes that follow the `u32 credential_length`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Credential {
    pub version: u8,
    pub reserved: u8,
    pub flags: u16,
    /// Always empty in practice.
    pub signer_handle: Vec<u8>,
    /// The signer-index slot, which carries the session counter (0 outside sessions).
    pub session_counter: i32,
    pub credential_type: Vec<u8>,
    pub algorithm: Vec<u8>,
    pub signature: Vec<u8>,
}

impl Credential {
    /// A credential as the Java code builds one (version, flags, signer empty).
    pub fn new(credential_type: &[u8], algorithm: &[u8], signature: Vec<u8>, session_counter: i32) -> Self {
        Credential {
            version: 0,
            reserved: 0,
            flags: 0,
            signer_handle: Vec::new(),
            session_counter,
            credential_type: credential_type.to_vec(),
            algorithm: algorithm.to_vec(),
            signature,
        }
    }

    /// `HS_SIGNED` or its legacy alias `HS_DSAPUBKEY`.
    pub fn is_signature(&self) -> bool {
        self.credential_type == HS_SIGNED || self.credential_type == HS_DSAPUBKEY
    }

    pub fn is_mac(&self) -> bool {
        self.credential_type == HS_MAC
    }

    /// The hash named by the algorithm field, if recognised.
    pub fn digest_alg(&self) -> Option<DigestAlg> {
        DigestAlg::from_name(&self.algorithm)
    }

    /// Encoded size (without the outer length word).
    pub fn encoded_len(&self) -> usize {
        1 + 1 + 2 + 4 + self.signer_handle.len() + 4 + 4 + self.credential_type.len() + 4 + self.section_len()
    }

    fn section_len(&self) -> usize {
        4 + self.algorithm.len() + 4 + self.signature.len()
    }
}

impl Codec for Credential {
    fn encode(&self, out: &mut Vec<u8>) {
        put_u8(out, self.version);
        put_u8(out, self.reserved);
        put_u16(out, self.flags);
        put_bytes(out, &self.signer_handle);
        put_i32(out, self.session_counter);
        put_bytes(out, &self.credential_type);
        put_u32(out, self.section_len() as u32);
        put_bytes(out, &self.algorithm);
        put_bytes(out, &self.signature);
    }

    fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let version = r.u8("credential version")?;
        let reserved = r.u8("credential reserved byte")?;
        let flags = r.u16("credential flags")?;
        let signer_handle = r.bytes("credential signer handle")?.to_vec();
        let session_counter = r.i32("credential session counter")?;
        let credential_type = r.bytes("credential type")?.to_vec();
        // The signature section is length-prefixed; its two fields must fill it
        // exactly so the credential has one encoding.
        let mut section = Reader::new(r.bytes("credential signature section")?);
        let algorithm = section.bytes("credential algorithm")?.to_vec();
        let signature = section.bytes("credential signature")?.to_vec();
        section.expect_end("credential signature section")?;
        Ok(Credential {
            version,
            reserved,
            flags,
            signer_handle,
            session_counter,
            credential_type,
            algorithm,
            signature,
        })
    }
}

/// The bytes a credential signs or MACs (§1.5), for a message whose envelope is
/// `envelope` (its own versions and ids) and whose header+body is `header_and_body`.
///
/// ≥ 2.8: versions, suggested versions, session id, request id, counter, header+body;
/// 2.7: the same without the suggested versions; below 2.7: header+body only.
pub fn signed_input(envelope: &Envelope, header_and_body: &[u8], session_counter: i32) -> Vec<u8> {
    let v = envelope.version;
    if v < Version::V2_7 {
        return header_and_body.to_vec();
    }
    let mut out = Vec::with_capacity(16 + header_and_body.len());
    put_u8(&mut out, v.major);
    put_u8(&mut out, v.minor);
    if v >= Version::V2_8 {
        put_u8(&mut out, envelope.suggested.major);
        put_u8(&mut out, envelope.suggested.minor);
    }
    put_i32(&mut out, envelope.session_id);
    put_i32(&mut out, envelope.request_id);
    put_i32(&mut out, session_counter);
    out.extend_from_slice(header_and_body);
    out
}

/// Reject a credential type we don't know, for callers that want a typed error.
pub fn check_credential_type(c: &Credential) -> DecodeResult<()> {
    if c.is_signature() || c.is_mac() {
        Ok(())
    } else {
        Err(DecodeError::Invalid {
            what: "credential type",
            detail: String::from_utf8_lossy(&c.credential_type).into_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_section_checks() {
        let c = Credential::new(HS_MAC, alg_names::HMAC_SHA256, vec![7; 32], 1);
        let b = c.to_bytes();
        assert_eq!(b.len(), c.encoded_len());
        assert_eq!(b.len(), 77);
        assert_eq!(Credential::from_bytes(&b).unwrap(), c);
        assert!(c.is_mac() && !c.is_signature());
        assert_eq!(c.digest_alg(), Some(DigestAlg::Sha256));

        // A section length that doesn't match its contents is rejected.
        let mut bad = b.clone();
        let pos = 4 + 4 + 4 + 4 + HS_MAC.len();
        bad[pos + 3] += 1;
        assert!(Credential::from_bytes(&bad).is_err());
        assert!(Credential::from_bytes(&b[..b.len() - 1]).is_err());
    }

    #[test]
    fn signed_input_layouts() {
        let mut e = Envelope::new(Version::V2_10, Version::V2_11, 5);
        e.session_id = 9;
        let hb = [0xAA; 24];
        let v28 = signed_input(&e, &hb, 3);
        assert_eq!(&v28[..16], &[2, 10, 2, 11, 0, 0, 0, 9, 0, 0, 0, 5, 0, 0, 0, 3]);
        e.version = Version::V2_7;
        assert_eq!(signed_input(&e, &hb, 3).len(), 14 + 24);
        e.version = Version::V2_5;
        assert_eq!(signed_input(&e, &hb, 3), hb);
    }
}
