//! `handled import --online` (issue 28.9): records go in through the running
//! server in parallel sessions; a refusal stops the import with its place
//! saved, and the same command resumes it. The offline import, refused by a
//! running server's locked store, says to use --online.

mod spawn;

use spawn::{handled, serve, text};

fn record(i: usize) -> String {
    format!(
        r#"{{"handle": "TEST/imp-{i}", "values": [{{"index": 1, "type": "URL", "data": "https://example.org/{i}"}}]}}"#
    )
}

#[test]
fn online_import_stops_on_a_refusal_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = serve(dir.path(), &["--data-dir", data.to_str().unwrap()]);
    let port = &server.tcp_port;
    let file = dir.path().join("records.jsonl");
    let lines: Vec<String> = (1..=300).map(record).collect();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let file = file.to_str().unwrap();

    // The store is the running server's: the offline import is refused, pointing the way.
    let o = spawn::run(&["import", file, "--data-dir", data.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("--online"), "{}", text(&o.stderr));

    // A handle that exists stops an import without --replace, its place saved.
    assert!(handled(dir.path(), port, &["create", "TEST/imp-150", "1:URL:https://example.org/other"]).status.success());
    let import = ["import", file, "--online", "--parallel", "4"];
    let o = handled(dir.path(), port, &import);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("record 150 (TEST/imp-150)") && err.contains("again to resume"), "{err}");
    assert!(std::path::Path::new(&format!("{file}.progress")).is_file(), "{err}");
    let resolved = |h: &str| text(&spawn::run(&["resolve", h, "--tcp", "--port", port]).stdout);
    assert!(resolved("TEST/imp-150").contains("example.org/other"), "the existing handle is left alone");

    // Out of the way, the same command goes on and finishes.
    assert!(handled(dir.path(), port, &["delete", "TEST/imp-150"]).status.success());
    let o = handled(dir.path(), port, &import);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("resuming:") && err.contains("imported"), "{err}");
    assert!(!std::path::Path::new(&format!("{file}.progress")).exists(), "progress removed when complete");
    for i in [1, 150, 299, 300] {
        assert!(resolved(&format!("TEST/imp-{i}")).contains(&format!("https://example.org/{i}\"")), "TEST/imp-{i}");
    }
    let listed = text(&handled(dir.path(), port, &["list", "TEST"]).stdout);
    assert_eq!(listed.lines().filter(|l| l.starts_with("TEST/imp-")).count(), 300, "{listed}");

    // The offline import's words (issue 44, 15): "imported 1 handle from FILE".
    let one = dir.path().join("one.jsonl");
    std::fs::write(&one, record(301) + "\n").unwrap();
    let o = handled(dir.path(), port, &["import", one.to_str().unwrap(), "--online", "--parallel", "1"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains(&format!("imported 1 handle from {}", one.display())), "{err}");
    assert!(err.contains("(1 session)") && !err.contains("records"), "{err}");
}
