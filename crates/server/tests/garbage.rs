//! Hostile input on every port must leave the server serving normally: random
//! bytes, truncated messages, lying length fields, 1 MB messages, slow peers.

mod common;

use handled_client::{encode_request, Connection, Protocol, ResolveOptions};
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::request::{RequestBody, ResolutionRequest};
use rand::{Rng, SeedableRng};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

const TIMEOUT: Duration = Duration::from_secs(5);

fn valid_request() -> Vec<u8> {
    let body =
        RequestBody::Resolution(ResolutionRequest { handle: b"TEST/1".to_vec(), indexes: vec![], types: vec![] });
    encode_request(&body, OpFlags::PO, 4242)
}

/// Inputs: random blobs, truncations and bit flips of a valid request, lying lengths.
fn hostile_inputs() -> Vec<Vec<u8>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let valid = valid_request();
    let mut v = Vec::new();
    for len in [0usize, 1, 19, 20, 21, 43, 44, 100, 511, 512, 513, 4000] {
        v.push((0..len).map(|_| rng.random()).collect());
    }
    for cut in 1..valid.len() {
        v.push(valid[..cut].to_vec());
    }
    for _ in 0..200 {
        let mut m = valid.clone();
        let i = rng.random_range(0..m.len());
        m[i] ^= 1 << rng.random_range(0..8);
        v.push(m);
    }
    for (offset, value) in
        [(16usize, u32::MAX), (16, 0x7fff_ffff), (16, 262_145), (16, 0), (20 + 20, u32::MAX), (20 + 24, 0x7fff_fff0)]
    {
        let mut m = valid.clone();
        m[offset..offset + 4].copy_from_slice(&value.to_be_bytes());
        v.push(m);
    }
    // A 1 MB message whose envelope announces it honestly (over the limit).
    let mut big = valid.clone();
    big.resize(1 << 20, 0xAB);
    let len = (big.len() - 20) as u32;
    big[16..20].copy_from_slice(&len.to_be_bytes());
    v.push(big);
    v
}

async fn still_serving(s: &common::TestServer) {
    for (p, addr) in [(Protocol::Udp, s.addrs.udp), (Protocol::Tcp, s.addrs.tcp), (Protocol::Http, s.addrs.http)] {
        let mut c = Connection::open(p, addr, TIMEOUT, false).await.unwrap();
        let r = c.resolve(b"TEST/1", &ResolveOptions::default()).await.unwrap();
        assert_eq!(r.code(), ResponseCode::SUCCESS, "{p:?} after garbage");
    }
}

/// Send on a fresh TCP connection, half-close, read whatever comes back.
async fn tcp_poke(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let _ = s.write_all(bytes).await;
    let _ = s.shutdown().await;
    let mut out = Vec::new();
    let _ =
        tokio::time::timeout(TIMEOUT, s.read_to_end(&mut out)).await.expect("server must answer or close, never hang");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_every_port_leaves_the_server_serving() {
    let s = common::start().await;
    let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for input in hostile_inputs() {
        if input.len() <= 65_000 {
            let _ = udp.send_to(&input, s.addrs.udp).await;
        }
        tcp_poke(s.addrs.tcp, &input).await;
        let mut http = format!(
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-hdl-message\r\nContent-Length: {}\r\n\r\n",
            input.len()
        )
        .into_bytes();
        http.extend_from_slice(&input);
        tcp_poke(s.addrs.http, &http).await;
        tcp_poke(s.addrs.http, &input).await; // not even HTTP
    }
    still_serving(&s).await;
}

#[tokio::test]
async fn protocol_errors_echo_the_request_id() {
    let s = common::start().await;
    let mut m = valid_request();
    m[20 + 20..20 + 24].copy_from_slice(&0x7fff_fff0u32.to_be_bytes()); // body length lies
    let reply = tcp_poke(s.addrs.tcp, &m).await;
    assert!(reply.len() >= 20 + 24, "an error response is expected");
    assert_eq!(&reply[8..12], &4242i32.to_be_bytes(), "request id echoed");
    assert_eq!(&reply[24..28], &ResponseCode::PROTOCOL_ERROR.0.to_be_bytes());

    // An envelope announcing more than 256 KiB is refused at once.
    let mut m = valid_request();
    m[16..20].copy_from_slice(&(1u32 << 20).to_be_bytes());
    let reply = tcp_poke(s.addrs.tcp, &m[..20]).await;
    assert_eq!(&reply[8..12], &4242i32.to_be_bytes());
    assert_eq!(&reply[24..28], &ResponseCode::PROTOCOL_ERROR.0.to_be_bytes());
}

#[tokio::test]
async fn truncated_tcp_message_gets_an_error_not_a_hang() {
    let s = common::start().await;
    let m = valid_request();
    let reply = tcp_poke(s.addrs.tcp, &m[..m.len() - 5]).await;
    assert_eq!(&reply[8..12], &4242i32.to_be_bytes());
    assert_eq!(&reply[24..28], &ResponseCode::PROTOCOL_ERROR.0.to_be_bytes());
}
