//! How a reply becomes an [`Outcome`]: shared by every target (native, tunnel,
//! URL template, admin), so a refusal is named the same way everywhere.

use crate::http::HttpReply;
use crate::recorder::Outcome;
use handled_client::ClientError;
use handled_proto::header::ResponseCode;
use std::time::Duration;

/// An outcome, or a failure kind and whether the connection is to blame.
pub type Res = Result<Outcome, (String, bool)>;

pub fn client_error(e: ClientError) -> (String, bool) {
    match e {
        ClientError::Timeout(_) => ("timeout".into(), true),
        ClientError::Io(e) => (format!("io {:?}", e.kind()), true),
        ClientError::Decode(_) => ("malformed".into(), false),
        ClientError::Http(_) => ("http".into(), true),
        ClientError::WrongRequestId { .. } => ("wrong-request-id".into(), true),
    }
}

/// Success, or a refusal named by the response code.
pub fn code_outcome(code: ResponseCode, server: Option<Duration>) -> Outcome {
    if code == ResponseCode::SUCCESS {
        Outcome::Ok { server }
    } else {
        Outcome::Refused { kind: code.name().to_string(), server }
    }
}

/// Percent-encode everything but unreserved characters (so `/` becomes `%2F`).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// 2xx is success; any other status is an error of kind `http NNN`.
pub fn http_outcome(reply: &HttpReply) -> Outcome {
    if (200..300).contains(&reply.status) {
        Outcome::Ok { server: reply.server_time }
    } else {
        Outcome::Refused { kind: format!("http {}", reply.status), server: reply.server_time }
    }
}
