//! A namespace (or a cited template) compiled once into a tree of its own:
//! tests with their expressions compiled, texts with their references
//! parsed. Constructions then walk this tree, so a template handle costs
//! about what a stored record of the same size does, not an XML parse and
//! an expression lookup per value. Compiled namespaces are kept per process,
//! by their text, up to [`CACHE_BYTES`].

use super::bounds::{Bound, Budget};
use super::expressions;
use super::params::{Reference, Text};
use crate::xml::XmlError;
use quick_cache::sync::Cache;
use quick_cache::{Equivalent, Weighter};
use regex::Regex;
use roxmltree::Node as XmlNode;
use std::sync::{Arc, LazyLock};

/// Namespace text kept compiled, counted twice (the tree holds about as much).
const CACHE_BYTES: u64 = 32 << 20;
/// Work counted for compiling an expression not kept yet: compiled
/// expressions are kept (`expressions.rs`), so each costs it once, and a
/// construction compiles at most 10 (each up to 9 ms).
const COMPILE_WORK: usize = 100_000;

pub struct Compiled {
    /// The `<template>` elements, in order (a cited `<template>` is one).
    pub templates: Vec<Template>,
    /// Whether the root lists `<template>` elements (a namespace without any
    /// resolves a template handle to its base's values).
    pub lists_templates: bool,
    /// The first listed `<template>`'s `delimiter`.
    pub delimiter: Option<String>,
}

pub enum Template {
    Body(Vec<Node>),
    /// `<template ref="index:handle"/>`.
    Ref {
        index: i32,
        handle: String,
    },
    /// A `ref` that names no value: this template does not apply.
    BadRef,
}

pub enum Node {
    /// `index` is -1 when not given; `value_type` and `data` are needed for a
    /// value made from nothing (outside `<foreach>`).
    Value {
        index: i32,
        value_type: Option<Text>,
        data: Option<Text>,
    },
    If(Test, Vec<Node>),
    Else(Vec<Node>),
    NotFound,
    Foreach(Vec<Node>),
    Def(Option<Arc<str>>, Vec<Node>),
    /// Elements the original ignores.
    Other,
}

/// The condition of an `<if>` (and of the `<else>` after it).
pub struct Test {
    /// The parameter tested (`value`, default `extension`).
    pub value: Reference,
    /// The name its submatches get inside (`parameter`, default `value`).
    pub parameter: Arc<str>,
    pub kind: Kind,
    pub negate: bool,
}

pub enum Kind {
    /// No `expression`: holds unless a `test` is named or it is negated.
    NoExpression {
        named: bool,
    },
    Equals(String),
    /// None: an expression this engine cannot compile, which matches nothing.
    Matches(Option<Arc<Regex>>),
    /// A `test` the original does not know: never holds.
    Unknown,
}

/// `xml` compiled (from the cache when it was before); None when it is not
/// XML, which the original ignores.
pub fn compile(xml: &str, case_sensitive: bool, budget: &mut Budget) -> Kept {
    static COMPILED: LazyLock<Cache<(String, bool), Kept, TextWeight>> =
        LazyLock::new(|| Cache::with_weighter(1024, CACHE_BYTES, TextWeight));
    if let Some(kept) = COMPILED.get(&Key(xml, case_sensitive)) {
        return kept;
    }
    // Both reading the tree and compiling it are proportional to the text.
    budget.work(1 + xml.len() / 16)?;
    let compiled = match crate::xml::parse(xml) {
        Ok(doc) => Compiler { case_sensitive, budget }.namespace(doc.root_element()).map(|c| Some(Arc::new(c))),
        Err(XmlError::TooDeep) => Err(Bound::Depth),
        Err(XmlError::Syntax(_)) => Ok(None),
    };
    // A construction that ran out of work while compiling is not the
    // namespace's fault: only finished compilations are kept.
    if !matches!(compiled, Err(Bound::Work)) {
        COMPILED.insert((xml.to_string(), case_sensitive), compiled.clone());
    }
    compiled
}

/// What compiling a text gave: kept whatever it was.
type Kept = Result<Option<Arc<Compiled>>, Bound>;

/// A cache key borrowed from the request's text.
#[derive(Hash)]
struct Key<'a>(&'a str, bool);

impl Equivalent<(String, bool)> for Key<'_> {
    fn equivalent(&self, key: &(String, bool)) -> bool {
        self.0 == key.0 && self.1 == key.1
    }
}

#[derive(Clone)]
struct TextWeight;

impl Weighter<(String, bool), Kept> for TextWeight {
    fn weight(&self, key: &(String, bool), _: &Kept) -> u64 {
        2 * key.0.len() as u64 + 256
    }
}

struct Compiler<'b> {
    case_sensitive: bool,
    budget: &'b mut Budget,
}

impl Compiler<'_> {
    fn namespace(&mut self, root: XmlNode) -> Result<Compiled, Bound> {
        let listed: Vec<XmlNode> = root.children().filter(|n| n.has_tag_name("template")).collect();
        let delimiter = listed.first().and_then(|t| t.attribute("delimiter")).map(str::to_string);
        let lists_templates = !listed.is_empty();
        let tags = match root.has_tag_name("template") {
            true => vec![root],
            false => listed,
        };
        let templates = tags.into_iter().map(|t| self.template(t)).collect::<Result<_, _>>()?;
        Ok(Compiled { templates, lists_templates, delimiter })
    }

    fn template(&mut self, tag: XmlNode) -> Result<Template, Bound> {
        let Some(reference) = tag.attribute("ref") else { return Ok(Template::Body(self.children(tag, 0)?)) };
        let parsed = reference.split_once(':').and_then(|(i, h)| Some((i.parse::<i32>().ok()?, h)));
        Ok(match parsed {
            Some((index, handle)) => Template::Ref { index, handle: handle.to_string() },
            None => Template::BadRef,
        })
    }

    /// The element children of `tag`, which lies `depth` levels inside its template.
    fn children(&mut self, tag: XmlNode, depth: usize) -> Result<Vec<Node>, Bound> {
        let depth = Budget::nest(depth)?;
        let mut nodes = Vec::new();
        for child in tag.children().filter(XmlNode::is_element) {
            self.budget.work(1)?;
            nodes.push(match child.tag_name().name() {
                "value" => value(child),
                "if" => Node::If(self.test(child)?, self.children(child, depth)?),
                "else" => Node::Else(self.children(child, depth)?),
                "notfound" => Node::NotFound,
                "foreach" => Node::Foreach(self.children(child, depth)?),
                "def" => Node::Def(child.attribute("parameter").map(Arc::from), self.children(child, depth)?),
                _ => Node::Other,
            });
        }
        Ok(nodes)
    }

    fn test(&mut self, tag: XmlNode) -> Result<Test, Bound> {
        let value = tag.attribute("value").unwrap_or("extension");
        let test = tag.attribute("test");
        let kind = match (tag.attribute("expression"), test) {
            (None, named) => Kind::NoExpression { named: named.is_some() },
            (Some(e), None | Some("equals")) => Kind::Equals(e.to_string()),
            (Some(e), Some("matches")) => {
                let (re, compiled) = expressions::anchored(e, self.case_sensitive);
                self.budget.work(if compiled { COMPILE_WORK } else { 1 })?;
                Kind::Matches(re)
            }
            (Some(_), Some(_)) => Kind::Unknown,
        };
        Ok(Test {
            value: Reference::parse(value),
            parameter: tag.attribute("parameter").unwrap_or(value).into(),
            kind,
            negate: tag.attribute("negate") == Some("true"),
        })
    }
}

/// A `<value>`: its index, and type and data as texts to substitute.
fn value(tag: XmlNode) -> Node {
    let index = tag.attribute("index").and_then(|i| i.trim().parse::<i32>().ok()).unwrap_or(-1);
    let data = tag.attribute("data").map(str::to_string).or_else(|| contents(tag));
    Node::Value { index, value_type: tag.attribute("type").map(Text::parse), data: data.as_deref().map(Text::parse) }
}

/// A `<value>`'s data given as its contents: the text, trimmed, or else the
/// XML of its child elements as written.
fn contents(tag: XmlNode) -> Option<String> {
    let text: String = tag.children().filter(XmlNode::is_text).filter_map(|n| n.text()).collect();
    let text = text.trim();
    if !text.is_empty() {
        return Some(text.to_string());
    }
    let source = tag.document().input_text();
    let xml: String = tag.children().filter(XmlNode::is_element).map(|n| &source[n.range()]).collect();
    (!xml.is_empty()).then_some(xml)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_is_compiled_once_and_its_cost_counted_then() {
        let xml = r#"<namespace><template delimiter="@"><if test="matches" expression="kept-[0-9]+"/></template></namespace>"#;
        let mut first = Budget::default();
        let a = compile(xml, true, &mut first).unwrap().unwrap();
        assert!(first.used() >= COMPILE_WORK, "the expression's compilation counted: {}", first.used());
        let mut again = Budget::default();
        let b = compile(xml, true, &mut again).unwrap().unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(again.used(), 0);
        assert_eq!(a.delimiter.as_deref(), Some("@"));
        // Case matters to the expressions: compiled apart.
        let c = compile(xml, false, &mut Budget::default()).unwrap().unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        assert!(compile("<not xml", true, &mut Budget::default()).unwrap().is_none());
    }
}
