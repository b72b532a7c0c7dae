//! Property tests: encode → decode is the identity for every message part, and
//! decoding arbitrary (or mutated) bytes returns errors instead of panicking.

use handled_proto::codec::Codec;
use handled_proto::credential::Credential;
use handled_proto::digest::{DigestAlg, RequestDigest};
use handled_proto::envelope::{Envelope, Version};
use handled_proto::header::{Header, OpCode, OpFlags, ResponseCode};
use handled_proto::message::{encode_message, encode_unit, parse_message, split_unit};
use handled_proto::replication::{
    DumpHandlesRequest, DumpStreamDecoder, Framing, MirrorLayout, Preamble, ReplicationServerState,
    ReplicationStateInfo, RetrieveTxnRequest, TxnQuery, TxnStreamDecoder,
};
use handled_proto::request::{ChallengeAnswer, RequestBody, ResolutionRequest};
use handled_proto::response::{
    decode_response_body, encode_response_body, encode_response_body_for_version, ResponseBody,
};
use handled_proto::session::{
    KeyData, KeyExchange, PublicKeyAnswer, SecretKeyAnswer, SessionSetupRequest, SessionSetupResponse,
    VerifyChallengeRequest,
};
use handled_proto::udp::{split_datagrams, Reassembly};
use handled_proto::{HandleValue, TtlType, ValuePermissions, ValueReference};
use proptest::prelude::*;

// Configs from `support::proptest_config`: no `*.proptest-regressions` files
// are written into the source tree when a case fails.
mod support;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

fn version() -> impl Strategy<Value = Version> {
    (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Version::new(a, b))
}

fn envelope() -> impl Strategy<Value = Envelope> {
    (version(), 1u8..=3, any::<u8>(), any::<(bool, bool, bool)>(), any::<(i32, i32, i32, i32)>()).prop_map(
        |(
            version,
            smaj,
            smin,
            (compressed, encrypted, truncated),
            (session_id, request_id, sequence, message_length),
        )| {
            Envelope {
                version,
                suggested: Version::new(smaj, smin),
                compressed,
                encrypted,
                truncated,
                session_id,
                request_id,
                sequence,
                message_length,
            }
        },
    )
}

fn header() -> impl Strategy<Value = Header> {
    any::<(u32, u32, u32, u16, u8, u32, u32)>().prop_map(|(op, rc, fl, serial, rec, exp, len)| Header {
        op_code: OpCode(op),
        response_code: ResponseCode(rc),
        op_flags: OpFlags(fl),
        site_serial: serial,
        recursion_count: rec,
        expiration: exp,
        body_length: len,
    })
}

fn value() -> impl Strategy<Value = HandleValue> {
    (
        any::<(i32, i32, bool, i32, u8)>(),
        bytes(12),
        bytes(40),
        prop::collection::vec(
            (bytes(12), any::<i32>()).prop_map(|(handle, index)| ValueReference { handle, index }),
            0..3,
        ),
    )
        .prop_map(|((index, timestamp, abs, ttl, perms), value_type, data, references)| HandleValue {
            index,
            timestamp,
            ttl_type: if abs { TtlType::Absolute } else { TtlType::Relative },
            ttl,
            permissions: ValuePermissions(perms),
            value_type,
            data,
            references,
        })
}

fn values() -> impl Strategy<Value = Vec<HandleValue>> {
    prop::collection::vec(value(), 0..5)
}

fn alg() -> impl Strategy<Value = DigestAlg> {
    prop_oneof![Just(DigestAlg::Md5), Just(DigestAlg::Sha1), Just(DigestAlg::Sha256)]
}

fn request_digest() -> impl Strategy<Value = RequestDigest> {
    prop_oneof![
        (alg(), bytes(64)).prop_map(|(alg, data)| RequestDigest { alg, legacy: false, digest: alg.digest(&data) }),
        bytes(40).prop_map(|digest| RequestDigest { alg: DigestAlg::Md5, legacy: true, digest }),
    ]
}

fn key_exchange() -> impl Strategy<Value = KeyExchange> {
    prop_oneof![
        bytes(40).prop_map(KeyExchange::ClientKey),
        Just(KeyExchange::ServerKey),
        (bytes(20), any::<i32>()).prop_map(|(handle, index)| KeyExchange::HandleKey { handle, index }),
        bytes(40).prop_map(KeyExchange::DiffieHellman),
        (5u16..).prop_map(KeyExchange::Other),
        Just(KeyExchange::Other(0)),
    ]
}

fn verify_request() -> impl Strategy<Value = VerifyChallengeRequest> {
    (bytes(20), any::<i32>(), bytes(20), prop::option::of(alg()), bytes(40), bytes(40)).prop_map(
        |(handle, index, nonce, digest_alg, data, answer)| VerifyChallengeRequest {
            handle,
            index,
            nonce,
            request_digest: digest_alg.map_or(data.clone(), |a| a.digest(&data)),
            digest_alg,
            answer,
        },
    )
}

fn request_body() -> impl Strategy<Value = RequestBody> {
    let h = || bytes(30);
    prop_oneof![
        (h(), prop::collection::vec(any::<i32>(), 0..4), prop::collection::vec(bytes(10), 0..4))
            .prop_map(|(handle, indexes, types)| RequestBody::Resolution(ResolutionRequest { handle, indexes, types })),
        h().prop_map(|handle| RequestBody::GetSiteInfo { handle }),
        (h(), values()).prop_map(|(handle, values)| RequestBody::CreateHandle { handle, values }),
        h().prop_map(|handle| RequestBody::DeleteHandle { handle }),
        (h(), values()).prop_map(|(handle, values)| RequestBody::AddValue { handle, values }),
        (h(), prop::collection::vec(any::<i32>(), 0..4))
            .prop_map(|(handle, indexes)| RequestBody::RemoveValue { handle, indexes }),
        (h(), values()).prop_map(|(handle, values)| RequestBody::ModifyValue { handle, values }),
        h().prop_map(|prefix| RequestBody::ListHandles { prefix }),
        (h(), h(), any::<i32>(), bytes(60)).prop_map(|(auth_type, identity_handle, identity_index, answer)| {
            RequestBody::ChallengeAnswer(ChallengeAnswer { auth_type, identity_handle, identity_index, answer })
        }),
        verify_request().prop_map(RequestBody::VerifyChallenge),
        h().prop_map(|prefix| RequestBody::HomeNa { prefix }),
        h().prop_map(|prefix| RequestBody::UnhomeNa { prefix }),
        h().prop_map(|handle| RequestBody::ListHomedNas { handle }),
        (any::<i32>(), h(), any::<i32>(), key_exchange()).prop_map(
            |(timeout, identity_handle, identity_index, exchange)| {
                RequestBody::SessionSetup(SessionSetupRequest { timeout, identity_handle, identity_index, exchange })
            }
        ),
        h().prop_map(|handle| RequestBody::SessionTerminate { handle }),
        bytes(60).prop_map(|encrypted_key| RequestBody::SessionExchangeKey { encrypted_key }),
        h().prop_map(|handle| RequestBody::GetNextTxnId { handle }),
        h().prop_map(|handle| RequestBody::BackupServer { handle }),
        retrieve_txn_request().prop_map(RequestBody::RetrieveTxnLog),
        (layout(), prop::option::of((bytes(30), any::<i32>())))
            .prop_map(|(layout, resume)| RequestBody::DumpHandles(DumpHandlesRequest { layout, resume })),
        prop_oneof![Just(0u32), Just(106), 2000u32..].prop_map(|op| RequestBody::Unsupported(OpCode(op))),
    ]
}

fn layout() -> impl Strategy<Value = MirrorLayout> {
    any::<(u8, i32, i32)>().prop_map(|(hash_type, num_servers, server_num)| MirrorLayout {
        hash_type,
        num_servers,
        server_num,
    })
}

/// As decoded from a 2.10 envelope (`RequestBody::decode`): always the flagged form.
fn retrieve_txn_request() -> impl Strategy<Value = RetrieveTxnRequest> {
    let state = (prop::collection::vec(("[ -~]{0,12}", any::<(i64, i64)>()), 0..4), prop::option::of("[ -~é]{0,12}"))
        .prop_map(|(queues, own_name)| {
            let mut replication_server_states: Vec<(String, ReplicationServerState)> = Vec::new();
            for (q, (last_txn_id, last_timestamp)) in queues {
                if !replication_server_states.iter().any(|(k, _)| *k == q) {
                    replication_server_states.push((q, ReplicationServerState { last_txn_id, last_timestamp }));
                }
            }
            ReplicationStateInfo { replication_server_states, own_name }
        });
    let query = prop_oneof![
        any::<(u64, u64)>()
            .prop_map(|(last_txn_id, last_query_date_ms)| TxnQuery::Since { last_txn_id, last_query_date_ms }),
        state.prop_map(TxnQuery::AllQueues),
    ];
    (query, layout(), prop::option::of(any::<i32>())).prop_map(|(query, layout, wait_millis)| RetrieveTxnRequest {
        query,
        layout,
        flagged: true,
        wait_millis,
    })
}

const MESSAGE_CODES: [u32; 26] = [
    2, 3, 4, 5, 6, 7, 100, 101, 102, 200, 201, 202, 300, 301, 400, 401, 403, 404, 405, 406, 500, 501, 502, 503, 504,
    505,
];

const EMPTY_OPS: [u32; 9] = [101, 102, 103, 104, 300, 301, 401, 402, 1003];

/// (op, code, body) triples that belong together.
fn response() -> impl Strategy<Value = (OpCode, ResponseCode, ResponseBody)> {
    let ok = |op: u32| (OpCode(op), ResponseCode::SUCCESS);
    prop_oneof![
        (bytes(30), values()).prop_map(move |(handle, values)| {
            let (o, c) = ok(1);
            (o, c, ResponseBody::Resolution { handle, values })
        }),
        bytes(80).prop_map(move |r| (OpCode(2), ResponseCode::SUCCESS, ResponseBody::SiteInfo(r))),
        prop::option::of(bytes(30)).prop_map(|handle| (
            OpCode(100),
            ResponseCode::SUCCESS,
            ResponseBody::Created { handle }
        )),
        prop::sample::select(&EMPTY_OPS[..]).prop_map(|op| (OpCode(op), ResponseCode::SUCCESS, ResponseBody::Empty)),
        (prop::sample::select(&[105u32, 302][..]), prop::collection::vec(bytes(20), 0..5)).prop_map(|(op, hs)| (
            OpCode(op),
            ResponseCode::SUCCESS,
            ResponseBody::HandleList(hs)
        )),
        (any::<u32>(), bytes(20)).prop_map(|(op, nonce)| (
            OpCode(op),
            ResponseCode(402),
            ResponseBody::Challenge { nonce }
        )),
        any::<bool>().prop_map(|valid| (OpCode(201), ResponseCode::SUCCESS, ResponseBody::VerifyResult { valid })),
        (any::<u16>(), bytes(60)).prop_map(|(mode, data)| {
            (OpCode(400), ResponseCode::SUCCESS, ResponseBody::SessionSetup(SessionSetupResponse { mode, data }))
        }),
        any::<u64>().prop_map(|id| (OpCode(1000), ResponseCode::SUCCESS, ResponseBody::NextTxnId(id))),
        any::<bool>().prop_map(|keep_alive| (
            OpCode(1001),
            ResponseCode::SUCCESS,
            ResponseBody::RetrieveTxnLog { keep_alive }
        )),
        Just((OpCode(1002), ResponseCode::SUCCESS, ResponseBody::DumpHandles)),
        (any::<u32>(), prop::sample::select(&[302u32, 303][..]), bytes(30), values()).prop_map(
            |(op, c, handle, values)| (OpCode(op), ResponseCode(c), ResponseBody::Referral { handle, values })
        ),
        (any::<u32>(), prop::sample::select(&MESSAGE_CODES[..]), bytes(40)).prop_map(|(op, c, message)| (
            OpCode(op),
            ResponseCode(c),
            ResponseBody::Error { message }
        )),
    ]
}

fn credential() -> impl Strategy<Value = Credential> {
    (any::<(u8, u8, u16, i32)>(), bytes(10), bytes(14), bytes(14), bytes(300)).prop_map(
        |((version, reserved, flags, session_counter), signer_handle, credential_type, algorithm, signature)| {
            Credential {
                version,
                reserved,
                flags,
                signer_handle,
                session_counter,
                credential_type,
                algorithm,
                signature,
            }
        },
    )
}

fn secret_answer() -> impl Strategy<Value = SecretKeyAnswer> {
    prop_oneof![
        (bytes(20), any::<i32>(), any::<i32>(), bytes(24)).prop_map(|(salt, iterations, key_bits, mac)| {
            SecretKeyAnswer::Pbkdf2HmacSha1 { salt, iterations, key_bits, mac }
        }),
        prop::collection::vec(any::<u8>(), 32).prop_map(SecretKeyAnswer::HmacSha256),
        prop::collection::vec(any::<u8>(), 20).prop_map(SecretKeyAnswer::HmacSha1),
        prop::collection::vec(any::<u8>(), 32).prop_map(SecretKeyAnswer::Sha256),
        prop::collection::vec(any::<u8>(), 20).prop_map(SecretKeyAnswer::Sha1),
        prop::collection::vec(any::<u8>(), 16).prop_map(SecretKeyAnswer::Md5),
        prop::collection::vec(any::<u8>(), 16).prop_map(SecretKeyAnswer::LegacyMd5),
    ]
}

/// Feed `data` through every decoder; only errors may come out.
fn decode_everything(data: &[u8], op: u32, code: u32, flags: u32, v: Version) {
    let _ = Envelope::parse(data).map(|e| e.check_message_length());
    let _ = split_unit(data);
    if let Ok(view) = parse_message(data) {
        let _ = RequestBody::decode(view.header.op_code, view.body);
        let _ = decode_response_body(&view.header, v, view.body);
    }
    let _ = RequestBody::decode(OpCode(op), data);
    let _ = RequestBody::decode_at(v, OpCode(op), data);
    let _ = Preamble::decode(data);
    let mut txn = TxnStreamDecoder::new(Framing::plain(), 1024);
    txn.feed(data);
    while let Ok(Some(_)) = txn.next_item() {}
    let mut dump = DumpStreamDecoder::new(Framing::plain(), 1024);
    dump.feed(data);
    while let Ok(Some(_)) = dump.next_item() {}
    let h = Header {
        response_code: ResponseCode(code),
        op_flags: OpFlags(flags),
        ..Header::request(OpCode(op), OpFlags::NONE)
    };
    let _ = decode_response_body(&h, v, data);
    let _ = SecretKeyAnswer::decode(data);
    let _ = PublicKeyAnswer::decode(data);
    let _ = KeyData::decode(data);
    let _ = Credential::from_bytes(data);
    let _ = RequestDigest::from_bytes(data);
}

fn interesting_op() -> impl Strategy<Value = u32> {
    prop_oneof![
        prop::sample::select(
            &[0u32, 1, 2, 100, 101, 102, 103, 104, 105, 200, 201, 300, 301, 302, 400, 401, 402, 1000, 1001, 1002, 1003]
                [..]
        ),
        any::<u32>(),
    ]
}

fn interesting_code() -> impl Strategy<Value = u32> {
    prop_oneof![prop::sample::select(&[0u32, 1, 2, 100, 200, 302, 303, 402, 505][..]), any::<u32>()]
}

fn interesting_version() -> impl Strategy<Value = Version> {
    prop_oneof![Just(Version::V2_0), Just(Version::V2_4), Just(Version::V2_10), Just(Version::new(5, 0)), version()]
}

proptest! {
    #![proptest_config(support::proptest_config(256))]

    #[test]
    fn envelope_round_trip(e in envelope()) {
        let b = e.to_bytes();
        prop_assert_eq!(&b[..], &e.to_array()[..]);
        prop_assert_eq!(Envelope::from_bytes(&b).unwrap(), e);
    }

    #[test]
    fn header_round_trip(h in header()) {
        prop_assert_eq!(Header::from_bytes(&h.to_bytes()).unwrap(), h);
    }

    #[test]
    fn value_round_trip(v in value()) {
        let b = v.to_bytes();
        prop_assert_eq!(b.len(), v.encoded_len());
        prop_assert_eq!(HandleValue::from_bytes(&b).unwrap(), v);
    }

    #[test]
    fn request_round_trip(body in request_body()) {
        let op = body.op_code();
        prop_assert_eq!(RequestBody::decode(op, &body.to_vec()).unwrap(), body);
    }

    #[test]
    fn response_round_trip((op, code, body) in response(), digest in prop::option::of(request_digest())) {
        // 402 always carries a digest; RD announces it otherwise.
        let digest = if code.0 == 402 { Some(digest.unwrap_or(RequestDigest::compute(Version::V2_10, b"x"))) } else { digest };
        let flags = if digest.is_some() { OpFlags::RD } else { OpFlags::NONE };
        let h = Header { response_code: code, ..Header::request(op, flags) };
        let mut out = Vec::new();
        encode_response_body(digest.as_ref(), &body, &mut out);
        prop_assert_eq!(decode_response_body(&h, Version::V2_10, &out).unwrap(), (digest, body));
    }

    #[test]
    fn old_challenge_round_trip(nonce in bytes(20), d in bytes(20)) {
        let digest = RequestDigest { alg: DigestAlg::Md5, legacy: true, digest: d };
        let body = ResponseBody::Challenge { nonce };
        let mut out = Vec::new();
        encode_response_body_for_version(Version::V2_0, Some(&digest), &body, &mut out);
        let h = Header { response_code: ResponseCode(402), ..Header::request(OpCode(1), OpFlags::NONE) };
        prop_assert_eq!(decode_response_body(&h, Version::V2_0, &out).unwrap(), (Some(digest), body));
    }

    #[test]
    fn credential_round_trip(c in credential()) {
        let b = c.to_bytes();
        prop_assert_eq!(b.len(), c.encoded_len());
        prop_assert_eq!(Credential::from_bytes(&b).unwrap(), c);
    }

    #[test]
    fn message_round_trip(e in envelope(), h in header(), body in request_body(), c in prop::option::of(credential())) {
        let h = Header { response_code: ResponseCode::RESERVED, op_code: body.op_code(), ..h };
        let mut msg = Vec::new();
        encode_message(&h, &body.to_vec(), c.as_ref(), &mut msg);
        let unit = encode_unit(&e, &msg);
        let (e2, m2, rest) = split_unit(&unit).unwrap();
        prop_assert!(rest.is_empty());
        prop_assert_eq!(e2, Envelope { message_length: msg.len() as i32, ..e });
        let view = parse_message(m2).unwrap();
        prop_assert_eq!(view.header, Header { body_length: view.body.len() as u32, ..h });
        prop_assert_eq!(view.credential, c);
        prop_assert_eq!(RequestBody::decode(view.header.op_code, view.body).unwrap(), body);
    }

    #[test]
    fn answers_round_trip(a in secret_answer(), hash_name in bytes(10), signature in bytes(80)) {
        prop_assert_eq!(SecretKeyAnswer::decode(&a.to_vec()).unwrap(), a);
        let p = PublicKeyAnswer { hash_name, signature };
        prop_assert_eq!(PublicKeyAnswer::decode(&p.to_vec()).unwrap(), p);
    }

    #[test]
    fn udp_round_trip(e in envelope(), msg in bytes(3000), order in any::<u64>()) {
        let grams = split_datagrams(&e, &msg, true);
        let mut idx: Vec<usize> = (0..grams.len()).collect();
        idx.rotate_left((order as usize) % grams.len());
        let first = Envelope::parse(&grams[idx[0]]).unwrap();
        let mut r = Reassembly::new(&first);
        let mut out = None;
        for i in idx {
            let g = &grams[i];
            prop_assert!(g.len() <= 512);
            let got = r.add_datagram(&Envelope::parse(g).unwrap(), &g[20..]).unwrap();
            if got.is_some() { out = got; }
        }
        prop_assert_eq!(out, Some(msg));
    }
}

proptest! {
    #![proptest_config(support::proptest_config(1024))]

    #[test]
    fn arbitrary_bytes_never_panic(
        data in bytes(300), op in interesting_op(), code in interesting_code(), flags in any::<u32>(), v in interesting_version(),
    ) {
        decode_everything(&data, op, code, flags, v);
    }

    #[test]
    fn mutated_messages_never_panic(
        body in request_body(), (rop, rcode, rbody) in response(), c in prop::option::of(credential()),
        pos in any::<usize>(), byte in any::<u8>(), cut in any::<usize>(), v in interesting_version(),
    ) {
        for (op, code, encoded) in [
            (body.op_code(), ResponseCode::RESERVED, body.to_vec()),
            (rop, rcode, { let mut o = Vec::new(); encode_response_body(None, &rbody, &mut o); o }),
        ] {
            let mut msg = Vec::new();
            encode_message(&Header { response_code: code, ..Header::request(op, OpFlags::RD) }, &encoded, c.as_ref(), &mut msg);
            let mut bad = msg.clone();
            let p = pos % bad.len();
            bad[p] ^= byte | 1;
            bad.truncate(bad.len() - cut % 8);
            decode_everything(&bad, op.0, code.0, OpFlags::RD.0, v);
            decode_everything(&encoded[..encoded.len() - cut % (encoded.len() + 1)], op.0, code.0, 0, v);
        }
    }

    #[test]
    fn arbitrary_datagrams_never_panic(lens in prop::collection::vec((any::<i32>(), 0usize..600), 1..6), total in -10i32..300_000) {
        let e = Envelope { message_length: total, ..Envelope::new(Version::V2_10, Version::V2_10, 1) };
        let mut r = Reassembly::new(&e);
        for (seq, len) in lens {
            let _ = r.add(seq % 600, &vec![0; len]);
        }
    }
}
