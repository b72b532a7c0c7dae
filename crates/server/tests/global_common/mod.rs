//! A global Handle System on loopback, all `handled`: a root homing `0.NA`
//! whose prefix handles carry HS_SITE values, prefix servers of each kind (a
//! plain one, a site of two servers picked by the handle's hash, a prefix
//! whose HS_SERV names a service handle, a derived prefix `21.*` delegated
//! by `0.NA/21`'s HS_SITE.PREFIX), and a resolver `handled` with a
//! root_info naming the root.

#![allow(dead_code)]

use handled_client::{Connection, Protocol, ResolveOptions};
use handled_proto::codec::Codec;
use handled_proto::data::site::SiteInfo;
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::request::{RequestBody, ResolutionRequest};
use handled_proto::value::HandleValue;
use handled_server::config::Config;
use handled_store::HandleRecord;
use handled_testkit::TestServer;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub struct World {
    pub root: TestServer,
    /// P1 (and the service handle P1/SERVICE), P3 through it, 21.T1, and P4
    /// (whose site record at the root carries the wrong key).
    pub a: TestServer,
    /// The two servers of P2's site, in the site record's order.
    pub b: [TestServer; 2],
    /// Holds the prefix handles derived from 21 (`0.NA/21.T1`).
    pub d: TestServer,
    pub resolver: TestServer,
    /// P2 handles that the site's hash puts on b[0] and on b[1].
    pub p2: [String; 2],
    /// The resolver's root_info file.
    pub root_info: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// The site record a server publishes (GET_SITE_INFO).
pub fn site_of(s: &TestServer) -> SiteInfo {
    SiteInfo::decode_data(&s.state.native.site_bytes).expect("site record")
}

pub fn url(index: i32, url: &str, ttl: i32) -> HandleValue {
    let mut v = HandleValue::new(index, "URL", url);
    v.ttl = ttl;
    v
}

/// Store `values` as `h` on `s`, as an administrator's create would.
pub async fn put(s: &TestServer, h: &str, values: Vec<HandleValue>) {
    let key = s.state.storage_key(h.as_bytes());
    s.state.records().put_many(vec![(key, HandleRecord::new(values))]).await.expect("put");
}

async fn server(prefixes: &[&str]) -> TestServer {
    let prefixes: Vec<String> = prefixes.iter().map(|p| p.to_string()).collect();
    handled_testkit::start(|c| c.prefixes = prefixes).await
}

impl World {
    /// The system, with a resolver configured by `tweak` (after `enabled`,
    /// `allow_recursion` and its root_info are set).
    pub async fn start(tweak: impl FnOnce(&mut Config)) -> World {
        let root = server(&["0.NA"]).await;
        let a = server(&["P1", "P3", "P4", "21.T1"]).await;
        let b = [server(&["P2"]).await, server(&["P2"]).await];
        let d = server(&["21"]).await;

        let mut two = site_of(&b[0]);
        two.servers.push(site_of(&b[1]).servers.remove(0));
        two.servers[1].server_id = 2;
        let site = |s: &SiteInfo| HandleValue::new(1, "HS_SITE", s.to_bytes());
        put(&root, "0.NA/P1", vec![site(&site_of(&a))]).await;
        put(&root, "0.NA/P2", vec![site(&two)]).await;
        put(&root, "0.NA/P3", vec![HandleValue::new(1, "HS_SERV", "P1/SERVICE")]).await;
        // P4's site names server A with another server's key: A's signed answers cannot verify.
        let mut forged = site_of(&a);
        forged.servers[0].public_key = site_of(&d).servers[0].public_key.clone();
        put(&root, "0.NA/P4", vec![site(&forged)]).await;
        put(&root, "0.NA/21", vec![HandleValue::new(1, "HS_SITE.PREFIX", site_of(&d).to_bytes())]).await;
        put(&d, "0.NA/21.T1", vec![site(&site_of(&a))]).await;
        put(&a, "P1/SERVICE", vec![site(&site_of(&a))]).await;
        put(&a, "P1/doc", vec![url(1, "https://example.org/p1", 3600), HandleValue::new(2, "EMAIL", "p1@example.org")])
            .await;
        put(&a, "P3/doc", vec![url(1, "https://example.org/p3", 3600)]).await;
        put(&a, "P4/doc", vec![url(1, "https://example.org/p4", 3600)]).await;
        put(&a, "21.T1/doc", vec![url(1, "https://example.org/derived", 3600)]).await;
        // One handle on each server of P2's site, where its hash puts it: a
        // resolver asking the wrong server would be told "not found".
        let mut p2: [Option<String>; 2] = [None, None];
        for n in 0.. {
            let h = format!("P2/doc{n}");
            let at = two.server_index(h.as_bytes());
            if p2[at].is_none() {
                put(&b[at], &h, vec![url(1, &format!("https://example.org/{h}"), 3600)]).await;
                p2[at] = Some(h);
            }
            if p2.iter().all(Option::is_some) {
                break;
            }
        }
        let p2 = p2.map(Option::unwrap);

        let dir = tempfile::tempdir().expect("tempdir");
        let root_info = dir.path().join("root_info");
        std::fs::write(&root_info, &root.state.native.site_bytes).expect("root_info");
        let resolver = handled_testkit::start(|c| {
            c.prefixes = vec!["LOCAL".into()];
            c.resolver.enabled = true;
            c.resolver.allow_recursion = true;
            c.resolver.root_info = Some(root_info.clone());
            // Walks of these tests take milliseconds; a debug build under a
            // loaded test run must not turn one into a timeout (the tests about
            // timeouts set their own).
            c.resolver.timeout_ms = WALK_TIMEOUT_MS;
            tweak(c);
        })
        .await;
        World { root, a, b, d, resolver, p2, root_info, _dir: dir }
    }

    pub fn upstream_queries(&self) -> u64 {
        self.snapshot().upstream_queries
    }

    pub fn snapshot(&self) -> handled_resolver::metrics::Snapshot {
        self.resolver.state.recursion.current().expect("recursion on").resolver.snapshot()
    }
}

/// The resolver's `timeout_ms` in a [`World`]: generous, see there.
pub const WALK_TIMEOUT_MS: u64 = 30_000;

/// A native resolution of `h` at `addr` (REC set, as the Java client sends),
/// its code and URL data.
pub async fn native(protocol: Protocol, addr: SocketAddr, h: &str) -> (ResponseCode, Vec<String>) {
    let mut c = Connection::open(protocol, addr, Duration::from_secs(10), false).await.expect("connect");
    let r = c.resolve(h.as_bytes(), &ResolveOptions::default()).await.expect("answer");
    (r.code(), data(&r))
}

/// A resolution without REC, its code and message.
pub async fn without_rec(addr: SocketAddr, h: &str) -> (ResponseCode, String) {
    let r = flagged(addr, h, OpFlags::CA | OpFlags::PO).await;
    (r.code(), r.message().unwrap_or_default())
}

/// A resolution over TCP with exactly `flags`.
pub async fn flagged(addr: SocketAddr, h: &str, flags: OpFlags) -> handled_client::Response {
    let mut c = Connection::open(Protocol::Tcp, addr, Duration::from_secs(10), false).await.expect("connect");
    let body =
        RequestBody::Resolution(ResolutionRequest { handle: h.as_bytes().to_vec(), indexes: vec![], types: vec![] });
    c.request(&body, flags).await.expect("answer").remove(0)
}

fn data(r: &handled_client::Response) -> Vec<String> {
    handled_client::resolved_values(r)
        .unwrap_or_default()
        .iter()
        .map(|v| String::from_utf8_lossy(&v.data).into_owned())
        .collect()
}

/// `GET path` on the HTTP port: status line and headers, body.
pub async fn http_get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut answer)).await.expect("in time").expect("read");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (head.to_string(), body.to_string())
}
