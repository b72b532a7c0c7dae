//! The admin console at `/admin` on the HTTP port: a small hand-written
//! JavaScript front end over the JSON API (`/api/...`, `/hrls/...`,
//! `/metrics`), its files embedded in the binary at build time. This module
//! only serves those files with strict headers; everything the console does
//! goes through the API, whose own checks decide what an identity may do.
//!
//! Served over HTTPS only (credentials count only there, see
//! [`crate::rest::Conn`]); on plain HTTP, unless `allow_plain_http_admin`, a
//! page says to use https on the same port. The session travels in an
//! `Authorization` header set by script, never in a cookie, so a foreign page
//! cannot ride on it (no CSRF by design).

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_TYPE, HOST};
use hyper::{Method, Request, Response, StatusCode};

/// Scripts and styles from this origin only (no inline code, no third
/// parties), API calls to this origin only, never framed.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                       connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'";

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";

/// An embedded file: URL path, content type, bytes.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const INDEX: &[u8] = include_bytes!("assets/index.html");

const ASSETS: &[Asset] = &[
    Asset { path: "/admin", content_type: HTML, body: INDEX },
    Asset { path: "/admin/", content_type: HTML, body: INDEX },
    Asset {
        path: "/admin/console.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("assets/console.css"),
    },
    Asset { path: "/admin/icon.svg", content_type: "image/svg+xml", body: include_bytes!("assets/icon.svg") },
    Asset { path: "/admin/app.js", content_type: JS, body: include_bytes!("assets/app.js") },
    Asset { path: "/admin/api.js", content_type: JS, body: include_bytes!("assets/api.js") },
    Asset { path: "/admin/auth.js", content_type: JS, body: include_bytes!("assets/auth.js") },
    Asset { path: "/admin/keys.js", content_type: JS, body: include_bytes!("assets/keys.js") },
    Asset { path: "/admin/dom.js", content_type: JS, body: include_bytes!("assets/dom.js") },
    Asset { path: "/admin/handles.js", content_type: JS, body: include_bytes!("assets/handles.js") },
    Asset { path: "/admin/record.js", content_type: JS, body: include_bytes!("assets/record.js") },
    Asset { path: "/admin/values.js", content_type: JS, body: include_bytes!("assets/values.js") },
    Asset { path: "/admin/status.js", content_type: JS, body: include_bytes!("assets/status.js") },
];

/// Is this path the console's (`/admin` or below)?
pub fn is_console_path(path: &str) -> bool {
    path == "/admin" || path.starts_with("/admin/")
}

/// Answer a request for `/admin...`. `secure`: it came over TLS.
pub fn serve<B>(req: &Request<B>, secure: bool, allow_plain_http_admin: bool) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = respond(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            Bytes::from_static(b"GET or HEAD only\n"),
        );
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    if !secure && !allow_plain_http_admin {
        return https_please(req);
    }
    let head = req.method() == Method::HEAD;
    match ASSETS.iter().find(|a| a.path == req.uri().path()) {
        Some(a) => respond(StatusCode::OK, a.content_type, Bytes::from_static(if head { b"" } else { a.body })),
        None => {
            respond(StatusCode::NOT_FOUND, "text/plain; charset=utf-8", Bytes::from_static(b"No such console file\n"))
        }
    }
}

/// Plain HTTP: a page pointing to the same address over https.
fn https_please<B>(req: &Request<B>) -> Response<Full<Bytes>> {
    // Only a well-formed host[:port] goes into the link (no markup injection).
    let host = req
        .headers()
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b)));
    let link = match host {
        Some(h) => format!("<p><a href=\"https://{h}/admin/\">https://{h}/admin/</a></p>"),
        None => "<p>Use <code>https://</code> with this server's address and HTTP port.</p>".to_string(),
    };
    let page = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Use HTTPS - handled admin console</title></head><body>\
         <h1>The admin console needs HTTPS</h1>\
         <p>Credentials are accepted over HTTPS only. The same port speaks HTTPS:</p>{link}</body></html>\n"
    );
    respond(StatusCode::FORBIDDEN, HTML, Bytes::from(page))
}

fn respond(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    h.insert("cross-origin-resource-policy", HeaderValue::from_static("same-origin"));
    // The files change with the binary: always revalidate.
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

#[cfg(test)]
mod tests;
