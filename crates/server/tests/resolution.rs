//! Resolution end to end over UDP, TCP and the HTTP tunnel, with our client.

mod common;

use handled_client::{resolved_values, Connection, Protocol, ResolveOptions};
use handled_proto::codec::Codec;
use handled_proto::data::pubkey::{unsigned, PublicKey};
use handled_proto::data::site::SiteInfo;
use handled_proto::header::ResponseCode;
use handled_proto::response::ResponseBody;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(5);

async fn connections(s: &common::TestServer) -> Vec<(Protocol, Connection)> {
    let mut v = Vec::new();
    for (p, addr) in [(Protocol::Udp, s.addrs.udp), (Protocol::Tcp, s.addrs.tcp), (Protocol::Http, s.addrs.http)] {
        v.push((p, Connection::open(p, addr, TIMEOUT, false).await.unwrap()));
    }
    v
}

fn indexes(r: &handled_client::Response) -> Vec<i32> {
    resolved_values(r).unwrap_or_else(|| panic!("not a resolution: {:?}", r.code())).iter().map(|v| v.index).collect()
}

#[tokio::test]
async fn resolves_with_filters_on_every_transport() {
    let s = common::start().await;
    for (p, mut c) in connections(&s).await {
        let all = c.resolve(b"TEST/1", &ResolveOptions::default()).await.unwrap();
        assert_eq!(indexes(&all), vec![1, 2, 3], "{p:?}");
        let by_type = ResolveOptions { types: vec![b"URL".to_vec()], ..Default::default() };
        assert_eq!(indexes(&c.resolve(b"TEST/1", &by_type).await.unwrap()), vec![1], "{p:?}");
        let family = ResolveOptions { types: vec![b"url.".to_vec()], ..Default::default() };
        assert_eq!(indexes(&c.resolve(b"TEST/1", &family).await.unwrap()), vec![1, 3], "{p:?}");
        let union = ResolveOptions { indexes: vec![2], types: vec![b"URL".to_vec()], ..Default::default() };
        assert_eq!(indexes(&c.resolve(b"TEST/1", &union).await.unwrap()), vec![1, 2], "{p:?}");
        // Case-insensitive, echoing the caller's spelling.
        let lower = c.resolve(b"test/1", &ResolveOptions::default()).await.unwrap();
        match &lower.body {
            ResponseBody::Resolution { handle, .. } => assert_eq!(handle, b"test/1"),
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn error_codes() {
    let s = common::start().await;
    for (p, mut c) in connections(&s).await {
        let code = |r: handled_client::Response| r.code();
        assert_eq!(
            code(c.resolve(b"TEST/missing", &ResolveOptions::default()).await.unwrap()),
            ResponseCode::HANDLE_NOT_FOUND,
            "{p:?}"
        );
        assert_eq!(
            code(c.resolve(b"OTHER/1", &ResolveOptions::default()).await.unwrap()),
            ResponseCode::SERVER_NOT_RESP,
            "{p:?}"
        );
        let nothing = ResolveOptions { indexes: vec![99], ..Default::default() };
        assert_eq!(code(c.resolve(b"TEST/1", &nothing).await.unwrap()), ResponseCode::VALUES_NOT_FOUND, "{p:?}");
    }
}

#[tokio::test]
async fn public_only_hides_secret_keys() {
    let s = common::start().await;
    let mut c = Connection::open(Protocol::Udp, s.addrs.udp, TIMEOUT, false).await.unwrap();
    let r = c.resolve(b"TEST/SECRET", &ResolveOptions::default()).await.unwrap();
    assert_eq!(indexes(&r), vec![1]);
    let not_po = ResolveOptions { public_only: false, ..Default::default() };
    let r = c.resolve(b"TEST/SECRET", &not_po).await.unwrap();
    assert_ne!(r.code(), ResponseCode::SUCCESS, "non-public values must never be served unauthenticated");
}

#[tokio::test]
async fn large_values_span_several_datagrams() {
    let s = common::start().await;
    for (p, mut c) in connections(&s).await {
        let r = c.resolve(b"TEST/BIG", &ResolveOptions::default()).await.unwrap();
        assert_eq!(resolved_values(&r).unwrap()[0].data, common::big_url().as_bytes(), "{p:?}");
    }
}

#[tokio::test]
async fn site_info_names_our_key_and_ports() {
    let s = common::start().await;
    for (p, mut c) in connections(&s).await {
        let r = c.site_info().await.unwrap();
        let ResponseBody::SiteInfo(bytes) = &r.body else { panic!("{p:?}: {:?}", r.body) };
        let site = SiteInfo::from_bytes(bytes).unwrap();
        assert!(site.primary);
        assert_eq!(site.servers.len(), 1);
        assert_eq!(site.servers[0].public_key, s.public_key);
        let ports: Vec<i32> = site.servers[0].interfaces.iter().map(|i| i.port).collect();
        assert!(ports.contains(&(s.addrs.tcp.port() as i32)) && ports.contains(&(s.addrs.http.port() as i32)));
    }
}

#[tokio::test]
async fn certified_responses_are_signed() {
    let s = common::start().await;
    let mut c = Connection::open(Protocol::Tcp, s.addrs.tcp, TIMEOUT, false).await.unwrap();
    let certify = ResolveOptions { certify: true, ..Default::default() };
    let r = c.resolve(b"TEST/1", &certify).await.unwrap();
    assert_eq!(r.code(), ResponseCode::SUCCESS);
    assert!(r.header.op_flags.contains(handled_proto::header::OpFlags::CT));
    let credential = r.credential.as_ref().expect("a certified response carries a credential");
    assert_eq!(credential.credential_type, b"HS_SIGNED");
    assert_eq!(credential.algorithm, b"SHA-256");
    let input = handled_proto::credential::signed_input(&r.envelope, &r.header_and_body, credential.session_counter);
    let PublicKey::Rsa { exponent, modulus } = PublicKey::from_bytes(&s.public_key).unwrap() else {
        panic!("server key is RSA")
    };
    let key = aws_lc_rs::rsa::PublicKeyComponents { n: unsigned(&modulus), e: unsigned(&exponent) };
    key.verify(&aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256, &input, &credential.signature)
        .expect("signature verifies with the site key");
    let mut tampered = input.clone();
    *tampered.last_mut().unwrap() ^= 1;
    assert!(key.verify(&aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256, &tampered, &credential.signature).is_err());
}
