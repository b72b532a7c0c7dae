//! Structured value data and its JSON against the Java library's vectors
//! (`tests/vectors`), plus no-panic checks on arbitrary bytes.

use handled_proto::codec::Codec;
use handled_proto::data::hash::{handle_hash, server_index};
use handled_proto::data::pubkey::unsigned;
use handled_proto::data::{AdminRecord, InterfaceKind, PublicKey, SiteInfo, TransportProtocol, ValueList};
use handled_proto::json::{
    data_to_json, public_key_from_jwk, public_key_to_jwk, site_from_json, site_to_json, value_from_json, value_to_json,
};
use handled_proto::value::{types, HandleValue, TtlType};
use proptest::prelude::*;
use serde_json::Value;

mod support;
use support::{load, vectors_dir};

fn unhex(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().expect("hex string")).unwrap()
}

/// Equal as JSON values and in field order (serde_json keeps order here).
fn assert_json_eq(got: &Value, want: &Value, ctx: &str) {
    assert_eq!(got, want, "{ctx}");
    assert_eq!(serde_json::to_string(got).unwrap(), serde_json::to_string(want).unwrap(), "{ctx}: field order");
}

/// Every object in every vector file that carries `encoded_value_hex`.
fn all_vector_values() -> Vec<(String, Value)> {
    fn walk(v: &Value, ctx: &str, out: &mut Vec<(String, Value)>) {
        match v {
            Value::Object(o) => {
                if o.contains_key("encoded_value_hex") {
                    out.push((ctx.to_string(), v.clone()));
                }
                for (k, x) in o {
                    walk(x, &format!("{ctx}.{k}"), out);
                }
            }
            Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| walk(x, &format!("{ctx}[{i}]"), out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(vectors_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    for name in names {
        walk(&load(&name), &name, &mut out);
    }
    out
}

#[test]
fn every_vector_value_decodes_reencodes_and_maps_to_json() {
    let values = all_vector_values();
    assert!(values.len() >= 17, "found only {} vector values", values.len());
    let mut structured = 0;
    for (ctx, vec) in &values {
        let bytes = unhex(&vec["encoded_value_hex"]);
        let v = HandleValue::from_bytes(&bytes).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        assert_eq!(v.to_bytes(), bytes, "{ctx}: re-encoding");
        assert_eq!(i64::from(v.index), vec["index"].as_i64().unwrap(), "{ctx}");
        assert_eq!(v.value_type, vec["type"].as_str().unwrap().as_bytes(), "{ctx}");
        assert_eq!(v.data, unhex(&vec["data_hex"]), "{ctx}");
        assert_eq!(i64::from(v.ttl), vec["ttl"].as_i64().unwrap(), "{ctx}");
        assert_eq!(v.ttl_type == TtlType::Absolute, vec["ttl_type"] == 1, "{ctx}");
        assert_eq!(i64::from(v.timestamp), vec["timestamp"].as_i64().unwrap(), "{ctx}");
        assert_eq!(format!("0x{:02x}", v.permissions.0), vec["permissions_byte"].as_str().unwrap(), "{ctx}");
        assert_eq!(v.references.len(), vec["references"].as_array().unwrap().len(), "{ctx}");

        let rest = &vec["rest_api_json"];
        assert_json_eq(&value_to_json(&v), rest, ctx);
        assert_eq!(value_from_json(rest).unwrap_or_else(|e| panic!("{ctx}: {e}")), v, "{ctx}: from JSON");

        if let Some(dd) = vec.get("data_decoded") {
            structured += 1;
            check_structured(ctx, &v, dd);
        } else if let Some(text) = vec.get("data_utf8") {
            assert_eq!(data_to_json(&v.value_type, &v.data)["value"], *text, "{ctx}");
        }
    }
    assert!(structured >= 4, "structured values checked: {structured}");
}

fn check_structured(ctx: &str, v: &HandleValue, dd: &Value) {
    if v.is_type(types::HS_ADMIN) {
        let rec = AdminRecord::decode_data(&v.data).unwrap();
        assert_eq!(rec.handle, dd["admin_handle"].as_str().unwrap().as_bytes(), "{ctx}");
        assert_eq!(i64::from(rec.index), dd["admin_index"].as_i64().unwrap(), "{ctx}");
        assert_eq!(format!("0x{:04x}", rec.permissions.0), dd["permission_bits_hex"].as_str().unwrap(), "{ctx}");
        assert_eq!(rec.to_bytes(), v.data, "{ctx}");
    } else if v.is_type(types::HS_VLIST) {
        let list = ValueList::decode_data(&v.data).unwrap();
        let want = dd.as_array().unwrap();
        assert_eq!(list.0.len(), want.len(), "{ctx}");
        for (r, w) in list.0.iter().zip(want) {
            assert_eq!(r.handle, w["handle"].as_str().unwrap().as_bytes(), "{ctx}");
            assert_eq!(i64::from(r.index), w["index"].as_i64().unwrap(), "{ctx}");
        }
        assert_eq!(list.to_bytes(), v.data, "{ctx}");
    } else if v.is_type(types::HS_SITE) {
        let site = SiteInfo::decode_data(&v.data).unwrap();
        assert_json_eq(&site_to_json(&site), dd, ctx);
        assert_eq!(site.to_bytes(), v.data, "{ctx}");
        assert_eq!(site_from_json(dd).unwrap().to_bytes(), v.data, "{ctx}");
    } else if v.is_type(types::HS_PUBKEY) {
        let key = PublicKey::from_bytes(&v.data).unwrap();
        assert_json_eq(&public_key_to_jwk(&key), dd, ctx);
        assert_eq!(key.to_bytes(), v.data, "{ctx}");
        assert_eq!(public_key_from_jwk(dd).unwrap(), key, "{ctx}");
    } else {
        panic!("{ctx}: unexpected structured type");
    }
}

fn check_example_site(site: &SiteInfo, server_key: &[u8]) {
    assert_eq!(site.data_version, 1);
    assert_eq!((site.protocol_major, site.protocol_minor), (2, 10));
    assert_eq!(site.serial, 1);
    assert!(site.primary && !site.multi_primary);
    assert_eq!(site.hash_option, 2);
    assert!(site.hash_filter.is_empty());
    assert_eq!(site.attribute(b"desc"), Some(&b"Example primary site"[..]));
    assert_eq!(site.servers.len(), 1);
    let s = &site.servers[0];
    assert_eq!(s.server_id, 1);
    assert_eq!(s.ip_addr(), "192.0.2.10".parse::<std::net::IpAddr>().unwrap());
    assert_eq!(s.public_key, server_key);
    let ifs: Vec<_> = s.interfaces.iter().map(|i| (i.kind, i.protocol, i.port)).collect();
    assert_eq!(
        ifs,
        vec![
            (InterfaceKind::AdminAndQuery, TransportProtocol::Tcp, 2641),
            (InterfaceKind::Query, TransportProtocol::Udp, 2641),
            (InterfaceKind::AdminAndQuery, TransportProtocol::Http, 8000),
        ]
    );
}

#[test]
fn site_info_value() {
    let vec = load("site_info_value.json");
    let keys = load("keys.json");
    let bytes = unhex(&vec["hex"]);
    assert_eq!(bytes.len() as u64, vec["length"].as_u64().unwrap());
    let site = SiteInfo::decode_data(&bytes).unwrap();
    check_example_site(&site, &unhex(&keys["server"]["hs_pubkey_encoding_hex"]));
    assert_eq!(site.to_bytes(), bytes);
    let json = &vec["decoded_siteinfo_json"];
    assert_json_eq(&site_to_json(&site), json, "site_info_value");
    assert_eq!(site_from_json(json).unwrap(), site);
}

#[test]
fn get_site_info_response_body_is_the_site_record() {
    let vec = load("get_site_info_response.json");
    let keys = load("keys.json");
    let body = unhex(&vec["decoded"]["body_hex"]);
    let site = SiteInfo::decode_data(&body).unwrap();
    check_example_site(&site, &unhex(&keys["server"]["hs_pubkey_encoding_hex"]));
    assert_eq!(site.to_bytes(), body);
    assert_json_eq(&site_to_json(&site), &vec["decoded"]["body"]["site"], "body.site");
    let rest = &vec["rest_api_json(GET /api/site)"]["site"];
    assert_json_eq(&site_to_json(&site), rest, "rest site");
    assert_eq!(site_from_json(rest).unwrap().to_bytes(), body);
}

#[test]
fn rsa_keys() {
    let keys = load("keys.json");
    for who in ["server", "admin"] {
        let k = &keys[who];
        let bytes = unhex(&k["hs_pubkey_encoding_hex"]);
        let key = PublicKey::from_bytes(&bytes).unwrap();
        assert_eq!(key.to_bytes(), bytes, "{who}");
        assert_json_eq(&public_key_to_jwk(&key), &k["jwk_public"], who);
        assert_eq!(public_key_from_jwk(&k["jwk_public"]).unwrap().to_bytes(), bytes, "{who}");
        // The SPKI DER carries the same two's-complement integers.
        let PublicKey::Rsa { exponent, modulus } = &key else { panic!("{who}: not RSA") };
        let spki = k["x509_spki_public_der_hex"].as_str().unwrap();
        assert!(
            spki.contains(&hex::encode(modulus))
                && spki.ends_with(&format!("02{:02x}{}", exponent.len(), hex::encode(exponent)))
        );
        assert_eq!(PublicKey::rsa(unsigned(exponent), unsigned(modulus)), key);
    }
}

#[test]
fn dh_keys_from_session_vector() {
    let vec = load("session_dh.json");
    let p = unhex(&vec["dh_p_hex"]);
    for name in ["client_dh_public_encoding_hex", "server_dh_public_encoding_hex"] {
        let bytes = unhex(&vec[name]);
        let key = PublicKey::from_bytes(&bytes).unwrap();
        assert_eq!(key.to_bytes(), bytes, "{name}");
        let PublicKey::Dh { y, p: kp, g } = &key else { panic!("{name}: not DH") };
        assert_eq!(unsigned(kp), unsigned(&p), "{name}");
        assert_eq!(g, &[vec["dh_g"].as_u64().unwrap() as u8], "{name}");
        assert_eq!(PublicKey::dh(unsigned(y), unsigned(kp), g), key, "{name}");
        // Java has no JWK for DH: HS_PUBKEY JSON falls back to base64.
        assert_eq!(data_to_json(types::HS_PUBKEY, &bytes)["format"], "base64");
        assert_eq!(public_key_from_jwk(&public_key_to_jwk(&key)).unwrap(), key);
    }
}

#[test]
fn handle_hash_vectors() {
    let vec = load("handle_hash.json");
    let cases = vec["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    for c in cases {
        let h = c["handle"].as_str().unwrap().as_bytes();
        for (option, name) in [(0u8, "by_prefix"), (1, "by_suffix"), (2, "by_all")] {
            let ctx = format!("{} {name}", c["handle"]);
            assert_eq!(i64::from(handle_hash(h, option)), c[format!("{name}_hash")].as_i64().unwrap(), "{ctx}");
            for n in [2usize, 3] {
                let want = c[format!("{name}_server_of_{n}")].as_u64().unwrap() as usize;
                assert_eq!(server_index(h, option, n), want, "{ctx} of {n}");
            }
        }
    }
}

proptest! {
    #![proptest_config(support::proptest_config(2000))]

    /// No decoder panics on arbitrary bytes, and what decodes re-encodes to
    /// something that decodes to the same thing.
    #[test]
    fn decoders_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(a) = AdminRecord::decode_data(&data) {
            prop_assert_eq!(AdminRecord::decode_data(&a.to_bytes()).unwrap(), a);
        }
        if let Ok(l) = ValueList::decode_data(&data) {
            prop_assert_eq!(l.to_bytes(), data.clone());
        }
        if let Ok(s) = SiteInfo::decode_data(&data) {
            prop_assert_eq!(SiteInfo::decode_data(&s.to_bytes()).unwrap(), s);
        }
        if let Ok(k) = PublicKey::decode_data(&data) {
            prop_assert_eq!(PublicKey::decode_data(&k.to_bytes()).unwrap(), k);
        }
        for t in [types::HS_ADMIN, types::HS_VLIST, types::HS_SITE, types::HS_PUBKEY, types::URL] {
            let _ = data_to_json(t, &data);
        }
    }

    /// JSON output is stable: value → JSON → value → JSON gives the same JSON
    /// (one pass may lose what Java's JSON loses too, e.g. unknown interface
    /// type codes or non-UTF-8 text).
    #[test]
    fn json_output_is_stable(tail in proptest::collection::vec(any::<u8>(), 0..64), kind in 0u8..4) {
        // Mutate the tail of a real site record so some decode and some fall back.
        let mut data = unhex(&load("site_info_value.json")["hex"]);
        let at = data.len().saturating_sub(tail.len());
        data.truncate(at);
        data.extend_from_slice(&tail);
        let ty = [types::HS_SITE, types::HS_ADMIN, types::HS_VLIST, types::HS_PUBKEY][kind as usize];
        let v = HandleValue::new(5, ty, data);
        let json = value_to_json(&v);
        let back = value_from_json(&json).unwrap();
        prop_assert_eq!(value_to_json(&back), json);
    }
}
