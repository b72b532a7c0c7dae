//! A proxy request as the original's `HDLServletRequest` reads it: the handle
//! from the path (or the query form's `hdl`), its `hdl:`/`doi:`/URN prefixes
//! removed, the action, the value filters and the 10320/loc selection context
//! (explicit `locatt=`, `Accept`, `Accept-Language`, `country=`). Like
//! Handle.Net 9.0.0 (checked black-box), `ip=` does not change the address
//! the `address` method matches: that is the connection's peer.

use crate::rest::params::{percent_decode_str, Params};
use hyper::header::{HeaderMap, HeaderName, ACCEPT, ACCEPT_LANGUAGE, USER_AGENT};
use std::net::IpAddr;

/// Most `locatt` filters one request may ask for (each is a pass over the locations).
const MAX_LOCATT: usize = 32;

/// What the client asked the proxy to do with the handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    Redirect,
    ShowValues,
    ShowUrls,
    Api,
}

#[derive(Debug)]
pub(super) struct ProxyRequest {
    pub handle: String,
    pub action: Action,
    /// Appended to the redirect target (a fragment typed into the form, or `urlappend=`).
    pub urlappend: String,
    /// 10320/loc attribute filters, applied in this order.
    pub locatt: Vec<(String, String)>,
    pub country: Option<String>,
    pub client_ip: IpAddr,
    pub follow_aliases: bool,
    /// `Location`/`Expires` with status 200 instead of a 3xx.
    pub redirection_headers: bool,
    /// Index filter; empty = all. A malformed `index=` voids the whole filter (as the original).
    pub indexes: Vec<i32>,
    pub types: Vec<Vec<u8>>,
    /// `Accept` prefers `application/json` over anything a browser shows.
    pub wants_json: bool,
    /// The query string as received (carried over to alias redirects).
    pub query: Option<String>,
}

impl ProxyRequest {
    /// `path_handle`: the request path without its leading `/`, still percent-encoded;
    /// `form`: fields of a POSTed query form (they override the query string's).
    pub fn new(path_handle: &str, query: Option<&str>, form: Params, headers: &HeaderMap, peer: IpAddr) -> Self {
        let mut params = Params::from_query(query);
        params.0.extend(form.0);
        let mut urlappend = String::new();
        let handle = match params.0.iter().rev().find(|(k, _)| k == "hdl") {
            // What people type into the form may carry a fragment.
            Some((_, typed)) => match typed.trim().split_once('#') {
                Some((h, fragment)) => {
                    urlappend = format!("#{fragment}");
                    h.trim().to_string()
                }
                None => typed.trim().to_string(),
            },
            None => percent_decode_str(path_handle, false),
        };
        let handle = normalized(handle);
        if let Some(u) = params.get("urlappend") {
            urlappend = u.to_string();
        }
        let action = match params.get("action").map(str::to_ascii_lowercase).as_deref() {
            _ if params.has("noredirect") => Action::ShowValues,
            Some("showvalues") => Action::ShowValues,
            Some("showurls") => Action::ShowUrls,
            Some("api") => Action::Api,
            _ => Action::Redirect,
        };
        let mut locatt: Vec<(String, String)> = params.all("locatt").filter_map(split_locatt).collect();
        if params.get("action").is_some_and(|a| a.eq_ignore_ascii_case("metadata")) {
            locatt.push(("role".into(), "metadata".into()));
        }
        let header = |n: HeaderName| headers.get(n).and_then(|v| v.to_str().ok());
        let (from_accept, wants_json) = accept_locatt(header(ACCEPT), header(USER_AGENT));
        locatt.extend(from_accept);
        locatt.extend(language_locatt(header(ACCEPT_LANGUAGE)));
        locatt.truncate(MAX_LOCATT);
        let indexes: Result<Vec<i32>, _> = params.all("index").map(|i| i.trim().parse::<i32>()).collect();
        ProxyRequest {
            handle,
            action,
            urlappend,
            locatt,
            country: params.get("country").filter(|c| !c.is_empty()).map(str::to_string),
            client_ip: peer,
            follow_aliases: !params.has("ignore_aliases"),
            redirection_headers: params.has("redirectionHeaders"),
            indexes: indexes.unwrap_or_default(),
            types: params.all("type").filter(|t| !t.is_empty()).map(|t| t.as_bytes().to_vec()).collect(),
            wants_json,
            query: query.filter(|q| !q.is_empty()).map(str::to_string),
        }
    }
}

fn split_locatt(v: &str) -> Option<(String, String)> {
    let (k, v) = v.split_once(':')?;
    Some((k.trim().to_string(), v.trim().to_string()))
}

/// [`normalize_handle`] in place: a stripped prefix is cut off, not copied around.
fn normalized(mut handle: String) -> String {
    let cut = match normalize_handle(&handle) {
        std::borrow::Cow::Owned(h) => return h,
        std::borrow::Cow::Borrowed(rest) => handle.len() - rest.len(),
    };
    handle.drain(..cut);
    handle
}

/// Strip the identifier-scheme prefixes people paste (`hdl:`, `doi:`,
/// `info:doi/`, `info:hdl/`, `urn:hdl:`, `urn:doi:`, `urn:eidr:`). In a URN
/// the prefix may end with `:` instead of `/` (`urn:hdl:TEST:1`).
pub(super) fn normalize_handle(h: &str) -> std::borrow::Cow<'_, str> {
    let strip = |p: &str| h.get(..p.len()).filter(|s| s.eq_ignore_ascii_case(p)).map(|_| &h[p.len()..]);
    for p in ["hdl:", "doi:", "info:doi/", "info:hdl/"] {
        if let Some(rest) = strip(p) {
            return rest.into();
        }
    }
    for p in ["urn:hdl:", "urn:doi:", "urn:eidr:"] {
        if let Some(rest) = strip(p) {
            return match (rest.find(':'), rest.find('/')) {
                (Some(c), slash) if slash.is_none_or(|s| c < s) => format!("{}/{}", &rest[..c], &rest[c + 1..]).into(),
                _ => rest.into(),
            };
        }
    }
    h.into()
}

/// Types a browser renders itself: preferring them means "show me the page".
fn browserish(t: &str) -> bool {
    matches!(t, "*" | "*/*" | "text/html" | "application/xhtml+xml" | "application/pdf")
        || ["image/", "audio/", "video/"].iter().any(|p| t.starts_with(p))
}

/// `Accept` → 10320/loc filters (§2.6), and whether the client prefers JSON.
fn accept_locatt(accept: Option<&str>, user_agent: Option<&str>) -> (Vec<(String, String)>, bool) {
    let role = |r: &str| ("http_role".to_string(), r.to_string());
    let mut types: Vec<(String, f32)> = accept
        .unwrap_or("")
        .split(',')
        .take(MAX_LOCATT)
        .filter_map(|item| {
            let mut parts = item.split(';');
            let t = parts.next()?.trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q=").and_then(|q| q.trim().parse::<f32>().ok()))
                .next()
                .unwrap_or(1.0);
            (!t.is_empty()).then_some((t, q))
        })
        .collect();
    if types.iter().all(|(t, _)| t == "*/*") {
        let ua = user_agent.unwrap_or("").as_bytes();
        let starts = |p: &str| ua.get(..p.len()).is_some_and(|s| s.eq_ignore_ascii_case(p.as_bytes()));
        if starts("mozilla/") || starts("opera/") {
            let html = |k: &str| (k.to_string(), "text/html".to_string());
            return (vec![role("browser"), html("ctype"), html("media-type")], false);
        }
        return (vec![role("no_conneg")], false);
    }
    let best_browser = types.iter().filter(|(t, _)| browserish(t)).map(|(_, q)| *q).fold(0.0, f32::max);
    if !types.iter().any(|(t, q)| !browserish(t) && *q > best_browser) {
        return (vec![role("browser")], false);
    }
    types.sort_by(|a, b| b.1.total_cmp(&a.1));
    let concrete: Vec<&str> =
        types.iter().filter(|(t, q)| !t.contains('*') && *q > 0.0).map(|(t, _)| t.as_str()).collect();
    let wants_json = concrete.first() == Some(&"application/json");
    let mut out = Vec::new();
    for t in concrete {
        out.push(("ctype".to_string(), t.to_string()));
        out.push(("media-type".to_string(), t.to_string()));
    }
    out.push(role("conneg"));
    (out, wants_json)
}

/// `Accept-Language: de-CH, en;q=0.5` → `locatt=language:de-CH`, `language:en`.
fn language_locatt(header: Option<&str>) -> Vec<(String, String)> {
    let Some(h) = header else { return Vec::new() };
    h.split(',')
        .take(8)
        .filter_map(|item| item.split(';').next().map(str::trim))
        .filter(|tag| !tag.is_empty() && *tag != "*")
        .map(|tag| ("language".to_string(), tag.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_stripped() {
        for (given, want) in [
            ("hdl:TEST/1", "TEST/1"),
            ("HDL:TEST/1", "TEST/1"),
            ("doi:10.1/x", "10.1/x"),
            ("info:doi/10.1/x", "10.1/x"),
            ("info:hdl/TEST/1", "TEST/1"),
            ("urn:hdl:TEST/1", "TEST/1"),
            ("urn:hdl:TEST:1", "TEST/1"),
            ("urn:doi:10.1:a/b", "10.1/a/b"),
            ("urn:eidr:10.5240:XXXX", "10.5240/XXXX"),
            ("TEST/a:b", "TEST/a:b"),
            ("urn:hdl:TEST/a:b", "TEST/a:b"),
        ] {
            assert_eq!(normalize_handle(given), want, "{given}");
        }
    }

    fn req(path: &str, query: &str, headers: &[(&'static str, &'static str)]) -> ProxyRequest {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.insert(*k, v.parse().unwrap());
        }
        ProxyRequest::new(path, Some(query), Params::default(), &h, [127, 0, 0, 1].into())
    }

    #[test]
    fn actions_filters_and_overrides() {
        assert_eq!(req("TEST/1", "noredirect", &[]).action, Action::ShowValues);
        assert_eq!(req("TEST/1", "action=showvalues", &[]).action, Action::ShowValues);
        assert_eq!(req("TEST/1", "action=ShowUrls", &[]).action, Action::ShowUrls);
        assert_eq!(req("TEST/1", "action=api", &[]).action, Action::Api);
        assert_eq!(req("TEST/1", "action=nonsense", &[]).action, Action::Redirect);
        let r = req("TEST%2F1", "index=2&index=5&type=URL&ip=10.1.2.3&country=gb&ignore_aliases", &[]);
        assert_eq!((r.handle.as_str(), r.indexes, r.types), ("TEST/1", vec![2, 5], vec![b"URL".to_vec()]));
        assert_eq!(
            (r.client_ip, r.country.as_deref(), r.follow_aliases),
            ("127.0.0.1".parse().unwrap(), Some("gb"), false)
        );
        assert!(req("TEST/1", "index=abc&index=2", &[]).indexes.is_empty(), "a malformed index voids the filter");
        let m = req("TEST/1", "action=metadata&locatt=id:2", &[]);
        assert_eq!(m.action, Action::Redirect);
        assert_eq!(m.locatt[..2], [("id".into(), "2".into()), ("role".into(), "metadata".into())]);
    }

    #[test]
    fn form_field_and_fragment() {
        let form = Params(vec![("hdl".into(), " doi:TEST/1#sec2 ".into())]);
        let r = ProxyRequest::new("", None, form, &HeaderMap::new(), [127, 0, 0, 1].into());
        assert_eq!((r.handle.as_str(), r.urlappend.as_str()), ("TEST/1", "#sec2"));
    }

    #[test]
    fn accept_becomes_location_filters() {
        let roles = |r: &ProxyRequest| r.locatt.iter().map(|(k, v)| format!("{k}:{v}")).collect::<Vec<_>>();
        assert_eq!(roles(&req("T/1", "", &[("accept", "*/*")])), ["http_role:no_conneg"]);
        let firefox = req("T/1", "", &[("accept", "*/*"), ("user-agent", "Mozilla/5.0")]);
        assert_eq!(roles(&firefox), ["http_role:browser", "ctype:text/html", "media-type:text/html"]);
        let html = req("T/1", "", &[("accept", "text/html,application/json;q=0.9")]);
        assert_eq!((roles(&html), html.wants_json), (vec!["http_role:browser".to_string()], false));
        let json = req("T/1", "", &[("accept", "application/json"), ("accept-language", "de-CH, en;q=0.5")]);
        assert!(json.wants_json);
        assert_eq!(
            roles(&json),
            [
                "ctype:application/json",
                "media-type:application/json",
                "http_role:conneg",
                "language:de-CH",
                "language:en"
            ]
        );
        let csl = req("T/1", "", &[("accept", "application/vnd.citationstyles.csl+json, text/html;q=0.1")]);
        assert!(!csl.wants_json && roles(&csl)[0] == "ctype:application/vnd.citationstyles.csl+json");
    }
}
