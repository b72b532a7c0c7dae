//! A received request unit (envelope + message), read once where it arrives:
//! the envelope, the header, how the message frames (its length, the body's and
//! the credential's bounds) and the handle the body starts with. Whoever
//! handles the unit afterwards (the choice of thread, the answer, the access
//! line) reads these rather than the bytes again.
//!
//! Generic over how the bytes are held: `Unit<Vec<u8>>` owns them (a UDP
//! request sent to a worker), `Unit<&[u8]>` borrows them (a TCP connection's
//! reused buffer).

use crate::codec::{Codec, DecodeError, Reader};
use crate::credential::Credential;
use crate::envelope::{Envelope, ENVELOPE_LEN};
use crate::header::{Header, OpCode, HEADER_LEN};

/// A request unit whose envelope read; the rest as [`Framing`] says.
#[derive(Debug, Clone)]
pub struct Unit<B> {
    bytes: B,
    envelope: Envelope,
    /// The 24 bytes after the envelope decoded as a header, whatever follows
    /// (ciphertext when encrypted, a message that does not frame).
    leading_header: Option<Header>,
    framing: Framing,
}

/// How the message after the envelope reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framing {
    /// The envelope's message length is out of range.
    BadLength(DecodeError),
    /// The bytes after the envelope are not as many as it announces.
    WrongLength,
    /// Encrypted with a session's key: it reads once decrypted.
    Encrypted,
    /// The message does not parse (header, body or credential).
    Invalid(DecodeError),
    /// Header, body and credential are where they should be.
    Message(Located),
}

/// Where a message that parsed keeps its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// End of header and body, from the start of the message.
    header_and_body_end: usize,
    credential: Option<Credential>,
    /// The handle the body starts with (offsets in the unit), for the
    /// operations that act on a handle or prefix.
    handle: Option<(usize, usize)>,
}

/// A message's parts, borrowed from its unit (or from its decrypted bytes).
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    pub header: Header,
    /// Header and body exactly as received: the input of digests and MACs.
    pub header_and_body: &'a [u8],
    pub body: &'a [u8],
    pub credential: Option<&'a Credential>,
}

/// Operations whose body starts with the handle (or prefix) they act on.
pub fn acts_on_a_handle(op: OpCode) -> bool {
    matches!(op.0, 1 | 100..=105 | 300 | 301)
}

impl<B: AsRef<[u8]>> Unit<B> {
    /// Read a unit; None when fewer than 20 bytes arrived (no envelope: nothing
    /// to echo, so nothing can be answered).
    pub fn parse(bytes: B) -> Option<Self> {
        let envelope = Envelope::parse(bytes.as_ref()).ok()?;
        Some(Self::with_envelope(envelope, bytes))
    }

    /// Read a unit whose envelope the framing already read from its first 20 bytes.
    pub fn with_envelope(envelope: Envelope, bytes: B) -> Self {
        let all = bytes.as_ref();
        debug_assert!(Envelope::parse(all).ok() == Some(envelope), "the envelope is the unit's");
        let message = all.get(ENVELOPE_LEN..).unwrap_or_default();
        let leading_header = message.get(..HEADER_LEN).and_then(|h| Header::from_bytes(h).ok());
        let framing = match envelope.check_message_length() {
            Err(e) => Framing::BadLength(e),
            Ok(len) if len != message.len() => Framing::WrongLength,
            Ok(_) if envelope.encrypted => Framing::Encrypted,
            Ok(_) => match locate(message, leading_header) {
                Ok(located) => Framing::Message(located),
                Err(e) => Framing::Invalid(e),
            },
        };
        Unit { bytes, envelope, leading_header, framing }
    }

    /// The whole unit as received.
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_ref()
    }

    pub fn into_bytes(self) -> B {
        self.bytes
    }

    pub fn envelope(&self) -> &Envelope {
        &self.envelope
    }

    pub fn framing(&self) -> &Framing {
        &self.framing
    }

    /// Everything after the envelope (ciphertext when encrypted).
    pub fn message_bytes(&self) -> &[u8] {
        self.bytes().get(ENVELOPE_LEN..).unwrap_or_default()
    }

    /// The 24 bytes after the envelope read as a header, whether or not the
    /// message frames or is encrypted: what an answer given without handling
    /// the request (a refusal) echoes.
    pub fn leading_header(&self) -> Option<Header> {
        self.leading_header
    }

    /// Header and body as the leading header bounds them, when all there
    /// (empty otherwise): the request digest's input for such an answer.
    pub fn leading_header_and_body(&self) -> &[u8] {
        let end = |h: Header| HEADER_LEN.checked_add(h.body_length as usize);
        self.leading_header.and_then(end).and_then(|end| self.message_bytes().get(..end)).unwrap_or_default()
    }

    /// The message's parts, when it parsed.
    pub fn message(&self) -> Option<Message<'_>> {
        let Framing::Message(located) = &self.framing else { return None };
        let header = self.leading_header?;
        let header_and_body = self.message_bytes().get(..located.header_and_body_end)?;
        Some(Message {
            header,
            header_and_body,
            body: &header_and_body[HEADER_LEN..],
            credential: located.credential.as_ref(),
        })
    }

    /// The header of a message that parsed.
    pub fn header(&self) -> Option<Header> {
        matches!(self.framing, Framing::Message(_)).then_some(self.leading_header).flatten()
    }

    /// The handle (or prefix) the request acts on, when its operation takes
    /// one ([`acts_on_a_handle`]) and its body starts with one.
    pub fn handle(&self) -> Option<&[u8]> {
        let Framing::Message(Located { handle: Some((start, end)), .. }) = self.framing else { return None };
        self.bytes().get(start..end)
    }
}

/// [`crate::message::parse_message`]'s reading of a message, as bounds.
fn locate(message: &[u8], header: Option<Header>) -> Result<Located, DecodeError> {
    // Decoded from the unit's first bytes already (None: fewer than a header).
    let view = match header {
        Some(header) => crate::message::locate_in(message, header)?,
        None => crate::message::parse_message(message)?,
    };
    let handle =
        acts_on_a_handle(view.header.op_code).then(|| Reader::new(view.body).bytes("handle").ok()).flatten().map(|h| {
            // Offsets in the unit: the body starts after envelope and header.
            let start = ENVELOPE_LEN + HEADER_LEN + 4;
            (start, start + h.len())
        });
    Ok(Located { header_and_body_end: view.header_and_body.len(), credential: view.credential, handle })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::Version;
    use crate::header::OpFlags;
    use crate::message::{encode_message, encode_unit, parse_message};
    use crate::request::{RequestBody, ResolutionRequest};

    fn resolution(handle: &[u8]) -> Vec<u8> {
        let request = ResolutionRequest { handle: handle.to_vec(), indexes: vec![1], types: vec![] };
        let mut body = Vec::new();
        RequestBody::Resolution(request).encode(&mut body);
        let mut message = Vec::new();
        encode_message(&Header::request(OpCode::RESOLUTION, OpFlags::REC), &body, None, &mut message);
        encode_unit(&Envelope::new(Version::V2_10, Version::V2_10, 7), &message)
    }

    #[test]
    fn a_unit_reads_as_parse_message_reads_it() {
        let bytes = resolution(b"P1/doc");
        let unit = Unit::parse(&bytes[..]).unwrap();
        let view = parse_message(&bytes[ENVELOPE_LEN..]).unwrap();
        let message = unit.message().unwrap();
        assert_eq!(
            (message.header, message.header_and_body, message.body, message.credential),
            (view.header, view.header_and_body, view.body, view.credential.as_ref())
        );
        assert_eq!(unit.header(), Some(view.header));
        assert_eq!(unit.envelope().request_id, 7);
        assert_eq!(unit.leading_header_and_body(), view.header_and_body);
    }

    #[test]
    fn the_handle_is_read_from_a_resolution_unit_or_not_at_all() {
        let bytes = resolution(b"P1/doc");
        assert_eq!(Unit::parse(&bytes[..]).unwrap().handle(), Some(&b"P1/doc"[..]));
        let header_end = ENVELOPE_LEN + HEADER_LEN;
        let cut = Unit::parse(&bytes[..header_end + 6]).unwrap();
        assert_eq!((cut.handle(), cut.framing()), (None, &Framing::WrongLength), "cut short");
        let mut huge = bytes[..header_end].to_vec();
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(Unit::parse(huge).unwrap().handle(), None, "a length past the end");
        assert!(Unit::parse(&bytes[..ENVELOPE_LEN - 1]).is_none(), "no envelope");
    }

    #[test]
    fn what_does_not_frame_says_why_and_keeps_its_leading_header() {
        let bytes = resolution(b"P1/doc");
        let mut bad = bytes.clone();
        bad[16..20].copy_from_slice(&(-1i32).to_be_bytes());
        let unit = Unit::parse(bad).unwrap();
        assert!(matches!(unit.framing(), Framing::BadLength(_)));
        assert_eq!(unit.leading_header().map(|h| h.op_code), Some(OpCode::RESOLUTION));
        assert_eq!(unit.header(), None);
        let mut encrypted = bytes.clone();
        encrypted[2] |= 0x40;
        let encrypted = Unit::parse(encrypted).unwrap();
        assert_eq!(encrypted.framing(), &Framing::Encrypted);
        assert!(encrypted.message().is_none() && encrypted.leading_header().is_some());
        // Junk after the credential section: one reading only.
        let mut trailing = bytes.clone();
        trailing.extend_from_slice(&[0, 0, 0, 0, 9]);
        let len = (trailing.len() - ENVELOPE_LEN) as i32;
        trailing[16..20].copy_from_slice(&len.to_be_bytes());
        let trailing = Unit::parse(trailing).unwrap();
        assert_eq!(
            trailing.framing(),
            &Framing::Invalid(parse_message(&trailing.bytes()[ENVELOPE_LEN..]).unwrap_err())
        );
    }
}
