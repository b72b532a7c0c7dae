//! The status handle `0.SITE/status` as Handle.Net 9 answers it
//! (tests/status-handle/handle-net-9.0.0-sample.json): server admins and
//! `status_handle_admins` read its three values over UDP, TCP, the HTTP tunnel
//! and the JSON API; anyone else is refused with the original's codes; the
//! figures are real (the request counts grow with the requests made).

mod admin_common;

use admin_common::AdminServer;
use base64::Engine;
use handled_client::ResolveOptions;
use handled_client::{AdminSession, Connection, Credentials, KeyChoice, Protocol};
use handled_proto::header::ResponseCode;
use handled_proto::value::{HandleValue, ValuePermissions};
use serde_json::Value;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const STATUS: &[u8] = b"0.SITE/status";

async fn server(monitor: bool) -> AdminServer {
    let s = admin_common::start_with(|c| {
        c.access.server_admins = vec!["300:TEST/ADMIN".into()];
        c.access.status_handle_admins = vec!["300:TEST/WATCHER".into()];
        c.enable_monitor_daemon = monitor;
        c.access.allow_plain_http_admin = true;
    })
    .await;
    let mut admin = s.admin(Protocol::Tcp, KeyChoice::Secret, false).await;
    for (h, secret) in [(&b"TEST/WATCHER"[..], "watcher secret"), (b"TEST/OTHER", "other secret")] {
        let key = HandleValue { permissions: ValuePermissions::SECRET, ..HandleValue::new(300, "HS_SECKEY", secret) };
        admin.create(h, &[key]).await.unwrap();
    }
    s
}

async fn session(s: &AdminServer, p: Protocol, who: Option<(&str, &str)>) -> AdminSession {
    let creds = match who {
        Some((h, secret)) => Credentials::secret(h.as_bytes(), 300, secret.as_bytes()),
        None => s.creds(KeyChoice::Secret),
    };
    AdminSession::open(s.params(p, false), creds).await.expect("session")
}

fn text(v: &HandleValue) -> String {
    String::from_utf8(v.data.clone()).unwrap()
}

/// Index 1's `key=value; ...` pairs, every value a number.
fn summary(v: &HandleValue) -> Vec<(String, i64)> {
    text(v)
        .split("; ")
        .map(|kv| {
            let (k, n) = kv.split_once('=').unwrap_or_else(|| panic!("not key=value: {kv}"));
            (k.to_string(), n.parse().unwrap_or_else(|_| panic!("not a number: {kv}")))
        })
        .collect()
}

fn field(pairs: &[(String, i64)], key: &str) -> i64 {
    pairs.iter().find(|(k, _)| k == key).unwrap_or_else(|| panic!("no {key}")).1
}

fn check_shape(values: &[HandleValue], monitor: bool) {
    let shape: Vec<(i32, &[u8])> = values.iter().map(|v| (v.index, &v.value_type[..])).collect();
    let mut expected: Vec<(i32, &[u8])> = vec![(1, b"CNRI.SERVER_STATUS")];
    if monitor {
        expected.push((2, b"CNRI.SERVER_STATUS"));
    }
    expected.push((3, b"CNRI.REPLICATION_STATUS"));
    assert_eq!(shape, expected);
    for v in values {
        assert_eq!((v.permissions, v.ttl, v.timestamp), (ValuePermissions::SECRET, 86_400, 0), "{v:?}");
    }
    let keys: Vec<String> = summary(&values[0]).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["freemem", "totalmem", "maxmem", "runtime", "numreqs"]);
    let replication: Value = serde_json::from_str(&text(values.last().unwrap())).unwrap();
    assert!(replication["latestTxnId"].as_u64().unwrap() >= 2, "two handles were created: {replication}");
}

#[tokio::test]
async fn admins_read_real_figures_over_every_native_transport() {
    let s = server(true).await;
    let mut before = None;
    for p in [Protocol::Tcp, Protocol::Udp, Protocol::Http] {
        let mut admin = session(&s, p, None).await;
        let values = admin.resolve_all(STATUS).await.unwrap_or_else(|e| panic!("{p:?}: {e}"));
        check_shape(&values, true);
        let pairs = summary(&values[0]);
        assert!(field(&pairs, "totalmem") > 0 && field(&pairs, "runtime") >= 0, "{pairs:?}");
        let monitor: Value = serde_json::from_str(&text(&values[1])).unwrap();
        let requests = &monitor["requests"];
        assert_eq!(monitor["version"], handled_server::build::VERSION);
        assert_eq!(monitor["isReadOnly"], false);
        assert!(monitor["diskInfo"].as_array().unwrap().iter().any(|d| d["used"].as_i64().unwrap() > 0), "{monitor}");
        assert!(monitor["mem"]["free"].as_i64().unwrap() > 0, "{monitor}");
        assert!(requests["admin"].as_u64().unwrap() >= 2, "two creates: {requests}");
        let now = (field(&pairs, "numreqs"), requests["resolution"].as_u64().unwrap());
        if let Some((numreqs, resolutions)) = before {
            // Ten resolutions in between, plus this session's own requests.
            assert!(now.0 >= numreqs + 10 && now.1 >= resolutions + 10, "{now:?} after {before:?}");
        }
        let mut c = Connection::open(Protocol::Tcp, s.addrs.tcp, Duration::from_secs(5), false).await.unwrap();
        for _ in 0..10 {
            c.resolve(b"TEST/ADMIN", &ResolveOptions::default()).await.unwrap();
        }
        before = Some(now);
    }
}

#[tokio::test]
async fn status_handle_admins_may_read_and_others_are_refused() {
    let s = server(false).await;
    let mut watcher = session(&s, Protocol::Tcp, Some(("TEST/WATCHER", "watcher secret"))).await;
    check_shape(&watcher.resolve_all(STATUS).await.unwrap(), false);
    let mut other = session(&s, Protocol::Tcp, Some(("TEST/OTHER", "other secret"))).await;
    let refused = other.resolve_all(b"0.site/STATUS").await.unwrap_err();
    assert_eq!(refused.code(), Some(ResponseCode::INVALID_ADMIN), "{refused}");

    let mut anonymous = Connection::open(Protocol::Tcp, s.addrs.tcp, Duration::from_secs(5), false).await.unwrap();
    let public = anonymous.resolve(STATUS, &ResolveOptions::default()).await.unwrap();
    assert_eq!(public.code(), ResponseCode::VALUES_NOT_FOUND);
    let all = ResolveOptions { public_only: false, ..ResolveOptions::default() };
    let challenged = anonymous.resolve(STATUS, &all).await.unwrap();
    assert_eq!(challenged.code(), ResponseCode::AUTHENTICATION_NEEDED);
}

async fn api_get(s: &AdminServer, path: &str, user: Option<&str>) -> (u16, Value) {
    let auth = user
        .map(|u| format!("Authorization: Basic {}\r\n", base64::engine::general_purpose::STANDARD.encode(u)))
        .unwrap_or_default();
    let mut http = tokio::net::TcpStream::connect(s.addrs.http).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\n{auth}Connection: close\r\n\r\n");
    http.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), http.read_to_end(&mut answer)).await.unwrap().unwrap();
    let answer = String::from_utf8(answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn json_api_answers_as_the_original() {
    let s = server(true).await;
    let secret = match s.creds(KeyChoice::Secret).key {
        handled_client::credentials::Key::Secret(k) => String::from_utf8(k).unwrap(),
        _ => unreachable!("asked for the secret key"),
    };
    let (status, body) = api_get(&s, "/api/handles/0.SITE/status", None).await;
    assert_eq!(
        (status, &body),
        (200, &serde_json::json!({"responseCode": 200, "values": [], "handle": "0.SITE/status"}))
    );

    // Filters are ignored, as by the original: all three values.
    let admin = format!("300%3ATEST%2FADMIN:{secret}");
    let (status, body) = api_get(&s, "/api/handles/0.SITE/status?index=3", Some(&admin)).await;
    assert_eq!((status, body["responseCode"].as_i64()), (200, Some(1)), "{body}");
    let values = body["values"].as_array().unwrap();
    let shape: Vec<(i64, &str, &str)> = values
        .iter()
        .map(|v| (v["index"].as_i64().unwrap(), v["type"].as_str().unwrap(), v["permissions"].as_str().unwrap()))
        .collect();
    assert_eq!(
        shape,
        [(1, "CNRI.SERVER_STATUS", "1100"), (2, "CNRI.SERVER_STATUS", "1100"), (3, "CNRI.REPLICATION_STATUS", "1100")]
    );
    let monitor: Value = serde_json::from_str(values[1]["data"]["value"].as_str().unwrap()).unwrap();
    assert!(monitor["requests"]["resolution"].as_u64().unwrap() >= 2, "two API resolutions: {monitor}");

    let (status, body) = api_get(&s, "/api/handles/0.SITE/status", Some("300%3ATEST%2FOTHER:other secret")).await;
    assert_eq!((status, &body), (403, &serde_json::json!({"responseCode": 400, "handle": "0.SITE/status"})));
}

/// SIGHUP (`reload`) re-reads `status_handle_admins`; a list that does not
/// parse changes nothing.
#[tokio::test]
async fn status_handle_admins_are_reloaded() {
    let s = server(false).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("handled.toml");
    let write = |admins: &str| {
        let text = format!("server_admins = [\"300:TEST/ADMIN\"]\nstatus_handle_admins = [{admins}]\n");
        std::fs::write(&file, text).unwrap();
    };
    let code = |who: (&'static str, &'static str)| {
        let s = &s;
        async move { session(s, Protocol::Tcp, Some(who)).await.resolve_all(STATUS).await.err().and_then(|e| e.code()) }
    };
    write("\"300:TEST/OTHER\"");
    handled_server::reload::reload(&s.state.reloadable(), Some(&file)).unwrap();
    assert_eq!(code(("TEST/OTHER", "other secret")).await, None, "now listed");
    assert_eq!(code(("TEST/WATCHER", "watcher secret")).await, Some(ResponseCode::INVALID_ADMIN), "no longer listed");

    write("\"no handle here\"");
    assert!(handled_server::reload::reload(&s.state.reloadable(), Some(&file)).is_err());
    assert_eq!(code(("TEST/OTHER", "other secret")).await, None, "a bad file changes nothing");
}
