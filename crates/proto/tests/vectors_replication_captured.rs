//! Replication bytes captured from the real Handle.Net 9.0.0 server
//! (`tests/replication/vectors/handle-net-9.0.0/` at the repository root, see its
//! README): requests at 2.7 (pre-2.9 body, PK-signed stream in the clear) and 2.10
//! (flagged body, TLS stream; the plaintext is kept). Each decodes to what the Java
//! library decoded (`*.decoded.txt`), requests re-encode byte for byte, and the
//! server's SHA1withDSA block signatures verify over the blocks our decoder
//! delimits, with the key of the server's site record.

use base64::Engine;
use dsa::signature::DigestVerifier;
use handled_proto::envelope::Version;
use handled_proto::header::{OpCode, ResponseCode};
use handled_proto::message::{encode_message, parse_message, split_unit};
use handled_proto::replication::{
    BlockVerifier, DumpStreamDecoder, DumpStreamItem, Framing, Preamble, StreamDecoder, StreamError, StreamGrammar,
    TxnQuery, TxnStreamDecoder, TxnStreamItem, DEFAULT_MAX_ITEM_LEN, NEXT_TXN_ID_HANDLE,
};
use handled_proto::request::RequestBody;
use handled_proto::response::{decode_response_body, ResponseBody};
use handled_proto::HandleValue;
use sha1::{Digest, Sha1};
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/replication/vectors/handle-net-9.0.0")
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn lines(name: &str) -> Vec<String> {
    String::from_utf8(read(name)).unwrap().lines().map(str::to_string).collect()
}

/// `index TYPE ts=T data=HEX` as the capture tool prints a value.
fn value_line(v: &HandleValue) -> String {
    format!(
        "{} {} ts={} data={}",
        v.index,
        String::from_utf8_lossy(&v.value_type),
        v.timestamp,
        hex::encode_upper(&v.data)
    )
}

fn values_line(values: Option<&[HandleValue]>) -> String {
    match values {
        None => "null".into(),
        Some(v) => format!("[{}]", v.iter().map(value_line).collect::<Vec<_>>().join(", ")),
    }
}

/// SHA1withDSA over each block, with the DSA key of `siteinfo.json`.
struct SiteKeyVerifier {
    key: dsa::VerifyingKey,
    block: Vec<u8>,
}

impl SiteKeyVerifier {
    fn from_siteinfo() -> Self {
        let site: serde_json::Value = serde_json::from_slice(&read("siteinfo.json")).unwrap();
        let jwk = &site["servers"][0]["publicKey"]["value"];
        assert_eq!(jwk["kty"], "DSA");
        let big = |k: &str| {
            let b = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(jwk[k].as_str().unwrap()).unwrap();
            dsa::BigUint::from_bytes_be(&b)
        };
        let components = dsa::Components::from_components(big("p"), big("q"), big("g")).unwrap();
        let key = dsa::VerifyingKey::from_components(components, big("y")).unwrap();
        SiteKeyVerifier { key, block: Vec::new() }
    }
}

impl BlockVerifier for SiteKeyVerifier {
    fn update(&mut self, data: &[u8]) {
        self.block.extend_from_slice(data);
    }
    fn verify(&mut self, signature: &[u8]) -> bool {
        let ok = dsa::Signature::try_from(signature)
            .is_ok_and(|sig| self.key.verify_digest(Sha1::new_with_prefix(&self.block), &sig).is_ok());
        self.block.clear();
        ok
    }
}

/// The request of `conn1.c2s`: decoded at its envelope's version, re-encoded exactly.
fn request(name: &str) -> (Version, RequestBody) {
    let unit = read(&format!("{name}-conn1.c2s.bin"));
    let (env, msg, rest) = split_unit(&unit).unwrap();
    assert!(rest.is_empty(), "{name}");
    let view = parse_message(msg).unwrap();
    let req = RequestBody::decode_at(env.version, view.header.op_code, view.body).unwrap();
    let mut again = Vec::new();
    encode_message(&view.header, &req.to_vec(), None, &mut again);
    assert_eq!(hex::encode(&again[..again.len() - 4]), hex::encode(&msg[..msg.len() - 4]), "{name}: re-encoding");
    (env.version, req)
}

/// The final response of `conn2.s2c` and the bytes that follow it (the stream).
fn response_and_stream(name: &str) -> (ResponseBody, Vec<u8>) {
    let s2c = read(&format!("{name}-conn2.s2c.bin"));
    let (env, msg, rest) = split_unit(&s2c).unwrap();
    let view = parse_message(msg).unwrap();
    assert_eq!(view.header.response_code, ResponseCode::SUCCESS, "{name}");
    let (_, body) = decode_response_body(&view.header, env.version, view.body).unwrap();
    (body, rest.to_vec())
}

/// Feed `blocks` one byte at a time (every truncation is a state we pass
/// through: none may error or look finished), handing each item to `each`;
/// the stream ends with the last byte.
fn byte_by_byte<G: StreamGrammar, V: BlockVerifier>(
    mut d: StreamDecoder<G, V>,
    blocks: &[u8],
    mut each: impl FnMut(G::Item),
) {
    for (i, b) in blocks.iter().enumerate() {
        assert!(!d.is_done(), "finished before byte {i}");
        d.feed(std::slice::from_ref(b));
        while let Some(item) = d.next_item().unwrap_or_else(|e| panic!("at byte {i}: {e}")) {
            each(item);
        }
    }
    assert!(d.is_done());
}

/// The items of a transaction stream in `decoded.txt` form ([`byte_by_byte`]).
fn txn_lines<V: BlockVerifier>(d: TxnStreamDecoder<V>, blocks: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    byte_by_byte(d, blocks, |item| match item {
        TxnStreamItem::Header { format, status } => assert_eq!((format, status), (1, 2)),
        TxnStreamItem::Record(r) => {
            let action = match r.action.0 {
                1 => "create",
                2 => "delete",
                3 => "update",
                4 => "home",
                5 => "unhome",
                other => panic!("action {other}"),
            };
            out.push(format!(
                "txn {} {action} {} date={} values={}",
                r.txn_id,
                String::from_utf8_lossy(&r.handle),
                r.date_ms,
                values_line(r.values.as_deref())
            ));
        }
        TxnStreamItem::End { date_ms } => out.push(format!("end date={}", date_ms.unwrap())),
        other => panic!("unexpected {other:?}"),
    });
    out
}

/// The items of a dump stream in `decoded.txt` form ([`byte_by_byte`]).
fn dump_lines<V: BlockVerifier>(d: DumpStreamDecoder<V>, blocks: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    byte_by_byte(d, blocks, |item| match item {
        DumpStreamItem::Header { version } => assert_eq!(version, 2),
        DumpStreamItem::ThisServer { date_ms, last_txn_id } => {
            out.push(format!("this-server date={date_ms} lastTxnId={last_txn_id}"))
        }
        DumpStreamItem::Handle { handle, values } => {
            out.push(format!("handle {} values={}", String::from_utf8_lossy(&handle), values_line(Some(&values))))
        }
        DumpStreamItem::HomedPrefix(p) => out.push(format!("homed {}", String::from_utf8_lossy(&p))),
        DumpStreamItem::Done => {}
        other => panic!("unexpected {other:?}"),
    });
    out
}

/// `decoded.txt` without the response summary (first line) and, for TLS
/// captures, the stream type and TLS session lines (checked in `exchange`).
fn expected(name: &str) -> Vec<String> {
    let all = lines(&format!("{name}.decoded.txt"));
    all.into_iter().skip(1).filter(|l| !l.starts_with("stream type ") && !l.starts_with("tls ")).collect()
}

/// One streamed exchange: the request (checked at `version`), the response
/// (must be `response`), and the stream's blocks with their framing: the PK-signed
/// stream after its preamble, or, after the TLS marker, the kept TLS plaintext.
fn exchange(name: &str, version: Version, response: ResponseBody) -> (RequestBody, Framing<SiteKeyVerifier>, Vec<u8>) {
    let (v, req) = request(name);
    assert_eq!(v, version, "{name}");
    let (resp, stream) = response_and_stream(name);
    assert_eq!(resp, response, "{name}");
    let (preamble, at) = Preamble::decode(&stream).unwrap().unwrap();
    match preamble {
        Preamble::Signed { hash_alg_id } => {
            assert_eq!(hash_alg_id, Preamble::JAVA_HASH_ALG_ID, "{name}");
            (req, Framing::Signed(SiteKeyVerifier::from_siteinfo()), stream[at..].to_vec())
        }
        Preamble::Tls => {
            let plain = read(&format!("{name}.tls-plaintext.bin"));
            let java = lines(&format!("{name}.decoded.txt"));
            assert_eq!(java[1], "stream type 0x544C5300", "{name}");
            assert!(java[2].ends_with(&format!("plaintext {} bytes", plain.len())), "{name}: {}", java[2]);
            (req, Framing::Plain, plain)
        }
        Preamble::Unsigned => panic!("{name}: the real server never sends an unsigned stream"),
    }
}

#[test]
fn get_next_txn_id() {
    let (version, req) = request("get-next-txn-id");
    assert_eq!(version, Version::V2_10);
    assert_eq!(req, RequestBody::GetNextTxnId { handle: NEXT_TXN_ID_HANDLE.to_vec() });
    let s2c = read("get-next-txn-id-conn1.s2c.bin");
    let (env, msg, _) = split_unit(&s2c).unwrap();
    let view = parse_message(msg).unwrap();
    let (_, body) = decode_response_body(&view.header, env.version, view.body).unwrap();
    let java = lines("get-next-txn-id.decoded.txt")[0].rsplit(' ').next().unwrap().to_string();
    assert_eq!(java, "nextTxnId=20");
    assert_eq!(body, ResponseBody::NextTxnId(20));
}

#[test]
fn retrieve_txn_log_streams() {
    let ok = || ResponseBody::RetrieveTxnLog { keep_alive: false };
    for (name, version) in [("v27-retrieve-txn-log", Version::V2_7), ("tls-retrieve-txn-log", Version::V2_10)] {
        let (req, framing, blocks) = exchange(name, version, ok());
        let RequestBody::RetrieveTxnLog(r) = req else { panic!("{req:?}") };
        assert_eq!(r.flagged, version >= Version::V2_9, "{name}: the flag byte comes with 2.9");
        assert_eq!(r.query, TxnQuery::Since { last_txn_id: 0, last_query_date_ms: 0 }, "{name}");
        let d = TxnStreamDecoder::new(framing, DEFAULT_MAX_ITEM_LEN);
        assert_eq!(txn_lines(d, &blocks), expected(name), "{name}");
    }
}

#[test]
fn dump_handles_streams() {
    for (name, version) in [("v27-dump-handles", Version::V2_7), ("tls-dump-handles", Version::V2_10)] {
        let (req, framing, blocks) = exchange(name, version, ResponseBody::DumpHandles);
        assert!(matches!(req, RequestBody::DumpHandles(ref d) if d.resume.is_none()), "{req:?}");
        let d = DumpStreamDecoder::new(framing, DEFAULT_MAX_ITEM_LEN);
        assert_eq!(dump_lines(d, &blocks), expected(name), "{name}");
    }
}

/// The PK-signed captures' signatures did verify above (a verifier that
/// refuses makes `next_item` fail); here one changed byte must fail it.
#[test]
fn signatures_are_checked_for_real() {
    let (_, stream) = response_and_stream("v27-retrieve-txn-log");
    let (_, at) = Preamble::decode(&stream).unwrap().unwrap();
    let mut bad = stream[at..].to_vec();
    // Change one byte of the first record's handle ("TEST/R-1" → "TEST/R-2").
    let pos = bad.windows(8).position(|w| w == b"TEST/R-1").unwrap() + 7;
    bad[pos] = b'2';
    let mut d = TxnStreamDecoder::new(Framing::Signed(SiteKeyVerifier::from_siteinfo()), DEFAULT_MAX_ITEM_LEN);
    d.feed(&bad);
    assert!(matches!(d.next_item(), Ok(Some(TxnStreamItem::Header { .. }))));
    assert_eq!(d.next_item(), Err(StreamError::BadSignature));
}

#[test]
fn op_codes_of_the_captured_requests() {
    for (name, op) in [
        ("get-next-txn-id", OpCode::GET_NEXT_TXN_ID),
        ("v27-retrieve-txn-log", OpCode::RETRIEVE_TXN_LOG),
        ("tls-dump-handles", OpCode::DUMP_HANDLES),
    ] {
        assert_eq!(request(name).1.op_code(), op, "{name}");
    }
}
