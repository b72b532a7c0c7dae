//! Reverse lookup, the EUDAT servlet's interface (pyhandle's `search_handle`):
//! `/hrls/handles[/{prefix}]?TYPE=pattern&...` with `limit`, `page`,
//! `retrieverecords`. Every `TYPE=pattern` must match a publicly readable
//! value of the handle (`*` = any run of characters, case-insensitive).
//! Answered from the index [`crate::reverse_index`] keeps on every write: the
//! term with the longest literal start drives an exact or prefix lookup;
//! each hit is checked against the current record (the index may hold
//! entries of values just removed). A pattern starting with `*` reads that
//! type's whole index (never the handles table). A store without documents
//! (SQL) searches its own rows instead (`RecordStore::find_by_value`, the
//! term's literal start as asked: the database compares bytes).
//!
//! What a search may cost is bounded ([`SearchLimits`], F8 of the security
//! trial: `URL=*&page=100` over 200k handles cost 0.7 s of CPU per anonymous
//! request and 8 clients slowed everyone down 200-fold): how deep it may page,
//! how many index entries it may read, how long it may run, and how many
//! searches past their first batch of entries (on SQL, every pattern search)
//! may run at once.

use super::{Reply, Req, Rest};
use crate::auth::Caller;
use crate::config::ReverseLookupConfig;
use crate::reverse_index::{self as revindex, COLLECTION};
use handled_proto::handle;
use handled_proto::header::ResponseCode;
use handled_proto::json::value_to_json;
use handled_store::{HandleRecord, IndexHit, IndexMatch, StoreError};
use hyper::header::HeaderValue;
use hyper::{Method, StatusCode};
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Parameters that steer the search rather than name a value type.
const CONTROL: &[&str] = &["limit", "page", "retrieverecords", "pretty", "callback"];
const DEFAULT_LIMIT: usize = 1000;
const MAX_LIMIT: usize = 10_000;
/// Index entries read per lookup call; a search that needs more is a scan.
const BATCH: usize = 1000;

/// What one search may cost (the `hrls_*` configuration).
pub(crate) struct SearchLimits {
    /// `page × limit + limit` at most this (for pages after the first).
    max_offset: usize,
    /// Index entries one search may read.
    max_examined: usize,
    timeout: Duration,
    /// Searches by pattern (not an exact value) need an authenticated caller.
    patterns_need_auth: bool,
    /// Permits of searches past their first batch (the scan admission class).
    scans: Arc<Semaphore>,
}

impl SearchLimits {
    pub(crate) fn from_config(c: &ReverseLookupConfig) -> SearchLimits {
        SearchLimits {
            max_offset: c.max_offset.max(1),
            max_examined: c.max_examined.max(BATCH),
            timeout: Duration::from_millis(c.search_timeout_ms.max(1)),
            patterns_need_auth: c.patterns_need_auth,
            scans: Arc::new(Semaphore::new(c.max_scans.max(1))),
        }
    }
}

fn too_broad(message: String) -> Reply {
    Reply::error(StatusCode::BAD_REQUEST, ResponseCode::PROTOCOL_ERROR, format!("{message}; narrow the search"))
}

fn busy(message: &str) -> Reply {
    Reply::error(StatusCode::SERVICE_UNAVAILABLE, ResponseCode::SERVER_TOO_BUSY, message)
        .header(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"))
}

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
    // As asked (a store searching its own rows compares these bytes), and
    // normalised for our own index and for matching.
    let asked: Vec<&(String, String)> =
        req.params.0.iter().filter(|(k, _)| !CONTROL.iter().any(|c| c.eq_ignore_ascii_case(k))).collect();
    let terms: Vec<(String, Vec<u8>)> =
        asked.iter().map(|(k, v)| (k.to_ascii_uppercase(), v.as_bytes().to_ascii_lowercase())).collect();
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
    let limits = &rest.search;
    // Skipped matches cost as much as returned ones; the first page is
    // bounded by `MAX_LIMIT` and the examined budget.
    if skip > 0 && skip.saturating_add(limit) > limits.max_offset {
        return too_broad(format!(
            "Page {page} of {limit} is too deep: at most {} results can be paged",
            limits.max_offset
        ));
    }
    let with_records = req.params.flag("retrieverecords");
    // Ids are storage keys: compare the prefix in stored form too.
    let id_prefix = (!prefix.is_empty()).then(|| {
        let p = super::params::percent_decode(prefix, false);
        [handle::normalize(&p, false), b"/".to_vec()].concat()
    });

    let driver_at = (0..terms.len()).max_by_key(|&i| literal_start(&terms[i].1).len()).expect("terms not empty");
    let (driver_type, driver) = terms[driver_at].clone();
    // A store that searches its own rows by value (SQL) compares the bytes
    // as they are: it gets the term as asked; our own index is lower case.
    let by_value = !rest.ctx.admin().capabilities().documents;
    let start = match by_value {
        true => literal_start(asked[driver_at].1.as_bytes()).to_vec(),
        false => literal_start(&driver).to_vec(),
    };
    let exact = start.len() == driver.len();
    let key = if exact { IndexMatch::Exact(&start) } else { IndexMatch::Prefix(&start) };
    if !exact && limits.patterns_need_auth {
        match rest.caller(req).await {
            Ok(Caller::Authenticated(_)) => {}
            Ok(_) => {
                let why = "Searches by pattern need authentication on this server";
                return rest
                    .challenge(req, Reply::error(StatusCode::UNAUTHORIZED, ResponseCode::AUTHENTICATION_NEEDED, why));
            }
            Err(reply) => return reply,
        }
    }

    let (records, documents) = (rest.ctx.records(), rest.ctx.uncached_documents());
    let mut seen = HashSet::new();
    let mut found: Vec<(Vec<u8>, HandleRecord)> = Vec::new();
    let mut matched = 0usize;
    let mut after: Option<IndexHit> = None;
    let mut examined = 0usize;
    let started = Instant::now();
    let mut scan_permit = None;
    'outer: loop {
        // A pattern searched in the store's own rows may cost a scan from its
        // first batch (MariaDB sorts every match before the first page).
        let scan = examined >= BATCH || (by_value && !exact);
        if scan && scan_permit.is_none() {
            // Past its first batch a search is a scan: a few at a time.
            match limits.scans.clone().try_acquire_owned() {
                Ok(permit) => scan_permit = Some(permit),
                Err(_) => return busy("Server too busy: other broad searches are running"),
            }
        }
        if examined >= limits.max_examined {
            return too_broad(format!("Search reads more than {} index entries", limits.max_examined));
        }
        if started.elapsed() > limits.timeout {
            return busy("Search took too long");
        }
        // A batch from a store that answers at once must not hold the thread.
        tokio::task::yield_now().await;
        let hits = match by_value {
            true => records.find_by_value(driver_type.as_bytes(), key, after.as_ref(), BATCH).await,
            false => documents.doc_lookup(COLLECTION, &driver_type, key, after.as_ref(), BATCH).await,
        };
        let hits = match hits {
            Ok(h) => h,
            Err(StoreError::Unsupported(why)) => {
                return Reply::error(StatusCode::NOT_IMPLEMENTED, ResponseCode::OPERATION_NOT_SUPPORTED, why)
            }
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
            let searched = match by_value {
                true => glob(&driver, &hit.key.to_ascii_lowercase()),
                false => glob(&driver, &hit.key),
            };
            if !searched || id_prefix.as_ref().is_some_and(|p| !hit.id.starts_with(p)) || seen.contains(&hit.id) {
                continue;
            }
            let record = match rest.ctx.record(&hit.id).await {
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
    // Names as created (as `list` and the console show them), not storage keys,
    // which a case-insensitive server keeps upper-cased.
    let name = |id: &[u8], r: &HandleRecord| String::from_utf8_lossy(r.name_or(id)).into_owned();
    let body = if with_records {
        let mut o = Map::new();
        for (id, r) in &found {
            let values = r.values.iter().filter(|v| v.permissions.public_read()).map(value_to_json).collect();
            o.insert(name(id, r), Value::Array(values));
        }
        Value::Object(o)
    } else {
        Value::Array(found.iter().map(|(id, r)| name(id, r).into()).collect())
    };
    Reply::json(StatusCode::OK, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

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

    /// A JSON API over a store holding `TEST/H0..n` (URL `https://example.org/i`).
    async fn rest_over(n: usize, tweak: impl FnOnce(&mut Config)) -> (Rest, tempfile::TempDir) {
        use handled_proto::value::HandleValue;
        let dir = tempfile::tempdir().unwrap();
        let mut config =
            Config { ephemeral: true, admin_credentials: Some(dir.path().join("c.json")), ..Config::default() };
        tweak(&mut config);
        let store = crate::bootstrap::open_store(&config).await.unwrap();
        let url = |i: usize| HandleValue::new(1, "URL", format!("https://example.org/{i}"));
        let records = (0..n).map(|i| (format!("TEST/H{i}").into_bytes(), HandleRecord::new(vec![url(i)])));
        store.put_many(records.collect()).await.unwrap();
        let booted = crate::bootstrap::bootstrap(config, store).await.unwrap();
        let bodies =
            crate::http_body::BodyReader::new(Duration::from_secs(1), crate::http_body::BodyBudget::new(1 << 20));
        (Rest::new(booted.state.web.clone(), bodies), dir)
    }

    async fn answer(rest: &Rest, query: &str) -> (StatusCode, Value) {
        let req = Req {
            method: Method::GET,
            path: "/hrls/handles".into(),
            params: super::super::params::Params::from_query(Some(query)),
            headers: Default::default(),
            body: Default::default(),
            conn: super::super::Conn { secure: false, peer: "127.0.0.1:1".parse().unwrap(), client_cert: None },
        };
        let reply = search(rest, &req, "").await;
        (reply.status, reply.body.unwrap_or_default())
    }

    /// F8: deep pages and broad patterns were read to the end (0.7 s of CPU
    /// for `URL=*&page=100` over 200k handles); now they are refused, cheaply
    /// and with a reason, while narrow searches still answer.
    #[tokio::test]
    async fn deep_pages_and_broad_patterns_are_refused() {
        let (rest, _dir) = rest_over(3000, |c| {
            c.reverse_lookup.max_offset = 200;
            c.reverse_lookup.max_examined = 2000;
        })
        .await;
        let (status, body) = answer(&rest, "URL=*&limit=10&page=30").await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body["message"].as_str().unwrap().contains("too deep"), "{body}");
        let (status, body) = answer(&rest, "URL=*&limit=10&page=19").await;
        assert_eq!((status, body.as_array().map(Vec::len)), (StatusCode::OK, Some(10)), "the last page allowed");
        // A pattern no index prefix narrows reads every entry: more than allowed.
        let (status, body) = answer(&rest, "URL=*/2999").await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body["message"].as_str().unwrap().contains("index entries"), "{body}");
        let (status, body) = answer(&rest, "URL=https://example.org/2999").await;
        assert_eq!((status, body), (StatusCode::OK, serde_json::json!(["TEST/H2999"])), "exact lookups still answer");
        let (status, body) = answer(&rest, "URL=https://example.org/29*").await;
        assert_eq!((status, body.as_array().map(Vec::len)), (StatusCode::OK, Some(111)), "narrow prefixes too");
    }

    /// Handles come back as created (`TEST/doc1`), not as the upper-cased
    /// storage key of a case-insensitive server, with or without their records.
    #[tokio::test]
    async fn handles_are_named_as_created() {
        use handled_proto::value::HandleValue;
        let (rest, _dir) = rest_over(0, |_| {}).await;
        let values = vec![HandleValue::new(1, "URL", "https://example.org/doc1")];
        let record = HandleRecord::named(values, b"TEST/doc1", b"TEST/DOC1");
        rest.ctx.records().put_many(vec![(b"TEST/DOC1".to_vec(), record)]).await.unwrap();
        let (status, body) = answer(&rest, "URL=https://example.org/doc1").await;
        assert_eq!((status, body), (StatusCode::OK, serde_json::json!(["TEST/doc1"])));
        let (_, body) = answer(&rest, "URL=https://example.org/doc*&retrieverecords=true").await;
        assert!(body.get("TEST/doc1").is_some(), "{body}");
    }

    /// F8: a search past its first batch of index entries is a scan; only
    /// `hrls_max_scans` run at once, the next one is refused at once (503), and
    /// searches within one batch never wait for scans.
    #[tokio::test]
    async fn scans_are_a_separate_admission_class() {
        let (rest, _dir) = rest_over(2500, |c| c.reverse_lookup.max_scans = 1).await;
        let running = rest.search.scans.clone().try_acquire_owned().unwrap(); // another scan
        let (status, _) = answer(&rest, "URL=*&limit=2000").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "another scan is running");
        let (status, _) = answer(&rest, "URL=*&limit=10").await;
        assert_eq!(status, StatusCode::OK, "a search within one batch is no scan");
        drop(running);
        let (status, body) = answer(&rest, "URL=*&limit=2000").await;
        assert_eq!((status, body.as_array().map(Vec::len)), (StatusCode::OK, Some(2000)));
        assert_eq!(rest.search.scans.available_permits(), 1, "the permit is given back");
    }

    #[tokio::test]
    async fn pattern_searches_may_require_authentication() {
        let (rest, _dir) = rest_over(10, |c| c.reverse_lookup.patterns_need_auth = true).await;
        let (status, body) = answer(&rest, "URL=https://example.org/*").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        let (status, body) = answer(&rest, "URL=https://example.org/3").await;
        assert_eq!((status, body), (StatusCode::OK, serde_json::json!(["TEST/H3"])), "exact values stay anonymous");
    }
}
