//! Bytes → the answers a walk of the global system receives (prefix handle
//! values with HS_SITE, HS_SERV service handles, referrals with or without
//! their site values, errors), fed to the walk's decisions
//! (`handled_client::sites::Walker`, sans I/O) as the answers to what it asks.
//! The first byte picks the walk (the sites of a handle, or a request
//! following referrals) and, after it, the handle up to a newline; then each
//! answer is a 2-byte length and a response unit (envelope and message).
//! Nothing may panic; a walk asks at most `MAX_ASKS` times, holds at most
//! `MAX_FRAMES` frames, asks at most 32 sites at once (16 site records and
//! their alternate addresses), and what it ends with names sites.

#![no_main]

use handled_client::decode_response;
use handled_client::sites::testing::site;
use handled_client::sites::{resolution, Known, Step, Walker, MAX_ASKS, MAX_FRAMES};
use handled_proto::data::site::SiteInfo;
use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The site cache a walk reads and fills, without time: a zero TTL is not kept.
#[derive(Default)]
struct Memory(RefCell<HashMap<Vec<u8>, Arc<Vec<SiteInfo>>>>);

impl Known for Memory {
    fn lookup(&self, key: &[u8]) -> Option<Arc<Vec<SiteInfo>>> {
        self.0.borrow().get(key).cloned()
    }

    fn remember(&self, key: Vec<u8>, sites: Arc<Vec<SiteInfo>>, ttl: Duration) {
        if !ttl.is_zero() {
            self.0.borrow_mut().insert(key, sites);
        }
    }
}

/// The next answer: a 2-byte length, then a unit.
fn next_unit<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let (head, tail) = rest.split_at_checked(2)?;
    let len = usize::from(u16::from_be_bytes([head[0], head[1]])).min(tail.len());
    let (unit, after) = tail.split_at(len);
    *rest = after;
    Some(unit)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
    let (h, mut rest) = (&rest[..end.min(256)], rest.get(end + 1..).unwrap_or_default());
    let root = Arc::new(vec![site(2641, vec![])]);
    let known = Memory::default();
    let mut walker = if mode & 1 == 0 {
        Walker::for_handle(root.clone(), h)
    } else {
        let body = resolution(h, &[], &[]);
        Walker::following(root.clone(), root.clone(), h, body, usize::from(mode >> 1) % 4)
    };
    let mut step = walker.start(&known);
    let mut asked = 0;
    loop {
        assert!(walker.frames() <= MAX_FRAMES, "{} frames", walker.frames());
        match step {
            Step::Ask { sites, .. } => {
                asked += 1;
                assert!(asked <= MAX_ASKS && walker.asks() == asked, "{asked} lookups asked for");
                assert!(!sites.is_empty() && sites.len() <= 32, "{} sites to ask", sites.len());
                assert!(sites.iter().all(|s| !s.servers.is_empty()), "a site without servers is asked");
                let Some(unit) = next_unit(&mut rest) else { return };
                let id = unit.get(8..12).map_or(0, |b| i32::from_be_bytes(b.try_into().unwrap()));
                // An answer that does not decode is no answer: the walk fails.
                let Ok(response) = decode_response(unit, id) else { return };
                step = walker.answer(response, &known);
            }
            Step::Sites(sites) => {
                assert!(mode & 1 == 0, "a request following referrals ends with an answer");
                assert!(!sites.is_empty() && sites.iter().all(|s| !s.servers.is_empty()), "the sites found are usable");
                return;
            }
            Step::Answer(_) => {
                assert!(mode & 1 == 1, "a walk to a handle's sites ends with sites");
                return;
            }
            Step::Failed(_) => return,
        }
    }
});
