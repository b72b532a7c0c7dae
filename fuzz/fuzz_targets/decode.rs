//! Bytes → envelope → message → request/response bodies and credentials.
//! Nothing may panic, and whatever decodes must survive encode → decode unchanged.

#![no_main]

use handled_proto::codec::Codec;
use handled_proto::credential::Credential;
use handled_proto::envelope::{Envelope, ENVELOPE_LEN};
use handled_proto::message::{encode_message, parse_message, split_unit};
use handled_proto::request::RequestBody;
use handled_proto::response::{decode_response_body, encode_response_body_for_version, ResponseBody};
use handled_proto::session::{KeyData, PublicKeyAnswer, SecretKeyAnswer};
use handled_proto::udp::Reassembly;
use handled_proto::unit::{Framing, Unit};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = split_unit(data);
    if data.len() < ENVELOPE_LEN {
        assert!(Envelope::parse(data).is_err());
        return;
    }
    // An envelope of 20+ bytes always decodes, so a server can echo the request id.
    let env = Envelope::parse(data).expect("20 bytes are an envelope");
    let _ = env.check_message_length();
    let msg = &data[ENVELOPE_LEN..];
    let _ = Reassembly::new(&env).add_datagram(&env, msg);

    // The unit as a transport reads it once agrees with parse_message.
    let unit = Unit::parse(data).expect("20 bytes are a unit");
    let _ = (unit.leading_header_and_body(), unit.handle());
    if !env.encrypted && env.check_message_length().ok() == Some(msg.len()) {
        match (unit.message(), parse_message(msg)) {
            (Some(m), Ok(v)) => assert_eq!(
                (m.header, m.header_and_body, m.body, m.credential),
                (v.header, v.header_and_body, v.body, v.credential.as_ref())
            ),
            (None, Err(e)) => assert_eq!(unit.framing(), &Framing::Invalid(e)),
            _ => panic!("the unit and parse_message disagree"),
        }
    }

    let Ok(view) = parse_message(msg) else { return };
    let mut again = Vec::new();
    encode_message(&view.header, view.body, view.credential.as_ref(), &mut again);
    // The header's reserved byte is ignored on receipt and written as 0.
    let mut expect = msg.to_vec();
    expect[15] = 0;
    if msg.len() == view.header_and_body.len() {
        // The optional credential length word was absent; we always write it.
        expect.extend_from_slice(&[0, 0, 0, 0]);
    }
    assert_eq!(again, expect);
    if let Some(c) = &view.credential {
        assert_eq!(Credential::from_bytes(&c.to_bytes()).as_ref(), Ok(c));
    }

    let h = &view.header;
    if let Ok(req) = RequestBody::decode(h.op_code, view.body) {
        assert_eq!(RequestBody::decode(h.op_code, &req.to_vec()).as_ref(), Ok(&req));
        if let RequestBody::ChallengeAnswer(a) = &req {
            if let Ok(s) = SecretKeyAnswer::decode(&a.answer) {
                assert_eq!(SecretKeyAnswer::decode(&s.to_vec()).as_ref(), Ok(&s));
            }
            if let Ok(p) = PublicKeyAnswer::decode(&a.answer) {
                assert_eq!(PublicKeyAnswer::decode(&p.to_vec()).as_ref(), Ok(&p));
            }
        }
    }
    if let Ok((digest, body)) = decode_response_body(h, env.version, view.body) {
        let mut out = Vec::new();
        encode_response_body_for_version(env.version, digest.as_ref(), &body, &mut out);
        let back = decode_response_body(h, env.version, &out);
        assert_eq!(back.as_ref(), Ok(&(digest, body.clone())));
        if let ResponseBody::SessionSetup(s) = &body {
            if let Ok(k) = KeyData::decode(&s.data) {
                assert_eq!(k.to_vec(), s.data);
            }
        }
    }
});
