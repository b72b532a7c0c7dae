//! The compact stored form of a handle record (issue 45: bytes per handle).
//!
//! The §2.2 wire form spends ~30 bytes of framing on each value: four-byte index,
//! lengths and counts, a TTL and permissions that are almost always the defaults, a
//! type name spelled out, a timestamp every value of the record shares. Stored twice
//! (the store file and the key directory's segments), that framing was a fifth of a
//! two-value handle's bytes. Here:
//!
//! ```text
//! record := TAG ‖ flags ‖ count ‖ [i32 timestamp if SHARED_TIME] ‖ value* ‖ [name if NAMED]
//! value  := index ‖ vflags ‖ [i32 timestamp unless SHARED_TIME]
//!           ‖ [u8 ttl type ‖ i32 ttl unless DEFAULT_TTL] ‖ [u8 permissions unless DEFAULT_PERMS]
//!           ‖ (u8 code if KNOWN_TYPE, else bytes) ‖ bytes data ‖ [count ‖ (bytes handle ‖ index)* if REFS]
//! count, index := u8 0..=254, or 255 ‖ u32 (only for what does not fit a byte)
//! bytes  := count ‖ that many bytes
//! ```
//!
//! Integers are big-endian as in the protocol. The wire form starts with a `u32`
//! count of at most 2^20, so its first byte is 0 and never [`TAG`]: a store keeps
//! reading records written before this form existed. The encoding is canonical (one
//! byte string per record): the writer's compare-and-set compares stored bytes.

use handled_proto::codec::{put_i32, put_u32, MAX_ARRAY_LEN};
use handled_proto::value::{TtlType, ValuePermissions, DEFAULT_TTL};
use handled_proto::{DecodeError, DecodeResult, HandleValue, Reader, ValueReference};

use crate::HandleRecord;

/// First byte of the compact form.
pub(crate) const TAG: u8 = 0xC5;

const SHARED_TIME: u8 = 0x01;
const NAMED: u8 = 0x02;

const DEFAULT_TTL_FLAG: u8 = 0x01;
const DEFAULT_PERMS: u8 = 0x02;
const KNOWN_TYPE: u8 = 0x04;
const REFS: u8 = 0x08;

/// A small number that does not fit a byte follows this one.
const WIDE: u8 = 0xFF;

/// Types coded as one byte. Append only: a code, once written, names its type forever.
const KNOWN_TYPES: [&[u8]; 20] = [
    b"URL",
    b"EMAIL",
    b"HS_ADMIN",
    b"HS_SITE",
    b"HS_SITE.PREFIX",
    b"HS_SERV",
    b"HS_SERV.PREFIX",
    b"HS_VLIST",
    b"HS_ALIAS",
    b"HS_PUBKEY",
    b"HS_SECKEY",
    b"HS_NA_DELEGATE",
    b"HS_NAMESPACE",
    b"HS_CERT",
    b"HS_SIGNATURE",
    b"DESC",
    b"INET_HOST",
    b"10320/LOC",
    b"CHECKSUM",
    b"HS_VERIFIED",
];

/// Fewest bytes a value takes: index, flags, type code, empty data.
const MIN_VALUE_LEN: usize = 4;
/// Fewest bytes a reference takes: an empty handle and an index.
const MIN_REF_LEN: usize = 2;

/// A number, one byte below 255, else 255 ‖ u32 (also the key directory's record lengths).
pub(crate) fn put_small(out: &mut Vec<u8>, n: u32) {
    if n < WIDE as u32 {
        out.push(n as u8);
    } else {
        out.push(WIDE);
        put_u32(out, n);
    }
}

/// A length (one byte, or 255 ‖ u32 from 255 on) and the bytes.
pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_small(out, b.len() as u32);
    out.extend_from_slice(b);
}

pub(crate) fn read_small(r: &mut Reader<'_>, what: &'static str) -> DecodeResult<u32> {
    match r.u8(what)? {
        WIDE => match r.u32(what)? {
            n if n < WIDE as u32 => Err(DecodeError::Invalid { what, detail: format!("{n} written wide") }),
            n => Ok(n),
        },
        n => Ok(n as u32),
    }
}

fn read_len(r: &mut Reader<'_>, what: &'static str) -> DecodeResult<usize> {
    let n = read_small(r, what)? as usize;
    if n > MAX_ARRAY_LEN {
        return Err(DecodeError::BadLength { what, len: n as i64 });
    }
    Ok(n)
}

pub(crate) fn read_bytes<'a>(r: &mut Reader<'a>, what: &'static str) -> DecodeResult<&'a [u8]> {
    let n = read_len(r, what)?;
    r.take(n, what)
}

/// A count of items of at least `min_len` bytes each, checked against what is left
/// so that a lying count cannot make the decoder allocate.
fn read_count(r: &mut Reader<'_>, what: &'static str, min_len: usize) -> DecodeResult<usize> {
    let n = read_len(r, what)?;
    if n * min_len > r.remaining() {
        return Err(DecodeError::Truncated { what, needed: n * min_len - r.remaining() });
    }
    Ok(n)
}

/// Append the compact form of `record` to `out`.
pub(crate) fn encode(record: &HandleRecord, out: &mut Vec<u8>) {
    let values = &record.values;
    let shared = values.first().map(|v| v.timestamp).filter(|t| values.iter().all(|v| v.timestamp == *t));
    let flags = if shared.is_some() { SHARED_TIME } else { 0 } | if record.name.is_some() { NAMED } else { 0 };
    out.push(TAG);
    out.push(flags);
    put_small(out, values.len() as u32);
    if let Some(t) = shared {
        put_i32(out, t);
    }
    for v in values {
        let default_ttl = v.ttl_type == TtlType::Relative && v.ttl == DEFAULT_TTL;
        let default_perms = v.permissions == ValuePermissions::default_for(&v.value_type);
        let code = KNOWN_TYPES.iter().position(|t| *t == v.value_type.as_slice());
        let vflags = if default_ttl { DEFAULT_TTL_FLAG } else { 0 }
            | if default_perms { DEFAULT_PERMS } else { 0 }
            | if code.is_some() { KNOWN_TYPE } else { 0 }
            | if v.references.is_empty() { 0 } else { REFS };
        put_small(out, v.index as u32);
        out.push(vflags);
        if shared.is_none() {
            put_i32(out, v.timestamp);
        }
        if !default_ttl {
            out.push(v.ttl_type.code());
            put_i32(out, v.ttl);
        }
        if !default_perms {
            out.push(v.permissions.0);
        }
        match code {
            Some(c) => out.push(c as u8),
            None => put_bytes(out, &v.value_type),
        }
        put_bytes(out, &v.data);
        if !v.references.is_empty() {
            put_small(out, v.references.len() as u32);
            for r in &v.references {
                put_bytes(out, &r.handle);
                put_small(out, r.index as u32);
            }
        }
    }
    if let Some(name) = &record.name {
        put_bytes(out, name);
    }
}

/// Decode a compact form (its first byte is [`TAG`]); trailing bytes, unknown flags
/// and anything the encoder would not write are errors. Never panics.
pub(crate) fn decode(buf: &[u8]) -> DecodeResult<HandleRecord> {
    let invalid = |what: &'static str, detail: String| DecodeError::Invalid { what, detail };
    let mut r = Reader::new(buf);
    if r.u8("compact record tag")? != TAG {
        return Err(invalid("compact record tag", "not a compact record".into()));
    }
    let flags = r.u8("compact record flags")?;
    if flags & !(SHARED_TIME | NAMED) != 0 {
        return Err(invalid("compact record flags", format!("{flags:#04x}")));
    }
    let n = read_count(&mut r, "handle record values", MIN_VALUE_LEN)?;
    if n == 0 && flags & SHARED_TIME != 0 {
        return Err(invalid("compact record flags", "a shared timestamp without values".into()));
    }
    let shared = if flags & SHARED_TIME != 0 { Some(r.i32("value timestamp")?) } else { None };
    let mut values = Vec::with_capacity(n);
    for _ in 0..n {
        values.push(read_value(&mut r, shared)?);
    }
    if shared.is_none() && n > 0 && values.iter().all(|v| v.timestamp == values[0].timestamp) {
        return Err(invalid("compact record flags", "a shared timestamp written per value".into()));
    }
    let name = if flags & NAMED != 0 { Some(read_bytes(&mut r, "handle record name")?.to_vec()) } else { None };
    r.expect_end("handle record")?;
    Ok(HandleRecord { values, name })
}

fn read_value(r: &mut Reader<'_>, shared: Option<i32>) -> DecodeResult<HandleValue> {
    let invalid = |what: &'static str, detail: String| DecodeError::Invalid { what, detail };
    let index = read_small(r, "value index")? as i32;
    let vflags = r.u8("value flags")?;
    if vflags & !(DEFAULT_TTL_FLAG | DEFAULT_PERMS | KNOWN_TYPE | REFS) != 0 {
        return Err(invalid("value flags", format!("{vflags:#04x}")));
    }
    let timestamp = match shared {
        Some(t) => t,
        None => r.i32("value timestamp")?,
    };
    let (ttl_type, ttl) = if vflags & DEFAULT_TTL_FLAG != 0 {
        (TtlType::Relative, DEFAULT_TTL)
    } else {
        let code = r.u8("value TTL type")?;
        let t = TtlType::from_code(code).ok_or_else(|| invalid("value TTL type", format!("{code}")))?;
        let ttl = r.i32("value TTL")?;
        if t == TtlType::Relative && ttl == DEFAULT_TTL {
            return Err(invalid("value TTL", "the default written out".into()));
        }
        (t, ttl)
    };
    let permissions =
        if vflags & DEFAULT_PERMS != 0 { None } else { Some(ValuePermissions(r.u8("value permissions")?)) };
    let value_type = if vflags & KNOWN_TYPE != 0 {
        let code = r.u8("value type code")?;
        KNOWN_TYPES.get(code as usize).ok_or_else(|| invalid("value type code", format!("{code}")))?.to_vec()
    } else {
        let t = read_bytes(r, "value type")?;
        if KNOWN_TYPES.contains(&t) {
            return Err(invalid("value type", "a known type spelled out".into()));
        }
        t.to_vec()
    };
    let default_perms = ValuePermissions::default_for(&value_type);
    let permissions = match permissions {
        None => default_perms,
        Some(p) if p == default_perms => return Err(invalid("value permissions", "the default written out".into())),
        Some(p) => p,
    };
    let data = read_bytes(r, "value data")?.to_vec();
    let references = if vflags & REFS != 0 {
        let n = read_count(r, "value references", MIN_REF_LEN)?;
        if n == 0 {
            return Err(invalid("value references", "an empty list flagged".into()));
        }
        let mut refs = Vec::with_capacity(n);
        for _ in 0..n {
            let handle = read_bytes(r, "reference handle")?.to_vec();
            refs.push(ValueReference { handle, index: read_small(r, "reference index")? as i32 });
        }
        refs
    } else {
        Vec::new()
    };
    Ok(HandleValue { index, timestamp, ttl_type, ttl, permissions, value_type, data, references })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(index: i32, t: &str, data: &str, timestamp: i32) -> HandleValue {
        HandleValue { timestamp, ..HandleValue::new(index, t, data) }
    }

    /// Records covering every flag: shared and separate timestamps, known and spelled
    /// types, default and explicit TTLs and permissions, references, wide numbers, a name.
    fn samples() -> Vec<HandleRecord> {
        let mut odd = value(-7, "x-type", "d", 5);
        odd.ttl_type = TtlType::Absolute;
        odd.ttl = -1;
        odd.permissions = ValuePermissions(0x0f);
        odd.references = vec![
            ValueReference { handle: b"20.5000/ref".to_vec(), index: 300 },
            ValueReference { handle: vec![], index: 0 },
        ];
        let mut relative_other = value(254, "URL", "", 5);
        relative_other.ttl = 60;
        let long = "d".repeat(70_000);
        vec![
            HandleRecord::default(),
            HandleRecord::new(vec![value(1, "URL", "https://example.org/objects/1", 1_700_000_000)]),
            HandleRecord::new(vec![
                value(1, "URL", "https://example.org/objects/1", 1_700_000_000),
                value(2, "EMAIL", "owner1@example.org", 1_700_000_000),
            ]),
            HandleRecord::new(vec![odd, relative_other, value(255, "HS_SECKEY", &long, 6)]),
            HandleRecord::named(vec![value(100, "HS_ADMIN", "\0\x0f", 0)], b"TEST/doc1", b"TEST/DOC1"),
            HandleRecord::named(vec![], b"TEST/doc1", b"TEST/DOC1"),
        ]
    }

    #[test]
    fn round_trip_and_canonical() {
        for r in samples() {
            let mut b = Vec::new();
            encode(&r, &mut b);
            let back = decode(&b).unwrap_or_else(|e| panic!("{r:?}: {e}"));
            assert_eq!(back, r);
            let mut again = Vec::new();
            encode(&back, &mut again);
            assert_eq!(again, b, "one byte string per record");
        }
    }

    #[test]
    fn a_two_value_record_is_compact() {
        let r = &samples()[2];
        let mut b = Vec::new();
        encode(r, &mut b);
        // tag, flags, count, timestamp; per value index, flags, type code, data length.
        assert_eq!(b.len(), 7 + 4 + 4 + "https://example.org/objects/1".len() + "owner1@example.org".len());
        assert!(b.len() + 48 <= r.encoded_len(), "{} against {}", b.len(), r.encoded_len());
    }

    #[test]
    fn every_truncation_and_extension_is_an_error() {
        for r in samples() {
            let mut b = Vec::new();
            encode(&r, &mut b);
            for n in 0..b.len() {
                assert!(decode(&b[..n]).is_err(), "{r:?}: prefix {n}");
            }
            b.push(0);
            assert!(decode(&b).is_err());
        }
    }

    #[test]
    fn what_the_encoder_never_writes_is_refused() {
        let refused = |b: &[u8]| assert!(decode(b).is_err(), "{b:x?}");
        refused(&[TAG, 0x04, 0]); // unknown record flag
        refused(&[TAG, SHARED_TIME, 0, 0, 0, 0, 0]); // shared timestamp, no values
        refused(&[TAG, 0, WIDE, 0, 0, 0, 1]); // a count of 1 written wide
        refused(&[TAG, SHARED_TIME, 1, 0, 0, 0, 0, 1, 0x10, 0, 0]); // unknown value flag
        refused(&[TAG, SHARED_TIME, 1, 0, 0, 0, 0, 1, KNOWN_TYPE | DEFAULT_PERMS | DEFAULT_TTL_FLAG, 200, 0]); // code
        refused(&[TAG, SHARED_TIME, 1, 0, 0, 0, 0, 1, DEFAULT_PERMS | DEFAULT_TTL_FLAG, 3, b'U', b'R', b'L', 0]);
        refused(&[TAG, SHARED_TIME, 1, 0, 0, 0, 0, 1, KNOWN_TYPE | DEFAULT_TTL_FLAG, 0x0e, 0, 0]); // default perms
        refused(&[TAG, SHARED_TIME, 1, 0, 0, 0, 0, 1, KNOWN_TYPE | DEFAULT_PERMS | DEFAULT_TTL_FLAG | REFS, 0, 0, 0]);
        refused(&[TAG, 0, 1, 1, DEFAULT_TTL_FLAG | DEFAULT_PERMS | KNOWN_TYPE, 0, 0, 0, 0, 0, 0]); // lone timestamp
        refused(&[TAG, 0, 0xfe]); // a count larger than the bytes left
        refused(&[0x00, 0, 0, 0]);
    }
}
