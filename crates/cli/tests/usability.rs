//! Rough edges a new user and an operator met (issue 18): each test holds one
//! message or exit code the CLI now gets right.

mod spawn;

use spawn::{handled, run, serve, serve_keeping_stderr, text};

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

/// `resolve --certify` checks the signature with the key of the server's site
/// record and shows it; a response altered on the way is rejected (exit 1).
#[test]
fn certified_resolution_is_verified() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]);
    let port = &server.tcp_port;
    let o = handled(dir.path(), port, &["create", "TEST/signed", "1:URL:https://example.org/untampered"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run(&["resolve", "TEST/signed", "--certify", "--port", port]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("signature verified with the site key"), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains(r#""verified": true"#), "{}", text(&o.stdout));

    // A UDP relay that changes the URL in every answer carrying it.
    let relay = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let relay_port = relay.local_addr().unwrap().port().to_string();
    let upstream = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    upstream.connect(format!("127.0.0.1:{port}")).unwrap();
    // It relays until the client is done, so a lost datagram is just sent again.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let relay_done = done.clone();
    let relaying = std::thread::spawn(move || {
        let poll = Some(std::time::Duration::from_millis(200));
        relay.set_read_timeout(poll).unwrap();
        upstream.set_read_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
        let mut buf = vec![0u8; 65_536];
        while !relay_done.load(std::sync::atomic::Ordering::Relaxed) {
            let Ok((n, client)) = relay.recv_from(&mut buf) else { continue };
            upstream.send(&buf[..n]).unwrap();
            let Ok(n) = upstream.recv(&mut buf) else { continue };
            let answer = &mut buf[..n];
            if let Some(at) = answer.windows(10).position(|w| w == b"untampered") {
                answer[at..at + 10].copy_from_slice(b"tampered!!");
            }
            relay.send_to(answer, client).unwrap();
        }
    });
    let o = run(&["resolve", "TEST/signed", "--certify", "--port", &relay_port]);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    relaying.join().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("signature does not verify"), "{}", text(&o.stderr));
    assert!(!text(&o.stdout).contains("tampered"), "altered values are not printed: {}", text(&o.stdout));
}

/// A write over plain HTTP is refused with the way out: HTTPS on the same port.
#[test]
fn plain_http_write_says_https_is_needed() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]);
    let body = r#"{"values":[{"index":1,"type":"URL","data":{"format":"string","value":"https://example.org"}}]}"#;
    let mut s = std::net::TcpStream::connect(format!("127.0.0.1:{}", server.http_port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    write!(
        s,
        "PUT /api/handles/TEST/plain HTTP/1.1\r\nHost: x\r\nAuthorization: Basic MzAwJTNBVEVTVCUyRkFETUlOOng=\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("HTTPS, on this same port") && answer.contains("allow_plain_http_admin"), "{answer}");
}

/// `serve --ephemeral` prints its credentials file's absolute path and removes
/// the file from the temp directory when it stops.
#[test]
fn ephemeral_credentials_are_removed_at_exit() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_handled"))
        .args(["serve", "--ephemeral", "--listen", "127.0.0.1", "--port", "0", "--http-port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let mut credentials = None;
    while stderr.read_line(&mut line).unwrap() > 0 && credentials.is_none() {
        credentials = line
            .strip_prefix("admin credentials written to ")
            .map(|rest| std::path::PathBuf::from(rest.split(" (keep").next().unwrap().to_string()));
        line.clear();
    }
    let credentials = credentials.expect("the credentials path is printed");
    assert!(credentials.is_absolute() && credentials.exists(), "{}", credentials.display());
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert!(!credentials.exists(), "{} outlives the ephemeral server", credentials.display());
}

/// `status` names the version and commit, the uptime and the handle count;
/// `--version` carries the commit too.
#[test]
fn status_shows_version_uptime_and_handles() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]);
    let o = run(&["status", "--http-port", &server.http_port]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let line = out.lines().find(|l| l.starts_with("server")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains(&format!("handled {} (commit ", env!("CARGO_PKG_VERSION"))), "{line}");
    assert!(line.contains(" up ") && line.contains(" handles") && !line.contains("? handles"), "{line}");
    let version = text(&run(&["--version"]).stdout);
    assert!(version.starts_with(&format!("handled {} (commit ", env!("CARGO_PKG_VERSION"))), "{version}");
}

/// `bench` against a server that is not there stops at once with a clear
/// error instead of measuring 100% errors for its whole duration.
#[test]
fn bench_stops_when_the_server_cannot_be_reached() {
    // A port just freed: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    for transport in ["udp", "tcp", "json-api"] {
        let started = std::time::Instant::now();
        let o = run(&["bench", "--transport", transport, "--port", &port, "-d", "30", "--timeout", "2", "--quiet"]);
        assert_eq!(o.status.code(), Some(1), "{transport}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("cannot reach") && text(&o.stderr).contains("nothing measured"),
            "{}",
            text(&o.stderr)
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(15), "{transport}: ran {:?}", started.elapsed());
    }
}

/// The servers a scenario starts leave nothing in the temp directory: `bench`
/// gives each a directory of its own for its admin credentials and removes it,
/// though it kills the servers (the fail-over scenario's primary with -9).
#[test]
fn bench_scenarios_leave_no_credentials_behind() {
    let (tmp, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_handled"))
        .args(["bench", "scenario", "failover", "--quick"])
        .env("TMPDIR", tmp.path())
        // Where the scenario writes its report.
        .current_dir(work.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("primary killed (SIGKILL)"), "{}", text(&o.stdout));
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "left in the temp directory: {left:?}");
}

/// `import` checks the whole file before writing: a bad line, a handle that
/// exists (without --replace) or a prefix not homed (with --strict) imports
/// nothing and says so with the line; counts are in words.
#[test]
fn import_checks_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let record =
        |h: &str| format!(r#"{{"handle":"{h}","values":[{{"index":1,"type":"URL","data":"https://example.org"}}]}}"#);
    let import = |lines: &[String], extra: &[&str]| {
        let file = dir.path().join("in.jsonl");
        std::fs::write(&file, lines.join("\n")).unwrap();
        let mut args = vec!["import", file.to_str().unwrap(), "--data-dir", data.to_str().unwrap()];
        args.extend(extra);
        let o = run(&args);
        (o.status.code(), text(&o.stderr))
    };
    let (code, err) = import(&[record("TEST/1"), "{not json".into()], &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("line 2: not JSON") && err.contains("nothing imported"), "{err}");

    let (code, err) = import(&[record("TEST/1")], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("imported 1 handle from"), "line 1 of the failed file was not imported: {err}");

    let (code, err) = import(&[record("TEST/2"), record("TEST/1")], &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("line 2: TEST/1 exists (--replace") && err.contains("nothing imported"), "{err}");
    let (code, err) = import(&[record("TEST/2"), record("TEST/1")], &["--replace"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("imported 2 handles (1 replaced)"), "{err}");

    let (code, err) = import(&[record("OTHER/1")], &["--strict"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("line 1: prefix OTHER is not homed here") && err.contains("nothing imported"), "{err}");
    let (code, err) = import(&[record("OTHER/1")], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("warning: 1 handle of prefix OTHER, which this server does not home"), "{err}");
}

/// SIGHUP re-reads the configuration file's reloadable keys (here
/// allow_list_handles) without a restart; a broken file changes nothing.
#[test]
fn sighup_reloads_the_configuration() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("handled.toml");
    std::fs::write(&config, "allow_list_handles = false\n").unwrap();
    let mut server = serve_keeping_stderr(dir.path(), &["--config", config.to_str().unwrap()]);
    let mut stderr = BufReader::new(server.stderr.take().unwrap());
    let mut hup = |expect: &str| {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(server.child.id() as i32, libc::SIGHUP) };
        let mut line = String::new();
        while stderr.read_line(&mut line).unwrap() > 0 && !line.starts_with("SIGHUP") {
            line.clear();
        }
        assert!(line.contains(expect), "{line}");
    };
    let list = || handled(dir.path(), &server.tcp_port, &["list", "TEST"]);
    let o = list();
    assert_eq!(o.status.code(), Some(3), "listing is off: {}", text(&o.stderr));
    std::fs::write(&config, "allow_list_handles = true\n").unwrap();
    hup("allow_list_handles changed");
    let o = list();
    assert!(o.status.success(), "listing is on after SIGHUP: {}", text(&o.stderr));
    std::fs::write(&config, "allow_list_handles = maybe\n").unwrap();
    hup("nothing reloaded");
    assert!(list().status.success(), "a broken file changes nothing");
}

/// Without --config, SIGHUP says there is no file instead of listing keys it
/// did not read (it read nothing: the self-signed certificate has no file).
#[test]
fn sighup_without_a_configuration_file_says_so() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut server = serve_keeping_stderr(dir.path(), &[]);
    let mut stderr = BufReader::new(server.stderr.take().unwrap());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGHUP) };
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 && !line.starts_with("SIGHUP") {
        line.clear();
    }
    assert_eq!(line.trim_end(), "SIGHUP: no configuration file (serve --config FILE), so no key was read again");
}

/// Logs: UDP and TCP requests get access lines, failed authentications are
/// logged with identity and peer, JSON on request, never colour codes in a
/// pipe; `access_log = "off"` silences access lines.
#[test]
fn access_and_authentication_logs() {
    use std::io::Read;
    let stop = |mut server: spawn::Server| {
        let mut stderr = server.stderr.take().unwrap();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) };
        let mut out = String::new();
        stderr.read_to_string(&mut out).unwrap();
        out
    };
    let dir = tempfile::tempdir().unwrap();
    let env = [("HANDLED_LOG", "warn,access=info"), ("HANDLED_LOG_FORMAT", "json")];
    let server = spawn::serve_with_env(dir.path(), &[], &env);
    let port = server.tcp_port.clone();
    assert!(run(&["resolve", "TEST/ADMIN", "--port", &port]).status.success());
    assert!(run(&["resolve", "TEST/ADMIN", "--tcp", "--port", &port]).status.success());
    let wrong =
        run(&["create", "TEST/x", "1:URL:x", "--port", &port, "--admin", "300:TEST/ADMIN", "--secret", "wrong"]);
    assert_eq!(wrong.status.code(), Some(4));
    let log = stop(server);
    assert!(!log.contains('\u{1b}'), "no colour codes in a pipe: {log}");
    let lines: Vec<serde_json::Value> =
        log.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).expect(l)).collect();
    let access = |transport: &str| {
        lines.iter().any(|l| {
            l["target"] == "access"
                && l["fields"]["transport"] == transport
                && l["fields"]["handle"] == "TEST/ADMIN"
                && l["fields"]["op"] == "RESOLUTION"
        })
    };
    assert!(access("udp") && access("tcp"), "{log}");
    assert!(
        lines.iter().any(|l| l["target"] == "auth"
            && l["fields"]["identity"] == "300:TEST/ADMIN"
            && l["fields"]["peer"].as_str().is_some_and(|p| p.starts_with("127.0.0.1:"))),
        "{log}"
    );

    // A directory of its own: a server never writes new credentials over an existing file.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quiet.toml");
    std::fs::write(&config, "access_log = \"off\"\n").unwrap();
    let server = spawn::serve_with_env(dir.path(), &["--config", config.to_str().unwrap()], &env[..1]);
    assert!(run(&["resolve", "TEST/ADMIN", "--port", &server.tcp_port]).status.success());
    let log = stop(server);
    assert!(!log.contains("access") && !log.contains('\u{1b}'), "{log}");
}

/// 18.8: a port in use is named, and a misspelt key is one line with its place.
#[test]
fn start_up_errors_name_what_is_wrong() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = run(&["serve", "--ephemeral", "--listen", "127.0.0.1", "--port", &port, "--http-port", "0"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains(&format!("native TCP 127.0.0.1:{port}")) && err.contains("in use"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("typo.toml");
    std::fs::write(&config, "port = 0\nmax_concurent = 5\n").unwrap();
    let out = run(&["serve", "--ephemeral", "--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("typo.toml:2:1: unknown key `max_concurent`; did you mean `max_concurrent`?"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
