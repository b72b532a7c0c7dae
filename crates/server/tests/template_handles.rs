//! Template handles (§11) through a running server: built from a base handle
//! and its namespace, over TCP and the JSON API; the whole prefix templated
//! with `/`; not found where the original says so.

mod admin_common;

use handled_client::{Connection, KeyChoice, Protocol, ResolveOptions};
use handled_proto::header::ResponseCode;
use handled_proto::value::HandleValue;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The Technical Manual's example namespace (§11.2).
const MANUAL: &str = include_str!("../../../tests/templates/manual-namespace.xml").trim_ascii_end();

async fn resolve(addr: std::net::SocketAddr, h: &str) -> (ResponseCode, Vec<(i32, String, String)>) {
    let mut c = Connection::open(Protocol::Tcp, addr, Duration::from_secs(10), false).await.unwrap();
    let r = c.resolve(h.as_bytes(), &ResolveOptions::default()).await.unwrap();
    let values = handled_client::resolved_values(&r).unwrap_or_default();
    let shown = values
        .iter()
        .map(|v| (v.index, String::from_utf8_lossy(&v.value_type).into(), String::from_utf8_lossy(&v.data).into()))
        .collect();
    (r.code(), shown)
}

fn v(index: i32, t: &str, d: &str) -> (i32, String, String) {
    (index, t.into(), d.into())
}

#[tokio::test]
async fn a_base_handle_with_the_manuals_namespace() {
    let s = admin_common::start_with(|c| c.templates.delimiter = Some("@".into())).await;
    let mut admin = s.admin(Protocol::Tcp, KeyChoice::Secret, false).await;
    let base = [
        HandleValue::new(1, "URL", "http://example.org/data/abc"),
        HandleValue::new(2, "EMAIL", "contact@example.org"),
        HandleValue::new(3, "HS_NAMESPACE", MANUAL),
    ];
    admin.create(b"TEST/abc", &base).await.unwrap();

    let (code, values) = resolve(s.addrs.tcp, "TEST/abc@box(10,20,30,40)").await;
    assert_eq!(code, ResponseCode::SUCCESS);
    assert_eq!(
        values,
        [
            v(1, "URL", "http://example.org/data/abc?wh=40&ww=30&wy=20&wx=10"),
            v(2, "EMAIL", "contact@example.org"),
            v(3, "HS_NAMESPACE", MANUAL),
        ]
    );
    assert_eq!(resolve(s.addrs.tcp, "TEST/abc@page7").await.1[0], v(1, "URL", "http://example.org/data/abc?page7"));
    // The base itself is a handle like any other.
    assert_eq!(resolve(s.addrs.tcp, "TEST/abc").await.1[0], v(1, "URL", "http://example.org/data/abc"));
    // No base, no delimiter, or a prefix homed elsewhere: as before.
    assert_eq!(resolve(s.addrs.tcp, "TEST/missing@x").await.0, ResponseCode::HANDLE_NOT_FOUND);
    assert_eq!(resolve(s.addrs.tcp, "TEST/abcx").await.0, ResponseCode::HANDLE_NOT_FOUND);
    assert_eq!(resolve(s.addrs.tcp, "OTHER/abc@x").await.0, ResponseCode::SERVER_NOT_RESP);

    // The JSON API answers the same values.
    let mut http = tokio::net::TcpStream::connect(s.addrs.http).await.unwrap();
    let request = "GET /api/handles/TEST/abc@box(1,2,3,4) HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    http.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), http.read_to_end(&mut answer)).await.unwrap().unwrap();
    let answer = String::from_utf8(answer).unwrap();
    let body: serde_json::Value = serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(body["responseCode"], 1, "{answer}");
    assert_eq!(body["values"][0]["data"]["value"], "http://example.org/data/abc?wh=4&ww=3&wy=2&wx=1", "{body}");
}

#[tokio::test]
async fn a_whole_prefix_templated_by_the_configured_namespace() {
    let namespace = r#"<namespace><template delimiter="/">
        <if value="extension" test="equals" expression="gone"><notfound/></if>
        <value type="URL" data="https://repo.example/items/${extension}"/>
    </template></namespace>"#;
    let s = admin_common::start_with(|c| c.templates.namespace = Some(namespace.into())).await;
    assert_eq!(
        resolve(s.addrs.tcp, "TEST/item-42").await,
        (ResponseCode::SUCCESS, vec![v(1, "URL", "https://repo.example/items/item-42")])
    );
    assert_eq!(resolve(s.addrs.tcp, "TEST/gone").await.0, ResponseCode::HANDLE_NOT_FOUND);
    // Stored handles win over templates.
    assert_eq!(resolve(s.addrs.tcp, "TEST/ADMIN").await.0, ResponseCode::SUCCESS);
    assert!(resolve(s.addrs.tcp, "TEST/ADMIN").await.1.iter().all(|(_, t, _)| t != "URL"));
}
