//! What the commands take when not told (issue 44): the credentials file
//! follows the prefix acted on, `bench` reads the environment the other client
//! commands read, `serve --help` shows its defaults, and a flag that runs
//! another store than the configuration file names says so.

mod spawn;

use spawn::{run, serve, serve_keeping_stderr, text};
use std::process::Command;

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port().to_string()
}

/// `data/admin-TEST.json` was the default whatever the prefix served.
#[test]
fn credentials_follow_the_prefix_acted_on() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &["--prefix", "DEMO"]);
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::copy(dir.path().join("creds.json"), data.join("admin-DEMO.json")).unwrap();
    // Another prefix's file beside it: not the one taken for DEMO/….
    std::fs::write(data.join("admin-TEST.json"), "not credentials").unwrap();
    let client = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_handled"))
            .args(args)
            .args(["--port", &server.tcp_port])
            .env_remove("HANDLED_CREDENTIALS")
            .current_dir(work.path())
            .output()
            .unwrap()
    };
    let o = client(&["create", "DEMO/doc1", "1:URL:https://example.org/"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = client(&["list", "0.NA/DEMO"]);
    assert!(text(&o.stdout).contains("DEMO/doc1"), "{}{}", text(&o.stdout), text(&o.stderr));
    // The only credentials file is taken whatever the prefix.
    std::fs::remove_file(data.join("admin-TEST.json")).unwrap();
    std::fs::rename(data.join("admin-DEMO.json"), data.join("admin-OTHER.json")).unwrap();
    let o = client(&["delete", "DEMO/doc1"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn create_help_says_no_hs_admin_is_added() {
    let o = run(&["create", "--help"]);
    let help = text(&o.stdout);
    assert!(help.contains("no HS_ADMIN value is added"), "{help}");
    assert!(help.contains("data/admin-PREFIX.json"), "{help}");
}

/// `bench` ignored HANDLED_HOST and HANDLED_PORT.
#[test]
fn bench_reads_the_clients_environment() {
    let port = closed_port();
    for (transport, var) in [("tcp", "HANDLED_PORT"), ("json-api", "HANDLED_HTTP_PORT")] {
        let o = Command::new(env!("CARGO_BIN_EXE_handled"))
            .args(["bench", "--transport", transport, "-d", "5", "--timeout", "2", "--quiet"])
            .env(var, &port)
            .env("HANDLED_HOST", "127.0.0.1")
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{transport}: {err}");
        assert!(err.contains(&format!("127.0.0.1:{port}")), "{transport} did not use {var}: {err}");
    }
}

#[test]
fn serve_help_shows_defaults_and_keeps_cassandra_apart() {
    let help = text(&run(&["serve", "--help"]).stdout);
    let port_line = help.lines().find(|l| l.trim_start().starts_with("--port")).unwrap_or_default();
    assert!(help.contains("else 2641"), "{help}");
    assert!(!port_line.is_empty() && help.contains("else 8000"), "{help}");
    let at = |needle: &str| help.find(needle).unwrap_or_else(|| panic!("{needle} missing in {help}"));
    assert!(at("--log-format") < at("Cassandra store"), "--log-format among the Cassandra flags:\n{help}");
    assert!(at("Cassandra store") < at("--cassandra-keyspace"), "{help}");
}

/// `serve --ephemeral` with `store = "sql"` in the file ran in memory, silently.
#[test]
fn a_flag_overriding_the_files_store_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("handled.toml");
    std::fs::write(&config, "store = \"sql\"\n[sql]\nurl = \"postgres://handle@127.0.0.1:1/handles\"\n").unwrap();
    let mut server = serve_keeping_stderr(dir.path(), &["--config", config.to_str().unwrap()]);
    server.drain_stderr();
    assert!(
        server.banner.contains(
            "warning: --ephemeral (HANDLED_EPHEMERAL) overrides the configuration's store = \"sql\": serving \
             from the memory store (nothing is kept)"
        ),
        "{}",
        server.banner
    );
}
