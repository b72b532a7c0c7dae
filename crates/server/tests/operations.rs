//! Operations behaviour end to end: refusals when saturated (every transport),
//! queue-wait timeouts, health never throttled, metrics after a known sequence,
//! and the cache dropping what every kind of write changes.

mod admin_common;

use handled_client::{
    decode_response, encode_request, resolved_values, Connection, KeyChoice, Protocol, ResolveOptions,
};
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::request::{RequestBody, ResolutionRequest};
use handled_proto::value::HandleValue;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TIMEOUT: Duration = Duration::from_secs(5);

/// A raw HTTP/1.1 GET: (status, head, body).
async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(TIMEOUT, s.read_to_end(&mut raw)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

async fn resolve_code(addr: std::net::SocketAddr, p: Protocol, handle: &[u8]) -> ResponseCode {
    let mut c = Connection::open(p, addr, TIMEOUT, false).await.unwrap();
    c.resolve(handle, &ResolveOptions::default()).await.unwrap().code()
}

/// A server admitting one request at a time, that one held: later requests
/// queue (`queue_length` of them, for `max_queue_wait_ms` if given) or are
/// refused.
async fn busy_server(
    queue_length: usize,
    max_queue_wait_ms: Option<u64>,
) -> (admin_common::AdminServer, tokio::sync::OwnedSemaphorePermit) {
    let s = admin_common::start_with(|c| {
        c.admission.max_concurrent = 1;
        c.admission.queue_length = queue_length;
        if let Some(ms) = max_queue_wait_ms {
            c.admission.max_queue_wait_ms = ms;
        }
    })
    .await;
    let held = s.state.admission.admit().await.unwrap();
    (s, held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_at_once_on_every_transport_when_busy_and_health_still_answers() {
    let (s, held) = busy_server(0, None).await;
    for p in [Protocol::Udp, Protocol::Tcp, Protocol::Http] {
        let t = Instant::now();
        assert_eq!(resolve_code(s.addr(p), p, b"TEST/ADMIN").await, ResponseCode::SERVER_TOO_BUSY, "{p:?}");
        assert!(t.elapsed() < Duration::from_millis(500), "{p:?} refusal took {:?}", t.elapsed());
    }
    let (status, head, body) = http_get(s.addrs.http, "/api/handles/TEST/ADMIN").await;
    assert_eq!(status, 503, "{head}");
    assert!(head.to_ascii_lowercase().contains("retry-after: 1"), "{head}");
    assert!(body.contains("\"responseCode\":3"), "{body}");
    for path in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(http_get(s.addrs.http, path).await.0, 200, "{path} must not be throttled");
    }
    drop(held);
    assert_eq!(resolve_code(s.addrs.udp, Protocol::Udp, b"TEST/ADMIN").await, ResponseCode::SUCCESS);
    let stats = s.state.admission.stats();
    assert_eq!(stats.rejected_queue_full, 4, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_longer_than_allowed_is_refused() {
    let (s, held) = busy_server(8, Some(100)).await;
    let t = Instant::now();
    assert_eq!(resolve_code(s.addrs.tcp, Protocol::Tcp, b"TEST/ADMIN").await, ResponseCode::SERVER_TOO_BUSY);
    assert!(t.elapsed() >= Duration::from_millis(100));
    let (_, _, metrics) = http_get(s.addrs.http, "/metrics").await;
    assert!(metrics.contains("handled_admission_rejected_total{reason=\"queue_timeout\"} 1"), "{metrics}");
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_udp_request_waits_for_its_original_answer() {
    let (s, held) = busy_server(8, Some(5000)).await;
    let body =
        RequestBody::Resolution(ResolutionRequest { handle: b"TEST/ADMIN".to_vec(), indexes: vec![], types: vec![] });
    let unit = encode_request(&body, OpFlags::REC.with(OpFlags::PO), 4242);
    let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client.connect(s.addrs.udp).await.unwrap();
    let udp = admin_common::Udp { socket: &client, to: s.addrs.udp };
    // The original waits in the queue; the client, hearing nothing, re-sends.
    client.send(&unit).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    client.send(&unit).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut buf = vec![0u8; 4096];
    assert!(client.try_recv(&mut buf).is_err(), "the copy must not be refused while its original waits");
    drop(held);
    // Sent again only after TIMEOUT, when the original is surely answered (a
    // copy of one in progress would be counted as a duplicate below).
    let answer = udp.answer(std::slice::from_ref(&unit), 4242, TIMEOUT).await;
    assert_eq!(decode_response(&answer, 4242).unwrap().code(), ResponseCode::SUCCESS);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(client.try_recv(&mut buf).is_err(), "answered twice: the copy was queued too");
    let (_, _, metrics) = http_get(s.addrs.http, "/metrics").await;
    assert!(metrics.lines().any(|l| l == "handled_udp_duplicates_dropped_total 1"), "{metrics}");
    // Answered: the same id is a new request again.
    let answer = udp.ask(&[unit], 4242, Duration::from_secs(2)).await;
    assert_eq!(decode_response(&answer, 4242).unwrap().code(), ResponseCode::SUCCESS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_after_a_known_sequence() {
    let s = admin_common::start_with(|c| c.storage.record_cache_mb = 16).await;
    for _ in 0..2 {
        assert_eq!(resolve_code(s.addrs.udp, Protocol::Udp, b"TEST/ADMIN").await, ResponseCode::SUCCESS);
    }
    assert_eq!(resolve_code(s.addrs.tcp, Protocol::Tcp, b"TEST/none").await, ResponseCode::HANDLE_NOT_FOUND);
    let (status, _, text) = http_get(s.addrs.http, "/metrics").await;
    assert_eq!(status, 200);
    for line in [
        r#"handled_requests_total{transport="udp",op="RESOLUTION",code="SUCCESS"} 2"#,
        r#"handled_requests_total{transport="tcp",op="RESOLUTION",code="HANDLE_NOT_FOUND"} 1"#,
        r#"handled_request_duration_seconds_count{transport="udp"} 2"#,
        "handled_admission_admitted_total 3",
        "handled_admission_in_flight 0",
        "handled_cache_hits_total 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    assert!(text.contains("handled_store_commits_total"));
    let (_, _, ready) = http_get(s.addrs.http, "/readyz").await;
    assert!(ready.contains("\"ready\":true"), "{ready}");
}

fn urls(values: &[HandleValue]) -> Vec<(i32, String)> {
    values.iter().map(|v| (v.index, String::from_utf8_lossy(&v.data).into_owned())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_op_invalidates_cached_resolutions() {
    let s = admin_common::start_with(|c| c.storage.record_cache_mb = 16).await;
    let mut admin = s.admin(Protocol::Tcp, KeyChoice::Secret, true).await;
    let mut reader = Connection::open(Protocol::Udp, s.addrs.udp, TIMEOUT, false).await.unwrap();
    let h = b"TEST/cached";
    // Resolve twice after each write: the second read is served from the cache.
    async fn read_twice(c: &mut Connection, h: &[u8]) -> Result<Vec<(i32, String)>, ResponseCode> {
        let mut out = Err(ResponseCode(0));
        for _ in 0..2 {
            let r = c.resolve(h, &ResolveOptions::default()).await.unwrap();
            out = resolved_values(&r).map(urls).ok_or(r.code());
        }
        out
    }
    assert_eq!(read_twice(&mut reader, h).await, Err(ResponseCode::HANDLE_NOT_FOUND));
    admin.create(h, &[HandleValue::new(1, "URL", "v1")]).await.unwrap();
    assert_eq!(read_twice(&mut reader, h).await, Ok(vec![(1, "v1".into())]), "after create");
    admin.add_values(h, &[HandleValue::new(2, "URL", "two")], false).await.unwrap();
    assert_eq!(read_twice(&mut reader, h).await, Ok(vec![(1, "v1".into()), (2, "two".into())]), "after add");
    admin.modify_values(h, &[HandleValue::new(1, "URL", "v1b")]).await.unwrap();
    assert_eq!(read_twice(&mut reader, h).await, Ok(vec![(1, "v1b".into()), (2, "two".into())]), "after modify");
    admin.remove_values(h, &[2]).await.unwrap();
    assert_eq!(read_twice(&mut reader, h).await, Ok(vec![(1, "v1b".into())]), "after remove");
    admin.delete(h).await.unwrap();
    assert_eq!(read_twice(&mut reader, h).await, Err(ResponseCode::HANDLE_NOT_FOUND), "after delete");
    admin.create_with(h, &[HandleValue::new(5, "URL", "again")], false, false).await.unwrap();
    assert_eq!(read_twice(&mut reader, h).await, Ok(vec![(5, "again".into())]), "after re-create");
    let cache = s.state.cache.as_ref().expect("cache switched on").cache_stats();
    assert!(cache.hits >= 7 && cache.invalidations >= 6, "{cache:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_port_shares_admission_and_metrics() {
    let s = admin_common::start_with(|c| {
        c.registry.port = Some(0);
        c.admission.max_concurrent = 1;
        c.admission.queue_length = 0;
    })
    .await;
    let registry = s.addrs.registry.expect("registry listener");
    let held = s.state.admission.admit().await.unwrap();
    let (status, head, _) = http_get(registry, "/hyperty/user/alice").await;
    assert_eq!(status, 503, "{head}");
    assert!(head.to_ascii_lowercase().contains("retry-after:"), "{head}");
    assert_eq!(http_get(registry, "/live").await.0, 200, "health is never throttled");
    let (status, _, doc) = http_get(registry, "/openapi.json").await;
    assert_eq!(status, 200);
    assert!(doc.contains("/hyperty/user/"), "the registry's own OpenAPI document");
    drop(held);
    assert_ne!(http_get(registry, "/hyperty/user/alice").await.0, 503);
    let (_, _, metrics) = http_get(s.addrs.http, "/metrics").await;
    assert!(metrics.contains(r#"handled_requests_total{transport="http",op="registry",code="5xx"} 1"#), "{metrics}");
}
