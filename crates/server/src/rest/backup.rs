//! `/api/backup` (`handled backup`; the backup itself is `crate::backup`):
//! * `POST /api/backup` — a server administrator (`server_admins`) starts a
//!   backup; the answer holds its id (128 random bits) and manifest;
//! * `GET /api/backup` with `X-Backup-Id: {id}` — the next chunk
//!   (`application/octet-stream`, `X-Backup-Last: true` on the last one);
//! * `DELETE /api/backup` with `X-Backup-Id: {id}` — cancel it.
//!
//! Like authenticated writes, all of them need HTTPS unless
//! `allow_plain_http_admin`. A backup holds the server key and every admin
//! secret, so its id is never enough alone: pulls and cancels carry the
//! credentials of the administrator who started it (or of a server
//! administrator), and the id travels in a header, never in the URL, which
//! access logs and proxies record.

use super::{render, Body, Req, Rest};
use crate::access::authorize::is_server_admin;
use crate::auth::{Caller, Identity};
use crate::backup::BackupError;
use bytes::Bytes;
use handled_proto::header::ResponseCode;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Response, StatusCode};
use serde_json::json;

use super::Reply;

/// The header that carries a backup's id on pulls and cancels.
pub const BACKUP_ID_HEADER: &str = "x-backup-id";

/// `/api/backup/{id}`: the form of earlier releases put the id into every
/// access log; refused without looking the id up.
pub(super) fn id_in_url() -> Reply {
    Reply::error(
        StatusCode::BAD_REQUEST,
        ResponseCode::ERROR,
        "a backup's id goes in the X-Backup-Id header of GET or DELETE /api/backup, never in the URL",
    )
}

pub(super) async fn route(rest: &Rest, req: &Req) -> Response<Body> {
    let reply = match req.method {
        Method::POST => start(rest, req).await,
        Method::GET | Method::DELETE => match owner_or_admin(rest, req).await {
            Err(reply) => reply,
            Ok(id) if req.method == Method::GET => match rest.backups.pull(&id).await {
                Ok(chunk) => return chunk_response(chunk.bytes, chunk.last),
                Err(e) => failed(&e),
            },
            Ok(id) if rest.backups.cancel(&id) => Reply::json(StatusCode::OK, json!({ "responseCode": 1 })),
            Ok(_) => failed(&BackupError::Unknown),
        },
        _ => Reply::method_not_allowed(req, "POST, GET, DELETE"),
    };
    render(req, reply)
}

/// The authenticated caller, or the reply that refuses the request.
async fn authenticated(rest: &Rest, req: &Req, why: &'static str) -> Result<Identity, Reply> {
    if !rest.credentials_count(req) {
        return Err(plain_refused());
    }
    match rest.caller(req).await? {
        Caller::Authenticated(identity) => Ok(identity),
        Caller::Anonymous => {
            Err(rest.challenge(req, Reply::error(StatusCode::UNAUTHORIZED, ResponseCode::AUTHENTICATION_NEEDED, why)))
        }
    }
}

async fn start(rest: &Rest, req: &Req) -> Reply {
    let identity = match authenticated(rest, req, "Backups need a server administrator's credentials").await {
        Ok(identity) => identity,
        Err(reply) => return reply,
    };
    match is_server_admin(&rest.ctx, &identity).await {
        Ok(true) => {}
        Ok(false) => {
            return Reply::error(
                StatusCode::FORBIDDEN,
                ResponseCode::INSUFFICIENT_PERMISSIONS,
                format!(
                    "{} is not a server administrator: backups hold every prefix's data and the server key, \
                     so only the identities in `server_admins` may take them",
                    identity.display()
                ),
            )
        }
        Err(e) => return failed(&BackupError::Store(e)),
    }
    match rest.backups.start(&rest.ctx.store_handle(), &rest.ctx.data_dir, identity).await {
        Ok(s) => Reply::json(
            StatusCode::OK,
            json!({ "responseCode": 1, "id": s.id, "manifest": s.manifest, "chunkBytes": crate::backup::CHUNK_BYTES }),
        ),
        Err(e) => failed(&e),
    }
}

/// The id of the backup a GET or DELETE names, once its caller is proven to
/// be the administrator who started it or a server administrator.
async fn owner_or_admin(rest: &Rest, req: &Req) -> Result<String, Reply> {
    let identity = authenticated(rest, req, "Backups are pulled with the credentials that started them").await?;
    let Some(id) = req.header(BACKUP_ID_HEADER).map(str::trim).filter(|id| !id.is_empty()) else {
        return Err(Reply::error(
            StatusCode::BAD_REQUEST,
            ResponseCode::ERROR,
            "name the backup in the X-Backup-Id header (the id its start answered)",
        ));
    };
    if rest.backups.owner(id).is_some_and(|owner| identity.matches(&owner.handle, owner.index)) {
        return Ok(id.to_owned());
    }
    match is_server_admin(&rest.ctx, &identity).await {
        Ok(true) => Ok(id.to_owned()),
        Ok(false) => {
            rest.ctx.logs.auth_failed(
                &identity.display(),
                Some(req.conn.peer),
                "backup pull or cancel by an identity that neither started it nor is a server administrator",
            );
            Err(Reply::error(
                StatusCode::FORBIDDEN,
                ResponseCode::INSUFFICIENT_PERMISSIONS,
                format!("{} did not start this backup and is not a server administrator", identity.display()),
            ))
        }
        Err(e) => Err(failed(&BackupError::Store(e))),
    }
}

fn failed(e: &BackupError) -> Reply {
    let (status, code) = match e {
        BackupError::Busy(_) => (StatusCode::CONFLICT, ResponseCode::ERROR),
        BackupError::Unknown => (StatusCode::NOT_FOUND, ResponseCode::ERROR),
        // A 4xx: the request is fine, this server's store is not one `handled
        // backup` copies (the message says what to use); nothing failed here.
        BackupError::Unsupported(_) => (StatusCode::CONFLICT, ResponseCode::OPERATION_NOT_SUPPORTED),
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
