//! Reverse lookup, the EUDAT servlet's interface (pyhandle's `search_handle`):
//! `/hrls/handles[/{prefix}]?TYPE=pattern&...` with `limit`, `page`,
//! `retrieverecords`. Every `TYPE=pattern` must match a publicly readable
//! value of the handle (`*` = any run of characters, case-insensitive).
//! Answered from the index [`super::revindex`] keeps on every write: the
//! term with the longest literal start drives an exact or prefix lookup;
//! each hit is checked against the current record (the index may hold
//! entries of values just removed). A pattern starting with `*` reads that
//! type's whole index (never the handles table), bounded by [`MAX_EXAMINED`].

use super::revindex::{self, COLLECTION};
use super::{Reply, Req, Rest};
use handled_proto::handle;
use handled_proto::json::value_to_json;
use handled_store::{HandleRecord, IndexHit, IndexMatch};
use hyper::{Method, StatusCode};
use serde_json::{Map, Value};
use std::collections::HashSet;

/// Parameters that steer the search rather than name a value type.
const CONTROL: &[&str] = &["limit", "page", "retrieverecords", "pretty", "callback"];
const DEFAULT_LIMIT: usize = 1000;
const MAX_LIMIT: usize = 10_000;
/// Index entries read per lookup call, and at most per search.
const BATCH: usize = 1000;
const MAX_EXAMINED: usize = 1_000_000;

/// `*` matches any run of bytes; both sides already lower case.
pub(super) fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

fn literal_start(pattern: &[u8]) -> &[u8] {
    &pattern[..pattern.iter().position(|&c| c == b'*').unwrap_or(pattern.len())]
}

/// Does the record still have, for every term, a searchable value matching it?
fn matches(record: &HandleRecord, terms: &[(String, Vec<u8>)]) -> bool {
    terms.iter().all(|(t, pat)| {
        record.values.iter().any(|v| {
            revindex::indexed(v) && revindex::type_name(&v.value_type) == *t && glob(pat, &v.data.to_ascii_lowercase())
        })
    })
}

pub(super) async fn search(rest: &Rest, req: &Req, prefix: &str) -> Reply {
    if !matches!(req.method, Method::GET | Method::HEAD) {
        return Reply::method_not_allowed(req, "GET, HEAD, OPTIONS");
    }
    let terms: Vec<(String, Vec<u8>)> = req
        .params
        .0
        .iter()
        .filter(|(k, _)| !CONTROL.iter().any(|c| c.eq_ignore_ascii_case(k)))
        .map(|(k, v)| (k.to_ascii_uppercase(), v.as_bytes().to_ascii_lowercase()))
        .collect();
    if terms.is_empty() {
        return Reply::bad_request("No search terms given: use TYPE=pattern, e.g. URL=*example.org*");
    }
    let (limit, page) = match (req.params.int("limit"), req.params.int("page")) {
        (Ok(l), Ok(p)) => (l.unwrap_or(DEFAULT_LIMIT as i64), p.unwrap_or(0)),
        (Err(m), _) | (_, Err(m)) => return Reply::bad_request(m),
    };
    if limit < 0 || page < 0 {
        return Reply::bad_request("limit and page must not be negative");
    }
    let limit = (limit as usize).min(MAX_LIMIT);
    let skip = (page as usize).saturating_mul(limit);
    let with_records = req.params.flag("retrieverecords");
    // Ids are storage keys: compare the prefix in stored form too.
    let id_prefix = (!prefix.is_empty()).then(|| {
        let p = super::params::percent_decode(prefix, false);
        [handle::normalize(&p, false), b"/".to_vec()].concat()
    });

    let (driver_type, driver) =
        terms.iter().max_by_key(|(_, p)| literal_start(p).len()).cloned().expect("terms not empty");
    let start = literal_start(&driver).to_vec();
    let exact = start.len() == driver.len();
    let key = if exact { IndexMatch::Exact(&start) } else { IndexMatch::Prefix(&start) };

    let store = &rest.state.store;
    let mut seen = HashSet::new();
    let mut found: Vec<(Vec<u8>, HandleRecord)> = Vec::new();
    let mut matched = 0usize;
    let mut after: Option<IndexHit> = None;
    let mut examined = 0usize;
    'outer: while examined < MAX_EXAMINED {
        let hits = match store.doc_lookup(COLLECTION, &driver_type, key, after.as_ref(), BATCH).await {
            Ok(h) => h,
            Err(e) => {
                return Reply::error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    handled_proto::header::ResponseCode::ERROR,
                    format!("Index lookup failed: {e}"),
                )
            }
        };
        let done = hits.len() < BATCH;
        examined += hits.len();
        for hit in &hits {
            if !glob(&driver, &hit.key)
                || id_prefix.as_ref().is_some_and(|p| !hit.id.starts_with(p))
                || seen.contains(&hit.id)
            {
                continue;
            }
            let record = match store.get(&hit.id).await {
                Ok(Some(r)) if matches(&r, &terms) => r,
                Ok(_) => continue,
                Err(e) => {
                    return Reply::error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        handled_proto::header::ResponseCode::ERROR,
                        format!("Read failed: {e}"),
                    )
                }
            };
            seen.insert(hit.id.clone());
            matched += 1;
            if matched > skip {
                found.push((hit.id.clone(), record));
                if found.len() >= limit {
                    break 'outer;
                }
            }
        }
        after = hits.last().cloned();
        if done {
            break;
        }
    }
    let name = |id: &[u8]| String::from_utf8_lossy(id).into_owned();
    let body = if with_records {
        let mut o = Map::new();
        for (id, r) in &found {
            let values = r.values.iter().filter(|v| v.permissions.public_read()).map(value_to_json).collect();
            o.insert(name(id), Value::Array(values));
        }
        Value::Object(o)
    } else {
        Value::Array(found.iter().map(|(id, _)| name(id).into()).collect())
    };
    Reply::json(StatusCode::OK, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globbing() {
        assert!(glob(b"*", b""));
        assert!(glob(b"abc", b"abc") && !glob(b"abc", b"abcd"));
        assert!(glob(b"*example*", b"https://example.org"));
        assert!(glob(b"https://*.org/*/x", b"https://a.b.org/c/d/x"));
        assert!(!glob(b"https://*.org", b"https://a.b.com"));
        assert!(glob(b"a*b*c", b"aXbYbZc") && !glob(b"a*b*c", b"aXcYb"));
        assert_eq!(literal_start(b"http*x"), b"http");
    }
}
