//! A configuration file's error as one line: where in the file, and what is
//! wrong there. toml's own error draws the line over several, and the
//! per-subsystem sections (flattened into the top level) lose the position
//! and the list of known keys: both are found again here.

use super::{Config, ConfigError};
use serde::de::DeserializeOwned;
use std::path::Path;

/// The error of parsing `text` (the file at `path`) as a [`Config`].
pub(super) fn parse_error(path: &Path, text: &str, e: &toml::de::Error) -> ConfigError {
    let (at, message) = match unknown_key(e.message().trim()) {
        Some((key, known)) if known.is_empty() => (key_at(text, key), unknown(key, &top_level_keys())),
        // A table's key (`[cassandra]`): toml keeps its place unless the table
        // sits in a flattened section.
        Some((key, known)) => match span_start(e) {
            0 => (key_at(text, key), unknown(key, &known)),
            at => (at, unknown(key, &known)),
        },
        // A section's value of the wrong type: its error has no position once
        // flattened; parsing that section alone gives it back.
        None if e.span().is_none_or(|s| s.is_empty()) => {
            match section_errors(text).into_iter().find(|e| e.span().is_some_and(|s| !s.is_empty())) {
                Some(own) => (span_start(&own), own.message().trim().to_string()),
                None => (span_start(e), e.message().trim().to_string()),
            }
        }
        None => (span_start(e), e.message().trim().to_string()),
    };
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    ConfigError::Parse { path: path.to_owned(), line, column, message }
}

fn span_start(e: &toml::de::Error) -> usize {
    e.span().map_or(0, |s| s.start)
}

fn unknown(key: &str, known: &[impl AsRef<str>]) -> String {
    match known.iter().map(AsRef::as_ref).min_by_key(|k| strsim::levenshtein(key, k)) {
        Some(best) if strsim::levenshtein(key, best) <= 3 => format!("unknown key `{key}`; did you mean `{best}`?"),
        _ => format!("unknown key `{key}` (README's Configuration lists every key)"),
    }
}

/// `unknown field `x`, expected one of `a`, `b`` → ("x", ["a", "b"]); an
/// unknown top-level key comes without the list.
fn unknown_key(message: &str) -> Option<(&str, Vec<&str>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (key, rest) = rest.split_once('`')?;
    let known = rest.split('`').skip(1).step_by(2).collect();
    Some((key, known))
}

/// Every key the top level of the file takes, sections' keys included.
pub(super) fn top_level_keys() -> Vec<String> {
    match serde_json::to_value(Config::default()) {
        Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// Where `key` is written in `text`: at the top level, else in a table.
fn key_at(text: &str, key: &str) -> usize {
    let Ok(table) = toml::de::DeTable::parse(text) else { return 0 };
    let top = table.get_ref();
    let mut in_tables = top.values().filter_map(|v| match v.get_ref() {
        toml::de::DeValue::Table(t) => t.keys().find(|k| k.get_ref().as_ref() == key),
        _ => None,
    });
    let found = top.keys().find(|k| k.get_ref().as_ref() == key).or_else(|| in_tables.next());
    found.map_or(0, |k| k.span().start)
}

/// Each section parsed on its own (they ignore one another's keys).
fn section_errors(text: &str) -> Vec<toml::de::Error> {
    fn error_of<T: DeserializeOwned>(text: &str) -> Option<toml::de::Error> {
        toml::from_str::<T>(text).err()
    }
    [
        error_of::<super::StorageConfig>(text),
        error_of::<super::TransportConfig>(text),
        error_of::<super::AdmissionConfig>(text),
        error_of::<super::AccessConfig>(text),
        error_of::<super::AuthConfig>(text),
        error_of::<super::ClusterConfig>(text),
        error_of::<super::RegistryConfig>(text),
        error_of::<super::ReplicationConfig>(text),
        error_of::<super::ReverseLookupConfig>(text),
    ]
    .into_iter()
    .flatten()
    .collect()
}
