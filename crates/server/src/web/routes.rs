//! The HTTP port's route table: every request is routed here once, from its
//! method, path (and, for the native tunnel, content type), to the handler
//! that answers it. Nothing downstream routes by path again.

use crate::proxy::{self, Page};
use crate::rest::{ApiRoute, Endpoint};
use hyper::header::{HeaderMap, CONTENT_TYPE};
use hyper::Method;

pub const HDL_MESSAGE: &str = "application/x-hdl-message";

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// A native message tunnelled over HTTP (§4.3): POST
    /// `application/x-hdl-message`, any path.
    Tunnel,
    /// `GET /healthz`, `/readyz`, `/metrics`: answered before admission.
    Health,
    Ready,
    Metrics,
    /// The JSON API and reverse lookup (`/api/...`, `/hrls/...`).
    Api(ApiRoute),
    /// The admin console (`/admin...`).
    Console,
    /// The web handle proxy (every other path, with `enable_proxy`).
    Proxy(Page),
    /// Without the proxy, `GET /PREFIX/SUFFIX` redirects to the JSON API.
    ToApi,
    /// Anything else (404).
    NotFound,
}

impl Route {
    /// Requests behind admission control, and the service their metrics name.
    pub fn service(self, enable_proxy: bool) -> Option<&'static str> {
        match self {
            Route::Tunnel | Route::Health | Route::Ready | Route::Metrics => None,
            Route::Api(_) => Some("api"),
            _ if enable_proxy => Some("proxy"),
            _ => Some("api"),
        }
    }
}

fn is_hdl(headers: &HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains(HDL_MESSAGE))
}

/// `path` is `base` or below it.
fn under(path: &str, base: &str) -> bool {
    path == base || path.strip_prefix(base).is_some_and(|r| r.starts_with('/'))
}

/// The table.
pub fn route(method: &Method, path: &str, headers: &HeaderMap, enable_proxy: bool) -> Route {
    if method == Method::POST && is_hdl(headers) {
        return Route::Tunnel;
    }
    if method == Method::GET {
        match path {
            "/healthz" => return Route::Health,
            "/readyz" => return Route::Ready,
            "/metrics" => return Route::Metrics,
            _ => {}
        }
    }
    if under(path, "/api") || under(path, "/hrls") {
        Route::Api(api(method, path))
    } else if crate::console::is_console_path(path) {
        Route::Console
    } else if enable_proxy {
        Route::Proxy(proxy::page(method, path))
    } else if method == Method::GET && path.len() > 1 && path[1..].contains('/') {
        Route::ToApi
    } else {
        Route::NotFound
    }
}

/// The JSON API's part of the table: each endpoint and the methods it takes
/// (OPTIONS answers them; others get 405).
fn api(method: &Method, path: &str) -> ApiRoute {
    if let Some(tail) = path.strip_prefix("/api/backup") {
        if tail.is_empty() || tail.starts_with('/') {
            // Its methods are its own (405 from the backup handler).
            return if tail.trim_start_matches('/').is_empty() { ApiRoute::Backup } else { ApiRoute::BackupIdInUrl };
        }
    }
    let known = [Method::GET, Method::HEAD, Method::POST, Method::PUT, Method::DELETE, Method::OPTIONS];
    if !known.contains(method) {
        return ApiRoute::UnknownMethod;
    }
    let below = |base: &str| under(path, base);
    let (endpoint, allow, base) = if path == "/api/handles" || path == "/api/handles/" {
        (Endpoint::Handles { bare: path == "/api/handles" }, "GET, HEAD, POST, OPTIONS", "/api/handles")
    } else if below("/api/handles") {
        (Endpoint::Handles { bare: false }, "GET, HEAD, POST, PUT, DELETE, OPTIONS", "/api/handles")
    } else if path == "/api/prefixes" || path == "/api/prefixes/" {
        (Endpoint::Prefixes, "GET, HEAD, POST, DELETE, OPTIONS", "/api/prefixes")
    } else if below("/api/prefixes") {
        (Endpoint::Prefixes, "POST, DELETE, OPTIONS", "/api/prefixes")
    } else if path == "/api/site" {
        (Endpoint::Site, "GET, HEAD, POST, OPTIONS", "/api/site")
    } else if below("/api/verifications") {
        (Endpoint::Verifications, "GET, HEAD, POST, OPTIONS", "/api/verifications")
    } else if path == "/api/sessions" || path == "/api/sessions/" {
        (Endpoint::Sessions, "POST, OPTIONS", "/api/sessions")
    } else if below("/api/sessions") {
        (Endpoint::Sessions, "GET, HEAD, PUT, POST, DELETE, OPTIONS", "/api/sessions")
    } else if path == "/api/openapi.json" {
        (Endpoint::OpenApi, "GET, HEAD, OPTIONS", "/api/openapi.json")
    } else if below("/hrls/handles") {
        (Endpoint::Search, "GET, HEAD, OPTIONS", "/hrls/handles")
    } else {
        return ApiRoute::NotFound;
    };
    if method == Method::OPTIONS {
        ApiRoute::Options(allow)
    } else if !allow.split(", ").any(|m| m == method.as_str()) {
        ApiRoute::NotAllowed(allow)
    } else {
        ApiRoute::Call { endpoint, base: base.len() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(method: Method, path: &str) -> Route {
        route(&method, path, &HeaderMap::new(), true)
    }

    #[test]
    fn table() {
        let mut hdl = HeaderMap::new();
        hdl.insert(CONTENT_TYPE, HDL_MESSAGE.parse().unwrap());
        assert_eq!(route(&Method::POST, "/api/handles/X/Y", &hdl, true), Route::Tunnel);
        assert_eq!(route(&Method::GET, "/", &hdl, true), Route::Proxy(Page::Handle));
        assert_eq!(at(Method::GET, "/healthz"), Route::Health);
        assert_eq!(at(Method::HEAD, "/healthz"), Route::Proxy(Page::Handle));
        assert_eq!(at(Method::GET, "/readyz"), Route::Ready);
        assert_eq!(at(Method::GET, "/metrics"), Route::Metrics);
        let handles = Endpoint::Handles { bare: false };
        let base = "/api/handles".len();
        assert_eq!(at(Method::GET, "/api/handles/X/Y"), Route::Api(ApiRoute::Call { endpoint: handles, base }));
        assert_eq!(
            at(Method::GET, "/api/handles"),
            Route::Api(ApiRoute::Call { endpoint: Endpoint::Handles { bare: true }, base })
        );
        assert_eq!(at(Method::PUT, "/api/handles"), Route::Api(ApiRoute::NotAllowed("GET, HEAD, POST, OPTIONS")));
        assert_eq!(at(Method::OPTIONS, "/api/sessions"), Route::Api(ApiRoute::Options("POST, OPTIONS")));
        assert_eq!(at(Method::PATCH, "/api/handles/X/Y"), Route::Api(ApiRoute::UnknownMethod));
        assert_eq!(at(Method::PATCH, "/api/backup"), Route::Api(ApiRoute::Backup));
        assert_eq!(at(Method::GET, "/api/backup/abc"), Route::Api(ApiRoute::BackupIdInUrl));
        assert_eq!(at(Method::GET, "/api/backupx"), Route::Api(ApiRoute::NotFound));
        assert_eq!(at(Method::GET, "/api"), Route::Api(ApiRoute::NotFound));
        assert_eq!(
            at(Method::GET, "/hrls/handles/P"),
            Route::Api(ApiRoute::Call { endpoint: Endpoint::Search, base: "/hrls/handles".len() })
        );
        assert_eq!(at(Method::GET, "/apix"), Route::Proxy(Page::Handle));
        assert_eq!(at(Method::GET, "/admin/app.js"), Route::Console);
        assert_eq!(at(Method::GET, "/favicon.ico"), Route::Proxy(Page::Favicon));
        assert_eq!(at(Method::DELETE, "/favicon.ico"), Route::Proxy(Page::NotAllowed));
        assert_eq!(at(Method::OPTIONS, "/X/Y"), Route::Proxy(Page::Options));
        let no_proxy = |method: Method, path: &str| route(&method, path, &HeaderMap::new(), false);
        assert_eq!(no_proxy(Method::GET, "/X/Y"), Route::ToApi);
        assert_eq!(no_proxy(Method::GET, "/X"), Route::NotFound);
        assert_eq!(no_proxy(Method::POST, "/X/Y"), Route::NotFound);
        assert_eq!(Route::Console.service(true), Some("proxy"));
        assert_eq!(Route::Console.service(false), Some("api"));
        assert_eq!(Route::Tunnel.service(true), None);
    }
}
