//! Primitive reading and writing, after rustls' `msgs/codec.rs`: a bounds-checked
//! [`Reader`] cursor, a [`Codec`] trait, and typed errors. Nothing here panics on input.

use thiserror::Error;

/// Largest byte string or array the reference decoder accepts (§0 conventions).
pub const MAX_ARRAY_LEN: usize = 1_048_576;

/// Why a byte sequence could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("message truncated: needed {needed} more bytes while reading {what}")]
    Truncated { what: &'static str, needed: usize },
    #[error("length {len} of {what} is out of range")]
    BadLength { what: &'static str, len: i64 },
    #[error("{what} is not valid UTF-8")]
    BadUtf8 { what: &'static str },
    #[error("{count} trailing bytes after {what}")]
    TrailingBytes { what: &'static str, count: usize },
    #[error("invalid {what}: {detail}")]
    Invalid { what: &'static str, detail: String },
}

pub type DecodeResult<T> = Result<T, DecodeError>;

/// A cursor over a byte slice; every read is bounds-checked.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The bytes not yet read.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// Take exactly `n` bytes.
    pub fn take(&mut self, n: usize, what: &'static str) -> DecodeResult<&'a [u8]> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated { what, needed: n - self.remaining() });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// Take everything that is left.
    pub fn take_rest(&mut self) -> &'a [u8] {
        let out = self.rest();
        self.pos = self.buf.len();
        out
    }

    pub fn u8(&mut self, what: &'static str) -> DecodeResult<u8> {
        Ok(self.take(1, what)?[0])
    }

    pub fn u16(&mut self, what: &'static str) -> DecodeResult<u16> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self, what: &'static str) -> DecodeResult<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn i32(&mut self, what: &'static str) -> DecodeResult<i32> {
        Ok(self.u32(what)? as i32)
    }

    pub fn u64(&mut self, what: &'static str) -> DecodeResult<u64> {
        let hi = self.u32(what)? as u64;
        let lo = self.u32(what)? as u64;
        Ok(hi << 32 | lo)
    }

    /// A count or length word: a signed Java int in `0..=MAX_ARRAY_LEN`.
    pub fn len(&mut self, what: &'static str) -> DecodeResult<usize> {
        let n = self.i32(what)?;
        if n < 0 || n as usize > MAX_ARRAY_LEN {
            return Err(DecodeError::BadLength { what, len: n as i64 });
        }
        Ok(n as usize)
    }

    /// `u32 length ‖ bytes`.
    pub fn bytes(&mut self, what: &'static str) -> DecodeResult<&'a [u8]> {
        let n = self.len(what)?;
        self.take(n, what)
    }

    /// `u32 length ‖ UTF-8 text`.
    pub fn utf8(&mut self, what: &'static str) -> DecodeResult<&'a str> {
        let b = self.bytes(what)?;
        std::str::from_utf8(b).map_err(|_| DecodeError::BadUtf8 { what })
    }

    /// `u32 count ‖ count items`; the count is checked against the bytes left so a
    /// lying count cannot make us allocate gigabytes.
    pub fn list<T>(
        &mut self,
        what: &'static str,
        min_item_len: usize,
        mut item: impl FnMut(&mut Self) -> DecodeResult<T>,
    ) -> DecodeResult<Vec<T>> {
        let n = self.len(what)?;
        if n.saturating_mul(min_item_len.max(1)) > self.remaining() && min_item_len > 0 {
            return Err(DecodeError::Truncated { what, needed: n * min_item_len - self.remaining() });
        }
        let mut out = Vec::with_capacity(n.min(self.remaining()));
        for _ in 0..n {
            out.push(item(self)?);
        }
        Ok(out)
    }

    /// Fail unless everything was consumed.
    pub fn expect_end(&self, what: &'static str) -> DecodeResult<()> {
        if self.remaining() != 0 {
            return Err(DecodeError::TrailingBytes { what, count: self.remaining() });
        }
        Ok(())
    }
}

/// A type with one wire form.
pub trait Codec: Sized {
    fn encode(&self, out: &mut Vec<u8>);
    fn read(r: &mut Reader<'_>) -> DecodeResult<Self>;

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Decode a whole buffer, rejecting trailing bytes.
    fn from_bytes(buf: &[u8]) -> DecodeResult<Self> {
        let mut r = Reader::new(buf);
        let v = Self::read(&mut r)?;
        r.expect_end(std::any::type_name::<Self>())?;
        Ok(v)
    }
}

pub fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

pub fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// `u32 length ‖ bytes`.
pub fn put_bytes(out: &mut Vec<u8>, v: &[u8]) {
    put_u32(out, v.len() as u32);
    out.extend_from_slice(v);
}

/// `u32 count ‖ items`.
pub fn put_list<T>(out: &mut Vec<u8>, items: &[T], mut item: impl FnMut(&mut Vec<u8>, &T)) {
    put_u32(out, items.len() as u32);
    for i in items {
        item(out, i);
    }
}
