//! Request digests (§1.4) and the hash algorithms named in the protocol.

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256};

use crate::codec::{put_bytes, put_u8, Codec, DecodeError, DecodeResult, Reader};
use crate::envelope::Version;

/// A hash the protocol names by code (1 MD5, 2 SHA-1, 3 SHA-256).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DigestAlg {
    Md5,
    Sha1,
    Sha256,
}

impl DigestAlg {
    /// The request-digest hash a responder uses at `response_version`.
    pub fn for_version(response_version: Version) -> Self {
        if response_version >= Version::V2_7 {
            DigestAlg::Sha256
        } else if response_version >= Version::V2_1 {
            DigestAlg::Sha1
        } else {
            DigestAlg::Md5
        }
    }

    pub fn code(self) -> u8 {
        match self {
            DigestAlg::Md5 => 1,
            DigestAlg::Sha1 => 2,
            DigestAlg::Sha256 => 3,
        }
    }

    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(DigestAlg::Md5),
            2 => Some(DigestAlg::Sha1),
            3 => Some(DigestAlg::Sha256),
            _ => None,
        }
    }

    /// Digest size in bytes.
    pub fn output_len(self) -> usize {
        match self {
            DigestAlg::Md5 => 16,
            DigestAlg::Sha1 => 20,
            DigestAlg::Sha256 => 32,
        }
    }

    pub fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            DigestAlg::Md5 => Md5::digest(data).to_vec(),
            DigestAlg::Sha1 => Sha1::digest(data).to_vec(),
            DigestAlg::Sha256 => Sha256::digest(data).to_vec(),
        }
    }

    /// Parse a hash name as found in credentials and answers (§1.5, §5.4):
    /// `SHA-256`/`SHA256`/`SHA2`, `SHA1`/`SHA-1`/`SHA`, `MD5`, HMAC names, or a
    /// single code byte. ASCII case and `-`/`_` are ignored.
    pub fn from_name(name: &[u8]) -> Option<Self> {
        if let [code] = name {
            if let Some(alg) = Self::from_code(*code) {
                return Some(alg);
            }
        }
        let mut norm = [0u8; 32];
        let mut n = 0;
        for &b in name {
            if b == b'-' || b == b'_' {
                continue;
            }
            if n == norm.len() {
                return None;
            }
            norm[n] = b.to_ascii_uppercase();
            n += 1;
        }
        let norm = &norm[..n];
        let norm = norm.strip_prefix(b"HMAC").unwrap_or(norm);
        match norm {
            b"SHA256" | b"SHA2" => Some(DigestAlg::Sha256),
            b"SHA1" | b"SHA" => Some(DigestAlg::Sha1),
            b"MD5" => Some(DigestAlg::Md5),
            _ => None,
        }
    }

    /// The name the Java code writes for this hash (`SHA-256`, `SHA1`, `MD5`).
    pub fn java_name(self) -> &'static str {
        match self {
            DigestAlg::Md5 => "MD5",
            DigestAlg::Sha1 => "SHA1",
            DigestAlg::Sha256 => "SHA-256",
        }
    }
}

/// The digest of a request that prefixes a response body (§1.4).
///
/// `legacy` is the pre-2.1 form: a length-prefixed (MD5) digest whose length
/// word's first byte takes the place of the code byte.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RequestDigest {
    pub alg: DigestAlg,
    pub legacy: bool,
    pub digest: Vec<u8>,
}

impl RequestDigest {
    /// Digest `header_and_body` (of the request, as received) the way a
    /// responder at `response_version` must.
    pub fn compute(response_version: Version, header_and_body: &[u8]) -> Self {
        let alg = DigestAlg::for_version(response_version);
        RequestDigest { alg, legacy: response_version < Version::V2_1, digest: alg.digest(header_and_body) }
    }

    /// Does this digest match `header_and_body` (a request as the client sent it)?
    pub fn matches(&self, header_and_body: &[u8]) -> bool {
        self.alg.digest(header_and_body) == self.digest
    }

    /// Encoded size.
    pub fn encoded_len(&self) -> usize {
        if self.legacy {
            4 + self.digest.len()
        } else {
            1 + self.digest.len()
        }
    }
}

impl Codec for RequestDigest {
    fn encode(&self, out: &mut Vec<u8>) {
        if self.legacy {
            put_bytes(out, &self.digest);
        } else {
            put_u8(out, self.alg.code());
            out.extend_from_slice(&self.digest);
        }
    }

    fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let code = *r.rest().first().ok_or(DecodeError::Truncated { what: "request digest", needed: 1 })?;
        if code == 0 {
            let digest = r.bytes("legacy request digest")?.to_vec();
            return Ok(RequestDigest { alg: DigestAlg::Md5, legacy: true, digest });
        }
        let alg = DigestAlg::from_code(code)
            .ok_or_else(|| DecodeError::Invalid { what: "request digest hash code", detail: code.to_string() })?;
        r.u8("request digest hash code")?;
        let digest = r.take(alg.output_len(), "request digest")?.to_vec();
        Ok(RequestDigest { alg, legacy: false, digest })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_names() {
        assert_eq!(DigestAlg::for_version(Version::V2_11), DigestAlg::Sha256);
        assert_eq!(DigestAlg::for_version(Version::V2_6), DigestAlg::Sha1);
        assert_eq!(DigestAlg::for_version(Version::V2_0), DigestAlg::Md5);
        for (n, a) in [
            ("SHA-256", DigestAlg::Sha256),
            ("sha256", DigestAlg::Sha256),
            ("SHA1", DigestAlg::Sha1),
            ("SHA-1", DigestAlg::Sha1),
            ("MD5", DigestAlg::Md5),
            ("HMAC-SHA256", DigestAlg::Sha256),
            ("\u{3}", DigestAlg::Sha256),
        ] {
            assert_eq!(DigestAlg::from_name(n.as_bytes()), Some(a), "{n}");
        }
        assert_eq!(DigestAlg::from_name(b"SHA-512"), None);
        assert_eq!(DigestAlg::from_name(&[b'a'; 100]), None);
    }

    #[test]
    fn digest_forms() {
        let d = RequestDigest::compute(Version::V2_10, b"abc");
        assert_eq!(d.digest.len(), 32);
        let b = d.to_bytes();
        assert_eq!(b[0], 3);
        assert_eq!(RequestDigest::from_bytes(&b).unwrap(), d);
        assert!(d.matches(b"abc"));

        let old = RequestDigest::compute(Version::V2_0, b"abc");
        assert!(old.legacy);
        let b = old.to_bytes();
        assert_eq!(&b[..4], &[0, 0, 0, 16]);
        assert_eq!(RequestDigest::from_bytes(&b).unwrap(), old);

        assert!(RequestDigest::from_bytes(&[9]).is_err());
        assert!(RequestDigest::from_bytes(&[3, 1, 2]).is_err());
        assert!(RequestDigest::from_bytes(&[]).is_err());
    }
}
