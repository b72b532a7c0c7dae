//! The parameters a template's values refer to (`${handle}`, `${base}`,
//! `${extension}`, `${x[2]}`, `$1`, …) and their substitution, with the
//! semantics of Handle.Net's `TemplateBuilder` (§11.2).
//!
//! Parameters live in one map for the whole construction: a scope (an
//! `<if>`'s contents, a `<foreach>` round) sets what it sets and puts back
//! what that shadowed when it ends, so entering a scope copies nothing and a
//! lookup costs the same however many parameters are defined. Texts with
//! references are parsed once, when the namespace is compiled ([`Text`]).

use super::bounds::{Bound, MAX_VALUE_BYTES};
use super::expressions::Groups;
use handled_proto::value::HandleValue;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

/// The parameter `$N` and `${N}` refer to: the extension's submatches.
const DEFAULT_KEY: &str = "extension";

/// A reference as written inside `${…}` (or `$N`), parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Reference {
    /// `name`: the parameter's text.
    Whole(Arc<str>),
    /// `N` (a submatch of the extension) or `name[N]`; an absurd N names no group.
    Group(Arc<str>, usize),
}

impl Reference {
    pub fn parse(key: &str) -> Reference {
        if key.starts_with(|c: char| c.is_ascii_digit()) {
            if let Ok(n) = key.parse::<usize>() {
                return Reference::Group(DEFAULT_KEY.into(), n);
            }
        }
        if let Some(open) = key.strip_suffix(']').and_then(|k| k.rfind('[')) {
            if let Ok(n) = key[open + 1..key.len() - 1].parse::<usize>() {
                return Reference::Group(key[..open].into(), n);
            }
        }
        Reference::Whole(key.into())
    }
}

/// A text with references, parsed: literal pieces and references in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Text(Vec<Piece>);

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Literal(String),
    Reference(Reference),
}

impl Text {
    /// `template` read as the original reads it: `${…}` and `$N` are
    /// references; `\x` stands for `x`; a `$` starting neither is itself.
    pub fn parse(template: &str) -> Text {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut chars = template.char_indices().peekable();
        let reference = |literal: &mut String, pieces: &mut Vec<Piece>, r: Reference| {
            if !literal.is_empty() {
                pieces.push(Piece::Literal(std::mem::take(literal)));
            }
            pieces.push(Piece::Reference(r));
        };
        while let Some((_, c)) = chars.next() {
            match c {
                '\\' => literal.push(chars.next().map_or('\\', |(_, c)| c)),
                '$' => match chars.peek().copied() {
                    None => literal.push('$'),
                    Some((at, '{')) => match template[at..].find('}') {
                        Some(len) => {
                            reference(&mut literal, &mut pieces, Reference::parse(&template[at + 1..at + len]));
                            while chars.next_if(|&(i, _)| i <= at + len).is_some() {}
                        }
                        None => {
                            literal.push_str("${");
                            chars.next();
                        }
                    },
                    Some((at, d)) if d.is_ascii_digit() => {
                        let digits = template[at..].find(|c: char| !c.is_ascii_digit()).unwrap_or(template.len() - at);
                        // Java reads the number as an int; absurd ones name no group.
                        let n = template[at..at + digits].parse::<usize>().unwrap_or(usize::MAX);
                        reference(&mut literal, &mut pieces, Reference::Group(DEFAULT_KEY.into(), n));
                        while chars.next_if(|&(i, _)| i < at + digits).is_some() {}
                    }
                    Some((_, other)) => {
                        literal.push('$');
                        literal.push(other);
                        chars.next();
                    }
                },
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal));
        }
        Text(pieces)
    }
}

/// What a parameter holds.
#[derive(Clone)]
enum Param<'a> {
    Text(Arc<str>),
    /// Set by a regular-expression match: group 0 is the whole match; groups
    /// that took no part are None.
    Match(Groups),
    /// Inside `<foreach>`: a field of the base handle's value at hand, read
    /// when referred to (most rounds never copy it).
    Field(&'a HandleValue, Field),
}

#[derive(Clone, Copy)]
pub enum Field {
    Type,
    Data,
    Index,
}

/// The parameters in scope: each name's innermost value, and an undo log
/// that ends a scope by putting back what it shadowed.
pub struct Params<'a> {
    current: HashMap<Arc<str>, Param<'a>, foldhash::fast::RandomState>,
    undo: Vec<(Arc<str>, Option<Param<'a>>)>,
}

impl<'a> Params<'a> {
    pub fn new(handle: &str, base: &str, extension: &str) -> Self {
        let current = HashMap::with_capacity_and_hasher(16, foldhash::fast::RandomState::default());
        let mut p = Params { current, undo: Vec::with_capacity(16) };
        for (key, value) in [("handle", handle), ("base", base), ("extension", extension)] {
            p.current.insert(key.into(), Param::Text(value.into()));
        }
        p
    }

    /// Where the current scope starts: [`Params::end_scope`] goes back here.
    pub fn scope(&self) -> usize {
        self.undo.len()
    }

    pub fn end_scope(&mut self, scope: usize) {
        while self.undo.len() > scope {
            let Some((key, shadowed)) = self.undo.pop() else { break };
            match shadowed {
                Some(param) => self.current.insert(key, param),
                None => self.current.remove(&key),
            };
        }
    }

    fn push(&mut self, key: Arc<str>, param: Param<'a>) {
        let shadowed = self.current.insert(key.clone(), param);
        self.undo.push((key, shadowed));
    }

    pub fn set(&mut self, key: &Arc<str>, value: Arc<str>) {
        self.push(key.clone(), Param::Text(value));
    }

    pub fn set_match(&mut self, key: &Arc<str>, groups: Groups) {
        self.push(key.clone(), Param::Match(groups));
    }

    /// Inside `<foreach>`: the base handle's value at hand.
    pub fn set_value(&mut self, v: &'a HandleValue) {
        static KEYS: LazyLock<[Arc<str>; 3]> = LazyLock::new(|| ["type".into(), "data".into(), "index".into()]);
        for (key, field) in KEYS.iter().zip([Field::Type, Field::Data, Field::Index]) {
            self.push(key.clone(), Param::Field(v, field));
        }
    }

    fn find(&self, key: &str) -> Option<&Param<'a>> {
        self.current.get(key)
    }

    /// Whether `key` holds plain text (not a match with groups): setting it
    /// to its own text again would change nothing.
    pub fn is_plain(&self, key: &str) -> bool {
        !matches!(self.find(key), Some(Param::Match(_)))
    }

    /// What `r` refers to: a match's submatch (empty when out of range or not
    /// taking part); of plain text, group 0 is the text itself. Unknown names
    /// are empty.
    pub fn get(&self, r: &Reference) -> Cow<'_, str> {
        let (name, group) = match r {
            Reference::Whole(name) => (name, 0),
            Reference::Group(name, n) => (name, *n),
        };
        match self.find(name) {
            Some(Param::Match(groups)) => match groups.get(group) {
                Some(Some(text)) => Cow::Borrowed(text),
                _ => Cow::Borrowed(""),
            },
            Some(Param::Text(text)) if group == 0 => Cow::Borrowed(text),
            Some(Param::Field(v, field)) if group == 0 => match field {
                Field::Type => String::from_utf8_lossy(&v.value_type),
                Field::Data => String::from_utf8_lossy(&v.data),
                Field::Index => Cow::Owned(v.index.to_string()),
            },
            _ => Cow::Borrowed(""),
        }
    }

    /// `text` with its references replaced, refused before it grows past
    /// [`MAX_VALUE_BYTES`]: one template may name a long parameter many times.
    pub fn substitute(&self, text: &Text) -> Result<String, Bound> {
        let mut out = String::new();
        for piece in &text.0 {
            let part = match piece {
                Piece::Literal(s) => Cow::Borrowed(s.as_str()),
                Piece::Reference(r) => self.get(r),
            };
            if out.len() + part.len() > MAX_VALUE_BYTES {
                return Err(Bound::ValueBytes);
            }
            out.push_str(&part);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(p: &Params, template: &str) -> String {
        p.substitute(&Text::parse(template)).unwrap()
    }

    fn groups(g: &[Option<&str>]) -> Groups {
        g.iter().map(|g| g.map(Arc::from)).collect()
    }

    #[test]
    fn substitution_follows_the_originals_rules() {
        let mut p = Params::new("1234/abc@box(1,2)", "1234/abc", "box(1,2)");
        p.set_match(&"x".into(), groups(&[Some("box(1,2)"), Some("1"), None, Some("2")]));
        assert_eq!(sub(&p, "${base}|${extension}|${handle}"), "1234/abc|box(1,2)|1234/abc@box(1,2)");
        assert_eq!(sub(&p, "${x[1]}-${x[2]}-${x[3]}-${x[9]}-${x}"), "1--2--box(1,2)");
        assert_eq!(sub(&p, "${nothing}$"), "$");
        assert_eq!(sub(&p, r"\${base} \\ $a ${open"), r"${base} \ $a ${open");
        assert_eq!(sub(&p, "$0 ${0} $1"), "box(1,2) box(1,2) ");
        let mut e = Params::new("h", "b", "ext");
        e.set_match(&"extension".into(), groups(&[Some("ext"), Some("e")]));
        assert_eq!(sub(&e, "$1$12x ${1} ${extension[1]}"), "ex e e");
        e.set(&"extension".into(), "plain".into());
        assert_eq!(sub(&e, "$0/$1"), "plain/");
    }

    #[test]
    fn scopes_end_where_they_started() {
        let mut p = Params::new("h", "b", "e");
        let v = HandleValue::new(7, "URL", "https://x");
        let scope = p.scope();
        p.set_value(&v);
        p.set(&"y".into(), "inner".into());
        assert_eq!(sub(&p, "${index} ${type} ${data} ${y}"), "7 URL https://x inner");
        p.end_scope(scope);
        assert_eq!(sub(&p, "[${index}${y}] ${extension}"), "[] e");
    }

    #[test]
    fn a_substitution_stops_before_it_passes_the_value_bound() {
        let mut p = Params::new("h", "b", "e");
        p.set(&"x".into(), "x".repeat(MAX_VALUE_BYTES / 4 + 1).into());
        assert_eq!(sub(&p, "${x}${x}${x}").len(), 3 * (MAX_VALUE_BYTES / 4 + 1));
        // The fourth copy would pass the bound: refused before it is made.
        assert_eq!(p.substitute(&Text::parse("${x}${x}${x}${x}${x}${x}${x}${x}")), Err(Bound::ValueBytes));
    }
}
