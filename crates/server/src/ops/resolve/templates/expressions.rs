//! The regular expressions of `<if test="matches">`, compiled once per
//! process: compiling costs far more than matching (a legal expression with
//! nested counted repetitions takes milliseconds), so a template run over
//! every value of a base handle must not compile it again for each.

use quick_cache::sync::Cache;
use regex::{Regex, RegexBuilder};
use std::sync::{Arc, LazyLock};

/// Compiled size of one expression; a larger one matches nothing. Compiling
/// gives up past it within about 9 ms here (Unicode classes are large:
/// `\w{1,10}` takes most of it).
const SIZE_LIMIT: usize = 1 << 20;
/// The lazy DFA's cache per expression (regex's default is 2 MiB).
const DFA_SIZE_LIMIT: usize = 256 << 10;
/// Expressions kept. With the limits above the cache holds 80 MiB at worst;
/// ordinary expressions take a few KiB.
const CAPACITY: usize = 64;

/// `(expression, case_insensitive)` → the compiled expression, or None when
/// this engine cannot compile it (remembered too, so it fails at once).
type Compiled = Cache<(String, bool), Option<Arc<Regex>>>;

static COMPILED: LazyLock<Compiled> = LazyLock::new(|| Cache::new(CAPACITY));

/// The compiled form of `expression`, anchored at both ends, and whether
/// this call compiled it (it was not kept).
pub fn anchored(expression: &str, case_sensitive: bool) -> (Option<Arc<Regex>>, bool) {
    let key = (expression.to_string(), !case_sensitive);
    let mut compiled = false;
    let found = COMPILED.get_or_insert_with(&key, || {
        compiled = true;
        let re = RegexBuilder::new(&format!("^(?:{expression})$"))
            .case_insensitive(!case_sensitive)
            .size_limit(SIZE_LIMIT)
            .dfa_size_limit(DFA_SIZE_LIMIT)
            .build()
            .map_err(|e| tracing::debug!("template expression {expression:?}: {e}"))
            .ok()
            .map(Arc::new);
        Ok::<_, std::convert::Infallible>(re)
    });
    match found {
        Ok(re) => (re, compiled),
        Err(never) => match never {},
    }
}

/// A match's groups: group 0 is the whole value; groups that took no part are None.
pub type Groups = Arc<[Option<Arc<str>>]>;

/// The groups of `re` matching the whole of `value`.
pub fn full_match(re: &Regex, value: &str) -> Option<Groups> {
    let captures = re.captures(value)?;
    Some(captures.iter().map(|m| m.map(|m| Arc::from(m.as_str()))).collect())
}
