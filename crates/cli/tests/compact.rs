//! `handled compact`: a stopped embedded store's free pages given back, every
//! handle still there; refused, saying why, while a server holds the store.

mod spawn;

use spawn::{run, serve, text};

#[test]
fn compact_shrinks_a_rewritten_store_and_keeps_every_handle() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let records = dir.path().join("records.jsonl");
    let lines: String = (0..2000)
        .map(|n| {
            format!(
                "{{\"handle\":\"TEST/{n}\",\"values\":[{{\"index\":1,\"type\":\"URL\",\"data\":{{\"format\":\"string\",\
                 \"value\":\"https://example.org/{n}\"}}}}]}}\n"
            )
        })
        .collect();
    std::fs::write(&records, lines).unwrap();
    // Each import rewrites every record: the pages of the earlier ones are freed, not returned.
    for i in 0..4 {
        let replace: &[&str] = if i == 0 { &[] } else { &["--replace"] };
        let o = run(&[&["import", records.to_str().unwrap(), "--data-dir", data][..], replace].concat());
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    let file = std::path::Path::new(data).join("handles.redb");
    let before = std::fs::metadata(&file).unwrap().len();

    let server = serve(dir.path(), &["--data-dir", data]);
    let o = run(&["compact", "--data-dir", data]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("a running server holds it"), "{}", text(&o.stderr));
    drop(server);

    let o = run(&["compact", "--data-dir", data]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("compacted"), "{}", text(&o.stderr));
    let after = std::fs::metadata(&file).unwrap().len();
    assert!(after < before, "{before} bytes before, {after} after");

    let server = serve(dir.path(), &["--data-dir", data]);
    for n in [0, 1234, 1999] {
        let o = run(&["resolve", &format!("TEST/{n}"), "--tcp", "--port", &server.tcp_port]);
        assert!(text(&o.stdout).contains(&format!("https://example.org/{n}")), "TEST/{n}: {}", text(&o.stdout));
    }
    let o = run(&["compact", "--data-dir", dir.path().join("none").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("no store to compact"), "{}", text(&o.stderr));
}
