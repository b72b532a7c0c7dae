//! Building a template handle's values from a namespace's `<template>`
//! elements (§11.2), as Handle.Net's `TemplateBuilder` does: `<value>`,
//! `<if>`/`<else>` (equality or a whole-string regular-expression match),
//! `<foreach>` over the base handle's values, `<def>` and `<notfound/>`;
//! `<template ref="index:handle"/>` (§11.3) cites a template held elsewhere.
//!
//! Construction is synchronous: a reference to a value not fetched yet stops
//! it with [`Outcome::NeedRef`]; the caller fetches that value and builds again.

use super::params::Params;
use handled_proto::value::{HandleValue, TtlType, ValuePermissions, DEFAULT_TTL};
use roxmltree::Node;
use std::collections::HashMap;

/// References followed in one construction (Java `RECURSION_LIMIT`): beyond,
/// the handle is not found.
pub const MAX_REFS: usize = 10;
/// Compiled size of one regular expression; a larger one matches nothing.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// What building from one namespace gave.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// No `<template>` here: ask the parent namespace.
    NoTemplate,
    /// A `<notfound/>`, or a reference that cannot be followed.
    NotFound,
    Built,
    /// Fetch value `index` of `handle` (the XML text, or `None` when there is
    /// no such value) into the builder's references, then build again.
    NeedRef {
        index: i32,
        handle: String,
    },
}

/// The fixed inputs of one construction.
pub struct Builder<'a> {
    pub base_values: &'a [HandleValue],
    pub case_sensitive: bool,
    /// Cited templates fetched so far: `(index, handle)` → the value's data.
    pub refs: &'a HashMap<(i32, String), Option<String>>,
}

impl Builder<'_> {
    /// Apply the `<template>` elements of `root` (a `<namespace>`, or a cited
    /// `<template>`) in order, adding their values to `out`.
    pub fn construct(&self, root: Node, params: &Params, out: &mut Vec<HandleValue>, followed: &mut usize) -> Outcome {
        if root.has_tag_name("template") {
            return self.template(root, params, out, followed);
        }
        let mut built = false;
        for template in root.children().filter(|n| n.has_tag_name("template")) {
            match self.template(template, params, out, followed) {
                Outcome::Built => built = true,
                Outcome::NoTemplate => {}
                stop => return stop,
            }
        }
        if built {
            Outcome::Built
        } else {
            Outcome::NoTemplate
        }
    }

    fn template(&self, tag: Node, params: &Params, out: &mut Vec<HandleValue>, followed: &mut usize) -> Outcome {
        let Some(reference) = tag.attribute("ref") else {
            return match self.elements(None, tag, params, out) {
                true => Outcome::NotFound,
                false => Outcome::Built,
            };
        };
        if *followed >= MAX_REFS {
            return Outcome::NotFound;
        }
        let Some((index, handle)) = reference.split_once(':') else { return Outcome::NoTemplate };
        let Ok(index) = index.parse::<i32>() else { return Outcome::NoTemplate };
        let key = (index, handle.to_string());
        *followed += 1;
        match self.refs.get(&key) {
            None => Outcome::NeedRef { index, handle: key.1 },
            Some(None) => Outcome::NotFound,
            Some(Some(xml)) => match roxmltree::Document::parse(xml) {
                Ok(doc) => self.construct(doc.root_element(), params, out, followed),
                Err(_) => Outcome::NoTemplate,
            },
        }
    }

    /// The children of `tag` in order; true when a `<notfound/>` was reached.
    /// `original`: the base handle's value inside a `<foreach>`.
    fn elements(&self, original: Option<&HandleValue>, tag: Node, params: &Params, out: &mut Vec<HandleValue>) -> bool {
        let mut params = params.clone();
        // An <else> repeats the test of the <if> before it, negated.
        let mut test = Test::default();
        for child in tag.children().filter(Node::is_element) {
            let name = child.tag_name().name();
            let not_found = match name {
                "value" => {
                    self.value(original, child, &params, out);
                    false
                }
                "if" | "else" => {
                    if name == "if" {
                        test = Test::of(child);
                    } else {
                        test.negate = !test.negate;
                    }
                    match test.scope(&params, self.case_sensitive) {
                        Some(inner) => self.elements(original, child, &inner, out),
                        None => false,
                    }
                }
                "notfound" => true,
                "foreach" if original.is_none() => {
                    self.base_values.iter().any(|v| self.elements(Some(v), child, &params.with_value(v), out))
                }
                "def" => match child.attribute("parameter") {
                    Some(parameter) => {
                        let mut defined = Vec::new();
                        let not_found = self.elements(original, child, &params, &mut defined);
                        if let Some(first) = defined.first() {
                            params = params.with(parameter, String::from_utf8_lossy(&first.data).into_owned());
                        }
                        not_found
                    }
                    None => false,
                },
                _ => false,
            };
            if not_found {
                return true;
            }
        }
        false
    }

    /// A `<value>`: inside `<foreach>` a copy of the original with what the
    /// attributes change; elsewhere a new value, which needs a type and data.
    fn value(&self, original: Option<&HandleValue>, tag: Node, params: &Params, out: &mut Vec<HandleValue>) {
        let index = tag.attribute("index").and_then(|i| i.trim().parse::<i32>().ok()).unwrap_or(-1);
        let value_type = tag.attribute("type");
        let data = tag.attribute("data").map(str::to_string).or_else(|| contents(tag));
        let (mut value, mut index) = match original {
            Some(v) => (v.clone(), if index < 0 { v.index } else { index }),
            None if value_type.is_some() && data.is_some() => (new_value(), 1),
            None => return,
        };
        // The first index from there not taken by a value already built.
        out.sort_by_key(|v| v.index);
        for v in out.iter() {
            if v.index == index {
                index += 1;
            }
        }
        value.index = index;
        if let Some(t) = value_type {
            value.value_type = params.substitute(t).into_bytes();
        }
        if let Some(d) = data {
            value.data = params.substitute(&d).into_bytes();
        }
        out.push(value);
    }
}

/// Handle.Net's defaults for a value made from nothing (Java `new HandleValue()`).
fn new_value() -> HandleValue {
    HandleValue {
        index: 1,
        timestamp: 0,
        ttl_type: TtlType::Relative,
        ttl: DEFAULT_TTL,
        permissions: ValuePermissions::DEFAULT,
        value_type: Vec::new(),
        data: Vec::new(),
        references: Vec::new(),
    }
}

/// A `<value>`'s data given as its contents: the text, trimmed, or else the
/// XML of its child elements as written.
fn contents(tag: Node) -> Option<String> {
    let text: String = tag.children().filter(Node::is_text).filter_map(|n| n.text()).collect();
    let text = text.trim();
    if !text.is_empty() {
        return Some(text.to_string());
    }
    let source = tag.document().input_text();
    let xml: String = tag.children().filter(Node::is_element).map(|n| &source[n.range()]).collect();
    (!xml.is_empty()).then_some(xml)
}

/// The condition of an `<if>` (and of the `<else>` after it).
#[derive(Default)]
struct Test {
    /// The parameter tested (`value`, default `extension`).
    value: String,
    /// The name its submatches get inside (`parameter`, default `value`).
    parameter: String,
    kind: Option<String>,
    negate: bool,
    expression: Option<String>,
}

impl Test {
    fn of(tag: Node) -> Self {
        let value = tag.attribute("value").unwrap_or("extension").to_string();
        Test {
            parameter: tag.attribute("parameter").unwrap_or(&value).to_string(),
            value,
            kind: tag.attribute("test").map(str::to_string),
            negate: tag.attribute("negate") == Some("true"),
            expression: tag.attribute("expression").map(str::to_string),
        }
    }

    /// The parameters inside when the test holds, None when it does not.
    fn scope(&self, params: &Params, case_sensitive: bool) -> Option<Params> {
        let Some(expression) = &self.expression else {
            // No test at all: the contents always apply (but not an <else> of it).
            return (self.kind.is_none() && !self.negate).then(|| params.clone());
        };
        let value = params.get(&self.value);
        match self.kind.as_deref() {
            None | Some("equals") => {
                (self.negate != (value == *expression)).then(|| params.with(&self.parameter, value))
            }
            Some("matches") => {
                let groups = full_match(expression, &value, case_sensitive);
                match (groups, self.negate) {
                    (Some(groups), false) => Some(params.with_match(&self.parameter, groups)),
                    (None, true) => Some(params.with(&self.parameter, value)),
                    _ => None,
                }
            }
            Some(_) => None,
        }
    }
}

/// The groups of `expression` matching the whole of `value`. An expression
/// this engine cannot compile (Java-only syntax, or too large) matches nothing.
fn full_match(expression: &str, value: &str, case_sensitive: bool) -> Option<Vec<Option<String>>> {
    let anchored = format!("^(?:{expression})$");
    let re = regex::RegexBuilder::new(&anchored)
        .case_insensitive(!case_sensitive)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| tracing::debug!("template expression {expression:?}: {e}"))
        .ok()?;
    let captures = re.captures(value)?;
    Some(captures.iter().map(|m| m.map(|m| m.as_str().to_string())).collect())
}

#[cfg(test)]
#[path = "builder_tests.rs"]
mod tests;
