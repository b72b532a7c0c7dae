//! The 24-byte message header (§1.2), op codes (§3.1), response codes (§3.2)
//! and op flags (§1.3).

use std::fmt;
use std::ops::{BitAnd, BitOr, BitOrAssign};

use crate::codec::{put_u16, put_u32, put_u8, Codec, DecodeResult, Reader};

pub const HEADER_LEN: usize = 24;

/// Declares a `u32` newtype's named constants together with `name()`.
macro_rules! codes {
    ($ty:ident { $($name:ident = $val:expr),* $(,)? }) => {
        impl $ty {
            $(pub const $name: $ty = $ty($val);)*

            /// Symbolic name, or `"UNKNOWN"`.
            pub fn name(self) -> &'static str {
                match self.0 {
                    $($val => stringify!($name),)*
                    _ => "UNKNOWN",
                }
            }

            /// Is this one of the codes the protocol defines?
            pub fn is_known(self) -> bool {
                matches!(self.0, $($val)|*)
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", self.name(), self.0)
            }
        }
    };
}

/// Operation code (§3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpCode(pub u32);

codes!(OpCode {
    RESERVED = 0,
    RESOLUTION = 1,
    GET_SITE_INFO = 2,
    CREATE_HANDLE = 100,
    DELETE_HANDLE = 101,
    ADD_VALUE = 102,
    REMOVE_VALUE = 103,
    MODIFY_VALUE = 104,
    LIST_HANDLES = 105,
    RESPONSE_TO_CHALLENGE = 200,
    VERIFY_CHALLENGE = 201,
    HOME_NA = 300,
    UNHOME_NA = 301,
    LIST_HOMED_NAS = 302,
    SESSION_SETUP = 400,
    SESSION_TERMINATE = 401,
    SESSION_EXCHANGEKEY = 402,
    GET_NEXT_TXN_ID = 1000,
    RETRIEVE_TXN_LOG = 1001,
    DUMP_HANDLES = 1002,
    BACKUP_SERVER = 1003,
});

/// Response code (§3.2); 0 in requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResponseCode(pub u32);

codes!(ResponseCode {
    RESERVED = 0,
    SUCCESS = 1,
    ERROR = 2,
    SERVER_TOO_BUSY = 3,
    PROTOCOL_ERROR = 4,
    OPERATION_NOT_SUPPORTED = 5,
    RECURSION_COUNT_TOO_HIGH = 6,
    SERVER_BACKUP = 7,
    HANDLE_NOT_FOUND = 100,
    HANDLE_ALREADY_EXISTS = 101,
    INVALID_HANDLE = 102,
    VALUES_NOT_FOUND = 200,
    VALUE_ALREADY_EXISTS = 201,
    INVALID_VALUE = 202,
    OUT_OF_DATE_SITE_INFO = 300,
    SERVER_NOT_RESP = 301,
    SERVICE_REFERRAL = 302,
    PREFIX_REFERRAL = 303,
    INVALID_ADMIN = 400,
    INSUFFICIENT_PERMISSIONS = 401,
    AUTHENTICATION_NEEDED = 402,
    AUTHENTICATION_FAILED = 403,
    INVALID_CREDENTIAL = 404,
    AUTHEN_TIMEOUT = 405,
    AUTHEN_ERROR = 406,
    SESSION_TIMEOUT = 500,
    SESSION_FAILED = 501,
    INVALID_SESSION_KEY = 502,
    NEED_RSAKEY_FOR_SESSIONEXCHANGE = 503,
    INVALID_SESSIONSETUP_REQUEST = 504,
    SESSION_MESSAGE_REJECTED = 505,
});

impl ResponseCode {
    /// Codes whose body is an error message (`utf8`), per §3.2.
    pub fn has_message_body(self) -> bool {
        self.is_known()
            && !matches!(
                self,
                Self::RESERVED
                    | Self::SUCCESS
                    | Self::SERVICE_REFERRAL
                    | Self::PREFIX_REFERRAL
                    | Self::AUTHENTICATION_NEEDED
            )
    }
}

/// The 32-bit op-flags word (§1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct OpFlags(pub u32);

impl OpFlags {
    pub const NONE: OpFlags = OpFlags(0);
    pub const AT: OpFlags = OpFlags(0x8000_0000);
    pub const CT: OpFlags = OpFlags(0x4000_0000);
    pub const ENC: OpFlags = OpFlags(0x2000_0000);
    pub const REC: OpFlags = OpFlags(0x1000_0000);
    pub const CA: OpFlags = OpFlags(0x0800_0000);
    pub const CN: OpFlags = OpFlags(0x0400_0000);
    pub const KA: OpFlags = OpFlags(0x0200_0000);
    pub const PO: OpFlags = OpFlags(0x0100_0000);
    pub const RD: OpFlags = OpFlags(0x0080_0000);
    pub const OW: OpFlags = OpFlags(0x0040_0000);
    pub const MINT: OpFlags = OpFlags(0x0020_0000);
    pub const DNR: OpFlags = OpFlags(0x0010_0000);

    /// What a Java request carries by default: REC | CA | PO.
    pub const JAVA_REQUEST_DEFAULT: OpFlags = OpFlags(0x1900_0000);
    /// Flags the Java server copies from a request into its response.
    pub const COPIED_TO_RESPONSE: OpFlags =
        OpFlags(0x8000_0000 | 0x4000_0000 | 0x2000_0000 | 0x0800_0000 | 0x0100_0000 | 0x0080_0000 | 0x0010_0000);

    const NAMES: [(OpFlags, &'static str); 12] = [
        (Self::AT, "AT"),
        (Self::CT, "CT"),
        (Self::ENC, "ENC"),
        (Self::REC, "REC"),
        (Self::CA, "CA"),
        (Self::CN, "CN"),
        (Self::KA, "KA"),
        (Self::PO, "PO"),
        (Self::RD, "RD"),
        (Self::OW, "OW"),
        (Self::MINT, "MINT"),
        (Self::DNR, "DNR"),
    ];

    /// All bits of `other` set?
    pub const fn contains(self, other: OpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    pub const fn with(self, other: OpFlags) -> Self {
        OpFlags(self.0 | other.0)
    }

    pub const fn without(self, other: OpFlags) -> Self {
        OpFlags(self.0 & !other.0)
    }

    /// `with` or `without` depending on `on`.
    pub const fn set(self, other: OpFlags, on: bool) -> Self {
        if on {
            self.with(other)
        } else {
            self.without(other)
        }
    }
}

impl BitOr for OpFlags {
    type Output = OpFlags;
    fn bitor(self, rhs: OpFlags) -> OpFlags {
        self.with(rhs)
    }
}

impl BitOrAssign for OpFlags {
    fn bitor_assign(&mut self, rhs: OpFlags) {
        *self = self.with(rhs);
    }
}

impl BitAnd for OpFlags {
    type Output = OpFlags;
    fn bitand(self, rhs: OpFlags) -> OpFlags {
        OpFlags(self.0 & rhs.0)
    }
}

impl fmt::Display for OpFlags {
    /// `REC|CA|PO`; unnamed bits appear as hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut rest = self.0;
        for (flag, name) in Self::NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
                rest &= !flag.0;
            }
        }
        if rest != 0 || first {
            if !first {
                f.write_str("|")?;
            }
            write!(f, "{rest:#x}")?;
        }
        Ok(())
    }
}

/// The message header. `body_length` is whatever was read; encoders of whole
/// messages (`message::encode_message`) overwrite it with the real length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    pub op_code: OpCode,
    pub response_code: ResponseCode,
    pub op_flags: OpFlags,
    pub site_serial: u16,
    pub recursion_count: u8,
    pub expiration: u32,
    pub body_length: u32,
}

impl Header {
    /// A request header with no site serial (`0xFFFF`) and no expiration.
    pub const fn request(op_code: OpCode, op_flags: OpFlags) -> Self {
        Header {
            op_code,
            response_code: ResponseCode::RESERVED,
            op_flags,
            site_serial: 0xFFFF,
            recursion_count: 0,
            expiration: 0,
            body_length: 0,
        }
    }

    /// The header the Java server starts a response from (§1.3): op code, the
    /// copied flags and recursion count from the request, REC always set.
    /// Site serial and expiration are left 0 for the caller to fill.
    pub fn response_to(request: &Header, code: ResponseCode) -> Self {
        Header {
            op_code: request.op_code,
            response_code: code,
            op_flags: (request.op_flags & OpFlags::COPIED_TO_RESPONSE) | OpFlags::REC,
            site_serial: 0,
            recursion_count: request.recursion_count,
            expiration: 0,
            body_length: 0,
        }
    }

    pub fn is_request(&self) -> bool {
        self.response_code == ResponseCode::RESERVED
    }
}

impl Codec for Header {
    fn encode(&self, out: &mut Vec<u8>) {
        put_u32(out, self.op_code.0);
        put_u32(out, self.response_code.0);
        put_u32(out, self.op_flags.0);
        put_u16(out, self.site_serial);
        put_u8(out, self.recursion_count);
        put_u8(out, 0);
        put_u32(out, self.expiration);
        put_u32(out, self.body_length);
    }

    fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let op_code = OpCode(r.u32("op code")?);
        let response_code = ResponseCode(r.u32("response code")?);
        let op_flags = OpFlags(r.u32("op flags")?);
        let site_serial = r.u16("site info serial")?;
        let recursion_count = r.u8("recursion count")?;
        // The reserved byte is ignored on receipt, like the Java decoder does.
        r.u8("reserved")?;
        let expiration = r.u32("expiration")?;
        let body_length = r.u32("body length")?;
        Ok(Header { op_code, response_code, op_flags, site_serial, recursion_count, expiration, body_length })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_flags() {
        assert_eq!(OpCode::RESOLUTION.name(), "RESOLUTION");
        assert_eq!(OpCode(77).name(), "UNKNOWN");
        assert_eq!(ResponseCode::SESSION_MESSAGE_REJECTED.0, 505);
        assert!(ResponseCode::HANDLE_NOT_FOUND.has_message_body());
        assert!(!ResponseCode::AUTHENTICATION_NEEDED.has_message_body());
        assert!(!ResponseCode(999).has_message_body());
        let f = OpFlags::REC | OpFlags::CA | OpFlags::PO;
        assert_eq!(f, OpFlags::JAVA_REQUEST_DEFAULT);
        assert!(f.contains(OpFlags::CA));
        assert!(!f.without(OpFlags::CA).contains(OpFlags::CA));
        assert_eq!(f.to_string(), "REC|CA|PO");
        assert_eq!(OpFlags(1).to_string(), "0x1");
    }

    #[test]
    fn header_round_trip() {
        let b = hex_bytes("00000001000000001900000000010000655499c00000001a");
        let h = Header::from_bytes(&b).unwrap();
        assert_eq!(h.op_code, OpCode::RESOLUTION);
        assert_eq!(h.site_serial, 1);
        assert_eq!(h.expiration, 1_700_043_200);
        assert_eq!(h.body_length, 26);
        assert_eq!(h.to_bytes(), b);
        // The reserved byte is ignored on receipt and written as 0 (found by fuzzing:
        // re-encoding is byte-exact except for this byte).
        let mut odd = b.clone();
        odd[15] = 0x41;
        assert_eq!(Header::from_bytes(&odd).unwrap(), h);
        let resp = Header::response_to(&h, ResponseCode::SUCCESS);
        assert_eq!(resp.op_flags, OpFlags::JAVA_REQUEST_DEFAULT);
    }

    fn hex_bytes(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }
}
