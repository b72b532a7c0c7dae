//! The 20-byte message envelope (§1.1) and protocol versions (§1.7).

use std::fmt;

use crate::codec::{put_i32, put_u8, Codec, DecodeError, DecodeResult, Reader};

pub const ENVELOPE_LEN: usize = 20;
/// Largest message (after the envelope) a receiver accepts.
pub const MAX_MESSAGE_LEN: usize = 262_144;

const FLAG_COMPRESSED: u8 = 0x80;
const FLAG_ENCRYPTED: u8 = 0x40;
const FLAG_TRUNCATED: u8 = 0x20;
/// Byte 2 carries the suggested major version in its low two bits.
const SUGGESTED_MAJOR_MASK: u8 = 0x03;

/// A protocol version `major.minor`; ordered so `v >= Version::V2_7` reads naturally.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u8,
    pub minor: u8,
}

impl Version {
    pub const fn new(major: u8, minor: u8) -> Self {
        Version { major, minor }
    }

    pub const V2_0: Version = Version::new(2, 0);
    pub const V2_1: Version = Version::new(2, 1);
    pub const V2_2: Version = Version::new(2, 2);
    pub const V2_3: Version = Version::new(2, 3);
    pub const V2_4: Version = Version::new(2, 4);
    pub const V2_5: Version = Version::new(2, 5);
    pub const V2_6: Version = Version::new(2, 6);
    pub const V2_7: Version = Version::new(2, 7);
    pub const V2_8: Version = Version::new(2, 8);
    pub const V2_9: Version = Version::new(2, 9);
    pub const V2_10: Version = Version::new(2, 10);
    pub const V2_11: Version = Version::new(2, 11);

    /// True for the pre-2.1 message layouts (2.0, and 5.x which 2.0 peers were
    /// misidentified as): no RD prefix in challenges, optional error message.
    pub const fn is_pre_2_1(self) -> bool {
        self.major == 5 || (self.major == 2 && self.minor == 0)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The envelope in front of every message (or datagram of a message).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Envelope {
    /// Version this message is encoded in.
    pub version: Version,
    /// Highest version the sender speaks (equal to `version` for old peers).
    pub suggested: Version,
    pub compressed: bool,
    pub encrypted: bool,
    pub truncated: bool,
    pub session_id: i32,
    pub request_id: i32,
    /// Datagram number of a multi-datagram UDP message, else 0.
    pub sequence: i32,
    /// Bytes of message following the envelope (whole message, even on UDP).
    pub message_length: i32,
}

impl Envelope {
    /// A plain envelope: no flags, no session, sequence 0, length 0.
    pub const fn new(version: Version, suggested: Version, request_id: i32) -> Self {
        Envelope {
            version,
            suggested,
            compressed: false,
            encrypted: false,
            truncated: false,
            session_id: 0,
            request_id,
            sequence: 0,
            message_length: 0,
        }
    }

    /// Check the message length against `0..=MAX_MESSAGE_LEN`. Kept apart from
    /// decoding so a receiver can always read the request id to answer with.
    pub fn check_message_length(&self) -> DecodeResult<usize> {
        let len = self.message_length;
        if len < 0 || len as usize > MAX_MESSAGE_LEN {
            return Err(DecodeError::BadLength { what: "message length", len: len as i64 });
        }
        Ok(len as usize)
    }

    /// Byte 2 on the wire: flag bits with the suggested major version.
    fn flags_byte(&self) -> u8 {
        let mut b = self.suggested.major & SUGGESTED_MAJOR_MASK;
        if self.compressed {
            b |= FLAG_COMPRESSED;
        }
        if self.encrypted {
            b |= FLAG_ENCRYPTED;
        }
        if self.truncated {
            b |= FLAG_TRUNCATED;
        }
        b
    }

    /// The 20 wire bytes, without allocating.
    pub fn to_array(&self) -> [u8; ENVELOPE_LEN] {
        let mut a = [0u8; ENVELOPE_LEN];
        a[0] = self.version.major;
        a[1] = self.version.minor;
        a[2] = self.flags_byte();
        a[3] = self.suggested.minor;
        a[4..8].copy_from_slice(&self.session_id.to_be_bytes());
        a[8..12].copy_from_slice(&self.request_id.to_be_bytes());
        a[12..16].copy_from_slice(&self.sequence.to_be_bytes());
        a[16..20].copy_from_slice(&self.message_length.to_be_bytes());
        a
    }

    /// Decode the envelope at the start of `buf` (fails only if it is shorter than 20 bytes).
    pub fn parse(buf: &[u8]) -> DecodeResult<Self> {
        Self::read(&mut Reader::new(buf))
    }
}

impl Codec for Envelope {
    fn encode(&self, out: &mut Vec<u8>) {
        put_u8(out, self.version.major);
        put_u8(out, self.version.minor);
        put_u8(out, self.flags_byte());
        put_u8(out, self.suggested.minor);
        put_i32(out, self.session_id);
        put_i32(out, self.request_id);
        put_i32(out, self.sequence);
        put_i32(out, self.message_length);
    }

    fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let b = r.take(ENVELOPE_LEN, "envelope")?;
        let word = |i: usize| i32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let version = Version::new(b[0], b[1]);
        let suggested_major = b[2] & SUGGESTED_MAJOR_MASK;
        let suggested = if suggested_major == 0 { version } else { Version::new(suggested_major, b[3]) };
        Ok(Envelope {
            version,
            suggested,
            compressed: b[2] & FLAG_COMPRESSED != 0,
            encrypted: b[2] & FLAG_ENCRYPTED != 0,
            truncated: b[2] & FLAG_TRUNCATED != 0,
            session_id: word(4),
            request_id: word(8),
            sequence: word(12),
            message_length: word(16),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_example() {
        let b = [2, 10, 2, 11, 0, 0, 0, 0, 0x1a, 0x2b, 0x3c, 0x4d, 0, 0, 0, 0, 0, 0, 0, 0x36];
        let e = Envelope::parse(&b).unwrap();
        assert_eq!(e.version, Version::V2_10);
        assert_eq!(e.suggested, Version::V2_11);
        assert_eq!(e.request_id, 0x1a2b3c4d);
        assert_eq!(e.check_message_length().unwrap(), 54);
        assert_eq!(e.to_bytes(), b);
        assert_eq!(e.to_array(), b);
        assert_eq!(Version::V2_10.to_string(), "2.10");
    }

    #[test]
    fn old_peer_and_bad_length() {
        let mut b = [0u8; 20];
        b[0] = 2;
        b[1] = 0;
        b[2] = 0x40;
        b[3] = 9;
        b[16..20].copy_from_slice(&(-1i32).to_be_bytes());
        let e = Envelope::parse(&b).unwrap();
        assert!(e.encrypted);
        assert_eq!(e.suggested, Version::V2_0);
        assert!(e.check_message_length().is_err());
        assert!(Envelope::parse(&b[..19]).is_err());
    }
}
