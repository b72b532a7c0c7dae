//! XML that peers write (template namespaces, 10320/LOC values), parsed with
//! a bound on nesting. roxmltree builds its tree by recursion, one level of
//! the machine stack per level of elements: 100,000 nested elements (a few
//! hundred KB, within a stored value) overflow a worker's stack and abort the
//! process. A streaming pass (quick-xml, no recursion) measures the depth
//! first; deeper documents are refused before roxmltree sees them.

use std::fmt;

/// Elements nested inside one another. Template namespaces need a few levels
/// beyond their own bound (`<namespace>`, `<template>`); 10320/LOC needs two.
pub const MAX_DEPTH: usize = 128;

#[derive(Debug)]
pub enum XmlError {
    TooDeep,
    Syntax(roxmltree::Error),
}

impl fmt::Display for XmlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            XmlError::TooDeep => write!(f, "elements nested deeper than {MAX_DEPTH}"),
            XmlError::Syntax(e) => write!(f, "{e}"),
        }
    }
}

/// `text` as a tree, when it nests no deeper than [`MAX_DEPTH`].
pub fn parse(text: &str) -> Result<roxmltree::Document<'_>, XmlError> {
    if too_deep(text) {
        return Err(XmlError::TooDeep);
    }
    roxmltree::Document::parse(text).map_err(XmlError::Syntax)
}

/// Whether some element of `text` lies deeper than [`MAX_DEPTH`]. Syntax
/// errors end the pass: roxmltree reports them with its own message.
fn too_deep(text: &str) -> bool {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(text);
    let mut depth = 0usize;
    loop {
        match reader.read_event() {
            Ok(Event::Start(_)) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return true;
                }
            }
            Ok(Event::End(_)) => depth = depth.saturating_sub(1),
            Ok(Event::Eof) | Err(_) => return false,
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}<x/>{}", "<a b='1'>".repeat(depth), "</a>".repeat(depth))
    }

    /// On a thread with tokio's default worker stack: roxmltree alone
    /// overflowed it (and aborted the process) on these 100,000 levels.
    #[test]
    fn deep_documents_are_refused_before_the_tree_is_built() {
        let results = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(|| {
                let deep = nested(100_000);
                let refused = matches!(parse(&deep), Err(XmlError::TooDeep));
                let at_bound = parse(&nested(MAX_DEPTH - 1)).map(|d| d.descendants().count()).ok();
                (refused, at_bound, matches!(parse(&nested(MAX_DEPTH)), Err(XmlError::TooDeep)))
            })
            .unwrap()
            .join()
            .unwrap();
        // MAX_DEPTH - 1 levels of <a> and the <x/> inside: MAX_DEPTH elements.
        assert_eq!(results, (true, Some(MAX_DEPTH + 1), false));
    }

    #[test]
    fn syntax_errors_keep_roxmltrees_message() {
        let e = parse("<a><b></a>").unwrap_err();
        assert!(matches!(e, XmlError::Syntax(_)), "{e}");
        assert!(parse("<a><!-- <b> --><![CDATA[<c>]]></a>").is_ok());
    }
}
