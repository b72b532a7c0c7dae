//! UDP datagrams (§4.1): splitting a message into 492-byte chunks behind their
//! own envelopes, and sans-I/O reassembly of a multi-datagram request.

use std::collections::BTreeMap;

use crate::codec::{DecodeError, DecodeResult};
use crate::envelope::{Envelope, ENVELOPE_LEN, MAX_MESSAGE_LEN};

/// Message bytes per datagram.
pub const UDP_PAYLOAD: usize = 492;
/// Largest datagram: envelope + payload.
pub const MAX_DATAGRAM: usize = ENVELOPE_LEN + UDP_PAYLOAD;

/// How many datagrams a message of `len` bytes takes (at least one).
pub fn datagram_count(len: usize) -> usize {
    len.div_ceil(UDP_PAYLOAD).max(1)
}

/// The envelope of datagram `index`: sequence = chunk number, message length =
/// whole message. `truncated` is set only when asked and there are several chunks
/// (requests set it; the Java server leaves it clear on responses).
fn chunk_envelope(envelope: &Envelope, total: usize, index: usize, mark_truncated: bool) -> Envelope {
    Envelope {
        sequence: index as i32,
        message_length: total as i32,
        truncated: mark_truncated && datagram_count(total) > 1,
        ..*envelope
    }
}

/// Iterate over (envelope bytes, chunk) pairs without copying the message,
/// e.g. for vectored sends.
pub fn datagrams<'a>(
    envelope: &'a Envelope,
    message: &'a [u8],
    mark_truncated: bool,
) -> impl Iterator<Item = ([u8; ENVELOPE_LEN], &'a [u8])> + 'a {
    let n = datagram_count(message.len());
    (0..n).map(move |i| {
        let chunk = &message[(i * UDP_PAYLOAD).min(message.len())..((i + 1) * UDP_PAYLOAD).min(message.len())];
        (chunk_envelope(envelope, message.len(), i, mark_truncated).to_array(), chunk)
    })
}

/// Write datagram `index` of `message` into `buf`, returning its length, or
/// `None` if `index` is past the last datagram.
pub fn write_datagram(
    envelope: &Envelope,
    message: &[u8],
    index: usize,
    mark_truncated: bool,
    buf: &mut [u8; MAX_DATAGRAM],
) -> Option<usize> {
    let (env, chunk) = datagrams(envelope, message, mark_truncated).nth(index)?;
    buf[..ENVELOPE_LEN].copy_from_slice(&env);
    buf[ENVELOPE_LEN..ENVELOPE_LEN + chunk.len()].copy_from_slice(chunk);
    Some(ENVELOPE_LEN + chunk.len())
}

/// Every datagram of `message`, each with its own envelope.
pub fn split_datagrams(envelope: &Envelope, message: &[u8], mark_truncated: bool) -> Vec<Vec<u8>> {
    datagrams(envelope, message, mark_truncated)
        .map(|(env, chunk)| {
            let mut d = Vec::with_capacity(ENVELOPE_LEN + chunk.len());
            d.extend_from_slice(&env);
            d.extend_from_slice(chunk);
            d
        })
        .collect()
}

/// Reassembly of one multi-datagram message. The caller keys instances (by
/// peer address and request id), applies a timeout and bounds how many exist;
/// each one holds only the chunks received so far, at most [`MAX_MESSAGE_LEN`].
#[derive(Clone, Debug)]
pub struct Reassembly {
    first: Envelope,
    total: usize,
    chunks: BTreeMap<usize, Vec<u8>>,
    buffered: usize,
    done: bool,
}

impl Reassembly {
    /// Start from the envelope of any datagram of the message. An invalid
    /// message length is reported by the first [`add`](Self::add).
    pub fn new(first: &Envelope) -> Self {
        let total = usize::try_from(first.message_length).unwrap_or(usize::MAX);
        Reassembly { first: *first, total, chunks: BTreeMap::new(), buffered: 0, done: false }
    }

    /// Like [`new`](Self::new) but checks the message length at once.
    pub fn try_new(first: &Envelope) -> DecodeResult<Self> {
        first.check_message_length()?;
        Ok(Self::new(first))
    }

    /// The envelope the reassembly started from.
    pub fn envelope(&self) -> &Envelope {
        &self.first
    }

    pub fn request_id(&self) -> i32 {
        self.first.request_id
    }

    /// Length of the whole message.
    pub fn total_len(&self) -> usize {
        self.total
    }

    pub fn expected_chunks(&self) -> usize {
        datagram_count(self.total)
    }

    pub fn received_chunks(&self) -> usize {
        self.chunks.len()
    }

    /// Bytes currently held, for a caller enforcing a global memory budget.
    pub fn buffered_len(&self) -> usize {
        self.buffered
    }

    pub fn is_complete(&self) -> bool {
        self.done
    }

    /// Add a datagram after checking its envelope belongs to this message
    /// (same request id, session id and length).
    pub fn add_datagram(&mut self, envelope: &Envelope, payload: &[u8]) -> DecodeResult<Option<Vec<u8>>> {
        if envelope.request_id != self.first.request_id || envelope.session_id != self.first.session_id {
            return Err(DecodeError::Invalid { what: "datagram", detail: "belongs to another message".into() });
        }
        if envelope.message_length != self.first.message_length {
            return Err(DecodeError::BadLength {
                what: "datagram message length",
                len: envelope.message_length as i64,
            });
        }
        self.add(envelope.sequence, payload)
    }

    /// Add chunk `seq`. Returns the whole message once every chunk is in.
    /// Chunks must be exactly 492 bytes except the last; a repeated chunk is
    /// ignored if identical and rejected otherwise.
    pub fn add(&mut self, seq: i32, chunk: &[u8]) -> DecodeResult<Option<Vec<u8>>> {
        if self.total > MAX_MESSAGE_LEN {
            return Err(DecodeError::BadLength { what: "message length", len: self.first.message_length as i64 });
        }
        if self.done {
            return Err(DecodeError::Invalid { what: "datagram", detail: "message already complete".into() });
        }
        let n = self.expected_chunks();
        let idx = usize::try_from(seq)
            .ok()
            .filter(|&i| i < n)
            .ok_or(DecodeError::BadLength { what: "datagram sequence number", len: seq as i64 })?;
        let want = if idx + 1 == n { self.total - idx * UDP_PAYLOAD } else { UDP_PAYLOAD };
        if chunk.len() != want {
            return Err(DecodeError::BadLength { what: "datagram payload", len: chunk.len() as i64 });
        }
        if let Some(prev) = self.chunks.get(&idx) {
            if prev.as_slice() == chunk {
                return Ok(None);
            }
            return Err(DecodeError::Invalid {
                what: "datagram",
                detail: format!("chunk {idx} differs from an earlier copy"),
            });
        }
        self.chunks.insert(idx, chunk.to_vec());
        self.buffered += chunk.len();
        if self.chunks.len() < n {
            return Ok(None);
        }
        self.done = true;
        let mut msg = Vec::with_capacity(self.total);
        for c in std::mem::take(&mut self.chunks).into_values() {
            msg.extend_from_slice(&c);
        }
        self.buffered = 0;
        Ok(Some(msg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::Version;

    #[test]
    fn split_and_reassemble() {
        let env = Envelope::new(Version::V2_10, Version::V2_11, 77);
        let msg: Vec<u8> = (0..1079u32).map(|i| i as u8).collect();
        let ds = split_datagrams(&env, &msg, true);
        assert_eq!(ds.len(), 3);
        assert_eq!(ds.iter().map(Vec::len).collect::<Vec<_>>(), [512, 512, 115]);
        let mut buf = [0u8; MAX_DATAGRAM];
        assert_eq!(write_datagram(&env, &msg, 2, true, &mut buf), Some(115));
        assert_eq!(&buf[..115], &ds[2][..]);
        assert_eq!(write_datagram(&env, &msg, 3, true, &mut buf), None);

        let envs: Vec<Envelope> = ds.iter().map(|d| Envelope::parse(d).unwrap()).collect();
        assert!(envs.iter().all(|e| e.truncated && e.message_length == 1079));
        let mut r = Reassembly::new(&envs[1]);
        assert_eq!(r.add_datagram(&envs[2], &ds[2][20..]).unwrap(), None);
        assert_eq!(r.add_datagram(&envs[2], &ds[2][20..]).unwrap(), None);
        assert!(r.add(2, &ds[1][20..135]).is_err());
        assert!(r.add(0, &ds[0][20..100]).is_err());
        assert!(r.add(3, &ds[0][20..]).is_err());
        assert_eq!(r.add_datagram(&envs[0], &ds[0][20..]).unwrap(), None);
        assert_eq!(r.buffered_len(), 492 + 95);
        assert_eq!(r.add_datagram(&envs[1], &ds[1][20..]).unwrap(), Some(msg));
        assert!(r.add(0, &ds[0][20..]).is_err());
    }

    #[test]
    fn small_and_invalid() {
        let env = Envelope::new(Version::V2_10, Version::V2_11, 1);
        let ds = split_datagrams(&env, b"abc", true);
        assert_eq!(ds.len(), 1);
        assert!(!Envelope::parse(&ds[0]).unwrap().truncated);
        assert_eq!(split_datagrams(&env, b"", false).len(), 1);

        let bad = Envelope { message_length: -5, ..env };
        assert!(Reassembly::try_new(&bad).is_err());
        assert!(Reassembly::new(&bad).add(0, b"").is_err());
        let huge = Envelope { message_length: (MAX_MESSAGE_LEN + 1) as i32, ..env };
        assert!(Reassembly::new(&huge).add(0, &[0; 492]).is_err());
        let other = Envelope { request_id: 2, message_length: 3, ..env };
        let mut r = Reassembly::new(&Envelope { message_length: 3, ..env });
        assert!(r.add_datagram(&other, b"abc").is_err());
    }
}
