//! Public keys in the HS_PUBKEY encoding (§2.8), used by HS_PUBKEY values,
//! site records and DH session setup.
//!
//! Big integers are kept exactly as read (Java two's complement, possibly with
//! a leading 0x00) so that re-encoding reproduces the input bytes.

use crate::codec::{put_bytes, put_u16, Codec, DecodeError, DecodeResult, Reader};

pub const RSA_PUB_KEY: &[u8] = b"RSA_PUB_KEY";
pub const DSA_PUB_KEY: &[u8] = b"DSA_PUB_KEY";
pub const DH_PUB_KEY: &[u8] = b"DH_PUB_KEY";

/// Java sizes its RSA encoding buffer for four length words but writes three,
/// so every RSA key it encodes ends in four zero bytes **[vec: keys]**. We
/// write them too, to be byte-identical.
const RSA_JAVA_SLACK: usize = 4;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PublicKey {
    Rsa { exponent: Vec<u8>, modulus: Vec<u8> },
    Dsa { q: Vec<u8>, p: Vec<u8>, g: Vec<u8>, y: Vec<u8> },
    Dh { y: Vec<u8>, p: Vec<u8>, g: Vec<u8> },
}

impl PublicKey {
    /// Decode HS_PUBKEY-encoded bytes. Like Java's `Util.getPublicKeyFromBytes`,
    /// anything after the last parameter is ignored (Java's own RSA encoding
    /// carries four zero bytes there).
    pub fn decode_data(data: &[u8]) -> DecodeResult<Self> {
        Self::read(&mut Reader::new(data))
    }

    /// The key-type string written on the wire.
    pub fn key_type(&self) -> &'static [u8] {
        match self {
            PublicKey::Rsa { .. } => RSA_PUB_KEY,
            PublicKey::Dsa { .. } => DSA_PUB_KEY,
            PublicKey::Dh { .. } => DH_PUB_KEY,
        }
    }

    /// An RSA key from unsigned big-endian `e` and `n` (as crypto libraries
    /// hand them out), stored the way Java would write them.
    pub fn rsa(exponent: &[u8], modulus: &[u8]) -> Self {
        PublicKey::Rsa { exponent: java_bigint(exponent), modulus: java_bigint(modulus) }
    }

    /// A DH key from unsigned big-endian `y`, `p`, `g`, stored the way Java would write them.
    pub fn dh(y: &[u8], p: &[u8], g: &[u8]) -> Self {
        PublicKey::Dh { y: java_bigint(y), p: java_bigint(p), g: java_bigint(g) }
    }
}

impl Codec for PublicKey {
    fn encode(&self, out: &mut Vec<u8>) {
        put_bytes(out, self.key_type());
        put_u16(out, 0); // flags, reserved
        match self {
            PublicKey::Rsa { exponent, modulus } => {
                put_bytes(out, exponent);
                put_bytes(out, modulus);
                out.extend_from_slice(&[0; RSA_JAVA_SLACK]);
            }
            PublicKey::Dsa { q, p, g, y } => {
                for v in [q, p, g, y] {
                    put_bytes(out, v);
                }
            }
            PublicKey::Dh { y, p, g } => {
                for v in [y, p, g] {
                    put_bytes(out, v);
                }
            }
        }
    }

    /// Reads the key type, flags and parameters, and nothing after them.
    fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let key_type = r.bytes("public key type")?;
        let _flags = r.u16("public key flags")?;
        let mut param = |what| r.bytes(what).map(<[u8]>::to_vec);
        if key_type == RSA_PUB_KEY {
            let exponent = param("RSA exponent")?;
            let modulus = param("RSA modulus")?;
            Ok(PublicKey::Rsa { exponent, modulus })
        } else if key_type == DSA_PUB_KEY {
            let q = param("DSA q")?;
            let p = param("DSA p")?;
            let g = param("DSA g")?;
            let y = param("DSA y")?;
            Ok(PublicKey::Dsa { q, p, g, y })
        } else if key_type == DH_PUB_KEY {
            let y = param("DH y")?;
            let p = param("DH p")?;
            let g = param("DH g")?;
            Ok(PublicKey::Dh { y, p, g })
        } else {
            Err(DecodeError::Invalid {
                what: "public key type",
                detail: String::from_utf8_lossy(key_type).into_owned(),
            })
        }
    }

    /// Whole-buffer decoding is Java-lenient about trailing bytes; see
    /// [`PublicKey::decode_data`].
    fn from_bytes(buf: &[u8]) -> DecodeResult<Self> {
        Self::decode_data(buf)
    }
}

/// The magnitude of a two's-complement big integer: leading zero bytes
/// stripped, keeping one zero byte for the value zero (Java's `unsigned`).
pub fn unsigned(bytes: &[u8]) -> &[u8] {
    let zeros = bytes.iter().take_while(|&&b| b == 0).count();
    &bytes[zeros.min(bytes.len().saturating_sub(1))..]
}

/// Java's `BigInteger.toByteArray()` of a non-negative number given as
/// unsigned big-endian bytes: minimal length, with a 0x00 in front when the
/// top bit is set; zero is `[0]`.
pub fn java_bigint(unsigned_bytes: &[u8]) -> Vec<u8> {
    let zeros = unsigned_bytes.iter().take_while(|&&b| b == 0).count();
    let magnitude = &unsigned_bytes[zeros..];
    let mut out = Vec::with_capacity(magnitude.len() + 1);
    if magnitude.first().is_none_or(|&b| b & 0x80 != 0) {
        out.push(0);
    }
    out.extend_from_slice(magnitude);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rsa_sample() -> PublicKey {
        PublicKey::Rsa { exponent: vec![1, 0, 1], modulus: vec![0, 0xc3, 0x11] }
    }

    #[test]
    fn rsa_round_trip_with_java_slack() {
        let b = rsa_sample().to_bytes();
        assert!(b.ends_with(&[0, 0, 0, 0]));
        assert_eq!(PublicKey::from_bytes(&b).unwrap(), rsa_sample());
        // Without the slack (other encoders) it decodes too.
        assert_eq!(PublicKey::decode_data(&b[..b.len() - 4]).unwrap(), rsa_sample());
    }

    #[test]
    fn dsa_dh_round_trip_exact() {
        for k in [
            PublicKey::Dsa { q: vec![1], p: vec![2, 3], g: vec![4], y: vec![0, 0x85] },
            PublicKey::Dh { y: vec![0x29], p: vec![0, 0xff], g: vec![2] },
        ] {
            let b = k.to_bytes();
            let mut r = Reader::new(&b);
            assert_eq!(PublicKey::read(&mut r).unwrap(), k);
            assert!(r.is_empty());
        }
    }

    #[test]
    fn errors() {
        let mut b = Vec::new();
        put_bytes(&mut b, b"EC_PUB_KEY");
        put_u16(&mut b, 0);
        assert!(matches!(PublicKey::decode_data(&b), Err(DecodeError::Invalid { what: "public key type", .. })));
        let b = rsa_sample().to_bytes();
        let body = b.len() - 4;
        for cut in 0..body {
            assert!(PublicKey::decode_data(&b[..cut]).is_err(), "cut {cut}");
        }
        let mut lying = b.clone();
        lying[17..21].copy_from_slice(&0x0100_0000u32.to_be_bytes());
        assert!(matches!(PublicKey::decode_data(&lying), Err(DecodeError::BadLength { .. })));
    }

    #[test]
    fn bigint_helpers() {
        assert_eq!(unsigned(&[0, 0, 0x80, 1]), &[0x80, 1]);
        assert_eq!(unsigned(&[0, 0]), &[0]);
        assert_eq!(unsigned(&[]), &[] as &[u8]);
        assert_eq!(unsigned(&[5]), &[5]);
        assert_eq!(java_bigint(&[0x80, 1]), vec![0, 0x80, 1]);
        assert_eq!(java_bigint(&[0, 0, 0x7f]), vec![0x7f]);
        assert_eq!(java_bigint(&[]), vec![0]);
        assert_eq!(java_bigint(&[0, 0]), vec![0]);
        assert_eq!(PublicKey::rsa(&[1, 0, 1], &[0xc3, 0x11]), rsa_sample());
    }
}
