//! The admin console through the real HTTP port (its branch in the router):
//! plain HTTP gets the "use https" page, unless `allow_plain_http_admin`;
//! `/admin/...` is the console, not a handle for the web proxy. Over HTTPS
//! the whole console is driven by tests/console (Playwright).

mod http_common;

use http_common::{get, header, read_response, start};
use tokio::net::TcpStream;

#[tokio::test]
async fn console_over_plain_http_points_to_https() {
    let addr = start(|_| {}).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut buf = Vec::new();
    for path in ["/admin", "/admin/", "/admin/app.js"] {
        get(&mut s, path).await;
        let (status, headers, body) = read_response(&mut s, &mut buf).await.unwrap();
        assert_eq!(status, 403, "{path}");
        assert_eq!(header(&headers, "content-type"), Some("text/html; charset=utf-8"));
        assert!(header(&headers, "content-security-policy").unwrap().contains("frame-ancestors 'none'"));
        let page = String::from_utf8(body).unwrap();
        assert!(page.contains("https://t/admin/"), "{page}");
    }
}

#[tokio::test]
async fn console_over_plain_http_when_allowed() {
    let addr = start(|c| c.access.allow_plain_http_admin = true).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut buf = Vec::new();
    get(&mut s, "/admin/").await;
    let (status, headers, body) = read_response(&mut s, &mut buf).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "content-type"), Some("text/html; charset=utf-8"));
    assert!(header(&headers, "content-security-policy").unwrap().contains("script-src 'self'"));
    assert!(String::from_utf8(body).unwrap().contains("/admin/app.js"));
    get(&mut s, "/admin/app.js").await;
    let (status, headers, _) = read_response(&mut s, &mut buf).await.unwrap();
    assert_eq!((status, header(&headers, "content-type")), (200, Some("text/javascript; charset=utf-8")));
    // Other two-segment paths are handles for the web proxy (TEST/1 does not exist).
    get(&mut s, "/TEST/1").await;
    let (status, _, body) = read_response(&mut s, &mut buf).await.unwrap();
    assert_eq!(status, 404);
    assert!(!String::from_utf8(body).unwrap().contains("/admin/app.js"), "not the console");
}

/// `allow_plain_http_admin` is one of the keys SIGHUP reloads: the console
/// follows the setting in force, as the JSON API does.
#[tokio::test]
async fn allowing_plain_http_takes_effect_without_a_restart() {
    let server = handled_testkit::start(|_| {}).await;
    let mut s = TcpStream::connect(server.addrs.http).await.unwrap();
    let mut buf = Vec::new();
    get(&mut s, "/admin/").await;
    assert_eq!(read_response(&mut s, &mut buf).await.unwrap().0, 403);
    let mut live = (*server.state.live()).clone();
    live.allow_plain_http_admin = true;
    server.state.set_live(live);
    get(&mut s, "/admin/").await;
    assert_eq!(read_response(&mut s, &mut buf).await.unwrap().0, 200);
}
