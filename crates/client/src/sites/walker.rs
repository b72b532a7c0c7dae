//! The decisions of a walk, without I/O: given the answers received so far,
//! which sites to ask next, or the walk's result. [`Sites`](super::Sites)
//! drives it (sending each [`Step::Ask`] to the first site that answers);
//! the fuzz target `referrals` drives it with bytes.
//!
//! What a recursive walk would keep on the call stack is an explicit stack of
//! frames here, whose height is bounded by the depth bound ([`MAX_FRAMES`]),
//! so a chain of referrals and service handles a peer makes up is never
//! followed by recursion; and a walk asks at most [`MAX_ASKS`] times, however
//! the answers branch.

use super::{addresses, show, ttl, LookupError, MAX_DEPTH, MAX_SITES, MAX_TTL, SERVICE_TYPES, SITE_TYPES};
use crate::{resolved_values, Response};
use handled_proto::data::site::SiteInfo;
use handled_proto::handle;
use handled_proto::header::ResponseCode;
use handled_proto::request::{RequestBody, ResolutionRequest};
use handled_proto::response::ResponseBody;
use handled_proto::value::{types, HandleValue};
use std::sync::Arc;
use std::time::Duration;

/// Lookups one walk asks for, at most (each a [`Step::Ask`]). The depth bound
/// alone would let answers branch into hundreds (every level may hold a
/// prefix lookup, referrals and a service handle); a walk of Handle.Net's
/// services asks two or three times.
pub const MAX_ASKS: usize = 32;
/// Frames a walk holds at once, at most: two per level of depth (a lookup
/// waiting for a referral's sites, and the referral's own lookup), and those
/// of the levels before the first and after the last.
pub const MAX_FRAMES: usize = 2 * (MAX_DEPTH + 2);

/// What a walk has found so far: the prefixes' sites kept for their TTL.
pub trait Known {
    fn lookup(&self, key: &[u8]) -> Option<Arc<Vec<SiteInfo>>>;
    fn remember(&self, key: Vec<u8>, sites: Arc<Vec<SiteInfo>>, ttl: Duration);
}

/// What the walk wants next, or how it ended.
#[derive(Debug)]
pub enum Step {
    /// Send `body` about `handle` to the first of `sites` that answers, and
    /// pass the answer to [`Walker::answer`] (a failure ends the walk).
    Ask {
        sites: Arc<Vec<SiteInfo>>,
        handle: Vec<u8>,
        body: RequestBody,
    },
    /// The sites responsible for the handle ([`Walker::for_handle`]).
    Sites(Arc<Vec<SiteInfo>>),
    /// The answer that is not a referral ([`Walker::following`]).
    Answer(Box<Response>),
    Failed(LookupError),
}

/// One pending lookup of the walk.
#[derive(Debug)]
enum Frame {
    /// A prefix or service handle whose values are wanted: waiting for the
    /// sites that hold the handle itself.
    Home { handle: Vec<u8>, key: Vec<u8>, depth: usize },
    /// `body` about `handle` asked, referrals followed: waiting for an answer,
    /// or for the sites a referral named.
    Follow { handle: Vec<u8>, body: RequestBody, depth: usize, then: Then },
    /// A handle's sites found: kept under `key` before being passed on.
    Remember { key: Vec<u8>, ttl: Duration },
}

/// What a final answer is for.
#[derive(Debug)]
enum Then {
    /// The walk's result.
    Return,
    /// The values of the prefix or service handle `key`: its sites.
    Sites { key: Vec<u8> },
}

/// A walk of the global system, step by step.
pub struct Walker {
    root: Arc<Vec<SiteInfo>>,
    stack: Vec<Frame>,
    asks: usize,
    start: Option<Start>,
}

enum Start {
    Handle(Vec<u8>),
    Follow(Arc<Vec<SiteInfo>>),
}

impl Walker {
    /// A walk to the sites responsible for `h`.
    pub fn for_handle(root: Arc<Vec<SiteInfo>>, h: &[u8]) -> Self {
        Walker { root, stack: Vec::new(), asks: 0, start: Some(Start::Handle(h.to_vec())) }
    }

    /// A walk sending `body` about `h` to `sites`, following referrals
    /// (`depth`: service handles and referrals already followed).
    pub fn following(
        root: Arc<Vec<SiteInfo>>,
        sites: Arc<Vec<SiteInfo>>,
        h: &[u8],
        body: RequestBody,
        depth: usize,
    ) -> Self {
        let frame = Frame::Follow { handle: h.to_vec(), body, depth, then: Then::Return };
        Walker { root, stack: vec![frame], asks: 0, start: Some(Start::Follow(sites)) }
    }

    /// Lookups asked for so far.
    pub fn asks(&self) -> usize {
        self.asks
    }

    /// Frames held now.
    pub fn frames(&self) -> usize {
        self.stack.len()
    }

    /// The first step.
    pub fn start(&mut self, known: &dyn Known) -> Step {
        match self.start.take() {
            Some(Start::Handle(h)) => {
                let canonical = handle::canonical(&h);
                if handle::is_global(&canonical.to_ascii_uppercase()) {
                    return Step::Sites(self.root.clone());
                }
                let found = self.named_by(&handle::prefix_handle(&canonical), 0, known);
                self.deliver(found, known)
            }
            Some(Start::Follow(sites)) => self.deliver(Ok(sites), known),
            None => Step::Failed(LookupError::Unreachable("the walk was started already".into())),
        }
    }

    /// The answer to the last [`Step::Ask`].
    pub fn answer(&mut self, response: Response, known: &dyn Known) -> Step {
        let Some(Frame::Follow { handle: h, depth, .. }) = self.stack.last_mut() else {
            return Step::Failed(LookupError::Unreachable("an answer nothing was asked for".into()));
        };
        if let ResponseBody::Referral { handle: referral, values } = &response.body {
            *depth += 1;
            let depth = *depth;
            if depth > MAX_DEPTH {
                return Step::Failed(LookupError::Unreachable(format!("{}: more than {MAX_DEPTH} referrals", show(h))));
            }
            let next = if values.is_empty() && !referral.is_empty() {
                self.named_by(referral, depth, known)
            } else {
                self.sites_in(values, depth, known)
            };
            return self.deliver(next, known);
        }
        let Some(Frame::Follow { handle: h, depth, then, .. }) = self.stack.pop() else { unreachable!() };
        let key = match then {
            Then::Return => return Step::Answer(Box::new(response)),
            Then::Sites { key } => key,
        };
        let values = match (response.code(), resolved_values(&response)) {
            (ResponseCode::SUCCESS, Some(values)) => values,
            // As the Java resolver: a prefix the root does not know (or that
            // names no site) is "no service" (an error), not a refusal by the
            // handle's server.
            (ResponseCode::HANDLE_NOT_FOUND | ResponseCode::VALUES_NOT_FOUND, _) => {
                return Step::Failed(LookupError::NoSuchPrefix(format!(
                    "Unable to find service for prefix {}",
                    show(&h)
                )))
            }
            (code, _) => {
                return Step::Failed(LookupError::Unreachable(format!(
                    "Unable to find service for prefix {}: {} {}",
                    show(&h),
                    code.name(),
                    response.message().unwrap_or_default()
                )))
            }
        };
        self.stack.push(Frame::Remember { key, ttl: ttl(values, MAX_TTL) });
        let found = self.sites_in(values, depth, known);
        self.deliver(found, known)
    }

    /// Pass the sites found (or the failure) to the frame waiting for them,
    /// until one asks or none is left.
    fn deliver(&mut self, found: Result<Arc<Vec<SiteInfo>>, LookupError>, known: &dyn Known) -> Step {
        let sites = match found {
            Ok(sites) => sites,
            Err(e) => return Step::Failed(e),
        };
        debug_assert!(self.stack.len() <= MAX_FRAMES, "{} frames", self.stack.len());
        loop {
            match self.stack.pop() {
                None => return Step::Sites(sites),
                Some(Frame::Remember { key, ttl }) => known.remember(key, sites.clone(), ttl),
                Some(Frame::Home { handle: h, key, depth }) => {
                    let body = resolution(&h, &[], &[types::HS_SITE, b"HS_SITE.6", types::HS_SERV]);
                    self.stack.push(Frame::Follow { handle: h, body, depth, then: Then::Sites { key } });
                    return self.ask(sites);
                }
                Some(follow @ Frame::Follow { .. }) => {
                    self.stack.push(follow);
                    return self.ask(sites);
                }
            }
        }
    }

    /// Ask the top frame's question at `sites`, within [`MAX_ASKS`].
    fn ask(&mut self, sites: Arc<Vec<SiteInfo>>) -> Step {
        let Some(Frame::Follow { handle: h, body, .. }) = self.stack.last() else { unreachable!() };
        self.asks += 1;
        if self.asks > MAX_ASKS {
            return Step::Failed(LookupError::Unreachable(format!("{}: more than {MAX_ASKS} lookups", show(h))));
        }
        Step::Ask { sites, handle: h.clone(), body: body.clone() }
    }

    /// The sites `h`'s HS_SITE (or HS_SERV) values name (`h` is a prefix or
    /// service handle) when known without asking; else the frames that find
    /// them are pushed and the sites to ask first returned. The chain of
    /// handles' homes is walked in a loop, each a level deeper.
    fn named_by(&mut self, h: &[u8], mut depth: usize, known: &dyn Known) -> Result<Arc<Vec<SiteInfo>>, LookupError> {
        let mut h = h.to_vec();
        loop {
            let key = handle::canonical(&h).to_ascii_uppercase();
            if key == handle::ROOT_HANDLE {
                return Ok(self.root.clone());
            }
            if depth > MAX_DEPTH {
                return Err(LookupError::Unreachable(format!(
                    "{}: more than {MAX_DEPTH} services to follow",
                    show(&h)
                )));
            }
            if let Some(sites) = known.lookup(&key) {
                return Ok(sites);
            }
            // Its home: the root for global handles, else what its prefix handle names.
            let canonical = handle::canonical(&h).into_owned();
            self.stack.push(Frame::Home { handle: h, key, depth });
            depth += 1;
            if handle::is_global(&canonical.to_ascii_uppercase()) {
                return Ok(self.root.clone());
            }
            h = handle::prefix_handle(&canonical);
        }
    }

    /// The sites `values` name: their site records, else those of the first
    /// service handle (`0.NA/0.NA`: the root).
    fn sites_in(
        &mut self,
        values: &[HandleValue],
        depth: usize,
        known: &dyn Known,
    ) -> Result<Arc<Vec<SiteInfo>>, LookupError> {
        let sites: Vec<SiteInfo> = values
            .iter()
            .filter(|v| SITE_TYPES.iter().any(|t| v.value_type.eq_ignore_ascii_case(t)))
            .filter_map(|v| SiteInfo::decode_data(&v.data).ok())
            .filter(|s| !s.servers.is_empty())
            .take(MAX_SITES)
            .collect();
        if !sites.is_empty() {
            // An alternate address is another site to try, as for the Java client.
            return Ok(Arc::new(addresses::with_alt_sites(sites, 2 * MAX_SITES)));
        }
        let service = values.iter().find(|v| SERVICE_TYPES.iter().any(|t| v.value_type.eq_ignore_ascii_case(t)));
        match service {
            Some(service) => self.named_by(&service.data, depth + 1, known),
            None => Err(LookupError::Unreachable("no site records or service handles".into())),
        }
    }
}

/// A resolution request for `h`'s values at `indexes` or of `value_types`
/// (both empty: all of them).
pub fn resolution(h: &[u8], indexes: &[i32], value_types: &[&[u8]]) -> RequestBody {
    RequestBody::Resolution(ResolutionRequest {
        handle: h.to_vec(),
        indexes: indexes.to_vec(),
        types: value_types.iter().map(|t| t.to_vec()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::site;
    use super::*;
    use handled_proto::codec::Codec;
    use handled_proto::envelope::{Envelope, Version};
    use handled_proto::header::{Header, OpCode, OpFlags};
    use std::cell::RefCell;
    use std::collections::HashMap;

    #[derive(Default)]
    struct Memory(RefCell<HashMap<Vec<u8>, Arc<Vec<SiteInfo>>>>);

    impl Known for Memory {
        fn lookup(&self, key: &[u8]) -> Option<Arc<Vec<SiteInfo>>> {
            self.0.borrow().get(key).cloned()
        }
        fn remember(&self, key: Vec<u8>, sites: Arc<Vec<SiteInfo>>, _: Duration) {
            self.0.borrow_mut().insert(key, sites);
        }
    }

    fn answer(code: ResponseCode, body: ResponseBody) -> Response {
        let request = Header::request(OpCode::RESOLUTION, OpFlags::NONE);
        Response {
            envelope: Envelope::new(Version::V2_1, Version::V2_1, 1),
            header: Header::response_to(&request, code),
            body,
            digest: None,
            credential: None,
            header_and_body: Vec::new(),
        }
    }

    fn values(t: &str, data: Vec<u8>) -> Vec<HandleValue> {
        let mut v = HandleValue::new(1, t, "");
        v.data = data;
        v.ttl = 3600;
        vec![v]
    }

    fn resolved(t: &str, data: Vec<u8>) -> Response {
        answer(ResponseCode::SUCCESS, ResponseBody::Resolution { handle: vec![], values: values(t, data) })
    }

    fn asked(step: &Step) -> (u16, Vec<u8>) {
        let Step::Ask { sites, handle, .. } = step else { panic!("not an ask: {step:?}") };
        (sites[0].servers[0].interfaces[0].port as u16, handle.clone())
    }

    #[test]
    fn a_prefix_is_asked_at_the_root_and_remembered() {
        let root = Arc::new(vec![site(1, vec![])]);
        let known = Memory::default();
        let mut w = Walker::for_handle(root.clone(), b"20.5000/x");
        let step = w.start(&known);
        assert_eq!(asked(&step), (1, b"0.NA/20.5000".to_vec()));
        let Step::Sites(sites) = w.answer(resolved("HS_SITE", site(2, vec![]).to_bytes()), &known) else { panic!() };
        assert_eq!(sites[0].servers[0].interfaces[0].port, 2);
        let mut again = Walker::for_handle(root, b"20.5000/y");
        assert!(matches!(again.start(&known), Step::Sites(_)), "known: no second lookup");
        assert_eq!(again.asks(), 0);
    }

    #[test]
    fn a_service_handle_is_found_through_its_own_prefix() {
        let root = Arc::new(vec![site(1, vec![])]);
        let known = Memory::default();
        let mut w = Walker::for_handle(root, b"20.5000/x");
        let step = w.start(&known);
        assert_eq!(asked(&step), (1, b"0.NA/20.5000".to_vec()));
        // 0.NA/20.5000 names the service handle 11.22/svc, whose prefix the root knows.
        let step = w.answer(resolved("HS_SERV", b"11.22/svc".to_vec()), &known);
        assert_eq!(asked(&step), (1, b"0.NA/11.22".to_vec()));
        let step = w.answer(resolved("HS_SITE", site(3, vec![]).to_bytes()), &known);
        assert_eq!(asked(&step), (3, b"11.22/svc".to_vec()));
        let Step::Sites(sites) = w.answer(resolved("HS_SITE", site(4, vec![]).to_bytes()), &known) else { panic!() };
        assert_eq!(sites[0].servers[0].interfaces[0].port, 4);
        assert_eq!(known.0.borrow().len(), 3, "the prefixes and the service handle");
    }

    #[test]
    fn referrals_end_at_the_depth_bound() {
        let root = Arc::new(vec![site(1, vec![])]);
        let known = Memory::default();
        let body = resolution(b"20.5000/x", &[], &[]);
        let mut w = Walker::following(root.clone(), root, b"20.5000/x", body, 0);
        let mut step = w.start(&known);
        let referral = || {
            let values = values("HS_SITE", site(5, vec![]).to_bytes());
            answer(ResponseCode::SERVICE_REFERRAL, ResponseBody::Referral { handle: vec![], values })
        };
        for _ in 0..MAX_DEPTH {
            assert_eq!(asked(&step).1, b"20.5000/x");
            step = w.answer(referral(), &known);
            assert!(w.frames() <= MAX_FRAMES);
        }
        let Step::Failed(e) = w.answer(referral(), &known) else { panic!("a sixth referral followed") };
        assert!(e.to_string().contains("more than 5 referrals"), "{e}");
        assert_eq!(w.asks(), MAX_DEPTH + 1);

        // A referral by handle only: that handle's sites are found first.
        let root = Arc::new(vec![site(1, vec![])]);
        let body = resolution(b"20.5000/x", &[], &[]);
        let mut w = Walker::following(root.clone(), root, b"20.5000/x", body, 0);
        w.start(&known);
        let step = w.answer(
            answer(
                ResponseCode::SERVICE_REFERRAL,
                ResponseBody::Referral { handle: b"0.NA/20.9".to_vec(), values: vec![] },
            ),
            &known,
        );
        assert_eq!(asked(&step), (1, b"0.NA/20.9".to_vec()));
        let step = w.answer(resolved("HS_SITE", site(6, vec![]).to_bytes()), &known);
        assert_eq!(asked(&step), (6, b"20.5000/x".to_vec()));
        let Step::Answer(done) = w.answer(resolved("URL", b"x".to_vec()), &known) else { panic!() };
        assert_eq!(done.code(), ResponseCode::SUCCESS);
    }
}
