//! HS_VLIST records (§2.6): an admin group, a list of value references.

use crate::codec::{put_list, Codec, DecodeResult, Reader};
use crate::value::ValueReference;

/// `list<utf8 handle ‖ i32 index>`; trailing bytes are rejected by
/// [`Codec::from_bytes`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ValueList(pub Vec<ValueReference>);

impl ValueList {
    /// Decode HS_VLIST value data (no trailing bytes allowed).
    pub fn decode_data(data: &[u8]) -> DecodeResult<Self> {
        Self::from_bytes(data)
    }
}

impl Codec for ValueList {
    fn encode(&self, out: &mut Vec<u8>) {
        put_list(out, &self.0, |o, r| r.encode(o));
    }

    fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        // Each reference is at least 8 bytes (empty handle + index).
        Ok(ValueList(r.list("value list", 8, ValueReference::read)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::DecodeError;

    fn sample() -> ValueList {
        ValueList(vec![
            ValueReference { handle: b"20.5000/ADMIN".to_vec(), index: 300 },
            ValueReference { handle: b"20.5000/ADMIN2".to_vec(), index: 300 },
        ])
    }

    #[test]
    fn round_trip() {
        let b = sample().to_bytes();
        assert_eq!(ValueList::decode_data(&b).unwrap(), sample());
        assert_eq!(ValueList::decode_data(&[0, 0, 0, 0]).unwrap(), ValueList::default());
    }

    #[test]
    fn errors() {
        let mut b = sample().to_bytes();
        b.push(0);
        assert_eq!(
            ValueList::decode_data(&b),
            Err(DecodeError::TrailingBytes { what: std::any::type_name::<ValueList>(), count: 1 })
        );
        let b = sample().to_bytes();
        for cut in 0..b.len() {
            assert!(ValueList::decode_data(&b[..cut]).is_err(), "cut {cut}");
        }
        // A count far larger than the bytes present fails before allocating.
        assert!(matches!(ValueList::decode_data(&[0, 0x0f, 0xff, 0xff, 0, 0]), Err(DecodeError::Truncated { .. })));
        assert!(matches!(ValueList::decode_data(&[0xff, 0xff, 0xff, 0xff]), Err(DecodeError::BadLength { .. })));
        // A lying handle length inside an item.
        let mut b = sample().to_bytes();
        b[4..8].copy_from_slice(&1000u32.to_be_bytes());
        assert!(matches!(ValueList::decode_data(&b), Err(DecodeError::Truncated { .. })));
    }
}
