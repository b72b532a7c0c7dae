//! Hostile peers against authentication state (regression tests of the
//! black-box trial, issue 13; the rerunnable attack tools are in
//! `tests/hostile/`). Each test attacks an in-process server on loopback from
//! its own address (127.0.0.2, …), boundedly, then checks that an ordinary
//! client (from 127.0.0.1) is still served.

mod admin_common;

use handled_client::session::{encode_unit_with, UnitOptions};
use handled_client::{decode_response, KeyChoice, Protocol, Response};
use handled_proto::envelope::ENVELOPE_LEN;
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::request::RequestBody;
use handled_proto::value::HandleValue;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// A TCP connection to `to` from the loopback address `from`.
async fn connect_from(from: [u8; 4], to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(IpAddr::from(from), 0)).unwrap();
    socket.connect(to).await.expect("connect")
}

/// Send one request unit and read the one response unit.
async fn exchange(stream: &mut TcpStream, unit: &[u8], request_id: i32) -> Response {
    stream.write_all(unit).await.unwrap();
    let mut envelope = [0u8; ENVELOPE_LEN];
    tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut envelope)).await.unwrap().unwrap();
    let length = u32::from_be_bytes(envelope[16..20].try_into().unwrap()) as usize;
    let mut unit = envelope.to_vec();
    unit.resize(ENVELOPE_LEN + length, 0);
    stream.read_exact(&mut unit[ENVELOPE_LEN..]).await.unwrap();
    decode_response(&unit, request_id).unwrap()
}

fn url(i: i32) -> HandleValue {
    HandleValue::new(i, "URL", "https://example.org")
}

/// F3: every challenged request (up to 256 KiB) was kept until its challenge
/// expired, 100,000 of them, swept only when full: 20 s of requests took RSS to
/// 2.3 GB. Now one peer holds at most its share of the challenge budget and is
/// refused (too busy) beyond it, while others are still challenged and served.
#[tokio::test]
async fn one_peer_cannot_fill_memory_with_challenged_requests() {
    let s = admin_common::start().await;
    let mut attacker = connect_from([127, 0, 0, 2], s.addrs.tcp).await;
    let big = HandleValue::new(1, "URL", "x".repeat(200 * 1024));
    let (mut challenged, mut busy) = (0, 0);
    for rid in 1..=60 {
        let body =
            RequestBody::CreateHandle { handle: format!("TEST/f3-{rid}").into_bytes(), values: vec![big.clone()] };
        let (unit, _) = encode_unit_with(&body, OpFlags::REC, rid, UnitOptions::default());
        match exchange(&mut attacker, &unit, rid).await.code() {
            ResponseCode::AUTHENTICATION_NEEDED => challenged += 1,
            ResponseCode::SERVER_TOO_BUSY => busy += 1,
            other => panic!("request {rid}: {other:?}"),
        }
    }
    assert!(busy > 0, "all {challenged} challenged requests of 200 KiB were kept");
    assert!(challenged * 200 < 32 * 1024 / 8, "{challenged} kept: more than a peer's share of 32 MiB");
    // Others are still challenged, and served once they answer.
    let mut admin = s.admin(Protocol::Tcp, KeyChoice::Secret, false).await;
    admin.create(b"TEST/f3-ordinary", &[url(1)]).await.expect("an ordinary admin is served");
    let mut admin = s.admin(Protocol::Tcp, KeyChoice::Secret, true).await;
    admin.create(b"TEST/f3-in-session", &[url(1)]).await.expect("and one in a session");
}

/// A DH session setup (mode 4) claiming `identity`, asking for 24 hours.
fn session_setup(identity: &[u8], request_id: i32) -> Vec<u8> {
    use handled_proto::codec::Codec;
    use handled_proto::crypto::dh;
    use handled_proto::session::{KeyExchange, SessionSetupRequest};
    let p = dh::rfc2409_group2_p();
    let y = dh::public_value(&p, &[2], &[7; dh::SECRET_LEN]).unwrap();
    let key = handled_proto::data::pubkey::PublicKey::dh(&y, &p, &[2]);
    let body = RequestBody::SessionSetup(SessionSetupRequest {
        timeout: 86_400,
        identity_handle: identity.to_vec(),
        identity_index: 300,
        exchange: KeyExchange::DiffieHellman(key.to_bytes()),
    });
    // No CT: the attack needs no signed answer (and signing is slow in debug builds).
    encode_unit_with(&body, OpFlags::REC, request_id, UnitOptions::default()).0
}

/// F4: anonymous DH setups stored their claimed identity with no size limit,
/// for up to 24 hours, 200,000 of them (8k setups: RSS 1.9 GB), and a full
/// table refused everyone. Now identities are bounded, one peer holds a few
/// unauthenticated sessions, and others still set up sessions and authenticate.
#[tokio::test]
async fn anonymous_session_setups_are_bounded_and_lock_nobody_out() {
    let s = admin_common::start().await;
    let mut attacker = connect_from([127, 0, 0, 2], s.addrs.tcp).await;
    let huge = format!("TEST/{}", "x".repeat(100 * 1024));
    let code = exchange(&mut attacker, &session_setup(huge.as_bytes(), 1), 1).await.code();
    assert_eq!(code, ResponseCode::INVALID_SESSIONSETUP_REQUEST, "a 100 KiB identity is refused");
    let (mut set_up, mut busy) = (0, 0);
    for rid in 2..=301 {
        match exchange(&mut attacker, &session_setup(b"TEST/ADMIN", rid), rid).await.code() {
            ResponseCode::SUCCESS => set_up += 1,
            ResponseCode::SERVER_TOO_BUSY => busy += 1,
            other => panic!("setup {rid}: {other:?}"),
        }
    }
    assert!(busy > 0 && set_up <= 256, "{set_up} unauthenticated sessions kept for one peer");
    let mut admin = s.admin(Protocol::Tcp, KeyChoice::Secret, true).await;
    admin.create(b"TEST/f4-in-session", &[url(1)]).await.expect("others still set up sessions and authenticate");
}

fn pbkdf2_answer(secret: &[u8], nonce: &[u8], digest: &[u8], iterations: i32) -> Vec<u8> {
    use handled_proto::crypto::seckey::{answer, AnswerAlg};
    answer(AnswerAlg::Pbkdf2HmacSha1 { iterations, key_bits: 160 }, secret, nonce, digest, &[5; 16]).to_vec()
}

/// F6: a PBKDF2 answer names its own cost, up to 200,000 iterations × 1,024 bits
/// (~0.2 s of server CPU), and VERIFY_CHALLENGE over UDP needs no challenge:
/// 100 datagrams/s pinned both cores and starved resolution. Now the server
/// computes at most what real clients ask for (10,000 × 160), refusing more.
#[tokio::test]
async fn pbkdf2_answers_cannot_ask_for_unbounded_work() {
    let s = admin_common::start().await;
    let secret = s.admin_secret();
    // VERIFY_CHALLENGE over UDP with the right secret but more iterations than the cap.
    let udp = tokio::net::UdpSocket::bind("127.0.0.2:0").await.unwrap();
    let (nonce, digest) = ([3u8; 16], [4u8; 32]);
    for (iterations, valid) in [(20_000, false), (10_000, true)] {
        let body =
            admin_common::verify_admin_challenge(&nonce, &digest, pbkdf2_answer(&secret, &nonce, &digest, iterations));
        let (unit, _) = encode_unit_with(&body, OpFlags::REC, iterations, UnitOptions::default());
        let reply =
            admin_common::Udp { socket: &udp, to: s.addrs.udp }.ask(&[unit], iterations, Duration::from_secs(2)).await;
        let r = decode_response(&reply, iterations).unwrap();
        assert_eq!(r.body, handled_proto::response::ResponseBody::VerifyResult { valid }, "{iterations} iterations");
    }
    // An answer to a real challenge: the same cap.
    let mut conn = connect_from([127, 0, 0, 2], s.addrs.tcp).await;
    for (rid, iterations, expected) in
        [(11, 20_000, ResponseCode::AUTHENTICATION_FAILED), (13, 10_000, ResponseCode::SUCCESS)]
    {
        let body = RequestBody::CreateHandle { handle: format!("TEST/f6-{rid}").into_bytes(), values: vec![url(1)] };
        let (unit, _) = encode_unit_with(&body, OpFlags::REC, rid, UnitOptions::default());
        let challenge = exchange(&mut conn, &unit, rid).await;
        let handled_proto::response::ResponseBody::Challenge { nonce } = &challenge.body else {
            panic!("{challenge:?}")
        };
        let answer = RequestBody::ChallengeAnswer(handled_proto::request::ChallengeAnswer {
            auth_type: b"HS_SECKEY".to_vec(),
            identity_handle: b"TEST/ADMIN".to_vec(),
            identity_index: 300,
            answer: pbkdf2_answer(&secret, nonce, &challenge.digest.clone().unwrap().digest, iterations),
        });
        let opts = UnitOptions { session_id: challenge.envelope.session_id, ..UnitOptions::default() };
        let (unit, _) = encode_unit_with(&answer, OpFlags::REC, rid + 1, opts);
        assert_eq!(exchange(&mut conn, &unit, rid + 1).await.code(), expected, "{iterations} iterations");
    }
    let mut admin = s.admin(Protocol::Tcp, KeyChoice::Secret, true).await;
    admin.create(b"TEST/f6-ordinary", &[url(1)]).await.expect("ordinary clients still authenticate");
}

/// The datagrams of a multi-datagram UDP request.
fn udp_datagrams(unit: &[u8]) -> Vec<Vec<u8>> {
    use handled_proto::codec::Codec;
    let envelope = handled_proto::envelope::Envelope::read(&mut handled_proto::codec::Reader::new(unit)).unwrap();
    handled_proto::udp::split_datagrams(&envelope, &unit[ENVELOPE_LEN..], true)
}

fn long_resolution(request_id: i32) -> Vec<u8> {
    let body = RequestBody::Resolution(handled_proto::request::ResolutionRequest {
        handle: format!("TEST/{}", "x".repeat(700)).into_bytes(),
        indexes: vec![],
        types: vec![],
    });
    encode_unit_with(&body, OpFlags::REC | OpFlags::PO, request_id, UnitOptions::default()).0
}

/// F7: unfinished multi-datagram UDP requests were bounded only in count (1,024
/// per socket, ~300 MB of chunks) and dropped only when that was full: one
/// peer starting many left no room for anyone's. Now each peer has a share of a
/// byte budget, unfinished requests go by age, and others' requests complete.
#[tokio::test]
async fn unfinished_udp_requests_of_one_peer_leave_room_for_others() {
    let s = admin_common::start().await;
    let attacker = tokio::net::UdpSocket::bind("127.0.0.2:0").await.unwrap();
    for rid in 1..=1100 {
        let first = udp_datagrams(&long_resolution(rid)).remove(0);
        attacker.send_to(&first, s.addrs.udp).await.unwrap();
        if rid % 100 == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await; // within the socket buffer
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let datagrams = udp_datagrams(&long_resolution(5000));
    assert!(datagrams.len() > 1);
    // Sent again while unanswered: the property is that it completes at all.
    let reply =
        admin_common::Udp { socket: &client, to: s.addrs.udp }.ask(&datagrams, 5000, Duration::from_secs(2)).await;
    assert_eq!(decode_response(&reply, 5000).unwrap().code(), ResponseCode::HANDLE_NOT_FOUND);
}

/// F15: a value over 1 MiB (which the decoders could not read back) was
/// refused with HTTP 500 "Internal storage error"; it is the client's mistake:
/// 400 with a message naming the limit.
#[tokio::test]
async fn a_value_over_a_mebibyte_is_a_client_error() {
    use base64::Engine;
    let s = admin_common::start_with(|c| c.access.allow_plain_http_admin = true).await;
    let user = format!("300%3ATEST%2FADMIN:{}", String::from_utf8(s.admin_secret()).unwrap());
    let auth = base64::engine::general_purpose::STANDARD.encode(user);
    let body = format!(
        r#"{{"values":[{{"index":1,"type":"URL","data":{{"format":"string","value":"{}"}}}}]}}"#,
        "x".repeat(1_100_000)
    );
    let mut http = TcpStream::connect(s.addrs.http).await.unwrap();
    let request = format!(
        "PUT /api/handles/TEST/f15-big HTTP/1.1\r\nHost: t\r\nAuthorization: Basic {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    http.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), http.read_to_end(&mut answer)).await.unwrap().unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("\"responseCode\":202") && answer.contains("1048576"), "{answer}");
}

/// F15: a 71-byte UDP request brought back 257 KB (3,624 datagrams) for a
/// 240-value record, to whatever address the request claimed. Now an answer
/// over `udp_max_response_bytes` is one short "ask over TCP" datagram (RC 500,
/// on which the Java client moves to TCP), and TCP serves the record.
#[tokio::test]
async fn a_small_udp_request_cannot_bring_back_a_huge_answer() {
    let s = admin_common::start().await;
    let mut admin = s.admin(Protocol::Tcp, KeyChoice::Secret, true).await;
    let values: Vec<HandleValue> =
        (1..=240).map(|i| HandleValue::new(i, "URL", format!("https://example.org/{}", "v".repeat(1000)))).collect();
    admin.create(b"TEST/f15-240", &values).await.unwrap();
    let body = RequestBody::Resolution(handled_proto::request::ResolutionRequest {
        handle: b"TEST/f15-240".to_vec(),
        indexes: vec![],
        types: vec![],
    });
    let encode = |rid| encode_unit_with(&body, OpFlags::REC | OpFlags::PO, rid, UnitOptions::default()).0;
    let unit = encode(31);
    assert!(unit.len() < 100);
    let udp = tokio::net::UdpSocket::bind("127.0.0.2:0").await.unwrap();
    // Each try has its own request id, so a late answer to an earlier try is
    // not counted as a second datagram of this one.
    let (mut answered, mut by_request) = (None, std::collections::HashMap::<i32, Vec<Vec<u8>>>::new());
    for rid in 31..61 {
        udp.send_to(&encode(rid), s.addrs.udp).await.unwrap();
        let mut buf = [0u8; 2048];
        let mut wait = Duration::from_secs(2);
        while let Ok(Ok(n)) = tokio::time::timeout(wait, udp.recv(&mut buf)).await {
            let got = admin_common::request_id_of(&buf[..n]).unwrap();
            by_request.entry(got).or_default().push(buf[..n].to_vec());
            answered.get_or_insert(got);
            wait = Duration::from_millis(500); // then every datagram of the answer
        }
        if answered.is_some() {
            break;
        }
    }
    let rid = answered.expect("no UDP answer in 30 tries");
    let datagrams = &by_request[&rid];
    let bytes: usize = datagrams.iter().map(Vec::len).sum();
    assert_eq!(datagrams.len(), 1, "{bytes} bytes in {} datagrams for a {}-byte request", datagrams.len(), unit.len());
    let r = decode_response(&datagrams[0], rid).unwrap();
    assert_eq!(r.code(), ResponseCode::SESSION_TIMEOUT);
    let handled_proto::response::ResponseBody::Error { message } = &r.body else { panic!("{:?}", r.body) };
    assert!(String::from_utf8_lossy(message).contains("ask over TCP"));
    let mut tcp = connect_from([127, 0, 0, 2], s.addrs.tcp).await;
    let r = exchange(&mut tcp, &unit, 31).await;
    assert_eq!(handled_client::resolved_values(&r).unwrap().len(), 240, "TCP serves it");
}
