//! Message framing (§1): header + body + credential section, and whole units
//! (envelope + message).

use crate::codec::{put_u32, Codec, DecodeError, DecodeResult, Reader};
use crate::credential::Credential;
use crate::envelope::{Envelope, ENVELOPE_LEN};
use crate::header::{Header, HEADER_LEN};

/// A parsed message that borrows its bytes: the header is decoded, the body is
/// located (decode it with `request::RequestBody` or `response::decode_response_body`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageView<'a> {
    pub header: Header,
    /// Header and body exactly as received: the input of request digests and signatures.
    pub header_and_body: &'a [u8],
    pub body: &'a [u8],
    /// `None` when the length word is 0 or absent.
    pub credential: Option<Credential>,
}

impl MessageView<'_> {
    /// Offset where the signed part (header+body) ends, i.e. where the credential section starts.
    pub fn signed_part_end(&self) -> usize {
        self.header_and_body.len()
    }
}

/// Parse the message that follows an envelope (after decryption).
///
/// The body is located by `body_length`. After it comes either nothing (the
/// credential length word is optional) or `u32 length ‖ credential`; anything
/// after the credential is rejected so a message has one reading.
pub fn parse_message(msg: &[u8]) -> DecodeResult<MessageView<'_>> {
    if msg.len() < HEADER_LEN {
        return Err(DecodeError::Truncated { what: "message header", needed: HEADER_LEN - msg.len() });
    }
    let header = Header::read(&mut Reader::new(msg))?;
    locate_in(msg, header)
}

/// [`parse_message`] for a message whose header (its first [`HEADER_LEN`]
/// bytes, which `msg` has) is decoded already: body and credential located.
pub(crate) fn locate_in(msg: &[u8], header: Header) -> DecodeResult<MessageView<'_>> {
    let mut r = Reader::new(msg);
    r.take(HEADER_LEN, "message header")?;
    let body_len = header.body_length as usize;
    if body_len > r.remaining() {
        return Err(DecodeError::Truncated { what: "message body", needed: body_len - r.remaining() });
    }
    let body = r.take(body_len, "message body")?;
    let header_and_body = &msg[..HEADER_LEN + body_len];

    let credential = if r.is_empty() {
        None
    } else {
        let cred = r.bytes("credential")?;
        r.expect_end("credential")?;
        if cred.is_empty() {
            None
        } else {
            Some(Credential::from_bytes(cred)?)
        }
    };
    Ok(MessageView { header, header_and_body, body, credential })
}

/// Append header + body + credential section to `out`, with `body_length`
/// taken from `body`. The credential length word is always written (0 when unsigned).
pub fn encode_message(header: &Header, body: &[u8], credential: Option<&Credential>, out: &mut Vec<u8>) {
    let header = Header { body_length: body.len() as u32, ..*header };
    out.reserve(HEADER_LEN + body.len() + 4 + credential.map_or(0, Credential::encoded_len));
    header.encode(out);
    out.extend_from_slice(body);
    append_credential(credential, out);
}

/// Append a credential section (length word + credential) to an already encoded
/// header+body, e.g. after computing its signature over `header_and_body`.
pub fn append_credential(credential: Option<&Credential>, out: &mut Vec<u8>) {
    match credential {
        None => put_u32(out, 0),
        Some(c) => {
            put_u32(out, c.encoded_len() as u32);
            c.encode(out);
        }
    }
}

/// Envelope + message as one buffer, with `message_length` set from `message`.
pub fn encode_unit(envelope: &Envelope, message: &[u8]) -> Vec<u8> {
    let env = Envelope { message_length: message.len() as i32, ..*envelope };
    let mut out = Vec::with_capacity(ENVELOPE_LEN + message.len());
    out.extend_from_slice(&env.to_array());
    out.extend_from_slice(message);
    out
}

/// Split one unit off the front of `buf` (a TCP/HTTP stream may hold several):
/// returns the envelope, its message bytes and what follows.
pub fn split_unit(buf: &[u8]) -> DecodeResult<(Envelope, &[u8], &[u8])> {
    let env = Envelope::parse(buf)?;
    let len = env.check_message_length()?;
    let rest = &buf[ENVELOPE_LEN..];
    if rest.len() < len {
        return Err(DecodeError::Truncated { what: "message", needed: len - rest.len() });
    }
    Ok((env, &rest[..len], &rest[len..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credential::HS_SIGNED;
    use crate::header::{OpCode, OpFlags};

    fn header() -> Header {
        Header::request(OpCode::RESOLUTION, OpFlags::JAVA_REQUEST_DEFAULT)
    }

    #[test]
    fn credential_forms() {
        let mut m = Vec::new();
        encode_message(&header(), b"body", None, &mut m);
        let v = parse_message(&m).unwrap();
        assert_eq!(v.body, b"body");
        assert_eq!(v.header.body_length, 4);
        assert!(v.credential.is_none());
        assert_eq!(v.signed_part_end(), 28);

        // No length word at all.
        let v2 = parse_message(&m[..28]).unwrap();
        assert_eq!(v2.header_and_body, v.header_and_body);

        let c = Credential::new(HS_SIGNED, b"SHA-256", vec![1, 2, 3], 0);
        let mut m = Vec::new();
        encode_message(&header(), b"", Some(&c), &mut m);
        let v = parse_message(&m).unwrap();
        assert_eq!(v.credential.as_ref(), Some(&c));

        // Partial length word, trailing garbage, short body, short header.
        assert!(parse_message(&[&m[..24], &[0, 0][..]].concat()).is_err());
        assert!(parse_message(&[&m[..], &[0][..]].concat()).is_err());
        let mut long = m.clone();
        long[23] = 200;
        assert!(parse_message(&long).is_err());
        assert!(parse_message(&m[..23]).is_err());
    }

    #[test]
    fn units() {
        let env = Envelope::new(crate::envelope::Version::V2_10, crate::envelope::Version::V2_11, 1);
        let mut m = Vec::new();
        encode_message(&header(), b"", None, &mut m);
        let mut two = encode_unit(&env, &m);
        two.extend(encode_unit(&env, &m));
        let (e, msg, rest) = split_unit(&two).unwrap();
        assert_eq!(e.message_length as usize, m.len());
        assert_eq!(msg, &m[..]);
        let (_, msg2, rest2) = split_unit(rest).unwrap();
        assert_eq!(msg2, &m[..]);
        assert!(rest2.is_empty());
        assert!(split_unit(&two[..30]).is_err());
    }
}
