//! `/api/sessions` (§4.6): HTTP sessions a client opens, authenticates by
//! answering the session nonce (or with Basic), then names in
//! `Authorization: Handle sessionId="..."`. HTTPS only; errors as `"error"`.

use super::authn::{strip_scheme, HandleFields};
use super::http_sessions::HttpSession;
use super::{Reply, Req, Rest};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hyper::header::{HeaderValue, LOCATION};
use hyper::{Method, StatusCode};
use serde_json::{json, Map, Value};
use std::sync::Arc;

fn error(status: StatusCode, message: impl Into<String>) -> Reply {
    Reply::json(status, json!({ "error": message.into() }))
}

/// Handle fields from the Authorization header, else from a JSON body (where
/// `id` is not percent-encoded): (fields, id_already_decoded).
fn fields(req: &Req) -> (HandleFields, bool) {
    if let Some(h) =
        req.headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|h| strip_scheme(h, "handle"))
    {
        return (HandleFields::parse(h), false);
    }
    if req.has_json_entity() {
        if let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(&req.body) {
            let f = o
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
                .collect();
            return (HandleFields(f), true);
        }
    }
    (HandleFields::default(), false)
}

fn session_json(rest: &Rest, s: &HttpSession, f: &HandleFields) -> Value {
    let mut o = Map::new();
    o.insert("sessionId".into(), s.id.clone().into());
    o.insert("nonce".into(), B64.encode(s.nonce).into());
    if let Some((alg, sig)) = rest.server_signature(&s.nonce, f) {
        o.insert("serverAlg".into(), alg.into());
        o.insert("serverSignature".into(), sig.into());
    }
    let identity = s.identity();
    o.insert("authenticated".into(), identity.is_some().into());
    if let Some(i) = identity {
        o.insert("id".into(), i.display().into());
    }
    Value::Object(o)
}

/// Authenticate `s` from Basic or Handle fields, if the request carries any.
async fn authenticate(rest: &Rest, req: &Req, s: &HttpSession, f: &HandleFields, decoded: bool) -> Result<(), Reply> {
    let auth = req.headers.get("authorization").and_then(|v| v.to_str().ok());
    let result = if let Some(b) = auth.and_then(|h| strip_scheme(h, "basic")) {
        Some(rest.basic(b, req.conn.peer).await)
    } else if f.get("signature").is_some() {
        Some(rest.verify_fields(&s.nonce, f, decoded, Some(req.conn.peer)).await)
    } else {
        None
    };
    match result {
        Some(Ok(identity)) => {
            rest.sessions.prove(s, identity).await;
            Ok(())
        }
        Some(Err(e)) => Err(rest.challenge(req, error(StatusCode::UNAUTHORIZED, e.message))),
        None => Ok(()),
    }
}

pub(super) async fn route(rest: &Rest, req: &Req, rest_path: &str) -> Reply {
    let allowed = match rest_path {
        "" => &[Method::POST][..],
        "this" => &[Method::GET, Method::HEAD, Method::PUT, Method::POST, Method::DELETE][..],
        _ => &[][..],
    };
    if !allowed.is_empty() && !allowed.contains(&req.method) {
        let allow = if rest_path.is_empty() { "POST, OPTIONS" } else { "GET, HEAD, PUT, POST, DELETE, OPTIONS" };
        return Reply::method_not_allowed(req, allow);
    }
    if !rest.credentials_count(req) {
        return error(StatusCode::FORBIDDEN, format!("Sessions need HTTPS: {}", super::PLAIN_HTTP_HINT));
    }
    let (f, decoded) = fields(req);
    match (rest_path, &req.method) {
        ("", &Method::POST) => {
            if f.get("sessionid").is_some() {
                return error(StatusCode::BAD_REQUEST, "A new session must not name a sessionId");
            }
            let s = rest.sessions.create();
            if let Err(reply) = authenticate(rest, req, &s, &f, decoded).await {
                rest.sessions.remove(&s.id).await;
                return reply;
            }
            Reply::json(StatusCode::CREATED, session_json(rest, &s, &f))
                .header(LOCATION, HeaderValue::from_static("/api/sessions/this"))
        }

        ("this", m) => {
            let Some(s) = this(rest, req).await else { return error(StatusCode::FORBIDDEN, "No such session") };
            match *m {
                Method::GET | Method::HEAD | Method::PUT | Method::POST => {
                    if let Err(reply) = authenticate(rest, req, &s, &f, decoded).await {
                        return reply;
                    }
                    Reply::json(StatusCode::OK, session_json(rest, &s, &f))
                }
                Method::DELETE => {
                    rest.sessions.remove(&s.id).await;
                    Reply::empty(StatusCode::NO_CONTENT)
                }
                _ => error(StatusCode::FORBIDDEN, "Unknown session resource"),
            }
        }
        _ => error(StatusCode::FORBIDDEN, "Unknown session resource"),
    }
}

/// The session named by the request's `Authorization: Handle sessionId=`.
async fn this(rest: &Rest, req: &Req) -> Option<Arc<HttpSession>> {
    let h = req.headers.get("authorization")?.to_str().ok().and_then(|h| strip_scheme(h, "handle"))?;
    rest.sessions.get(HandleFields::parse(h).get("sessionid")?).await
}
