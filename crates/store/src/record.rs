//! The stored form of one handle. Written in the compact form
//! (`record_compact.rs`); read in it or in the form written before it: the values
//! as `u32 count ‖ value records` (each in the §2.2 wire form of
//! `handled_proto::HandleValue`), then, when the handle's spelling differs from its
//! storage key, `u32 length ‖ name`. The first byte tells the two apart.

use handled_proto::codec::{put_bytes, put_u32, MAX_ARRAY_LEN};
use handled_proto::{Codec, DecodeError, HandleValue, Reader};

use crate::record_compact;
use crate::StoreError;

/// Smallest encoded value record: index, timestamp, ttl type, ttl, permissions,
/// empty type, empty data, empty reference list.
const MIN_VALUE_LEN: usize = 4 + 4 + 1 + 4 + 1 + 4 + 4 + 4;

/// All values of one handle, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HandleRecord {
    pub values: Vec<HandleValue>,
    /// The handle as its creator spelled it, when that differs from the
    /// storage key (a case-insensitive server keys `TEST/doc1` as
    /// `TEST/DOC1`): listings show it; matching still uses the key.
    pub name: Option<Vec<u8>>,
}

/// Why a stored record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("bad handle record: {0}")]
    Decode(#[from] DecodeError),
}

/// Why a record cannot be stored (it would not decode again).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("handle record cannot be stored: {0}")]
pub struct InvalidRecord(pub String);

impl HandleRecord {
    pub fn new(values: Vec<HandleValue>) -> Self {
        HandleRecord { values, name: None }
    }

    /// The record, remembering `name` as the handle's spelling unless it is `key` itself.
    pub fn named(values: Vec<HandleValue>, name: &[u8], key: &[u8]) -> Self {
        HandleRecord { values, name: (name != key).then(|| name.to_vec()) }
    }

    /// The handle's name for listings: its spelling, else its storage key.
    pub fn name_or<'a>(&'a self, key: &'a [u8]) -> &'a [u8] {
        self.name.as_deref().unwrap_or(key)
    }

    /// Length of the §2.2 wire form ([`Self::encode_wire`]), without encoding: a
    /// measure of the record's size in memory.
    pub fn encoded_len(&self) -> usize {
        4 + self.values.iter().map(HandleValue::encoded_len).sum::<usize>()
            + self.name.as_ref().map_or(0, |n| 4 + n.len())
    }

    /// Append the stored form (compact) to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        record_compact::encode(self, out);
    }

    /// The stored form (compact).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut out);
        out
    }

    /// The form written before the compact one, values in their §2.2 wire form: what
    /// the Cassandra backend still writes, so that nodes of an earlier version read
    /// its rows during a rolling upgrade.
    pub fn encode_wire(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        put_u32(&mut out, self.values.len() as u32);
        for v in &self.values {
            v.encode(&mut out);
        }
        if let Some(name) = &self.name {
            put_bytes(&mut out, name);
        }
        out
    }

    /// Decode a stored form, either; trailing bytes are an error. Never panics.
    pub fn decode(buf: &[u8]) -> Result<Self, RecordError> {
        if buf.first() == Some(&record_compact::TAG) {
            return Ok(record_compact::decode(buf)?);
        }
        let mut r = Reader::new(buf);
        let values = r.list("handle record values", MIN_VALUE_LEN, HandleValue::read)?;
        let name = if r.remaining() > 0 { Some(r.bytes("handle record name")?.to_vec()) } else { None };
        r.expect_end("handle record")?;
        Ok(HandleRecord { values, name })
    }

    /// Are two stored forms whose bytes differ the same record, one written in the
    /// compact form and one before it? (Decodes only when their first bytes differ.)
    pub(crate) fn same_in_other_forms(a: &[u8], b: &[u8]) -> bool {
        a.first() != b.first() && matches!((Self::decode(a), Self::decode(b)), (Ok(x), Ok(y)) if x == y)
    }

    /// Decode a stored form read under `key`, mapping failure to [`StoreError::Corrupt`].
    pub fn decode_stored(key: &[u8], buf: &[u8]) -> Result<Self, StoreError> {
        Self::decode(buf).map_err(|e| StoreError::Corrupt(format!("handle {}: {e}", show_key(key))))
    }

    /// Check that the record's encoding would decode again (every length within the
    /// decoder's limits), so that nothing unreadable is ever written.
    pub fn validate(&self) -> Result<(), InvalidRecord> {
        let too_long = |what: &str, n: usize| {
            if n > MAX_ARRAY_LEN {
                Err(InvalidRecord(format!("{what} has length {n}, more than {MAX_ARRAY_LEN}")))
            } else {
                Ok(())
            }
        };
        too_long("value list", self.values.len())?;
        too_long("name", self.name.as_ref().map_or(0, Vec::len))?;
        for v in &self.values {
            too_long("value type", v.value_type.len())?;
            too_long("value data", v.data.len())?;
            too_long("reference list", v.references.len())?;
            for r in &v.references {
                too_long("reference handle", r.handle.len())?;
            }
        }
        Ok(())
    }
}

/// A key for error messages: UTF-8 when it is, escaped otherwise; cut when long.
pub(crate) fn show_key(key: &[u8]) -> String {
    let k = &key[..key.len().min(200)];
    let mut s = String::from_utf8_lossy(k).into_owned();
    if std::str::from_utf8(k).is_err() {
        s = k.escape_ascii().to_string();
    }
    if key.len() > k.len() {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_proto::ValueReference;

    fn sample() -> HandleRecord {
        let mut v = HandleValue::new(1, "URL", "https://example.org/");
        v.references.push(ValueReference { handle: b"20.5000/x".to_vec(), index: 2 });
        HandleRecord::new(vec![v, HandleValue::new(100, "HS_ADMIN", vec![0u8; 40])])
    }

    #[test]
    fn round_trip_in_both_forms() {
        let named = HandleRecord::named(sample().values, b"TEST/doc1", b"TEST/DOC1");
        for r in [sample(), HandleRecord::default(), named] {
            let wire = r.encode_wire();
            assert_eq!(wire.len(), r.encoded_len());
            assert_eq!(wire[0], 0, "the wire form never starts with the compact form's tag");
            assert_eq!(HandleRecord::decode(&wire).unwrap(), r, "records written before the compact form");
            let compact = r.encode();
            assert_eq!(compact[0], record_compact::TAG);
            assert_eq!(HandleRecord::decode(&compact).unwrap(), r);
        }
        let named = HandleRecord::named(sample().values, b"TEST/doc1", b"TEST/DOC1");
        assert_eq!(HandleRecord::decode(&named.encode()).unwrap().name_or(b"TEST/DOC1"), b"TEST/doc1");
        assert_eq!(HandleRecord::named(vec![], b"TEST/A", b"TEST/A").name, None, "no copy of the key");
    }

    #[test]
    fn min_value_len_is_right() {
        assert_eq!(HandleValue::new(1, "", "").encoded_len(), MIN_VALUE_LEN);
    }

    #[test]
    fn every_truncation_and_extension_is_an_error() {
        for b in [sample().encode_wire(), sample().encode()] {
            for n in 0..b.len() {
                assert!(HandleRecord::decode(&b[..n]).is_err(), "prefix {n}");
            }
            let mut longer = b.clone();
            longer.push(0);
            assert!(HandleRecord::decode(&longer).is_err());
        }
    }

    #[test]
    fn garbage_never_panics() {
        // A cheap deterministic fuzz: flip bytes and lengths of a valid record, in both forms.
        let mut x: u32 = 12345;
        for b in [sample().encode_wire(), sample().encode()].iter().cycle().take(40_000) {
            let mut c = b.clone();
            for _ in 0..3 {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let i = (x as usize >> 8) % c.len();
                c[i] = (x >> 16) as u8;
            }
            let _ = HandleRecord::decode(&c);
        }
        assert!(HandleRecord::decode(&[0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(HandleRecord::decode(&[0x00, 0x10, 0x00, 0x00]).is_err());
    }

    #[test]
    fn decode_stored_maps_to_corrupt() {
        match HandleRecord::decode_stored(b"20.5000/\xff", &[1, 2, 3]) {
            Err(StoreError::Corrupt(m)) => assert!(m.contains("20.5000/\\xff"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn validate_rejects_oversized() {
        assert!(sample().validate().is_ok());
        let big = HandleRecord::new(vec![HandleValue::new(1, "URL", vec![0u8; MAX_ARRAY_LEN + 1])]);
        assert!(big.validate().is_err());
    }
}
