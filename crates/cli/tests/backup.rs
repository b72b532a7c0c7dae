//! Backups while serving (issue 17, item 4): `handled backup` of a server under
//! write load, `handled restore` into a new directory, a server started on it
//! has every write acknowledged before the backup started, and its reverse
//! index agrees; plus the refusals (who may, which stores, damaged files,
//! occupied directories).

mod common;

use common::{request, request_with, start_in, start_logging, Server};
use handled_client::{
    AdminError, AdminSession, ConnectParams, Connection, Credentials, KeyChoice, Protocol, ResolveOptions,
};
use handled_proto::header::ResponseCode;
use handled_proto::value::HandleValue;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ADMINS: &str = "server_admins = [\"300:TEST/ADMIN\"]\n";
const WRITERS: usize = 4;
const PRELOADED: usize = 10_000;

/// `handled backup DEST` against `server` with its admin credentials (self-signed certificate).
fn backup(server: &Server, dest: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_handled"))
        .arg("backup")
        .arg(dest)
        .args(["--http-port", &server.http.port().to_string(), "--credentials"])
        .arg(server.credentials())
        .args(extra)
        .output()
        .expect("run handled backup")
}

fn restore(src: &Path, dir: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_handled"))
        .arg("restore")
        .arg(src)
        .arg("--data-dir")
        .arg(dir)
        .args(extra)
        .output()
        .expect("run handled restore")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn url(h: &str) -> String {
    format!("https://example.org/{h}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_under_write_load_restores_every_acknowledged_write() {
    let work = tempfile::tempdir().unwrap();
    // Enough data that the backup takes several chunks while the writers run.
    let preload = work.path().join("preload.jsonl");
    let lines: String = (0..PRELOADED)
        .map(|i| {
            let h = format!("TEST/pre-{i}");
            format!(
                "{{\"handle\":\"{h}\",\"values\":[{{\"index\":1,\"type\":\"URL\",\"data\":{{\"format\":\"string\",\"value\":\"{}/{}\"}}}}]}}\n",
                url(&h),
                "x".repeat(200)
            )
        })
        .collect();
    std::fs::write(&preload, lines).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_handled"))
        .arg("import")
        .arg(&preload)
        .arg("--data-dir")
        .arg(work.path().join("live"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let server = start_in(Some(&work.path().join("live")), ADMINS);
    let creds = Credentials::load(&server.credentials(), KeyChoice::Secret).unwrap();
    // (handle, when its create was acknowledged)
    let acked: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (creds, acked, stop, addr) = (creds.clone(), acked.clone(), stop.clone(), server.tcp);
        writers.push(tokio::spawn(async move {
            let params = ConnectParams { timeout: Duration::from_secs(10), ..ConnectParams::new(Protocol::Tcp, addr) };
            let mut admin = AdminSession::open(params, creds).await.expect("admin session");
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let h = format!("TEST/load-{w}-{i}");
                match admin.create(h.as_bytes(), &[HandleValue::new(1, "URL", url(&h))]).await {
                    Ok(_) => acked.lock().unwrap().push((h, Instant::now())),
                    // Admission refusing under load is fine: not acknowledged, not checked.
                    Err(AdminError::Refused { code: ResponseCode::SERVER_TOO_BUSY, .. }) => {
                        tokio::time::sleep(Duration::from_millis(10)).await
                    }
                    Err(e) => panic!("create {h}: {e}"),
                }
            }
        }));
    }
    // Let the load build up, then back up in the middle of it.
    while acked.lock().unwrap().len() < 200 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let dest = work.path().join("live.backup");
    let backup_started = Instant::now();
    let out = {
        let (server_http, creds, dest) = (server.http, server.credentials(), dest.clone());
        tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_handled"))
                .arg("backup")
                .arg(&dest)
                .args(["--http-port", &server_http.port().to_string(), "--insecure", "--credentials"])
                .arg(creds)
                .output()
                .unwrap()
        })
        .await
        .unwrap()
    };
    let backup_done = Instant::now();
    assert!(out.status.success(), "backup failed: {}", stderr(&out));
    let size = std::fs::metadata(&dest).unwrap().len();
    assert!(size > 3 << 20, "a backup of {size} bytes is not several chunks");
    // Writes went on during the backup.
    let during = acked.lock().unwrap().iter().filter(|(_, t)| *t > backup_started && *t < backup_done).count();
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    drop(server);

    let restored_dir = work.path().join("restored");
    let out = restore(&dest, &restored_dir, &[]);
    assert!(out.status.success(), "restore failed: {}", stderr(&out));
    // When it was taken, as a date: "taken 2026-11-27 10:31:02 UTC by handled ...".
    let taken = stderr(&out).split(" taken ").nth(1).unwrap_or_default().to_string();
    assert!(taken.len() > 23 && taken[..23].ends_with(" UTC") && taken.starts_with("20"), "{}", stderr(&out));
    for name in ["handles.redb", "server_key.pk8"] {
        assert!(restored_dir.join(name).is_file(), "{name} not restored");
    }
    let restored = start_in(Some(&restored_dir), ADMINS);
    let mut conn = Connection::open(Protocol::Tcp, restored.tcp, Duration::from_secs(5), true).await.unwrap();
    let acked = acked.lock().unwrap().clone();
    for i in [0, PRELOADED / 2, PRELOADED - 1] {
        let h = format!("TEST/pre-{i}");
        let r = conn.resolve(h.as_bytes(), &ResolveOptions::default()).await.unwrap();
        assert_eq!(r.code(), ResponseCode::SUCCESS, "{h} (imported before the server started) is missing");
    }
    let (mut before, mut after_present) = (0, 0);
    for (h, at) in &acked {
        let r = conn.resolve(h.as_bytes(), &ResolveOptions::default()).await.unwrap();
        if *at < backup_started {
            before += 1;
            assert_eq!(r.code(), ResponseCode::SUCCESS, "{h}, acknowledged before the backup started, is missing");
        }
        if r.code() == ResponseCode::SUCCESS {
            let values = handled_client::resolved_values(&r).unwrap();
            assert_eq!(values[0].data, url(h).into_bytes(), "{h} restored with other data");
            after_present += usize::from(*at >= backup_started);
        }
    }
    // The reverse-lookup index (documents) came along, consistent with the handles.
    let (h, _) = &acked[before / 2];
    let answer = request(restored.http, "GET", &format!("/hrls/handles/TEST?URL={}", url(h)), None, "");
    // Named as created, though the index keys of a case-insensitive server are upper-cased.
    let listed = format!("[\"{h}\"]");
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with(&listed), "{answer}");
    // The same site key: the restored server signs as the original did.
    let old_key = std::fs::read(work.path().join("live/server_key.pk8")).unwrap();
    assert_eq!(std::fs::read(restored_dir.join("server_key.pk8")).unwrap(), old_key);
    eprintln!(
        "{} creates acknowledged, {before} before the backup (all restored), {during} during it; \
         {after_present} of those after its start are in the backup",
        acked.len()
    );
    assert!(during > 0, "no write was acknowledged while the backup ran: it did not run under load");
}

#[test]
fn only_server_admins_over_https_may_back_up() {
    let work = tempfile::tempdir().unwrap();
    let dest = work.path().join("b");
    // server_admins = []: TEST/ADMIN administers its prefix only (without the
    // key, the admin of a single-prefix server is a server admin).
    let server = start_in(Some(&work.path().join("d")), "server_admins = []\n");
    let out = backup(&server, &dest, &["--insecure"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("server_admins"), "{}", stderr(&out));
    assert!(!dest.exists());
    drop(server);

    let server = start_in(Some(&work.path().join("e")), ADMINS);
    // The self-signed certificate is not trusted without --insecure or --ca-file.
    let out = backup(&server, &dest, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--insecure"), "{}", stderr(&out));
    // A wrong secret.
    let out = backup(&server, &dest, &["--insecure", "--admin", "300:TEST/ADMIN", "--secret", "wrong"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    // Plain HTTP does not carry credentials unless the server allows it.
    let out = backup(&server, &dest, &["--plain-http"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("HTTPS"), "{}", stderr(&out));
    assert!(!dest.exists());
    // DEST is not overwritten without --force.
    std::fs::write(&dest, b"precious").unwrap();
    let out = backup(&server, &dest, &["--insecure"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read(&dest).unwrap(), b"precious");
    assert!(backup(&server, &dest, &["--insecure", "--force"]).status.success());
}

/// Issue 25 R1: a backup's id is not a capability. Pulls and cancels carry the
/// credentials of the administrator who started it (another identity: 403,
/// logged as a failed authentication), and the id never reaches a log.
#[test]
fn one_backup_at_a_time_pulled_only_by_its_owner_and_never_logged() {
    let work = tempfile::tempdir().unwrap();
    let config = format!("{ADMINS}allow_plain_http_admin = true\n");
    let server = start_logging(Some(&work.path().join("d")), &config, "info,access=info");
    let secret = server.admin_secret();
    let admin = Some(("300%3ATEST%2FADMIN", secret.as_str()));
    // Another identity of this server: may write its prefix, did not start the backup.
    let o = server.admin(&["create", "TEST/OTHER", "300:HS_SECKEY:other-secret"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let other = Some(("300%3ATEST%2FOTHER", "other-secret"));

    let first = request(server.http, "POST", "/api/backup", admin, "");
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    let id = first.split("\"id\":\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    let second = request(server.http, "POST", "/api/backup", admin, "");
    assert!(second.starts_with("HTTP/1.1 409") && second.contains("one at a time"), "{second}");
    let named = [("X-Backup-Id", id.as_str())];

    // The id alone, with no credentials: a challenge, no bytes.
    let anonymous = request_with(server.http, "GET", "/api/backup", None, &named, "");
    assert!(anonymous.starts_with("HTTP/1.1 401"), "{anonymous}");
    assert!(!anonymous.contains("HDLBKUP1"));
    // The id with another identity's credentials: refused and logged.
    let stranger = request_with(server.http, "GET", "/api/backup", other, &named, "");
    assert!(stranger.starts_with("HTTP/1.1 403") && !stranger.contains("HDLBKUP1"), "{stranger}");
    let stranger_cancel = request_with(server.http, "DELETE", "/api/backup", other, &named, "");
    assert!(stranger_cancel.starts_with("HTTP/1.1 403"), "{stranger_cancel}");
    // The earlier form, id in the URL, is refused whoever asks.
    let in_url = request(server.http, "GET", &format!("/api/backup/{id}"), admin, "");
    assert!(in_url.starts_with("HTTP/1.1 400") && in_url.contains("X-Backup-Id"), "{in_url}");

    // The owner pulls and cancels.
    let chunk = request_with(server.http, "GET", "/api/backup", admin, &named, "");
    assert!(chunk.starts_with("HTTP/1.1 200") && chunk.contains("HDLBKUP1"), "{}", &chunk[..200.min(chunk.len())]);
    let cancel = request_with(server.http, "DELETE", "/api/backup", admin, &named, "");
    assert!(cancel.starts_with("HTTP/1.1 200"), "{cancel}");
    let gone = request_with(server.http, "GET", "/api/backup", admin, &named, "");
    assert!(gone.starts_with("HTTP/1.1 404"), "{gone}");
    // Free again once cancelled.
    assert!(request(server.http, "POST", "/api/backup", admin, "").starts_with("HTTP/1.1 200"));

    std::thread::sleep(Duration::from_millis(300));
    let failed =
        server.log.lock().unwrap().iter().filter(|l| l.contains("authentication failed")).cloned().collect::<Vec<_>>();
    assert!(failed.iter().filter(|l| l.contains("TEST/OTHER") && l.contains("backup")).count() >= 2, "{failed:?}");
    assert!(server.log_lines_with("/api/backup") >= 8, "the access log is on: {:?}", server.log.lock().unwrap());
    // Only the refused URL form carried the id, and that line is the client's own doing.
    let leaked: Vec<_> = server
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(&id) && !l.contains(&format!("/api/backup/{id}")))
        .cloned()
        .collect();
    assert!(leaked.is_empty(), "the backup id reached the log: {leaked:?}");
}

#[test]
fn stores_handled_does_not_back_up_say_what_to_do() {
    let work = tempfile::tempdir().unwrap();
    let server = start_in(None, ADMINS);
    let out = backup(&server, &work.path().join("b"), &["--insecure"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("--ephemeral"), "{}", stderr(&out));
}

#[test]
fn restore_refuses_damage_and_occupied_directories() {
    let work = tempfile::tempdir().unwrap();
    let live = work.path().join("live");
    let server = start_in(Some(&live), ADMINS);
    let good = work.path().join("good");
    assert!(backup(&server, &good, &["--insecure"]).status.success());
    let bytes = std::fs::read(&good).unwrap();

    // Damaged, truncated, or not a backup at all: nothing is created.
    let target = work.path().join("new");
    for (name, content) in [
        ("flipped", {
            let mut b = bytes.clone();
            b[bytes.len() / 2] ^= 1;
            b
        }),
        ("truncated", bytes[..bytes.len() - 10].to_vec()),
        ("other", b"not a backup".to_vec()),
    ] {
        let src = work.path().join(name);
        std::fs::write(&src, content).unwrap();
        let out = restore(&src, &target, &[]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
        assert!(stderr(&out).contains("not a usable backup"), "{name}: {}", stderr(&out));
        assert!(!target.exists(), "{name}: a directory was created");
    }
    assert!(!restore(&work.path().join("missing"), &target, &[]).status.success());

    // The live directory: not without --force, and not while its server runs.
    let out = restore(&good, &live, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    let out = restore(&good, &live, &["--force"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("stop it first"), "{}", stderr(&out));
    drop(server);
    let out = restore(&good, &live, &["--force"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The replaced directory is kept beside it.
    let kept: Vec<_> = std::fs::read_dir(work.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("live.replaced-"))
        .collect();
    assert_eq!(kept.len(), 1);
    assert!(kept[0].path().join("handles.redb").is_file());
    // An empty directory is fine without --force, and the result serves.
    let empty = work.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(restore(&good, &empty, &[]).status.success());
    let restored = start_in(Some(&empty), ADMINS);
    let answer = request(restored.http, "GET", "/api/handles/TEST/ADMIN", None, "");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// Issue 25 R9: a backup's manifest and file names are the backup's word.
/// The `server` string was printed raw (terminal escapes), and any file name
/// was written into the data directory (newlines, escapes, a handled.toml).
#[test]
fn restore_shows_manifest_text_escaped_and_takes_only_state_files() {
    use handled_store::backup::BackupEncoder;
    let work = tempfile::tempdir().unwrap();
    let make = |server: &str, files: &[&str]| {
        let manifest = serde_json::json!({"format": 1, "created": 1_795_772_261, "server": server, "store": "embedded", "handles": 0});
        let mut out = Vec::new();
        let mut e = BackupEncoder::start(&manifest, &mut out);
        for name in files {
            e.file(&mut out, name, b"x");
        }
        e.finish(&mut out);
        out
    };
    let evil_server = "0.1.0\u{1b}]0;owned\u{7}\u{1b}[2J\nfake line";
    let src = work.path().join("escaped");
    std::fs::write(&src, make(evil_server, &["admin-TEST.json"])).unwrap();
    let out = restore(&src, &work.path().join("a"), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(!said.contains('\u{1b}') && !said.contains("\nfake"), "{said:?}");
    assert!(said.contains("\\u{1b}]0;owned") && said.contains("2026-11-27 09:37:41 UTC"), "{said}");

    for bad in ["handled.toml", "admin-a\nb.json", "admin-\u{1b}[2J.json"] {
        let src = work.path().join("bad");
        std::fs::write(&src, make("0.1.0", &[bad])).unwrap();
        let target = work.path().join("b");
        let out = restore(&src, &target, &[]);
        assert_eq!(out.status.code(), Some(1), "{bad:?}: {}", stderr(&out));
        assert!(!target.exists(), "{bad:?}: a directory was created");
        assert!(!stderr(&out).contains('\u{1b}'), "{:?}", stderr(&out));
    }
}
