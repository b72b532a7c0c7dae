//! What the global resolver connects to (issue 41, S4). Whoever controls a
//! prefix's HS_SITE names the addresses and ports asked: one lookup of a
//! prefix naming 16 sites (doubled by `alt_addr`, over TCP and HTTP) made 128
//! connections to ports of its choosing, and the next handle did it again.
//! Now one lookup makes at most `upstream_attempts` (8), sites that did not
//! answer are left alone for a few seconds, handles with control characters
//! never leave, and `deny_upstream` networks are never asked. Every listener
//! is the test's own, on loopback.

mod global_common;

use global_common::{http_get, native, put, site_of, World};
use handled_client::Protocol;
use handled_proto::codec::Codec;
use handled_proto::data::site::{InterfaceKind, SiteAttribute, SiteInfo, TransportProtocol};
use handled_proto::header::ResponseCode;
use handled_proto::value::HandleValue;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Listeners on `ip` that count connections and close them.
async fn listeners(ip: &str, n: usize, accepted: &Arc<AtomicUsize>) -> Vec<u16> {
    let mut ports = Vec::new();
    for _ in 0..n {
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.expect("bind on loopback");
        ports.push(listener.local_addr().unwrap().port());
        let accepted = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                accepted.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
    }
    ports
}

/// A copy of `like` (a real server's record: its key decodes) at `ip:port`,
/// over TCP and HTTP, with an `alt_addr` naming the same address again.
fn site_at(like: &SiteInfo, ip: [u8; 4], port: u16) -> SiteInfo {
    let mut site = like.clone();
    let server = &mut site.servers[0];
    server.address = handled_proto::data::site::ServerInfo::ipv4(ip);
    server.interfaces.retain(|i| i.protocol == TransportProtocol::Tcp);
    server.interfaces[0].port = i32::from(port);
    server.interfaces[0].kind = InterfaceKind::AdminAndQuery;
    let mut http = server.interfaces[0];
    http.protocol = TransportProtocol::Http;
    server.interfaces.push(http);
    let id = server.server_id;
    let addr = std::net::Ipv4Addr::from(ip).to_string();
    site.attributes.push(SiteAttribute { name: format!("alt_addr.{id}").into(), value: addr.into() });
    site
}

fn metric(metrics: &str, name: &str) -> u64 {
    metrics.lines().find_map(|l| l.strip_prefix(name)?.trim().parse().ok()).unwrap_or(0)
}

#[tokio::test]
async fn a_prefix_naming_sixteen_sites_costs_one_budget_of_attempts_then_nothing_for_a_while() {
    let w = World::start(|_| {}).await;
    let tcp = w.resolver.addrs.tcp;
    let accepted = Arc::new(AtomicUsize::new(0));
    let ports = listeners("127.0.0.1", 16, &accepted).await;
    let like = site_of(&w.a);
    let sites = ports
        .iter()
        .enumerate()
        .map(|(n, &port)| HandleValue::new(n as i32 + 1, "HS_SITE", site_at(&like, [127, 0, 0, 1], port).to_bytes()));
    put(&w.root, "0.NA/AMP", sites.collect()).await;

    let (code, _) = native(Protocol::Tcp, tcp, "AMP/x").await;
    assert_eq!(code, ResponseCode::ERROR);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let first = accepted.load(Ordering::SeqCst);
    // The root's lookup of 0.NA/AMP took one of the 8 attempts.
    assert!((1..=7).contains(&first), "{first} connections to the prefix's ports for one lookup");

    // The next handles of the prefix: its sites failed a moment ago, not asked again.
    assert_eq!(native(Protocol::Tcp, tcp, "AMP/y").await.0, ResponseCode::ERROR);
    let (head, _) = http_get(w.resolver.addrs.http, "/api/handles/AMP/z").await;
    assert!(!head.starts_with("HTTP/1.1 200"), "{head}");
    // CR/LF in the handle: refused before anything is sent.
    assert_eq!(native(Protocol::Tcp, tcp, "AMP/x\r\nFLUSHALL\r\n").await.0, ResponseCode::INVALID_HANDLE);
    let (head, body) = http_get(w.resolver.addrs.http, "/api/handles/AMP/w%0D%0AFLUSHALL%0D%0A").await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}\n{body}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(accepted.load(Ordering::SeqCst), first, "no new connection");

    let (_, metrics) = http_get(w.resolver.addrs.http, "/metrics").await;
    assert!(metric(&metrics, "handled_resolver_upstream_cut_total") >= 1, "{metrics}");
    assert!(metric(&metrics, "handled_resolver_upstream_skipped_total") >= 2, "{metrics}");

    // A few seconds later the sites are asked again, as sparingly.
    tokio::time::sleep(handled_client::sites::UNREACHABLE_FOR).await;
    assert_eq!(native(Protocol::Tcp, tcp, "AMP/v").await.0, ResponseCode::ERROR);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let again = accepted.load(Ordering::SeqCst) - first;
    assert!((1..=8).contains(&again), "{again} connections for the next lookup");
}

/// `deny_upstream` (Unbound's do-not-query-address): a site record naming a
/// denied address is not asked, and the client is told why in a sentence.
#[tokio::test]
async fn a_denied_network_is_never_asked() {
    let w = World::start(|c| c.resolver.deny_upstream = vec!["127.0.0.2/32".parse().unwrap()]).await;
    let accepted = Arc::new(AtomicUsize::new(0));
    let ports = listeners("127.0.0.2", 1, &accepted).await;
    let site = site_at(&site_of(&w.a), [127, 0, 0, 2], ports[0]);
    put(&w.root, "0.NA/EVIL", vec![HandleValue::new(1, "HS_SITE", site.to_bytes())]).await;
    let r = global_common::flagged(w.resolver.addrs.tcp, "EVIL/x", handled_proto::header::OpFlags::REC).await;
    assert_eq!(r.code(), ResponseCode::ERROR);
    assert!(r.message().unwrap_or_default().contains("does not query"), "{:?}", r.message());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 0);
    assert!(w.snapshot().guards.refused_by_policy >= 2, "the site and its alt_addr: {:?}", w.snapshot().guards);
    // The rest of the system is asked as before.
    assert_eq!(native(Protocol::Tcp, w.resolver.addrs.tcp, "P1/doc").await.0, ResponseCode::SUCCESS);
}
