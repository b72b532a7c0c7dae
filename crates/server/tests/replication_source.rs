//! `handled` as a Handle.Net replication source, end to end over TCP: who may
//! pull, GET_NEXT_TXN_ID, dumps, the log with current values, the mirror's
//! layout, redumps after pruning, long polls, the pre-2.8 signed stream, the
//! stream limits, and the clear refusals on UDP and HTTP.

mod admin_common;
mod replication_common;

use admin_common::AdminServer;
use handled_client::{AdminSession, Connection, KeyChoice, Protocol};
use handled_proto::codec::Codec;
use handled_proto::data::vlist::ValueList;
use handled_proto::envelope::Version;
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::replication::request::RESUME_AFTER_HANDLE;
use handled_proto::replication::txn_stream::{STATUS_NEED_TO_REDUMP, STATUS_SENDING};
use handled_proto::replication::{
    DumpHandlesRequest, DumpStreamItem, MirrorLayout, RetrieveTxnRequest, TxnAction, TxnRecord, TxnStreamItem,
    NEXT_TXN_ID_HANDLE,
};
use handled_proto::request::RequestBody;
use handled_proto::response::ResponseBody;
use handled_proto::value::{HandleValue, ValuePermissions, ValueReference};
use handled_store::HandleRecord;
use replication_common::{site_key, Identity, Puller};
use std::time::{Duration, Instant};

const SECRET: &[u8] = b"mirror secret";
const MIRROR: &[u8] = b"TEST/MIRROR";

fn secret_value() -> HandleValue {
    let mut v = HandleValue::new(300, "HS_SECKEY", SECRET);
    v.permissions = ValuePermissions(0x0c);
    v
}

fn url(i: i32, to: &str) -> HandleValue {
    HandleValue::new(i, "URL", to)
}

/// A source whose replication admins are TEST/MIRROR and the members of the
/// group 200:TEST/GROUP (TEST/GROUPED); TEST/OTHER is nobody in particular.
async fn source(tweak: impl FnOnce(&mut handled_server::config::Config)) -> (AdminServer, AdminSession) {
    let s = admin_common::start_with(|c| {
        c.access.server_admins = vec!["300:TEST/ADMIN".into()];
        c.replication.admins = vec!["300:TEST/MIRROR".into(), "200:TEST/GROUP".into()];
        c.auth.backup_admins = vec!["300:TEST/BACKUP".into()];
        tweak(c)
    })
    .await;
    let mut admin = s.admin(Protocol::Tcp, KeyChoice::Secret, false).await;
    for h in [MIRROR, b"TEST/OTHER", b"TEST/GROUPED", b"TEST/BACKUP"] {
        admin.create(h, &[secret_value()]).await.unwrap();
    }
    let members = ValueList(vec![ValueReference { handle: b"TEST/GROUPED".to_vec(), index: 300 }]);
    admin.create(b"TEST/GROUP", &[HandleValue::new(200, "HS_VLIST", members.to_bytes())]).await.unwrap();
    (s, admin)
}

fn puller(s: &AdminServer, who: Option<&[u8]>, version: Version) -> Puller {
    Puller {
        addr: s.addrs.tcp,
        identity: who.map(|h| Identity { handle: h.to_vec(), index: 300, secret: SECRET.to_vec() }),
        version,
        site_key: site_key(&s.state.native.site_bytes),
    }
}

fn mirror(s: &AdminServer) -> Puller {
    puller(s, Some(MIRROR), Version::V2_10)
}

const ONE_SERVER: MirrorLayout = MirrorLayout { hash_type: 2, num_servers: 1, server_num: 0 };

fn since(version: Version, last: u64, layout: MirrorLayout) -> RequestBody {
    RequestBody::RetrieveTxnLog(RetrieveTxnRequest::since(version, last, 1_000, layout))
}

fn dump_request(layout: MirrorLayout, resume: Option<(Vec<u8>, i32)>) -> RequestBody {
    RequestBody::DumpHandles(DumpHandlesRequest { layout, resume })
}

fn records(items: &[TxnStreamItem]) -> Vec<TxnRecord> {
    items
        .iter()
        .filter_map(|i| match i {
            TxnStreamItem::Record(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

async fn last_id(s: &AdminServer) -> u64 {
    s.state.txn_log().txn_log_bounds().await.unwrap().last
}

#[tokio::test]
async fn next_txn_id_needs_no_authentication() {
    let (s, mut admin) = source(|_| {}).await;
    let anonymous = puller(&s, None, Version::V2_10);
    let ask = RequestBody::GetNextTxnId { handle: NEXT_TXN_ID_HANDLE.to_vec() };
    let (r, _) = anonymous.request(&ask).await;
    assert_eq!(r.code(), ResponseCode::SUCCESS);
    assert_eq!(r.body, ResponseBody::NextTxnId(last_id(&s).await + 1));
    admin.create(b"TEST/next", &[url(1, "https://example.org")]).await.unwrap();
    let (r, _) = anonymous.request(&ask).await;
    assert_eq!(r.body, ResponseBody::NextTxnId(last_id(&s).await + 1));
}

#[tokio::test]
async fn pulls_need_a_replication_admin() {
    let (s, _admin) = source(|_| {}).await;
    for body in [since(Version::V2_10, 0, ONE_SERVER), dump_request(ONE_SERVER, None)] {
        let (r, _) = puller(&s, None, Version::V2_10).request(&body).await;
        assert_eq!(r.code(), ResponseCode::AUTHENTICATION_NEEDED, "anonymous");
        let (r, _) = puller(&s, Some(b"TEST/OTHER"), Version::V2_10).request(&body).await;
        assert_eq!(r.code(), ResponseCode::INVALID_ADMIN, "proven but not a replication admin (as the original: 400)");
        let (r, _) = puller(&s, Some(b"TEST/GROUPED"), Version::V2_10).request(&body).await;
        assert_eq!(r.code(), ResponseCode::SUCCESS, "a member of a group in replication_admins");
        let (r, _) = puller(&s, Some(b"TEST/BACKUP"), Version::V2_10).request(&body).await;
        assert_eq!(r.code(), ResponseCode::INVALID_ADMIN, "backup admins may not pull");
    }
    // Server admins may pull too.
    let creds: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&s.credentials).unwrap()).unwrap();
    let admin = Puller {
        identity: Some(Identity {
            handle: creds["handle"].as_str().unwrap().as_bytes().to_vec(),
            index: creds["secret_key"]["index"].as_i64().unwrap() as i32,
            secret: creds["secret_key"]["secret"].as_str().unwrap().as_bytes().to_vec(),
        }),
        ..mirror(&s)
    };
    let items = admin.pull(&since(Version::V2_10, 0, ONE_SERVER)).await;
    assert!(!records(&items).is_empty());
}

#[tokio::test]
async fn backup_server_checkpoints_for_backup_admins() {
    let (s, _admin) = source(|_| {}).await;
    let body = RequestBody::BackupServer { handle: b"0.SITE/BACKUP".to_vec() };
    let (r, _) = puller(&s, Some(b"TEST/BACKUP"), Version::V2_10).request(&body).await;
    assert_eq!(r.code(), ResponseCode::SUCCESS);
    let (r, _) = puller(&s, Some(MIRROR), Version::V2_10).request(&body).await;
    assert_eq!(r.code(), ResponseCode::INVALID_ADMIN);
}

#[tokio::test]
async fn a_dump_carries_every_handle_with_its_values_page_after_page() {
    let (s, _admin) = source(|_| {}).await;
    // More than one page of the store scan.
    let n = 600;
    let records: Vec<(Vec<u8>, HandleRecord)> = (0..n)
        .map(|i| {
            let h = format!("TEST/D{i:04}").into_bytes();
            (h, HandleRecord::new(vec![url(1, &format!("https://example.org/{i}")), url(2, "https://x.example")]))
        })
        .collect();
    s.state.records().put_many(records).await.unwrap();
    let last = last_id(&s).await;
    let items = mirror(&s).dump(&dump_request(ONE_SERVER, None)).await;
    assert_eq!(items[0], DumpStreamItem::Header { version: 2 });
    let DumpStreamItem::ThisServer { last_txn_id, .. } = items[1] else { panic!("{:?}", items[1]) };
    assert_eq!(last_txn_id, last, "the mirror resumes the log where the dump was taken");
    let mut stored = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let keys = s.state.records().scan_keys(b"", after.as_deref(), 1000).await.unwrap();
        let Some(l) = keys.last().cloned() else { break };
        for k in keys {
            let r = s.state.records().get(&k).await.unwrap().unwrap();
            stored.push(DumpStreamItem::Handle { handle: k, values: r.values });
        }
        after = Some(l);
    }
    let dumped: Vec<_> = items.iter().filter(|i| matches!(i, DumpStreamItem::Handle { .. })).cloned().collect();
    assert!(dumped.len() > n);
    assert_eq!(dumped, stored, "every handle, in storage order, with its values");
    assert!(items.contains(&DumpStreamItem::HomedPrefix(b"0.NA/TEST".to_vec())));
    assert_eq!(items.last(), Some(&DumpStreamItem::Done));

    // Resumed after a handle: the rest of the scan, no log position again.
    let resume = Some((b"TEST/D0299".to_vec(), RESUME_AFTER_HANDLE));
    let items = mirror(&s).dump(&dump_request(ONE_SERVER, resume)).await;
    assert!(!items.iter().any(|i| matches!(i, DumpStreamItem::ThisServer { .. })));
    let first = items.iter().find(|i| matches!(i, DumpStreamItem::Handle { .. })).unwrap();
    assert!(matches!(first, DumpStreamItem::Handle { handle, .. } if handle == b"TEST/D0300"));
    assert_eq!(items.last(), Some(&DumpStreamItem::Done));
}

#[tokio::test]
async fn the_log_brings_each_change_with_the_values_current_at_send_time() {
    let (s, mut admin) = source(|_| {}).await;
    let start = last_id(&s).await;
    admin.create(b"TEST/a", &[url(1, "https://one.example")]).await.unwrap();
    admin.modify_values(b"TEST/a", &[url(1, "https://two.example")]).await.unwrap();
    admin.create(b"TEST/b", &[url(1, "https://b.example")]).await.unwrap();
    admin.delete(b"TEST/b").await.unwrap();
    admin.home_prefix(b"NEW").await.unwrap();
    admin.unhome_prefix(b"0.NA/NEW").await.unwrap();
    let items = mirror(&s).pull(&since(Version::V2_10, start, ONE_SERVER)).await;
    assert_eq!(items[0], TxnStreamItem::Header { format: 1, status: STATUS_SENDING });
    assert!(matches!(items.last(), Some(TxnStreamItem::End { date_ms: Some(_) })));
    let got = records(&items);
    let ids: Vec<u64> = got.iter().map(|r| r.txn_id).collect();
    assert_eq!(ids, (start + 1..=start + 6).collect::<Vec<_>>(), "every change, in order, gap-free");
    let now = s.state.records().get(b"TEST/A").await.unwrap().unwrap().values;
    type Summary<'a> = (&'a [u8], TxnAction, Option<Vec<HandleValue>>);
    let summary: Vec<Summary> = got.iter().map(|r| (r.handle.as_slice(), r.action, r.values.clone())).collect();
    assert_eq!(
        summary,
        vec![
            (&b"TEST/A"[..], TxnAction::CREATE, Some(now.clone())),
            (b"TEST/A", TxnAction::UPDATE, Some(now)),
            (b"TEST/B", TxnAction::CREATE, Some(vec![])),
            (b"TEST/B", TxnAction::DELETE, None),
            (b"0.NA/NEW", TxnAction::HOME_NA, None),
            (b"0.NA/NEW", TxnAction::UNHOME_NA, None),
        ],
        "a create or update carries the record as it is now; one of a handle gone since, nothing"
    );

    // Caught up: nothing more, and the all-queues (2.9+) form says the same in format 2.
    let items = mirror(&s).pull(&since(Version::V2_10, start + 6, ONE_SERVER)).await;
    assert!(records(&items).is_empty());
    let mut info = handled_proto::replication::ReplicationStateInfo::default();
    let state =
        handled_proto::replication::ReplicationServerState { last_txn_id: (start + 4) as i64, last_timestamp: 1 };
    info.replication_server_states.push(("0:1:0.NA/TEST".into(), state));
    let all = RequestBody::RetrieveTxnLog(RetrieveTxnRequest {
        query: handled_proto::replication::TxnQuery::AllQueues(info),
        layout: ONE_SERVER,
        flagged: true,
        wait_millis: None,
    });
    let items = mirror(&s).pull(&all).await;
    assert_eq!(items[0], TxnStreamItem::Header { format: 2, status: STATUS_SENDING });
    assert_eq!(items[1], TxnStreamItem::QueueName(b"0:1:0.NA/TEST".to_vec()));
    assert_eq!(records(&items).iter().map(|r| r.txn_id).collect::<Vec<_>>(), vec![start + 5, start + 6]);
    assert!(matches!(items[items.len() - 2], TxnStreamItem::QueueEnd { .. }));
    assert_eq!(items.last(), Some(&TxnStreamItem::End { date_ms: None }));
}

#[tokio::test]
async fn each_mirror_server_gets_its_share_and_every_prefix_change() {
    let (s, mut admin) = source(|_| {}).await;
    let start = last_id(&s).await;
    for i in 0..30 {
        admin.create(format!("TEST/L{i}").as_bytes(), &[url(1, "https://example.org")]).await.unwrap();
    }
    admin.home_prefix(b"NEW").await.unwrap();
    let mut seen = Vec::new();
    let mut dumped = Vec::new();
    for server_num in 0..3 {
        let layout = MirrorLayout { hash_type: 1, num_servers: 3, server_num };
        let got = records(&mirror(&s).pull(&since(Version::V2_10, start, layout)).await);
        assert!(got.iter().any(|r| r.action == TxnAction::HOME_NA), "prefix changes go to every server");
        for r in got.iter().filter(|r| r.action != TxnAction::HOME_NA) {
            let owner = handled_proto::data::hash::server_index(&r.handle, 1, 3);
            assert_eq!(owner as i32, server_num, "{:?}", String::from_utf8_lossy(&r.handle));
            seen.push(r.txn_id);
        }
        for item in mirror(&s).dump(&dump_request(layout, None)).await {
            if let DumpStreamItem::Handle { handle, .. } = item {
                assert_eq!(handled_proto::data::hash::server_index(&handle, 1, 3) as i32, server_num);
                dumped.push(handle);
            }
        }
    }
    seen.sort();
    assert_eq!(seen, (start + 1..=start + 30).collect::<Vec<_>>(), "each handle change to exactly one server");
    assert_eq!(
        dumped.len() as u64,
        s.state.records().count().await.unwrap(),
        "each handle dumped to exactly one server"
    );
    let (r, _) = mirror(&s)
        .request(&since(Version::V2_10, 0, MirrorLayout { num_servers: 3, server_num: 3, hash_type: 0 }))
        .await;
    assert_eq!(r.code(), ResponseCode::PROTOCOL_ERROR, "no server 3 among 3");
}

#[tokio::test]
async fn a_mirror_behind_the_pruned_log_must_redump() {
    let (s, mut admin) = source(|_| {}).await;
    admin.create(b"TEST/p", &[url(1, "https://example.org")]).await.unwrap();
    let pruned = s.state.txn_log().txn_log_prune(u64::MAX).await.unwrap();
    assert!(pruned > 0);
    let floor = last_id(&s).await;
    admin.create(b"TEST/q", &[url(1, "https://example.org")]).await.unwrap();
    let body = RequestBody::RetrieveTxnLog(RetrieveTxnRequest::since(Version::V2_10, floor - 1, 4242, ONE_SERVER));
    let items = mirror(&s).pull(&body).await;
    assert_eq!(
        items,
        vec![
            TxnStreamItem::Header { format: 1, status: STATUS_NEED_TO_REDUMP },
            TxnStreamItem::End { date_ms: Some(4242) },
        ],
        "no records, and the mirror keeps its own last query date"
    );
    let items = mirror(&s).pull(&since(Version::V2_10, floor, ONE_SERVER)).await;
    assert_eq!(items[0], TxnStreamItem::Header { format: 1, status: STATUS_SENDING });
    assert_eq!(records(&items).iter().map(|r| r.handle.clone()).collect::<Vec<_>>(), vec![b"TEST/Q".to_vec()]);
}

#[tokio::test]
async fn a_waiting_pull_wakes_on_the_next_commit() {
    let (s, mut admin) = source(|c| c.replication.waits_per_peer = 1).await;
    let last = last_id(&s).await;
    let mut body = RetrieveTxnRequest::since(Version::V2_10, last, 1, ONE_SERVER);
    body.wait_millis = Some(60_000);
    let waiting = {
        let m = mirror(&s);
        let body = RequestBody::RetrieveTxnLog(body.clone());
        tokio::spawn(async move { m.pull(&body).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "nothing new yet: the pull waits");
    // A second waiting pull from the same address is answered at once (one wait per peer here).
    let started = Instant::now();
    let items = mirror(&s).pull(&RequestBody::RetrieveTxnLog(body)).await;
    assert!(records(&items).is_empty());
    assert!(started.elapsed() < Duration::from_secs(30), "not held: {:?}", started.elapsed());
    admin.create(b"TEST/wake", &[url(1, "https://example.org")]).await.unwrap();
    let items = tokio::time::timeout(Duration::from_secs(30), waiting).await.expect("woken by the commit").unwrap();
    assert_eq!(records(&items).iter().map(|r| r.handle.clone()).collect::<Vec<_>>(), vec![b"TEST/WAKE".to_vec()]);
}

#[tokio::test]
async fn mirrors_before_2_8_get_a_signed_stream() {
    let (s, mut admin) = source(|_| {}).await;
    let start = last_id(&s).await;
    admin.create(b"TEST/old", &[url(1, "https://example.org")]).await.unwrap();
    let old = puller(&s, Some(MIRROR), Version::V2_7);
    let items = old.pull(&since(Version::V2_7, start, ONE_SERVER)).await;
    assert_eq!(records(&items).len(), 1);
    let items = old.dump(&dump_request(ONE_SERVER, None)).await;
    assert!(items.iter().any(|i| matches!(i, DumpStreamItem::Handle { handle, .. } if handle == b"TEST/OLD")));
}

#[tokio::test]
async fn streams_beyond_the_limit_are_refused_and_a_stalled_one_is_cut() {
    const CUT_AFTER: Duration = Duration::from_secs(5);
    let (s, _admin) = source(|c| {
        c.replication.max_streams = 1;
        c.replication.write_timeout_secs = CUT_AFTER.as_secs();
    })
    .await;
    // A mirror that reads the response and then nothing (no TLS handshake).
    let (r, stalled) = mirror(&s).request(&dump_request(ONE_SERVER, None)).await;
    let stalled_since = Instant::now();
    assert_eq!(r.code(), ResponseCode::SUCCESS);
    let (r, _) = mirror(&s).request(&since(Version::V2_10, 0, ONE_SERVER)).await;
    // On a machine loaded enough to take longer than the cut between the two
    // requests, the slot may already be free again: only then may it succeed.
    if stalled_since.elapsed() < CUT_AFTER {
        assert_eq!(r.code(), ResponseCode::SERVER_TOO_BUSY);
    }
    // The stalled stream is cut after CUT_AFTER and its slot comes back.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (r, _) = mirror(&s).request(&since(Version::V2_10, 0, ONE_SERVER)).await;
        if r.code() == ResponseCode::SUCCESS {
            break;
        }
        assert_eq!(r.code(), ResponseCode::SERVER_TOO_BUSY);
        assert!(Instant::now() < deadline, "the stalled stream's slot never came back");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // (The server's clock for the cut starts before ours, when it sent the response.)
    assert!(stalled_since.elapsed() >= CUT_AFTER / 2, "the slot came back long before the cut");
    drop(stalled);
}

#[tokio::test]
async fn pulls_over_udp_and_http_are_refused_clearly() {
    let (s, _admin) = source(|_| {}).await;
    let body = since(Version::V2_10, 0, ONE_SERVER);
    let mut http = Connection::open(Protocol::Http, s.addrs.http, Duration::from_secs(10), true).await.unwrap();
    let r = http.request(&body, OpFlags::REC).await.unwrap().remove(0);
    assert_eq!(r.code(), ResponseCode::OPERATION_NOT_SUPPORTED, "{:?}", r.message());
    assert!(r.message().unwrap().contains("TCP"));
    let mut udp = Connection::open(Protocol::Udp, s.addrs.udp, Duration::from_secs(10), false).await.unwrap();
    let r = udp.request(&body, OpFlags::REC).await.unwrap().remove(0);
    assert_eq!(r.code(), ResponseCode::PROTOCOL_ERROR, "{:?}", r.message());
}

#[tokio::test]
async fn metrics_count_what_was_sent() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (s, _admin) = source(|_| {}).await;
    let start = last_id(&s).await;
    let sent = records(&mirror(&s).pull(&since(Version::V2_10, start - 2, ONE_SERVER)).await).len();
    assert_eq!(sent, 2);
    mirror(&s).dump(&dump_request(ONE_SERVER, None)).await;
    let mut http = tokio::net::TcpStream::connect(s.addrs.http).await.unwrap();
    http.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut text = String::new();
    http.read_to_string(&mut text).await.unwrap();
    for line in [
        format!("handled_txn_log_last_id {start}"),
        "handled_replication_entries_sent_total 2".into(),
        "handled_replication_dumps_served_total 1".into(),
        "handled_replication_streams_active 0".into(),
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in {text}");
    }
}
