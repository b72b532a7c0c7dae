//! What the HTTP port reads of a request any peer sends, before a store is
//! asked: the handle proxy's path, query and `Accept`/`Accept-Language`/
//! `User-Agent` headers, the 10320/loc XML a handle owner writes (chosen
//! among and listed by `action=showurls`), and the JSON API's `Authorization:
//! Handle` fields, query parameters and PUT body. Nothing may panic; the
//! proxy keeps at most 32 attribute filters and 1,000 candidates, and the
//! `showurls` listing is XML that reads back as the same number of candidates.
//!
//! Input: `path \0 query \0 accept \0 language \0 agent \0 loc \0 authorization \0 body`.

#![no_main]

use handled_server::proxy::fuzz::proxy_request;
use handled_server::rest::fuzz::read_request;
use libfuzzer_sys::fuzz_target;

const MAX_FILTERS: usize = 32;
const MAX_LOCATIONS: usize = 1000;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(8, |b| *b == 0);
    let mut next = || String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let (path, query, accept, language, agent) = (next(), next(), next(), next(), next());
    let (loc, authorization, body) = (next(), next(), next());
    let random = f64::from(data.iter().fold(0u8, |a, b| a.wrapping_add(*b))) / 256.0;

    let query = (!query.is_empty()).then_some(query.as_str());
    let p = proxy_request(&path, query, [&accept, &language, &agent], loc.as_bytes(), random);
    assert!(p.filters <= MAX_FILTERS, "{} attribute filters kept", p.filters);
    assert!(p.listed <= MAX_LOCATIONS, "{} candidates listed", p.listed);
    assert_eq!(p.listed_again, p.listed, "the showurls XML reads back as its candidates");

    let r = read_request(&authorization, query.unwrap_or_default(), body.as_bytes(), p.handle.as_bytes());
    let _ = (r.values, r.identity, r.identity_encoded, r.fields, r.indexes, r.paging, p.target);
});
