//! The shared cryptography (`handled_proto::crypto`) against the Java library's
//! vectors (`tests/vectors`): every secret-key answer form, the non-ASCII
//! PBKDF2 quirk, DH session key derivation, HS_MAC and the AES-CBC session
//! cipher.

use handled_proto::codec::{Codec, Reader};
use handled_proto::crypto::{dh, seckey, session};
use handled_proto::data::pubkey::{unsigned, PublicKey};
use handled_proto::envelope::{Envelope, ENVELOPE_LEN};
use handled_proto::message::parse_message;
use handled_proto::session::{KeyData, SecretKeyAnswer};
use serde_json::Value;

mod support;
use support::load;

fn unhex(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().expect("hex string")).unwrap()
}

fn challenge_inputs(v: &Value) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    (
        v["secret_key_utf8"].as_str().unwrap().as_bytes().to_vec(),
        unhex(&v["nonce_hex"]),
        unhex(&v["request_digest_sha256_hex"]),
    )
}

#[test]
fn pbkdf2_answer_is_byte_exact() {
    let v = load("challenge_seckey.json");
    let (secret, nonce, digest) = challenge_inputs(&v);
    let a = &v["answer_pbkdf2"];
    let salt = unhex(&a["salt_hex"]);
    let key = seckey::pbkdf2_key(&secret, &salt, 10_000, 20);
    assert_eq!(key, unhex(&a["derived_key_hex"]));
    let alg = seckey::AnswerAlg::Pbkdf2HmacSha1 { iterations: 10_000, key_bits: 160 };
    let answer = seckey::answer(alg, &secret, &nonce, &digest, &salt);
    assert_eq!(answer.to_vec(), unhex(&a["signed_response_hex"]));
    assert_eq!(seckey::verify(&answer, &secret, &nonce, &digest), Ok(true));
    assert_eq!(seckey::verify(&answer, b"passwore", &nonce, &digest), Ok(false));
}

#[test]
fn library_answer_and_legacy_forms_verify() {
    let v = load("challenge_seckey.json");
    let (secret, nonce, digest) = challenge_inputs(&v);
    let alts = &v["answer_alternatives_server_must_accept"];
    for bytes in [
        unhex(&v["answer_library_random_salt"]["signed_response_hex"]),
        unhex(&alts["sha1_code_0x02_hex"]),
        unhex(&alts["hmac_sha256_code_0x13_hex"]),
    ] {
        let answer = SecretKeyAnswer::decode(&bytes).unwrap();
        assert_eq!(seckey::verify(&answer, &secret, &nonce, &digest), Ok(true), "{answer:?}");
        assert_eq!(seckey::verify(&answer, b"other", &nonce, &digest), Ok(false));
    }
    // Our encoder produces the vector's legacy SHA-1 and HMAC-SHA256 bytes too.
    assert_eq!(
        seckey::answer(seckey::AnswerAlg::Sha1, &secret, &nonce, &digest, &[]).to_vec(),
        unhex(&alts["sha1_code_0x02_hex"])
    );
    assert_eq!(
        seckey::answer(seckey::AnswerAlg::HmacSha256, &secret, &nonce, &digest, &[]).to_vec(),
        unhex(&alts["hmac_sha256_code_0x13_hex"])
    );
}

#[test]
fn pbkdf2_non_ascii_secret_quirk() {
    let v = load("secret_key_misc.json");
    let secret = unhex(&v["non_ascii_secret_utf8_hex"]);
    let salt = unhex(&v["pbkdf2_salt_hex"]);
    let key = seckey::pbkdf2_key(&secret, &salt, 10_000, 20);
    assert_eq!(key, unhex(&v["pbkdf2_derived_key_hex(library doPBKDF2 on the UTF-8 bytes)"]));
}

fn message_of(unit_hex: &Value) -> (Envelope, Vec<u8>) {
    let unit = unhex(unit_hex);
    (Envelope::read(&mut Reader::new(&unit)).unwrap(), unit[ENVELOPE_LEN..].to_vec())
}

#[test]
fn dh_session_key_from_both_sides() {
    let v = load("session_dh.json");
    let p = unhex(&v["dh_p_hex"]);
    assert_eq!(p, dh::rfc2409_group2_p());
    let server_x: [u8; 32] = unhex(&v["server_private_x_hex"]).try_into().unwrap();
    let client_x: [u8; 32] = unhex(&v["client_private_x_hex"]).try_into().unwrap();

    let PublicKey::Dh { y: client_y, p: cp, g } =
        PublicKey::from_bytes(&unhex(&v["client_dh_public_encoding_hex"])).unwrap()
    else {
        panic!("client key is DH")
    };
    assert_eq!(unsigned(&cp), &p[..]);
    // Our server side: its public value and the shared secret.
    let server_y = dh::public_value(&p, &g, &server_x).unwrap();
    let expected_server = PublicKey::from_bytes(&unhex(&v["server_dh_public_encoding_hex"])).unwrap();
    assert_eq!(PublicKey::dh(&server_y, &p, &g), expected_server);
    let secret = dh::shared_secret(&p, &client_y, &server_x).unwrap();
    assert_eq!(secret, unhex(&v["raw_shared_secret_hex"]));
    let key = session::session_key_from_dh(&secret).unwrap();
    let want =
        unhex(&v["session_key_hex(32 bytes: leading zero bytes of the shared secret dropped, then first 32 bytes)"]);
    assert_eq!(key.to_vec(), want);
    // And the client side agrees.
    assert_eq!(dh::public_value(&p, &g, &client_x).unwrap(), unsigned(&client_y).to_vec());
    let PublicKey::Dh { y: sy, .. } = expected_server else { unreachable!() };
    assert_eq!(dh::shared_secret(&p, &sy, &client_x).unwrap(), secret);

    // The setup response's data is `u32 AES ‖ server DH key`.
    let (_, msg) = message_of(&v["session_setup_response"]["hex"]);
    let view = parse_message(&msg).unwrap();
    let (_, body) =
        handled_proto::response::decode_response_body(&view.header, handled_proto::envelope::Version::V2_11, view.body)
            .unwrap();
    let handled_proto::response::ResponseBody::SessionSetup(s) = body else { panic!("{body:?}") };
    let kd = KeyData::decode(&s.data).unwrap();
    assert_eq!(kd.cipher, 3);
    assert_eq!(
        PublicKey::from_bytes(&kd.key).unwrap(),
        PublicKey::from_bytes(&unhex(&v["server_dh_public_encoding_hex"])).unwrap()
    );
}

#[test]
fn hs_mac_of_request_in_session() {
    let v = load("session_dh.json");
    let key =
        unhex(&v["session_key_hex(32 bytes: leading zero bytes of the shared secret dropped, then first 32 bytes)"]);
    let (envelope, msg) = message_of(&v["request_in_session"]["hex"]);
    let view = parse_message(&msg).unwrap();
    let cred = view.credential.clone().unwrap();
    assert_eq!(
        handled_proto::credential::signed_input(&envelope, view.header_and_body, cred.session_counter),
        unhex(&v["mac_input_hex"])
    );
    assert_eq!(cred.signature, unhex(&v["mac_hex"]));
    assert!(session::verify_mac(&key, &envelope, view.header_and_body, &cred));
    let ours = session::mac_credential(&key, &envelope, view.header_and_body, 1).unwrap();
    assert_eq!(ours, cred);
    let mut tampered = view.header_and_body.to_vec();
    tampered[30] ^= 1;
    assert!(!session::verify_mac(&key, &envelope, &tampered, &cred));
    let mut wrong_key = key.clone();
    wrong_key[0] ^= 1;
    assert!(!session::verify_mac(&wrong_key, &envelope, view.header_and_body, &cred));
}

#[test]
fn aes_cbc_decrypts_the_encrypted_request() {
    let v = load("session_dh.json");
    let key =
        unhex(&v["session_key_hex(32 bytes: leading zero bytes of the shared secret dropped, then first 32 bytes)"]);
    let e = &v["encrypted_request_in_session"];
    let (envelope, msg) = message_of(&e["hex"]);
    assert!(envelope.encrypted);
    let plain = session::decrypt(&key, &msg).unwrap();
    assert_eq!(plain, unhex(&e["plaintext_hex"]));
    let iv: [u8; 16] = unhex(&e["iv_hex"]).try_into().unwrap();
    assert_eq!(session::encrypt(&key, &iv, &plain).unwrap(), msg, "our encryption is byte-identical");
    let mut bad = msg.clone();
    *bad.last_mut().unwrap() ^= 0x55;
    assert!(session::decrypt(&key, &bad).map(|p| p != plain).unwrap_or(true));
}
