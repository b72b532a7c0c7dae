//! `key ‖ unit` (32 bytes of session key, then an envelope and its message) →
//! what a server does with a message in a session (§5.7): decrypt an
//! encrypted one, parse it, check its HS_MAC credential. Nothing may panic;
//! decrypting any bytes errs cleanly or yields plaintext; a MAC made with the
//! key verifies and fails once the message changes; encrypt → decrypt is the
//! identity; the key derivation takes any DH secret.

#![no_main]

use handled_proto::crypto::session::{decrypt, encrypt, mac_credential, session_key_from_dh, verify_mac, IV_LEN};
use handled_proto::envelope::{Envelope, ENVELOPE_LEN};
use handled_proto::message::parse_message;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = session_key_from_dh(data);
    if data.len() < 32 + ENVELOPE_LEN {
        return;
    }
    let (key, unit) = data.split_at(32);
    let envelope = Envelope::parse(unit).expect("20 bytes are an envelope");
    let message = &unit[ENVELOPE_LEN..];
    if let Ok(plain) = decrypt(key, message) {
        let _ = parse_message(&plain);
    }
    let iv: [u8; IV_LEN] = key[..IV_LEN].try_into().unwrap();
    let sealed = encrypt(key, &iv, message).expect("a 32-byte key encrypts");
    assert_eq!(decrypt(key, &sealed).as_deref(), Ok(message), "decrypt undoes encrypt");

    let Ok(view) = parse_message(message) else { return };
    if let Some(theirs) = &view.credential {
        let _ = verify_mac(key, &envelope, view.header_and_body, theirs);
    }
    if let Some(ours) = mac_credential(key, &envelope, view.header_and_body, 7) {
        assert!(verify_mac(key, &envelope, view.header_and_body, &ours), "our MAC verifies");
        let mut changed = view.header_and_body.to_vec();
        changed[0] ^= 1;
        assert!(!verify_mac(key, &envelope, &changed, &ours), "a changed message fails its MAC");
    }
});
