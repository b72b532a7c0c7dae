//! Administration end to end with our client: every operation over TCP and
//! HTTP, authenticated with the secret key and the RSA key, in a DH session
//! and with plain challenge/response.

mod admin_common;

use handled_client::{AdminError, KeyChoice, Protocol};
use handled_proto::header::ResponseCode;
use handled_proto::value::{HandleValue, ValuePermissions};

fn url(i: i32, u: &str) -> HandleValue {
    HandleValue::new(i, "URL", u)
}

fn code(r: Result<impl Sized, AdminError>) -> ResponseCode {
    match r {
        Err(e) => e.code().unwrap_or_else(|| panic!("not a refusal: {e}")),
        Ok(_) => ResponseCode::SUCCESS,
    }
}

#[tokio::test]
async fn full_lifecycle_every_transport_key_and_mode() {
    let s = admin_common::start().await;
    let mut n = 0;
    for protocol in [Protocol::Tcp, Protocol::Http] {
        for choice in [KeyChoice::Secret, KeyChoice::PublicKey] {
            for use_session in [true, false] {
                n += 1;
                let ctx = format!("{protocol:?} {choice:?} session={use_session}");
                let mut a = s.admin(protocol, choice, use_session).await;
                assert_eq!(a.session_id().is_some(), use_session);
                let h = format!("TEST/life-{n}").into_bytes();
                assert_eq!(a.create(&h, &[url(1, "https://a.example")]).await.expect(&ctx), h);
                assert_eq!(
                    code(a.create(&h, &[url(1, "https://b.example")]).await),
                    ResponseCode::HANDLE_ALREADY_EXISTS,
                    "{ctx}"
                );
                a.add_values(&h, &[HandleValue::new(2, "EMAIL", "x@example.org")], false).await.expect(&ctx);
                a.modify_values(&h, &[url(1, "https://moved.example")]).await.expect(&ctx);
                let values = a.resolve_all(&h).await.expect(&ctx);
                assert_eq!(values.iter().map(|v| v.index).collect::<Vec<_>>(), vec![1, 2], "{ctx}");
                assert_eq!(values[0].data, b"https://moved.example", "{ctx}");
                assert!(values[0].timestamp > 0, "{ctx}: server stamps values");
                a.remove_values(&h, &[2]).await.expect(&ctx);
                assert_eq!(code(a.remove_values(&h, &[2]).await), ResponseCode::VALUES_NOT_FOUND, "{ctx}");
                let listed = a.list_handles(b"TEST").await.expect(&ctx);
                assert!(listed.iter().any(|l| l.eq_ignore_ascii_case(&h)), "{ctx}: {listed:?}");
                a.delete(&h).await.expect(&ctx);
                assert_eq!(code(a.delete(&h).await), ResponseCode::HANDLE_NOT_FOUND, "{ctx}");
                a.close().await.expect(&ctx);
            }
        }
    }
}

#[tokio::test]
async fn create_flags_and_value_rules() {
    let s = admin_common::start().await;
    let mut a = s.admin(Protocol::Tcp, KeyChoice::Secret, true).await;
    // MINT appends a UUID to the given text.
    let minted = a.create_with(b"TEST/doc-", &[url(1, "https://m.example")], false, true).await.unwrap();
    assert!(
        minted.starts_with(b"TEST/doc-") && minted.len() == b"TEST/doc-".len() + 36,
        "{}",
        String::from_utf8_lossy(&minted)
    );
    // OW replaces the whole record.
    a.create(b"TEST/ow", &[url(1, "https://1.example"), url(2, "https://2.example")]).await.unwrap();
    a.create_with(b"TEST/ow", &[url(3, "https://3.example")], true, false).await.unwrap();
    assert_eq!(a.resolve_all(b"TEST/ow").await.unwrap().iter().map(|v| v.index).collect::<Vec<_>>(), vec![3]);
    // Index rules.
    assert_eq!(code(a.create(b"TEST/bad", &[url(0, "x")]).await), ResponseCode::INVALID_VALUE);
    assert_eq!(code(a.create(b"TEST/bad", &[url(1, "x"), url(1, "y")]).await), ResponseCode::VALUE_ALREADY_EXISTS);
    assert_eq!(code(a.add_values(b"TEST/ow", &[url(3, "z")], false).await), ResponseCode::VALUE_ALREADY_EXISTS);
    a.add_values(b"TEST/ow", &[url(3, "https://z.example")], true).await.unwrap();
    assert_eq!(code(a.add_values(b"TEST/ow", &[], false).await), ResponseCode::INVALID_VALUE);
    assert_eq!(code(a.modify_values(b"TEST/ow", &[url(9, "x")]).await), ResponseCode::VALUES_NOT_FOUND);
    assert_eq!(code(a.add_values(b"TEST/missing", &[url(1, "x")], false).await), ResponseCode::HANDLE_NOT_FOUND);
    assert_eq!(code(a.create(b"ELSEWHERE/x", &[url(1, "x")]).await), ResponseCode::SERVER_NOT_RESP);
    // A value without admin write can't be changed, even by an admin.
    let mut frozen = url(4, "https://frozen.example");
    frozen.permissions = ValuePermissions(ValuePermissions::ADMIN_READ | ValuePermissions::PUBLIC_READ);
    a.add_values(b"TEST/ow", &[frozen], false).await.unwrap();
    assert_eq!(code(a.modify_values(b"TEST/ow", &[url(4, "x")]).await), ResponseCode::INSUFFICIENT_PERMISSIONS);
    // Long listings come in several messages of 50.
    for i in 0..120 {
        a.create(format!("TEST/many-{i:03}").as_bytes(), &[url(1, "https://x.example")]).await.unwrap();
    }
    let listed = a.list_handles(b"0.NA/TEST").await.unwrap();
    assert_eq!(listed.iter().filter(|h| h.starts_with(b"TEST/many-")).count(), 120);
}
