//! JSON input and output forms of §4.5.1 / §2.7 / §2.8 beyond what the vectors show.

use handled_proto::codec::Codec;
use handled_proto::data::{
    AdminPermissions, AdminRecord, PublicKey, ServerInfo, SiteInfo, TransportProtocol, ValueList,
};
use handled_proto::json::*;
use handled_proto::value::{types, HandleValue, TtlType, ValuePermissions, ValueReference};
use serde_json::{json, Value};

fn parse(j: Value) -> HandleValue {
    value_from_json(&j).unwrap_or_else(|e| panic!("{j}: {e}"))
}

fn parse_err(j: Value) -> String {
    value_from_json(&j).expect_err(&j.to_string()).message().to_string()
}

fn data(j: Value) -> Vec<u8> {
    parse(json!({"index": 1, "type": "X", "data": j})).data
}

#[test]
fn data_formats() {
    assert_eq!(data(json!("plain text")), b"plain text");
    assert_eq!(data(json!({"format": "STRING", "value": "t"})), b"t");
    assert_eq!(data(json!({"format": "Hex", "value": "00fF10"})), [0, 0xff, 0x10]);
    assert_eq!(data(json!({"format": "base64", "value": "AP8Q"})), [0, 0xff, 0x10]);
    // commons-codec leniency: URL-safe alphabet, no padding, whitespace.
    assert_eq!(data(json!({"format": "BASE64", "value": "-_8"})), [0xfb, 0xff]);
    assert_eq!(data(json!({"format": "base64", "value": "+/8=\n"})), [0xfb, 0xff]);
    assert_eq!(data(json!({"format": "base64", "value": "aGk gdGhlcmU"})), b"hi there");
    let admin =
        data(json!({"format": "ADMIN", "value": {"handle": "0.NA/X", "index": 200, "permissions": "011111110011"}}));
    let rec = AdminRecord::decode_data(&admin).unwrap();
    assert_eq!((rec.handle.as_slice(), rec.index, rec.permissions.0), (&b"0.NA/X"[..], 200, 0x7f3));
    let vlist = data(json!({"format": "vlist", "value": [{"handle": "a/b", "index": "7"}]}));
    assert_eq!(ValueList::decode_data(&vlist).unwrap().0, vec![ValueReference { handle: b"a/b".to_vec(), index: 7 }]);
}

#[test]
fn data_errors() {
    let bad = |d: Value| parse_err(json!({"index": 1, "type": "X", "data": d}));
    assert!(bad(json!({"format": "hex", "value": "abc"})).contains("odd"));
    assert!(bad(json!({"format": "hex", "value": "zz"})).contains("hex digit"));
    assert!(bad(json!({"format": "pdf", "value": "x"})).contains("unexpected data format"));
    assert!(bad(json!({"format": "string"})).contains("\"value\""));
    assert!(bad(json!({"value": "x"})).contains("\"format\""));
    assert!(bad(json!(null)).contains("\"data\""));
    assert!(bad(json!([1])).contains("data must be"));
    assert!(bad(json!({"format": "admin", "value": {"index": 1}})).contains("\"handle\""));
    assert!(bad(json!({"format": "key", "value": {"kty": "EC"}})).contains("unsupported key type"));
    assert!(bad(json!({"format": "vlist", "value": [{"handle": "a", "index": 1}, null]})).contains("must be"));
}

#[test]
fn value_fields() {
    let v = parse(json!({"index": 3, "type": "URL", "data": "x"}));
    assert_eq!(v, HandleValue::new(3, "URL", "x"));
    assert!(parse_err(json!({"type": "URL", "data": "x"})).contains("\"index\""));
    assert!(parse_err(json!({"index": 1, "data": "x"})).contains("\"type\""));
    assert!(parse_err(json!({"index": 1.5, "type": "URL", "data": "x"})).contains("integer"));
    assert!(parse_err(json!({"index": 1e12, "type": "URL", "data": "x"})).contains("range"));
    assert!(parse_err(json!([1])).contains("object"));
    assert_eq!(parse(json!({"index": "4", "type": "URL", "data": "x"})).index, 4);
}

#[test]
fn value_permissions_quirks() {
    let perms = |p: Value| parse(json!({"index": 1, "type": "X", "data": "", "permissions": p})).permissions.0;
    assert_eq!(perms(json!("*")), 0x0f);
    assert_eq!(perms(json!("1100")), 0x0c);
    assert_eq!(perms(json!("1111")), 0x0f);
    // The left-most of four chars is never read: admin read stays set.
    assert_eq!(perms(json!("0110")), 0x0e);
    assert_eq!(perms(json!("0000")), 0x08);
    // Five chars do reach admin read; one char reaches nothing.
    assert_eq!(perms(json!("00000")), 0x00);
    assert_eq!(perms(json!("1")), 0x0e);
    assert_eq!(perms(json!("11")), 0x0f);
    assert_eq!(perms(json!(1100)), 0x0c);
    assert_eq!(perms(json!(null)), 0x0e);
    assert_eq!(permissions_from_json("0101", ValuePermissions(0)), ValuePermissions(0x05));
}

#[test]
fn admin_permission_forms() {
    let perms =
        |p: Value| admin_from_json(&json!({"handle": "a/b", "index": 1, "permissions": p})).unwrap().permissions.0;
    assert_eq!(perms(json!("111111111111")), AdminPermissions::ALL);
    assert_eq!(perms(json!("*")), AdminPermissions::ALL);
    assert_eq!(perms(json!("1")), AdminPermissions::ADD_HANDLE);
    assert_eq!(perms(json!("10")), AdminPermissions::DELETE_HANDLE);
    assert_eq!(perms(json!("1111111111110")), 0xffe);
    // A number is the permission word itself (Java: Integer.toBinaryString).
    assert_eq!(perms(json!(4095)), AdminPermissions::ALL);
    assert_eq!(perms(json!(1024)), AdminPermissions::READ_VALUE);
    assert_eq!(perms(json!(-1)), AdminPermissions::ALL);
    assert_eq!(perms(json!(true)), AdminPermissions::ALL);
    assert_eq!(perms(json!(false)), 0);
    assert_eq!(perms(json!([true, 0, "x", null, 1, "", [], 0.0])), 0b100_0101 | 0b1_0000);
    assert_eq!(perms(json!(null)), 0);
    assert!(admin_from_json(&json!({"handle": "a/b", "index": 1, "permissions": {}})).is_err());
    assert_eq!(admin_from_json(&json!({"handle": "a/b", "index": 1})).unwrap().permissions.0, 0);
}

#[test]
fn admin_legacy_byte_length() {
    let j = json!({"index": 100, "type": "HS_ADMIN", "data": {"format": "admin",
        "value": {"handle": "a/b", "index": 0, "permissions": "000000000001", "legacyByteLength": true}}, "ttl": 86400});
    let v = parse(j.clone());
    let rec = AdminRecord { permissions: AdminPermissions(1), handle: b"a/b".to_vec(), index: 0 };
    assert_eq!(v.data, rec.to_bytes_legacy());
    assert_eq!(value_to_json(&v), j);
}

#[test]
fn ttl_and_timestamp() {
    let v = parse(json!({"index": 1, "type": "X", "data": "", "ttl": 60}));
    assert_eq!((v.ttl_type, v.ttl), (TtlType::Relative, 60));
    let v = parse(json!({"index": 1, "type": "X", "data": "", "ttl": "2023-11-14T22:13:20Z"}));
    assert_eq!((v.ttl_type, v.ttl), (TtlType::Absolute, 1_700_000_000));
    assert_eq!(value_to_json(&v)["ttl"], "2023-11-14T22:13:20Z");
    assert!(parse_err(json!({"index": 1, "type": "X", "data": "", "ttl": "86400"})).contains("ttl"));
    assert!(parse_err(json!({"index": 1, "type": "X", "data": "", "ttl": true})).contains("ttl"));
    let v = parse(json!({"index": 1, "type": "X", "data": "", "timestamp": "not a date"}));
    assert_eq!(v.timestamp, 0);
    let v = parse(json!({"index": 1, "type": "X", "data": "", "timestamp": "1970-01-01T00:01:00Z"}));
    assert_eq!(v.timestamp, 60);
}

#[test]
fn timestamps() {
    assert_eq!(parse_timestamp("2023-11-14T22:13:20Z").unwrap(), 1_700_000_000);
    assert_eq!(parse_timestamp("2023-11-14T22:13:20.999Z").unwrap(), 1_700_000_000);
    assert_eq!(parse_timestamp("2023-11-14T23:13:20+01:00").unwrap(), 1_700_000_000);
    assert_eq!(parse_timestamp("2023-11-14T22:13:20").unwrap(), 1_700_000_000);
    assert_eq!(parse_timestamp("2023-11-14").unwrap(), 1_699_920_000);
    assert!(parse_timestamp("yesterday").is_err());
    assert!(parse_timestamp("2100-01-01T00:00:00Z").unwrap_err().message().contains("range"));
    assert_eq!(format_timestamp(0), "1970-01-01T00:00:00Z");
    assert_eq!(format_timestamp(-1), "1969-12-31T23:59:59Z");
    assert_eq!(format_timestamp(i32::MAX), "2038-01-19T03:14:07Z");
}

#[test]
fn output_shapes() {
    let mut v = HandleValue::new(7, "URL", "x");
    assert_eq!(
        serde_json::to_string(&value_to_json(&v)).unwrap(),
        r#"{"index":7,"type":"URL","data":{"format":"string","value":"x"},"ttl":86400}"#
    );
    v.permissions = ValuePermissions(0x03);
    v.ttl_type = TtlType::Absolute;
    v.ttl = 1_700_000_000;
    v.timestamp = 60;
    v.references = vec![ValueReference { handle: b"a/b".to_vec(), index: 2 }];
    let j = value_to_json(&v);
    assert_eq!(
        serde_json::to_string(&j).unwrap(),
        r#"{"index":7,"type":"URL","data":{"format":"string","value":"x"},"permissions":"0011","ttl":"2023-11-14T22:13:20Z","timestamp":"1970-01-01T00:01:00Z","references":[{"handle":"a/b","index":2}]}"#
    );
    // Java's reader never clears admin read from a 4-char string.
    assert_eq!(parse(j).permissions.0, 0x0b);
}

#[test]
fn string_or_base64() {
    let fmt = |d: &[u8]| data_to_json(b"X", d)["format"].as_str().unwrap().to_string();
    assert_eq!(fmt(b"tab\there\r\n"), "string");
    assert_eq!(fmt(b"\x13 is whitespace to Java"), "string");
    assert_eq!(fmt("ünïcödé".as_bytes()), "string");
    assert_eq!(fmt(b""), "string");
    assert_eq!(fmt(b"\x01"), "base64");
    assert_eq!(fmt(b"\x14"), "base64");
    assert_eq!(fmt(b"del\x7f"), "base64");
    assert_eq!(fmt(b"\xff\xfe"), "base64");
    assert_eq!(data_to_json(b"X", &[0, 1, 2]), json!({"format": "base64", "value": "AAEC"}));
    // Structured types that don't decode fall back, as in Java.
    assert_eq!(fmt_of(types::HS_ADMIN, b"admin?"), "string");
    assert_eq!(
        fmt_of(b"HS_ADMIN.sub", &AdminRecord { permissions: AdminPermissions(1), handle: vec![], index: 0 }.to_bytes()),
        "admin"
    );
    assert_eq!(fmt_of(types::HS_VLIST, &[0, 0, 0, 1]), "base64");
    assert_eq!(fmt_of(types::HS_SITE, b""), "string");
    assert_eq!(fmt_of(types::HS_PUBKEY, b"\0\0\0\x01X\0\0"), "base64");
    assert_eq!(fmt_of(types::HS_SECKEY, b"secret"), "string");
}

fn fmt_of(t: &[u8], d: &[u8]) -> String {
    data_to_json(t, d)["format"].as_str().unwrap().to_string()
}

fn sample_site() -> SiteInfo {
    site_from_json(&json!({
        "version": 1, "protocolVersion": "2.11", "serialNumber": 9, "primarySite": false, "multiPrimary": true,
        "hashOption": 0, "hashFilter": "f",
        "attributes": [{"name": "desc", "value": "d"}],
        "servers": [{"serverId": 2, "address": "2001:db8::1",
            "publicKey": {"format": "base64", "value": "AAEC"},
            "interfaces": [{"query": false, "admin": true, "protocol": "HTTPS", "port": 443},
                           {"query": true, "admin": false, "protocol": 9, "port": 1}]}]
    }))
    .unwrap()
}

#[test]
fn site_json_forms() {
    let site = sample_site();
    assert_eq!((site.protocol_major, site.protocol_minor, site.serial), (2, 11, 9));
    assert!(!site.primary && site.multi_primary);
    assert_eq!((site.hash_option, site.hash_filter.as_slice()), (0, &b"f"[..]));
    assert_eq!(site.servers[0].public_key, [0, 1, 2]);
    assert_eq!(site.servers[0].interfaces[1].protocol, TransportProtocol::Unknown(9));
    let out = site_to_json(&site);
    assert_eq!(out["hashOption"], 0);
    assert_eq!(out["hashFilter"], "f");
    assert_eq!(out["servers"][0]["address"], "2001:db8::1");
    assert_eq!(out["servers"][0]["publicKey"], json!({"format": "base64", "value": "AAEC"}));
    assert_eq!(out["servers"][0]["interfaces"][1]["protocol"], 9);
    assert_eq!(site_from_json(&out).unwrap(), site);

    // Legacy capitalised keys, attributes as an object, defaults.
    let legacy = site_from_json(&json!({
        "ServerList": [{"ServerId": 1, "Address": "10.0.0.1", "PublicKey": "0001",
            "InterfaceList": [{"Query": true, "Admin": true, "Protocol": "TCP", "Port": 2641}]}],
        "Attributes": {"desc": "x", "alt_addr": ["1.2.3.4", "5.6.7.8"]}
    }))
    .unwrap();
    assert_eq!((legacy.data_version, legacy.protocol_major, legacy.protocol_minor, legacy.hash_option), (1, 2, 10, 2));
    assert_eq!(legacy.attributes.len(), 3);
    assert_eq!(legacy.servers[0].public_key, [0, 1]);
    assert_eq!(legacy.servers[0].address, ServerInfo::ipv4([10, 0, 0, 1]));
    assert_eq!(legacy.servers[0].interfaces[0].port, 2641);

    let bad = |j: Value| site_from_json(&j).unwrap_err().message().to_string();
    assert!(bad(json!({"servers": [{"address": "example.org"}]})).contains("not an IP address"));
    assert!(bad(json!({"servers": [{}]})).contains("\"address\""));
    assert!(bad(json!({"protocolVersion": "2"})).contains("major.minor"));
    assert!(bad(json!({"servers": [{"address": "::1", "interfaces": [{"protocol": "udp", "port": 1}]}]}))
        .contains("protocol"));
    assert!(bad(json!({"hashOption": 300})).contains("range"));
}

#[test]
fn addresses_java_style() {
    let addr = |s: &str| java_address_string(&ServerInfo::address_of(s.parse().unwrap()));
    assert_eq!(addr("192.0.2.10"), "192.0.2.10");
    assert_eq!(addr("0.0.0.0"), "0.0.0.0");
    assert_eq!(addr("::ffff:10.1.2.3"), "10.1.2.3");
    assert_eq!(addr("2001:db8::1"), "2001:db8::1");
    assert_eq!(addr("::1:0:0:0:1"), "::1:0:0:0:1");
    assert_eq!(addr("2001:db8:0:1::1"), "2001:db8:0:1::1");
    // Java never shortens a trailing zero run, nor a single zero.
    assert_eq!(addr("2001:db8::"), "2001:db8:0:0:0:0:0:0");
    assert_eq!(addr("1:0:2:3:4:5:6:7"), "1:0:2:3:4:5:6:7");
    // Brackets and mapped addresses on input.
    let site =
        site_from_json(&json!({"servers": [{"address": "[::ffff:1.2.3.4]"}, {"address": " 2001:db8::2 "}]})).unwrap();
    assert_eq!(site.servers[0].address, ServerInfo::ipv4([1, 2, 3, 4]));
    assert_eq!(java_address_string(&site.servers[1].address), "2001:db8::2");
}

#[test]
fn jwk_forms() {
    let k = public_key_from_jwk(&json!({"kty": "rsa", "n": "AMPm", "e": "AQAB"})).unwrap();
    assert_eq!(k, PublicKey::Rsa { exponent: vec![1, 0, 1], modulus: vec![0, 0xc3, 0xe6] });
    assert_eq!(public_key_to_jwk(&k), json!({"kty": "RSA", "n": "w-Y", "e": "AQAB"}));
    // Standard alphabet with padding is accepted too.
    let k2 = public_key_from_jwk(&json!({"kty": "RSA", "n": "w+Y=", "e": "AQAB"})).unwrap();
    assert_eq!(k2, k);
    let dsa = PublicKey::Dsa { q: vec![1], p: vec![0, 0x80], g: vec![2], y: vec![0] };
    let j = public_key_to_jwk(&dsa);
    assert_eq!(serde_json::to_string(&j).unwrap(), r#"{"kty":"DSA","y":"AA","p":"gA","q":"AQ","g":"Ag"}"#);
    assert_eq!(public_key_from_jwk(&j).unwrap(), dsa);
    assert_eq!(data_to_json(types::HS_PUBKEY, &dsa.to_bytes()), json!({"format": "key", "value": j}));
    assert!(public_key_from_jwk(&json!({"kty": "RSA", "n": "AQ"})).unwrap_err().message().contains("\"e\""));
    assert!(public_key_from_jwk(&json!({"n": "AQ"})).is_err());
}

#[test]
fn errors_display() {
    let e = value_from_json(&json!("x")).unwrap_err();
    assert_eq!(e.to_string(), e.message());
    let _: &dyn std::error::Error = &e;
}
