//! The mirror's client side against bytes the real Handle.Net 9.0.0 server
//! sent (tests/replication/vectors, recorded by repl-peer's capture script):
//! a source with a DSA key is asked in version 2.7 and answers with the
//! PK-signed stream, whose SHA1withDSA block signatures must verify with the
//! key of its `siteinfo.json`; a changed byte must not.

use handled_client::credentials::Credentials;
use handled_client::replication::{ReplicationError, SourceServer};
use handled_proto::data::pubkey::PublicKey;
use handled_proto::envelope::Version;
use handled_proto::replication::{DumpHandlesRequest, DumpStreamItem, MirrorLayout, RetrieveTxnRequest, TxnStreamItem};
use handled_proto::request::RequestBody;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/replication/vectors/handle-net-9.0.0/");

fn vector(name: &str) -> Vec<u8> {
    std::fs::read(format!("{VECTORS}{name}")).unwrap()
}

/// The recorded server's key, from its site record.
fn site_key() -> PublicKey {
    let json: serde_json::Value = serde_json::from_slice(&vector("siteinfo.json")).unwrap();
    let site = handled_proto::json::site_from_json(&json).unwrap();
    let key = PublicKey::decode_data(&site.servers[0].public_key).unwrap();
    assert!(matches!(key, PublicKey::Dsa { .. }), "the recorded server has a DSA key");
    key
}

/// A one-connection source that answers the first request with the recorded
/// response and stream (its request id set to ours; `tamper` flips a byte at that offset).
async fn replay(recording: &str, tamper: Option<usize>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut reply = vector(recording);
    if let Some(at) = tamper {
        reply[at] ^= 0x01;
    }
    tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut envelope = [0u8; 20];
        conn.read_exact(&mut envelope).await.unwrap();
        let len = u32::from_be_bytes(envelope[16..20].try_into().unwrap()) as usize;
        let mut message = vec![0; len];
        conn.read_exact(&mut message).await.unwrap();
        assert_eq!((envelope[0], envelope[1]), (2, 7), "a DSA source is asked in 2.7");
        reply[8..12].copy_from_slice(&envelope[8..12]);
        conn.write_all(&reply).await.unwrap();
        conn.shutdown().await.unwrap();
    });
    addr
}

fn source(addr: SocketAddr) -> SourceServer {
    let key = site_key();
    SourceServer {
        addr,
        version: SourceServer::version_for(&key),
        key,
        timeout: Duration::from_secs(5),
        max_item_bytes: 1 << 20,
        check_signature: handled_server::auth::signature::verify,
    }
}

fn creds() -> Credentials {
    // No challenge comes from a replay: the identity is never used.
    Credentials::secret(b"TEST/ADMIN".to_vec(), 301, b"unused".to_vec())
}

async fn pull(addr: SocketAddr) -> Result<(usize, Option<u64>), ReplicationError> {
    let request = RetrieveTxnRequest::since(Version::V2_7, 0, 0, MirrorLayout::SINGLE);
    let (_, mut stream) = source(addr).request_stream(&creds(), &RequestBody::RetrieveTxnLog(request)).await?;
    assert!(stream.is_signed());
    let mut decoder = stream.txn_decoder();
    let mut records = 0;
    loop {
        match stream.next(&mut decoder).await? {
            TxnStreamItem::Record(_) => records += 1,
            TxnStreamItem::End { date_ms } => return Ok((records, date_ms)),
            _ => {}
        }
    }
}

#[tokio::test]
async fn a_pk_signed_transaction_stream_from_handle_net_verifies() {
    let (records, end) = pull(replay("v27-retrieve-txn-log-conn2.s2c.bin", None).await).await.unwrap();
    assert_eq!(records, 19, "the 19 transactions the Java library decoded");
    assert!(end.is_some(), "format 1 ends with the date to ask from next");
}

#[tokio::test]
async fn a_changed_byte_in_a_signed_block_is_refused() {
    let recording = vector("v27-retrieve-txn-log-conn2.s2c.bin");
    // A byte in the last record, well after the response message and the first blocks.
    let at = recording.len() - 200;
    let err = pull(replay("v27-retrieve-txn-log-conn2.s2c.bin", Some(at)).await).await.unwrap_err();
    assert!(matches!(err, ReplicationError::Stream(_)) && err.to_string().contains("signature"), "{err}");
}

#[tokio::test]
async fn a_pk_signed_dump_from_handle_net_verifies() {
    let addr = replay("v27-dump-handles-conn2.s2c.bin", None).await;
    let request = DumpHandlesRequest { layout: MirrorLayout::SINGLE, resume: None };
    let (_, mut stream) = source(addr).request_stream(&creds(), &RequestBody::DumpHandles(request)).await.unwrap();
    let mut decoder = stream.dump_decoder();
    let (mut handles, mut homed, mut this_server) = (0, 0, None);
    loop {
        match stream.next(&mut decoder).await.unwrap() {
            DumpStreamItem::Handle { .. } => handles += 1,
            DumpStreamItem::HomedPrefix(_) => homed += 1,
            DumpStreamItem::ThisServer { last_txn_id, .. } => this_server = Some(last_txn_id),
            DumpStreamItem::Done => break,
            _ => {}
        }
    }
    assert_eq!((handles, homed, this_server), (8, 2, Some(19)));
}
