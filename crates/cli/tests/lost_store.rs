//! F11 (issue 13): a server never bootstraps over a data directory whose store was
//! lost, and never overwrites a credentials file. Before, a store that came back
//! empty (deleted, replaced, or rolled back by a "repair") made `serve` create a
//! new TEST/ADMIN and overwrite `admin-TEST.json` with a new secret, then say ready.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How one `serve` start ended.
enum Start {
    Ready,
    Exited { code: Option<i32>, stderr: String },
}

/// Start `handled serve` on `dir`; a server that comes up is stopped at once
/// (killed: an unclean shutdown).
fn start(dir: &Path, creds: &Path) -> Start {
    start_with(dir, creds, &[], Duration::ZERO)
}

/// Like [`start`], with more arguments, and a server that comes up is killed
/// only after `linger`.
fn start_with(dir: &Path, creds: &Path, extra: &[&str], linger: Duration) -> Start {
    let mut child = Command::new(env!("CARGO_BIN_EXE_handled"))
        .args(["serve", "--listen", "127.0.0.1", "--port", "0", "--http-port", "0", "--prefix", "TEST"])
        .arg("--data-dir")
        .arg(dir)
        .arg("--admin-credentials")
        .arg(creds)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn handled");
    let mut stderr = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut line = String::new();
    let _ = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
    if line.trim() == "ready" {
        std::thread::sleep(linger);
        child.kill().unwrap();
        child.wait().unwrap();
        return Start::Ready;
    }
    // stdout closed without "ready": the process is exiting.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "serve neither became ready nor exited");
        std::thread::sleep(Duration::from_millis(20));
    };
    Start::Exited { code: status.code(), stderr: err_reader.join().unwrap() }
}

#[test]
fn lost_store_is_not_bootstrapped_over() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let creds = dir.path().join("admin-TEST.json");
    assert!(matches!(start(&data, &creds), Start::Ready), "first start");
    let written = std::fs::read(&creds).expect("credentials written at first start");
    // The store is lost; the server key and the credentials stay.
    for f in ["handles.redb", "handles.redb.wal", "handles.redb.wal2"] {
        let _ = std::fs::remove_file(data.join(f));
    }
    match start(&data, &creds) {
        Start::Ready => panic!("serve bootstrapped a new admin over a lost store"),
        Start::Exited { code, stderr } => {
            assert_ne!(code, Some(0), "{stderr}");
            assert!(stderr.contains("server key") && stderr.contains("backup"), "{stderr}");
        }
    }
    assert_eq!(std::fs::read(&creds).unwrap(), written, "the credentials file is untouched");
}

#[test]
fn existing_credentials_file_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("admin-TEST.json");
    std::fs::write(&creds, b"{\"the\": \"old admin\"}").unwrap();
    match start(&dir.path().join("data"), &creds) {
        Start::Ready => panic!("serve overwrote an existing credentials file"),
        Start::Exited { code, stderr } => {
            assert_ne!(code, Some(0), "{stderr}");
            assert!(stderr.contains(&creds.display().to_string()) && stderr.contains("TEST/ADMIN"), "{stderr}");
        }
    }
    assert_eq!(std::fs::read(&creds).unwrap(), b"{\"the\": \"old admin\"}");
}

/// The case: a byte flipped in a store page after an unclean shutdown.
/// redb's repair rolled the file back to an empty store, and bootstrap made a new
/// admin over the old one's credentials. Now the start is refused.
#[test]
fn damaged_store_page_after_kill_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let creds = dir.path().join("admin-TEST.json");
    // Checkpoint at once (an idle store checkpoints too), and give it time to,
    // so that the bootstrap's writes are in the store file when it is killed.
    let config = dir.path().join("handled.toml");
    std::fs::write(&config, "store_checkpoint_ms = 1\n").unwrap();
    let config = config.display().to_string();
    assert!(
        matches!(start_with(&data, &creds, &["--config", &config], Duration::from_secs(1)), Start::Ready),
        "first start"
    );
    let written = std::fs::read(&creds).unwrap();
    let file = data.join("handles.redb");
    let mut bytes = std::fs::read(&file).unwrap();
    let needle = b"TEST/ADMIN";
    let spots: Vec<usize> =
        (0..bytes.len() - needle.len()).filter(|&i| &bytes[i..i + needle.len()] == needle).collect();
    // One byte in every copy: which of them is in a live page depends on where
    // redb's allocator put each checkpoint's pages.
    assert!(!spots.is_empty(), "the admin handle is in the store file");
    for at in spots {
        bytes[at + 5] ^= 0x01;
    }
    std::fs::write(&file, bytes).unwrap();
    match start_with(&data, &creds, &["--config", &config], Duration::ZERO) {
        Start::Ready => panic!("serve started on a damaged store"),
        Start::Exited { code, stderr } => {
            assert_ne!(code, Some(0), "{stderr}");
            assert!(stderr.contains("handles.redb") && stderr.contains("backup"), "{stderr}");
        }
    }
    assert_eq!(std::fs::read(&creds).unwrap(), written, "the credentials file is untouched");
}
