//! The `refs` column as Handle.Net 9 writes and reads it (observed against
//! Handle.Net 9.0.0 on PostgreSQL, tests/sql-handle-net): each reference is
//! `index:handle` with `\` `\t` `\n` `\r` in the handle written `\\` `\t`
//! `\n` `\r`; the references are joined with a tab; then every `%`, every
//! other control character (the tab separators too) and every character from
//! U+007F up is written `%XXXX`, four upper-case hex digits per UTF-16 unit.
//! So `1:A/b` and `2:C/é` are stored `1:A/b%00092:C/%00E9`.
//!
//! Reading undoes it in the same order: `%XXXX` first, then split on tabs,
//! then the backslash escapes. Rows with raw tabs between references (as
//! §8.1.4 describes the column and other programs write it) read the same.

use handled_proto::ValueReference;

use crate::InvalidRecord;

/// The column's text for these references ("" for none).
pub fn encode_refs(refs: &[ValueReference]) -> Result<String, InvalidRecord> {
    let mut joined = String::new();
    for (i, r) in refs.iter().enumerate() {
        let handle = std::str::from_utf8(&r.handle).map_err(|_| {
            InvalidRecord("a reference handle that is not UTF-8 cannot be stored in `refs` (text)".into())
        })?;
        if i > 0 {
            joined.push('\t');
        }
        joined.push_str(&r.index.to_string());
        joined.push(':');
        for c in handle.chars() {
            match c {
                '\\' => joined.push_str("\\\\"),
                '\t' => joined.push_str("\\t"),
                '\n' => joined.push_str("\\n"),
                '\r' => joined.push_str("\\r"),
                c => joined.push(c),
            }
        }
    }
    let mut out = String::with_capacity(joined.len());
    for c in joined.chars() {
        if c == '%' || !(' '..'\u{7f}').contains(&c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("%{u:04X}"));
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// The references in the column's text, lenient with rows other programs
/// wrote: a `%` not followed by four hex digits is kept as it is, a pair
/// without a number before `:` is skipped.
pub fn decode_refs(text: &str) -> Vec<ValueReference> {
    if text.is_empty() {
        return Vec::new();
    }
    unpercent(text)
        .split('\t')
        .filter_map(|pair| {
            let (index, handle) = pair.split_once(':')?;
            let index = index.trim().parse().ok()?;
            Some(ValueReference { handle: unescape(handle).into_bytes(), index })
        })
        .collect()
}

/// `%XXXX` (one UTF-16 unit each) back to characters; a lone surrogate
/// becomes U+FFFD.
fn unpercent(text: &str) -> String {
    if !text.contains('%') {
        return text.to_owned();
    }
    let mut units: Vec<u16> = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let hex = rest.get(1..5).filter(|h| c == '%' && h.bytes().all(|b| b.is_ascii_hexdigit()));
        if let Some(unit) = hex.and_then(|h| u16::from_str_radix(h, 16).ok()) {
            units.push(unit);
            rest = &rest[5..];
        } else {
            let mut buf = [0u16; 2];
            units.extend_from_slice(c.encode_utf16(&mut buf));
            rest = &rest[c.len_utf8()..];
        }
    }
    String::from_utf16_lossy(&units)
}

/// `\\` `\t` `\n` `\r` back to the characters; any other backslash stays.
fn unescape(handle: &str) -> String {
    let mut out = String::with_capacity(handle.len());
    let mut chars = handle.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.clone().next() {
            Some('\\') => out.push('\\'),
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            _ => {
                out.push('\\');
                continue;
            }
        }
        chars.next();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(index: i32, handle: &str) -> ValueReference {
        ValueReference { handle: handle.as_bytes().to_vec(), index }
    }

    /// Texts Handle.Net 9.0.0 wrote into PostgreSQL for these references
    /// (tests/sql-handle-net, 2026-11-27).
    #[test]
    fn texts_handle_net_wrote() {
        let cases: Vec<(Vec<ValueReference>, &str)> = vec![
            (vec![r(1, "TEST/ADMIN"), r(300, "TEST/ADMIN")], "1:TEST/ADMIN%0009300:TEST/ADMIN"),
            (
                vec![r(1, "TEST/P%41"), r(2, "TEST/B\\S"), r(3, "TEST/É"), r(4, "TEST/C:D"), r(5, "TEST/E%0009F"), r(6, "TEST/Q;R")],
                "1:TEST/P%002541%00092:TEST/B\\\\S%00093:TEST/%00C9%00094:TEST/C:D%00095:TEST/E%00250009F%00096:TEST/Q;R",
            ),
            (vec![r(7, "TEST/T\tAB"), r(8, "TEST/Z")], "7:TEST/T\\tAB%00098:TEST/Z"),
            (
                vec![
                    r(1, "TEST/a b"),
                    r(2, "TEST/n\nl"),
                    r(3, "TEST/q\"<>&+=?#~"),
                    r(4, "TEST/x`^{}|[]!$*()@,"),
                    r(5, "TEST/\u{20ac}\u{1F600}"),
                    r(6, "TEST/del\u{7f}"),
                    r(7, "TEST/cr\rx"),
                    r(8, "TEST/bs\\t"),
                    r(9, "TEST/nul\u{1}"),
                ],
                "1:TEST/a b%00092:TEST/n\\nl%00093:TEST/q\"<>&+=?#~%00094:TEST/x`^{}|[]!$*()@,%00095:TEST/%20AC%D83D%DE00\
                 %00096:TEST/del%007F%00097:TEST/cr\\rx%00098:TEST/bs\\\\t%00099:TEST/nul%0001",
            ),
        ];
        for (refs, text) in cases {
            assert_eq!(encode_refs(&refs).unwrap(), text);
            assert_eq!(decode_refs(text), refs, "{text}");
        }
        assert_eq!(encode_refs(&[]).unwrap(), "");
        assert!(decode_refs("").is_empty());
    }

    #[test]
    fn rows_other_programs_write() {
        // Raw tabs between references, `\t` in a handle (§8.1.4's description).
        assert_eq!(decode_refs("1:TEST/ADMIN\t300:TEST/A\\tB"), vec![r(1, "TEST/ADMIN"), r(300, "TEST/A\tB")]);
        // Colons in the handle belong to the handle.
        assert_eq!(decode_refs("1:X/a:b"), vec![r(1, "X/a:b")]);
        // Junk is skipped or kept as text, never a panic.
        assert_eq!(decode_refs("x:Y\tnocolon\t2:Z/1"), vec![r(2, "Z/1")]);
        assert_eq!(decode_refs("1:A%4\t2:B%zzzz%"), vec![r(1, "A%4"), r(2, "B%zzzz%")]);
        assert_eq!(decode_refs("1:A\\"), vec![r(1, "A\\")]);
        assert_eq!(decode_refs("1:%D83D"), vec![r(1, "\u{fffd}")]);
        assert_eq!(decode_refs("1:é%"), vec![r(1, "é%")]);
    }

    #[test]
    fn non_utf8_handles_are_refused() {
        assert!(encode_refs(&[ValueReference { handle: vec![0xff], index: 1 }]).unwrap_err().0.contains("UTF-8"));
    }
}
