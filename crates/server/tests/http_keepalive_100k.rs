//! 100,000 JSON API requests over four keep-alive connections: every one is
//! answered (200, full body, Content-Length right) and the server accepted
//! exactly four connections. Alone in its test binary: the accept counter is
//! process-wide.

mod http_common;

use handled_server::transport::unify::accepted_connections;
use http_common::{get, header, read_response, start};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const CONNECTIONS: usize = 4;
const REQUESTS: usize = 100_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_requests_over_four_connections() {
    let addr = start(|_| {}).await;
    let before = accepted_connections();
    let mut tasks = Vec::new();
    for c in 0..CONNECTIONS {
        tasks.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            let mut buf = Vec::new();
            let per = REQUESTS / CONNECTIONS;
            // Pipeline in small windows: still one socket, fewer round trips.
            const WINDOW: usize = 16;
            let mut answered = 0;
            while answered < per {
                let batch = WINDOW.min(per - answered);
                let mut out = String::new();
                for _ in 0..batch {
                    out.push_str("GET /api/handles/TEST/ADMIN?index=100 HTTP/1.1\r\nHost: t\r\n\r\n");
                }
                s.write_all(out.as_bytes()).await.unwrap();
                for _ in 0..batch {
                    let (status, headers, body) =
                        read_response(&mut s, &mut buf).await.expect("answered on the same connection");
                    assert_eq!(status, 200, "connection {c}");
                    assert!(body.starts_with(b"{\"responseCode\":1") && body.ends_with(b"}"));
                    assert!(header(&headers, "server-timing").unwrap().starts_with("app;dur="));
                    answered += 1;
                }
            }
            // Still open and serving.
            get(&mut s, "/api/site").await;
            assert_eq!(read_response(&mut s, &mut buf).await.unwrap().0, 200);
            answered
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(total, REQUESTS);
    assert_eq!(accepted_connections() - before, CONNECTIONS as u64, "no other sockets were opened");
}
