//! `--raw`: targets that do not speak the protocol (the echo references) are
//! measured by counting replies that carry the request's id; without it such
//! a reply is malformed, and a reply with another id is never counted.

mod common;
use common::closed;

use handled_bench::{run, KeySet, Plan, TargetSpec, Transport, Workload};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Echo UDP datagrams; with `corrupt_id`, flip a bit of the request id first.
fn udp_echo(corrupt_id: bool) -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let addr = socket.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, peer)) = socket.recv_from(&mut buf) {
            if corrupt_id && n > 11 {
                buf[11] ^= 1;
            }
            let _ = socket.send_to(&buf[..n], peer);
        }
    });
    addr
}

/// Echo framed units over TCP (20-byte envelope, its length, the message).
async fn tcp_echo() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut unit = vec![0u8; 20];
                while stream.read_exact(&mut unit[..20]).await.is_ok() {
                    let len = u32::from_be_bytes([unit[16], unit[17], unit[18], unit[19]]).min(65_536) as usize;
                    unit.resize(20 + len, 0);
                    if stream.read_exact(&mut unit[20..]).await.is_err() || stream.write_all(&unit).await.is_err() {
                        return;
                    }
                    unit.truncate(20);
                }
            });
        }
    });
    addr
}

fn plan(transport: Transport, addr: SocketAddr, raw: bool, timeout: Duration) -> Plan {
    let mut spec = TargetSpec::new(transport, "127.0.0.1", Some(addr.port()));
    spec.raw = raw;
    let workload = Workload::resolve(KeySet::Uniform { prefix: "TEST".into(), count: 100 });
    let mut plan = Plan::new("t", spec.build().unwrap(), workload);
    plan.timeout = timeout;
    plan
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_mode_counts_echoed_replies_over_udp_and_tcp() {
    let udp = udp_echo(false);
    let tcp = tcp_echo().await;
    let cases = [(Transport::Udp, udp, true), (Transport::Udp, udp, false), (Transport::TcpPersistent, tcp, false)];
    for (transport, addr, batched) in cases.into_iter().chain([(Transport::Tcp, tcp, false)]) {
        let mut p = plan(transport, addr, true, Duration::from_secs(5));
        p.batched_udp = batched; // UDP: the batched threads and the task-per-client loop alike
        let s = run(&p, &closed(3, 20)).await.unwrap();
        assert_eq!((s.ok, s.error_count()), (60, 0), "{transport:?} batched {batched}: {:?}", s.errors);
        assert!(s.client_cpu_s.is_some(), "the bench's own CPU is measured");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echo_is_not_a_protocol_answer() {
    let tcp = tcp_echo().await;
    let s = run(&plan(Transport::TcpPersistent, tcp, false, Duration::from_secs(5)), &closed(2, 5)).await.unwrap();
    assert_eq!(s.ok, 0);
    assert_eq!(s.errors.get("malformed"), Some(&10), "{:?}", s.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_with_another_request_id_are_not_counted() {
    let udp = udp_echo(true);
    let s = run(&plan(Transport::Udp, udp, true, Duration::from_millis(300)), &closed(2, 2)).await.unwrap();
    assert_eq!(s.ok, 0);
    assert_eq!(s.errors.get("timeout"), Some(&4), "{:?}", s.errors);
}

#[test]
fn raw_mode_refuses_targets_it_cannot_judge() {
    let mut spec = TargetSpec::get("http://127.0.0.1:1/api/handles/{handle}");
    spec.raw = true;
    assert!(spec.build().is_err());
    let mut spec = TargetSpec::new(Transport::JsonApi, "127.0.0.1", Some(1));
    spec.raw = true;
    assert!(spec.build().is_err());
}
