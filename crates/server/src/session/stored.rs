//! The shared form of a session, for nodes on one store ([`crate::cluster`]):
//! everything but the per-node replay window and response counter.

use super::Session;
use crate::auth::Identity;
use handled_proto::codec::{put_bytes, put_i32, put_u64, put_u8, Reader};
use handled_proto::envelope::Version;
use std::time::Duration;

pub fn encode(s: &Session) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    put_i32(&mut out, s.id);
    put_bytes(&mut out, &s.key);
    put_u8(&mut out, s.version.major);
    put_u8(&mut out, s.version.minor);
    match &s.claimed {
        Some((h, i)) => {
            put_u8(&mut out, 1);
            put_bytes(&mut out, h);
            put_i32(&mut out, *i);
        }
        None => put_u8(&mut out, 0),
    }
    put_u64(&mut out, s.timeout.as_millis() as u64);
    put_u8(&mut out, s.encrypt_all as u8);
    match s.identity() {
        Some(id) => {
            put_u8(&mut out, 1);
            put_bytes(&mut out, &id.handle);
            put_i32(&mut out, id.index);
            put_i32(&mut out, id.key_index.unwrap_or(-1));
        }
        None => put_u8(&mut out, 0),
    }
    out
}

pub fn decode(b: &[u8]) -> Option<Session> {
    let mut r = Reader::new(b);
    let id = r.i32("id").ok()?;
    let key: [u8; 32] = r.bytes("key").ok()?.try_into().ok()?;
    let version = Version::new(r.u8("major").ok()?, r.u8("minor").ok()?);
    let claimed = match r.u8("claimed").ok()? {
        1 => Some((r.bytes("handle").ok()?.to_vec(), r.i32("index").ok()?)),
        _ => None,
    };
    let timeout = Duration::from_millis(r.u64("timeout").ok()?);
    let encrypt_all = r.u8("encrypt").ok()? == 1;
    let session = Session::new(id, key, version, claimed, timeout, encrypt_all);
    if r.u8("authenticated").ok()? == 1 {
        let mut identity = Identity::new(r.bytes("identity").ok()?.to_vec(), r.i32("index").ok()?);
        identity.key_index = Some(r.i32("key index").ok()?).filter(|k| *k >= 0);
        session.authenticate(&identity);
    }
    Some(session)
}
