//! HS_ADMIN records (§2.5).

use crate::codec::{put_bytes, put_i32, put_u16, Codec, DecodeError, DecodeResult, Reader};

/// The 12-bit permission word of an admin record. The constants are plain `u16`
/// bits so they combine with `|` and wrap as `AdminPermissions(ADD_HANDLE | ...)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AdminPermissions(pub u16);

impl AdminPermissions {
    pub const ADD_HANDLE: u16 = 0x0001;
    pub const DELETE_HANDLE: u16 = 0x0002;
    pub const ADD_DERIVED_PREFIX: u16 = 0x0004;
    pub const DELETE_DERIVED_PREFIX: u16 = 0x0008;
    pub const MODIFY_VALUE: u16 = 0x0010;
    pub const REMOVE_VALUE: u16 = 0x0020;
    pub const ADD_VALUE: u16 = 0x0040;
    pub const MODIFY_ADMIN: u16 = 0x0080;
    pub const REMOVE_ADMIN: u16 = 0x0100;
    pub const ADD_ADMIN: u16 = 0x0200;
    pub const READ_VALUE: u16 = 0x0400;
    pub const LIST_HANDLES: u16 = 0x0800;
    /// Every defined permission.
    pub const ALL: u16 = 0x0fff;

    /// Are all bits of `required` granted? Accepts a raw `u16` or another
    /// `AdminPermissions`.
    pub fn contains(self, required: impl Into<AdminPermissions>) -> bool {
        let required = required.into().0;
        self.0 & required == required
    }

    pub fn bits(self) -> u16 {
        self.0
    }

    /// JSON form (§2.5): 12 binary digits, most significant first. Bits above
    /// 0x0800 are not shown, as in Java, which keeps only 12 booleans.
    pub fn to_bit_string(self) -> String {
        format!("{:012b}", self.0 & Self::ALL)
    }
}

impl From<u16> for AdminPermissions {
    fn from(bits: u16) -> Self {
        AdminPermissions(bits)
    }
}

impl std::ops::BitOr for AdminPermissions {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        AdminPermissions(self.0 | rhs.0)
    }
}

/// An HS_ADMIN value's data: who (handle/index, index 0 = any index) may do what.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AdminRecord {
    pub permissions: AdminPermissions,
    pub handle: Vec<u8>,
    pub index: i32,
}

/// Extra bytes that software ≤ 7.3 wrote after the record (§2.5).
pub const LEGACY_TRAILER_LEN: usize = 2;

impl AdminRecord {
    /// Decode HS_ADMIN value data: the record, optionally followed by exactly
    /// two legacy bytes; any other trailing data is an error.
    pub fn decode_data(data: &[u8]) -> DecodeResult<Self> {
        Self::decode_data_legacy(data).map(|(rec, _)| rec)
    }

    /// As [`decode_data`](Self::decode_data), also telling whether the legacy
    /// two-byte trailer was present (the JSON form reports it as `legacyByteLength`).
    pub fn decode_data_legacy(data: &[u8]) -> DecodeResult<(Self, bool)> {
        let mut r = Reader::new(data);
        let rec = Self::read(&mut r)?;
        match r.remaining() {
            0 => Ok((rec, false)),
            LEGACY_TRAILER_LEN => Ok((rec, true)),
            count => Err(DecodeError::TrailingBytes { what: "admin record", count }),
        }
    }

    /// Encode with the legacy two-byte trailer (zeros), for `legacyByteLength` input.
    pub fn to_bytes_legacy(&self) -> Vec<u8> {
        let mut out = self.to_bytes();
        out.extend_from_slice(&[0; LEGACY_TRAILER_LEN]);
        out
    }
}

impl Codec for AdminRecord {
    fn encode(&self, out: &mut Vec<u8>) {
        put_u16(out, self.permissions.0);
        put_bytes(out, &self.handle);
        put_i32(out, self.index);
    }

    fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let permissions = AdminPermissions(r.u16("admin permissions")?);
        let handle = r.bytes("admin handle")?.to_vec();
        let index = r.i32("admin index")?;
        Ok(AdminRecord { permissions, handle, index })
    }

    /// Whole-buffer decoding follows the HS_ADMIN trailer rule.
    fn from_bytes(buf: &[u8]) -> DecodeResult<Self> {
        Self::decode_data(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> AdminRecord {
        AdminRecord {
            permissions: AdminPermissions(AdminPermissions::ALL),
            handle: b"20.5000/ADMIN".to_vec(),
            index: 300,
        }
    }

    #[test]
    fn round_trip_and_vector_bytes() {
        let bytes = sample().to_bytes();
        assert_eq!(hex(&bytes), "0fff0000000d32302e353030302f41444d494e0000012c");
        assert_eq!(AdminRecord::decode_data(&bytes).unwrap(), sample());
        assert_eq!(AdminRecord::from_bytes(&bytes).unwrap(), sample());
    }

    #[test]
    fn legacy_trailer() {
        let bytes = sample().to_bytes_legacy();
        assert_eq!(AdminRecord::decode_data_legacy(&bytes).unwrap(), (sample(), true));
        let mut odd = sample().to_bytes();
        odd.extend_from_slice(&[1, 2]);
        assert_eq!(AdminRecord::decode_data(&odd).unwrap(), sample());
    }

    #[test]
    fn rejects_other_trailers_and_truncation() {
        for extra in [1usize, 3, 4, 10] {
            let mut b = sample().to_bytes();
            b.extend(std::iter::repeat_n(0, extra));
            assert_eq!(
                AdminRecord::decode_data(&b),
                Err(DecodeError::TrailingBytes { what: "admin record", count: extra })
            );
        }
        let b = sample().to_bytes();
        for cut in 0..b.len() {
            assert!(matches!(AdminRecord::decode_data(&b[..cut]), Err(DecodeError::Truncated { .. })), "cut {cut}");
        }
    }

    #[test]
    fn lying_length() {
        let mut b = sample().to_bytes();
        b[2..6].copy_from_slice(&0x7fff_ffffu32.to_be_bytes());
        assert!(matches!(AdminRecord::decode_data(&b), Err(DecodeError::BadLength { .. })));
        b[2..6].copy_from_slice(&100u32.to_be_bytes());
        assert!(matches!(AdminRecord::decode_data(&b), Err(DecodeError::Truncated { .. })));
        b[2..6].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(matches!(AdminRecord::decode_data(&b), Err(DecodeError::BadLength { .. })));
    }

    #[test]
    fn permissions() {
        let p = AdminPermissions(AdminPermissions::ADD_HANDLE | AdminPermissions::READ_VALUE);
        assert!(p.contains(AdminPermissions::ADD_HANDLE));
        assert!(p.contains(AdminPermissions::ADD_HANDLE | AdminPermissions::READ_VALUE));
        assert!(!p.contains(AdminPermissions::ADD_HANDLE | AdminPermissions::ADD_VALUE));
        assert!(p.contains(AdminPermissions(0)));
        assert_eq!(AdminPermissions(AdminPermissions::ALL).to_bit_string(), "111111111111");
        assert_eq!(AdminPermissions(0x0401).to_bit_string(), "010000000001");
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }
}
