//! The admin subcommands against a real `handled serve`: they read the
//! credentials file serve wrote, and exit 0 / 2 (not found) / 3 (refused) /
//! 4 (authentication or permission) with a message on failure.

mod spawn;

use spawn::{handled, serve, text};
use std::process::Command;

#[test]
fn admin_subcommands_and_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]);
    let port = server.tcp_port.clone();
    let ok = |args: &[&str]| {
        let o = handled(dir.path(), &port, args);
        assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
        text(&o.stdout)
    };
    assert_eq!(ok(&["create", "TEST/cli", "1:URL:https://example.org/a"]).trim(), "TEST/cli");
    ok(&["add-value", "TEST/cli", "2:EMAIL:a@example.org"]);
    ok(&[
        "modify-value",
        "TEST/cli",
        "--rsa",
        "--json",
        r#"[{"index":1,"type":"URL","data":"https://example.org/b"}]"#,
    ]);
    ok(&["remove-value", "TEST/cli", "2", "--no-session"]);
    // Listed as created (matching stays case-insensitive: `delete TEST/cli` below finds it).
    assert!(ok(&["list", "TEST"]).lines().any(|l| l == "TEST/cli"));
    let minted = ok(&["create", "TEST/m-", "--mint", "1:URL:https://example.org/m"]);
    assert!(minted.trim().starts_with("TEST/m-") && minted.trim().len() == "TEST/m-".len() + 36, "{minted}");

    let exists = handled(dir.path(), &port, &["create", "TEST/cli", "1:URL:x"]);
    assert_eq!(exists.status.code(), Some(3), "{}", text(&exists.stderr));
    assert!(text(&exists.stderr).contains("HANDLE_ALREADY_EXISTS"), "{}", text(&exists.stderr));

    ok(&["delete", "TEST/cli"]);
    let missing = handled(dir.path(), &port, &["delete", "TEST/cli"]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing.stderr));

    let wrong = Command::new(env!("CARGO_BIN_EXE_handled"))
        .args(["create", "TEST/x", "1:URL:x", "--port", &port, "--admin", "300:TEST/ADMIN", "--secret", "wrong"])
        .output()
        .unwrap();
    assert_eq!(wrong.status.code(), Some(4), "{}", text(&wrong.stderr));
    assert!(text(&wrong.stderr).contains("wrong key"), "{}", text(&wrong.stderr));

    let key = dir.path().join("extra.pk8");
    let keygen =
        Command::new(env!("CARGO_BIN_EXE_handled")).args(["keygen", "--index", "305"]).arg(&key).output().unwrap();
    assert!(keygen.status.success(), "{}", text(&keygen.stderr));
    let before = std::fs::read(&key).unwrap();
    let again = Command::new(env!("CARGO_BIN_EXE_handled")).arg("keygen").arg(&key).output().unwrap();
    assert_eq!(again.status.code(), Some(1), "keygen refuses to overwrite a private key");
    assert!(text(&again.stderr).contains("--force"), "{}", text(&again.stderr));
    assert_eq!(std::fs::read(&key).unwrap(), before, "the key file is untouched");
    let json = text(&keygen.stdout);
    ok(&["add-value", "TEST/ADMIN", "--json", json.trim()]);
    let o = Command::new(env!("CARGO_BIN_EXE_handled"))
        .args([
            "create",
            "TEST/by-new-key",
            "1:URL:https://example.org",
            "--port",
            &port,
            "--admin",
            "305:TEST/ADMIN",
            "--private-key",
        ])
        .arg(&key)
        .output()
        .unwrap();
    assert!(o.status.success(), "a keygen key added to TEST/ADMIN authenticates: {}", text(&o.stderr));

    let bad = handled(dir.path(), &port, &["create", "TEST/y", "not-a-value"]);
    assert_eq!(bad.status.code(), Some(1));
    drop(server);
}

/// Listening on every address without a published one would put 0.0.0.0 in the
/// site record: refused, with the flag to use.
#[test]
fn serve_refuses_to_publish_an_unspecified_address() {
    let o = Command::new(env!("CARGO_BIN_EXE_handled"))
        .args(["serve", "--ephemeral", "--listen", "0.0.0.0", "--port", "0", "--http-port", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("0.0.0.0") && err.contains("--public-address"), "{err}");
}
