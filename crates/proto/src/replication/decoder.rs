//! The incremental reader under both stream decoders: feed bytes, take whole
//! items; "need more" is `Ok(None)`, never an error. One item (with its
//! signature) is buffered at most, capped at `max_item` bytes; a bigger one is
//! [`StreamError::ItemTooLarge`] as soon as its length words announce it.

use super::framing::{BlockVerifier, Framing, StreamError};
use crate::codec::{DecodeError, Reader};

/// Bound on one signature (an RSA-16384 signature is 2 KiB); Java allows up to 1 MiB.
const MAX_SIGNATURE_LEN: usize = 16 * 1024;

/// What differs between the two streams: how the next item reads, given what
/// came before, and when the stream is over.
pub trait StreamGrammar: Default {
    type Item;
    /// Read the next item (the first call reads the header).
    fn read(&self, r: &mut Reader<'_>) -> Result<Self::Item, DecodeError>;
    /// Whether a signature follows `item` in a signed stream.
    fn is_signed(item: &Self::Item) -> bool;
    /// Take note of an item that was read; true when it was the last one.
    fn advance(&mut self, item: &Self::Item) -> bool;
}

/// Incremental decoder of a stream's blocks (after its [`super::Preamble`]).
pub struct StreamDecoder<G, V> {
    frames: FrameReader<V>,
    grammar: G,
    done: bool,
}

impl<G: StreamGrammar, V: BlockVerifier> StreamDecoder<G, V> {
    /// `max_item` caps one block with its signature (see `DEFAULT_MAX_ITEM_LEN`).
    pub fn new(framing: Framing<V>, max_item: usize) -> Self {
        StreamDecoder { frames: FrameReader::new(framing, max_item), grammar: G::default(), done: false }
    }

    /// Add bytes read from the connection. Take the items out with
    /// [`StreamDecoder::next_item`] before feeding more, so at most one item
    /// and one chunk are buffered.
    pub fn feed(&mut self, data: &[u8]) {
        self.frames.feed(data);
    }

    /// The next whole item; `Ok(None)` = feed more bytes (or, once
    /// [`StreamDecoder::is_done`], nothing follows). Bytes after the last item
    /// are [`StreamError::AfterEnd`].
    pub fn next_item(&mut self) -> Result<Option<G::Item>, StreamError> {
        if self.done {
            return match self.frames.pending().len() {
                0 => Ok(None),
                count => Err(StreamError::AfterEnd { count }),
            };
        }
        let grammar = &self.grammar;
        let item = self.frames.next(|r| grammar.read(r), G::is_signed)?;
        if let Some(item) = &item {
            self.done = self.grammar.advance(item);
        }
        Ok(item)
    }

    /// True once the stream's last item was taken.
    pub fn is_done(&self) -> bool {
        self.done
    }
}

/// The incremental engine under the two stream decoders: buffers fed bytes and
/// hands out whole items (with their signature checked), never holding more than
/// one item (capped at `max_item` bytes) plus the last chunk fed.
struct FrameReader<V> {
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed.
    start: usize,
    max_item: usize,
    framing: Framing<V>,
}

impl<V: BlockVerifier> FrameReader<V> {
    fn new(framing: Framing<V>, max_item: usize) -> Self {
        FrameReader { buf: Vec::new(), start: 0, max_item, framing }
    }

    fn feed(&mut self, data: &[u8]) {
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
    fn pending(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Parse one item with `parse`, then its signature if the framing asks for
    /// one. `Ok(None)`: the item is not complete yet.
    fn next<T>(
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
            if !(0..=MAX_SIGNATURE_LEN as i32).contains(&n) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_keeps_at_most_one_item() {
        let mut r = FrameReader::new(Framing::plain(), 8);
        let two = |r: &mut Reader<'_>| r.take(2, "pair").map(<[u8]>::to_vec);
        r.feed(&[1]);
        assert_eq!(r.next(two, |_| true), Ok(None));
        r.feed(&[2, 3]);
        assert_eq!(r.next(two, |_| true), Ok(Some(vec![1, 2])));
        assert_eq!(r.next(two, |_| true), Ok(None));
        r.feed(&[4]);
        assert_eq!(r.next(two, |_| true), Ok(Some(vec![3, 4])));
        assert!(r.pending().is_empty());
        let nine = |r: &mut Reader<'_>| r.take(9, "nine").map(<[u8]>::to_vec);
        assert_eq!(r.next(nine, |_| true), Err(StreamError::ItemTooLarge { len: 9, max: 8 }));
    }
}
