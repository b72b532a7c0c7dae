//! What a walk will connect to (issue 41, S4): a site record naming loopback
//! ports while the root sites are elsewhere gets no connection, and one
//! lookup's attempts are bounded. The listener is the test's own, on loopback.

use super::testing::site;
use super::tests::no_check;
use super::*;
use handled_proto::codec::Codec;
use handled_proto::data::pubkey::PublicKey;
use std::sync::atomic::AtomicUsize;

/// A TCP listener on 127.0.0.1 that counts connections and closes them.
async fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (port, accepted)
}

/// A key that decodes: `trust = "require"` gets as far as connecting.
fn usable_key() -> Vec<u8> {
    PublicKey::Rsa { exponent: vec![1, 0, 1], modulus: vec![0xc5; 256] }.to_bytes()
}

/// A site record at the listener's port on `address`, over TCP and HTTP.
fn site_at(address: [u8; 4], port: u16) -> SiteInfo {
    let mut s = site(port, usable_key());
    s.servers[0].address = handled_proto::data::site::ServerInfo::ipv4(address);
    let mut http = s.servers[0].interfaces[0];
    http.protocol = handled_proto::data::site::TransportProtocol::Http;
    s.servers[0].interfaces.push(http);
    s
}

#[tokio::test]
async fn a_site_on_loopback_is_not_asked_when_the_root_is_elsewhere() {
    let (port, accepted) = counting_listener().await;
    // The root on a documentation address: never contacted, the prefix's sites are known.
    let sites = Sites::new(vec![site_at([192, 0, 2, 7], 2641)], no_check);
    sites.remember(b"0.NA/EVIL".to_vec(), Arc::new(vec![site_at([127, 0, 0, 1], port)]), Duration::from_secs(60));
    let walk = sites.walk(Instant::now() + Duration::from_secs(2));
    let found = sites.for_handle(b"EVIL/x", &walk).await.unwrap();
    let e = sites.first_answer(&found, b"EVIL/x", &resolution(b"EVIL/x", &[], &[]), &walk).await.unwrap_err();
    assert!(matches!(e, LookupError::NotAllowed(_)), "{e}");
    assert!(e.to_string().contains("127.0.0.1 is not globally routable"), "{e}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 0, "no connection to the loopback port");
    assert_eq!(sites.guards().refused_by_policy, 1);

    // The operator allowing loopback: asked (and the listener sees it).
    let allowed = Sites::new(vec![site_at([192, 0, 2, 7], 2641)], no_check)
        .with_policy(UpstreamPolicy { allow: vec!["127.0.0.0/8".parse().unwrap()], deny: vec![] });
    let walk = allowed.walk(Instant::now() + Duration::from_secs(2));
    let body = resolution(b"EVIL/x", &[], &[]);
    assert!(allowed.first_answer(&[site_at([127, 0, 0, 1], port)], b"EVIL/x", &body, &walk).await.is_err());
    assert!(accepted.load(Ordering::SeqCst) >= 1);
}

#[tokio::test]
async fn one_lookup_makes_at_most_its_attempts_and_failed_sites_wait() {
    let (port, accepted) = counting_listener().await;
    // A root on loopback: loopback sites are asked, as in a private test system.
    let sites = Sites::with_options(
        vec![site_at([127, 0, 0, 1], 1)],
        no_check,
        SiteOptions { rounds: 2, backoff: Duration::from_millis(1), ..SiteOptions::default() },
    );
    let many: Vec<SiteInfo> = (0..MAX_SITES).map(|_| site_at([127, 0, 0, 1], port)).collect();
    let body = resolution(b"AMP/x", &[], &[]);
    let walk = sites.walk(Instant::now() + Duration::from_secs(5));
    assert!(sites.first_answer(&many, b"AMP/x", &body, &walk).await.is_err());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let first = accepted.load(Ordering::SeqCst);
    assert!((1..=DEFAULT_ATTEMPTS as usize).contains(&first), "{first} connections for one lookup");
    assert_eq!(sites.guards().cut_by_budget, 1);
    // The next handle of the same sites: not asked again for a few seconds.
    let walk = sites.walk(Instant::now() + Duration::from_secs(5));
    let e = sites.first_answer(&many, b"AMP/y", &body, &walk).await.unwrap_err();
    assert!(e.to_string().contains("not asked again"), "{e}");
    assert_eq!((accepted.load(Ordering::SeqCst), sites.guards().skipped_unreachable), (first, 1));
    // Control characters never leave.
    let e = sites.for_handle(b"AMP/x\r\nFLUSHALL", &walk).await.unwrap_err();
    assert!(matches!(e, LookupError::Refused { code: ResponseCode::INVALID_HANDLE, .. }), "{e}");
}
