//! The native TCP listener defers accept until a request's first bytes arrive
//! (transport/tcp.rs, `DEFER_ACCEPT`, issue 46). A client that connects and
//! waits before sending is still answered; one that sends nothing is still
//! closed, after the deferral and the idle timeout, not kept for ever. A
//! request without KA answered at once ends its connection with a reset.

use handled_client::decode_response;
use handled_client::session::{encode_unit_with, UnitOptions};
use handled_proto::envelope::ENVELOPE_LEN;
use handled_proto::header::OpFlags;
use handled_proto::request::{RequestBody, ResolutionRequest};
use handled_server::transport::tcp::DEFER_ACCEPT;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const IDLE_SECS: u64 = 3;

async fn server() -> handled_testkit::TestServer {
    handled_testkit::start(|c| c.transport.tcp_idle_timeout_secs = IDLE_SECS).await
}

/// Send a resolution request and read its answer (any response code).
async fn resolve(stream: &mut TcpStream, request_id: i32) {
    resolve_with(stream, request_id, OpFlags::REC).await
}

async fn resolve_with(stream: &mut TcpStream, request_id: i32, flags: OpFlags) {
    let body =
        RequestBody::Resolution(ResolutionRequest { handle: b"TEST/none".to_vec(), indexes: vec![], types: vec![] });
    let unit = encode_unit_with(&body, flags, request_id, UnitOptions::default()).0;
    stream.write_all(&unit).await.unwrap();
    let mut reply = vec![0u8; ENVELOPE_LEN];
    tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut reply)).await.expect("answered").unwrap();
    let length = u32::from_be_bytes(reply[16..20].try_into().unwrap()) as usize;
    reply.resize(ENVELOPE_LEN + length, 0);
    stream.read_exact(&mut reply[ENVELOPE_LEN..]).await.unwrap();
    decode_response(&reply, request_id).expect("a response to this request");
}

#[tokio::test]
async fn requests_sent_within_and_after_the_deferral_are_answered() {
    let s = server().await;
    let mut soon = TcpStream::connect(s.addrs.tcp).await.unwrap();
    let mut late = TcpStream::connect(s.addrs.tcp).await.unwrap();
    tokio::time::sleep(DEFER_ACCEPT / 2).await;
    resolve(&mut soon, 1).await;
    // Past the deferral the kernel hands the silent connection over anyway;
    // it is then an idle connection like any other, within its idle timeout.
    tokio::time::sleep(DEFER_ACCEPT).await;
    resolve_with(&mut late, 2, OpFlags::REC | OpFlags::KA).await;
    resolve(&mut late, 3).await; // and kept for a further request
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed() {
    let s = server().await;
    let mut silent = TcpStream::connect(s.addrs.tcp).await.unwrap();
    let started = Instant::now();
    let limit = DEFER_ACCEPT + Duration::from_secs(IDLE_SECS) + Duration::from_secs(5);
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(limit, silent.read(&mut byte))
        .await
        .expect("closed within the deferral and the idle timeout");
    assert!(matches!(read, Ok(0) | Err(_)), "nothing but a close: {read:?}");
    assert!(
        started.elapsed() >= Duration::from_secs(IDLE_SECS),
        "not before the idle timeout: {:?}",
        started.elapsed()
    );
}

/// `handled`'s client keeps a TCP connection (asking for it with KA), and
/// sends again on a new one when the server closed the kept one meanwhile
/// (here its idle timeout; Handle.Net closes after every answer).
#[tokio::test]
async fn a_kept_client_connection_is_reused_then_replaced_once_the_server_closed_it() {
    use handled_client::{Connection, Protocol, ResolveOptions};
    let s = server().await;
    let mut conn = Connection::open(Protocol::Tcp, s.addrs.tcp, Duration::from_secs(10), true).await.unwrap();
    let options = ResolveOptions::default();
    conn.resolve(b"TEST/none", &options).await.unwrap();
    conn.resolve(b"TEST/none", &options).await.unwrap();
    assert_eq!(conn.connections_opened(), 1, "kept between requests");
    tokio::time::sleep(Duration::from_secs(IDLE_SECS) + Duration::from_secs(2)).await;
    conn.resolve(b"TEST/none", &options).await.expect("sent again on a new connection");
    assert_eq!(conn.connections_opened(), 2);
}

/// A request without KA (the Java client's: a connection per request) whose
/// answer the client acknowledged at once (loopback) ends the connection with
/// a reset right after the answer, not with a FIN after the idle timeout; with
/// KA the connection is kept for the next request.
#[tokio::test]
async fn without_ka_an_acknowledged_answer_ends_the_connection_with_a_reset() {
    let s = server().await;
    let mut once = TcpStream::connect(s.addrs.tcp).await.unwrap();
    resolve(&mut once, 1).await;
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(IDLE_SECS) / 2, once.read(&mut byte))
        .await
        .expect("ended before the idle timeout");
    assert_eq!(read.map_err(|e| e.kind()), Err(std::io::ErrorKind::ConnectionReset), "a reset, not a FIN");

    let mut kept = TcpStream::connect(s.addrs.tcp).await.unwrap();
    resolve_with(&mut kept, 2, OpFlags::REC | OpFlags::KA).await;
    resolve_with(&mut kept, 3, OpFlags::REC | OpFlags::KA).await;
    resolve(&mut kept, 4).await;
}
