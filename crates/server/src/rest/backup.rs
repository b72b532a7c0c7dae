//! `/api/backup` (`handled backup`; the backup itself is `crate::backup`):
//! * `POST /api/backup` — a server administrator (`server_admins`) starts a
//!   backup; the answer holds its id (128 random bits) and manifest;
//! * `GET /api/backup/{id}` — the next chunk (`application/octet-stream`,
//!   `X-Backup-Last: true` on the last one);
//! * `DELETE /api/backup/{id}` — cancel it.
//!
//! Like authenticated writes, all of them need HTTPS unless
//! `allow_plain_http_admin`; the id, known only to the administrator who
//! started the backup, authorizes its pulls (no key check per chunk).

use super::{render, Body, Req, Rest};
use crate::access::authorize::is_server_admin;
use crate::auth::Caller;
use crate::backup::BackupError;
use bytes::Bytes;
use handled_proto::header::ResponseCode;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Response, StatusCode};
use serde_json::json;

use super::Reply;

/// The part after `/api/backup` if `path` is under it.
pub(super) fn under(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/api/backup")?;
    (rest.is_empty() || rest.starts_with('/')).then(|| rest.trim_start_matches('/'))
}

pub(super) async fn route(rest: &Rest, req: &Req, id: &str) -> Response<Body> {
    let reply = match (&req.method, id.is_empty()) {
        (&Method::POST, true) => start(rest, req).await,
        (&Method::GET, false) if rest.credentials_count(req) => match rest.backups.pull(id).await {
            Ok(chunk) => return chunk_response(chunk.bytes, chunk.last),
            Err(e) => failed(&e),
        },
        (&Method::DELETE, false) if rest.credentials_count(req) => {
            if rest.backups.cancel(id) {
                Reply::json(StatusCode::OK, json!({ "responseCode": 1 }))
            } else {
                failed(&BackupError::Unknown)
            }
        }
        (&Method::GET | &Method::DELETE, false) => plain_refused(),
        (_, true) => Reply::method_not_allowed(req, "POST"),
        (_, false) => Reply::method_not_allowed(req, "GET, DELETE"),
    };
    render(req, reply)
}

async fn start(rest: &Rest, req: &Req) -> Reply {
    if !rest.credentials_count(req) {
        return plain_refused();
    }
    let identity = match rest.caller(req).await {
        Ok(Caller::Authenticated(identity)) => identity,
        Ok(Caller::Anonymous) => {
            return rest.challenge(
                req,
                Reply::error(
                    StatusCode::UNAUTHORIZED,
                    ResponseCode::AUTHENTICATION_NEEDED,
                    "Backups need a server administrator's credentials",
                ),
            )
        }
        Err(reply) => return reply,
    };
    match is_server_admin(&rest.state, &identity).await {
        Ok(true) => {}
        Ok(false) => {
            return Reply::error(
                StatusCode::FORBIDDEN,
                ResponseCode::INSUFFICIENT_PERMISSIONS,
                format!(
                    "{}:{} is not a server administrator: backups hold every prefix's data and the server key, \
                     so only the identities in `server_admins` may take them",
                    identity.index,
                    String::from_utf8_lossy(&identity.handle)
                ),
            )
        }
        Err(e) => return failed(&BackupError::Store(e)),
    }
    match rest.backups.start(&rest.state).await {
        Ok(s) => Reply::json(
            StatusCode::OK,
            json!({ "responseCode": 1, "id": s.id, "manifest": s.manifest, "chunkBytes": crate::backup::CHUNK_BYTES }),
        ),
        Err(e) => failed(&e),
    }
}

fn failed(e: &BackupError) -> Reply {
    let (status, code) = match e {
        BackupError::Busy(_) => (StatusCode::CONFLICT, ResponseCode::ERROR),
        BackupError::Unknown => (StatusCode::NOT_FOUND, ResponseCode::ERROR),
        BackupError::Unsupported(_) => (StatusCode::NOT_IMPLEMENTED, ResponseCode::OPERATION_NOT_SUPPORTED),
        BackupError::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, ResponseCode::SERVER_BACKUP),
    };
    Reply::error(status, code, e.to_string())
}

fn plain_refused() -> Reply {
    Reply::error(
        StatusCode::FORBIDDEN,
        ResponseCode::AUTHENTICATION_NEEDED,
        "Backups go over HTTPS only (this server does not take credentials over plain HTTP)",
    )
}

fn chunk_response(bytes: Vec<u8>, last: bool) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(bytes)));
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    r.headers_mut().insert("x-backup-last", HeaderValue::from_static(if last { "true" } else { "false" }));
    r
}
