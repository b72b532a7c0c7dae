//! Every failed authentication is logged the same way (target `auth`, the
//! identity claimed and the peer), whatever the front end: the native
//! protocol, HTTP Basic, and the `/api/sessions` challenge the admin console
//! signs in through (issue 44, 6: that one left no line).

mod common;

use std::time::{Duration, Instant};

/// The lines of target `auth` naming `identity` as a failed authentication.
fn failures(server: &common::Server, identity: &str) -> Vec<String> {
    let log = server.log.lock().unwrap();
    log.iter()
        .filter(|l| l.contains("authentication failed") && l.contains(identity) && l.contains("peer=127.0.0.1:"))
        .cloned()
        .collect()
}

fn wait_for_failures(server: &common::Server, identity: &str, count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let lines = failures(server, identity);
        if lines.len() >= count || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn console_sign_in_basic_and_native_failures_are_logged_alike() {
    let server = common::start_logging(None, "allow_plain_http_admin = true\n", "info");

    // The console's sign-in: open a session, answer its nonce with a wrong HMAC.
    let opened = common::request(server.http, "POST", "/api/sessions", None, "");
    assert!(opened.starts_with("HTTP/1.1 201"), "{opened}");
    let session = opened.split("\"sessionId\":\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    let header = format!(
        "Handle version=\"0\", sessionId=\"{session}\", id=\"300%3ATEST%2FADMIN\", type=\"HS_SECKEY\", \
         cnonce=\"AAAAAAAAAAAAAAAAAAAAAA==\", alg=\"HMAC-SHA256\", \
         signature=\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\""
    );
    let proved =
        common::request_with(server.http, "PUT", "/api/sessions/this", None, &[("Authorization", &header)], "");
    assert!(proved.starts_with("HTTP/1.1 401"), "{proved}");
    let console = wait_for_failures(&server, "300:TEST/ADMIN", 1);
    assert_eq!(console.len(), 1, "the console's failed sign-in: {:?}", server.log.lock().unwrap());

    // HTTP Basic and the native protocol: the same line.
    let basic =
        common::request(server.http, "DELETE", "/api/handles/TEST/x", Some(("300%3ATEST%2FADMIN", "wrong")), "");
    assert!(basic.starts_with("HTTP/1.1 401"), "{basic}");
    let native = std::process::Command::new(env!("CARGO_BIN_EXE_handled"))
        .args(["create", "TEST/x", "1:URL:x", "--admin", "300:TEST/ADMIN", "--secret", "wrong", "--port"])
        .arg(server.tcp.port().to_string())
        .output()
        .unwrap();
    assert_eq!(native.status.code(), Some(4), "{}", String::from_utf8_lossy(&native.stderr));
    let all = wait_for_failures(&server, "300:TEST/ADMIN", 3);
    assert_eq!(all.len(), 3, "{all:?}");
    let shape = |l: &str| l.split("authentication failed").next().map(|head| head.contains("auth")).unwrap_or(false);
    assert!(all.iter().all(|l| shape(l)), "one shape, target auth: {all:?}");
}
