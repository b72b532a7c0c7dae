//! The registry's HTTP API, route by route as the original answers it. Routing
//! splits the *raw* path on `/` first and only then percent-decodes each segment,
//! because ids carry `%2F`: decoding first would change the segment count.

use bytes::Bytes;
use handled_store::StoreError;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, CONTENT_TYPE, LOCATION};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Map, Value};

use crate::model::{Kind, Search, IDX_NAME, IDX_REPORTER, IDX_USER};
use crate::service::{Error, Found, Registry};
use crate::{BodyRefused, Host};

pub type Resp = Response<Full<Bytes>>;

const MAX_BODY: usize = 1 << 20;

/// A request as the host hands it over: admission control in front of every
/// route but `/live` and the OpenAPI document (health is never throttled); a
/// refused request gets 503 with `Retry-After` at once.
pub async fn respond<H: Host>(reg: &Registry, host: &H, peer: std::net::IpAddr, req: Request<Incoming>) -> Resp {
    match req.uri().path() {
        "/live" => return handle(reg, host, peer, req).await,
        // The registry's own OpenAPI document (its routes live on this port only).
        "/openapi.json" if req.method() == Method::GET => {
            let mut r = Response::new(Full::new(Bytes::from_static(include_bytes!("openapi.json"))));
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            return r;
        }
        _ => {}
    }
    match host.admit().await {
        Ok(_turn) => handle(reg, host, peer, req).await,
        Err(busy) => {
            let body = json!({ "message": format!("Server too busy ({})", busy.reason) });
            let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
            *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            r.headers_mut().insert("retry-after", HeaderValue::from(busy.retry_after_secs));
            r
        }
    }
}

/// One request: the original's `before` filter, then the routes.
async fn handle<H: Host>(reg: &Registry, host: &H, peer: std::net::IpAddr, req: Request<Incoming>) -> Resp {
    if reg.settings.load_balancer_ip.is_some_and(|lb| lb != peer) {
        return text(StatusCode::UNAUTHORIZED, "text/plain", "Unauthorized request");
    }
    let method = req.method().clone();
    let raw_path = req.uri().path().to_owned();
    let params = req.uri().query().map(parse_query).unwrap_or_default();
    let wants_html = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"));
    let body = if method == Method::PUT {
        match host.read_body(req.into_body(), MAX_BODY, peer).await {
            Ok(b) => b,
            Err(BodyRefused::Busy) => return bare(StatusCode::SERVICE_UNAVAILABLE),
            Err(BodyRefused::Unreadable) => return bare(StatusCode::BAD_REQUEST),
        }
    } else {
        Bytes::new()
    };
    // Java's String.split drops trailing empty strings: `/a/b/` routes as `/a/b`.
    let mut raw: Vec<&str> = raw_path.trim_start_matches('/').split('/').collect();
    while raw.last() == Some(&"") {
        raw.pop();
    }
    let segs: Vec<String> = raw.iter().map(|s| decode(s)).collect();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let result = match (&method, s.as_slice()) {
        (&Method::GET, []) => return redirect("/live"),
        (&Method::GET, ["live"]) => return live(reg, wants_html),
        (&Method::GET, ["error"]) => Ok(message(StatusCode::UNAUTHORIZED, "Unauthorized.")),
        (&Method::GET, ["registry", "updated"]) => {
            reg.take_feed().await.map(|m| json_resp(StatusCode::OK, Value::Object(m)))
        }

        (&Method::PUT, ["hyperty", "user", user, id]) => {
            reg.put_hyperty(peer, user, id, &body).await.map(|_| message(StatusCode::OK, "Hyperty created"))
        }
        (&Method::DELETE, ["hyperty", "user", user, id]) => {
            reg.delete_hyperty(user, id).await.map(|_| message(StatusCode::OK, "Hyperty deleted"))
        }
        (&Method::GET, ["hyperty", "user", user]) => {
            reg.by_index(Kind::Hyperty, IDX_USER, user).await.map(|f| hyperties(f, None))
        }
        (&Method::GET, ["hyperty", "user", user, _]) => match Search::from_params(&params) {
            Some(q) => reg.by_index(Kind::Hyperty, IDX_USER, user).await.map(|f| hyperties(f, Some(&q))),
            None => Err(Error::NotFound),
        },
        (&Method::GET, ["hyperty", "url", id]) => reg.load(Kind::Hyperty, id).await.and_then(|s| {
            let s = s.ok_or(Error::NotFound)?;
            let status = if s.is_disconnected() { StatusCode::REQUEST_TIMEOUT } else { StatusCode::OK };
            Ok(json_resp(status, Value::Object(s.obj)))
        }),
        (&Method::PUT, ["hyperty", "url", id]) => reg.touch(Kind::Hyperty, id, &body).await.map(|changed| {
            let msg = if &body[..] == b"{}" { "Keep alive" } else { "Hyperty updated" };
            json_resp(StatusCode::OK, json!({"statusChanged": changed.to_string(), "message": msg}))
        }),
        (&Method::GET, ["hyperty", "guid", guid]) => reg.by_guid(guid).await.map(|f| hyperties(f, None)),
        (&Method::GET, ["hyperty", "email", email]) => reg.by_email(email).await.map(|f| hyperties(f, None)),
        (&Method::GET, ["hyperty", "email", email, _]) => match Search::from_params(&params) {
            Some(q) => reg.by_email(email).await.map(|f| hyperties(f, Some(&q))),
            None => Err(Error::NotFound),
        },

        (&Method::PUT, ["hyperty", "dataobject", url]) => {
            reg.put_data_object(peer, url, &body).await.map(|_| message(StatusCode::OK, "Data object created"))
        }
        (&Method::PUT, ["dataobject", "url", url]) => reg.touch(Kind::DataObject, url, &body).await.map(|_| {
            let msg = if &body[..] == b"{}" { "Keep alive" } else { "data object updated" };
            message(StatusCode::OK, msg)
        }),
        (&Method::GET, ["hyperty", "dataobject", "url", url]) => reg
            .load(Kind::DataObject, url)
            .await
            .and_then(|s| Ok(json_resp(StatusCode::OK, Value::Object(s.ok_or(Error::NotFound)?.obj)))),
        (&Method::GET, ["hyperty", "dataobject", "url", url, _]) => match Search::from_params(&params) {
            Some(q) => reg.load(Kind::DataObject, url).await.map(|s| {
                let found: Found = s.map(|s| (url.to_string(), s)).into_iter().collect();
                data_objects(found, Some(&q))
            }),
            None => Err(Error::NotFound),
        },
        (&Method::GET, ["hyperty", "dataobject", by @ ("name" | "reporter"), key, rest @ ..]) if rest.len() <= 1 => {
            let index = if *by == "name" { IDX_NAME } else { IDX_REPORTER };
            let search = if rest.is_empty() { None } else { Search::from_params(&params) };
            if !rest.is_empty() && search.is_none() {
                Err(Error::NotFound)
            } else {
                reg.by_index(Kind::DataObject, index, key).await.map(|f| data_objects(f, search.as_ref()))
            }
        }
        // Known route prefixes with a segment count the controllers do not handle.
        (_, ["hyperty", ..] | ["dataobject", ..]) if [Method::GET, Method::PUT, Method::DELETE].contains(&method) => {
            Err(Error::NotFound)
        }
        _ => return spark_not_found(),
    };
    match result {
        Ok(r) => r,
        Err(Error::NotFound) => message(StatusCode::NOT_FOUND, "Not Found"),
        Err(Error::BadRequest) => bare(StatusCode::BAD_REQUEST),
        Err(Error::Quota(why)) => message(StatusCode::FORBIDDEN, &why),
        Err(Error::Store(e @ (StoreError::Backend(_) | StoreError::Closed | StoreError::Io(_)))) => {
            tracing::error!("registry store error: {e}");
            message(StatusCode::SERVICE_UNAVAILABLE, "Storage unavailable, try again later")
        }
        Err(Error::Store(e)) => {
            tracing::error!("registry store error: {e}");
            message(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error")
        }
    }
}

/// A map of hyperties: 404 when empty, 408 (same body) when every one is disconnected.
fn hyperties(found: Found, search: Option<&Search>) -> Resp {
    let found: Found = found.into_iter().filter(|(_, s)| search.is_none_or(|q| q.matches(&s.obj))).collect();
    if found.is_empty() {
        return message(StatusCode::NOT_FOUND, "Not Found");
    }
    let all_gone = found.values().all(|s| s.is_disconnected());
    let map: Map<String, Value> = found.into_iter().map(|(id, s)| (id, Value::Object(s.obj))).collect();
    json_resp(if all_gone { StatusCode::REQUEST_TIMEOUT } else { StatusCode::OK }, Value::Object(map))
}

/// A map of data objects: 404 when empty; disconnected ones are still answered 200.
fn data_objects(found: Found, search: Option<&Search>) -> Resp {
    let map: Map<String, Value> = found
        .into_iter()
        .filter(|(_, s)| search.is_none_or(|q| q.matches(&s.obj)))
        .map(|(id, s)| (id, Value::Object(s.obj)))
        .collect();
    if map.is_empty() {
        return message(StatusCode::NOT_FOUND, "Not Found");
    }
    json_resp(StatusCode::OK, Value::Object(map))
}

/// `/live`: the original's health object (all values strings), or its HTML
/// status page for browsers when `DOMAIN_ENV=DEVELOPMENT`.
fn live(reg: &Registry, wants_html: bool) -> Resp {
    let n = reg.hyperties_stored().to_string();
    let storage = reg.settings.storage_type;
    if wants_html && reg.settings.dev_status_page {
        let page = format!(
            "<!DOCTYPE html><html><head><title>Domain Registry</title></head><body><h1>Domain Registry</h1>\
             <table><tr><td>Status</td><td>up</td></tr><tr><td>Storage type</td><td>{storage}</td></tr>\
             <tr><td>Hyperties stored</td><td>{n}</td></tr></table></body></html>"
        );
        return text(StatusCode::OK, "text/html; charset=utf-8", &page);
    }
    json_resp(StatusCode::OK, json!({"status": "up", "Storage_type": storage, "Hyperties_stored": n}))
}

fn json_resp(status: StatusCode, v: Value) -> Resp {
    text(status, "application/json", &v.to_string())
}

fn message(status: StatusCode, m: &str) -> Resp {
    json_resp(status, json!({ "message": m }))
}

fn text(status: StatusCode, content_type: &'static str, body: &str) -> Resp {
    let mut r = Response::new(Full::new(Bytes::from(body.to_owned())));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// `halt(400)`: status only.
fn bare(status: StatusCode) -> Resp {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = status;
    r
}

fn redirect(to: &'static str) -> Resp {
    let mut r = bare(StatusCode::FOUND);
    r.headers_mut().insert(LOCATION, HeaderValue::from_static(to));
    r
}

/// What the original's framework answers for a path no route matches.
fn spark_not_found() -> Resp {
    text(StatusCode::NOT_FOUND, "text/html; charset=utf-8", "<html><body><h2>404 Not found</h2></body></html>")
}

/// `java.net.URLDecoder.decode`: `+` is a space, `%XX` a byte (UTF-8 overall);
/// a malformed escape is kept as it is.
pub fn decode(s: &str) -> String {
    let spaced = s.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced).decode_utf8_lossy().into_owned()
}

/// Query parameters, decoded, in order (a name without `=` has an empty value).
pub fn parse_query(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_decoding_like_java() {
        assert_eq!(decode("hyperty%3A%2F%2Fua.pt%2F428b"), "hyperty://ua.pt/428b");
        assert_eq!(decode("a+b%20c"), "a b c");
        assert_eq!(decode("100%"), "100%");
        assert_eq!(decode("%zz%4"), "%zz%4");
        assert_eq!(decode("%C3%A9"), "é");
    }

    #[test]
    fn query_parsing() {
        assert_eq!(
            parse_query("resources=chat%2Cvoice&dataSchemes=comm&flag"),
            vec![
                ("resources".into(), "chat,voice".into()),
                ("dataSchemes".into(), "comm".into()),
                ("flag".into(), String::new())
            ]
        );
    }
}
