//! The resolution body written straight to bytes: the hot path of the JSON
//! API (profiling showed half its user time in building `serde_json::Value`
//! trees and the allocator). Byte-identical to serializing
//! `{"responseCode":1,"handle":h,"values":[value_to_json(v)...]}` (tested);
//! structured values (HS_ADMIN, HS_SITE, keys...) and values with references
//! still go through [`value_to_json`], the one definition of the JSON forms.

use base64::Engine;
use handled_proto::json::{format_timestamp, looks_like_binary, permissions_to_json, value_to_json};
use handled_proto::value::{is_type_or_subtype, types, HandleValue, TtlType, ValuePermissions};
use std::cell::RefCell;
use std::io::Write;

/// Types whose data `data_to_json` decodes into a structure.
const STRUCTURED: &[&[u8]] =
    &[types::HS_ADMIN, types::HS_VLIST, types::HS_SITE, types::HS_SITE_PREFIX, types::HS_NA_DELEGATE, types::HS_PUBKEY];

fn string(out: &mut Vec<u8>, s: &str) {
    let _ = serde_json::to_writer(&mut *out, s);
}

thread_local! {
    /// Last timestamp formatted on this thread (values of one record mostly share it).
    static LAST_TS: RefCell<(i32, String)> = RefCell::new((0, format_timestamp(0)));
}

fn timestamp(out: &mut Vec<u8>, secs: i32) {
    LAST_TS.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 != secs {
            *c = (secs, format_timestamp(secs));
        }
        string(out, &c.1);
    });
}

fn write_value(out: &mut Vec<u8>, v: &HandleValue) {
    if !v.references.is_empty() || STRUCTURED.iter().any(|t| is_type_or_subtype(&v.value_type, t)) {
        let _ = serde_json::to_writer(&mut *out, &value_to_json(v));
        return;
    }
    let _ = write!(out, "{{\"index\":{},\"type\":", v.index);
    string(out, &String::from_utf8_lossy(&v.value_type));
    match std::str::from_utf8(&v.data) {
        Ok(s) if !looks_like_binary(&v.data) => {
            out.extend_from_slice(b",\"data\":{\"format\":\"string\",\"value\":");
            string(out, s);
        }
        _ => {
            out.extend_from_slice(b",\"data\":{\"format\":\"base64\",\"value\":\"");
            out.extend_from_slice(base64::engine::general_purpose::STANDARD.encode(&v.data).as_bytes());
            out.push(b'"');
        }
    }
    out.push(b'}');
    if v.permissions.0 & 0x0f != ValuePermissions::DEFAULT.0 {
        out.extend_from_slice(b",\"permissions\":");
        string(out, &permissions_to_json(v.permissions));
    }
    out.extend_from_slice(b",\"ttl\":");
    match v.ttl_type {
        TtlType::Relative => {
            let _ = write!(out, "{}", v.ttl);
        }
        TtlType::Absolute => string(out, &format_timestamp(v.ttl)),
    }
    if v.timestamp != 0 {
        out.extend_from_slice(b",\"timestamp\":");
        timestamp(out, v.timestamp);
    }
    out.push(b'}');
}

/// `{"responseCode":1,"handle":...,"values":[...]}`.
pub fn resolution_body(handle: &[u8], values: &[HandleValue]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + values.iter().map(|v| 96 + v.data.len() + v.value_type.len()).sum::<usize>());
    out.extend_from_slice(b"{\"responseCode\":1,\"handle\":");
    string(&mut out, &String::from_utf8_lossy(handle));
    out.extend_from_slice(b",\"values\":[");
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_value(&mut out, v);
    }
    out.extend_from_slice(b"]}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_proto::value::ValueReference;

    #[test]
    fn identical_to_the_value_tree() {
        let mut values = vec![
            HandleValue::new(1, "URL", "https://example.org/\"quoted\"\u{e9}\\"),
            HandleValue::new(2, "EMAIL", vec![0u8, 1, 2, 0xff]),
            HandleValue::new(3, "HS_ADMIN", vec![0x0f, 0xff, 0, 0, 0, 4, b'T', b'/', b'A', b'B', 0, 0, 1, 44]),
            HandleValue::new(4, "CUSTOM.sub", "tab\there"),
            HandleValue::new(5, "HS_PUBKEY", "not a key"),
            HandleValue::new(-7, "", ""),
        ];
        values[0].timestamp = 1_700_000_000;
        values[1].timestamp = 1_700_000_000;
        values[1].permissions = ValuePermissions(0x0c);
        values[3].ttl_type = TtlType::Absolute;
        values[3].ttl = 2_000_000_000;
        values[3].timestamp = -5;
        values[4].references = vec![ValueReference { handle: b"T/R".to_vec(), index: 3 }];
        let tree = serde_json::json!({
            "responseCode": 1,
            "handle": "TEST/\u{e9}\"x",
            "values": values.iter().map(value_to_json).collect::<Vec<_>>(),
        });
        let fast = resolution_body("TEST/\u{e9}\"x".as_bytes(), &values);
        assert_eq!(String::from_utf8(fast).unwrap(), serde_json::to_string(&tree).unwrap());
    }
}
