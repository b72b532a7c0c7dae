//! Building a template handle's values from a compiled namespace's
//! `<template>` elements (§11.2), as Handle.Net's `TemplateBuilder` does:
//! `<value>`, `<if>`/`<else>` (equality or a whole-string regular-expression
//! match), `<foreach>` over the base handle's values, `<def>` and
//! `<notfound/>`; `<template ref="index:handle"/>` (§11.3) cites a template
//! held elsewhere.
//!
//! Construction is synchronous: a reference to a value not fetched yet stops
//! it with [`Outcome::NeedRef`]; the caller fetches that value and builds again.

use super::bounds::{Bound, Budget, MAX_VALUES};
use super::built::Built;
use super::compiled::{self, Compiled, Kind, Node, Template, Test};
use super::expressions::{self, Groups};
use super::params::{Params, Reference, Text};
use handled_proto::value::{HandleValue, TtlType, ValuePermissions, DEFAULT_TTL};
use regex::Regex;
use std::collections::HashMap;
use std::sync::Arc;

/// References followed in one construction (Java `RECURSION_LIMIT`): beyond,
/// the handle is not found.
pub const MAX_REFS: usize = 10;

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

/// The mutable state of one pass.
pub struct Pass<'p, 'a> {
    pub params: &'p mut Params<'a>,
    pub out: &'p mut Built,
    /// Cited templates followed in this pass.
    pub followed: usize,
    /// What the construction used so far, over every pass.
    pub budget: &'p mut Budget,
    /// Each expression test's last expression, input and outcome: inside
    /// `<foreach>` a test of the extension sees the same text for every value.
    /// The expression is kept (and compared) because a cited template's tree,
    /// and so the test's address, lives only while it is followed.
    pub matched: HashMap<usize, Matched>,
}

pub struct Matched {
    expression: Option<Arc<Regex>>,
    input: Arc<str>,
    groups: Option<Groups>,
}

impl<'p, 'a> Pass<'p, 'a> {
    pub fn new(params: &'p mut Params<'a>, out: &'p mut Built, budget: &'p mut Budget) -> Self {
        Pass { params, out, followed: 0, budget, matched: HashMap::new() }
    }
}

impl<'a> Builder<'a> {
    /// Apply the `<template>` elements of `namespace` in order, adding their
    /// values to the pass's output.
    pub fn construct(&self, namespace: &Compiled, pass: &mut Pass<'_, 'a>) -> Outcome {
        self.namespace(namespace, pass, 0).unwrap_or_else(Outcome::Refused)
    }

    fn namespace(&self, namespace: &Compiled, pass: &mut Pass<'_, 'a>, depth: usize) -> Result<Outcome, Bound> {
        let mut built = false;
        for template in &namespace.templates {
            match self.template(template, pass, depth)? {
                Outcome::Built => built = true,
                Outcome::NoTemplate => {}
                stop => return Ok(stop),
            }
        }
        Ok(if built { Outcome::Built } else { Outcome::NoTemplate })
    }

    fn template(&self, template: &Template, pass: &mut Pass<'_, 'a>, depth: usize) -> Result<Outcome, Bound> {
        let (index, handle) = match template {
            Template::Body(nodes) => {
                return Ok(match self.elements(None, nodes, pass, depth)? {
                    Flow::NotFound => Outcome::NotFound,
                    Flow::Go => Outcome::Built,
                })
            }
            _ if pass.followed >= MAX_REFS => return Ok(Outcome::NotFound),
            Template::BadRef => return Ok(Outcome::NoTemplate),
            Template::Ref { index, handle } => (*index, handle),
        };
        pass.followed += 1;
        Ok(match self.refs.get(&(index, handle.clone())) {
            None => Outcome::NeedRef { index, handle: handle.clone() },
            Some(None) => Outcome::NotFound,
            Some(Some(xml)) => match compiled::compile(xml, self.case_sensitive, pass.budget)? {
                Some(cited) => self.namespace(&cited, pass, Budget::nest(depth)?)?,
                None => Outcome::NoTemplate,
            },
        })
    }

    /// `nodes` in order, a scope one level below `depth`: what they set is
    /// gone after them. `original`: the base handle's value inside `<foreach>`.
    fn elements(
        &self,
        original: Option<&'a HandleValue>,
        nodes: &[Node],
        pass: &mut Pass<'_, 'a>,
        depth: usize,
    ) -> Result<Flow, Bound> {
        let depth = Budget::nest(depth)?;
        let scope = pass.params.scope();
        let flow = self.run(original, nodes, pass, depth);
        pass.params.end_scope(scope);
        flow
    }

    fn run(
        &self,
        original: Option<&'a HandleValue>,
        nodes: &[Node],
        pass: &mut Pass<'_, 'a>,
        depth: usize,
    ) -> Result<Flow, Bound> {
        // An <else> repeats the test of the <if> before it, negated.
        let (mut test, mut negate): (Option<&Test>, bool) = (None, false);
        for node in nodes {
            pass.budget.work(1)?;
            let flow = match node {
                Node::Value { index, value_type, data } => {
                    self.value(original, *index, value_type.as_ref(), data.as_ref(), pass)?;
                    Flow::Go
                }
                Node::If(t, children) => {
                    (test, negate) = (Some(t), t.negate);
                    self.conditional(test, negate, original, children, pass, depth)?
                }
                Node::Else(children) => {
                    negate = !negate;
                    self.conditional(test, negate, original, children, pass, depth)?
                }
                Node::NotFound => Flow::NotFound,
                Node::Foreach(children) if original.is_none() => {
                    let mut flow = Flow::Go;
                    for v in self.base_values {
                        pass.budget.work(1)?;
                        let scope = pass.params.scope();
                        pass.params.set_value(v);
                        flow = self.elements(Some(v), children, pass, depth)?;
                        pass.params.end_scope(scope);
                        if flow == Flow::NotFound {
                            break;
                        }
                    }
                    flow
                }
                Node::Def(Some(parameter), children) => {
                    // The values inside are built apart; the first is the parameter's.
                    let outer = std::mem::take(pass.out);
                    let flow = self.elements(original, children, pass, depth);
                    let defined = std::mem::replace(pass.out, outer);
                    if let Some(first) = defined.first() {
                        // Set for the rest of this scope.
                        pass.params.set(parameter, String::from_utf8_lossy(&first.data).into());
                    }
                    flow?
                }
                Node::Foreach(_) | Node::Def(None, _) | Node::Other => Flow::Go,
            };
            if flow == Flow::NotFound {
                return Ok(Flow::NotFound);
            }
        }
        Ok(Flow::Go)
    }

    /// The contents of an `<if>` or `<else>` when its test holds.
    fn conditional(
        &self,
        test: Option<&Test>,
        negate: bool,
        original: Option<&'a HandleValue>,
        children: &[Node],
        pass: &mut Pass<'_, 'a>,
        depth: usize,
    ) -> Result<Flow, Bound> {
        let scope = pass.params.scope();
        if !holds(test, negate, pass)? {
            return Ok(Flow::Go);
        }
        let flow = self.elements(original, children, pass, depth);
        pass.params.end_scope(scope);
        flow
    }

    /// A `<value>`: inside `<foreach>` a copy of the original with what the
    /// attributes change; elsewhere a new value, which needs a type and data.
    fn value(
        &self,
        original: Option<&HandleValue>,
        index: i32,
        value_type: Option<&Text>,
        data: Option<&Text>,
        pass: &mut Pass<'_, 'a>,
    ) -> Result<(), Bound> {
        let (mut value, index) = match original {
            Some(v) => (v.clone(), if index < 0 { v.index } else { index }),
            None if value_type.is_some() && data.is_some() => (new_value(), 1),
            None => return Ok(()),
        };
        if pass.out.len() >= MAX_VALUES {
            return Err(Bound::Values);
        }
        if let Some(t) = value_type {
            let t = pass.params.substitute(t)?;
            pass.budget.built(t.len())?;
            value.value_type = t.into_bytes();
        }
        if let Some(d) = data {
            let d = pass.params.substitute(d)?;
            pass.budget.built(d.len())?;
            value.data = d.into_bytes();
        }
        pass.budget.work(pass.out.push(value, index))
    }
}

/// Whether `test` (negated when `negate`) holds; when it does, its parameter
/// is set in the scope it opens. Without a test (an `<else>` before any `<if>`)
/// it holds unless negated, as the original's empty test does.
fn holds(test: Option<&Test>, negate: bool, pass: &mut Pass<'_, '_>) -> Result<bool, Bound> {
    let Some(test) = test else { return Ok(!negate) };
    match &test.kind {
        Kind::NoExpression { named } => Ok(!named && !negate),
        Kind::Unknown => Ok(false),
        Kind::Equals(expression) => {
            let holds = negate != (*pass.params.get(&test.value) == **expression);
            if holds {
                bind(test, pass.params);
            }
            Ok(holds)
        }
        Kind::Matches(re) => {
            let groups = {
                let value = pass.params.get(&test.value);
                let key = std::ptr::from_ref(test) as usize;
                let same = |m: &&Matched| {
                    *m.input == *value
                        && match (&m.expression, re) {
                            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                            (a, b) => a.is_none() && b.is_none(),
                        }
                };
                match pass.matched.get(&key).filter(same) {
                    Some(m) => m.groups.clone(),
                    None => {
                        pass.budget.work(1 + value.len() / 16)?;
                        let groups = re.as_ref().and_then(|re| expressions::full_match(re, &value));
                        let m = Matched { expression: re.clone(), input: value.into(), groups: groups.clone() };
                        pass.matched.insert(key, m);
                        groups
                    }
                }
            };
            match (groups, negate) {
                (Some(groups), false) => pass.params.set_match(&test.parameter, groups),
                (None, true) => bind(test, pass.params),
                _ => return Ok(false),
            }
            Ok(true)
        }
    }
}

/// Inside a test that holds, its parameter names the value tested; nothing to
/// do when it already does (the usual `<if value="type" …>`).
fn bind(test: &Test, params: &mut Params<'_>) {
    if let Reference::Whole(name) = &test.value {
        if **name == *test.parameter && params.is_plain(name) {
            return;
        }
    }
    let value: Arc<str> = params.get(&test.value).into();
    params.set(&test.parameter, value);
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

#[cfg(test)]
#[path = "builder_tests.rs"]
mod tests;
