//! The web handle proxy end to end, one test per behaviour of web-proxy.md's
//! tables (query parameters, 10320/loc selection, HS_ALIAS, pages, status
//! codes, caching headers), on the records `tests/proxy-compare` also seeds
//! into the original Handle.Net server.

mod admin_common;

use handled_server::state::ServerState;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const RECORDS: &str = include_str!("../../../tests/proxy-compare/records.jsonl");
const TIMEOUT: Duration = Duration::from_secs(10);

struct Proxy {
    _server: admin_common::AdminServer,
    addr: SocketAddr,
}

async fn start_with(tweak: impl FnOnce(&mut handled_server::config::Config)) -> (Proxy, std::sync::Arc<ServerState>) {
    let s = admin_common::start_with(tweak).await;
    let n =
        handled_server::import::import(s.state.records(), std::io::BufReader::new(RECORDS.as_bytes()), false, |_| {})
            .await
            .expect("seed records");
    assert_eq!(n as usize, RECORDS.lines().count());
    let state = s.state.clone();
    (Proxy { addr: s.addrs.http, _server: s }, state)
}

async fn start() -> Proxy {
    start_with(|_| {}).await.0
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
    fn all(&self, name: &str) -> Vec<&str> {
        self.headers.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str()).collect()
    }
    fn location(&self) -> &str {
        self.header("location").unwrap_or("")
    }
    /// `Cache-Control: max-age=N` as N.
    fn max_age(&self) -> i64 {
        let cc = self.header("cache-control").unwrap_or("");
        cc.strip_prefix("max-age=").and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("cache-control {cc:?}"))
    }
    /// Seconds from now to `Expires`.
    fn expires_in(&self) -> i64 {
        let e = self.header("expires").expect("expires");
        let at = httpdate::parse_http_date(e).expect("http date");
        at.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64 - now()
    }
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

impl Proxy {
    /// One request on its own connection (`Connection: close`), read to the end.
    async fn raw(&self, request: String) -> Reply {
        let mut s = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        tokio::time::timeout(TIMEOUT, s.read_to_end(&mut raw)).await.expect("answer in time").unwrap();
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.split("\r\n");
        let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Reply { status, headers, body: body.to_string() }
    }

    async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
        self.raw(format!("GET {path} HTTP/1.1\r\nHost: proxy.test\r\n{extra}Connection: close\r\n\r\n")).await
    }

    async fn get(&self, path: &str) -> Reply {
        self.get_with(path, &[]).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_redirects_to_its_first_url_with_caching_headers() {
    let p = start().await;
    let r = p.get("/TEST/p1").await;
    assert_eq!(r.status, 302);
    assert_eq!(r.location(), "https://example.org/a?x=1&y=%3C2%3E", "the IRI encoded as a URI");
    assert_eq!(r.header("content-type"), Some("text/html;charset=UTF-8"));
    assert_eq!(
        r.body,
        "<html><head><title>Handle Redirect</title></head>\n<body><a href=\"https://example.org/a?x=1&amp;y=%3C2%3E\">https://example.org/a?x=1&amp;y=&lt;2&gt;</a></body></html>"
    );
    assert!((86_398..=86_400).contains(&r.expires_in()), "default TTL 86400: {}", r.expires_in());
    assert!((r.max_age() - r.expires_in()).abs() <= 1, "Cache-Control agrees with Expires");
    assert_eq!(r.header("vary"), Some("Accept"));
    assert!(r.header("server-timing").is_some_and(|t| t.starts_with("app;dur=")));
    // auth and cert are accepted (this server is authoritative; nothing is cached apart).
    assert_eq!(p.get("/TEST/p1?auth&cert").await.location(), r.location());
    let cors = p.get_with("/TEST/p1", &[("origin", "https://app.example")]).await;
    assert_eq!(cors.header("access-control-allow-origin"), Some("*"));
    assert!(cors.header("access-control-expose-headers").is_some_and(|h| h.contains("Location")));
    // HEAD: the same headers, no body.
    let head = p.raw("HEAD /TEST/p1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".into()).await;
    assert_eq!((head.status, head.location(), head.body.as_str()), (302, r.location(), ""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expires_is_the_smallest_ttl_capped_at_two_days() {
    let p = start().await;
    let two = p.get("/TEST/two?index=5").await;
    assert_eq!((two.status, two.location()), (302, "https://five.example/"));
    assert!((172_798..=172_800).contains(&two.max_age()), "TTL 999999 counts as two days: {}", two.max_age());
    let loc = p.get("/TEST/loc1").await;
    assert!((298..=300).contains(&loc.max_age()), "the legacy URL's TTL 300 is the smallest: {}", loc.max_age());
    let abs = p.get("/TEST/abs?type=URL").await;
    assert!((172_798..=172_800).contains(&abs.max_age()), "an absolute TTL in 2030 is capped too: {}", abs.max_age());
    assert!((abs.max_age() - abs.expires_in()).abs() <= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_rules_first_url_subtype_fragment_and_encoding() {
    let p = start().await;
    assert_eq!(p.get("/TEST/two").await.location(), "https://three.example/", "first URL in stored order");
    assert_eq!(p.get("/TEST/urlsub").await.location(), "https://alt.example/", "else the first URL.* subtype");
    assert_eq!(p.get("/TEST/p1?urlappend=%23frag").await.location(), "https://example.org/a?x=1&y=%3C2%3E#frag");
    // Issue 25 R10: urlappend extends the path, never the host.
    assert_eq!(p.get("/TEST/bare?urlappend=%2Fdeeper%3Fq%3D1").await.location(), "https://bare.example/deeper?q=1");
    for evil in ["%40evil.example%2F", ".evil.example", ":1@evil.example", "%5C%40x"] {
        let to = p.get(&format!("/TEST/bare?urlappend={evil}")).await;
        assert_eq!(to.location(), "https://bare.example", "{evil}");
    }
    assert_eq!(p.get("/TEST/utf8").await.location(), "https://example.org/caf%C3%A9%20au%20lait");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sc_sets_the_status_and_http10_gets_302() {
    let p = start().await;
    for (id, status, target) in [
        (1, 301, "https://s301.example/"),
        (2, 307, "https://s307.example/"),
        (3, 308, "https://s308.example/"),
        (4, 302, "https://s200.example/"),
    ] {
        let r = p.get(&format!("/TEST/sc?locatt=id:{id}")).await;
        assert_eq!((r.status, r.location()), (status, target), "id {id}");
    }
    let r = p.get("/TEST/loc1").await;
    assert_eq!((r.status, r.location()), (303, "https://b.example/x"), "highest score, its http_sc");
    let old = p.raw("GET /TEST/loc1 HTTP/1.0\r\nHost: x\r\n\r\n".into()).await;
    assert_eq!((old.status, old.location()), (302, "https://b.example/x"), "HTTP/1.0: every non-301 is 302");
    let old301 = p.raw("GET /TEST/sc?locatt=id:1 HTTP/1.0\r\nHost: x\r\n\r\n".into()).await;
    assert_eq!(old301.status, 301);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn location_selection_locatt_address_country_weight_template() {
    let p = start().await;
    assert_eq!(p.get("/TEST/loc1?locatt=id:0").await.location(), "https://a.example/", "weight 0: only explicitly");
    assert_eq!(
        p.get("/TEST/loc1?locatt=id:2").await.location(),
        "https://c.example/%7Bhdl%7D",
        "href is not a template"
    );
    assert_eq!(p.get("/TEST/loc1?locatt=id:99").await.location(), "https://b.example/x", "no match: filter ignored");
    assert_eq!(p.get("/TEST/addr").await.location(), "https://loopback.example/", "the peer is in 127/8");
    assert_eq!(p.get("/TEST/addr?ip=10.1.2.3").await.location(), "https://loopback.example/", "ip= is not the peer");
    assert_eq!(p.get("/TEST/country?country=GB").await.location(), "https://gb.example/");
    assert_eq!(p.get("/TEST/country?country=fr").await.location(), "https://any.example/");
    assert_eq!(p.get("/TEST/country").await.location(), "https://any.example/", "no GeoIP: method skipped");
    for _ in 0..20 {
        assert_eq!(p.get("/TEST/weighted").await.location(), "https://always.example/", "weight 0 never at random");
    }
    assert_eq!(p.get("/TEST/tpl").await.location(), "https://t.example/r/TEST%2Ftpl?p=TEST/tpl");
    assert_eq!(p.get("/TEST/tpl2").await.location(), "https://t.example/plain", "href wins over href_template");
    let links = p.get("/TEST/links").await;
    assert_eq!(links.location(), "https://l.example/");
    assert_eq!(links.all("link"), ["<https://meta.example/x>; rel=\"describedby\""]);
    assert_eq!(links.header("x-robots-tag"), Some("noindex"));
    let meta = p.get("/TEST/loc1?action=metadata").await;
    assert_eq!(meta.status, 303, "action=metadata adds locatt=role:metadata, nothing matches here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_drives_conneg_and_json() {
    let p = start().await;
    let json = p.get_with("/TEST/conneg", &[("accept", "application/json")]).await;
    assert_eq!(json.location(), "https://json.example/", "a location serves JSON: content negotiation");
    let browser = p.get_with("/TEST/conneg", &[("accept", "*/*"), ("user-agent", "Mozilla/5.0 (X11)")]).await;
    assert_eq!(browser.location(), "https://html.example/");
    // Beyond the original: no location serves JSON, so the record itself.
    let record = p.get_with("/TEST/p1", &[("accept", "application/json")]).await;
    let api = p.get("/api/handles/TEST/p1").await;
    assert_eq!((record.status, record.header("content-type")), (200, Some("application/json;charset=UTF-8")));
    assert_eq!(record.body, api.body);
    assert_eq!(record.header("vary"), Some("Accept"));
    assert_eq!(record.header("cache-control"), Some("no-cache"));
    let missing = p.get_with("/TEST/missing", &[("accept", "application/json")]).await;
    assert_eq!((missing.status, missing.body.as_str()), (404, r#"{"responseCode":100,"handle":"TEST/missing"}"#));
    let html_first = p.get_with("/TEST/p1", &[("accept", "text/html,application/json;q=0.9")]).await;
    assert_eq!(html_first.status, 302, "a browser's Accept still redirects");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aliases_answer_301_to_the_final_handle() {
    let p = start().await;
    let r = p.get("/TEST/alias1").await;
    assert_eq!((r.status, r.location(), r.body.as_str()), (301, "http://proxy.test/TEST/p1", ""));
    assert!((598..=600).contains(&r.expires_in()), "the alias value's TTL: {}", r.expires_in());
    assert!((r.max_age() - r.expires_in()).abs() <= 1);
    assert_eq!(p.get("/TEST/alias1?foo=bar").await.location(), "http://proxy.test/TEST/p1?foo=bar", "query kept");
    assert_eq!(p.get("/TEST/alias3").await.location(), "http://proxy.test/TEST/p1", "to the end of the chain");
    let headers_only = p.get("/TEST/alias1?redirectionHeaders").await;
    assert_eq!((headers_only.status, headers_only.location()), (200, "http://proxy.test/TEST/p1?redirectionHeaders"));
    let shown = p.get("/TEST/alias1?noredirect").await;
    assert!(shown.body.contains("Handle Values for: TEST/p1"), "values of the target");
    let ignored = p.get("/TEST/alias1?ignore_aliases").await;
    assert_eq!(ignored.status, 200, "no URL of its own: the record");
    assert!(ignored.body.contains("Handle Values for: TEST/alias1") && ignored.body.contains("HS_ALIAS"));
    let urls = p.get("/TEST/alias1?action=showurls").await;
    assert!(urls.body.contains("href=\"https://example.org/a?x=1&amp;y=&lt;2&gt;\""), "{}", urls.body);
    let api = p.get("/TEST/alias1?action=api").await;
    assert!(api.body.contains(r#""handle":"TEST/alias1""#) && api.body.contains("HS_ALIAS"), "api: not followed");
    let lp = p.get("/TEST/loop1").await;
    assert_eq!(lp.status, 404);
    assert!(lp.body.contains("<title>Alias chain too long</title>") && lp.body.contains("TEST/loop1"), "{}", lp.body);
    let dangling = p.get("/TEST/alias2").await;
    assert_eq!(dangling.status, 404);
    assert!(dangling.body.contains("<title>Not Found</title>"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_page_filters_and_novalues() {
    let p = start().await;
    for q in ["noredirect", "noredirect=yes", "action=showvalues"] {
        let r = p.get(&format!("/TEST/p1?{q}")).await;
        assert_eq!((r.status, r.header("content-type")), (200, Some("text/html;charset=UTF-8")), "{q}");
        assert!(r.body.contains("Handle Values for: TEST/p1"), "{q}");
        assert!(r.body.contains("<td>Index</td><td>Type</td><td>Timestamp</td><td>Data</td>"));
        assert!(r.body.contains(
            "<a href=\"https://example.org/a?x=1&amp;y=%3C2%3E\">https://example.org/a?x=1&amp;y=&lt;2&gt;</a>"
        ));
        // 0.TYPE is neither homed nor reachable (no resolver): a link there would be dead.
        assert!(!r.body.contains("/0.TYPE/") && r.body.contains("<b>URL</b>"), "{}", r.body);
        assert!(r.body.contains("<a href=\"mailto:a@b.org\">a@b.org</a>"));
        assert!(r.body.contains("handle=TEST/ADMIN; index=300; [create hdl,delete hdl,read val,"), "{}", r.body);
        assert_eq!(r.header("cache-control"), Some("no-cache"));
    }
    let rows = |body: &str| body.matches("<tr><td valign=\"top\"><b>").count();
    assert_eq!(rows(&p.get("/TEST/p1?noredirect&type=URL").await.body), 1);
    assert_eq!(rows(&p.get("/TEST/p1?noredirect&index=2&index=100").await.body), 2);
    assert_eq!(rows(&p.get("/TEST/p1?noredirect&type=URL&index=2").await.body), 2, "a union");
    assert_eq!(rows(&p.get("/TEST/p1?noredirect&index=abc&index=2").await.body), 3, "a bad index voids the filter");
    let none = p.get("/TEST/two?type=EMAIL").await;
    assert_eq!(none.status, 200);
    assert!(none.body.contains("<title>No Values Found</title>") && none.body.contains("<a href=\"/TEST/two\">"));
    let email_only = p.get("/TEST/p1?index=2").await;
    assert_eq!(email_only.status, 200, "no URL among the selected values: the record");
    assert!(email_only.body.contains("Handle Values for: TEST/p1"));
    let nourl = p.get("/TEST/nourl").await;
    assert!(nourl.status == 200 && nourl.body.contains("Handle Values for: TEST/nourl"));
    let private = p.get("/TEST/private").await;
    assert_eq!(private.status, 200, "the public rest of the record");
    assert!(!private.body.contains("secret.example"), "non-public values are neither served nor followed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn types_link_to_0_type_only_where_it_resolves() {
    let (p, _state) = start_with(|c| c.prefixes.push("0.TYPE".into())).await;
    let r = p.get("/TEST/p1?noredirect").await;
    assert!(r.body.contains("<a href=\"/0.TYPE/URL\">URL</a>"), "0.TYPE homed here: {}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn showurls_xml_and_api_json() {
    let p = start().await;
    let r = p.get("/TEST/loc1?action=showurls").await;
    assert_eq!((r.status, r.header("content-type")), (200, Some("text/xml;charset=UTF-8")));
    assert!(r
        .body
        .starts_with("<locations>\n<location mode=\"legacy\" href=\"https://legacy.example/\" weight=\"0\"/>\n"));
    assert_eq!(r.body.matches("<location ").count(), 4, "{}", r.body);
    assert!(r.body.contains("<location id=\"1\" href=\"https://b.example/x\" http_sc=\"303\" score=\"5\"/>"));
    let legacy = p.get("/TEST/two?action=showurls").await;
    assert_eq!(legacy.body.matches("weight=\"1\"").count(), 2, "{}", legacy.body);
    let api = p.get("/TEST/p1?action=api").await;
    assert_eq!((api.status, api.header("content-type")), (200, Some("application/json;charset=UTF-8")));
    assert_eq!(api.body, p.get("/api/handles/TEST/p1").await.body);
    assert_eq!(p.get("/TEST/p1?action=api&type=EMAIL").await.body, p.get("/api/handles/TEST/p1?type=EMAIL").await.body);
    let missing = p.get("/TEST/missing?action=api").await;
    assert_eq!((missing.status, missing.body.as_str()), (404, r#"{"responseCode":100,"handle":"TEST/missing"}"#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identifier_prefixes_are_normalised() {
    let p = start().await;
    for path in [
        "/hdl:TEST/p1",
        "/HDL:TEST/p1",
        "/doi:TEST/p1",
        "/info:doi/TEST/p1",
        "/info:hdl/TEST/p1",
        "/urn:hdl:TEST/p1",
        "/urn:hdl:TEST:p1",
        "/urn:doi:TEST:p1",
        "/TEST%2Fp1",
    ] {
        let r = p.get(path).await;
        assert_eq!((r.status, r.location()), (302, "https://example.org/a?x=1&y=%3C2%3E"), "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_pages_carry_the_original_status_codes() {
    let p = start().await;
    for (path, status, title) in [
        ("/TEST/missing", 404, "Not Found"),
        ("/NOPE/x", 400, "Resolution Error"),
        ("/nope", 400, "Resolution Error"),
        ("/TEST/p1/", 404, "Not Found"),
    ] {
        let r = p.get(path).await;
        assert_eq!(r.status, status, "{path}");
        assert!(r.body.contains(&format!("<title>{title}</title>")), "{path}: {}", r.body);
        assert_eq!(r.header("content-type"), Some("text/html;charset=UTF-8"));
        assert_eq!(r.header("cache-control"), Some("no-cache"));
        assert!(r.header("expires").is_none());
    }
    assert!(p.get("/TEST/p1/").await.body.contains("<a href=\"/TEST/p1\">TEST/p1</a>"), "trailing-slash hint");
    let del = p.raw("DELETE /TEST/p1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".into()).await;
    assert_eq!((del.status, del.header("allow")), (405, Some("GET, HEAD, POST, OPTIONS")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handle_values_cannot_inject_html() {
    let p = start().await;
    let page = p.get("/TEST/xss?noredirect").await;
    assert_eq!(page.status, 200);
    for bad in ["<script>", "<b>T", "href=\"javascript:"] {
        assert!(!page.body.contains(bad), "{bad} in {}", page.body);
    }
    assert!(page.body.contains("javascript:alert(1)&quot;&gt;&lt;script&gt;x&lt;/script&gt;"));
    assert!(page.body.contains("&lt;script&gt;alert(2)&lt;/script&gt;"));
    // Issue 25 R13: never a redirect to a javascript: URL (the original sends
    // one); the values page instead.
    let redirect = p.get("/TEST/xss").await;
    assert_eq!((redirect.status, redirect.header("location")), (200, None));
    assert!(redirect.body.contains("Handle Values for") && !redirect.body.contains("<script>"), "{}", redirect.body);
    let handle = p.get("/TEST/%3Cscript%3Ealert(3)%3C%2Fscript%3E").await;
    assert_eq!(handle.status, 404);
    assert!(!handle.body.contains("<script>") && handle.body.contains("&lt;script&gt;alert(3)"));
    let host = p.raw("GET /TEST/alias1 HTTP/1.1\r\nHost: \"><script>\r\nConnection: close\r\n\r\n".into()).await;
    assert_eq!(host.location(), "/TEST/p1", "a strange Host gives a root-relative URL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_form_and_special_paths() {
    let p = start().await;
    let form = p.get("/").await;
    assert_eq!(form.status, 200);
    for part in [
        "<title>Handle Proxy</title>",
        "name=\"hdl\"",
        "name=\"auth\"",
        "name=\"noredirect\"",
        "name=\"ignore_aliases\"",
        "REST API",
    ] {
        assert!(form.body.contains(part), "{part}");
    }
    let body = "hdl=doi%3ATEST%2Fp1%23sec";
    let posted = p
        .raw(format!("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()))
        .await;
    assert_eq!((posted.status, posted.location()), (302, "https://example.org/a?x=1&y=%3C2%3E#sec"));
    let body = "hdl=TEST%2Fp1&noredirect=";
    let shown = p
        .raw(format!("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()))
        .await;
    assert!(shown.body.contains("Handle Values for: TEST/p1"));
    let icon = p.get("/favicon.ico").await;
    assert_eq!((icon.status, icon.header("content-type")), (200, Some("image/x-icon")));
    let robots = p.get("/robots.txt").await;
    assert!(robots.status == 200 && robots.body.starts_with("User-agent: *"));
    assert_eq!(p.get("/help.html").await.status, 302);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switched_off_it_redirects_to_the_json_api() {
    let (p, _) = start_with(|c| c.transport.enable_proxy = false).await;
    let r = p.get("/TEST/p1").await;
    assert_eq!((r.status, r.location()), (302, "/api/handles/TEST/p1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_control_and_metrics_cover_the_proxy() {
    let (p, state) = start_with(|c| {
        c.admission.max_concurrent = 1;
        c.admission.queue_length = 0;
    })
    .await;
    assert_eq!(p.get("/TEST/p1").await.status, 302);
    let held = state.admission.admit().await.unwrap();
    let busy = p.get("/TEST/p1").await;
    assert_eq!(busy.status, 503);
    assert!(busy.header("retry-after").is_some());
    drop(held);
    let metrics = p.get("/metrics").await.body;
    for line in [
        r#"handled_requests_total{transport="http",op="proxy",code="3xx"} 1"#,
        r#"handled_requests_total{transport="http",op="proxy",code="5xx"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
}
