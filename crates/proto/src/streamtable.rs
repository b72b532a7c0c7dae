//! Handle.Net's `.dct` text format (its `StreamTable`): `{ "key" = value ... }`
//! with string, `{ }` dictionary and `( )` list values. What Handle.Net 9's
//! own reader accepts, found black-box: keys and values may be unquoted words,
//! `,` and `;` between items are ignored, a backslash takes the next character
//! literally (`\n` is `n`), a repeated key keeps its last value, and there are
//! no comments (the manual suggests unused keys such as `"comment"`).

use std::fmt;

/// Nesting deeper than this is refused (real files nest three levels).
const MAX_DEPTH: usize = 32;
/// Larger files are refused before parsing (real ones are a few KB).
pub const MAX_FILE_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Str(String),
    List(Vec<Value>),
    Dict(Dict),
}

/// Keys in file order, each once (the last value of a repeated key).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dict(pub Vec<(String, Value)>);

impl Dict {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn insert(&mut self, key: String, value: Value) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Parse a whole file: one dictionary, then nothing but white space.
pub fn parse(text: &str) -> Result<Dict, ParseError> {
    let mut p = Parser { chars: text.char_indices().peekable(), text, line: 1, column: 1, multi_line_string: None };
    p.skip_separators();
    let dict = match p.peek() {
        Some('{') => p.dict(0)?,
        Some(c) => return Err(p.error(format!("expected `{{` at the start, found `{c}`"))),
        None => return Err(p.error("the file is empty".into())),
    };
    p.skip_separators();
    match p.peek() {
        None => Ok(dict),
        Some(c) => Err(p.error(format!("unexpected `{c}` after the closing `}}`"))),
    }
}

struct Parser<'a> {
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
    text: &'a str,
    line: usize,
    column: usize,
    /// Where the last quoted string that ran over a line break opened: an
    /// unclosed `"` swallows text up to the next one, and the error shows
    /// lines later, so it is reported where that string started.
    multi_line_string: Option<(usize, usize)>,
}

impl Parser<'_> {
    fn peek(&mut self) -> Option<char> {
        self.chars.peek().map(|&(_, c)| c)
    }

    fn bump(&mut self) -> Option<char> {
        let (_, c) = self.chars.next()?;
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn error(&self, message: String) -> ParseError {
        match self.multi_line_string {
            Some((line, column)) => ParseError {
                line,
                column,
                message: format!(
                    "this string runs on to line {} (a missing closing `\"`?), where at column {}: {message}",
                    self.line, self.column
                ),
            },
            None => ParseError { line: self.line, column: self.column, message },
        }
    }

    fn skip_separators(&mut self) {
        while self.peek().is_some_and(|c| c.is_whitespace() || c == ',' || c == ';') {
            self.bump();
        }
    }

    fn dict(&mut self, depth: usize) -> Result<Dict, ParseError> {
        self.open('{', depth)?;
        let mut dict = Dict::default();
        while !self.closed('}', "a `{ }` dictionary")? {
            if let Some(c @ ('{' | '(' | ')' | '=')) = self.peek() {
                return Err(self.error(format!("expected a key, found `{c}`")));
            }
            let key = self.string()?;
            self.skip_separators();
            if self.peek() != Some('=') {
                return Err(self.error(format!("expected `=` after the key \"{key}\"")));
            }
            self.bump();
            let value = self.value(depth)?;
            dict.insert(key, value);
        }
        Ok(dict)
    }

    fn list(&mut self, depth: usize) -> Result<Vec<Value>, ParseError> {
        self.open('(', depth)?;
        let mut items = Vec::new();
        while !self.closed(')', "a `( )` list")? {
            items.push(self.value(depth)?);
        }
        Ok(items)
    }

    /// Past separators: true (and consumed) at `close`, false before another item.
    fn closed(&mut self, close: char, inside: &str) -> Result<bool, ParseError> {
        self.skip_separators();
        match self.peek() {
            Some(c) if c == close => {
                self.bump();
                Ok(true)
            }
            None => Err(self.error(format!("the file ends inside {inside} (a missing `{close}`?)"))),
            Some(_) => Ok(false),
        }
    }

    fn open(&mut self, bracket: char, depth: usize) -> Result<(), ParseError> {
        if depth >= MAX_DEPTH {
            return Err(self.error(format!("nested more than {MAX_DEPTH} levels deep")));
        }
        debug_assert_eq!(self.peek(), Some(bracket));
        self.bump();
        Ok(())
    }

    fn value(&mut self, depth: usize) -> Result<Value, ParseError> {
        self.skip_separators();
        match self.peek() {
            Some('{') => Ok(Value::Dict(self.dict(depth + 1)?)),
            Some('(') => Ok(Value::List(self.list(depth + 1)?)),
            Some('}' | ')' | '=') | None => Err(self.error("expected a value".into())),
            Some(_) => Ok(Value::Str(self.string()?)),
        }
    }

    /// A quoted string or a bare word.
    fn string(&mut self) -> Result<String, ParseError> {
        if self.peek() != Some('"') {
            let start = self.chars.peek().map_or(self.text.len(), |&(i, _)| i);
            while self.peek().is_some_and(|c| !c.is_whitespace() && !"{}()=\",;".contains(c)) {
                self.bump();
            }
            let end = self.chars.peek().map_or(self.text.len(), |&(i, _)| i);
            return Ok(self.text[start..end].to_string());
        }
        let (line, column) = (self.line, self.column);
        self.bump();
        let mut out = String::new();
        loop {
            match self.bump() {
                Some('"') => {
                    if self.line != line {
                        self.multi_line_string = Some((line, column));
                    }
                    return Ok(out);
                }
                Some('\\') => match self.bump() {
                    Some(c) => out.push(c),
                    None => break,
                },
                Some(c) => out.push(c),
                None => break,
            }
        }
        // After a string that ran over lines, the quotes are paired off by one:
        // that one is the likelier culprit.
        Err(match self.multi_line_string {
            Some(_) => self.error(format!("the file ends in a string opened at line {line}, column {column}")),
            None => ParseError { line, column, message: "this string has no closing `\"`".into() },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::Str(v.into())
    }

    #[test]
    fn reads_what_handle_net_reads() {
        let d = parse("{\n \"a\" = \"1\" b = yes; \"c\" = ( \"x\", { \"k\" = \"v\" } ( ) )\n \"a\" = \"2\" \"e\" = \"q\\\"\\n\" }\n")
            .unwrap();
        assert_eq!(d.get("a"), Some(&s("2")), "the last of a repeated key");
        assert_eq!(d.get("b"), Some(&s("yes")));
        let inner = Dict(vec![("k".into(), s("v"))]);
        assert_eq!(d.get("c"), Some(&Value::List(vec![s("x"), Value::Dict(inner), Value::List(vec![])])));
        assert_eq!(d.get("e"), Some(&s("q\"n")), "a backslash takes the next character as it is");
        assert_eq!(d.0.len(), 4);
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("{\n \"a\" = \"1\"\n \"b\" \"2\"\n}", 3, "expected `=` after the key \"b\""),
            ("{\n \"a\" = (\n \"1\"\n", 4, "missing `)`"),
            ("{\n \"a\" = \"open\n}\n", 2, "no closing"),
            // The open string ends at the next `"`; the error that follows names where it opened.
            ("{\n \"a\" = \"1\n \"b\" = \"2\"\n \"c\" = \"3\"\n}", 2, "runs on to line 3"),
            ("{ \"a\" = \"1\" }\n}", 2, "after the closing"),
            ("\n\n[", 3, "expected `{`"),
            ("{ \"a\" = }", 1, "expected a value"),
            ("", 1, "empty"),
        ];
        for (text, line, needle) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.to_string().contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        let text = format!("{{ \"a\" = {} }}", "(".repeat(100_000));
        assert!(parse(&text).unwrap_err().message.contains("nested"));
    }
}
