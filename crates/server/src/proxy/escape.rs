//! Text encodings the proxy writes: HTML escaping, percent-encoding of
//! handles, and IRIs as URIs (for `Location` and links).

use std::fmt::Write;

/// HTML-escape text for element content and quoted attribute values.
pub(super) fn escape(s: &str) -> String {
    if !s.bytes().any(|b| matches!(b, b'&' | b'<' | b'>' | b'"' | b'\'')) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// An IRI as a URI for `Location` and links: bytes outside visible ASCII and
/// the characters URIs forbid are percent-encoded (`%` itself is kept).
pub(super) fn iri_to_uri(iri: &str) -> String {
    let keep = |b: u8| (0x21..0x7f).contains(&b) && !b"\"<>\\^`{|}".contains(&b);
    if iri.bytes().all(keep) {
        return iri.to_string();
    }
    let mut out = String::with_capacity(iri.len());
    for b in iri.bytes() {
        if keep(b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Percent-encode `s` for a URL: unreserved characters and those in `keep` stay.
pub(super) fn encode(s: &str, keep: &[u8]) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || keep.contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}
