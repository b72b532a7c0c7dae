//! `/api/handles` (§4.5): resolution, create/overwrite/mint, add values,
//! delete handle or values, listing by prefix. Each maps onto one function
//! of [`crate::ops`].

use super::params::{percent_decode, Params};
use super::{OpKind, Reply, Req, Rest};
use crate::auth::Caller;
use crate::ops::{self, CreateHandle, OpError, Resolve};
use handled_proto::header::{OpCode, ResponseCode};
use handled_proto::json::value_from_json;
use handled_proto::value::HandleValue;
use hyper::{Method, StatusCode};
use serde_json::{json, Map, Value};

pub(super) async fn route(rest: &Rest, req: &Req, raw_handle: &str, bare: bool) -> Reply {
    let handle = percent_decode(raw_handle, false);
    // The status handle's request counts, by the operation this request is.
    let op = match req.method {
        _ if handle.is_empty() => OpCode::LIST_HANDLES,
        Method::GET | Method::HEAD | Method::POST => OpCode::RESOLUTION,
        _ => OpCode::MODIFY_VALUE,
    };
    rest.ctx.metrics.handle_requests.classify(op);
    match req.method {
        Method::GET | Method::HEAD => get(rest, req, &req.params, &handle, bare).await,
        Method::POST => {
            // POST-as-GET: the JSON object's properties are the parameters.
            // A JSON object body already became the parameters (Rest::handle).
            if req.has_json_entity() {
                match serde_json::from_slice::<Value>(&req.body) {
                    Ok(Value::Object(_)) => {}
                    Ok(_) => return Reply::bad_request("Expected a JSON object of parameters"),
                    Err(e) => return Reply::bad_request(format!("Invalid JSON: {e}")),
                }
            }
            get(rest, req, &req.params, &handle, bare).await
        }
        Method::PUT if handle.is_empty() => empty_handle(),
        Method::PUT => put(rest, req, &handle).await,
        Method::DELETE if handle.is_empty() => empty_handle(),
        Method::DELETE => delete(rest, req, &handle).await,
        _ => Reply::method_not_allowed(req, "GET, HEAD, POST, PUT, DELETE, OPTIONS"),
    }
}

fn empty_handle() -> Reply {
    Reply::error(StatusCode::BAD_REQUEST, ResponseCode::INVALID_HANDLE, "Empty handle invalid")
}

fn text(h: &[u8]) -> String {
    String::from_utf8_lossy(h).into_owned()
}

/// `{"responseCode":1,"handle":h}` with the given status.
fn done(status: StatusCode, handle: &[u8]) -> Reply {
    Reply::json(status, json!({ "responseCode": 1, "handle": text(handle) }))
}

async fn get(rest: &Rest, req: &Req, params: &Params, handle: &[u8], bare: bool) -> Reply {
    if handle.is_empty() {
        return match params.get("prefix") {
            Some(p) if bare || !p.is_empty() => list(rest, req, params, p).await,
            _ => empty_handle(),
        };
    }
    let caller = match rest.caller(req).await {
        Ok(c) => c,
        Err(reply) => return reply,
    };
    let indexes = match params.ints("index") {
        Ok(i) => i,
        Err(m) => return Reply::bad_request(m),
    };
    // §4.5: publicOnly defaults to true for anonymous callers, false otherwise.
    let public_only = if params.has("publicOnly") { params.flag("publicOnly") } else { caller.identity().is_none() };
    let resolve = Resolve {
        handle: handle.to_vec(),
        indexes,
        types: params.all("type").map(|t| t.as_bytes().to_vec()).collect(),
        public_only,
        do_not_refer: params.flag("doNotRefer"),
        recurse: Some(ops::Recurse { client: req.conn.peer.ip(), native: false }),
    };
    match ops::resolve(&rest.ctx.chain, &caller, &resolve).await {
        Ok(values) => {
            Reply { raw: Some(super::fastjson::resolution_body(handle, &values)), ..Reply::empty(StatusCode::OK) }
        }
        Err(e) => rest.op_error(req, &e, Some(handle), OpKind::Resolution),
    }
}

/// `GET /api/handles?prefix=P[&page=&pageSize=]`; `totalCount` is a string (Java).
async fn list(rest: &Rest, req: &Req, params: &Params, prefix: &str) -> Reply {
    if prefix.is_empty() {
        return empty_handle();
    }
    let caller = match rest.caller(req).await {
        Ok(c) => c,
        Err(reply) => return reply,
    };
    let (page, size) = match params.paging() {
        Ok(p) => p,
        Err(m) => return Reply::bad_request(m),
    };
    let prefix_handle = if prefix.len() > 5 && prefix.as_bytes()[..5].eq_ignore_ascii_case(b"0.NA/") {
        prefix.to_string()
    } else {
        format!("0.NA/{prefix}")
    };
    match ops::list_handles(&rest.ctx, &caller, prefix_handle.as_bytes()).await {
        Ok(handles) => {
            let mut o = Map::new();
            o.insert("responseCode".into(), 1.into());
            o.insert("prefix".into(), prefix.into());
            o.insert("totalCount".into(), handles.len().to_string().into());
            let listed: Vec<Value> = match (page, size) {
                (Some(p), Some(s)) if p >= 0 && s >= 0 => {
                    let start = (p as usize).saturating_mul(s as usize).min(handles.len());
                    let end = start.saturating_add(s as usize).min(handles.len());
                    handles[start..end].iter().map(|h| text(h).into()).collect()
                }
                _ => handles.iter().map(|h| text(h).into()).collect(),
            };
            o.insert("handles".into(), Value::Array(listed));
            if let (Some(p), Some(s)) = (page, size) {
                o.insert("page".into(), p.into());
                o.insert("pageSize".into(), s.into());
            }
            Reply::json(StatusCode::OK, Value::Object(o))
        }
        Err(e) => rest.op_error(req, &e, None, OpKind::Other),
    }
}

/// The values of a PUT body: an array, `{"values":[...]}` (whose optional
/// `handle` must be the path's), or a single value object.
pub(super) fn body_values(body: &[u8], handle: &[u8]) -> Result<Vec<HandleValue>, OpError> {
    let bad = |m: String| OpError::new(ResponseCode::PROTOCOL_ERROR, m);
    let j: Value = serde_json::from_slice(body).map_err(|e| bad(format!("Invalid JSON: {e}")))?;
    let list = match &j {
        Value::Array(a) => a.clone(),
        Value::Object(o) if o.contains_key("values") => {
            if let Some(h) = o.get("handle") {
                if h.as_str().map(str::as_bytes) != Some(handle) {
                    return Err(bad("Handle in body does not match the path".into()));
                }
            }
            match &o["values"] {
                Value::Array(a) => a.clone(),
                _ => return Err(bad("\"values\" must be an array".into())),
            }
        }
        Value::Object(_) => vec![j.clone()],
        _ => return Err(bad("Expected an array of values, {\"values\":[...]} or one value".into())),
    };
    list.iter()
        .map(|v| {
            value_from_json(v)
                .map_err(|e| OpError::new(ResponseCode::INVALID_VALUE, format!("Invalid handle value: {e}")))
        })
        .collect()
}

async fn authenticated(rest: &Rest, req: &Req) -> Result<Caller, Reply> {
    rest.caller(req).await
}

async fn put(rest: &Rest, req: &Req, handle: &[u8]) -> Reply {
    let caller = match authenticated(rest, req).await {
        Ok(c) => c,
        Err(reply) => return reply,
    };
    let values = match body_values(&req.body, handle) {
        Ok(v) => v,
        Err(e) => return rest.op_error(req, &e, Some(handle), OpKind::Other),
    };
    let overwrite = req.params.strict_flag("overwrite", true);
    if req.params.has("index") {
        // Add (or with overwrite replace) exactly the listed values.
        if !req.params.all("index").any(|i| i.eq_ignore_ascii_case("various")) {
            let mut listed = match req.params.ints("index") {
                Ok(i) => i,
                Err(m) => return Reply::bad_request(m),
            };
            let mut given: Vec<i32> = values.iter().map(|v| v.index).collect();
            listed.sort_unstable();
            listed.dedup();
            given.sort_unstable();
            given.dedup();
            if listed != given {
                return Reply::bad_request("The index parameters do not match the indexes of the values");
            }
        }
        return match ops::add_values(&rest.ctx, &caller, handle, &values, overwrite).await {
            Ok(replaced) => done(if replaced { StatusCode::OK } else { StatusCode::CREATED }, handle),
            Err(e) => rest.op_error(req, &e, Some(handle), OpKind::Other),
        };
    }
    let create = CreateHandle {
        handle: handle.to_vec(),
        values,
        overwrite,
        mint: req.params.strict_flag("mintNewSuffix", false),
    };
    match ops::create_handle(&rest.ctx, &caller, create).await {
        Ok(c) => done(if c.overwritten { StatusCode::OK } else { StatusCode::CREATED }, &c.handle),
        Err(e) => rest.op_error(req, &e, Some(handle), OpKind::Other),
    }
}

async fn delete(rest: &Rest, req: &Req, handle: &[u8]) -> Reply {
    let caller = match authenticated(rest, req).await {
        Ok(c) => c,
        Err(reply) => return reply,
    };
    let result = if req.params.has("index") {
        match req.params.ints("index") {
            Ok(indexes) => ops::remove_values(&rest.ctx, &caller, handle, &indexes).await,
            Err(m) => return Reply::bad_request(m),
        }
    } else {
        ops::delete_handle(&rest.ctx, &caller, handle).await
    };
    match result {
        Ok(()) => done(StatusCode::OK, handle),
        Err(e) => rest.op_error(req, &e, Some(handle), OpKind::Other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_body_forms() {
        let one = r#"{"index":1,"type":"URL","data":"https://a"}"#;
        assert_eq!(body_values(one.as_bytes(), b"T/1").unwrap().len(), 1);
        let arr = format!("[{one},{}]", one.replace("\"index\":1", "\"index\":2"));
        assert_eq!(body_values(arr.as_bytes(), b"T/1").unwrap().len(), 2);
        let obj = format!(r#"{{"handle":"T/1","values":[{one}]}}"#);
        assert_eq!(body_values(obj.as_bytes(), b"T/1").unwrap()[0].data, b"https://a");
        assert_eq!(body_values(obj.as_bytes(), b"T/2").unwrap_err().code, ResponseCode::PROTOCOL_ERROR);
        assert_eq!(body_values(b"{nope", b"T/1").unwrap_err().code, ResponseCode::PROTOCOL_ERROR);
        assert_eq!(body_values(br#"[{"index":1}]"#, b"T/1").unwrap_err().code, ResponseCode::INVALID_VALUE);
    }
}
