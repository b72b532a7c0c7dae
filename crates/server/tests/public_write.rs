//! Publicly writable values (§3.5) against an anonymous writer (F13 of the
//! security trial): anyone may change such a value's data, but not turn it
//! into, or change, a value that grants authority (a key, a group, HS_ADMIN),
//! or an anonymous user could add a secret key to an admin handle and then
//! authenticate with it.

mod admin_common;

use handled_client::session::{encode_unit_with, UnitOptions};
use handled_client::{decode_response, AdminError, AdminSession, Connection, Credentials, KeyChoice, Protocol};
use handled_proto::codec::Codec;
use handled_proto::data::vlist::ValueList;
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::request::RequestBody;
use handled_proto::value::{HandleValue, ValuePermissions, ValueReference};
use std::time::Duration;

fn public_writable(value_type: &str, data: impl Into<Vec<u8>>) -> HandleValue {
    let mut v = HandleValue::new(2, value_type, data);
    v.permissions = ValuePermissions(0x0f);
    v
}

/// MODIFY_VALUE of TEST/ADMIN sent without any credentials.
async fn anonymous_modify(anon: &mut Connection, rid: i32, value: HandleValue) -> ResponseCode {
    let body = RequestBody::ModifyValue { handle: b"TEST/ADMIN".to_vec(), values: vec![value] };
    let (unit, _) = encode_unit_with(&body, OpFlags::REC, rid, UnitOptions::default());
    let units = anon.exchange(&unit, rid).await.unwrap();
    decode_response(&units[0], rid).unwrap().code()
}

#[tokio::test]
async fn an_anonymous_writer_cannot_make_a_key() {
    let s = admin_common::start().await;
    let mut root = s.admin(Protocol::Tcp, KeyChoice::Secret, true).await;
    root.add_values(b"TEST/ADMIN", &[public_writable("URL", "https://example.org/a")], false).await.unwrap();
    let mut anon = Connection::open(Protocol::Tcp, s.addrs.tcp, Duration::from_secs(5), false).await.unwrap();
    // What public write is for still works.
    let changed = public_writable("URL", "https://example.org/b");
    assert_eq!(anonymous_modify(&mut anon, 1, changed.clone()).await, ResponseCode::SUCCESS);

    let group = ValueList(vec![ValueReference { handle: b"TEST/ANYONE".to_vec(), index: 300 }]).to_bytes();
    let attacks = [
        public_writable("HS_SECKEY", "pwned"),
        public_writable("hs_seckey.x", "pwned"),
        public_writable("HS_PUBKEY", s.state.key.public_key().to_bytes()),
        public_writable("HS_VLIST", group),
        public_writable("HS_PRIVKEY", "x"),
    ];
    for (rid, attack) in (2..).zip(attacks) {
        let code = anonymous_modify(&mut anon, rid, attack.clone()).await;
        assert_eq!(code, ResponseCode::AUTHENTICATION_NEEDED, "{}", String::from_utf8_lossy(&attack.value_type));
    }
    let stored = root.resolve_all(b"TEST/ADMIN").await.unwrap();
    let two = stored.iter().find(|v| v.index == 2).unwrap();
    assert_eq!((two.value_type.as_slice(), two.data.as_slice()), (&b"URL"[..], &b"https://example.org/b"[..]));

    // And so the secret the attacker chose opens nothing.
    let forged = Credentials::secret(b"TEST/ADMIN".to_vec(), 2, "pwned");
    let mut a = AdminSession::open(s.params(Protocol::Tcp, false), forged).await.unwrap();
    let refused = a.create(b"TEST/by-anyone", &[HandleValue::new(1, "URL", "x")]).await;
    let code = refused.as_ref().err().and_then(AdminError::code);
    assert_eq!(code, Some(ResponseCode::AUTHENTICATION_FAILED), "{refused:?}");

    // The admin may still make it a key.
    root.modify_values(b"TEST/ADMIN", &[public_writable("HS_SECKEY", "chosen by the admin")]).await.unwrap();
}
