//! Text encodings the proxy writes: HTML escaping, percent-encoding of
//! handles, and IRIs as URIs (for `Location` and links).

use std::borrow::Cow;
use std::fmt::Write;

/// HTML-escape text for element content and quoted attribute values.
pub(super) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    escape_into(&mut out, s);
    out
}

/// [`escape`], appended to `out` (the redirect body is built in one buffer).
pub(super) fn escape_into(out: &mut String, s: &str) {
    if !s.bytes().any(|b| matches!(b, b'&' | b'<' | b'>' | b'"' | b'\'')) {
        out.push_str(s);
        return;
    }
    out.reserve(s.len() + 8);
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
}

/// An IRI as a URI for `Location` and links: bytes outside visible ASCII and
/// the characters URIs forbid are percent-encoded (`%` itself is kept).
/// Borrowed when nothing needs encoding (the common case, no copy).
pub(super) fn iri_to_uri(iri: &str) -> Cow<'_, str> {
    // A match, not a search of a list per byte (that was 4% of a redirect's instructions).
    let keep =
        |b: u8| matches!(b, 0x21..=0x7e) && !matches!(b, b'"' | b'<' | b'>' | b'\\' | b'^' | b'`' | b'{' | b'|' | b'}');
    if iri.bytes().all(keep) {
        return Cow::Borrowed(iri);
    }
    let mut out = String::with_capacity(iri.len());
    for b in iri.bytes() {
        if keep(b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    Cow::Owned(out)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_keeps_visible_ascii_but_the_forbidden() {
        for b in 0u8..0x80 {
            let s = (b as char).to_string();
            let forbidden = b <= 0x20 || b == 0x7f || b"\"<>\\^`{|}".contains(&b);
            let want = if forbidden { format!("%{b:02X}") } else { s.clone() };
            assert_eq!(iri_to_uri(&s), want, "{b:#x}");
        }
        assert!(matches!(iri_to_uri("https://a/b?c=%20"), Cow::Borrowed(_)), "clean URLs are not copied");
        let mut out = String::from("x");
        escape_into(&mut out, "<a&b>");
        assert_eq!(out, "x&lt;a&amp;b&gt;");
    }
}
