//! docs/configuration.md lists every configuration key the server reads, and
//! no other: its TOML blocks are checked against `Config`'s own fields (what
//! serde reads), so the reference cannot drift from the code.

use handled_server::config::Config;
use std::collections::BTreeSet;

/// Keys set in the ```toml blocks of the document: `table.key` inside a `[table]`.
fn documented_keys(doc: &str) -> BTreeSet<String> {
    let (mut keys, mut in_toml, mut table) = (BTreeSet::new(), false, String::new());
    for line in doc.lines() {
        if line.starts_with("```") {
            in_toml = line.trim() == "```toml";
            table.clear();
            continue;
        }
        let line = line.split('#').next().unwrap_or("").trim();
        if !in_toml || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            table = format!("{name}.");
        } else if let Some((key, _)) = line.split_once('=') {
            keys.insert(format!("{table}{}", key.trim()));
        }
    }
    keys
}

/// Every key `Config` reads, `table.key` for nested tables (from its serialized default).
fn code_keys() -> BTreeSet<String> {
    let value = serde_json::to_value(Config::default()).expect("Config serializes");
    let mut keys = BTreeSet::new();
    for (key, v) in value.as_object().expect("an object") {
        match v.as_object() {
            Some(table) => keys.extend(table.keys().map(|k| format!("{key}.{k}"))),
            None => {
                keys.insert(key.clone());
            }
        }
    }
    keys
}

#[test]
fn the_configuration_reference_names_every_key_and_only_those() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");
    let doc = std::fs::read_to_string(path).expect("docs/configuration.md");
    let (documented, code) = (documented_keys(&doc), code_keys());
    let missing: Vec<_> = code.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&code).collect();
    assert!(missing.is_empty(), "keys the server reads that docs/configuration.md does not show: {missing:?}");
    assert!(unknown.is_empty(), "keys docs/configuration.md shows that the server does not read: {unknown:?}");
}

#[test]
fn every_documented_block_loads() {
    // Each block as a file: a typo in a value or a key fails here, as it would at start.
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");
    let doc = std::fs::read_to_string(path).expect("docs/configuration.md");
    let blocks: Vec<&str> = doc.split("```toml\n").skip(1).map(|b| b.split("```").next().unwrap_or("")).collect();
    assert!(!blocks.is_empty(), "no TOML block");
    for block in blocks {
        let parsed: Result<Config, _> = toml::from_str(block);
        assert!(parsed.is_ok(), "a block of docs/configuration.md does not load: {parsed:?}\n{block}");
    }
}
