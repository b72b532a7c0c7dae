//! The parameters a template's values refer to (`${handle}`, `${base}`,
//! `${extension}`, `${x[2]}`, `$1`, …) and their substitution, with the
//! semantics of Handle.Net's `TemplateBuilder` (§11.2).

use super::bounds::{Bound, MAX_VALUE_BYTES};
use handled_proto::value::HandleValue;
use std::collections::HashMap;
use std::sync::Arc;

/// The parameter `$N` and `${N}` refer to: the extension's submatches.
const DEFAULT_KEY: &str = "extension";

/// Parameters in scope. A copy is made for each nested scope, as values set
/// inside an `<if>` are not seen after it: texts are shared, so a copy costs
/// one step per parameter however long their values ([`Params::len`]).
#[derive(Clone, Default)]
pub struct Params {
    text: HashMap<String, Arc<str>>,
    /// Parameters set by a regular-expression match: group 0 is the whole
    /// match (also in `text`); groups that did not take part are `None`.
    groups: HashMap<String, Arc<Vec<Option<String>>>>,
}

impl Params {
    pub fn new(handle: &str, base: &str, extension: &str) -> Self {
        let mut p = Params::default();
        p.text.insert("handle".into(), handle.into());
        p.text.insert("base".into(), base.into());
        p.text.insert("extension".into(), extension.into());
        p
    }

    /// How many parameters a copy copies.
    pub fn len(&self) -> usize {
        self.text.len() + self.groups.len()
    }

    pub fn with(&self, key: &str, value: Arc<str>) -> Self {
        let mut p = self.clone();
        p.groups.remove(key);
        p.text.insert(key.into(), value);
        p
    }

    pub fn with_match(&self, key: &str, groups: Vec<Option<String>>) -> Self {
        let mut p = self.clone();
        p.text.insert(key.into(), groups.first().cloned().flatten().unwrap_or_default().into());
        p.groups.insert(key.into(), Arc::new(groups));
        p
    }

    /// Inside `<foreach>`: the base handle's value at hand.
    pub fn with_value(&self, v: &HandleValue) -> Self {
        let mut p = self.clone();
        p.text.insert("type".into(), String::from_utf8_lossy(&v.value_type).into());
        p.text.insert("data".into(), String::from_utf8_lossy(&v.data).into());
        p.text.insert("index".into(), v.index.to_string().into());
        p
    }

    /// Group `group` of `key`: a match's submatch (empty when out of range or
    /// not taking part); for plain text, the text itself as group 0.
    fn group(&self, key: &str, group: usize) -> Arc<str> {
        match self.groups.get(key) {
            Some(groups) => groups.get(group).cloned().flatten().unwrap_or_default().into(),
            None if group == 0 => self.text.get(key).cloned().unwrap_or_default(),
            None => Arc::default(),
        }
    }

    /// A reference: `name`, `N` (a submatch of the extension) or `name[N]`.
    /// Unknown names are empty.
    pub fn get(&self, key: &str) -> Arc<str> {
        if key.starts_with(|c: char| c.is_ascii_digit()) {
            if let Ok(n) = key.parse::<usize>() {
                return self.group(DEFAULT_KEY, n);
            }
        }
        if let Some(open) = key.strip_suffix(']').and_then(|k| k.rfind('[')) {
            if let Ok(n) = key[open + 1..key.len() - 1].parse::<usize>() {
                return self.group(&key[..open], n);
            }
        }
        self.text.get(key).cloned().unwrap_or_default()
    }

    /// `template` with `${…}` and `$N` replaced; `\x` stands for `x`.
    /// Refused before it grows past [`MAX_VALUE_BYTES`]: one template may
    /// name a long parameter many times.
    pub fn substitute(&self, template: &str) -> Result<String, Bound> {
        let mut out = String::with_capacity(template.len().min(MAX_VALUE_BYTES));
        let push = |out: &mut String, piece: &str| match out.len() + piece.len() > MAX_VALUE_BYTES {
            true => Err(Bound::ValueBytes),
            false => {
                out.push_str(piece);
                Ok(())
            }
        };
        let mut chars = template.char_indices().peekable();
        while let Some((_, c)) = chars.next() {
            match c {
                '\\' => out.push(chars.next().map_or('\\', |(_, c)| c)),
                '$' => match chars.peek().copied() {
                    None => out.push('$'),
                    Some((at, '{')) => match template[at..].find('}') {
                        Some(len) => {
                            push(&mut out, &self.get(&template[at + 1..at + len]))?;
                            while chars.next_if(|&(i, _)| i <= at + len).is_some() {}
                        }
                        None => {
                            out.push_str("${");
                            chars.next();
                        }
                    },
                    Some((at, d)) if d.is_ascii_digit() => {
                        let digits = template[at..].find(|c: char| !c.is_ascii_digit()).unwrap_or(template.len() - at);
                        // Java reads the number as an int; absurd ones name no group.
                        let n = template[at..at + digits].parse::<usize>().unwrap_or(usize::MAX);
                        push(&mut out, &self.group(DEFAULT_KEY, n))?;
                        while chars.next_if(|&(i, _)| i < at + digits).is_some() {}
                    }
                    Some((_, other)) => {
                        out.push('$');
                        out.push(other);
                        chars.next();
                    }
                },
                c => out.push(c),
            }
        }
        match out.len() > MAX_VALUE_BYTES {
            true => Err(Bound::ValueBytes),
            false => Ok(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitution_follows_the_originals_rules() {
        let p = Params::new("1234/abc@box(1,2)", "1234/abc", "box(1,2)")
            .with_match("x", vec![Some("box(1,2)".into()), Some("1".into()), None, Some("2".into())]);
        assert_eq!(p.substitute("${base}|${extension}|${handle}").unwrap(), "1234/abc|box(1,2)|1234/abc@box(1,2)");
        assert_eq!(p.substitute("${x[1]}-${x[2]}-${x[3]}-${x[9]}-${x}").unwrap(), "1--2--box(1,2)");
        assert_eq!(p.substitute("${nothing}$").unwrap(), "$");
        assert_eq!(p.substitute(r"\${base} \\ $a ${open").unwrap(), r"${base} \ $a ${open");
        assert_eq!(p.substitute("$0 ${0} $1").unwrap(), "box(1,2) box(1,2) ");
        let e = Params::new("h", "b", "ext").with_match("extension", vec![Some("ext".into()), Some("e".into())]);
        assert_eq!(e.substitute("$1$12x ${1} ${extension[1]}").unwrap(), "ex e e");
        assert_eq!(e.with("extension", "plain".into()).substitute("$0/$1").unwrap(), "plain/");
    }

    #[test]
    fn a_substitution_stops_before_it_passes_the_value_bound() {
        let long: String = "x".repeat(MAX_VALUE_BYTES / 4 + 1);
        let p = Params::new("h", "b", "e").with("x", long.into());
        assert_eq!(p.substitute("${x}${x}${x}").unwrap().len(), 3 * (MAX_VALUE_BYTES / 4 + 1));
        // The fourth copy would pass the bound: refused before it is made.
        assert_eq!(p.substitute("${x}${x}${x}${x}${x}${x}${x}${x}"), Err(Bound::ValueBytes));
    }
}
