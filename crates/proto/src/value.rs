//! The handle value record (§2.2) and type matching (§2.3).

use crate::codec::{put_bytes, put_i32, put_list, put_u8, Codec, DecodeError, DecodeResult, Reader};

/// Permission byte of a value (§2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ValuePermissions(pub u8);

impl ValuePermissions {
    pub const ADMIN_READ: u8 = 0x08;
    pub const ADMIN_WRITE: u8 = 0x04;
    pub const PUBLIC_READ: u8 = 0x02;
    pub const PUBLIC_WRITE: u8 = 0x01;
    /// Admin read, admin write, public read.
    pub const DEFAULT: ValuePermissions = ValuePermissions(0x0e);
    /// Admin read and write only: secret keys (§2.9).
    pub const SECRET: ValuePermissions = ValuePermissions(0x0c);

    /// What a new value of this type gets when none are given: secret keys
    /// are not publicly readable (the original's JSON API leaves them `1110`,
    /// readable by anyone; its admin tools give them `1100`, as we do here).
    pub fn default_for(value_type: &[u8]) -> ValuePermissions {
        if is_secret_type(value_type) {
            Self::SECRET
        } else {
            Self::DEFAULT
        }
    }

    pub fn admin_read(self) -> bool {
        self.0 & Self::ADMIN_READ != 0
    }
    pub fn admin_write(self) -> bool {
        self.0 & Self::ADMIN_WRITE != 0
    }
    pub fn public_read(self) -> bool {
        self.0 & Self::PUBLIC_READ != 0
    }
    pub fn public_write(self) -> bool {
        self.0 & Self::PUBLIC_WRITE != 0
    }
}

impl Default for ValuePermissions {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// How a value's TTL is to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TtlType {
    /// Seconds from retrieval.
    Relative,
    /// Unix time of expiry.
    Absolute,
}

impl TtlType {
    /// Its byte in the value record.
    pub fn code(self) -> u8 {
        match self {
            TtlType::Relative => 0,
            TtlType::Absolute => 1,
        }
    }

    /// The TTL type of a byte [`TtlType::code`] writes; `None` for any other.
    pub fn from_code(code: u8) -> Option<TtlType> {
        [TtlType::Relative, TtlType::Absolute].into_iter().find(|t| t.code() == code)
    }
}

/// A reference to a value of another handle (`utf8 handle ‖ i32 index`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ValueReference {
    pub handle: Vec<u8>,
    pub index: i32,
}

impl Codec for ValueReference {
    fn encode(&self, out: &mut Vec<u8>) {
        put_bytes(out, &self.handle);
        put_i32(out, self.index);
    }
    fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        Ok(ValueReference { handle: r.bytes("reference handle")?.to_vec(), index: r.i32("reference index")? })
    }
}

/// Default TTL of a new value: one day.
pub const DEFAULT_TTL: i32 = 86_400;

/// One handle value (§2.2). Type and data are kept as bytes: the server stores
/// every type opaquely and must hand back exactly what it was given.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HandleValue {
    pub index: i32,
    pub timestamp: i32,
    pub ttl_type: TtlType,
    pub ttl: i32,
    pub permissions: ValuePermissions,
    pub value_type: Vec<u8>,
    pub data: Vec<u8>,
    pub references: Vec<ValueReference>,
}

impl HandleValue {
    /// A value with default TTL and permissions (by type, [`ValuePermissions::default_for`])
    /// and no timestamp.
    pub fn new(index: i32, value_type: impl Into<Vec<u8>>, data: impl Into<Vec<u8>>) -> Self {
        let value_type = value_type.into();
        HandleValue {
            index,
            timestamp: 0,
            ttl_type: TtlType::Relative,
            ttl: DEFAULT_TTL,
            permissions: ValuePermissions::default_for(&value_type),
            value_type,
            data: data.into(),
            references: Vec::new(),
        }
    }

    /// Does this value's type match a filter entry (§2.3)?
    pub fn type_matches(&self, filter: &[u8]) -> bool {
        type_matches(&self.value_type, filter)
    }

    /// Is this value of type `name` or a sub-type `name.x` (the server's rule for
    /// recognising HS_ADMIN and friends)?
    pub fn is_type(&self, name: &[u8]) -> bool {
        is_type_or_subtype(&self.value_type, name)
    }

    /// Encoded length, without encoding.
    pub fn encoded_len(&self) -> usize {
        4 + 4
            + 1
            + 4
            + 1
            + 4
            + self.value_type.len()
            + 4
            + self.data.len()
            + 4
            + self.references.iter().map(|r| 4 + r.handle.len() + 4).sum::<usize>()
    }
}

impl Codec for HandleValue {
    fn encode(&self, out: &mut Vec<u8>) {
        put_i32(out, self.index);
        put_i32(out, self.timestamp);
        put_u8(out, self.ttl_type.code());
        put_i32(out, self.ttl);
        put_u8(out, self.permissions.0);
        put_bytes(out, &self.value_type);
        put_bytes(out, &self.data);
        put_list(out, &self.references, |o, r| r.encode(o));
    }

    fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let index = r.i32("value index")?;
        let timestamp = r.i32("value timestamp")?;
        let code = r.u8("value TTL type")?;
        let ttl_type = TtlType::from_code(code)
            .ok_or_else(|| DecodeError::Invalid { what: "value TTL type", detail: format!("{code}") })?;
        let ttl = r.i32("value TTL")?;
        let permissions = ValuePermissions(r.u8("value permissions")?);
        let value_type = r.bytes("value type")?.to_vec();
        let data = r.bytes("value data")?.to_vec();
        let references = r.list("value references", 8, ValueReference::read)?;
        Ok(HandleValue { index, timestamp, ttl_type, ttl, permissions, value_type, data, references })
    }
}

/// Type filter match (§2.3): ASCII case-insensitive; a filter ending in `.` matches
/// the family (`URL.` matches `URL` and `URL.x`).
pub fn type_matches(value_type: &[u8], filter: &[u8]) -> bool {
    match filter.strip_suffix(b".") {
        Some(family) => is_type_or_subtype(value_type, family),
        None => value_type.eq_ignore_ascii_case(filter),
    }
}

/// `value_type` equals `name` or starts with `name.` (ASCII case-insensitive).
pub fn is_type_or_subtype(value_type: &[u8], name: &[u8]) -> bool {
    value_type.len() >= name.len()
        && value_type[..name.len()].eq_ignore_ascii_case(name)
        && (value_type.len() == name.len() || value_type[name.len()] == b'.')
}

/// Is this a secret: a secret key (HS_SECKEY) or a private key (HS_PRIVKEY, HS_DSAPRIVKEY,
/// or a sub-type of them)? Secrets default to admin-only permissions and are
/// never searchable.
pub fn is_secret_type(value_type: &[u8]) -> bool {
    types::SECRETS.iter().any(|t| is_type_or_subtype(value_type, t))
}

/// Well-known type names.
pub mod types {
    pub const URL: &[u8] = b"URL";
    pub const EMAIL: &[u8] = b"EMAIL";
    pub const HS_ADMIN: &[u8] = b"HS_ADMIN";
    pub const HS_VLIST: &[u8] = b"HS_VLIST";
    pub const HS_SITE: &[u8] = b"HS_SITE";
    pub const HS_SITE_PREFIX: &[u8] = b"HS_SITE.PREFIX";
    pub const HS_NA_DELEGATE: &[u8] = b"HS_NA_DELEGATE";
    pub const HS_SERV: &[u8] = b"HS_SERV";
    /// A service handle for the prefixes derived from this one (a referral, like HS_SITE.PREFIX).
    pub const HS_SERV_PREFIX: &[u8] = b"HS_SERV.PREFIX";
    pub const HS_SECKEY: &[u8] = b"HS_SECKEY";
    pub const HS_PUBKEY: &[u8] = b"HS_PUBKEY";
    pub const HS_ALIAS: &[u8] = b"HS_ALIAS";
    /// A prefix's or handle's namespace document (XML): status, template handles (§11).
    pub const HS_NAMESPACE: &[u8] = b"HS_NAMESPACE";
    /// Types whose data is a secret ([`super::is_secret_type`]).
    pub const SECRETS: [&[u8]; 3] = [HS_SECKEY, b"HS_PRIVKEY", b"HS_DSAPRIVKEY"];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_filters() {
        assert!(type_matches(b"URL", b"url"));
        assert!(!type_matches(b"URL.x", b"URL"));
        assert!(type_matches(b"URL.x", b"URL."));
        assert!(type_matches(b"URL", b"URL."));
        assert!(!type_matches(b"URLX", b"URL."));
        assert!(is_type_or_subtype(b"HS_ADMIN.foo", b"HS_ADMIN"));
        assert!(!is_type_or_subtype(b"HS_ADMINX", b"HS_ADMIN"));
    }

    #[test]
    fn secrets_default_to_admin_only() {
        for t in ["HS_SECKEY", "hs_seckey", "HS_SECKEY.old", "HS_PRIVKEY", "HS_DSAPRIVKEY"] {
            assert!(is_secret_type(t.as_bytes()), "{t}");
            assert_eq!(HandleValue::new(300, t, "x").permissions, ValuePermissions::SECRET, "{t}");
        }
        for t in ["URL", "HS_PUBKEY", "HS_SECKEYS", "HS_ADMIN"] {
            assert!(!is_secret_type(t.as_bytes()), "{t}");
            assert_eq!(HandleValue::new(1, t, "x").permissions, ValuePermissions::DEFAULT, "{t}");
        }
    }

    #[test]
    fn value_round_trip_and_len() {
        let mut v = HandleValue::new(1, "URL", "https://example.org");
        v.references.push(ValueReference { handle: b"20.5000/x".to_vec(), index: 3 });
        let b = v.to_bytes();
        assert_eq!(b.len(), v.encoded_len());
        assert_eq!(HandleValue::from_bytes(&b).unwrap(), v);
    }
}
