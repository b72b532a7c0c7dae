//! Turning an answer into HTTP: the redirect (status rules, `Location` as a
//! URI, `Expires` from the smallest TTL capped at two days, `Cache-Control`
//! saying the same), `10320/links` / `10320/headers`, and pages.

use super::escape::iri_to_uri;
use super::pages::redirect_body;
use bytes::Bytes;
use handled_proto::value::{HandleValue, TtlType};
use http_body_util::Full;
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_TYPE, EXPIRES, LOCATION, VARY};
use hyper::{Response, StatusCode};
use std::cell::RefCell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The original's `MAX_RECOGNIZED_TTL`: longer relative TTLs count as two days.
pub(super) const MAX_TTL: i64 = 172_800;
pub(super) const HTML: &str = "text/html;charset=UTF-8";
const LINKS_TYPE: &[u8] = b"10320/links";
const HEADERS_TYPE: &[u8] = b"10320/headers";
/// Extra headers one handle may add (`10320/links` and `10320/headers` together).
const MAX_EXTRA_HEADERS: usize = 32;
/// The only headers a handle's `10320/headers` may set: ones that speak of
/// this one response. Anything else is dropped, since the proxy's origin also
/// serves `/admin/` and `/api/`: a header with an origin-wide effect
/// (`Clear-Site-Data`, `Report-To`, `NEL`, `Alt-Svc`, policies, cookies,
/// CORS, and whatever browsers add next) would let one prefix's writer act on
/// the whole site. Handle.Net's proxy passes any header; this is stricter.
const ALLOWED: &[&str] = &[
    "link",
    "x-robots-tag",
    "memento-datetime",
    "last-modified",
    "etag",
    "content-language",
    "retry-after",
    "deprecation",
    "sunset",
];

/// What the proxy answers, before the caching headers.
pub(super) struct Answer {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: Bytes,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Unix time until which the answer may be reused; None: not to be reused.
    pub expires: Option<i64>,
}

impl Answer {
    pub fn page(status: StatusCode, html: String) -> Answer {
        Answer { status, content_type: HTML, body: Bytes::from(html), headers: Vec::new(), expires: None }
    }

    /// A redirect to `target` (an IRI). HTTP/1.0 clients get 302 unless it is 301;
    /// `redirectionHeaders` asks for the headers with status 200.
    pub fn redirect(
        target: &str,
        status: u16,
        http10: bool,
        headers_only: bool,
        expires: Option<i64>,
    ) -> Option<Answer> {
        let location = HeaderValue::from_str(&iri_to_uri(target)).ok()?;
        let status = match status {
            _ if headers_only => StatusCode::OK,
            301 => StatusCode::MOVED_PERMANENTLY,
            _ if http10 => StatusCode::FOUND,
            s => StatusCode::from_u16(s).unwrap_or(StatusCode::FOUND),
        };
        Some(Answer {
            status,
            content_type: HTML,
            body: Bytes::from(redirect_body(target)),
            headers: vec![(LOCATION, location)],
            expires,
        })
    }

    pub fn into_response(self, now: i64) -> Response<Full<Bytes>> {
        let mut r = Response::new(Full::new(self.body));
        *r.status_mut() = self.status;
        // Sized for ours and the transport's (`Keep-Alive`, `Server-Timing`,
        // CORS): a redirect's seven outgrew the default and rehashed.
        *r.headers_mut() = HeaderMap::with_capacity(self.headers.len() + 10);
        let h = r.headers_mut();
        for (k, v) in self.headers {
            h.append(k, v);
        }
        h.insert(CONTENT_TYPE, HeaderValue::from_static(self.content_type));
        // The answer depends on Accept (JSON, and 10320/loc content negotiation).
        h.insert(VARY, HeaderValue::from_static("Accept"));
        match self.expires {
            Some(at) => {
                if let Some(v) = LAST_EXPIRES.with(|c| c.get(at, || http_date(at))) {
                    h.insert(EXPIRES, v);
                }
                let max_age = (at - now).max(0);
                if let Some(v) = LAST_MAX_AGE.with(|c| c.get(max_age, || format!("max-age={max_age}"))) {
                    h.insert(CACHE_CONTROL, v);
                }
            }
            None => {
                h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            }
        }
        r
    }
}

/// The last header value formatted on this thread for a key: most answers
/// within one second share their `Expires` and `Cache-Control`.
struct LastFormatted(RefCell<Option<(i64, HeaderValue)>>);

impl LastFormatted {
    const fn new() -> Self {
        LastFormatted(RefCell::new(None))
    }

    fn get(&self, key: i64, format: impl FnOnce() -> String) -> Option<HeaderValue> {
        let mut last = self.0.borrow_mut();
        if let Some((_, v)) = last.as_ref().filter(|(k, _)| *k == key) {
            return Some(v.clone());
        }
        let v = HeaderValue::from_str(&format()).ok()?;
        *last = Some((key, v.clone()));
        Some(v)
    }
}

thread_local! {
    static LAST_EXPIRES: LastFormatted = const { LastFormatted::new() };
    static LAST_MAX_AGE: LastFormatted = const { LastFormatted::new() };
}

/// `at` (Unix seconds) as an HTTP date.
fn http_date(at: i64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(at.max(0) as u64))
}

pub(super) fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// When a value read at `now` expires: at most two days ahead, for absolute
/// TTLs too (Handle.Net 9.0.0 caps those as well, checked black-box).
pub(super) fn expiry_of(v: &HandleValue, now: i64) -> i64 {
    match v.ttl_type {
        TtlType::Relative => now + i64::from(v.ttl).clamp(0, MAX_TTL),
        TtlType::Absolute => i64::from(v.ttl).clamp(now, now + MAX_TTL),
    }
}

/// The earliest expiry among `values`.
pub(super) fn expiry<'a>(values: impl IntoIterator<Item = &'a HandleValue>, now: i64) -> Option<i64> {
    values.into_iter().map(|v| expiry_of(v, now)).min()
}

/// `Link:` headers from `10320/links` values and extra headers from
/// `10320/headers` values, one per line (`Name: value`); bounded, and only
/// the [`ALLOWED`] names.
pub(super) fn extra_headers(values: &[HandleValue]) -> Vec<(HeaderName, HeaderValue)> {
    let mut out = Vec::new();
    let wanted = |v: &&HandleValue| {
        v.value_type.eq_ignore_ascii_case(LINKS_TYPE) || v.value_type.eq_ignore_ascii_case(HEADERS_TYPE)
    };
    for v in values.iter().filter(wanted) {
        let Ok(text) = std::str::from_utf8(&v.data) else { continue };
        let lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        if v.value_type.eq_ignore_ascii_case(LINKS_TYPE) {
            out.extend(lines.filter_map(|l| HeaderValue::from_str(l).ok()).map(|l| (hyper::header::LINK, l)));
        } else if v.value_type.eq_ignore_ascii_case(HEADERS_TYPE) {
            for line in lines {
                let Some((name, value)) = line.split_once(':') else { continue };
                let name = name.trim().to_ascii_lowercase();
                if !ALLOWED.contains(&name.as_str()) {
                    continue;
                }
                if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value.trim())) {
                    out.push((n, v));
                }
            }
        }
    }
    out.truncate(MAX_EXTRA_HEADERS);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_rules() {
        let now = 1_000_000;
        let mut long = HandleValue::new(1, "URL", "x");
        long.ttl = 999_999;
        let mut short = HandleValue::new(2, "URL", "y");
        short.ttl = 300;
        let mut absolute = HandleValue::new(3, "URL", "z");
        absolute.ttl_type = TtlType::Absolute;
        absolute.ttl = 1_000_100;
        let mut far = absolute.clone();
        far.ttl = i32::MAX;
        assert_eq!(expiry([&long], now), Some(now + MAX_TTL), "capped at two days");
        assert_eq!(expiry([&long, &short], now), Some(now + 300), "the smallest");
        assert_eq!(expiry([&long, &absolute], now), Some(1_000_100), "absolute, when sooner");
        assert_eq!(expiry([&far], now), Some(now + MAX_TTL), "absolute ones are capped too");
        assert_eq!(expiry([], now), None);
    }

    #[test]
    fn redirect_statuses_and_headers() {
        let r = |s, http10, only| Answer::redirect("https://a/ b", s, http10, only, Some(10)).unwrap();
        assert_eq!(r(303, false, false).status, StatusCode::SEE_OTHER);
        assert_eq!(r(303, true, false).status, StatusCode::FOUND, "HTTP/1.0: 302");
        assert_eq!(r(307, true, false).status, StatusCode::FOUND);
        assert_eq!(r(301, true, false).status, StatusCode::MOVED_PERMANENTLY);
        assert_eq!(r(302, false, true).status, StatusCode::OK, "redirectionHeaders");
        let resp = r(302, false, false).into_response(4);
        assert_eq!(resp.headers()[LOCATION], "https://a/%20b");
        assert_eq!(resp.headers()[EXPIRES], "Thu, 01 Jan 1970 00:00:10 GMT");
        assert_eq!(resp.headers()[CACHE_CONTROL], "max-age=6");
        let page = Answer::page(StatusCode::NOT_FOUND, String::new()).into_response(4);
        assert_eq!(page.headers()[CACHE_CONTROL], "no-cache");
        assert!(page.headers().get(EXPIRES).is_none());
    }

    #[test]
    fn links_and_headers_from_values() {
        let values = vec![
            HandleValue::new(1, "10320/links", "<https://m/x>; rel=\"describedby\"\n<https://m/y>; rel=\"alternate\""),
            HandleValue::new(2, "10320/headers", "X-Robots-Tag: noindex\nSet-Cookie: s=1\nLocation: https://evil/\nContent-Type: text/plain\nAccess-Control-Allow-Origin: *\nbad header: x\nnocolon"),
            // Issue 25 R4: headers with an effect on the whole origin.
            HandleValue::new(3, "10320/headers", "Clear-Site-Data: \"*\"\nReport-To: {\"url\":\"https://evil/\"}\nNEL: {}\n\
                Reporting-Endpoints: a=\"https://evil/\"\nAlt-Svc: h3=\":443\"\nCross-Origin-Opener-Policy: unsafe-none\n\
                Permissions-Policy: camera=*\nX-Frame-Options: ALLOWALL\nX-Extra: yes\nMemento-Datetime: Wed, 30 May 2007 18:47:52 GMT"),
        ];
        let h: Vec<String> =
            extra_headers(&values).iter().map(|(k, v)| format!("{k}: {}", v.to_str().unwrap())).collect();
        assert_eq!(
            h,
            [
                "link: <https://m/x>; rel=\"describedby\"",
                "link: <https://m/y>; rel=\"alternate\"",
                "x-robots-tag: noindex",
                "memento-datetime: Wed, 30 May 2007 18:47:52 GMT"
            ]
        );
    }
}
