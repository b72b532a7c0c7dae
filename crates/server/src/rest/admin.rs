//! `/api/prefixes` (list, home, unhome), `/api/site` and
//! `/api/verifications/{index}:{handle}` (§4.5).

use super::authn::{parse_identity, HandleFields};
use super::params::percent_decode;
use super::{OpKind, Reply, Req, Rest};
use crate::ops;
use handled_proto::data::site::SiteInfo;
use handled_proto::header::ResponseCode;
use handled_proto::json::site_to_json;
use hyper::{Method, StatusCode};
use serde_json::{json, Map, Value};

pub(super) async fn prefixes(rest: &Rest, req: &Req, raw: &str) -> Reply {
    let named = percent_decode(raw, false);
    let caller = match rest.caller(req).await {
        Ok(c) => c,
        Err(reply) => return reply,
    };
    match req.method {
        Method::GET | Method::HEAD if named.is_empty() => match ops::list_homed_prefixes(&rest.ctx, &caller).await {
            Ok(list) => {
                let mut o = Map::new();
                o.insert("responseCode".into(), 1.into());
                o.insert("totalCount".into(), list.len().to_string().into());
                let (page, size) = match req.params.paging() {
                    Ok(p) => p,
                    Err(m) => return Reply::bad_request(m),
                };
                let all: Vec<Value> = list.iter().map(|p| String::from_utf8_lossy(p).into_owned().into()).collect();
                let shown = match (page, size) {
                    (Some(p), Some(s)) if p >= 0 && s >= 0 => {
                        let start = (p as usize).saturating_mul(s as usize).min(all.len());
                        all[start..start.saturating_add(s as usize).min(all.len())].to_vec()
                    }
                    _ => all,
                };
                o.insert("prefixes".into(), Value::Array(shown));
                if let (Some(p), Some(s)) = (page, size) {
                    o.insert("page".into(), p.into());
                    o.insert("pageSize".into(), s.into());
                }
                Reply::json(StatusCode::OK, Value::Object(o))
            }
            Err(e) => rest.op_error(req, &e, None, OpKind::Other),
        },
        Method::POST | Method::DELETE => {
            let prefix =
                if named.is_empty() { req.params.get("prefix").unwrap_or("").as_bytes().to_vec() } else { named };
            if prefix.is_empty() {
                return Reply::error(StatusCode::BAD_REQUEST, ResponseCode::INVALID_HANDLE, "Empty prefix invalid");
            }
            let result = ops::home_prefix(&rest.ctx, &caller, &prefix, req.method == Method::POST).await;
            match result {
                Ok(()) => Reply::json(
                    StatusCode::OK,
                    json!({ "responseCode": 1, "handle": String::from_utf8_lossy(&prefix) }),
                ),
                Err(e) => rest.op_error(req, &e, Some(&prefix), OpKind::Other),
            }
        }
        _ => Reply::method_not_allowed(req, "GET, HEAD, POST, DELETE, OPTIONS"),
    }
}

/// GET_SITE_INFO as JSON: our published HS_SITE record.
pub(super) fn site(rest: &Rest, req: &Req) -> Reply {
    if !matches!(req.method, Method::GET | Method::HEAD | Method::POST) {
        return Reply::method_not_allowed(req, "GET, HEAD, POST, OPTIONS");
    }
    match SiteInfo::decode_data(&rest.ctx.native.site_bytes) {
        Ok(site) => Reply::json(StatusCode::OK, json!({ "responseCode": 1, "site": site_to_json(&site) })),
        Err(e) => {
            Reply::error(StatusCode::INTERNAL_SERVER_ERROR, ResponseCode::ERROR, format!("Site record unreadable: {e}"))
        }
    }
}

/// Verify a secret-key challenge answer for another party (§4.5): `nonce`,
/// `cnonce`, `alg`, `signature` (+ PBKDF2 fields) → `isValid`.
pub(super) async fn verification(rest: &Rest, req: &Req, raw: &str) -> Reply {
    if !matches!(req.method, Method::GET | Method::HEAD | Method::POST) {
        return Reply::method_not_allowed(req, "GET, HEAD, POST, OPTIONS");
    }
    let (handle, index) = parse_identity(&percent_decode(raw, false));
    if handle.is_empty() {
        return Reply::error(StatusCode::BAD_REQUEST, ResponseCode::INVALID_HANDLE, "Empty handle invalid");
    }
    let p = &req.params;
    for k in ["iterations", "length"] {
        if let Err(m) = p.ints(k) {
            return Reply::bad_request(m);
        }
    }
    let Some(nonce) =
        p.get("nonce").and_then(|n| base64::Engine::decode(&base64::engine::general_purpose::STANDARD, n.trim()).ok())
    else {
        return Reply::bad_request("nonce (base64) is required");
    };
    let id = format!("{index}:{}", String::from_utf8_lossy(&handle));
    let mut fields: Vec<(String, String)> = vec![("id".into(), id), ("type".into(), "HS_SECKEY".into())];
    for k in ["cnonce", "alg", "signature", "salt", "iterations", "length"] {
        if let Some(v) = p.get(k) {
            fields.push((k.into(), v.into()));
        }
    }
    let valid = rest.verify_fields(&nonce, &HandleFields(fields), true, None).await.is_ok();
    Reply::json(StatusCode::OK, json!({ "responseCode": 1, "isValid": valid }))
}
