//! `/api/openapi.json`: our OpenAPI document, with the route documents of
//! other modules merged in (their `paths` and `components.schemas`).
//! tests/rest checks the document against the running server (schemathesis).

use super::Reply;
use bytes::Bytes;
use hyper::StatusCode;
use serde_json::Value;

const BASE: &str = include_str!("openapi.json");

/// Documents of other HTTP modules to merge (the domain registry adds its
/// `crates/registry/src/openapi.json` here when it lands).
const EXTRA: &[&str] = &[];

pub(super) fn document() -> Bytes {
    let mut doc: Value = serde_json::from_str(BASE).expect("rest/openapi.json is valid JSON (tested)");
    for extra in EXTRA {
        if let Ok(other) = serde_json::from_str::<Value>(extra) {
            merge(&mut doc, &other);
        }
    }
    Bytes::from(serde_json::to_vec(&doc).unwrap_or_default())
}

/// Add `other`'s paths and component schemas to `doc` (ours win on clashes).
fn merge(doc: &mut Value, other: &Value) {
    for section in [&["paths"][..], &["components", "schemas"][..]] {
        let Some(src) = section.iter().try_fold(other, |v, k| v.get(*k)).and_then(Value::as_object) else { continue };
        let mut dst = &mut *doc;
        for k in section {
            dst = dst
                .as_object_mut()
                .map(|o| o.entry(k.to_string()).or_insert_with(|| Value::Object(Default::default())))
                .expect("object");
        }
        if let Some(dst) = dst.as_object_mut() {
            for (k, v) in src {
                dst.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
}

pub(super) fn reply(doc: &Bytes) -> Reply {
    // Served pre-rendered; parse back so `pretty`/`callback` work like elsewhere.
    Reply::json(StatusCode::OK, serde_json::from_slice(doc).unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_parses_and_merges() {
        let doc: Value = serde_json::from_slice(&document()).unwrap();
        assert_eq!(doc["openapi"].as_str().unwrap().chars().next(), Some('3'));
        assert!(doc["paths"]["/api/handles/{handle}"].is_object());
        let mut d = doc.clone();
        let other = serde_json::json!({"paths": {"/api/domains": {"get": {}}, "/api/site": {"get": {"x": 1}}}, "components": {"schemas": {"Domain": {}}}});
        merge(&mut d, &other);
        assert!(d["paths"]["/api/domains"].is_object());
        assert!(d["components"]["schemas"]["Domain"].is_object());
        assert_eq!(d["paths"]["/api/site"], doc["paths"]["/api/site"], "ours win");
    }
}
