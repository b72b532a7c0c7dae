//! Every message unit in `tests/vectors/*.json` (made by the Java client
//! library) decodes to the fields of its `decoded` object and re-encodes byte
//! for byte; plus the signed/MACed inputs, digests, answers and UDP chunks.

use handled_proto::codec::Codec;
use handled_proto::credential::{signed_input, Credential};
use handled_proto::digest::{DigestAlg, RequestDigest};
use handled_proto::envelope::{Envelope, Version};
use handled_proto::header::{OpCode, OpFlags, ResponseCode};
use handled_proto::message::{encode_message, encode_unit, parse_message, split_unit};
use handled_proto::request::RequestBody;
use handled_proto::response::{decode_response_body, encode_response_body, ResponseBody};
use handled_proto::session::{cipher, KeyData, KeyExchange, PublicKeyAnswer, SecretKeyAnswer};
use handled_proto::udp::{split_datagrams, Reassembly, UDP_PAYLOAD};
use handled_proto::HandleValue;
use serde_json::Value;
use sha1::Sha1;
use sha2::{Digest, Sha256};

mod support;
use support::{load, vectors_dir};

fn hx(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().unwrap_or_else(|| panic!("not a hex string: {v}"))).unwrap()
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn text(v: &Value) -> &[u8] {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}")).as_bytes()
}

fn hex_word(v: &Value) -> u32 {
    u32::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// Objects holding a whole unit: `hex` plus a `decoded.envelope`.
fn collect_units<'a>(v: &'a Value, path: String, out: &mut Vec<(String, &'a Value)>) {
    match v {
        Value::Object(m) => {
            if m.contains_key("hex") && m.get("decoded").and_then(|d| d.get("envelope")).is_some() {
                out.push((path.clone(), v));
            }
            for (k, child) in m {
                collect_units(child, format!("{path}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                collect_units(child, format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

const FLAG_NAMES: [(&str, OpFlags); 12] = [
    ("AT", OpFlags::AT),
    ("CT", OpFlags::CT),
    ("ENC", OpFlags::ENC),
    ("REC", OpFlags::REC),
    ("CA", OpFlags::CA),
    ("CN", OpFlags::CN),
    ("KA", OpFlags::KA),
    ("PO", OpFlags::PO),
    ("RD", OpFlags::RD),
    ("OW", OpFlags::OW),
    ("MINT", OpFlags::MINT),
    ("DNR", OpFlags::DNR),
];

fn check_envelope(at: &str, j: &Value, env: &Envelope, raw: &[u8]) {
    assert_eq!(hx(&j["hex"]), raw, "{at}: envelope hex");
    assert_eq!(int(&j["major_version"]), env.version.major as i64, "{at}");
    assert_eq!(int(&j["minor_version"]), env.version.minor as i64, "{at}");
    assert_eq!(hex_word(&j["flags_byte"]), raw[2] as u32, "{at}");
    assert_eq!(j["compressed"].as_bool(), Some(env.compressed), "{at}");
    assert_eq!(j["encrypted"].as_bool(), Some(env.encrypted), "{at}");
    assert_eq!(j["truncated"].as_bool(), Some(env.truncated), "{at}");
    assert_eq!(int(&j["suggested_major_version"]), env.suggested.major as i64, "{at}");
    assert_eq!(int(&j["suggested_minor_version"]), env.suggested.minor as i64, "{at}");
    assert_eq!(int(&j["session_id"]), env.session_id as i64, "{at}");
    assert_eq!(int(&j["request_id"]), env.request_id as i64, "{at}");
    assert_eq!(int(&j["sequence_number"]), env.sequence as i64, "{at}");
    assert_eq!(int(&j["message_length"]), env.message_length as i64, "{at}");
    assert_eq!(&env.to_array()[..], raw, "{at}: envelope re-encoding");
}

fn check_values(at: &str, j: &Value, values: &[HandleValue]) {
    let j = j.as_array().unwrap();
    assert_eq!(j.len(), values.len(), "{at}: value count");
    for (jv, v) in j.iter().zip(values) {
        assert_eq!(int(&jv["index"]), v.index as i64, "{at}");
        assert_eq!(text(&jv["type"]), &v.value_type[..], "{at}");
        assert_eq!(hx(&jv["data_hex"]), v.data, "{at}");
        assert_eq!(int(&jv["ttl_type"]), matches!(v.ttl_type, handled_proto::TtlType::Absolute) as i64, "{at}");
        assert_eq!(int(&jv["ttl"]), v.ttl as i64, "{at}");
        assert_eq!(int(&jv["timestamp"]), v.timestamp as i64, "{at}");
        assert_eq!(hex_word(&jv["permissions_byte"]), v.permissions.0 as u32, "{at}");
        let refs = jv["references"].as_array().unwrap();
        assert_eq!(refs.len(), v.references.len(), "{at}");
        for (jr, r) in refs.iter().zip(&v.references) {
            assert_eq!(text(&jr["handle"]), &r.handle[..], "{at}");
            assert_eq!(int(&jr["index"]), r.index as i64, "{at}");
        }
        assert_eq!(hx(&jv["encoded_value_hex"]), v.to_bytes(), "{at}: value re-encoding");
    }
}

fn ints(v: &Value) -> Vec<i32> {
    v.as_array().unwrap().iter().map(|x| int(x) as i32).collect()
}

fn strings(v: &Value) -> Vec<Vec<u8>> {
    v.as_array().unwrap().iter().map(|x| text(x).to_vec()).collect()
}

fn check_request(at: &str, j: &Value, op: OpCode, req: &RequestBody) {
    let class = j["library_class"].as_str().unwrap();
    match (class, req) {
        ("ResolutionRequest", RequestBody::Resolution(r)) => {
            assert_eq!(text(&j["handle"]), &r.handle[..], "{at}");
            assert_eq!(ints(&j["requested_indexes"]), r.indexes, "{at}");
            assert_eq!(strings(&j["requested_types"]), r.types, "{at}");
        }
        ("CreateHandleRequest", RequestBody::CreateHandle { handle, values })
        | ("AddValueRequest", RequestBody::AddValue { handle, values })
        | ("ModifyValueRequest", RequestBody::ModifyValue { handle, values }) => {
            assert_eq!(text(&j["handle"]), &handle[..], "{at}");
            check_values(at, &j["values"], values);
        }
        ("RemoveValueRequest", RequestBody::RemoveValue { handle, indexes }) => {
            assert_eq!(text(&j["handle"]), &handle[..], "{at}");
            assert_eq!(&ints(&j["indexes"]), indexes, "{at}");
        }
        ("DeleteHandleRequest", RequestBody::DeleteHandle { .. })
        | ("ListNAsRequest", RequestBody::ListHomedNas { .. })
        | ("ListHandlesRequest", RequestBody::ListHandles { .. })
        | (
            "GenericRequest",
            RequestBody::GetSiteInfo { .. }
            | RequestBody::HomeNa { .. }
            | RequestBody::UnhomeNa { .. }
            | RequestBody::SessionTerminate { .. },
        ) => assert_eq!(Some(text(&j["handle"])), req.handle(), "{at}"),
        ("ChallengeAnswerRequest", RequestBody::ChallengeAnswer(a)) => {
            assert_eq!(text(&j["auth_type"]), &a.auth_type[..], "{at}");
            assert_eq!(text(&j["user_id_handle"]), &a.identity_handle[..], "{at}");
            assert_eq!(int(&j["user_id_index"]), a.identity_index as i64, "{at}");
            assert_eq!(hx(&j["signed_response_hex"]), a.answer, "{at}");
            let again = match &a.auth_type[..] {
                b"HS_SECKEY" => SecretKeyAnswer::decode(&a.answer).unwrap().to_vec(),
                b"HS_PUBKEY" => PublicKeyAnswer::decode(&a.answer).unwrap().to_vec(),
                other => panic!("{at}: auth type {other:?}"),
            };
            assert_eq!(again, a.answer, "{at}: answer re-encoding");
        }
        ("VerifyAuthRequest", RequestBody::VerifyChallenge(v)) => {
            assert_eq!(text(&j["handle"]), &v.handle[..], "{at}");
            assert_eq!(int(&j["handle_index"]), v.index as i64, "{at}");
            assert_eq!(hx(&j["nonce_hex"]), v.nonce, "{at}");
            assert_eq!(hx(&j["orig_request_digest_hex"]), v.request_digest, "{at}");
            assert_eq!(v.digest_alg, None, "{at}: current digest form");
            assert_eq!(hx(&j["signed_response_hex"]), v.answer, "{at}");
        }
        ("SessionSetupRequest", RequestBody::SessionSetup(s)) => {
            assert_eq!(int(&j["key_exchange_mode"]), s.mode() as i64, "{at}");
            assert_eq!(int(&j["timeout"]), s.timeout as i64, "{at}");
            assert_eq!(text(&j["identity_handle"]), &s.identity_handle[..], "{at}");
            assert_eq!(int(&j["identity_index"]), s.identity_index as i64, "{at}");
            match &s.exchange {
                KeyExchange::DiffieHellman(k) | KeyExchange::ClientKey(k) => {
                    assert_eq!(&hx(&j["public_key_hex"]), k, "{at}")
                }
                other => panic!("{at}: exchange {other:?}"),
            }
        }
        _ => panic!("{at}: library class {class} vs {req:?} (op {op})"),
    }
}

fn check_response(at: &str, j: &Value, digest: &Option<RequestDigest>, body: &ResponseBody) {
    match (j.get("request_digest_hash_type"), digest) {
        (None, None) => {}
        (Some(t), Some(d)) => {
            assert_eq!(int(t), d.alg.code() as i64, "{at}");
            assert!(!d.legacy, "{at}");
            assert_eq!(hx(&j["request_digest_hex"]), d.digest, "{at}");
        }
        (t, d) => panic!("{at}: digest {t:?} vs {d:?}"),
    }
    let class = j["library_class"].as_str().unwrap();
    match (class, body) {
        ("ResolutionResponse", ResponseBody::Resolution { handle, values }) => {
            assert_eq!(text(&j["handle"]), &handle[..], "{at}");
            check_values(at, &j["values"], values);
        }
        ("ErrorResponse", ResponseBody::Error { message }) => assert_eq!(text(&j["message"]), &message[..], "{at}"),
        ("CreateHandleResponse", ResponseBody::Created { handle }) => {
            assert_eq!(Some(text(&j["handle"])), handle.as_deref(), "{at}")
        }
        ("GetSiteInfoResponse", ResponseBody::SiteInfo(record)) => assert!(!record.is_empty(), "{at}"),
        ("ChallengeResponse", ResponseBody::Challenge { nonce }) => assert_eq!(hx(&j["nonce_hex"]), *nonce, "{at}"),
        ("VerifyAuthResponse", ResponseBody::VerifyResult { valid }) => {
            assert_eq!(j["is_valid"].as_bool(), Some(*valid), "{at}")
        }
        ("SessionSetupResponse", ResponseBody::SessionSetup(s)) => {
            assert_eq!(int(&j["key_exchange_mode"]), s.mode as i64, "{at}");
            assert_eq!(hx(&j["data_hex"]), s.data, "{at}");
        }
        ("ListHandlesResponse", ResponseBody::HandleList(handles)) => {
            assert_eq!(&strings(&j["handles"]), handles, "{at}")
        }
        ("GenericResponse", ResponseBody::Empty) => {}
        _ => panic!("{at}: library class {class} vs {body:?}"),
    }
}

/// Decode one unit, compare every field, re-encode it.
fn check_unit(at: &str, unit: &Value) {
    let bytes = hx(&unit["hex"]);
    if let Some(len) = unit.get("length") {
        assert_eq!(int(len) as usize, bytes.len(), "{at}: length");
    }
    let d = &unit["decoded"];
    let (env, msg, rest) = split_unit(&bytes).unwrap_or_else(|e| panic!("{at}: {e}"));
    assert!(rest.is_empty(), "{at}: bytes after the unit");
    check_envelope(at, &d["envelope"], &env, &bytes[..20]);
    if env.encrypted {
        // Ciphertext: nothing to decode here (see `encrypted_request`).
        return;
    }

    let view = parse_message(msg).unwrap_or_else(|e| panic!("{at}: {e}"));
    let h = &view.header;
    let jh = &d["header"];
    assert_eq!(hx(&jh["hex"]), msg[..24], "{at}: header hex");
    assert_eq!(int(&jh["op_code"]), h.op_code.0 as i64, "{at}");
    assert_eq!(int(&jh["response_code"]), h.response_code.0 as i64, "{at}");
    assert_eq!(hex_word(&jh["op_flags"]), h.op_flags.0, "{at}");
    let names: Vec<&str> = jh["op_flag_names"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    for (short, flag) in FLAG_NAMES {
        let named = names.iter().any(|n| n.split('(').next() == Some(short));
        assert_eq!(named, h.op_flags.contains(flag), "{at}: flag {short}");
    }
    assert_eq!(int(&jh["site_info_serial"]), h.site_serial as i16 as i64, "{at}: Java shows the serial as a short");
    assert_eq!(int(&jh["recursion_count"]), h.recursion_count as i64, "{at}");
    assert_eq!(int(&jh["expiration"]), h.expiration as i64, "{at}");
    assert_eq!(int(&jh["body_length"]), h.body_length as i64, "{at}");
    assert_eq!(hx(&d["body_hex"]), view.body, "{at}: body");

    let jc = &d["credential"];
    let cred_raw = hx(&jc["hex"]);
    assert_eq!(int(&jc["length"]) as usize, cred_raw.len(), "{at}");
    assert_eq!(view.credential.is_some(), !cred_raw.is_empty(), "{at}");
    if let Some(c) = &view.credential {
        assert_eq!(c.to_bytes(), cred_raw, "{at}: credential re-encoding");
        assert_eq!(Credential::from_bytes(&cred_raw).as_ref(), Ok(c), "{at}");
    }

    // Decode the body and encode it back.
    let mut body = Vec::new();
    if h.response_code == ResponseCode::RESERVED {
        let req = RequestBody::decode(h.op_code, view.body).unwrap_or_else(|e| panic!("{at}: {e}"));
        assert_eq!(req.op_code(), h.op_code, "{at}");
        check_request(at, &d["body"], h.op_code, &req);
        req.encode(&mut body);
    } else {
        let (digest, resp) = decode_response_body(h, env.version, view.body).unwrap_or_else(|e| panic!("{at}: {e}"));
        check_response(at, &d["body"], &digest, &resp);
        encode_response_body(digest.as_ref(), &resp, &mut body);
    }
    assert_eq!(hex::encode(&body), hex::encode(view.body), "{at}: body re-encoding");
    let mut again = Vec::new();
    encode_message(h, &body, view.credential.as_ref(), &mut again);
    assert_eq!(again, msg, "{at}: message re-encoding");
    assert_eq!(encode_unit(&env, &again), bytes, "{at}: unit re-encoding");
}

#[test]
fn every_message_unit_decodes_and_reencodes() {
    let mut files: Vec<_> = std::fs::read_dir(vectors_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    let mut total = 0;
    let mut with_units = Vec::new();
    for f in &files {
        let doc = load(f);
        let mut units = Vec::new();
        collect_units(&doc, f.clone(), &mut units);
        for (at, unit) in &units {
            check_unit(at, unit);
        }
        if !units.is_empty() {
            with_units.push(f.trim_end_matches(".json").to_string());
        }
        total += units.len();
    }
    for expected in [
        "resolution_request",
        "resolution_request_filtered",
        "resolution_request_certified",
        "resolution_response",
        "resolution_response_signed",
        "error_handle_not_found",
        "error_server_not_responsible",
        "error_values_not_found",
        "create_handle_request",
        "create_handle_response",
        "create_handle_request_mint_overwrite",
        "get_site_info_request",
        "get_site_info_response",
        "challenge_seckey",
        "challenge_pubkey",
        "session_dh",
        "admin_requests",
        "list_handles",
    ] {
        assert!(with_units.iter().any(|f| f == expected), "no message units found in {expected}.json");
    }
    assert!(total >= 37, "only {total} units found");
}

/// Unit → (envelope, message bytes).
fn unit(v: &Value) -> (Envelope, Vec<u8>) {
    let bytes = hx(&v["hex"]);
    let (env, msg, _) = split_unit(&bytes).unwrap();
    (env, msg.to_vec())
}

fn hmac<D: Digest + sha2::digest::core_api::BlockSizeUser>(key: &[u8], data: &[u8]) -> Vec<u8> {
    let block = <D as sha2::digest::core_api::BlockSizeUser>::block_size();
    let mut k = if key.len() > block { D::digest(key).to_vec() } else { key.to_vec() };
    k.resize(block, 0);
    let pad = |b: u8| k.iter().map(|x| x ^ b).collect::<Vec<u8>>();
    let inner = D::new().chain_update(pad(0x36)).chain_update(data).finalize();
    D::new().chain_update(pad(0x5c)).chain_update(inner).finalize().to_vec()
}

#[test]
fn signed_response_input_and_digest() {
    let v = load("resolution_response_signed.json");
    let (env, msg) = unit(&v);
    let view = parse_message(&msg).unwrap();
    let cred = view.credential.clone().unwrap();
    assert!(cred.is_signature());
    assert_eq!(cred.algorithm, b"SHA-256");
    assert_eq!(cred.digest_alg(), Some(DigestAlg::Sha256));
    assert_eq!(
        hex::encode(signed_input(&env, view.header_and_body, cred.session_counter)),
        v["signed_input_hex"].as_str().unwrap()
    );

    let (req_env, req_msg) = unit(&load("resolution_request_certified.json"));
    let req_view = parse_message(&req_msg).unwrap();
    let expect = RequestDigest::compute(env.version, req_view.header_and_body);
    assert_eq!(expect.digest, hx(&v["request_digest_check"]));
    let (digest, _) = decode_response_body(&view.header, env.version, view.body).unwrap();
    assert_eq!(digest, Some(expect.clone()));
    assert!(expect.matches(req_view.header_and_body));
    assert!(req_env.suggested >= Version::V2_8);
}

#[test]
fn session_dh_setup_mac_and_encryption() {
    let v = load("session_dh.json");
    let (_, msg) = unit(&v["session_setup_request"]);
    let view = parse_message(&msg).unwrap();
    let RequestBody::SessionSetup(setup) = RequestBody::decode(view.header.op_code, view.body).unwrap() else {
        panic!()
    };
    assert_eq!(setup.exchange, KeyExchange::DiffieHellman(hx(&v["client_dh_public_encoding_hex"])));
    assert!(view.header.op_flags.contains(OpFlags::CT | OpFlags::RD));

    let (env, msg) = unit(&v["session_setup_response"]);
    assert_eq!(env.session_id, 42);
    let rview = parse_message(&msg).unwrap();
    let (digest, body) = decode_response_body(&rview.header, env.version, rview.body).unwrap();
    assert_eq!(digest.unwrap().digest, RequestDigest::compute(env.version, view.header_and_body).digest);
    let ResponseBody::SessionSetup(resp) = body else { panic!() };
    let kd = KeyData::decode(&resp.data).unwrap();
    assert_eq!(kd.cipher, cipher::AES);
    assert_eq!(kd.key, hx(&v["server_dh_public_encoding_hex"]));
    assert_eq!(kd.to_vec(), resp.data);

    // HS_MAC input and MAC of the in-session request.
    let (env, msg) = unit(&v["request_in_session"]);
    let view = parse_message(&msg).unwrap();
    let cred = view.credential.clone().unwrap();
    assert!(cred.is_mac());
    assert_eq!(cred.session_counter, 1);
    assert_eq!(cred.algorithm, b"HMAC-SHA256");
    let input = signed_input(&env, view.header_and_body, cred.session_counter);
    assert_eq!(hex::encode(&input), v["mac_input_hex"].as_str().unwrap());
    let key_field = v.as_object().unwrap().keys().find(|k| k.starts_with("session_key_hex")).unwrap();
    let mac = hmac::<Sha256>(&hx(&v[key_field]), &input);
    assert_eq!(mac, hx(&v["mac_hex"]));
    assert_eq!(cred.signature, mac);

    // Encrypted form: envelope flag, IV prefix, plaintext = the message above.
    let e = &v["encrypted_request_in_session"];
    let (eenv, emsg) = unit(e);
    assert!(eenv.encrypted && !eenv.truncated);
    assert_eq!(eenv.to_array()[2], 0x42);
    assert_eq!(eenv.message_length as usize, emsg.len());
    assert_eq!(emsg[..16], hx(&e["iv_hex"])[..]);
    assert_eq!(hx(&e["plaintext_hex"]), msg);
}

#[test]
fn secret_key_challenge_material() {
    let v = load("challenge_seckey.json");
    let (env1, m1) = unit(&v["step1_request"]);
    let req = parse_message(&m1).unwrap();
    let digest = RequestDigest::compute(Version::V2_11, req.header_and_body);
    assert_eq!(digest.digest, hx(&v["request_digest_sha256_hex"]));
    assert_eq!(env1.version, Version::V2_10);

    let (env2, m2) = unit(&v["step2_challenge"]);
    let ch = parse_message(&m2).unwrap();
    assert_eq!(ch.header.response_code, ResponseCode::AUTHENTICATION_NEEDED);
    let (d, body) = decode_response_body(&ch.header, env2.version, ch.body).unwrap();
    assert_eq!(d, Some(digest.clone()));
    let ResponseBody::Challenge { nonce } = body else { panic!() };
    assert_eq!(nonce, hx(&v["nonce_hex"]));
    let mac_input = [nonce.clone(), digest.digest.clone()].concat();
    let mac_key = v.as_object().unwrap().keys().find(|k| k.starts_with("mac_input_hex")).unwrap();
    assert_eq!(mac_input, hx(&v[mac_key]));
    let secret = text(&v["secret_key_utf8"]);

    let pb = &v["answer_pbkdf2"];
    let a = SecretKeyAnswer::decode(&hx(&pb["signed_response_hex"])).unwrap();
    let SecretKeyAnswer::Pbkdf2HmacSha1 { salt, iterations, key_bits, mac } = &a else { panic!("{a:?}") };
    assert_eq!(*salt, hx(&pb["salt_hex"]));
    assert_eq!(*iterations as i64, int(&pb["iterations"]));
    assert_eq!(*key_bits as i64, int(&pb["key_length_bits"]));
    assert_eq!(*mac, hx(&pb["hmac_sha1_hex"]));
    assert_eq!(hmac::<Sha1>(&hx(&pb["derived_key_hex"]), &mac_input), *mac);
    assert_eq!(a.to_vec(), hx(&pb["signed_response_hex"]));
    assert_eq!(a.code(), Some(0x22));

    let lib = SecretKeyAnswer::decode(&hx(&v["answer_library_random_salt"]["signed_response_hex"])).unwrap();
    assert!(matches!(lib, SecretKeyAnswer::Pbkdf2HmacSha1 { iterations: 10_000, key_bits: 160, .. }));

    let alt = &v["answer_alternatives_server_must_accept"];
    let sha1 = SecretKeyAnswer::decode(&hx(&alt["sha1_code_0x02_hex"])).unwrap();
    let want = Sha1::new().chain_update(secret).chain_update(&mac_input).chain_update(secret).finalize().to_vec();
    assert_eq!(sha1, SecretKeyAnswer::Sha1(want));
    let hs = SecretKeyAnswer::decode(&hx(&alt["hmac_sha256_code_0x13_hex"])).unwrap();
    assert_eq!(hs, SecretKeyAnswer::HmacSha256(hmac::<Sha256>(secret, &mac_input)));
    assert_eq!(hs.to_vec(), hx(&alt["hmac_sha256_code_0x13_hex"]));

    // The answer goes back on the challenge id with the challenge's version.
    let (env3, m3) = unit(&v["step3_challenge_answer"]);
    assert_eq!(env3.session_id, env2.session_id);
    let ans = parse_message(&m3).unwrap();
    let RequestBody::ChallengeAnswer(ca) = RequestBody::decode(ans.header.op_code, ans.body).unwrap() else { panic!() };
    assert_eq!(SecretKeyAnswer::decode(&ca.answer).unwrap(), a);

    // Server-to-server verification carries the same digest, length-prefixed.
    let (_, m4) = unit(&v["step4_verify_request"]);
    let vr = parse_message(&m4).unwrap();
    let RequestBody::VerifyChallenge(ver) = RequestBody::decode(OpCode::VERIFY_CHALLENGE, vr.body).unwrap() else {
        panic!()
    };
    assert_eq!(ver.request_digest, digest.digest);
    assert_eq!(ver.answer, ca.answer);
    let (env5, m5) = unit(&v["step5_verify_response"]);
    let vres = parse_message(&m5).unwrap();
    let (d5, b5) = decode_response_body(&vres.header, env5.version, vres.body).unwrap();
    assert_eq!(d5.unwrap(), RequestDigest::compute(env5.version, vr.header_and_body));
    assert_eq!(b5, ResponseBody::VerifyResult { valid: true });
    assert!(vres.credential.unwrap().is_signature());
}

#[test]
fn public_key_answer() {
    let v = load("challenge_pubkey.json");
    let (_, m) = unit(&v["step3_challenge_answer"]);
    let view = parse_message(&m).unwrap();
    let RequestBody::ChallengeAnswer(ca) = RequestBody::decode(view.header.op_code, view.body).unwrap() else {
        panic!()
    };
    assert_eq!(ca.auth_type, b"HS_PUBKEY");
    let pk = PublicKeyAnswer::decode(&ca.answer).unwrap();
    assert_eq!(pk.hash_name, text(&v["hash_alg_id"]));
    assert_eq!(pk.digest_alg(), Some(DigestAlg::Sha256));
    assert_eq!(pk.signature, hx(&v["signature_hex"]));
}

#[test]
fn udp_multipacket_response() {
    let v = load("udp_multipacket_response.json");
    let msg = hx(&v["message_hex"]);
    assert_eq!(msg.len() as i64, int(&v["message_length"]));
    let grams: Vec<Vec<u8>> = v["datagrams"].as_array().unwrap().iter().map(|d| hx(&d["datagram_hex"])).collect();
    let env = Envelope::parse(&grams[0]).unwrap();
    assert_eq!(split_datagrams(&env, &msg, false), grams);
    for (i, (g, j)) in grams.iter().zip(v["datagrams"].as_array().unwrap()).enumerate() {
        assert_eq!(g.len() as i64, int(&j["datagram_length"]));
        let e = Envelope::parse(g).unwrap();
        assert_eq!(e.sequence as i64, int(&j["sequence_number"]));
        assert_eq!(e.sequence as usize, i);
        assert!(!e.truncated);
        if i + 1 < grams.len() {
            assert_eq!(g.len() - 20, UDP_PAYLOAD);
        }
    }
    // Reassemble out of order; the result is the resolution response message.
    let mut r = Reassembly::new(&Envelope::parse(&grams[2]).unwrap());
    for i in [2, 0] {
        assert_eq!(r.add_datagram(&Envelope::parse(&grams[i]).unwrap(), &grams[i][20..]).unwrap(), None);
    }
    let whole = r.add_datagram(&Envelope::parse(&grams[1]).unwrap(), &grams[1][20..]).unwrap().unwrap();
    assert_eq!(whole, msg);
    assert_eq!(unit(&load("resolution_response.json")).1, msg);
}

#[test]
fn flags_in_specific_vectors() {
    let (_, m) = unit(&load("create_handle_request_mint_overwrite.json"));
    let h = parse_message(&m).unwrap().header;
    assert!(h.op_flags.contains(OpFlags::MINT | OpFlags::OW));
    let l = load("list_handles.json");
    let p1 = parse_message(&unit(&l["response_part1"]).1).unwrap().header;
    let p2 = parse_message(&unit(&l["response_part2"]).1).unwrap().header;
    assert!(p1.op_flags.contains(OpFlags::CN) && !p2.op_flags.contains(OpFlags::CN));
    let (env, _) = unit(&load("get_site_info_request.json"));
    assert_eq!((env.version, env.suggested), (Version::V2_3, Version::V2_11));
}
