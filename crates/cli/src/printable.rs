//! Text from files and servers, made safe to print on one line: control
//! characters (newlines, terminal escapes) are shown escaped, never sent raw.

/// `text` on one line, control characters escaped (`\n`, `\u{1b}`).
pub fn printable(text: &str) -> String {
    text.chars().flat_map(|c| if c.is_control() { c.escape_default().collect() } else { vec![c] }).collect()
}

/// A unix time as an RFC 3339 date (UTC), or the number when out of range.
pub fn date(unix_secs: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix_secs)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| format!("unix time {unix_secs}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_a_terminal_obeys() {
        assert_eq!(printable("handled 0.1\u{1b}]0;pwned\u{7}\nfake"), "handled 0.1\\u{1b}]0;pwned\\u{7}\\nfake");
        assert_eq!(printable("café 1.0"), "café 1.0");
        assert_eq!(date(1_795_772_261), "2026-11-27T09:37:41Z");
        assert_eq!(date(i64::MAX), format!("unix time {}", i64::MAX));
    }
}
