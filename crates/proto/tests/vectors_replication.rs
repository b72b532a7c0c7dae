//! Replication vectors made by the official Java library 9.0.0
//! (`tests/vectors/replication/`, see its README): every message decodes to what
//! Java's own decoder read and re-encodes byte for byte; every stream decodes,
//! fed in any chunking, to what Java's stream reader read, hands the verifier
//! exactly the bytes Java signed, and re-encodes byte for byte. Then truncations
//! and corruptions of all of them: errors or "need more", never a panic.

use handled_proto::envelope::{Envelope, Version};
use handled_proto::header::{OpCode, ResponseCode};
use handled_proto::message::{encode_message, parse_message};
use handled_proto::replication::framing::StreamItem;
use handled_proto::replication::{
    BlockSigner, BlockVerifier, DumpStreamDecoder, DumpStreamItem, Framing, Preamble, RetrieveTxnRequest, StreamError,
    StreamWriter, TxnQuery, TxnStreamDecoder, TxnStreamItem, DEFAULT_MAX_ITEM_LEN,
};
use handled_proto::request::RequestBody;
use handled_proto::response::{decode_response_body, encode_response_body, ResponseBody};
use handled_proto::Codec;
use serde_json::Value;

mod support;
use support::load;

fn hx(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().unwrap_or_else(|| panic!("not a hex string: {v}"))).unwrap()
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

fn messages() -> Vec<Value> {
    load("replication/messages.json")["messages"].as_array().unwrap().clone()
}

fn streams() -> Vec<Value> {
    load("replication/streams.json")["streams"].as_array().unwrap().clone()
}

/// The envelope's version, which decides the RETRIEVE_TXN_LOG layout.
fn version_of(m: &Value) -> Version {
    let env = Envelope::parse(&hx(&m["envelope_hex"])).unwrap();
    assert_eq!(env.version.to_string(), text(&m["version"]), "{}", m["name"]);
    env.version
}

fn check_request(name: &str, j: &Value, m: &Value, req: &RequestBody) {
    match req {
        RequestBody::GetNextTxnId { handle } | RequestBody::BackupServer { handle } => {
            assert_eq!(handle, text(&j["handle"]).as_bytes(), "{name}")
        }
        RequestBody::RetrieveTxnLog(r) => {
            assert_eq!(r.layout.hash_type as i64, int(&j["rcvr_hash_type"]), "{name}");
            assert_eq!(r.layout.num_servers as i64, int(&j["num_servers"]), "{name}");
            assert_eq!(r.layout.server_num as i64, int(&j["server_num"]), "{name}");
            match &r.query {
                TxnQuery::Since { last_txn_id, last_query_date_ms } => {
                    assert_eq!(*last_txn_id as i64, int(&j["last_txn_id"]), "{name}");
                    assert_eq!(*last_query_date_ms as i64, int(&j["last_query_date"]), "{name}");
                }
                TxnQuery::AllQueues(state) => {
                    // Java re-serialises what it decoded; we write the same JSON.
                    assert_eq!(state.to_json(), text(&j["replication_state_info_json"]).as_bytes(), "{name}");
                }
            }
            let trailing = m.get("trailing_hex").map(hx);
            let wait = trailing.map(|t| i32::from_be_bytes(t[..].try_into().unwrap()));
            assert_eq!(r.wait_millis, wait, "{name}: Java ignored the trailing word, we read it");
        }
        RequestBody::DumpHandles(d) => {
            assert_eq!(d.layout.hash_type as i64, int(&j["rcvr_hash_type"]), "{name}");
            assert_eq!(d.layout.num_servers as i64, int(&j["num_servers"]), "{name}");
            assert_eq!(d.layout.server_num as i64, int(&j["server_num"]), "{name}");
            let java =
                j.get("starting_point").map(|p| (text(p).as_bytes().to_vec(), int(&j["starting_point_type"]) as i32));
            assert_eq!(d.resume, java, "{name}");
        }
        other => panic!("{name}: unexpected request {other:?}"),
    }
}

fn check_response(name: &str, j: &Value, body: &ResponseBody) {
    match body {
        ResponseBody::NextTxnId(id) => assert_eq!(*id as i64, int(&j["next_txn_id"]), "{name}"),
        ResponseBody::RetrieveTxnLog { keep_alive } => {
            assert_eq!(Some(*keep_alive), j["keep_alive"].as_bool(), "{name}")
        }
        ResponseBody::DumpHandles => assert_eq!(text(&j["java_class"]), "DumpHandlesResponse", "{name}"),
        ResponseBody::Empty => assert_eq!(int(&j["op_code"]), 1003, "{name}"),
        other => panic!("{name}: unexpected response {other:?}"),
    }
}

#[test]
fn messages_decode_as_java_and_reencode_exactly() {
    let all = messages();
    assert_eq!(all.len(), 17);
    for m in &all {
        let name = text(&m["name"]);
        let j = &m["java_decoded"];
        let version = version_of(m);
        let raw = hx(&m["message_hex"]);
        let view = parse_message(&raw).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(view.header.op_code.0 as i64, int(&j["op_code"]), "{name}");
        assert_eq!(view.header.response_code.0 as i64, int(&j["response_code"]), "{name}");
        let mut body = Vec::new();
        if view.header.response_code == ResponseCode(0) {
            let req = RequestBody::decode_at(version, view.header.op_code, view.body)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            check_request(name, j, m, &req);
            req.encode(&mut body);
        } else {
            let (digest, resp) = decode_response_body(&view.header, version, view.body).unwrap();
            assert_eq!(
                digest.as_ref().map(|d| hex::encode(&d.digest)),
                j.get("request_digest_hex").map(|v| text(v).to_string()),
                "{name}"
            );
            check_response(name, j, &resp);
            encode_response_body(digest.as_ref(), &resp, &mut body);
        }
        let mut again = Vec::new();
        encode_message(&view.header, &body, None, &mut again);
        assert_eq!(hex::encode(again), hex::encode(&raw), "{name}: re-encoding");
    }
}

/// The two RETRIEVE_TXN_LOG layouts are told apart by the envelope version only:
/// the same pre-2.9 body read as ≥ 2.9 is something else (here: a bad flag).
#[test]
fn retrieve_form_follows_envelope_version() {
    let m = messages().into_iter().find(|m| m["name"] == "retrieve_txn_request_2_1").unwrap();
    let raw = hx(&m["message_hex"]);
    let view = parse_message(&raw).unwrap();
    let old = RequestBody::decode_at(Version::V2_1, OpCode::RETRIEVE_TXN_LOG, view.body).unwrap();
    let RequestBody::RetrieveTxnLog(r) = &old else { panic!() };
    assert!(!r.flagged);
    assert_eq!(RetrieveTxnRequest::since(Version::V2_8, 5, 1763912345678, r.layout), *r);
    // Read as 2.10, the first byte of lastTxnId (0) becomes the flag, the rest
    // shifts and the body is one byte short.
    assert!(RequestBody::decode_at(Version::V2_10, OpCode::RETRIEVE_TXN_LOG, view.body).is_err());
}

// ---- streams -----------------------------------------------------------

/// Stands in for SHA1withRSA: knows the blocks Java signed, and checks that it is
/// handed exactly those bytes and signatures, in order.
struct RecordedBlocks {
    blocks: Vec<(Vec<u8>, Vec<u8>)>,
    next: usize,
    pending: Vec<u8>,
}

impl RecordedBlocks {
    fn new(stream: &Value) -> Self {
        let blocks = stream["signed_blocks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (hx(&b["signed_hex"]), hx(&b["signature_hex"])))
            .collect();
        RecordedBlocks { blocks, next: 0, pending: Vec::new() }
    }
}

impl BlockVerifier for RecordedBlocks {
    fn update(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
    }
    fn verify(&mut self, signature: &[u8]) -> bool {
        let ok = self.blocks.get(self.next).is_some_and(|(data, sig)| *data == self.pending && sig == signature);
        self.next += 1;
        self.pending.clear();
        ok
    }
}

impl BlockSigner for RecordedBlocks {
    fn update(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
    }
    fn sign(&mut self) -> Vec<u8> {
        let (data, sig) = &self.blocks[self.next];
        assert_eq!(hex::encode(&self.pending), hex::encode(data), "block {} signed over other bytes", self.next);
        self.next += 1;
        self.pending.clear();
        sig.clone()
    }
}

enum Decoder {
    Txn(TxnStreamDecoder<RecordedBlocks>),
    Dump(DumpStreamDecoder<RecordedBlocks>),
}

#[derive(Debug)]
enum Item {
    Txn(TxnStreamItem),
    Dump(DumpStreamItem),
}

impl Decoder {
    fn feed(&mut self, data: &[u8]) {
        match self {
            Decoder::Txn(d) => d.feed(data),
            Decoder::Dump(d) => d.feed(data),
        }
    }
    fn next_item(&mut self) -> Result<Option<Item>, StreamError> {
        Ok(match self {
            Decoder::Txn(d) => d.next_item()?.map(Item::Txn),
            Decoder::Dump(d) => d.next_item()?.map(Item::Dump),
        })
    }
    fn is_done(&self) -> bool {
        match self {
            Decoder::Txn(d) => d.is_done(),
            Decoder::Dump(d) => d.is_done(),
        }
    }
}

/// A decoder for `stream` after its preamble, and where the blocks start.
fn decoder_for(stream: &Value, bytes: &[u8], max_item: usize) -> (Decoder, usize) {
    let (preamble, at) = Preamble::decode(bytes).unwrap().expect("whole preamble");
    let framing = match preamble {
        Preamble::Unsigned => Framing::Plain,
        Preamble::Signed { .. } => Framing::Signed(RecordedBlocks::new(stream)),
        Preamble::Tls => panic!("no TLS vectors"),
    };
    assert_eq!(stream["signed"].as_bool(), Some(matches!(framing, Framing::Signed(_))));
    let d = match text(&stream["kind"]) {
        "txn" => Decoder::Txn(TxnStreamDecoder::new(framing, max_item)),
        _ => Decoder::Dump(DumpStreamDecoder::new(framing, max_item)),
    };
    (d, at)
}

/// Decode `bytes` fed in chunks of `chunk`, taking items out between feeds.
fn decode_stream(stream: &Value, bytes: &[u8], chunk: usize) -> Result<(Vec<Item>, bool), StreamError> {
    let (mut d, at) = decoder_for(stream, bytes, DEFAULT_MAX_ITEM_LEN);
    let mut items = Vec::new();
    for piece in bytes[at..].chunks(chunk.max(1)) {
        d.feed(piece);
        while let Some(item) = d.next_item()? {
            items.push(item);
        }
    }
    Ok((items, d.is_done()))
}

fn values_hex(values: &[handled_proto::HandleValue]) -> Value {
    values.iter().map(|v| Value::from(hex::encode(v.to_bytes()))).collect()
}

/// Our items in the shape of Java's reader callbacks (`java_read`).
fn as_java_events(items: &[Item]) -> Vec<Value> {
    let mut out = Vec::new();
    let (mut format, mut status, mut queue) = (0, 0, None::<String>);
    for item in items {
        let mut e = serde_json::Map::new();
        match item {
            Item::Txn(TxnStreamItem::Header { format: f, status: s }) => {
                (format, status) = (*f, *s);
                continue;
            }
            Item::Txn(TxnStreamItem::QueueName(q)) => {
                queue = Some(String::from_utf8(q.clone()).unwrap());
                continue;
            }
            Item::Txn(TxnStreamItem::Record(r)) => {
                e.insert("event".into(), "transaction".into());
                if format == 2 {
                    e.insert("queue".into(), queue.clone().into());
                }
                e.insert("txn_id".into(), r.txn_id.into());
                e.insert("handle".into(), String::from_utf8(r.handle.clone()).unwrap().into());
                e.insert("action".into(), r.action.0.into());
                e.insert("date".into(), r.date_ms.into());
                if let Some(v) = &r.values {
                    e.insert("values".into(), values_hex(v));
                }
            }
            Item::Txn(TxnStreamItem::QueueEnd { date_ms }) => {
                e.insert("event".into(), "queue_last_timestamp".into());
                e.insert("queue".into(), queue.clone().into());
                e.insert("date".into(), (*date_ms).into());
            }
            Item::Txn(TxnStreamItem::End { date_ms }) => {
                e.insert("event".into(), "finish".into());
                // Java hands the date on only when transactions were sent.
                if let (Some(d), 2) = (date_ms, status) {
                    e.insert("date".into(), (*d).into());
                }
                out.push(Value::Object(e));
                out.push(serde_json::json!({"event": "status", "status": status}));
                continue;
            }
            Item::Dump(DumpStreamItem::Header { version }) => {
                assert_eq!(*version, 2);
                continue;
            }
            Item::Dump(DumpStreamItem::OtherSites(t)) => {
                e.insert("event".into(), "other_sites".into());
                e.insert("text".into(), String::from_utf8(t.clone()).unwrap().into());
            }
            Item::Dump(DumpStreamItem::ThisServer { date_ms, last_txn_id }) => {
                e.insert("event".into(), "this_server".into());
                e.insert("date".into(), (*date_ms).into());
                e.insert("last_txn_id".into(), (*last_txn_id).into());
            }
            Item::Dump(DumpStreamItem::HandleDate { handle, date_ms, priority }) => {
                e.insert("event".into(), "handle_date".into());
                e.insert("handle".into(), String::from_utf8(handle.clone()).unwrap().into());
                e.insert("date".into(), (*date_ms).into());
                e.insert("priority".into(), (*priority).into());
            }
            Item::Dump(DumpStreamItem::NaDate { prefix, date_ms, priority }) => {
                e.insert("event".into(), "na_date".into());
                e.insert("prefix".into(), String::from_utf8(prefix.clone()).unwrap().into());
                e.insert("date".into(), (*date_ms).into());
                e.insert("priority".into(), (*priority).into());
            }
            Item::Dump(DumpStreamItem::Handle { handle, values }) => {
                e.insert("event".into(), "handle".into());
                e.insert("handle".into(), String::from_utf8(handle.clone()).unwrap().into());
                e.insert("values".into(), values_hex(values));
            }
            Item::Dump(DumpStreamItem::HomedPrefix(p)) => {
                e.insert("event".into(), "homed_prefix".into());
                e.insert("prefix".into(), String::from_utf8(p.clone()).unwrap().into());
            }
            Item::Dump(DumpStreamItem::Done) => {
                e.insert("event".into(), "done".into());
            }
        }
        out.push(Value::Object(e));
    }
    out
}

fn reencode(stream: &Value, items: &[Item]) -> Vec<u8> {
    let mut out = Vec::new();
    fn write_all<S: BlockSigner>(mut w: StreamWriter<S>, items: &[Item], out: &mut Vec<u8>) {
        for item in items {
            match item {
                Item::Txn(t) => w.write(t, out),
                Item::Dump(d) => w.write(d, out),
            }
        }
    }
    if stream["signed"].as_bool() == Some(true) {
        let w = StreamWriter::signed(RecordedBlocks::new(stream), Preamble::JAVA_HASH_ALG_ID, &mut out);
        write_all(w, items, &mut out);
    } else {
        let w: StreamWriter<RecordedBlocks> =
            StreamWriter::plain(handled_proto::replication::StreamType::Unsigned, &mut out);
        write_all(w, items, &mut out);
    }
    out
}

#[test]
fn streams_decode_as_java_and_reencode_exactly() {
    let all = streams();
    assert_eq!(all.len(), 10);
    for s in &all {
        let name = text(&s["name"]);
        let bytes = hx(&s["stream_hex"]);
        let (preamble, _) = Preamble::decode(&bytes).unwrap().unwrap();
        if let Preamble::Signed { hash_alg_id } = preamble {
            assert_eq!(hash_alg_id, Preamble::JAVA_HASH_ALG_ID, "{name}");
        }
        let (items, done) = decode_stream(s, &bytes, bytes.len()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(done, "{name}: stream not finished");
        assert_eq!(Value::from(as_java_events(&items)), s["java_read"], "{name}");
        assert_eq!(hex::encode(reencode(s, &items)), hex::encode(&bytes), "{name}: re-encoding");
        for chunk in [1, 2, 3, 7, 64] {
            let (again, done) = decode_stream(s, &bytes, chunk).unwrap_or_else(|e| panic!("{name}/{chunk}: {e}"));
            assert!(done);
            assert_eq!(format!("{again:?}"), format!("{items:?}"), "{name}: chunks of {chunk}");
        }
    }
}

#[test]
fn signed_blocks_cover_exactly_what_java_signed() {
    for s in streams().iter().filter(|s| s["signed"].as_bool() == Some(true)) {
        let bytes = hx(&s["stream_hex"]);
        let (mut d, at) = decoder_for(s, &bytes, DEFAULT_MAX_ITEM_LEN);
        d.feed(&bytes[at..]);
        let mut n = 0;
        while d.next_item().unwrap().is_some() {
            n += 1;
        }
        // Every item but the dump's final -1 was a signed block.
        let dump_done = usize::from(text(&s["kind"]) == "dump");
        assert_eq!(n - dump_done, s["signed_blocks"].as_array().unwrap().len(), "{}", s["name"]);
        assert_eq!(DumpStreamItem::Done.is_signed(), false);
    }
}

// ---- robustness --------------------------------------------------------

#[test]
fn every_message_truncation_is_an_error_or_a_shorter_reading() {
    for m in messages() {
        let name = text(&m["name"]);
        let version = version_of(&m);
        let raw = hx(&m["message_hex"]);
        let view = parse_message(&raw).unwrap();
        for cut in 0..view.body.len() {
            let body = &view.body[..cut];
            if view.header.response_code == ResponseCode(0) {
                // A cut inside the fields fails; only the optional tails may go.
                if let Ok(req) = RequestBody::decode_at(version, view.header.op_code, body) {
                    assert!(req.to_vec().len() <= cut, "{name}: cut {cut} read as {req:?}");
                }
            } else {
                let _ = decode_response_body(&view.header, version, body);
            }
        }
        for cut in 0..raw.len() {
            let _ = parse_message(&raw[..cut]);
        }
    }
}

/// A tiny deterministic generator, so the corruption set is fixed.
fn lcg(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *seed >> 33
}

#[test]
fn message_corruptions_never_panic() {
    let mut seed = 1;
    for m in messages() {
        let version = version_of(&m);
        let raw = hx(&m["message_hex"]);
        let view = parse_message(&raw).unwrap();
        for at in 0..view.body.len() {
            for flip in [0xFF, 0x80, 0x01] {
                let mut body = view.body.to_vec();
                body[at] ^= flip;
                let _ = RequestBody::decode_at(version, view.header.op_code, &body);
                let _ = decode_response_body(&view.header, version, &body);
            }
        }
        for _ in 0..200 {
            let mut body = view.body.to_vec();
            let at = lcg(&mut seed) as usize % body.len().max(1);
            if let Some(b) = body.get_mut(at) {
                *b = lcg(&mut seed) as u8;
            }
            let _ = RequestBody::decode_at(version, view.header.op_code, &body);
        }
    }
}

#[test]
fn every_stream_truncation_needs_more_and_never_finishes() {
    for s in streams() {
        let name = text(&s["name"]);
        let bytes = hx(&s["stream_hex"]);
        for cut in 0..bytes.len() {
            let prefix = &bytes[..cut];
            let Some((_, at)) = Preamble::decode(prefix).unwrap() else { continue };
            let (mut d, _) = decoder_for(&s, &bytes, DEFAULT_MAX_ITEM_LEN);
            d.feed(&prefix[at..]);
            loop {
                match d.next_item() {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) => panic!("{name}: cut at {cut}: {e}"),
                }
            }
            assert!(!d.is_done(), "{name}: a stream cut at {cut} of {} looks finished", bytes.len());
        }
    }
}

#[test]
fn stream_corruptions_are_errors_or_readings_never_panics() {
    let mut seed = 7;
    for s in streams() {
        let name = text(&s["name"]);
        let bytes = hx(&s["stream_hex"]);
        let signed = s["signed"].as_bool() == Some(true);
        let mut flips: Vec<(usize, u8)> = (0..bytes.len()).map(|at| (at, 0xFF)).collect();
        flips.extend((0..300).map(|_| (lcg(&mut seed) as usize % bytes.len(), lcg(&mut seed) as u8 | 1)));
        for (at, flip) in flips {
            let mut bad = bytes.clone();
            bad[at] ^= flip;
            let Ok(Some((_, start))) = Preamble::decode(&bad) else { continue };
            if start != 4 + 4 * usize::from(signed) + 4 * usize::from(signed) {
                continue; // the stream type word itself changed
            }
            let (mut d, _) = decoder_for(&s, &bad, DEFAULT_MAX_ITEM_LEN);
            d.feed(&bad[start..]);
            let mut result = Ok(());
            loop {
                match d.next_item() {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            // In a signed stream every changed byte after the preamble is caught,
            // except in the dump's unsigned final byte (the last one).
            let in_unsigned_tail = text(&s["kind"]) == "dump" && at == bytes.len() - 1;
            if signed && at >= start && !in_unsigned_tail {
                assert!(result.is_err() || !d.is_done(), "{name}: flip at {at} went unnoticed");
            }
        }
    }
}

#[test]
fn oversized_items_are_typed_errors_without_buffering_them() {
    let dump = streams().into_iter().find(|s| s["name"] == "dump_v2_unsigned").unwrap();
    let bytes = hx(&dump["stream_hex"]);
    // The first record (other sites' text, 113 bytes) is bigger than a 64-byte cap.
    let (mut d, at) = decoder_for(&dump, &bytes, 64);
    d.feed(&bytes[at..]);
    assert!(matches!(d.next_item(), Ok(Some(Item::Dump(DumpStreamItem::Header { version: 2 })))));
    assert!(matches!(d.next_item(), Err(StreamError::ItemTooLarge { max: 64, .. })));

    // A length word announcing 1 MiB fails at once, after 9 bytes, not after 1 MiB.
    let mut d = DumpStreamDecoder::new(Framing::plain(), 4096);
    d.feed(&2i32.to_be_bytes());
    d.feed(&[5, 0, 0x10, 0, 0]);
    assert!(matches!(d.next_item(), Ok(Some(DumpStreamItem::Header { version: 2 }))));
    assert!(matches!(d.next_item(), Err(StreamError::ItemTooLarge { .. })));
    // A negative or absurd length is a plain decode error.
    let mut d = DumpStreamDecoder::new(Framing::plain(), 4096);
    d.feed(&2i32.to_be_bytes());
    d.feed(&[1, 0xFF, 0xFF, 0xFF, 0xFF]);
    assert!(d.next_item().is_ok());
    assert!(matches!(d.next_item(), Err(StreamError::Decode(_))));
}
