//! Text from files and servers, made safe to print on one line: control
//! characters (newlines, terminal escapes) are shown escaped, never sent raw.

/// `text` on one line, control characters escaped (`\n`, `\u{1b}`).
pub fn printable(text: &str) -> String {
    text.chars().flat_map(|c| if c.is_control() { c.escape_default().collect() } else { vec![c] }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_a_terminal_obeys() {
        assert_eq!(printable("handled 0.1\u{1b}]0;pwned\u{7}\nfake"), "handled 0.1\\u{1b}]0;pwned\\u{7}\\nfake");
        assert_eq!(printable("café 1.0"), "café 1.0");
    }
}
