//! The web handle proxy on the HTTP port (what hdl.handle.net and doi.org do;
//! Handle.Net's `HDLProxy`, web-proxy.md): `GET /{handle}` redirects to the
//! handle's URL or 10320/loc choice, follows HS_ALIAS with a 301, shows the
//! record as HTML (`noredirect`), its locations as XML (`action=showurls`) or
//! JSON (`action=api`, or `Accept: application/json`). Resolution runs through
//! [`crate::ops::resolve`] as an anonymous caller (public values only), so a
//! redirect costs what a JSON GET costs.

mod escape;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
mod locations;
mod pages;
mod request;
mod response;

use crate::auth::Caller;
use crate::ops::{self, OpError, Resolve};
use crate::rest::params::Params;
use crate::rest::{error_json, error_status, fastjson, Conn, OpKind};
use crate::web_context::WebContext;
use bytes::Bytes;
use handled_proto::header::ResponseCode;
use handled_proto::value::{types, HandleValue};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{
    HeaderMap, HeaderValue, ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_EXPOSE_HEADERS, ALLOW, HOST, ORIGIN,
};
use hyper::{Method, Request, Response, StatusCode, Version};
use locations::{first_url, Locations, Selection};
use request::{Action, ProxyRequest};
use response::{expiry, expiry_of, extra_headers, unix_now, Answer};
use std::borrow::Cow;
use std::time::Duration;

/// Aliases followed before giving up (the original's `MAX_ALIASES`).
const MAX_ALIASES: usize = 20;
/// Largest query-form POST body read.
const MAX_FORM: usize = 16 << 10;
const JSON: &str = "application/json;charset=UTF-8";
const HELP_URL: &str = "http://www.handle.net/proxy.html";
const FAVICON: &[u8] = include_bytes!("favicon.ico");
const ROBOTS: &str = "User-agent: *\nCrawl-delay: 1\nRequest-rate: 1/1\n";
const METHODS: &str = "GET, HEAD, POST, OPTIONS";

/// What the HTTP port's route table (`crate::web::routes`) found a proxy request to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    /// OPTIONS: the methods.
    Options,
    /// Neither GET, HEAD, POST nor OPTIONS.
    NotAllowed,
    Favicon,
    Robots,
    /// `/help.html`: a redirect to Handle.Net's page.
    Help,
    /// The query form (no handle) or a handle's answer.
    Handle,
}

/// The proxy's page for `method` and `path` (its part of the port's route table).
pub fn page(method: &Method, path: &str) -> Page {
    match *method {
        Method::GET | Method::HEAD | Method::POST => {}
        Method::OPTIONS => return Page::Options,
        _ => return Page::NotAllowed,
    }
    match path {
        "/favicon.ico" => Page::Favicon,
        "/robots.txt" => Page::Robots,
        "/help.html" => Page::Help,
        _ => Page::Handle,
    }
}

/// Answer one proxy request, which the port's route table found to be for
/// `page`. `body_timeout` bounds reading a POSTed query form.
/// Cross-origin callers may read every answer (the original's CORS filter).
pub async fn serve(
    ctx: &WebContext,
    conn: Conn,
    req: Request<Incoming>,
    page: Page,
    body_timeout: Duration,
) -> Response<Full<Bytes>> {
    let cross_origin = req.headers().contains_key(ORIGIN);
    let mut response = answer_request(ctx, conn, req, page, body_timeout).await;
    if cross_origin {
        let h = response.headers_mut();
        h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        h.insert(ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("Location, Expires, Link, Server-Timing"));
    }
    response
}

async fn answer_request(
    ctx: &WebContext,
    conn: Conn,
    req: Request<Incoming>,
    page: Page,
    body_timeout: Duration,
) -> Response<Full<Bytes>> {
    let now = unix_now();
    let plain = |status, content_type: &'static str, body: Bytes| {
        Answer { status, content_type, body, headers: Vec::new(), expires: None }.into_response(now)
    };
    let not_allowed = Bytes::from_static(b"Method not allowed\n");
    let with_allow = |mut r: Response<Full<Bytes>>| {
        r.headers_mut().insert(ALLOW, HeaderValue::from_static(METHODS));
        r
    };
    match page {
        Page::Options => return with_allow(plain(StatusCode::OK, "text/plain", Bytes::new())),
        Page::NotAllowed => return with_allow(plain(StatusCode::METHOD_NOT_ALLOWED, "text/plain", not_allowed)),
        Page::Favicon => return plain(StatusCode::OK, "image/x-icon", Bytes::from_static(FAVICON)),
        Page::Robots => return plain(StatusCode::OK, "text/plain", Bytes::from_static(ROBOTS.as_bytes())),
        Page::Help => {
            return Answer::redirect(HELP_URL, 302, false, false, None).map_or_else(
                || plain(StatusCode::INTERNAL_SERVER_ERROR, "text/plain", Bytes::new()),
                |a| Answer { body: Bytes::new(), ..a }.into_response(now),
            )
        }
        Page::Handle => {}
    }
    let (parts, body) = req.into_parts();
    let form = if parts.method == Method::POST {
        match tokio::time::timeout(body_timeout, Limited::new(body, MAX_FORM).collect()).await {
            Ok(Ok(b)) => Params::from_query(Some(&String::from_utf8_lossy(&b.to_bytes()))),
            _ => return plain(StatusCode::BAD_REQUEST, "text/plain", Bytes::from("Cannot read the form\n")),
        }
    } else {
        Params::default()
    };
    let path = parts.uri.path().strip_prefix('/').unwrap_or("");
    let req = ProxyRequest::new(path, parts.uri.query(), form, &parts.headers, conn.peer.ip());
    let answer = if req.handle.is_empty() {
        Answer::page(StatusCode::OK, pages::query_page())
    } else {
        let base = || base_url(&parts.headers, conn.secure);
        answer(ctx, &req, base, parts.version == Version::HTTP_10, now).await
    };
    answer.into_response(now)
}

/// `http(s)://host` from a well-formed `Host` header, else "" (root-relative URLs).
fn base_url(headers: &HeaderMap, secure: bool) -> String {
    let host = headers.get(HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    let ok = !host.is_empty() && host.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b));
    match (ok, secure) {
        (false, _) => String::new(),
        (true, true) => format!("https://{host}"),
        (true, false) => format!("http://{host}"),
    }
}

/// The handle's public values (the whole record: filters apply afterwards, so
/// aliases and 10320/loc are seen whatever the filter).
/// A handle homed elsewhere is resolved for `client` when `[resolver]` is on.
async fn lookup(ctx: &WebContext, handle: &str, client: std::net::IpAddr) -> Result<Vec<HandleValue>, OpError> {
    let recurse = Some(crate::ops::Recurse { client, native: false });
    let resolve = Resolve { handle: handle.as_bytes().to_vec(), public_only: true, recurse, ..Resolve::default() };
    ops::resolve(&ctx.chain, &Caller::Anonymous, &resolve).await
}

/// `base`: this server's `scheme://host` (only aliases need it).
async fn answer(ctx: &WebContext, req: &ProxyRequest, base: impl FnOnce() -> String, http10: bool, now: i64) -> Answer {
    let mut values = match lookup(ctx, &req.handle, req.client_ip).await {
        Ok(v) => v,
        Err(e) if req.action == Action::Api || req.wants_json => return api_error(&e, &req.handle),
        Err(e) => return failure(&e, &req.handle),
    };
    let wants_record = req.action == Action::Redirect && req.wants_json && !offers_json(&values);
    if req.action == Action::Api || wants_record {
        return api(&req.handle, &values, req);
    }
    let mut handle = Cow::Borrowed(req.handle.as_str());
    let mut alias_expiry: Option<i64> = None;
    let mut hops = 0;
    let alias_of = |values: &[HandleValue]| values.iter().position(|v| v.is_type(types::HS_ALIAS));
    while let Some(at) = alias_of(&values).filter(|_| req.follow_aliases) {
        let alias = &values[at];
        hops += 1;
        if hops > MAX_ALIASES {
            return Answer::page(StatusCode::NOT_FOUND, pages::error_page("Alias chain too long", &req.handle));
        }
        let at = expiry_of(alias, now);
        alias_expiry = Some(alias_expiry.map_or(at, |e| e.min(at)));
        handle = Cow::Owned(String::from_utf8_lossy(&alias.data).trim().to_string());
        values = match lookup(ctx, &handle, req.client_ip).await {
            Ok(v) => v,
            Err(e) => return failure(&e, &req.handle),
        };
    }
    if hops > 0 && req.action == Action::Redirect {
        let url = base() + &pages::proxy_path(&handle, req.query.as_deref());
        return Answer::redirect(&url, 301, http10, req.redirection_headers, alias_expiry)
            .map(|a| Answer { body: Bytes::new(), ..a })
            .unwrap_or_else(|| failure(&OpError::new(ResponseCode::ERROR, ""), &req.handle));
    }
    let selected = filtered(&values, req);
    if selected.is_empty() {
        return Answer::page(StatusCode::OK, pages::no_values_page(&handle));
    }
    match req.action {
        Action::ShowValues | Action::Api => {
            Answer::page(StatusCode::OK, pages::values_page(&handle, &selected, &resolves_for(ctx, req.client_ip)))
        }
        Action::ShowUrls => Answer {
            status: StatusCode::OK,
            content_type: "text/xml;charset=UTF-8",
            body: Bytes::from(Locations::listing(&selected).to_xml()),
            headers: Vec::new(),
            expires: None,
        },
        Action::Redirect => redirect(req, &handle, &selected, http10, now, &resolves_for(ctx, req.client_ip)),
    }
}

/// The values the `index`/`type` filters select (no copy without filters: the common case).
fn filtered<'a>(values: &'a [HandleValue], req: &ProxyRequest) -> Cow<'a, [HandleValue]> {
    if req.indexes.is_empty() && req.types.is_empty() {
        return Cow::Borrowed(values);
    }
    Cow::Owned(ops::select(values, &req.indexes, &req.types).into_iter().cloned().collect())
}

/// Whether this proxy's page of handle `h` resolves for `client`: its prefix
/// is homed here, or the global resolver is on for that client.
fn resolves_for(ctx: &WebContext, client: std::net::IpAddr) -> impl Fn(&str) -> bool + '_ {
    let resolver = ctx.recursion.current().is_some_and(|offer| offer.allows(client));
    move |h: &str| resolver || ctx.is_homed_now(h.as_bytes())
}

/// Where the values send the client: 10320/loc's choice, else the first URL;
/// neither: the values page.
fn redirect(
    req: &ProxyRequest,
    handle: &str,
    values: &[HandleValue],
    http10: bool,
    now: i64,
    resolves: &dyn Fn(&str) -> bool,
) -> Answer {
    let locations = Locations::from_values(values);
    let chosen = locations.as_ref().and_then(|l| {
        let ctx = Selection { locatt: &req.locatt, ip: req.client_ip, country: req.country.as_deref() };
        l.choose(&ctx, rand::random::<f64>()).and_then(|loc| Some((loc.target(handle)?, loc.status())))
    });
    let target = chosen.map(|(url, status)| (Cow::Owned(url), status));
    let target = target.or_else(|| first_url(values).map(|v| (String::from_utf8_lossy(&v.data), 302)));
    // Only web addresses: a `javascript:` or `data:` target would run in the
    // browser of whoever followed a link to this proxy.
    let Some((mut url, status)) = target.filter(|(url, _)| is_web_url(url)) else {
        return Answer::page(StatusCode::OK, pages::values_page(handle, values, resolves));
    };
    if !req.urlappend.is_empty() {
        let appended = format!("{url}{}", req.urlappend);
        // `urlappend` extends the path, query or fragment, never the host
        // (`https://a.example` + `@evil.example/` would be an open redirect).
        // Compared as sent: encoding turns a `\\` that ends the host into `%5C`.
        if authority(&escape::iri_to_uri(&appended)) == authority(&escape::iri_to_uri(&url)) {
            url = Cow::Owned(appended);
        }
    }
    match Answer::redirect(&url, status, http10, req.redirection_headers, expiry(values, now)) {
        Some(mut a) => {
            a.headers.extend(extra_headers(values));
            a
        }
        None => Answer::page(StatusCode::OK, pages::values_page(handle, values, resolves)),
    }
}

/// `http://` or `https://` (any case), with a host.
fn is_web_url(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    (lower.starts_with("http://") || lower.starts_with("https://")) && !authority(url).is_empty()
}

/// The authority of an absolute URL (`user@host:port`), as a browser reads
/// it: it ends at the first `/`, `\\`, `?` or `#` after `scheme://`.
fn authority(url: &str) -> &str {
    let Some((_, rest)) = url.split_once("://") else { return "" };
    let end = rest.find(['/', '\\', '?', '#']).unwrap_or(rest.len());
    &rest[..end]
}

/// Does a 10320/loc location serve JSON itself (then `Accept: application/json` is content negotiation)?
fn offers_json(values: &[HandleValue]) -> bool {
    Locations::from_values(values).is_some_and(|l| l.offers("application/json"))
}

/// `action=api`: the JSON API's answer for the handle (filters as there; no aliases followed).
fn api(handle: &str, values: &[HandleValue], req: &ProxyRequest) -> Answer {
    let selected = filtered(values, req);
    if selected.is_empty() {
        return api_error(&OpError::new(ResponseCode::VALUES_NOT_FOUND, ""), handle);
    }
    let body = fastjson::resolution_body(handle.as_bytes(), &selected);
    Answer { status: StatusCode::OK, content_type: JSON, body: Bytes::from(body), headers: Vec::new(), expires: None }
}

fn api_error(e: &OpError, handle: &str) -> Answer {
    let status = error_status(e, OpKind::Resolution, false);
    let body = error_json(e, Some(handle.as_bytes()), OpKind::Resolution).to_string();
    Answer { status, content_type: JSON, body: Bytes::from(body), headers: Vec::new(), expires: None }
}

/// A failed resolution as the original's error pages: its title and the API's status.
fn failure(e: &OpError, handle: &str) -> Answer {
    if e.code == ResponseCode::VALUES_NOT_FOUND {
        return Answer::page(StatusCode::OK, pages::no_values_page(handle));
    }
    let title = if e.code == ResponseCode::HANDLE_NOT_FOUND { "Not Found" } else { "Resolution Error" };
    Answer::page(error_status(e, OpKind::Resolution, false), pages::error_page(title, handle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_only_from_sane_hosts() {
        let h = |v: &'static str| {
            let mut m = HeaderMap::new();
            m.insert(HOST, HeaderValue::from_static(v));
            m
        };
        assert_eq!(base_url(&h("hdl.example:8000"), false), "http://hdl.example:8000");
        assert_eq!(base_url(&h("[::1]:8000"), true), "https://[::1]:8000");
        assert_eq!(base_url(&h("evil.example/\"x"), false), "");
        assert_eq!(base_url(&HeaderMap::new(), false), "");
    }

    #[test]
    fn only_web_urls_and_their_hosts() {
        for good in ["https://a.example", "HTTP://a.example/x", "http://a:8/?q"] {
            assert!(is_web_url(good), "{good}");
        }
        for bad in ["javascript:alert(1)", "data:text/html,x", "https://", "ftp://a.example/", "/relative", "http"] {
            assert!(!is_web_url(bad), "{bad}");
        }
        assert_eq!(authority("https://u@a.example:8/p?q#f"), "u@a.example:8");
        assert_eq!(authority("https://a.example\\@evil"), "a.example");
        assert_eq!(authority("https://a.example#@evil"), "a.example");
    }
}
