//! Reverse lookup (`/hrls/handles[/{prefix}]?TYPE=pattern...`), the EUDAT
//! servlet's interface. It must be answered from a secondary index the store
//! maintains on every write, never by scanning handles; until the store
//! offers that index, searches are refused with 501 (responseCode 5).

use super::{Reply, Req, Rest};
use handled_proto::header::ResponseCode;
use hyper::{Method, StatusCode};

/// Parameters that steer the search rather than name a value type.
const CONTROL: &[&str] = &["limit", "page", "retrieverecords", "pretty", "callback"];

pub(super) async fn search(_rest: &Rest, req: &Req, _prefix: &str) -> Reply {
    if !matches!(req.method, Method::GET | Method::HEAD) {
        return Reply::method_not_allowed(req);
    }
    if !req.params.0.iter().any(|(k, _)| !CONTROL.contains(&k.as_str())) {
        return Reply::bad_request("No search terms given: use TYPE=pattern, e.g. URL=*example.org*");
    }
    for k in ["limit", "page"] {
        if let Err(m) = req.params.int(k) {
            return Reply::bad_request(m);
        }
    }
    Reply::error(StatusCode::NOT_IMPLEMENTED, ResponseCode::OPERATION_NOT_SUPPORTED, "Reverse lookup needs the store's value index, which this server does not have yet")
}
