//! Fuzzing's way in (`fuzz/fuzz_targets/web_request.rs`, feature `fuzzing`):
//! what the proxy reads of a request any peer sends (path, query, `Accept`,
//! `Accept-Language`, `User-Agent`) and of the 10320/loc XML any handle owner
//! writes, without a server.

use super::locations::{Locations, Selection, LOC_TYPE};
use super::request::ProxyRequest;
use crate::rest::params::Params;
use handled_proto::value::HandleValue;
use hyper::header::{HeaderMap, HeaderValue, ACCEPT, ACCEPT_LANGUAGE, USER_AGENT};

/// What came of one request against one handle's values.
pub struct Proxied {
    pub handle: String,
    /// The 10320/loc attribute filters the request asks for.
    pub filters: usize,
    /// Where it redirects, when a location was chosen.
    pub target: Option<String>,
    /// Candidates of `action=showurls`, and how many its XML reads back as.
    pub listed: usize,
    pub listed_again: usize,
}

/// A request for a handle whose values are `loc` (as 10320/loc) and one URL;
/// `random` in [0, 1) picks among weighted locations.
pub fn proxy_request(path: &str, query: Option<&str>, headers: [&str; 3], loc: &[u8], random: f64) -> Proxied {
    let mut map = HeaderMap::new();
    for (name, text) in [ACCEPT, ACCEPT_LANGUAGE, USER_AGENT].into_iter().zip(headers) {
        if let Ok(v) = HeaderValue::from_str(text) {
            map.insert(name, v);
        }
    }
    let req = ProxyRequest::new(path, query, Params::default(), &map, "192.0.2.1".parse().expect("an address"));
    let values = [HandleValue::new(1, LOC_TYPE, loc), HandleValue::new(2, "URL", "https://example.org/")];
    let chosen = Locations::from_values(&values).and_then(|l| {
        let ctx = Selection { locatt: &req.locatt, ip: req.client_ip, country: req.country.as_deref() };
        l.choose(&ctx, random).and_then(|c| c.target(&req.handle))
    });
    let listing = Locations::listing(&values);
    let again = Locations::from_values(&[HandleValue::new(1, LOC_TYPE, listing.to_xml())]);
    Proxied {
        filters: req.locatt.len(),
        handle: req.handle,
        target: chosen,
        listed: listing.list.len(),
        listed_again: again.map_or(0, |l| l.list.len()),
    }
}
