//! Authenticated targets, for creation and the mixed loop: an administrator's
//! session per client over the native protocol (handled-client's
//! [`AdminSession`]: DH session, one challenge answered when the client is
//! prepared, then MACed requests), or the Handle.Net JSON API with HTTP Basic
//! on every request. Both speak the published protocols, so any Handle server
//! can be measured.

use crate::http::{HttpConn, HttpTarget};
use crate::outcome::{client_error, http_outcome, percent_encode, Res};
use crate::recorder::{Outcome, Recorder};
use crate::workload::Op;
use base64::Engine;
use bytes::Bytes;
use handled_client::credentials::Key;
use handled_client::{AdminError, AdminSession, ConnectParams, Credentials, Protocol, ResolveOptions};
use handled_proto::header::ResponseCode;
use handled_proto::value::HandleValue;
use hyper::Method;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// What the operations write: one URL value at index 1 (create, modify) and
/// an EMAIL value at index 2 (add, then remove).
const CREATED_URL: &str = "https://example.org/landing/page";
const MODIFIED_URL: &str = "https://example.org/moved/page";
const ADDED_EMAIL: &str = "bench@example.org";
const ADDED_INDEX: i32 = 2;

/// The native protocol (TCP or the client's HTTP tunnel) as an administrator.
pub struct AdminTarget {
    pub protocol: Protocol,
    /// TCP: keep the connection open between requests.
    pub persistent: bool,
    /// Tried in order; a broken connection moves a client to the next.
    pub addrs: Vec<SocketAddr>,
    pub credentials: Credentials,
}

/// One client's session, opened by [`AdminTarget::open`].
#[derive(Default)]
pub struct AdminConn {
    session: Option<AdminSession>,
    pub addr_index: usize,
    /// A persistent socket is counted as in use.
    holds_socket: bool,
    /// Connections of this session already counted in the socket gauge.
    counted: u64,
}

impl AdminTarget {
    pub fn describe(&self) -> String {
        let how = match (self.protocol, self.persistent) {
            (Protocol::Tcp, true) => "tcp (persistent)",
            (Protocol::Tcp, false) => "tcp (connection per request)",
            (Protocol::Http, _) => "http tunnel (keep-alive)",
            (Protocol::Udp, _) => "udp",
        };
        format!("{how}, session of {}", self.credentials.display())
    }

    /// Open the session and authenticate it (a resolution with PO clear is
    /// challenged in a session, §3.3), so later requests carry only a MAC.
    pub async fn open(
        &self,
        conn: &mut AdminConn,
        recorder: &Recorder,
        timeout: Duration,
    ) -> Result<(), (String, bool)> {
        let addr = self.addrs[conn.addr_index % self.addrs.len()];
        let params = ConnectParams { timeout, persistent: self.persistent, ..ConnectParams::new(self.protocol, addr) };
        let mut session = AdminSession::open(params, self.credentials.clone()).await.map_err(admin_error)?;
        let authenticated = session.resolve_all(&self.credentials.handle).await;
        conn.session = Some(session);
        count_sockets(conn, self.per_request(), recorder);
        match authenticated {
            Ok(_) => Ok(()),
            Err(e) => Err(admin_error(e)),
        }
    }

    fn per_request(&self) -> bool {
        self.protocol == Protocol::Tcp && !self.persistent
    }

    /// Drop the session (after a failure or at the end); the next call opens a new one.
    pub fn drop_session(&self, conn: &mut AdminConn, recorder: &Recorder) {
        conn.session = None;
        conn.counted = 0;
        if std::mem::take(&mut conn.holds_socket) {
            recorder.sockets.close();
        }
    }

    pub fn next_address(&self, conn: &mut AdminConn, recorder: &Recorder) {
        self.drop_session(conn, recorder);
        conn.addr_index = (conn.addr_index + 1) % self.addrs.len();
    }

    pub async fn call(&self, conn: &mut AdminConn, op: &Op, recorder: &Recorder, timeout: Duration) -> Res {
        if conn.session.is_none() {
            // Reopened after a failure: the session's setup counts in this request.
            self.open(conn, recorder, timeout).await?;
        }
        let session = conn.session.as_mut().expect("opened above");
        let result = match op {
            Op::Resolve(key) => resolve(session, &key.handle, false).await,
            Op::ResolveCertified(key) => resolve(session, &key.handle, true).await,
            Op::SiteInfo => session.connection().site_info().await.map(|r| r.code()).map_err(AdminError::from),
            Op::Create(h) => {
                session.create(h.as_bytes(), &[url_value(CREATED_URL)]).await.map(|_| ResponseCode::SUCCESS)
            }
            Op::Modify(h) => {
                session.modify_values(h.as_bytes(), &[url_value(MODIFIED_URL)]).await.map(|()| ResponseCode::SUCCESS)
            }
            Op::AddValue(h) => {
                session.add_values(h.as_bytes(), &[email_value()], false).await.map(|()| ResponseCode::SUCCESS)
            }
            Op::RemoveValue(h) => {
                session.remove_values(h.as_bytes(), &[ADDED_INDEX]).await.map(|()| ResponseCode::SUCCESS)
            }
            Op::Delete(h) => session.delete(h.as_bytes()).await.map(|()| ResponseCode::SUCCESS),
        };
        count_sockets(conn, self.per_request(), recorder);
        match result {
            Ok(code) if code == ResponseCode::SUCCESS => Ok(Outcome::Ok { server: None }),
            Ok(code) | Err(AdminError::Refused { code, .. }) => {
                Ok(Outcome::Refused { kind: code.name().to_string(), server: None })
            }
            Err(e) => Err(admin_error(e)),
        }
    }
}

async fn resolve(session: &mut AdminSession, handle: &str, certify: bool) -> Result<ResponseCode, AdminError> {
    let options = ResolveOptions { certify, ..ResolveOptions::default() };
    Ok(session.connection().resolve(handle.as_bytes(), &options).await?.code())
}

/// Count the connections the session opened since the last count: a
/// persistent one replaces the one held; per-request ones open and close.
fn count_sockets(conn: &mut AdminConn, per_request: bool, recorder: &Recorder) {
    let Some(session) = conn.session.as_mut() else {
        return;
    };
    let opened = session.connection().connections_opened();
    for _ in conn.counted..opened {
        recorder.sockets.open();
        if per_request || std::mem::replace(&mut conn.holds_socket, true) {
            recorder.sockets.close();
        }
    }
    conn.counted = opened;
}

fn admin_error(e: AdminError) -> (String, bool) {
    match e {
        AdminError::Client(e) => client_error(e),
        AdminError::Refused { code, message } => (format!("{} {message}", code.name()).trim_end().to_string(), true),
        AdminError::Session(m) => (format!("session: {m}"), true),
        AdminError::Unexpected(_) => ("unexpected response".into(), false),
    }
}

fn url_value(url: &str) -> HandleValue {
    HandleValue::new(1, "URL", url)
}

fn email_value() -> HandleValue {
    HandleValue::new(ADDED_INDEX, "EMAIL", ADDED_EMAIL)
}

/// The Handle.Net JSON API (`/api/handles/{handle}`): resolution as GET,
/// admin operations as PUT/DELETE, authenticated with HTTP Basic.
pub struct JsonApiTarget {
    pub http: HttpTarget,
    /// `Basic …`; None: anonymous (resolution only).
    pub authorization: Option<String>,
}

/// The prefix of the credentials' handle (`TEST` for `TEST/ADMIN`, also
/// from `0.NA/TEST`): where an administrator can create by default.
pub fn default_prefix(credentials: &Credentials) -> Option<String> {
    let handle = String::from_utf8_lossy(&credentials.handle).into_owned();
    let handle = handle.strip_prefix("0.NA/").unwrap_or(&handle);
    handle.split_once('/').map(|(prefix, _)| prefix.to_string()).filter(|p| !p.is_empty())
}

/// `Authorization: Basic` for the JSON API: the percent-encoded
/// `index:handle` as user (as pyhandle sends it) and the secret key.
pub fn basic_authorization(credentials: &Credentials) -> Result<String, String> {
    let Key::Secret(secret) = &credentials.key else {
        return Err(format!(
            "{}: the JSON API's Basic authentication needs the secret key, not the RSA key",
            credentials.display()
        ));
    };
    let mut pair = format!("{}:", percent_encode(&credentials.display())).into_bytes();
    pair.extend_from_slice(secret);
    Ok(format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair)))
}

fn value_json(index: i32, kind: &str, value: &str) -> serde_json::Value {
    serde_json::json!({"index": index, "type": kind, "data": {"format": "string", "value": value}})
}

impl JsonApiTarget {
    pub fn describe(&self) -> String {
        let scheme = if self.http.tls.is_some() { "https" } else { "http" };
        let auth = if self.authorization.is_some() { "Basic" } else { "anonymous" };
        format!("JSON API {scheme}://{}/api/handles ({auth})", self.http.authority)
    }

    /// The request for `op`: method, path and query, JSON body.
    fn request(op: &Op) -> (Method, String, Option<serde_json::Value>) {
        // Generated names are path-safe; other handles keep their `/` as the API expects.
        let path = |h: &str| format!("/api/handles/{}", percent_encode(h).replace("%2F", "/"));
        match op {
            Op::Resolve(key) | Op::ResolveCertified(key) => (Method::GET, path(&key.handle), None),
            Op::SiteInfo => (Method::GET, "/api/site".into(), None),
            Op::Create(h) => (
                Method::PUT,
                path(h) + "?overwrite=false",
                Some(serde_json::json!([value_json(1, "URL", CREATED_URL)])),
            ),
            Op::Modify(h) => (Method::PUT, path(h) + "?index=1", Some(value_json(1, "URL", MODIFIED_URL))),
            Op::AddValue(h) => (
                Method::PUT,
                format!("{}?index={ADDED_INDEX}&overwrite=false", path(h)),
                Some(value_json(ADDED_INDEX, "EMAIL", ADDED_EMAIL)),
            ),
            Op::RemoveValue(h) => (Method::DELETE, format!("{}?index={ADDED_INDEX}", path(h)), None),
            Op::Delete(h) => (Method::DELETE, path(h), None),
        }
    }

    pub async fn call(&self, conn: &mut HttpConn, op: &Op, recorder: &Arc<Recorder>) -> Res {
        let (method, uri, body) = Self::request(op);
        let mut builder = hyper::Request::builder().method(method).uri(uri).header("accept", "application/json");
        if let Some(auth) = &self.authorization {
            builder = builder.header("authorization", auth.as_str());
        }
        let body = match body {
            Some(json) => {
                builder = builder.header("content-type", "application/json");
                Bytes::from(json.to_string())
            }
            None => Bytes::new(),
        };
        let reply = conn.send(&self.http, recorder, builder, body).await.map_err(|e| (e.kind, e.connection))?;
        Ok(http_outcome(&reply))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_user_is_the_percent_encoded_identity() {
        let auth = basic_authorization(&Credentials::secret("TEST/ADMIN", 300, "s3cret")).unwrap();
        let raw = base64::engine::general_purpose::STANDARD.decode(auth.strip_prefix("Basic ").unwrap()).unwrap();
        assert_eq!(raw, b"300%3ATEST%2FADMIN:s3cret");
        assert_eq!(default_prefix(&Credentials::secret("20.500.1/ADMIN", 300, "s")).as_deref(), Some("20.500.1"));
        assert_eq!(default_prefix(&Credentials::secret("ADMIN", 300, "s")), None);
    }

    #[test]
    fn json_api_requests_follow_the_rest_routes() {
        let (m, uri, body) = JsonApiTarget::request(&Op::AddValue("TEST/bench-r-0-0".into()));
        assert_eq!((m, uri.as_str()), (Method::PUT, "/api/handles/TEST/bench-r-0-0?index=2&overwrite=false"));
        assert_eq!(body.unwrap()["type"], "EMAIL");
        let (m, uri, body) = JsonApiTarget::request(&Op::Delete("TEST/a b".into()));
        assert_eq!((m, uri.as_str(), body), (Method::DELETE, "/api/handles/TEST/a%20b", None));
    }
}
