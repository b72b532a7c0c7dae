//! Where the integration tests find the Java library's golden vectors: the
//! in-repo copy `tests/vectors/` (see its README), or `HANDLE_VECTORS` to try
//! a regenerated set.

#![allow(dead_code)] // each test crate uses its own subset

use std::path::PathBuf;

use serde_json::Value;

pub fn vectors_dir() -> PathBuf {
    let dir = match std::env::var_os("HANDLE_VECTORS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors"),
    };
    assert!(dir.is_dir(), "vectors not found at {} (set HANDLE_VECTORS)", dir.display());
    dir
}

/// `vectors_dir()/name`, parsed as JSON.
pub fn load(name: &str) -> Value {
    let path = vectors_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `cases` cases and no failure persistence. Proptest's default would write a
/// `*.proptest-regressions` file beside the test source after a failure; we
/// choose not to, so a failed run leaves the tree clean (and a standalone
/// copy of the repository identical to the checkout). A failure prints its
/// minimal input; pin it as an ordinary `#[test]` instead.
pub fn proptest_config(cases: u32) -> proptest::test_runner::Config {
    proptest::test_runner::Config { cases, failure_persistence: None, ..Default::default() }
}
