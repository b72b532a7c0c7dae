use super::*;

fn get(path: &str, secure: bool, allow_plain: bool) -> Response<Full<Bytes>> {
    let req = Request::get(path).header("host", "127.0.0.1:8000").body(()).unwrap();
    serve(&req, secure, allow_plain)
}

fn header<'a>(r: &'a Response<Full<Bytes>>, name: &str) -> &'a str {
    r.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

fn body(r: Response<Full<Bytes>>) -> String {
    use http_body_util::BodyExt;
    // A `Full` body is ready at once and cannot fail.
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let bytes = rt.block_on(r.into_body().collect()).unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[test]
fn console_assets_have_their_content_types() {
    for (path, ty) in [
        ("/admin", "text/html; charset=utf-8"),
        ("/admin/", "text/html; charset=utf-8"),
        ("/admin/app.js", "text/javascript; charset=utf-8"),
        ("/admin/auth.js", "text/javascript; charset=utf-8"),
        ("/admin/console.css", "text/css; charset=utf-8"),
        ("/admin/icon.svg", "image/svg+xml"),
    ] {
        let r = get(path, true, false);
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_eq!(header(&r, "content-type"), ty, "{path}");
        assert_eq!(header(&r, "x-content-type-options"), "nosniff", "{path}");
    }
    assert_eq!(get("/admin/nope.js", true, false).status(), StatusCode::NOT_FOUND);
}

#[test]
fn console_every_module_the_page_loads_is_served() {
    // Every `/admin/...` a file names (script src, imports, stylesheet) is an asset.
    let mut named = std::collections::HashSet::new();
    for a in ASSETS {
        let text = std::str::from_utf8(a.body).unwrap_or("");
        for piece in text.split(['"', '\'']).filter(|p| p.starts_with("/admin/") || p.starts_with("./")) {
            let path = piece.strip_prefix("./").map(|p| format!("/admin/{p}")).unwrap_or(piece.to_string());
            if path.ends_with(".js") || path.ends_with(".css") || path.ends_with(".svg") {
                assert_eq!(get(&path, true, false).status(), StatusCode::OK, "{} names {path}", a.path);
                named.insert(path);
            }
        }
    }
    // ...and every asset but the page itself is named somewhere (none is dead, the scan works).
    for a in ASSETS.iter().filter(|a| a.content_type != HTML) {
        assert!(named.contains(a.path), "{} is served but nothing loads it", a.path);
    }
}

#[test]
fn console_csp_forbids_inline_script_framing_and_third_parties() {
    let r = get("/admin/", true, false);
    let csp = header(&r, "content-security-policy");
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval") && !csp.contains("http"), "{csp}");
    assert_eq!(header(&r, "x-frame-options"), "DENY");
    let html = body(r);
    // No inline scripts or handlers (the CSP would block them anyway).
    assert!(!html.contains("<script>") && !html.contains(" onclick=") && !html.contains("javascript:"));
    assert!(!html.contains("//cdn") && !html.contains("https://"), "no third-party resources");
}

#[test]
fn console_no_asset_uses_inline_handlers_or_eval() {
    for a in ASSETS {
        let text = std::str::from_utf8(a.body).unwrap();
        for bad in ["eval(", "new Function", ".innerHTML", "document.write", "localStorage", "document.cookie"] {
            assert!(!text.contains(bad), "{} uses {bad}", a.path);
        }
    }
}

#[test]
fn console_on_plain_http_says_use_https() {
    let r = get("/admin/", false, false);
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(header(&r, "content-type"), "text/html; charset=utf-8");
    assert!(header(&r, "content-security-policy").contains("frame-ancestors 'none'"));
    let page = body(r);
    assert!(page.contains("https://127.0.0.1:8000/admin/"), "{page}");
    // Assets too: nothing of the console runs over plain HTTP.
    assert_eq!(get("/admin/app.js", false, false).status(), StatusCode::FORBIDDEN);
    // A hostile Host header is not echoed into the page.
    let req = Request::get("/admin/").header("host", "x\"><script>alert(1)</script>").body(()).unwrap();
    let page = body(serve(&req, false, false));
    assert!(!page.contains("<script>") && !page.contains("href=\"https://x"), "{page}");
}

#[test]
fn console_on_plain_http_when_allowed() {
    let r = get("/admin/app.js", false, true);
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(header(&r, "content-type"), "text/javascript; charset=utf-8");
}

#[test]
fn console_only_reads() {
    let req = Request::post("/admin/").body(()).unwrap();
    let r = serve(&req, true, false);
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(header(&r, "allow"), "GET, HEAD");
    let req = Request::head("/admin/app.js").body(()).unwrap();
    let r = serve(&req, true, false);
    assert_eq!(r.status(), StatusCode::OK);
    assert!(body(r).is_empty());
    assert!(is_console_path("/admin") && is_console_path("/admin/x.js"));
    assert!(!is_console_path("/administrator") && !is_console_path("/adminx/1"));
}
