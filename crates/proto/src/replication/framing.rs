//! The framing of the streamed part that follows a 1001/1002 response on the same
//! TCP connection (Java `SignedOutputStream` / `SignedInputStream`):
//!
//! * `i32 streamType`: [`StreamType::Tls`] (`0x544C5300`, "TLS\0", ≥ 2.8 sources:
//!   the source then starts a TLS server handshake on the socket and every later
//!   byte runs inside TLS, without signatures), [`StreamType::Signed`] (0) or
//!   [`StreamType::Unsigned`] (-1; a receiver refuses it unless the channel is
//!   already secure).
//! * Signed only: `bytes hashAlgId` (`"SHA1"`), then blocks, each followed by
//!   `bytes signature` over the block's bytes (all bytes since the previous
//!   signature; the type word, hash id and signatures themselves are not signed).
//!   The signature algorithm follows from the hash id and the key (SHA1withDSA /
//!   SHA1withRSA); the caller supplies it as a [`BlockSigner`] / [`BlockVerifier`].
//!
//! A block is one stream item; the dump stream's final `-1` is the one item that
//! Java writes without a signature after it (see `StreamItem::is_signed`).

use crate::codec::{put_bytes, put_i32, DecodeError, Reader};
use thiserror::Error;

/// Bound on a hash id (`"SHA1"`, `"SHA-256"`…); Java allows up to 1 MiB.
const MAX_HASH_ID_LEN: usize = 64;
/// Bound on one signature (an RSA-16384 signature is 2 KiB); Java allows up to 1 MiB.
const MAX_OUR_SIGNATURE_LEN: usize = 16 * 1024;

/// The first word of the streamed part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamType {
    Tls,
    Signed,
    Unsigned,
}

impl StreamType {
    pub const TLS_WORD: i32 = 0x544C_5300;
    pub const SIGNED_WORD: i32 = 0;
    pub const UNSIGNED_WORD: i32 = -1;

    pub fn word(self) -> i32 {
        match self {
            StreamType::Tls => Self::TLS_WORD,
            StreamType::Signed => Self::SIGNED_WORD,
            StreamType::Unsigned => Self::UNSIGNED_WORD,
        }
    }

    pub fn from_word(word: i32) -> Result<Self, StreamError> {
        match word {
            Self::TLS_WORD => Ok(StreamType::Tls),
            Self::SIGNED_WORD => Ok(StreamType::Signed),
            Self::UNSIGNED_WORD => Ok(StreamType::Unsigned),
            other => {
                Err(StreamError::Decode(DecodeError::Invalid { what: "stream type", detail: format!("{other:#x}") }))
            }
        }
    }
}

/// What precedes the blocks: the stream type and, when signed, the hash id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Preamble {
    /// Switch the connection to TLS (client side) before reading further.
    Tls,
    Signed {
        hash_alg_id: Vec<u8>,
    },
    Unsigned,
}

impl Preamble {
    /// The hash id Java's `SignedOutputStream` writes.
    pub const JAVA_HASH_ALG_ID: &'static [u8] = b"SHA1";

    pub fn stream_type(&self) -> StreamType {
        match self {
            Preamble::Tls => StreamType::Tls,
            Preamble::Signed { .. } => StreamType::Signed,
            Preamble::Unsigned => StreamType::Unsigned,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        put_i32(out, self.stream_type().word());
        if let Preamble::Signed { hash_alg_id } = self {
            put_bytes(out, hash_alg_id);
        }
    }

    /// Decode from the front of `buf`: `Ok(None)` = need more bytes, else the
    /// preamble and how many bytes it took. After [`Preamble::Tls`] the rest of
    /// the stream must be read through TLS, so read no further from this buffer
    /// than the returned length.
    pub fn decode(buf: &[u8]) -> Result<Option<(Preamble, usize)>, StreamError> {
        let r = &mut Reader::new(buf);
        let word = match r.i32("stream type") {
            Ok(w) => w,
            Err(_) => return Ok(None),
        };
        let preamble = match StreamType::from_word(word)? {
            StreamType::Tls => Preamble::Tls,
            StreamType::Unsigned => Preamble::Unsigned,
            StreamType::Signed => {
                let n = match r.i32("hash id length") {
                    Ok(n) => n,
                    Err(_) => return Ok(None),
                };
                if !(0..=MAX_HASH_ID_LEN as i32).contains(&n) {
                    return Err(DecodeError::BadLength { what: "hash id", len: n as i64 }.into());
                }
                match r.take(n as usize, "hash id") {
                    Ok(id) => Preamble::Signed { hash_alg_id: id.to_vec() },
                    Err(_) => return Ok(None),
                }
            }
        };
        Ok(Some((preamble, r.position())))
    }
}

/// Signs blocks incrementally, like a `java.security.Signature`: `sign` returns the
/// signature of everything `update`d since the last `sign` and starts afresh.
pub trait BlockSigner {
    fn update(&mut self, data: &[u8]);
    fn sign(&mut self) -> Vec<u8>;
}

/// Verifies blocks incrementally: `verify` checks `signature` against everything
/// `update`d since the last `verify` and starts afresh.
pub trait BlockVerifier {
    fn update(&mut self, data: &[u8]);
    fn verify(&mut self, signature: &[u8]) -> bool;
}

/// The verifier type of an unsigned or TLS stream (never called).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoVerifier;

impl BlockVerifier for NoVerifier {
    fn update(&mut self, _data: &[u8]) {}
    fn verify(&mut self, _signature: &[u8]) -> bool {
        false
    }
}

/// How blocks are framed after the preamble.
pub enum Framing<V> {
    /// Unsigned or inside TLS: blocks follow each other bare.
    Plain,
    /// Each block (but the dump's final `-1`) is followed by `bytes signature`.
    Signed(V),
}

impl Framing<NoVerifier> {
    pub fn plain() -> Self {
        Framing::Plain
    }
}

/// Why a stream could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StreamError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("stream item of at least {len} bytes exceeds the limit of {max}")]
    ItemTooLarge { len: usize, max: usize },
    #[error("signature of stream block does not verify")]
    BadSignature,
    #[error("stream data after its end ({count} bytes)")]
    AfterEnd { count: usize },
}

/// A stream item: its bytes and whether a signature follows it when signed.
pub trait StreamItem {
    fn encode(&self, out: &mut Vec<u8>);
    /// False only for the dump stream's ABSOLUTELY_DONE, which Java leaves unsigned.
    fn is_signed(&self) -> bool {
        true
    }
}

/// Writes the streamed part into `Vec<u8>`s: the preamble, then items, each
/// followed by its signature when the stream is signed. With TLS, write the
/// preamble to the plain connection and the items into the TLS session.
pub struct StreamWriter<S> {
    signer: Option<S>,
    block: Vec<u8>,
}

impl<S: BlockSigner> StreamWriter<S> {
    /// A PK-signed stream (Java's pre-2.8 form): writes the preamble.
    pub fn signed(signer: S, hash_alg_id: &[u8], out: &mut Vec<u8>) -> Self {
        Preamble::Signed { hash_alg_id: hash_alg_id.to_vec() }.encode(out);
        StreamWriter { signer: Some(signer), block: Vec::new() }
    }

    /// A stream without signatures: writes the TLS marker or the unsigned word.
    /// `StreamType::Signed` is not accepted here (use [`StreamWriter::signed`]).
    pub fn plain(kind: StreamType, out: &mut Vec<u8>) -> Self {
        debug_assert!(kind != StreamType::Signed);
        let kind = if kind == StreamType::Tls { Preamble::Tls } else { Preamble::Unsigned };
        kind.encode(out);
        StreamWriter { signer: None, block: Vec::new() }
    }

    /// Append one item (and its signature) to `out`.
    pub fn write(&mut self, item: &impl StreamItem, out: &mut Vec<u8>) {
        match &mut self.signer {
            Some(signer) if item.is_signed() => {
                self.block.clear();
                item.encode(&mut self.block);
                signer.update(&self.block);
                out.extend_from_slice(&self.block);
                put_bytes(out, &signer.sign());
            }
            Some(signer) => {
                // Unsigned tail: Java still feeds it to the signature, which is never used.
                self.block.clear();
                item.encode(&mut self.block);
                signer.update(&self.block);
                out.extend_from_slice(&self.block);
            }
            None => item.encode(out),
        }
    }
}

/// The incremental engine under the two stream decoders: buffers fed bytes and
/// hands out whole items (with their signature checked), never holding more than
/// one item (capped at `max_item` bytes) plus the last chunk fed.
pub(crate) struct FrameReader<V> {
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed.
    start: usize,
    max_item: usize,
    framing: Framing<V>,
}

impl<V: BlockVerifier> FrameReader<V> {
    pub(crate) fn new(framing: Framing<V>, max_item: usize) -> Self {
        FrameReader { buf: Vec::new(), start: 0, max_item, framing }
    }

    pub(crate) fn feed(&mut self, data: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > self.max_item.min(self.buf.len() / 2) {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// Bytes fed but not consumed.
    pub(crate) fn pending(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Parse one item with `parse`, then its signature if the framing asks for
    /// one. `Ok(None)`: the item is not complete yet.
    pub(crate) fn next<T>(
        &mut self,
        parse: impl FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
        signed: impl FnOnce(&T) -> bool,
    ) -> Result<Option<T>, StreamError> {
        let pending = &self.buf[self.start..];
        let r = &mut Reader::new(pending);
        let item = match parse(r) {
            Ok(item) => item,
            Err(e) => return self.incomplete(pending.len(), e),
        };
        let item_len = r.position();
        let mut signature = None;
        if let (Framing::Signed(_), true) = (&self.framing, signed(&item)) {
            let n = match r.i32("signature length") {
                Ok(n) => n,
                Err(e) => return self.incomplete(pending.len(), e),
            };
            if !(0..=MAX_OUR_SIGNATURE_LEN as i32).contains(&n) {
                return Err(DecodeError::BadLength { what: "block signature", len: n as i64 }.into());
            }
            match r.take(n as usize, "block signature") {
                Ok(sig) => signature = Some(sig),
                Err(e) => return self.incomplete(pending.len(), e),
            }
        }
        let total = r.position();
        if total > self.max_item {
            return Err(StreamError::ItemTooLarge { len: total, max: self.max_item });
        }
        if let Framing::Signed(verifier) = &mut self.framing {
            verifier.update(&pending[..item_len]);
            if let Some(sig) = signature {
                if !verifier.verify(sig) {
                    return Err(StreamError::BadSignature);
                }
            }
        }
        self.start += total;
        Ok(Some(item))
    }

    /// A parse stopped: "need more" when the input ran out within the size cap,
    /// else the error.
    fn incomplete<T>(&self, have: usize, e: DecodeError) -> Result<Option<T>, StreamError> {
        match e {
            DecodeError::Truncated { needed, .. } => {
                let len = have.saturating_add(needed);
                if len > self.max_item {
                    Err(StreamError::ItemTooLarge { len, max: self.max_item })
                } else {
                    Ok(None)
                }
            }
            other => Err(other.into()),
        }
    }
}
