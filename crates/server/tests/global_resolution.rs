//! The global resolver (`[resolver]`) on a Handle System built on loopback
//! of `handled` servers only (`global_common`): every kind of prefix resolved
//! through native REC requests (TCP and UDP), the JSON API and the web proxy;
//! negative answers cached; one upstream query however many ask; popular
//! answers refreshed before they expire; stale
//! answers while a prefix server is down; servers named by `domain` and
//! `alt_addr`; never for requests without REC or
//! for clients outside the allow-list.

mod global_common;

use global_common::{flagged, http_get, native, put, site_of, url, without_rec, World, WALK_TIMEOUT_MS};
use handled_client::Protocol;
use handled_proto::codec::Codec;
use handled_proto::data::site::{ServerInfo, SiteAttribute, SiteInfo};
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::value::HandleValue;
use handled_resolver::Referrals;
use std::time::Duration;

#[tokio::test]
async fn every_kind_of_prefix_through_native_requests_the_json_api_and_the_proxy() {
    let w = World::start(|_| {}).await;
    let addrs = w.resolver.addrs;
    let expected = [
        ("P1/doc", "https://example.org/p1"),
        ("P3/doc", "https://example.org/p3"),
        ("21.T1/doc", "https://example.org/derived"),
        (w.p2[0].as_str(), &*format!("https://example.org/{}", w.p2[0])),
        (w.p2[1].as_str(), &*format!("https://example.org/{}", w.p2[1])),
    ];
    for (h, want) in expected {
        let (code, data) = native(Protocol::Tcp, addrs.tcp, h).await;
        assert_eq!((code, data.first().map(String::as_str)), (ResponseCode::SUCCESS, Some(want)), "{h} over TCP");
        // UDP: REC resolutions go to the workers; the answer is the same. A
        // "too busy" answer asks the client to try again (a cache-only answer
        // whose entry was refreshed meanwhile): a client does, so this does.
        let mut udp = native(Protocol::Udp, addrs.udp, h).await;
        for _ in 0..3 {
            if udp.0 != ResponseCode::SERVER_TOO_BUSY {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            udp = native(Protocol::Udp, addrs.udp, h).await;
        }
        let (code, data) = udp;
        assert_eq!((code, data.first().map(String::as_str)), (ResponseCode::SUCCESS, Some(want)), "{h} over UDP");
        let (head, body) = http_get(addrs.http, &format!("/api/handles/{h}")).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{h}: {head}");
        let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(json["values"][0]["data"]["value"], want, "{h}: {body}");
        let (head, _) = http_get(addrs.http, &format!("/{h}")).await;
        assert!(head.starts_with("HTTP/1.1 302"), "{h} through the proxy: {head}");
        assert!(head.to_ascii_lowercase().contains(&format!("location: {want}").to_ascii_lowercase()), "{head}");
    }
    // Every handle was asked upstream once; the rest came from the cache.
    let s = w.snapshot();
    assert_eq!(s.upstream_queries, 5, "{s:?}");
    assert!(s.hits >= 15, "{s:?}");
    assert_eq!(s.verification_failures, 0, "every answer signed by its site's key");
    // Both values, as the prefix server holds them.
    assert_eq!(native(Protocol::Tcp, addrs.tcp, "P1/doc").await.1, ["https://example.org/p1", "p1@example.org"]);
    // Handles homed here stay local; a prefix the root does not know is not found.
    assert_eq!(native(Protocol::Tcp, addrs.tcp, "LOCAL/none").await.0, ResponseCode::HANDLE_NOT_FOUND);
    // Over UDP too, answered on the receive thread (homed here: the resolver is not asked).
    assert_eq!(native(Protocol::Udp, addrs.udp, "LOCAL/none").await.0, ResponseCode::HANDLE_NOT_FOUND);
    assert_eq!(native(Protocol::Tcp, addrs.tcp, "NOWHERE/x").await.0, ResponseCode::HANDLE_NOT_FOUND);
    // The figures are in /metrics: the five, and NOWHERE/x.
    let (_, metrics) = http_get(addrs.http, "/metrics").await;
    let resolver_lines: Vec<&str> = metrics.lines().filter(|l| l.starts_with("handled_resolver")).collect();
    assert!(metrics.contains("handled_resolver_upstream_queries_total 6"), "{resolver_lines:#?}");
    assert!(metrics.contains("handled_resolver_hits_total"), "{metrics}");
    // Exchanges by server asked: the root, A, both of P2's site, and D (for 21.T1).
    let by_server: Vec<&str> =
        resolver_lines.iter().copied().filter(|l| l.starts_with("handled_resolver_server_exchanges_total{")).collect();
    assert_eq!(by_server.len(), 5, "{resolver_lines:#?}");
    let a = site_of(&w.a).servers[0].interfaces.iter().map(|i| i.port).collect::<Vec<_>>();
    assert!(
        by_server.iter().any(|l| a.iter().any(|p| l.contains(&format!("server=\"127.0.0.1:{p}\"")))),
        "{by_server:#?}"
    );
    assert!(metrics.contains("handled_resolver_server_seconds_total{server="), "{resolver_lines:#?}");
}

#[tokio::test]
async fn not_found_is_cached_for_its_time_and_one_query_serves_many_askers() {
    let w = World::start(|c| {
        c.resolver.negative_ttl_secs = 1;
        c.resolver.per_client = 64;
    })
    .await;
    let tcp = w.resolver.addrs.tcp;
    assert_eq!(native(Protocol::Tcp, tcp, "P1/missing").await.0, ResponseCode::HANDLE_NOT_FOUND);
    assert_eq!(native(Protocol::Tcp, tcp, "P1/missing").await.0, ResponseCode::HANDLE_NOT_FOUND);
    assert_eq!((w.upstream_queries(), w.snapshot().negative_hits), (1, 1), "the second from the cache");
    // Created meanwhile: seen once the negative answer has expired.
    put(&w.a, "P1/missing", vec![url(1, "https://example.org/late", 60)]).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(native(Protocol::Tcp, tcp, "P1/missing").await.1, ["https://example.org/late"]);

    // Many clients ask for one cold handle at once: one upstream query.
    let before = w.upstream_queries();
    let askers: Vec<_> =
        (0..40).map(|_| tokio::spawn(async move { native(Protocol::Tcp, tcp, "P1/doc").await })).collect();
    for a in askers {
        assert_eq!(a.await.unwrap().1[0], "https://example.org/p1");
    }
    let s = w.snapshot();
    assert_eq!(s.upstream_queries - before, 1, "{s:?}");
    assert!(s.coalesced + s.hits >= 39, "the others joined it or found its answer: {s:?}");
}

/// A handle asked for in the last tenth of its TTL is refreshed in the
/// background: its clients keep getting cached answers, and it is fresh
/// again before it would have expired, with what its server holds now.
#[tokio::test]
async fn popular_answers_are_prefetched_before_they_expire() {
    let w = World::start(|_| {}).await;
    let tcp = w.resolver.addrs.tcp;
    put(&w.a, "P1/popular", vec![url(1, "https://example.org/v1", 10)]).await;
    assert_eq!(native(Protocol::Tcp, tcp, "P1/popular").await.1, ["https://example.org/v1"]);
    let cached = tokio::time::Instant::now();
    put(&w.a, "P1/popular", vec![url(1, "https://example.org/v2", 10)]).await;
    tokio::time::sleep_until(cached + Duration::from_millis(9300)).await;
    // In the last second of ten: answered from the cache, refreshed behind it.
    assert_eq!(native(Protocol::Tcp, tcp, "P1/popular").await.1, ["https://example.org/v1"]);
    let refreshed = async {
        while w.upstream_queries() < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), refreshed).await.expect("one background refresh");
    let misses = w.snapshot().misses;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // Past the first answer's TTL: the refreshed one, from the cache, no miss.
    assert_eq!(native(Protocol::Tcp, tcp, "P1/popular").await.1, ["https://example.org/v2"]);
    let s = w.snapshot();
    assert_eq!((s.prefetches, s.upstream_queries, s.misses), (1, 2, misses), "{s:?}");
}

/// Over UDP a REC request for a remote handle the cache holds is answered on
/// the receive thread from the cache alone; when the cache has nothing after
/// all (the race with expiry), nothing waits: the answer is "too busy" and a
/// refresh starts, which the client's next try finds.
#[tokio::test]
async fn the_cache_alone_never_waits_on_upstream() {
    let w = World::start(|_| {}).await;
    let resolver = w.resolver.state.recursion.current().expect("recursion on").resolver.clone();
    assert!(!resolver.has_fresh(b"P1/doc", Referrals::Follow));
    assert!(resolver.cached(b"P1/doc", Referrals::Follow).is_none(), "nothing cached, nothing waited for");
    let refreshed = async {
        while !resolver.has_fresh(b"P1/doc", Referrals::Follow) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), refreshed).await.expect("the refresh it started");
    assert!(!resolver.has_fresh(b"P1/doc", Referrals::DoNotRefer), "DNR answers are kept apart");
    let answer = resolver.cached(b"P1/doc", Referrals::Follow).expect("cached").expect("found");
    assert_eq!(answer.values.len(), 2);
    let before = w.snapshot();
    let udp = w.resolver.addrs.udp;
    for _ in 0..20 {
        let (code, values) = native(Protocol::Udp, udp, "P1/doc").await;
        assert_eq!(values.first().map(String::as_str), Some("https://example.org/p1"), "{code:?}");
    }
    let s = w.snapshot();
    assert_eq!((s.upstream_queries, s.hits - before.hits), (before.upstream_queries, 20), "{s:?}");
}

/// Site attributes that say where a server is besides its address: `domain`
/// (a server whose address is all zeros, looked up in DNS) and `alt_addr.<id>`
/// (a second address, tried as a site of its own after the first).
#[tokio::test]
async fn domain_and_alt_addr_lead_to_the_server() {
    let w = World::start(|_| {}).await;
    let site = |s: &SiteInfo| HandleValue::new(1, "HS_SITE", s.to_bytes());
    let attribute = |name: &str, value: &str| SiteAttribute { name: name.into(), value: value.into() };
    let mut by_name = site_of(&w.a);
    by_name.servers[0].address = [0; 16];
    by_name.attributes.push(attribute("domain", "localhost"));
    put(&w.root, "0.NA/P3", vec![site(&by_name)]).await;
    // A's address given as 127.0.0.2, where nothing listens; its alternate is right.
    let mut elsewhere = site_of(&w.a);
    elsewhere.servers[0].address = ServerInfo::ipv4([127, 0, 0, 2]);
    let id = elsewhere.servers[0].server_id;
    elsewhere.attributes.push(attribute(&format!("alt_addr.{id}"), "127.0.0.1"));
    put(&w.root, "0.NA/P4", vec![site(&elsewhere)]).await;
    let tcp = w.resolver.addrs.tcp;
    assert_eq!(native(Protocol::Tcp, tcp, "P3/doc").await.1, ["https://example.org/p3"], "by domain");
    assert_eq!(native(Protocol::Tcp, tcp, "P4/doc").await.1, ["https://example.org/p4"], "by alt_addr");
    assert_eq!(w.snapshot().verification_failures, 0, "the same server, the same key");
}

#[tokio::test]
async fn stale_answers_while_the_prefix_server_is_down() {
    let mut w = World::start(|c| {
        c.resolver.serve_stale_secs = 60;
        c.resolver.timeout_ms = 2000;
    })
    .await;
    let tcp = w.resolver.addrs.tcp;
    put(&w.a, "P1/short", vec![url(1, "https://example.org/short", 1)]).await;
    assert_eq!(native(Protocol::Tcp, tcp, "P1/short").await.1, ["https://example.org/short"]);
    assert!(w.a.shutdown(Duration::from_secs(2)).await);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (code, data) = native(Protocol::Tcp, tcp, "P1/short").await;
    assert_eq!((code, data), (ResponseCode::SUCCESS, vec!["https://example.org/short".to_string()]));
    let s = w.snapshot();
    assert_eq!((s.stale_served, s.upstream_failures), (1, 1), "{s:?}");
    // Asked again at once: stale without waiting on the dead server again.
    let started = std::time::Instant::now();
    assert_eq!(native(Protocol::Tcp, tcp, "P1/short").await.0, ResponseCode::SUCCESS);
    assert!(started.elapsed() < Duration::from_millis(500), "{:?}", started.elapsed());
    assert_eq!(w.snapshot().upstream_failures, 1);
    // Never seen before: nothing stale to give, an error.
    assert_eq!(native(Protocol::Tcp, tcp, "P1/doc").await.0, ResponseCode::ERROR);
}

/// A site record whose key is not the server's: under `require` nothing
/// from it is believed or kept; with `off` it is taken as it comes.
#[tokio::test]
async fn answers_that_fail_verification_are_refused_and_never_cached() {
    let w = World::start(|_| {}).await;
    let tcp = w.resolver.addrs.tcp;
    for round in 1..=2 {
        assert_eq!(native(Protocol::Tcp, tcp, "P4/doc").await.0, ResponseCode::ERROR);
        let s = w.snapshot();
        assert_eq!(s.upstream_queries, round, "asked again, nothing was kept: {s:?}");
        assert!(s.verification_failures >= round, "{s:?}");
    }
    let off = World::start(|c| c.resolver.trust = "off".into()).await;
    assert_eq!(native(Protocol::Tcp, off.resolver.addrs.tcp, "P4/doc").await.1, ["https://example.org/p4"]);
    assert_eq!(off.snapshot().verification_failures, 0);
}

#[tokio::test]
async fn no_recursion_without_rec_without_allow_recursion_or_outside_the_allow_list() {
    let w = World::start(|_| {}).await;
    let (code, message) = without_rec(w.resolver.addrs.tcp, "P1/doc").await;
    assert_eq!(code, ResponseCode::SERVER_NOT_RESP, "{message}");
    assert_eq!(w.upstream_queries(), 0);

    let far = World::start(|c| c.resolver.allow = vec!["10.0.0.0/8".parse().unwrap()]).await;
    let addrs = far.resolver.addrs;
    let (code, _) = native(Protocol::Tcp, addrs.tcp, "P1/doc").await;
    assert_eq!(code, ResponseCode::SERVER_NOT_RESP);
    let (head, body) = http_get(addrs.http, "/api/handles/P1/doc").await;
    assert!(!head.starts_with("HTTP/1.1 200") && body.contains("Recursion is not offered"), "{head}\n{body}");
    assert_eq!(far.upstream_queries(), 0);

    // The web proxy and the JSON API without native recursion.
    let web = World::start(|c| c.resolver.allow_recursion = false).await;
    let addrs = web.resolver.addrs;
    assert_eq!(native(Protocol::Tcp, addrs.tcp, "P1/doc").await.0, ResponseCode::SERVER_NOT_RESP);
    assert!(http_get(addrs.http, "/api/handles/P1/doc").await.0.starts_with("HTTP/1.1 200"));
    assert_eq!(web.upstream_queries(), 1);
}

/// Lookups that need an upstream query are limited per client (a burst of
/// 2, then one per 1000 s: no refill within any test run); answers from the
/// cache are not.
#[tokio::test]
async fn a_client_over_its_rate_is_refused_upstream_lookups_not_cached_answers() {
    let w = World::start(|c| {
        c.resolver.client_rate = 0.001;
        c.resolver.client_burst = 2;
    })
    .await;
    let addrs = w.resolver.addrs;
    assert_eq!(native(Protocol::Tcp, addrs.tcp, "P1/doc").await.0, ResponseCode::SUCCESS);
    assert_eq!(native(Protocol::Tcp, addrs.tcp, "P3/doc").await.0, ResponseCode::SUCCESS);
    let (code, data) = native(Protocol::Tcp, addrs.tcp, "21.T1/doc").await;
    assert_eq!((code, data.len()), (ResponseCode::SERVER_TOO_BUSY, 0), "the third miss");
    let (head, body) = http_get(addrs.http, "/api/handles/21.T1/doc").await;
    assert!(head.starts_with("HTTP/1.1 429"), "{head}");
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(json["responseCode"], 3, "{body}");
    assert!(json["message"].as_str().is_some_and(|m| m.contains("upstream")), "{body}");
    // Cached: answered whatever the rate.
    for h in ["P1/doc", "P3/doc"] {
        assert_eq!(native(Protocol::Tcp, addrs.tcp, h).await.0, ResponseCode::SUCCESS, "{h}");
    }
    assert_eq!(w.upstream_queries(), 2);
    let (_, metrics) = http_get(addrs.http, "/metrics").await;
    assert!(metrics.contains("handled_resolver_rate_limited_total 2"), "{metrics}");
}

/// SIGHUP re-reads `[resolver]`: a new allow-list applies at once with the
/// cache kept; another trust policy renews the resolver (an empty cache); a
/// bad table changes nothing.
#[tokio::test]
async fn sighup_reloads_the_resolver_table() {
    use handled_server::recursion::Renewal;
    use handled_server::reload::reload;
    let w = World::start(|c| c.resolver.allow = vec!["10.0.0.0/8".parse().unwrap()]).await;
    let tcp = w.resolver.addrs.tcp;
    assert_eq!(native(Protocol::Tcp, tcp, "P1/doc").await.0, ResponseCode::SERVER_NOT_RESP);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("handled.toml");
    let write = |extra: &str| {
        let table = format!(
            "[resolver]\nenabled = true\nallow_recursion = true\nroot_info = {:?}\ntimeout_ms = {WALK_TIMEOUT_MS}\n{extra}\n",
            w.root_info.display().to_string()
        );
        std::fs::write(&file, table).unwrap();
    };
    write("allow = [\"127.0.0.0/8\"]");
    assert_eq!(reload(&w.resolver.state.reloadable(), Some(&file)).unwrap().resolver, Renewal::Kept);
    assert_eq!(native(Protocol::Tcp, tcp, "P1/doc").await.1[0], "https://example.org/p1", "now allowed");
    assert_eq!(native(Protocol::Tcp, tcp, "P4/doc").await.0, ResponseCode::ERROR, "its signature fails");

    write("allow = [\"127.0.0.0/8\"]\ntrust = \"maybe\"");
    let refused = reload(&w.resolver.state.reloadable(), Some(&file)).unwrap_err().to_string();
    assert!(refused.contains("trust"), "{refused}");
    assert_eq!(w.upstream_queries(), 2, "the running resolver is still there");

    write("allow = [\"127.0.0.0/8\"]\ntrust = \"off\"");
    assert_eq!(reload(&w.resolver.state.reloadable(), Some(&file)).unwrap().resolver, Renewal::Renewed);
    assert_eq!(w.upstream_queries(), 0, "a new resolver");
    let (code, values) = native(Protocol::Tcp, tcp, "P4/doc").await;
    assert_eq!(values, ["https://example.org/p4"], "unchecked now: {code:?}");
}

/// DNR ("do not refer"): a root answers with what it holds instead of a
/// prefix referral, and the resolver passes a client's DNR on to the server
/// answering it, keeping that answer apart from the referral-following one.
#[tokio::test]
async fn dnr_is_honoured_by_the_root_and_passed_on_by_the_resolver() {
    let w = World::start(|_| {}).await;
    let plain = OpFlags::CA | OpFlags::PO;
    // `0.NA/21.T1` is delegated by `0.NA/21`'s HS_SITE.PREFIX: a referral, unless DNR.
    let root = w.root.addrs.tcp;
    assert_eq!(flagged(root, "0.NA/21.T1", plain).await.code(), ResponseCode::PREFIX_REFERRAL);
    assert_eq!(flagged(root, "0.NA/21.T1", plain | OpFlags::DNR).await.code(), ResponseCode::HANDLE_NOT_FOUND);

    let tcp = w.resolver.addrs.tcp;
    let rec = plain | OpFlags::REC;
    let dnr = rec | OpFlags::DNR;
    assert_eq!(flagged(tcp, "0.NA/21.T1", rec).await.code(), ResponseCode::SUCCESS, "the referral followed");
    assert_eq!(flagged(tcp, "0.NA/21.T1", dnr).await.code(), ResponseCode::HANDLE_NOT_FOUND, "the root's own answer");
    // Each kept apart: asked again, both from the cache, neither mixed up.
    assert_eq!(flagged(tcp, "0.NA/21.T1", rec).await.code(), ResponseCode::SUCCESS);
    assert_eq!(flagged(tcp, "0.NA/21.T1", dnr).await.code(), ResponseCode::HANDLE_NOT_FOUND);
    let (head, _) = http_get(w.resolver.addrs.http, "/api/handles/0.NA/21.T1?doNotRefer=true").await;
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    assert!(http_get(w.resolver.addrs.http, "/api/handles/0.NA/21.T1").await.0.starts_with("HTTP/1.1 200"));
    assert_eq!(w.upstream_queries(), 2, "one per flag");
}
