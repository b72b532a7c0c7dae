//! Three `handled` primaries in one multi-primary group (issue 27 item 2,
//! Handle.Net's Technical Manual §7.3; docs/multi-primary.md), process
//! against process on loopback: creates on each reach all; the same handle
//! changed on two primaries that could not see each other's change settles
//! everywhere on the later one; a delete wins over an older modify, even when
//! the modify arrives after it. Members that cannot reach a peer are made by
//! stopping it, so no outcome depends on when a pull happens to run.

mod spawn;

use handled_client::{AdminSession, ConnectParams, Connection, Credentials, KeyChoice, Protocol, ResolveOptions};
use handled_proto::header::ResponseCode;
use handled_proto::response::ResponseBody;
use handled_proto::value::HandleValue;
use spawn::Server;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

const SITES: &str = "TEST/SITES";

/// A native port free for both TCP and UDP, and an HTTP port. The ports are
/// written into the group's sites record before the members start, and a
/// member restarts on its own, so they are taken below the kernel's ephemeral
/// range (which every `bind(0)` of this and any other process draws from) and
/// handed out once per process: nothing else can take them between the check
/// and the member's bind.
fn free_ports() -> (u16, u16) {
    (free_port(true), free_port(false))
}

fn free_port(with_udp: bool) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let low = ephemeral_low.saturating_sub(12_000).max(1024);
    let span = ephemeral_low.saturating_sub(low).max(1);
    // Each test process starts elsewhere in the range, so two at once rarely meet.
    let start = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let port = (low + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span) as u16;
        let tcp_free = TcpListener::bind(("127.0.0.1", port)).is_ok();
        if tcp_free && (!with_udp || UdpSocket::bind(("127.0.0.1", port)).is_ok()) {
            return port;
        }
    }
    panic!("no free port below the ephemeral range from {low}");
}

/// Member `name` on `ports`, with its data in `dir/name`; `in_group`: with
/// the multi-primary keys (finding the group at `resolver` until it holds
/// the sites handle), else a plain primary.
fn start(dir: &Path, name: &str, ports: (u16, u16), in_group: bool, resolver: u16) -> Server {
    start_with_clock(dir, name, ports, in_group, resolver, 0)
}

/// [`start`], with the member's clock `ahead_ms` ahead of the machine's
/// (`HANDLED_CLOCK_OFFSET_MS`, the clock that dates its changes).
fn start_with_clock(dir: &Path, name: &str, ports: (u16, u16), in_group: bool, resolver: u16, ahead_ms: i64) -> Server {
    let mut text =
        "server_admins = [\"300:TEST/ADMIN\"]\nreplication_admins = [\"300:TEST/ADMIN\", \"301:TEST/ADMIN\"]\n"
            .to_string();
    if in_group {
        text.push_str(&format!(
            "replication_sites_handle = \"{SITES}\"\nmulti_primary = true\nreplication_resolver = \"127.0.0.1:{resolver}\"\n\
             replication_credentials = \"{}\"\nreplication_credentials_key = \"public_key\"\n\
             replication_interval_ms = 200\nreplication_timeout_ms = 5000\n",
            dir.join("creds.json").display()
        ));
    }
    serve(dir, name, &text, ports, &[("HANDLED_CLOCK_OFFSET_MS", &ahead_ms.to_string())])
}

/// `handled serve` as `name` with the configuration `text`, its data in `dir/name`.
fn serve(dir: &Path, name: &str, text: &str, ports: (u16, u16), env: &[(&str, &str)]) -> Server {
    let data = dir.join(name);
    std::fs::create_dir_all(&data).unwrap();
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(&config, text).unwrap();
    let (port, http) = (ports.0.to_string(), ports.1.to_string());
    let args = ["--config", config.to_str().unwrap(), "--data-dir", data.to_str().unwrap()];
    let args = [&args[..], &["--listen", "127.0.0.1", "--port", &port, "--http-port", &http]].concat();
    let mut server = spawn::serve_with_env(dir, &args, env);
    server.drain_stderr();
    server
}

fn addr(port: &str) -> SocketAddr {
    format!("127.0.0.1:{port}").parse().unwrap()
}

fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

async fn admin(dir: &Path, server: &Server) -> AdminSession {
    let creds = Credentials::load(&dir.join("creds.json"), KeyChoice::Secret).unwrap();
    AdminSession::open(ConnectParams::new(Protocol::Tcp, addr(&server.tcp_port)), creds).await.unwrap()
}

/// The answer for `h` on `server`: its code and values (timestamps included).
fn record(server: &Server, h: &str) -> (ResponseCode, Option<Vec<HandleValue>>) {
    block(async {
        let mut c =
            Connection::open(Protocol::Tcp, addr(&server.tcp_port), Duration::from_secs(10), false).await.unwrap();
        let r = c.resolve(h.as_bytes(), &ResolveOptions::default()).await.unwrap();
        (r.code(), handled_client::resolved_values(&r).map(<[HandleValue]>::to_vec))
    })
}

/// The URL of `h` on `server` (None: not found).
fn url(server: &Server, h: &str) -> Option<String> {
    let (_, values) = record(server, h);
    values?.iter().find(|v| v.index == 1).map(|v| String::from_utf8_lossy(&v.data).into_owned())
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every member gives the same answer for every handle of `handles`.
fn agree(members: &[&Server], handles: &[&str]) -> bool {
    handles.iter().all(|h| {
        let first = record(members[0], h);
        members[1..].iter().all(|m| record(m, h) == first)
    })
}

/// [`agree`], or which handle differs and how.
fn all_equal(members: &[&Server], handles: &[&str]) {
    for h in handles {
        let first = record(members[0], h);
        for m in &members[1..] {
            assert_eq!(record(m, h), first, "{h} differs between members");
        }
    }
}

/// A metric's value (the first series whose name and labels start with `series`).
fn metric(server: &Server, series: &str) -> Option<f64> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr(&server.http_port)).unwrap();
    write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.lines().find(|l| l.starts_with(series)).and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

fn site_record(server: &Server) -> Vec<u8> {
    block(async {
        let mut c =
            Connection::open(Protocol::Tcp, addr(&server.tcp_port), Duration::from_secs(10), false).await.unwrap();
        match c.site_info().await.unwrap().body {
            ResponseBody::SiteInfo(bytes) => bytes.to_vec(),
            other => panic!("site info: {other:?}"),
        }
    })
}

fn set_url(dir: &Path, server: &Server, h: &str, url: &str) {
    block(async { admin(dir, server).await.modify_values(h.as_bytes(), &[HandleValue::new(1, "URL", url)]).await })
        .unwrap();
}

#[test]
fn three_primaries_settle_on_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ports = [free_ports(), free_ports(), free_ports()];
    // A begins as a plain primary: it makes TEST, TEST/ADMIN and the credentials.
    let a = start(d, "a", ports[0], false, 0);
    let mut b = Some(start(d, "b", ports[1], true, ports[0].0));
    let c = start(d, "c", ports[2], true, ports[0].0);
    // The sites handle holds the three site records (priorities 1, 2, 3).
    let sites: Vec<HandleValue> = [&a, b.as_ref().unwrap(), &c]
        .iter()
        .enumerate()
        .map(|(i, s)| HandleValue::new(i as i32 + 1, "HS_SITE", site_record(s)))
        .collect();
    block(async {
        let mut on_a = admin(d, &a).await;
        on_a.create(SITES.as_bytes(), &sites).await.unwrap();
        for h in ["TEST/x", "TEST/y"] {
            on_a.create(h.as_bytes(), &[HandleValue::new(1, "URL", "https://first")]).await.unwrap();
        }
    });
    drop(a);
    let a = start(d, "a", ports[0], true, ports[0].0);
    wait_for("B and C to hold A's handles", || {
        [b.as_ref().unwrap(), &c]
            .iter()
            .all(|m| url(m, "TEST/y").is_some() && record(m, "TEST/ADMIN").0 == ResponseCode::SUCCESS)
    });

    // Creates on different primaries reach all.
    for (tag, m) in [("a", &a), ("b", b.as_ref().unwrap()), ("c", &c)] {
        let h = format!("TEST/on-{tag}");
        block(async { admin(d, m).await.create(h.as_bytes(), &[HandleValue::new(1, "URL", tag)]).await }).unwrap();
    }
    wait_for("every create on every member", || {
        [&a, b.as_ref().unwrap(), &c]
            .iter()
            .all(|m| ["a", "b", "c"].iter().all(|t| url(m, &format!("TEST/on-{t}")).is_some()))
    });

    // x and y changed on A while B is down, then on B while A is down: B's
    // changes are the later ones.
    drop(b.take());
    set_url(d, &a, "TEST/x", "https://from-a");
    set_url(d, &a, "TEST/y", "https://from-a");
    wait_for("C to take A's changes", || url(&c, "TEST/y").as_deref() == Some("https://from-a"));
    drop(a);
    let b = start(d, "b", ports[1], true, ports[0].0);
    set_url(d, &b, "TEST/x", "https://from-b");
    block(async { admin(d, &b).await.delete(b"TEST/y").await }).unwrap();
    // A back as a plain primary: it serves its log (its older changes, with
    // its values) but takes nothing from B yet. B pulls all of it and keeps
    // its own later modify and delete: the delete's date is kept.
    let a = start(d, "a", ports[0], false, 0);
    let a_last = metric(&a, "handled_txn_log_last_id").unwrap();
    wait_for("B to pull all of A's log", || {
        metric(&b, "handled_replication_last_txn_id{source=\"0:1:TEST/SITES\"}").is_some_and(|v| v >= a_last)
    });
    assert_eq!(url(&b, "TEST/x").as_deref(), Some("https://from-b"), "an older modify won");
    assert_eq!(record(&b, "TEST/y").0, ResponseCode::HANDLE_NOT_FOUND, "an older modify resurrected a deleted handle");
    drop(a);
    let a = start(d, "a", ports[0], true, ports[0].0);

    let members = [&a, &b, &c];
    wait_for("the later modify everywhere", || {
        members.iter().all(|m| url(m, "TEST/x").as_deref() == Some("https://from-b"))
    });
    wait_for("the later delete everywhere", || {
        members.iter().all(|m| record(m, "TEST/y").0 == ResponseCode::HANDLE_NOT_FOUND)
    });
    // A's restarts re-date its site record in 0.NA/TEST (a new serial): that
    // change travels like any other, so the group settles on it in a pull or two.
    let all = ["TEST/x", "TEST/y", "TEST/on-a", "TEST/on-b", "TEST/on-c", SITES, "TEST/ADMIN", "0.NA/TEST"];
    let settled = Instant::now();
    while !agree(&members, &all) && settled.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    all_equal(&members, &all);
}

/// A proxied mirror (`replication_pull_other_transactions`, Handle.Net's
/// proxied mirroring) of member `source` (`index:handle` of its HS_SITE value).
fn start_proxied_mirror(dir: &Path, ports: (u16, u16), source: &str, resolver: u16) -> Server {
    let text = format!(
        "replication_source = \"{source}\"\nreplication_pull_other_transactions = true\n\
         replication_resolver = \"127.0.0.1:{resolver}\"\nreplication_credentials = \"{}\"\n\
         replication_credentials_key = \"public_key\"\nreplication_interval_ms = 200\nreplication_timeout_ms = 5000\n",
        dir.join("creds.json").display()
    );
    serve(dir, "m", &text, ports, &[])
}

#[test]
fn a_proxied_mirror_pulls_every_queue_from_one_member() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ports = [free_ports(), free_ports(), free_ports()];
    let a = start(d, "a", ports[0], false, 0);
    let b = start(d, "b", ports[1], true, ports[0].0);
    let sites: Vec<HandleValue> =
        [&a, &b].iter().enumerate().map(|(i, s)| HandleValue::new(i as i32 + 1, "HS_SITE", site_record(s))).collect();
    block(async { admin(d, &a).await.create(SITES.as_bytes(), &sites).await }).unwrap();
    drop(a);
    let a = start(d, "a", ports[0], true, ports[0].0);
    wait_for("B to hold A's handles", || record(&b, SITES).0 == ResponseCode::SUCCESS);
    // M pulls from B only: A's changes reach it through the queue B keeps of A.
    let m = start_proxied_mirror(d, ports[2], &format!("2:{SITES}"), ports[0].0);
    for (tag, member) in [("a", &a), ("b", &b)] {
        let h = format!("TEST/on-{tag}");
        block(async { admin(d, member).await.create(h.as_bytes(), &[HandleValue::new(1, "URL", tag)]).await }).unwrap();
    }
    wait_for("the proxied mirror to hold the creates of both members", || {
        url(&m, "TEST/on-a").as_deref() == Some("a") && url(&m, "TEST/on-b").as_deref() == Some("b")
    });
    // Later changes on A, only ever pulled from B.
    set_url(d, &a, "TEST/on-a", "https://later-on-a");
    block(async { admin(d, &a).await.delete(b"TEST/on-b").await }).unwrap();
    wait_for("A's later changes on the proxied mirror", || {
        url(&m, "TEST/on-a").as_deref() == Some("https://later-on-a")
            && record(&m, "TEST/on-b").0 == ResponseCode::HANDLE_NOT_FOUND
    });
    let members = [&a, &b, &m];
    let all = ["TEST/on-a", "TEST/on-b", SITES, "TEST/ADMIN"];
    let settled = Instant::now();
    while !agree(&members, &all) && settled.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    all_equal(&members, &all);
    // Its position in B's own queue and in the queue B relays for A.
    assert!(metric(&m, "handled_replication_last_txn_id").is_some_and(|v| v > 0.0));
}

/// Issue 41 S6: B's clock is an hour ahead, so B dates its changes an hour
/// ahead. A (a right clock) holds B's change of `TEST/x` instead of applying
/// it at once, and its own write meanwhile is dated before it; once A's clock
/// reaches B's date (A restarted an hour "later"), A applies it and both
/// settle on it: every member applies every change with its origin's date
/// (docs/multi-primary.md, "Clocks").
#[test]
fn a_member_an_hour_ahead_waits_for_its_dates() {
    const HOUR_MS: i64 = 3_600_000;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ports = [free_ports(), free_ports()];
    let a = start(d, "a", ports[0], false, 0);
    let b = start_with_clock(d, "b", ports[1], true, ports[0].0, HOUR_MS);
    let sites: Vec<HandleValue> =
        [&a, &b].iter().enumerate().map(|(i, s)| HandleValue::new(i as i32 + 1, "HS_SITE", site_record(s))).collect();
    block(async {
        let mut on_a = admin(d, &a).await;
        on_a.create(SITES.as_bytes(), &sites).await.unwrap();
        on_a.create(b"TEST/x", &[HandleValue::new(1, "URL", "https://first")]).await.unwrap();
    });
    drop(a);
    let a = start(d, "a", ports[0], true, ports[0].0);
    wait_for("B to hold A's handles", || {
        url(&b, "TEST/x").is_some() && record(&b, "TEST/ADMIN").0 == ResponseCode::SUCCESS
    });

    set_url(d, &b, "TEST/x", "https://from-b-an-hour-ahead");
    let held = "handled_replication_held_change_ahead_seconds{source=\"0:2:TEST/SITES\"}";
    wait_for("A to meet B's change", || {
        metric(&a, held).is_some_and(|s| s > 3000.0) || url(&a, "TEST/x").as_deref() != Some("https://first")
    });
    assert_eq!(url(&a, "TEST/x").as_deref(), Some("https://first"), "A applied a change dated an hour ahead of it");
    // Written on A while B's change waits: dated before it, so B keeps its own.
    set_url(d, &a, "TEST/x", "https://from-a");
    let a_last = metric(&a, "handled_txn_log_last_id").unwrap();
    wait_for("B to pull A's write", || {
        metric(&b, "handled_replication_last_txn_id{source=\"0:1:TEST/SITES\"}").is_some_and(|v| v >= a_last)
    });
    assert_eq!(url(&b, "TEST/x").as_deref(), Some("https://from-b-an-hour-ahead"));

    // An hour later for A: B's change is due and wins on both.
    drop(a);
    let a = start_with_clock(d, "a", ports[0], true, ports[0].0, HOUR_MS);
    wait_for("A to apply B's change when its date came", || {
        url(&a, "TEST/x").as_deref() == Some("https://from-b-an-hour-ahead") && metric(&a, held) == Some(0.0)
    });
    all_equal(&[&a, &b], &["TEST/x", SITES, "TEST/ADMIN"]);
}
