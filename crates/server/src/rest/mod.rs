//! The Handle.Net v9 JSON REST API (§4.5, §4.6) and reverse lookup, served on
//! the HTTP port. HTTP is only translated here: every operation runs through
//! [`crate::ops`] (the same code the native protocol uses) and callers are
//! proven through [`crate::access::verify`]; nothing in this module decides
//! what an identity may do.

mod admin;
mod authn;
mod backup;
pub(crate) mod fastjson;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
mod handles;
mod hrls;
mod http_sessions;
mod openapi;
pub mod params;
mod sessions;

use crate::http_body::BodyReader;
use crate::ops::{OpError, UpstreamFailure};
use crate::web_context::WebContext;
use bytes::Bytes;
use handled_proto::header::ResponseCode;
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use params::Params;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

pub type Body = Full<Bytes>;

/// Largest request body the API reads (a handle record is far smaller).
const MAX_BODY: usize = 4 << 20;
/// Headers the CORS preflight allows (§4.5).
const CORS_ALLOW_HEADERS: &str = "X-Requested-With, Authorization, Origin, Accept, Content-Type";
const CORS_ALLOW_METHODS: &str = "GET, POST, HEAD, PUT, DELETE";
const CORS_EXPOSE: &str = "Location, WWW-Authenticate, Server-Timing, Keep-Alive";
const JSON: &str = "application/json;charset=UTF-8";

/// The connection a request came on (the HTTP transport's).
pub use crate::transport::http::Conn;

/// The REST layer's own state: HTTP sessions and the OpenAPI document.
pub struct Rest {
    pub(crate) ctx: Arc<WebContext>,
    pub(crate) sessions: http_sessions::HttpSessions,
    openapi: Bytes,
    /// Request bodies: time limit (slow senders are cut off) and shared budget.
    bodies: BodyReader,
    /// What a reverse-lookup search may cost.
    search: hrls::SearchLimits,
    /// The running backup (`/api/backup`).
    backups: crate::backup::Backups,
}

/// A parsed request, body read.
pub(crate) struct Req {
    pub method: Method,
    /// Raw (still percent-encoded) path.
    pub path: String,
    pub params: Params,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub conn: Conn,
}

impl Req {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `Content-Type: application/json` (with parameters), as Java's `hasJsonEntity`.
    pub fn has_json_entity(&self) -> bool {
        self.header("content-type").is_some_and(|c| {
            let c = c.trim().to_ascii_lowercase();
            c == "application/json" || c.starts_with("application/json;") || c.starts_with("application/json ")
        })
    }

    pub fn unknown_endpoint(&self) -> String {
        format!("Unknown HTTP API endpoint {} {}", self.method, self.path)
    }
}

/// What a route answers, before rendering (JSONP, pretty, CORS).
pub(crate) struct Reply {
    pub status: StatusCode,
    pub body: Option<Value>,
    /// A body already serialized as compact JSON (hot paths; used unless
    /// `pretty` or `callback` ask for another rendering).
    pub raw: Option<Vec<u8>>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl Reply {
    pub fn json(status: StatusCode, body: Value) -> Reply {
        Reply { status, body: Some(body), raw: None, headers: Vec::new() }
    }

    pub fn empty(status: StatusCode) -> Reply {
        Reply { status, body: None, raw: None, headers: Vec::new() }
    }

    /// `{"responseCode", "message"}`, the API's error shape.
    pub fn error(status: StatusCode, code: ResponseCode, message: impl Into<String>) -> Reply {
        Reply::json(status, json!({ "responseCode": code.0, "message": message.into() }))
    }

    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Reply {
        self.headers.push((name, value));
        self
    }

    fn not_found(req: &Req) -> Reply {
        Reply::error(StatusCode::NOT_FOUND, ResponseCode::PROTOCOL_ERROR, req.unknown_endpoint())
    }

    /// 405 with the endpoint's methods in `Allow` (RFC 9110).
    fn method_not_allowed(req: &Req, allow: &'static str) -> Reply {
        Reply::error(StatusCode::METHOD_NOT_ALLOWED, ResponseCode::PROTOCOL_ERROR, req.unknown_endpoint())
            .header(hyper::header::ALLOW, HeaderValue::from_static(allow))
    }

    fn bad_request(message: impl Into<String>) -> Reply {
        Reply::error(StatusCode::BAD_REQUEST, ResponseCode::PROTOCOL_ERROR, message)
    }
}

/// Where the HTTP port's route table (`crate::web::routes`) sends a request
/// under `/api` or `/hrls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiRoute {
    /// `/api/backup`.
    Backup,
    /// `/api/backup/{id}`: refused (the id goes in a header).
    BackupIdInUrl,
    /// A method the API does not know (501).
    UnknownMethod,
    /// No such endpoint (404).
    NotFound,
    /// OPTIONS: the endpoint's methods.
    Options(&'static str),
    /// A method the endpoint does not take (405 with these in `Allow`).
    NotAllowed(&'static str),
    /// An endpoint; what follows `base` bytes of the path (slashes trimmed) is its argument.
    Call { endpoint: Endpoint, base: usize },
}

/// The JSON API's endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `bare`: the path is `/api/handles` itself.
    Handles {
        bare: bool,
    },
    Prefixes,
    Site,
    Verifications,
    Sessions,
    OpenApi,
    Search,
}

/// Which kind of operation a native response code answers (the status table differs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpKind {
    Resolution,
    Other,
}

/// Why credentials were ignored, for the 403 a plain-HTTP write gets.
pub(crate) const PLAIN_HTTP_HINT: &str = "credentials count only over HTTPS, on this same port \
     (or with allow_plain_http_admin = true in the server's configuration)";

/// HTTP status for a native response code (§4.5 table). `credentials_count`:
/// false on plain HTTP, where "authentication needed" becomes 403.
pub(crate) fn status_of(code: ResponseCode, kind: OpKind, credentials_count: bool) -> StatusCode {
    match code.0 {
        1 => StatusCode::OK,
        200 if kind == OpKind::Resolution => StatusCode::OK,
        302 | 303 => StatusCode::MULTIPLE_CHOICES,
        100 => StatusCode::NOT_FOUND,
        101 | 201 => StatusCode::CONFLICT,
        4 | 102 | 200 | 202 | 301 => StatusCode::BAD_REQUEST,
        5 => StatusCode::NOT_IMPLEMENTED,
        3 | 7 => StatusCode::SERVICE_UNAVAILABLE,
        402 if credentials_count => StatusCode::UNAUTHORIZED,
        400..=404 => StatusCode::FORBIDDEN,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// HTTP status for a failed operation: as its code says ([`status_of`]),
/// but 429 when the client's rate limit refused it (503 would say the server
/// is overloaded, for everyone), and 504 or 502 when the global resolver's
/// upstream did not answer in time or answered unverifiably.
pub(crate) fn error_status(e: &OpError, kind: OpKind, credentials_count: bool) -> StatusCode {
    match e.upstream {
        _ if e.rate_limited => StatusCode::TOO_MANY_REQUESTS,
        Some(UpstreamFailure::NoAnswer) => StatusCode::GATEWAY_TIMEOUT,
        Some(UpstreamFailure::Unverifiable) => StatusCode::BAD_GATEWAY,
        None => status_of(e.code, kind, credentials_count),
    }
}

/// The JSONP `callback=` of a request that carries no credentials. With
/// credentials the answer may hold what only they may read, and JSONP is read
/// by any site that includes it as a script (with the browser's cached Basic
/// credentials): those get plain JSON, which other origins cannot read.
fn jsonp_callback(req: &Req) -> Option<&str> {
    if req.headers.contains_key("authorization") {
        None
    } else {
        req.params.get("callback")
    }
}

/// Java's `scrubCallbackParameter`: anything but identifier characters becomes `_`.
fn scrub_callback(cb: &str) -> String {
    cb.chars()
        .enumerate()
        .map(|(i, c)| {
            let ok =
                c == '_' || c == '$' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()) || c as u32 >= 0xA0;
            if ok {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Rest {
    pub fn new(ctx: Arc<WebContext>, bodies: BodyReader) -> Rest {
        let ttl = Duration::from_secs(ctx.max_session_secs.max(1));
        // What sessions learn is shared through the store only when nodes share one.
        let learned: Arc<dyn handled_store::Store> = if ctx.admin().capabilities().shared {
            ctx.store_handle()
        } else {
            Arc::new(handled_store::MemoryStore::new())
        };
        let sessions = http_sessions::HttpSessions::new(ctx.key.pkcs8(), ttl, learned);
        let search = hrls::SearchLimits::from_config(&ctx.reverse_lookup);
        Rest { sessions, openapi: openapi::document(), ctx, bodies, search, backups: Default::default() }
    }

    /// Does this request's connection let credentials count (§4.6)?
    pub(crate) fn credentials_count(&self, req: &Req) -> bool {
        req.conn.secure || self.ctx.live().allow_plain_http_admin
    }

    /// Answer one `/api/...` or `/hrls/...` request, which the port's route
    /// table sent to `route`.
    pub async fn handle(&self, conn: Conn, req: Request<Incoming>, route: ApiRoute) -> Response<Body> {
        let (parts, body) = req.into_parts();
        // Reading a body costs a timer; GETs normally have none.
        let body = if body.is_end_stream() {
            Bytes::new()
        } else {
            match self.bodies.read(body, MAX_BODY, conn.peer.ip()).await {
                Ok(b) => b,
                Err(e) => return plain_error(e.status(), &e.message()),
            }
        };
        let mut req = Req {
            params: Params::from_query(parts.uri.query()),
            path: parts.uri.path().to_string(),
            method: parts.method,
            headers: parts.headers,
            body,
            conn,
        };
        // POST-as-GET (§4.5): a JSON object body replaces the parameters, all of
        // them (pretty, callback too), as Java's JsonParameterServletReq does.
        if req.method == Method::POST && req.path.starts_with("/api/handles") && req.has_json_entity() {
            if let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(&req.body) {
                req.params = Params::from_json_object(&o);
            }
        }
        let reply = match route {
            ApiRoute::Backup => return backup::route(self, &req).await,
            ApiRoute::BackupIdInUrl => backup::id_in_url(),
            ApiRoute::UnknownMethod => Reply::error(
                StatusCode::NOT_IMPLEMENTED,
                ResponseCode::PROTOCOL_ERROR,
                format!("Unknown method {}", req.method),
            ),
            ApiRoute::NotFound => Reply::not_found(&req),
            ApiRoute::Options(allow) => {
                Reply::empty(StatusCode::OK).header(hyper::header::ALLOW, HeaderValue::from_static(allow))
            }
            ApiRoute::NotAllowed(allow) => Reply::method_not_allowed(&req, allow),
            ApiRoute::Call { endpoint, base } => self.call(&req, endpoint, base).await,
        };
        render(&req, reply)
    }

    /// Run an endpoint; its argument is what follows the first `base` bytes of the path.
    async fn call(&self, req: &Req, endpoint: Endpoint, base: usize) -> Reply {
        let tail = || req.path[base..].trim_start_matches('/').to_string();
        match endpoint {
            Endpoint::Handles { bare } => handles::route(self, req, &tail(), bare).await,
            Endpoint::Prefixes => admin::prefixes(self, req, &tail()).await,
            Endpoint::Site => admin::site(self, req),
            Endpoint::Verifications => admin::verification(self, req, &tail()).await,
            Endpoint::Sessions => sessions::route(self, req, &tail()).await,
            Endpoint::OpenApi => openapi::reply(&self.openapi),
            Endpoint::Search => hrls::search(self, req, &tail()).await,
        }
    }

    /// The JSON for a failed handle operation: `responseCode`, `message`
    /// (unless empty; Java sends none with 100), `handle`; 401s get challenges.
    pub(crate) fn op_error(&self, req: &Req, e: &OpError, handle: Option<&[u8]>, kind: OpKind) -> Reply {
        let credentials_count = self.credentials_count(req);
        let status = error_status(e, kind, credentials_count);
        let mut body = error_json(e, handle, kind);
        if e.code == ResponseCode::AUTHENTICATION_NEEDED && !credentials_count && !e.message.is_empty() {
            body["message"] = format!("{}: {PLAIN_HTTP_HINT}", e.message).into();
        }
        let reply = Reply::json(status, body);
        if status == StatusCode::UNAUTHORIZED {
            self.challenge(req, reply)
        } else {
            reply
        }
    }
}

/// The API's JSON for a failed operation (also the web proxy's `action=api`).
pub(crate) fn error_json(e: &OpError, handle: Option<&[u8]>, kind: OpKind) -> Value {
    let mut o = Map::new();
    o.insert("responseCode".into(), e.code.0.into());
    if !e.message.is_empty() && e.code != ResponseCode::HANDLE_NOT_FOUND {
        o.insert("message".into(), e.message.clone().into());
    }
    if e.code == ResponseCode::VALUES_NOT_FOUND && kind == OpKind::Resolution {
        o.remove("message");
        o.insert("values".into(), Value::Array(Vec::new()));
    }
    if let Some(h) = handle {
        o.insert("handle".into(), String::from_utf8_lossy(h).into_owned().into());
    }
    Value::Object(o)
}

fn plain_error(status: StatusCode, message: &str) -> Response<Body> {
    let body = json!({ "responseCode": ResponseCode::PROTOCOL_ERROR.0, "message": message });
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
    r
}

/// JSON (or JSONP with `callback`), indented with `pretty`, plus CORS headers.
fn render(req: &Req, reply: Reply) -> Response<Body> {
    let mut builder = Response::builder().status(reply.status);
    let headers = builder.headers_mut().expect("fresh builder");
    for (k, v) in reply.headers {
        headers.append(k, v);
    }
    if req.headers.contains_key("origin") {
        headers.insert("access-control-allow-origin", HeaderValue::from_static("*"));
        headers.insert("access-control-expose-headers", HeaderValue::from_static(CORS_EXPOSE));
        if req.method == Method::OPTIONS {
            headers.insert("access-control-allow-methods", HeaderValue::from_static(CORS_ALLOW_METHODS));
            headers.insert("access-control-allow-headers", HeaderValue::from_static(CORS_ALLOW_HEADERS));
        }
    }
    let plain = !req.params.flag("pretty") && jsonp_callback(req).is_none();
    let body = match (reply.raw, reply.body) {
        (Some(raw), _) if plain => {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
            Bytes::from(raw)
        }
        (Some(raw), _) => render_value(req, headers, serde_json::from_slice(&raw).unwrap_or(Value::Null)),
        (None, None) => Bytes::new(),
        (None, Some(v)) => render_value(req, headers, v),
    };
    builder
        .body(Full::new(body))
        .unwrap_or_else(|_| plain_error(StatusCode::INTERNAL_SERVER_ERROR, "response build failed"))
}

fn render_value(req: &Req, headers: &mut HeaderMap, v: Value) -> Bytes {
    let text = if req.params.flag("pretty") { serde_json::to_vec_pretty(&v) } else { serde_json::to_vec(&v) }
        .unwrap_or_else(|_| b"{}".to_vec());
    match jsonp_callback(req) {
        Some(cb) => {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/javascript;charset=UTF-8"));
            Bytes::from([scrub_callback(cb).as_bytes(), b"(", &text, b");"].concat())
        }
        None => {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
            Bytes::from(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_table() {
        let s = |c: u32, k| status_of(ResponseCode(c), k, true).as_u16();
        assert_eq!(s(1, OpKind::Other), 200);
        assert_eq!(s(200, OpKind::Resolution), 200);
        assert_eq!(s(200, OpKind::Other), 400);
        assert_eq!((s(302, OpKind::Other), s(303, OpKind::Other)), (300, 300));
        assert_eq!(s(100, OpKind::Other), 404);
        assert_eq!((s(101, OpKind::Other), s(201, OpKind::Other)), (409, 409));
        for c in [4, 102, 202, 301] {
            assert_eq!(s(c, OpKind::Other), 400, "{c}");
        }
        assert_eq!(s(5, OpKind::Other), 501);
        assert_eq!((s(3, OpKind::Other), s(7, OpKind::Other)), (503, 503));
        assert_eq!(s(402, OpKind::Other), 401);
        assert_eq!(status_of(ResponseCode(402), OpKind::Other, false).as_u16(), 403);
        for c in [400, 401, 403, 404] {
            assert_eq!(s(c, OpKind::Other), 403, "{c}");
        }
        assert_eq!((s(2, OpKind::Other), s(406, OpKind::Other), s(505, OpKind::Other)), (500, 500, 500));
    }

    #[test]
    fn callback_scrubbing() {
        assert_eq!(scrub_callback("cb_1$"), "cb_1$");
        assert_eq!(scrub_callback("1a<script>"), "_a_script_");
    }
}
