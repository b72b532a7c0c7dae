//! Creation, the mixed loop and URL-template writes end to end, against a real
//! `handled` started in-process on a temporary data directory (durable store,
//! admin credentials written where `--admin-credentials` would put them):
//! the counts must add up and the handles must really be there afterwards.

mod common;
use common::closed;

use handled_bench::{run, FreshNames, KeySet, Model, OpKind, Plan, Stats, TargetSpec, Transport, Workload, MIXED_LOOP};
use handled_client::{resolved_values, Connection, Credentials, KeyChoice, Protocol, ResolveOptions};
use handled_proto::header::ResponseCode;
use handled_server::BoundAddrs;
use std::io::{Read, Write};
use std::time::Duration;

struct TestServer {
    addrs: BoundAddrs,
    credentials: Credentials,
    _dir: tempfile::TempDir,
}

async fn server() -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let creds_path = dir.path().join("admin.json");
    let server = handled_testkit::start(|c| {
        c.ephemeral = false;
        c.data_dir = dir.path().join("data");
        c.registry.port = Some(0);
        c.admin_credentials = Some(creds_path.clone());
        // A proof check per client at once: with the default single worker, a
        // loaded box made the second client wait past the 200 ms turn (too busy).
        c.auth.auth_workers = 4;
    })
    .await;
    let addrs = server.addrs;
    let credentials = Credentials::load(&creds_path, KeyChoice::Secret).expect("credentials written at bootstrap");
    TestServer { addrs, credentials, _dir: dir }
}

/// A workload creating under TEST with a known run id, so the test can name the handles.
fn creating(run_id: &str, ops: Vec<OpKind>) -> Workload {
    let mut w = Workload::admin("TEST", ops);
    w.fresh = Some(FreshNames::with_run_id("TEST", run_id));
    w
}

async fn bench(spec: &TargetSpec, workload: Workload, model: &Model) -> Stats {
    let mut plan = Plan::new("t", spec.build().unwrap(), workload);
    plan.timeout = Duration::from_secs(5);
    run(&plan, model).await.unwrap()
}

/// Over TCP: checking what the run left must not hang on one UDP datagram.
async fn resolve(s: &TestServer, handle: &str) -> (ResponseCode, Vec<String>) {
    let mut c = Connection::open(Protocol::Tcp, s.addrs.tcp, Duration::from_secs(10), false).await.unwrap();
    let r = c.resolve(handle.as_bytes(), &ResolveOptions::default()).await.unwrap();
    let values =
        resolved_values(&r).unwrap_or_default().iter().map(|v| String::from_utf8_lossy(&v.data).into_owned()).collect();
    (r.code(), values)
}

fn admin_spec(s: &TestServer, transport: Transport) -> TargetSpec {
    let port = match transport {
        Transport::Tcp | Transport::TcpPersistent => s.addrs.tcp.port(),
        _ => s.addrs.http.port(),
    };
    let mut spec = TargetSpec::new(transport, "127.0.0.1", Some(port));
    spec.credentials = Some(s.credentials.clone());
    spec.insecure = true;
    spec
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_over_sessions_and_the_json_api_and_the_handles_exist() {
    let s = server().await;
    for (run_id, transport) in
        [("tcp", Transport::TcpPersistent), ("tunnel", Transport::Http), ("api", Transport::JsonApiHttps)]
    {
        let stats = bench(&admin_spec(&s, transport), creating(run_id, vec![OpKind::Create]), &closed(2, 10)).await;
        assert_eq!((stats.ok, stats.error_count()), (20, 0), "{transport:?}: {:?}", stats.errors);
        assert_eq!(stats.by_op["create"].ok, 20);
        if transport == Transport::TcpPersistent {
            // One session per client, opened before the clock, each on one socket.
            assert_eq!((stats.sockets_opened, stats.peak_sockets), (2, 2));
        }
        for (client, n) in [(0, 0), (1, 9)] {
            let (code, values) = resolve(&s, &format!("TEST/bench-{run_id}-{client}-{n}")).await;
            assert_eq!(code, ResponseCode::SUCCESS, "{transport:?}");
            assert_eq!(values, ["https://example.org/landing/page"]);
        }
    }
    // Rerunning with the same names collides: errors counted by response code, not a crash.
    let again =
        bench(&admin_spec(&s, Transport::TcpPersistent), creating("tcp", vec![OpKind::Create]), &closed(1, 3)).await;
    assert_eq!((again.ok, again.errors.get("HANDLE_ALREADY_EXISTS")), (0, Some(&3)), "{:?}", again.errors);
    // Over the JSON API the same collision is an HTTP status.
    let again =
        bench(&admin_spec(&s, Transport::JsonApiHttps), creating("api", vec![OpKind::Create]), &closed(1, 2)).await;
    assert_eq!(again.ok, 0);
    assert!(again.errors.keys().all(|k| k.starts_with("http 4")), "{:?}", again.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_loop_reports_each_operation_and_leaves_state_as_expected() {
    let s = server().await;
    for (run_id, transport) in [("mix-tcp", Transport::TcpPersistent), ("mix-api", Transport::JsonApiHttps)] {
        // Two whole loops per client: every handle created is deleted again.
        let stats = bench(&admin_spec(&s, transport), creating(run_id, MIXED_LOOP.to_vec()), &closed(2, 12)).await;
        assert_eq!((stats.ok, stats.error_count()), (24, 0), "{transport:?}: {:?}", stats.errors);
        assert_eq!(stats.by_op.len(), 6);
        assert!(stats.by_op.values().all(|o| o.ok == 4 && o.latency_us.len() == 4), "{:?}", stats.by_op.keys());
        assert_eq!(resolve(&s, &format!("TEST/bench-{run_id}-0-1")).await.0, ResponseCode::HANDLE_NOT_FOUND);
        // Stopped after add-value: the handle exists, modified, with the added value.
        let partial = format!("{run_id}-partial");
        let stats = bench(&admin_spec(&s, transport), creating(&partial, MIXED_LOOP.to_vec()), &closed(1, 4)).await;
        assert_eq!((stats.ok, stats.error_count()), (4, 0), "{:?}", stats.errors);
        let (code, values) = resolve(&s, &format!("TEST/bench-{partial}-0-0")).await;
        assert_eq!(code, ResponseCode::SUCCESS);
        assert_eq!(values, ["https://example.org/moved/page", "bench@example.org"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_operations_need_credentials_and_bad_ones_fail_before_the_run() {
    let s = server().await;
    let plain = TargetSpec::new(Transport::TcpPersistent, "127.0.0.1", Some(s.addrs.tcp.port()));
    let plan = Plan::new("t", plain.build().unwrap(), creating("x", vec![OpKind::Create]));
    let err = run(&plan, &closed(1, 1)).await.unwrap_err();
    assert!(err.contains("needs an authenticated target"), "{err}");
    let mut wrong = admin_spec(&s, Transport::TcpPersistent);
    wrong.credentials = Some(Credentials::secret("TEST/ADMIN", 300, "not the secret"));
    let plan = Plan::new("t", wrong.build().unwrap(), creating("x", vec![OpKind::Create]));
    let err = run(&plan, &closed(1, 1)).await.unwrap_err();
    assert!(err.contains("cannot open an admin session"), "{err}");
    let mut udp = admin_spec(&s, Transport::Udp);
    udp.port = Some(s.addrs.udp.port());
    assert!(udp.build().is_err());
}

/// GET a path on a plain HTTP server; (status, body).
fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    write!(tcp, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    tcp.read_to_string(&mut text).unwrap();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_template_puts_fill_the_body_like_the_url() {
    let s = server().await;
    let registry = s.addrs.registry.expect("registry port configured");
    let url = format!("http://127.0.0.1:{}/hyperty/user/user%3A%2F%2Fbench%2Fu/{{handle_enc}}", registry.port());
    let body = r#"{"descriptor":"desc-{n}","resources":["chat"],"dataSchemes":["comm"],"expires":3600,"status":"live","runtime":"r"}"#;
    let mut spec = TargetSpec::get(&url);
    spec.method = Some("put".into());
    spec.body = Some(body.into());
    let keys = Workload::resolve(KeySet::Uniform { prefix: "hyperty://bench/h".into(), count: 3 });
    let stats = bench(&spec, keys, &closed(2, 30)).await;
    assert_eq!((stats.ok, stats.error_count()), (60, 0), "{:?}", stats.errors);
    for n in 0..3 {
        let (status, text) = http_get(registry, &format!("/hyperty/url/hyperty%3A%2F%2Fbench%2Fh%2F{n}"));
        assert_eq!(status, 200, "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["descriptor"], format!("desc-{n}"));
    }
    // A body the route refuses (missing keys) is an error by HTTP status.
    spec.body = Some("{\"descriptor\":\"d\"}".into());
    let stats = bench(&spec, Workload::resolve(KeySet::One("hyperty://bench/other".into())), &closed(1, 2)).await;
    assert_eq!(stats.errors.get("http 400"), Some(&2), "{:?}", stats.errors);
    let mut bad = TargetSpec::get(&url);
    bad.method = Some("NOT A METHOD".into());
    assert!(bad.build().is_err());
}
