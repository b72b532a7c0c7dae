//! What the client subcommands say when they cannot do their job (issue 28):
//! one shape for a server out of reach (what, where, what to try), whichever
//! subcommand and library met it, and where the credentials were looked for.

mod spawn;

use spawn::{run, serve, text};
use std::process::Command;

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port().to_string()
}

#[test]
fn a_refused_connection_reads_the_same_from_every_subcommand() {
    let port = closed_port();
    let admin = ["--admin", "300:TEST/ADMIN", "--secret", "s"];
    let cases: [(Vec<&str>, &str); 5] = [
        (vec!["resolve", "TEST/1", "--tcp", "--port", &port], "(TCP, native port)"),
        (vec!["resolve", "TEST/1", "--http", "--http-port", &port], "(HTTP port)"),
        ([&["list", "TEST", "--port", &port][..], &admin[..]].concat(), "(TCP, native port)"),
        (vec!["status", "--http-port", &port], "(HTTP port)"),
        ([&["backup", "b.hbk", "--insecure", "--http-port", &port][..], &admin[..]].concat(), "(HTTP port)"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (args, via) in cases {
        let o = Command::new(env!("CARGO_BIN_EXE_handled")).args(&args).current_dir(dir.path()).output().unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        let flag = if via == "(HTTP port)" { "--http-port (HANDLED_HTTP_PORT)" } else { "--port (HANDLED_PORT)" };
        let expected = format!("error: cannot reach the server at 127.0.0.1:{port} {via}: connection refused;");
        assert!(err.starts_with(&expected), "{args:?}: {err}");
        assert!(err.contains(flag) && err.contains("`handled serve`"), "{args:?}: {err}");
    }
}

/// `resolve --http` pointed at the native port said "invalid HTTP version parsed".
#[test]
fn http_to_the_native_port_names_the_mistake() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]);
    let o = run(&["resolve", "TEST/ADMIN", "--http", "--http-port", &server.tcp_port]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("looks like the server's native port"), "{}", text(&o.stderr));
    // The old form (--port naming the HTTP port with --http) still works.
    let o = run(&["resolve", "TEST/ADMIN", "--http", "--port", &server.http_port]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // The environment `serve` reads names the ports for the clients too.
    let o = Command::new(env!("CARGO_BIN_EXE_handled"))
        .args(["resolve", "TEST/ADMIN", "--http"])
        .env("HANDLED_HTTP_PORT", &server.http_port)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// Run from another directory, admin commands said only "no usable
/// credentials at /elsewhere/data/admin-TEST.json".
#[test]
fn missing_credentials_name_the_assumed_data_directory_and_the_way_out() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_handled"))
        .args(["list", "TEST", "--port", &closed_port()])
        .env_remove("HANDLED_CREDENTIALS")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let data = dir.path().canonicalize().unwrap().join("data");
    assert!(err.contains(&format!("the default assumes the data directory {}", data.display())), "{err}");
    assert!(err.contains("--credentials FILE") && err.contains("HANDLED_CREDENTIALS"), "{err}");
}

/// `curl -u "300:TEST/ADMIN:secret"` got "identity handle 300 is not served by
/// this server": the answer now shows the identity percent-encoded.
#[test]
fn an_unencoded_basic_identity_gets_the_encoded_form() {
    use base64::Engine;
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("handled.toml");
    std::fs::write(&config, "allow_plain_http_admin = true\n").unwrap();
    let server = serve(dir.path(), &["--config", config.to_str().unwrap()]);
    let user = base64::engine::general_purpose::STANDARD.encode("300:TEST/ADMIN:not-the-secret");
    let mut s = std::net::TcpStream::connect(format!("127.0.0.1:{}", server.http_port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    write!(
        s,
        "DELETE /api/handles/TEST/x HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {user}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(answer.contains(r#"curl -u \"300%3ATEST%2FADMIN:SECRET\""#), "{answer}");
    assert!(!answer.contains("not-the-secret"), "the secret is never echoed: {answer}");
}

/// `promote` pointed at a primary talked as if it were a mirror.
#[test]
fn promote_on_a_primary_says_there_is_nothing_to_promote() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let server = serve(dir.path(), &["--data-dir", data]);
    let o = run(&["promote", "--data-dir", data]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("a running server holds it"), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("a primary needs no promotion"), "{}", text(&o.stderr));
    drop(server);
    let o = run(&["promote", "--data-dir", data]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("was never a replication mirror"), "{}", text(&o.stderr));
}
