//! Authentication and authorization end to end: wrong keys, permission bits,
//! admin groups (nested HS_VLIST), server admins, non-public reads, and the
//! session failure modes (tampered MAC, replayed counter, terminated and
//! expired sessions, replayed challenge answers).

mod admin_common;

use handled_client::session::{encode_unit_with, ClientSession, UnitOptions};
use handled_client::{decode_response, AdminError, AdminSession, Credentials, KeyChoice, Protocol, ResolveOptions};
use handled_proto::codec::Codec;
use handled_proto::data::admin::{AdminPermissions, AdminRecord};
use handled_proto::data::vlist::ValueList;
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::request::{RequestBody, ResolutionRequest};
use handled_proto::value::{HandleValue, ValuePermissions, ValueReference};
use std::time::Duration;

fn url(i: i32) -> HandleValue {
    HandleValue::new(i, "URL", "https://example.org")
}

fn code(r: Result<impl Sized, AdminError>) -> ResponseCode {
    match r {
        Err(e) => e.code().unwrap_or_else(|| panic!("not a refusal: {e}")),
        Ok(_) => ResponseCode::SUCCESS,
    }
}

fn admin_value(index: i32, perms: u16, handle: &[u8], admin_index: i32) -> HandleValue {
    HandleValue::new(
        index,
        "HS_ADMIN",
        AdminRecord { permissions: AdminPermissions(perms), handle: handle.to_vec(), index: admin_index }.to_bytes(),
    )
}

fn secret_value(secret: &str) -> HandleValue {
    let mut v = HandleValue::new(300, "HS_SECKEY", secret);
    v.permissions = ValuePermissions(0x0c);
    v
}

fn vlist(index: i32, members: &[(&[u8], i32)]) -> HandleValue {
    let list = ValueList(members.iter().map(|(h, i)| ValueReference { handle: h.to_vec(), index: *i }).collect());
    HandleValue::new(index, "HS_VLIST", list.to_bytes())
}

#[tokio::test]
async fn wrong_keys_are_refused() {
    let s = admin_common::start().await;
    let handle = s.creds(KeyChoice::Secret).handle;
    for use_session in [true, false] {
        let wrong = Credentials::secret(handle.clone(), 300, "not the secret");
        let mut a = AdminSession::open(s.params(Protocol::Tcp, use_session), wrong).await.unwrap();
        assert_eq!(code(a.create(b"TEST/w", &[url(1)]).await), ResponseCode::AUTHENTICATION_FAILED);
        let other = handled_server::keys::RsaSigner::generate().unwrap();
        let wrong = Credentials::rsa_pkcs8(handle.clone(), 301, other.pkcs8()).unwrap();
        let mut a = AdminSession::open(s.params(Protocol::Tcp, use_session), wrong).await.unwrap();
        assert_eq!(code(a.create(b"TEST/w", &[url(1)]).await), ResponseCode::AUTHENTICATION_FAILED);
        // The right secret at the wrong index names no key.
        let wrong = Credentials::secret(handle.clone(), 301, "x");
        let mut a = AdminSession::open(s.params(Protocol::Tcp, use_session), wrong).await.unwrap();
        assert_eq!(code(a.create(b"TEST/w", &[url(1)]).await), ResponseCode::AUTHENTICATION_FAILED);
    }
}

#[tokio::test]
async fn permission_bits_groups_and_server_admins() {
    // Handle.Net's semantics: a listed server admin administers everything.
    let s = admin_common::start_with(|c| c.access.server_admins = vec!["TEST/ADMIN".into()]).await;
    let mut root = s.admin(Protocol::Tcp, KeyChoice::Secret, true).await;
    root.create(b"TEST/LIMITED", &[admin_value(100, 0x0fff, b"TEST/LIMITED", 300), secret_value("limited-secret")])
        .await
        .unwrap();
    // LIMITED may only list handles under TEST.
    root.add_values(b"0.NA/TEST", &[admin_value(101, AdminPermissions::LIST_HANDLES, b"TEST/LIMITED", 300)], false)
        .await
        .unwrap();
    let limited = || {
        AdminSession::open(
            s.params(Protocol::Tcp, true),
            Credentials::secret(b"TEST/LIMITED".to_vec(), 300, "limited-secret"),
        )
    };
    let mut l = limited().await.unwrap();
    assert!(l.list_handles(b"TEST").await.is_ok());
    assert_eq!(code(l.create(b"TEST/by-limited", &[url(1)]).await), ResponseCode::INVALID_ADMIN, "lacks ADD_HANDLE");
    l.delete(b"TEST/LIMITED").await.expect("its own HS_ADMIN grants everything on its handle");
    root.create(b"TEST/LIMITED", &[admin_value(100, 0x0fff, b"TEST/LIMITED", 300), secret_value("limited-secret")])
        .await
        .unwrap();

    // Through a group nested in a group: 0.NA/TEST → 200:TEST/OUTER → 200:TEST/INNER ∋ 300:TEST/LIMITED.
    root.create(b"TEST/INNER", &[vlist(200, &[(b"TEST/LIMITED", 300)])]).await.unwrap();
    root.create(b"TEST/OUTER", &[vlist(200, &[(b"TEST/INNER", 200)])]).await.unwrap();
    root.add_values(b"0.NA/TEST", &[admin_value(102, AdminPermissions::ADD_HANDLE, b"TEST/OUTER", 200)], false)
        .await
        .unwrap();
    let mut l = limited().await.unwrap();
    l.create(b"TEST/by-group", &[url(1)]).await.expect("group member may create");
    // Out of the inner group, the right is gone.
    root.modify_values(b"TEST/INNER", &[vlist(200, &[(b"TEST/SOMEONE", 300)])]).await.unwrap();
    assert_eq!(code(l.create(b"TEST/by-group-2", &[url(1)]).await), ResponseCode::INVALID_ADMIN);
    // An HS_ADMIN granting some but not all needed bits does not count.
    root.add_values(b"0.NA/TEST", &[admin_value(103, AdminPermissions::ADD_VALUE, b"TEST/LIMITED", 300)], false)
        .await
        .unwrap();
    assert_eq!(code(l.create(b"TEST/by-group-3", &[url(1)]).await), ResponseCode::INVALID_ADMIN);

    // Prefix operations are for server admins only.
    assert_eq!(code(l.home_prefix(b"NEW").await), ResponseCode::INVALID_ADMIN);
    assert_eq!(code(l.list_homed_prefixes().await), ResponseCode::INVALID_ADMIN);
    root.home_prefix(b"NEW").await.unwrap();
    assert!(root.list_homed_prefixes().await.unwrap().contains(&b"0.NA/NEW".to_vec()));
    root.create(b"NEW/1", &[url(1)]).await.expect("server admins may create under a newly homed prefix");
    assert_eq!(code(root.home_prefix(b"NEW/1").await), ResponseCode::INVALID_HANDLE);
    root.unhome_prefix(b"0.NA/NEW").await.unwrap();
    assert_eq!(code(root.create(b"NEW/2", &[url(1)]).await), ResponseCode::SERVER_NOT_RESP);
}

/// Two tenants on one server: by default each `<prefix>/ADMIN` administers its
/// own prefix only; listed in `server_admins`, it administers every prefix.
#[tokio::test]
async fn prefix_admins_are_scoped_unless_listed_as_server_admins() {
    let two_prefixes = |c: &mut handled_server::config::Config| c.prefixes = vec!["TEST".into(), "20.500.999".into()];
    let s = admin_common::start_with(two_prefixes).await;
    let mut test_admin = s.admin(Protocol::Tcp, KeyChoice::Secret, true).await;
    test_admin.create(b"TEST/own", &[url(1)]).await.expect("its own prefix");
    test_admin.modify_values(b"TEST/own", &[url(1)]).await.expect("its own handles, without HS_ADMIN values");
    test_admin.add_values(b"0.NA/TEST", &[url(7)], false).await.expect("its own prefix handle");
    assert_eq!(code(test_admin.create(b"20.500.999/a", &[url(1)]).await), ResponseCode::INVALID_ADMIN);
    assert_eq!(code(test_admin.delete(b"20.500.999/ADMIN").await), ResponseCode::INVALID_ADMIN);
    assert_eq!(code(test_admin.add_values(b"0.NA/20.500.999", &[url(7)], false).await), ResponseCode::INVALID_ADMIN);
    assert_eq!(code(test_admin.home_prefix(b"NEW").await), ResponseCode::INVALID_ADMIN, "no server-wide admin");
    let listed = test_admin.list_homed_prefixes().await.expect("a prefix admin lists what it administers");
    assert_eq!(listed, vec![b"0.NA/TEST".to_vec()], "its own prefix only");

    let s = admin_common::start_with(|c| {
        two_prefixes(c);
        c.access.server_admins = vec!["TEST/ADMIN".into()];
    })
    .await;
    let mut test_admin = s.admin(Protocol::Tcp, KeyChoice::Secret, true).await;
    test_admin.create(b"20.500.999/a", &[url(1)]).await.expect("a listed server admin administers every prefix");
    test_admin.home_prefix(b"NEW").await.expect("and homes prefixes");
}

#[tokio::test]
async fn non_public_values_need_read_permission() {
    let s = admin_common::start().await;
    let mut anon =
        handled_client::Connection::open(Protocol::Tcp, s.addrs.tcp, Duration::from_secs(5), false).await.unwrap();
    let r = anon.resolve(b"TEST/ADMIN", &ResolveOptions::default()).await.unwrap();
    assert!(
        handled_client::resolved_values(&r).unwrap().iter().all(|v| v.value_type != b"HS_SECKEY"),
        "PO hides secret keys"
    );
    let r = anon.resolve(b"TEST/ADMIN", &ResolveOptions { public_only: false, ..Default::default() }).await.unwrap();
    assert_eq!(r.code(), ResponseCode::AUTHENTICATION_NEEDED);
    for use_session in [true, false] {
        let mut a = s.admin(Protocol::Tcp, KeyChoice::PublicKey, use_session).await;
        let values = a.resolve_all(b"TEST/ADMIN").await.unwrap();
        assert!(values.iter().any(|v| v.value_type == b"HS_SECKEY"), "session={use_session}");
    }
}

/// Send `body` raw inside `a`'s session with the given counter/MAC tweaks.
async fn raw(a: &mut AdminSession, unit: &[u8], rid: i32) -> ResponseCode {
    let units = a.connection().exchange(unit, rid).await.unwrap();
    decode_response(&units[0], rid).unwrap().code()
}

fn resolution() -> RequestBody {
    RequestBody::Resolution(ResolutionRequest { handle: b"TEST/ADMIN".to_vec(), indexes: vec![], types: vec![] })
}

/// Options for a unit MACed with `session`, not encrypted.
fn macs_with(session: &ClientSession) -> UnitOptions<'_> {
    UnitOptions {
        version: session.version,
        session_id: session.id,
        session: Some(session),
        encrypt: false,
        suggested: None,
    }
}

#[tokio::test]
async fn session_failures() {
    let s = admin_common::start().await;
    let mut a = s.admin(Protocol::Tcp, KeyChoice::Secret, true).await;
    a.create(b"TEST/s", &[url(1)]).await.unwrap(); // authenticates the session
                                                   // PO keeps the answers public, hence unencrypted, for `raw` to read.
    let flags = OpFlags::REC | OpFlags::CA | OpFlags::PO;
    let session = a.session().unwrap();
    let opts = macs_with(session);
    let (unit, _) = encode_unit_with(&resolution(), flags, 77, opts);
    let (tampered_unit, _) = encode_unit_with(&resolution(), flags, 78, opts);
    let (encrypted, _) = encode_unit_with(&resolution(), flags, 79, UnitOptions { encrypt: true, ..opts });
    let mut tampered = tampered_unit.clone();
    *tampered.last_mut().unwrap() ^= 1; // last byte of the MAC
    assert_eq!(raw(&mut a, &unit, 77).await, ResponseCode::SUCCESS);
    assert_eq!(raw(&mut a, &unit, 77).await, ResponseCode::SESSION_MESSAGE_REJECTED, "replayed counter");
    assert_eq!(raw(&mut a, &tampered, 78).await, ResponseCode::INVALID_SESSION_KEY, "tampered MAC");
    assert_eq!(raw(&mut a, &encrypted, 79).await, ResponseCode::SUCCESS, "encrypted request");
    // After terminate the session is unknown.
    let id = a.session_id().unwrap();
    let session_params = s.params(Protocol::Tcp, true);
    a.close().await.unwrap();
    let mut b = AdminSession::open(session_params, s.creds(KeyChoice::Secret)).await.unwrap();
    let mut env_unit = unit.clone();
    env_unit[4..8].copy_from_slice(&id.to_be_bytes());
    assert_eq!(raw(&mut b, &env_unit, 77).await, ResponseCode::SESSION_TIMEOUT);
}

#[tokio::test]
async fn expired_sessions_and_replayed_answers() {
    let s = admin_common::start_with(|c| c.auth.max_session_secs = 1).await;
    let mut a = s.admin(Protocol::Tcp, KeyChoice::Secret, true).await;
    a.create(b"TEST/e1", &[url(1)]).await.unwrap();
    let session = a.session().unwrap();
    let opts = macs_with(session);
    let (unit, _) = encode_unit_with(&resolution(), OpFlags::REC | OpFlags::CA | OpFlags::PO, 90, opts);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(raw(&mut a, &unit, 90).await, ResponseCode::SESSION_TIMEOUT, "idle past the timeout");
    // The client sets up a new session and carries on.
    a.create(b"TEST/e2", &[url(1)]).await.unwrap();

    // Plain challenge/response: an answer works once.
    let mut p = s.admin(Protocol::Tcp, KeyChoice::Secret, false).await;
    let body = RequestBody::CreateHandle { handle: b"TEST/once".to_vec(), values: vec![url(1)] };
    let (unit, hb) = encode_unit_with(&body, OpFlags::REC, 91, UnitOptions::default());
    let units = p.connection().exchange(&unit, 91).await.unwrap();
    let challenge = decode_response(&units[0], 91).unwrap();
    assert_eq!(challenge.code(), ResponseCode::AUTHENTICATION_NEEDED);
    let handled_proto::response::ResponseBody::Challenge { nonce } = &challenge.body else { panic!() };
    let digest = challenge.digest.clone().unwrap();
    assert!(digest.matches(&hb));
    let secret = s.admin_secret();
    let alg = handled_proto::crypto::seckey::AnswerAlg::Pbkdf2HmacSha1 { iterations: 1000, key_bits: 160 };
    let answer = handled_proto::crypto::seckey::answer(alg, &secret, nonce, &digest.digest, &[5; 16]);
    let answer_body = RequestBody::ChallengeAnswer(handled_proto::request::ChallengeAnswer {
        auth_type: b"HS_SECKEY".to_vec(),
        identity_handle: b"TEST/ADMIN".to_vec(),
        identity_index: 300,
        answer: answer.to_vec(),
    });
    let opts = UnitOptions { session_id: challenge.envelope.session_id, ..UnitOptions::default() };
    let (answer_unit, _) = encode_unit_with(&answer_body, OpFlags::REC, 92, opts);
    assert_eq!(raw(&mut p, &answer_unit, 92).await, ResponseCode::SUCCESS);
    assert_eq!(raw(&mut p, &answer_unit, 92).await, ResponseCode::AUTHEN_TIMEOUT, "replayed answer");
}

/// VERIFY_CHALLENGE (201) as a server: valid for the right secret, not for a wrong one.
#[tokio::test]
async fn verify_challenge_for_other_servers() {
    let s = admin_common::start().await;
    let secret = s.admin_secret();
    let (nonce, digest) = ([3u8; 16], [4u8; 32]);
    let mut conn =
        handled_client::Connection::open(Protocol::Tcp, s.addrs.tcp, Duration::from_secs(5), false).await.unwrap();
    for (key, valid) in [(secret.clone(), true), (b"wrong".to_vec(), false)] {
        let answer = handled_proto::crypto::seckey::answer(
            handled_proto::crypto::seckey::AnswerAlg::Sha1,
            &key,
            &nonce,
            &digest,
            &[],
        );
        let body = admin_common::verify_admin_challenge(&nonce, &digest, answer.to_vec());
        let r = conn.request(&body, OpFlags::CT | OpFlags::RD).await.unwrap().remove(0);
        assert_eq!(r.code(), ResponseCode::SUCCESS);
        assert_eq!(r.body, handled_proto::response::ResponseBody::VerifyResult { valid });
        assert!(r.credential.is_some(), "CT: the verdict is signed");
    }
}
