//! Text → the Handle.Net REST JSON form of a handle value (§4.5.1: `data` as
//! string/base64/hex/admin/vlist/site/key, permissions, ttl, timestamp,
//! references). Nothing may panic; a value read from any JSON writes a JSON
//! form that reads back as the same value (but for the permissions of
//! `read_back_permissions`) and writes the same JSON again.

#![no_main]

use handled_proto::json::{value_from_json, value_to_json};
use libfuzzer_sys::fuzz_target;

#[path = "../common.rs"]
mod common;
use common::read_back_permissions;

fuzz_target!(|data: &[u8]| {
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let Ok(value) = value_from_json(&json) else { return };
    let written = value_to_json(&value);
    let back = value_from_json(&written).expect("our own JSON form reads back");
    let mut expect = value.clone();
    expect.permissions = read_back_permissions(&value);
    assert_eq!(back, expect, "JSON form → value is lossless but for permissions");
    // After that one trip the form is fixed: JSON → value → JSON is stable.
    let normal = value_to_json(&back);
    assert_eq!(value_from_json(&normal).as_ref(), Ok(&back), "the normal value reads back");
    assert_eq!(value_to_json(&back), normal, "the JSON form is stable");
});
