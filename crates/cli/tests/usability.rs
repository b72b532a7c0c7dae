//! Rough edges a new user and an operator met (issue 18): each test holds one
//! message or exit code the CLI now gets right.

mod common;

use common::{handled, run, serve, text};

/// Malformed handles are refused before anything is sent (exit 1, with what is
/// wrong), instead of coming back as "That prefix doesn't live here".
#[test]
fn malformed_handles_are_refused_locally() {
    // Nothing listens on port 1: only a local check can answer.
    let cases: [(&[&str], &str); 5] = [
        (&["create", "noslash", "1:URL:x", "--port", "1"], "has no '/'"),
        (&["resolve", "", "--port", "1"], "empty handle"),
        (&["delete", "/x", "--port", "1"], "empty prefix"),
        (&["add-value", "TEST/", "1:URL:x", "--port", "1"], "empty suffix"),
        (&["list", "TEST/x", "--port", "1"], "is a handle, not a prefix"),
    ];
    for (args, message) in cases {
        let o = run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o.stderr));
        assert!(text(&o.stderr).contains(message), "{args:?}: {}", text(&o.stderr));
    }
}

/// A well-formed name under a prefix the server does not home says so.
#[test]
fn a_prefix_not_homed_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]);
    let o = handled(dir.path(), &server.tcp_port, &["list", "OTHER"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("prefix OTHER is not homed on 127.0.0.1:"), "{}", text(&o.stderr));
    let o = run(&["resolve", "OTHER/1", "--port", &server.tcp_port]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("prefix OTHER is not homed"), "{}", text(&o.stderr));
}
