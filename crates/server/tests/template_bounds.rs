//! Issue 41, S1–S3: template handles a prefix admin's namespace makes
//! costly, asked for by anyone. On a server with default settings, an
//! HS_NAMESPACE stored on the prefix handle turns templates on; before the
//! bounds, one anonymous GET of a doubling `<def>` aborted the process
//! (allocation failure), 3,000 nested `<if>` overflowed a worker's stack, and a
//! `<foreach>` over 2,000 values took 18–30 s. Each is now refused with a
//! clear error, counted in `/metrics`, and the server answers on.

mod admin_common;

use handled_client::{Connection, KeyChoice, Protocol, ResolveOptions};
use handled_proto::header::ResponseCode;
use handled_proto::value::HandleValue;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The status and body of `GET path` on the HTTP port.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut http = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    http.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), http.read_to_end(&mut answer)).await.unwrap().unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, answer.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

async fn resolve_tcp(addr: std::net::SocketAddr, h: &str) -> (ResponseCode, usize) {
    let mut c = Connection::open(Protocol::Tcp, addr, Duration::from_secs(30), false).await.unwrap();
    let r = c.resolve(h.as_bytes(), &ResolveOptions::default()).await.unwrap();
    (r.code(), handled_client::resolved_values(&r).map(|v| v.len()).unwrap_or(0))
}

/// The counter of template builds refused for `reason` in `/metrics`.
async fn refused(addr: std::net::SocketAddr, reason: &str) -> u64 {
    let (_, body) = http_get(addr, "/metrics").await;
    let prefix = format!("handled_template_builds_refused_total{{reason=\"{reason}\"}} ");
    body.lines().find_map(|l| l.strip_prefix(&prefix)).map_or(0, |n| n.trim().parse().unwrap())
}

fn namespace(template: &str) -> HandleValue {
    HandleValue::new(
        5,
        "HS_NAMESPACE",
        format!(r#"<namespace><template delimiter="@">{template}</template></namespace>"#),
    )
}

#[tokio::test]
async fn costly_templates_are_refused_and_the_server_answers_on() {
    // Default settings: no [templates] table.
    let s = admin_common::start().await;
    let mut admin = s.admin(Protocol::Tcp, KeyChoice::Secret, false).await;
    admin.create(b"TEST/ok", &[HandleValue::new(1, "URL", "https://example.org/ok")]).await.unwrap();

    // S1: a 1 KiB seed doubled 40 times (2^40 KiB) from a ~3 KB namespace.
    let seed = "s".repeat(1024);
    let doublings: String = (0..40).map(|_| r#"<def parameter="x"><value type="T" data="${x}${x}"/></def>"#).collect();
    let s1 = format!(
        r#"<def parameter="x"><value type="T" data="{seed}"/></def>{doublings}<value type="URL" data="${{x}}"/>"#
    );
    admin.add_values(b"0.NA/TEST", &[namespace(&s1)], true).await.unwrap();
    let (status, body) = http_get(s.addrs.http, "/api/handles/TEST/anything@x").await;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains(r#""responseCode":2"#) && body.contains("builds a value of more than"), "{body}");
    assert_eq!(refused(s.addrs.http, "value_bytes").await, 1);
    assert_eq!(resolve_tcp(s.addrs.tcp, "TEST/ok").await, (ResponseCode::SUCCESS, 1));

    // S2: 3,000 nested <if> (27 KB, within one native request).
    let open = r#"<if value="extension" test="equals" expression="x">"#.repeat(3000);
    let s2 = format!(r#"{open}<value type="URL" data="deep"/>{}"#, "</if>".repeat(3000));
    admin.add_values(b"0.NA/TEST", &[namespace(&s2)], true).await.unwrap();
    assert_eq!(resolve_tcp(s.addrs.tcp, "TEST/anything@x").await.0, ResponseCode::ERROR);
    assert_eq!(refused(s.addrs.http, "depth").await, 1);
    // Within the bounds it builds.
    let shallow = format!(r#"{}<value type="URL" data="deep"/>{}"#, &open[..open.len() / 100], "</if>".repeat(30));
    admin.add_values(b"0.NA/TEST", &[namespace(&shallow)], true).await.unwrap();
    assert_eq!(resolve_tcp(s.addrs.tcp, "TEST/anything@x").await, (ResponseCode::SUCCESS, 1));

    // S3: 60 values made of each of a base handle's 2,000.
    let many: Vec<HandleValue> = (1..=2000).map(|i| HandleValue::new(i, "URL", format!("https://e.org/{i}"))).collect();
    admin.create(b"TEST/many", &many).await.unwrap();
    let sixty: String = (0..60).map(|_| "<value/>").collect();
    admin.add_values(b"0.NA/TEST", &[namespace(&format!("<foreach>{sixty}</foreach>"))], true).await.unwrap();
    let (status, body) = http_get(s.addrs.http, "/api/handles/TEST/many@x").await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(refused(s.addrs.http, "values").await + refused(s.addrs.http, "work").await, 1);
    // An expression over each of the 2,000, compiled once: answered.
    let matching =
        r#"<foreach><if value="data" test="matches" expression="https://e\.org/[0-9]{1,4}"><value/></if></foreach>"#;
    admin.add_values(b"0.NA/TEST", &[namespace(matching)], true).await.unwrap();
    assert_eq!(resolve_tcp(s.addrs.tcp, "TEST/many@x").await, (ResponseCode::SUCCESS, 2000));
    assert_eq!(resolve_tcp(s.addrs.tcp, "TEST/ok").await, (ResponseCode::SUCCESS, 1));
}
