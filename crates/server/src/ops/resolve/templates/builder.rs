//! Building a template handle's values from a namespace's `<template>`
//! elements (§11.2), as Handle.Net's `TemplateBuilder` does: `<value>`,
//! `<if>`/`<else>` (equality or a whole-string regular-expression match),
//! `<foreach>` over the base handle's values, `<def>` and `<notfound/>`;
//! `<template ref="index:handle"/>` (§11.3) cites a template held elsewhere.
//!
//! Construction is synchronous: a reference to a value not fetched yet stops
//! it with [`Outcome::NeedRef`]; the caller fetches that value and builds again.

use super::bounds::{Bound, Budget, MAX_VALUES};
use super::built::Built;
use super::expressions;
use super::params::Params;
use handled_proto::value::{HandleValue, TtlType, ValuePermissions, DEFAULT_TTL};
use roxmltree::Node;
use std::collections::HashMap;

/// References followed in one construction (Java `RECURSION_LIMIT`): beyond,
/// the handle is not found.
pub const MAX_REFS: usize = 10;
/// The work compiling an expression is counted as. Compiled expressions are
/// kept, so each costs it once; a construction compiles at most 10 it has not
/// compiled before (each up to 9 ms, `expressions.rs`).
const COMPILE_WORK: usize = 100_000;

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
    /// The construction ran into one of its bounds (`bounds.rs`).
    Refused(Bound),
}

/// What the children of an element came to.
#[derive(PartialEq)]
enum Flow {
    Go,
    /// A `<notfound/>` was reached: stop, the handle does not exist.
    NotFound,
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
    /// `<template>`) in order, adding their values to `out`. `budget` is what
    /// the construction used so far, over every pass.
    pub fn construct(
        &self,
        root: Node,
        params: &Params,
        out: &mut Built,
        followed: &mut usize,
        budget: &mut Budget,
    ) -> Outcome {
        self.namespace(root, params, out, followed, budget, 0).unwrap_or_else(Outcome::Refused)
    }

    fn namespace(
        &self,
        root: Node,
        params: &Params,
        out: &mut Built,
        followed: &mut usize,
        budget: &mut Budget,
        depth: usize,
    ) -> Result<Outcome, Bound> {
        if root.has_tag_name("template") {
            return self.template(root, params, out, followed, budget, depth);
        }
        let mut built = false;
        for template in root.children().filter(|n| n.has_tag_name("template")) {
            match self.template(template, params, out, followed, budget, depth)? {
                Outcome::Built => built = true,
                Outcome::NoTemplate => {}
                stop => return Ok(stop),
            }
        }
        Ok(if built { Outcome::Built } else { Outcome::NoTemplate })
    }

    fn template(
        &self,
        tag: Node,
        params: &Params,
        out: &mut Built,
        followed: &mut usize,
        budget: &mut Budget,
        depth: usize,
    ) -> Result<Outcome, Bound> {
        let Some(reference) = tag.attribute("ref") else {
            return Ok(match self.elements(None, tag, params, out, budget, depth)? {
                Flow::NotFound => Outcome::NotFound,
                Flow::Go => Outcome::Built,
            });
        };
        if *followed >= MAX_REFS {
            return Ok(Outcome::NotFound);
        }
        let Some((index, handle)) = reference.split_once(':') else { return Ok(Outcome::NoTemplate) };
        let Ok(index) = index.parse::<i32>() else { return Ok(Outcome::NoTemplate) };
        let key = (index, handle.to_string());
        *followed += 1;
        Ok(match self.refs.get(&key) {
            None => Outcome::NeedRef { index, handle: key.1 },
            Some(None) => Outcome::NotFound,
            Some(Some(xml)) => match super::parse_namespace(xml)? {
                Some(doc) => {
                    budget.work(1 + xml.len() / 64)?;
                    self.namespace(doc.root_element(), params, out, followed, budget, Budget::nest(depth)?)?
                }
                None => Outcome::NoTemplate,
            },
        })
    }

    /// The children of `tag` in order, one level below `depth`.
    /// `original`: the base handle's value inside a `<foreach>`.
    fn elements(
        &self,
        original: Option<&HandleValue>,
        tag: Node,
        params: &Params,
        out: &mut Built,
        budget: &mut Budget,
        depth: usize,
    ) -> Result<Flow, Bound> {
        let depth = Budget::nest(depth)?;
        budget.work(1 + params.len())?;
        let mut params = params.clone();
        // An <else> repeats the test of the <if> before it, negated.
        let mut test = Test::default();
        for child in tag.children().filter(Node::is_element) {
            budget.work(1)?;
            let name = child.tag_name().name();
            let flow = match name {
                "value" => {
                    self.value(original, child, &params, out, budget)?;
                    Flow::Go
                }
                "if" | "else" => {
                    if name == "if" {
                        test = Test::of(child);
                    } else {
                        test.negate = !test.negate;
                    }
                    match test.scope(&params, self.case_sensitive, budget)? {
                        Some(inner) => self.elements(original, child, &inner, out, budget, depth)?,
                        None => Flow::Go,
                    }
                }
                "notfound" => Flow::NotFound,
                "foreach" if original.is_none() => {
                    let mut flow = Flow::Go;
                    for v in self.base_values {
                        budget.work(1 + v.data.len() / 64)?;
                        flow = self.elements(Some(v), child, &params.with_value(v), out, budget, depth)?;
                        if flow == Flow::NotFound {
                            break;
                        }
                    }
                    flow
                }
                "def" => match child.attribute("parameter") {
                    Some(parameter) => {
                        let mut defined = Built::default();
                        let flow = self.elements(original, child, &params, &mut defined, budget, depth)?;
                        if let Some(first) = defined.first() {
                            params = params.with(parameter, String::from_utf8_lossy(&first.data).into());
                        }
                        flow
                    }
                    None => Flow::Go,
                },
                _ => Flow::Go,
            };
            if flow == Flow::NotFound {
                return Ok(Flow::NotFound);
            }
        }
        Ok(Flow::Go)
    }

    /// A `<value>`: inside `<foreach>` a copy of the original with what the
    /// attributes change; elsewhere a new value, which needs a type and data.
    fn value(
        &self,
        original: Option<&HandleValue>,
        tag: Node,
        params: &Params,
        out: &mut Built,
        budget: &mut Budget,
    ) -> Result<(), Bound> {
        let index = tag.attribute("index").and_then(|i| i.trim().parse::<i32>().ok()).unwrap_or(-1);
        let value_type = tag.attribute("type");
        let data = tag.attribute("data").map(str::to_string).or_else(|| contents(tag));
        let (mut value, index) = match original {
            Some(v) => (v.clone(), if index < 0 { v.index } else { index }),
            None if value_type.is_some() && data.is_some() => (new_value(), 1),
            None => return Ok(()),
        };
        if out.len() >= MAX_VALUES {
            return Err(Bound::Values);
        }
        if let Some(t) = value_type {
            let t = params.substitute(t)?;
            budget.built(t.len())?;
            value.value_type = t.into_bytes();
        }
        if let Some(d) = data {
            let d = params.substitute(&d)?;
            budget.built(d.len())?;
            value.data = d.into_bytes();
        }
        budget.work(out.push(value, index))
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
    fn scope(&self, params: &Params, case_sensitive: bool, budget: &mut Budget) -> Result<Option<Params>, Bound> {
        let Some(expression) = &self.expression else {
            // No test at all: the contents always apply (but not an <else> of it).
            return Ok((self.kind.is_none() && !self.negate).then(|| params.clone()));
        };
        let value = params.get(&self.value);
        Ok(match self.kind.as_deref() {
            None | Some("equals") => {
                (self.negate != (*value == **expression)).then(|| params.with(&self.parameter, value))
            }
            Some("matches") => {
                // An expression this engine cannot compile (Java-only syntax, or
                // too large) matches nothing.
                let (re, compiled) = expressions::anchored(expression, case_sensitive);
                budget.work(if compiled { COMPILE_WORK } else { 1 } + value.len() / 16)?;
                match (re.and_then(|re| expressions::full_match(&re, &value)), self.negate) {
                    (Some(groups), false) => Some(params.with_match(&self.parameter, groups)),
                    (None, true) => Some(params.with(&self.parameter, value)),
                    _ => None,
                }
            }
            Some(_) => None,
        })
    }
}

#[cfg(test)]
#[path = "builder_tests.rs"]
mod tests;
