//! The JSON API and the web proxy say whose fault a failed recursive
//! resolution was: 504 when the handle's service did not answer in time, 502
//! when it answered unverifiably (500 would blame this server). Native
//! clients still get RC 2 (ERROR), as before.

mod global_common;

use global_common::{http_get, native, World};
use handled_client::Protocol;
use handled_proto::header::ResponseCode;
use std::time::Duration;

async fn statuses(w: &World, h: &str) -> [String; 2] {
    let http = w.resolver.addrs.http;
    let (json_head, body) = http_get(http, &format!("/api/handles/{h}")).await;
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(json["responseCode"], 2, "{body}");
    assert!(json["message"].as_str().is_some_and(|m| m.contains("The handle's service")), "{body}");
    let (proxy_head, _) = http_get(http, &format!("/{h}")).await;
    [json_head, proxy_head].map(|head| head.lines().next().unwrap_or_default().to_string())
}

#[tokio::test]
async fn an_unverifiable_answer_is_502() {
    // P4's site record publishes a key that is not its server's.
    let w = World::start(|_| {}).await;
    assert_eq!(native(Protocol::Tcp, w.resolver.addrs.tcp, "P4/doc").await.0, ResponseCode::ERROR);
    assert_eq!(statuses(&w, "P4/doc").await, ["HTTP/1.1 502 Bad Gateway", "HTTP/1.1 502 Bad Gateway"]);
}

#[tokio::test]
async fn no_answer_from_the_handles_service_is_504() {
    let mut w = World::start(|c| c.resolver.timeout_ms = 1000).await;
    assert!(w.a.shutdown(Duration::from_secs(2)).await);
    assert_eq!(native(Protocol::Tcp, w.resolver.addrs.tcp, "P1/doc").await.0, ResponseCode::ERROR);
    let gateway_timeout = "HTTP/1.1 504 Gateway Timeout";
    assert_eq!(statuses(&w, "P1/doc").await, [gateway_timeout, gateway_timeout]);
}
