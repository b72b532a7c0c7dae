//! One line of a `handled import` file (`{"handle": ..., "values": [...]}`,
//! the JSON API's value form): an operator's file, or another server's
//! export. Nothing may panic; a line that parses has a PREFIX/SUFFIX handle
//! and positive, distinct indexes, and written back as a line it parses to
//! the same record but for permissions (the JSON value form's losses,
//! common.rs).

#![no_main]

use handled_proto::json::value_to_json;
use handled_server::import::parse_line;
use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;

#[path = "../common.rs"]
mod common;
use common::read_back_permissions;

/// The stamp for values without a timestamp.
const NOW: i32 = 1_700_000_000;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok((handle, record)) = parse_line(text, NOW) else { return };
    assert!(!handle.is_empty() && handle.contains(&b'/'));
    let mut seen = HashSet::new();
    for v in &record.values {
        assert!(v.index > 0 && seen.insert(v.index), "index {}", v.index);
    }
    let line = serde_json::json!({
        "handle": String::from_utf8(handle.clone()).expect("the handle was a JSON string"),
        "values": record.values.iter().map(value_to_json).collect::<Vec<_>>(),
    });
    let (again, back) = parse_line(&line.to_string(), NOW).expect("a written line parses");
    assert_eq!(again, handle);
    let mut expect = record.values.clone();
    for v in &mut expect {
        v.permissions = read_back_permissions(v);
    }
    assert_eq!(back.values, expect);
});
