//! Where the load goes and over what: the native protocol through
//! `handled-client` (UDP, TCP per request or persistent), the HTTP tunnel
//! (the client's encoder/decoder in our HTTP engine, which adds TLS,
//! `Connection: close`, socket counts and `Server-Timing`), requests to a URL
//! template (the JSON API, or any HTTP service), or, as an administrator, an
//! authenticated session or the JSON API with Basic (`admin.rs`).

use crate::admin::{AdminConn, AdminTarget, JsonApiTarget};
use crate::http::{HttpConn, HttpError, HttpTarget};
use crate::outcome::{client_error, code_outcome, http_outcome, percent_encode, Res};
use crate::recorder::{Outcome, Recorder};
use crate::workload::{Op, OpKind};
use bytes::Bytes;
use handled_client::{decode_response, encode_request, Connection, Protocol, ResolveOptions};
use handled_proto::codec::{Codec, Reader};
use handled_proto::envelope::{Envelope, ENVELOPE_LEN};
use handled_proto::header::OpFlags;
use handled_proto::request::{RequestBody, ResolutionRequest};
use hyper::Method;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub enum Target {
    Native {
        protocol: Protocol,
        persistent: bool,
        addrs: Vec<SocketAddr>,
    },
    /// POST `application/x-hdl-message` to `/`.
    Tunnel(HttpTarget),
    /// Requests to a URL template, `{handle}`, `{handle_enc}` (percent-encoded)
    /// and `{n}` filled in, in the path and the body alike.
    Url {
        http: HttpTarget,
        request: UrlRequest,
    },
    /// An administrator's session per client: admin operations and resolution.
    Admin(AdminTarget),
    /// The JSON API, admin operations authenticated with Basic.
    JsonApi(JsonApiTarget),
}

/// What the URL-template mode sends.
#[derive(Debug, Clone)]
pub struct UrlRequest {
    pub method: Method,
    /// Path and query, with placeholders.
    pub template: String,
    /// Body template (sent as `application/json`); placeholders as in the path.
    pub body: Option<String>,
    /// An `Authorization` header value.
    pub authorization: Option<String>,
}

impl UrlRequest {
    pub fn get(template: &str) -> UrlRequest {
        UrlRequest { method: Method::GET, template: template.into(), body: None, authorization: None }
    }
}

/// One client's connection state.
pub enum Conn {
    Native { conn: Option<Connection>, addr_index: usize, holds_socket: bool },
    Http(HttpConn),
    // Boxed: a session (keys, connection) is large next to the other states.
    Admin(Box<AdminConn>),
}

const HDL: &str = "application/x-hdl-message";

impl Target {
    pub fn describe(&self) -> String {
        match self {
            Target::Native { protocol: Protocol::Udp, .. } => "udp".into(),
            Target::Native { protocol: Protocol::Tcp, persistent: false, .. } => "tcp (connection per request)".into(),
            Target::Native { protocol: Protocol::Tcp, persistent: true, .. } => "tcp (persistent)".into(),
            Target::Native { protocol: Protocol::Http, .. } => "http (client tunnel)".into(),
            Target::Tunnel(h) => format!("{} tunnel ({})", scheme(h), ka(h)),
            Target::Url { http, request } => {
                format!("{} {}://{}{} ({})", request.method, scheme(http), http.authority, request.template, ka(http))
            }
            Target::Admin(a) => a.describe(),
            Target::JsonApi(j) => format!("{} ({})", j.describe(), ka(&j.http)),
        }
    }

    pub fn first_addr(&self) -> SocketAddr {
        match self {
            Target::Native { addrs, .. } | Target::Admin(AdminTarget { addrs, .. }) => addrs[0],
            Target::Tunnel(h) | Target::Url { http: h, .. } | Target::JsonApi(JsonApiTarget { http: h, .. }) => {
                h.addrs[0]
            }
        }
    }

    /// Can this target carry `op`?
    pub fn supports(&self, op: OpKind) -> bool {
        match self {
            Target::Admin(_) => true,
            Target::JsonApi(j) => op != OpKind::SiteInfo && (!op.is_admin() || j.authorization.is_some()),
            Target::Url { .. } => op != OpKind::SiteInfo && !op.is_admin(),
            Target::Native { .. } | Target::Tunnel(_) => !op.is_admin(),
        }
    }

    /// A fresh client connection; sockets are opened lazily by `call`, or
    /// by `prepare` for sessions.
    pub fn conn(&self) -> Conn {
        match self {
            Target::Native { .. } => Conn::Native { conn: None, addr_index: 0, holds_socket: false },
            Target::Admin(_) => Conn::Admin(Box::default()),
            _ => Conn::Http(HttpConn::default()),
        }
    }

    /// Get a client ready before measurement: an admin session is opened and
    /// authenticated (a failure here is the run's error: bad credentials).
    pub async fn prepare(&self, conn: &mut Conn, recorder: &Recorder, timeout: Duration) -> Result<(), String> {
        match (self, conn) {
            (Target::Admin(a), Conn::Admin(c)) => {
                match tokio::time::timeout(timeout, a.open(c, recorder, timeout)).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err((kind, _))) => Err(format!("cannot open an admin session ({}): {kind}", a.describe())),
                    Err(_) => {
                        Err(format!("cannot open an admin session ({}): no answer within {timeout:?}", a.describe()))
                    }
                }
            }
            _ => Ok(()),
        }
    }

    /// Release what a connection holds (for the socket counts).
    pub fn close(&self, conn: Conn, recorder: &Recorder) {
        match (self, conn) {
            (_, Conn::Native { holds_socket: true, .. }) => recorder.sockets.close(),
            (Target::Admin(a), Conn::Admin(mut c)) => a.drop_session(&mut c, recorder),
            _ => {}
        }
    }

    /// Send one operation and wait for its answer, at most `timeout`.
    pub async fn call(&self, conn: &mut Conn, op: &Op, recorder: &Arc<Recorder>, timeout: Duration) -> Outcome {
        match tokio::time::timeout(timeout, self.call_inner(conn, op, recorder, timeout)).await {
            Ok(outcome) => outcome,
            Err(_) => {
                // The connection may hold a late answer: don't reuse it.
                self.fail_over(conn, recorder);
                Outcome::Failed { kind: "timeout".into() }
            }
        }
    }

    /// Drop the connection and move the client to the next address.
    fn fail_over(&self, conn: &mut Conn, recorder: &Recorder) {
        match (self, conn) {
            (Target::Native { addrs, .. }, Conn::Native { conn, addr_index, holds_socket }) => {
                *conn = None;
                if std::mem::take(holds_socket) {
                    recorder.sockets.close();
                }
                *addr_index = (*addr_index + 1) % addrs.len();
            }
            (
                Target::Tunnel(h) | Target::Url { http: h, .. } | Target::JsonApi(JsonApiTarget { http: h, .. }),
                Conn::Http(c),
            ) => {
                c.reset();
                c.addr_index = (c.addr_index + 1) % h.addrs.len();
            }
            (Target::Admin(a), Conn::Admin(c)) => a.next_address(c, recorder),
            _ => {}
        }
    }

    async fn call_inner(&self, conn: &mut Conn, op: &Op, recorder: &Arc<Recorder>, timeout: Duration) -> Outcome {
        let outcome = match (self, &mut *conn) {
            (Target::Native { protocol, persistent, addrs }, Conn::Native { conn: c, addr_index, holds_socket }) => {
                native(*protocol, *persistent, addrs[*addr_index % addrs.len()], c, holds_socket, op, recorder, timeout)
                    .await
            }
            (Target::Tunnel(h), Conn::Http(c)) => tunnel(h, c, op, recorder).await,
            (Target::Url { http, request }, Conn::Http(c)) => url_request(http, request, c, op, recorder).await,
            (Target::Admin(a), Conn::Admin(c)) => a.call(c, op, recorder, timeout).await,
            (Target::JsonApi(j), Conn::Http(c)) => j.call(c, op, recorder).await,
            _ => unreachable!("connections are made by their target"),
        };
        match outcome {
            Ok(o) => o,
            Err((kind, connection)) => {
                if connection {
                    self.fail_over(conn, recorder);
                }
                Outcome::Failed { kind }
            }
        }
    }
}

fn scheme(h: &HttpTarget) -> &'static str {
    if h.tls.is_some() {
        "https"
    } else {
        "http"
    }
}

fn ka(h: &HttpTarget) -> &'static str {
    if h.keep_alive {
        "keep-alive"
    } else {
        "Connection: close"
    }
}

#[allow(clippy::too_many_arguments)]
async fn native(
    protocol: Protocol,
    persistent: bool,
    addr: SocketAddr,
    slot: &mut Option<Connection>,
    holds_socket: &mut bool,
    op: &Op,
    recorder: &Recorder,
    timeout: Duration,
) -> Res {
    if slot.is_none() {
        *slot = Some(Connection::open(protocol, addr, timeout, persistent).await.map_err(client_error)?);
        if protocol == Protocol::Udp {
            recorder.sockets.open(); // the bound UDP socket, held until the client ends
            *holds_socket = true;
        }
    }
    let c = slot.as_mut().expect("opened above");
    let per_request = protocol == Protocol::Tcp && !persistent;
    let before = c.connections_opened();
    if per_request {
        recorder.sockets.open(); // the client connects inside the request and closes after it
    }
    let result = match op {
        Op::Resolve(key) => c.resolve(key.handle.as_bytes(), &ResolveOptions::default()).await,
        Op::ResolveCertified(key) => {
            c.resolve(key.handle.as_bytes(), &ResolveOptions { certify: true, ..ResolveOptions::default() }).await
        }
        Op::SiteInfo => c.site_info().await,
        other => return Err(unsupported(other)),
    };
    if per_request {
        recorder.sockets.close();
    } else if protocol == Protocol::Tcp {
        // A persistent connection (re)opened during this request.
        for _ in before..c.connections_opened() {
            if std::mem::replace(holds_socket, true) {
                recorder.sockets.close();
            }
            recorder.sockets.open();
        }
    }
    Ok(code_outcome(result.map_err(client_error)?.code(), None))
}

/// Runs check the loop first, so this only guards against misuse of the API.
fn unsupported(op: &Op) -> (String, bool) {
    (format!("{} needs an authenticated target", op.name()), false)
}

fn request_body(op: &Op) -> Result<(RequestBody, OpFlags), (String, bool)> {
    Ok(match op {
        Op::Resolve(key) | Op::ResolveCertified(key) => {
            // What handled-client's resolve() sends by default, plus CT when certified.
            let flags = OpFlags::REC.with(OpFlags::CA).with(OpFlags::PO);
            let flags = if matches!(op, Op::ResolveCertified(_)) { flags.with(OpFlags::CT) } else { flags };
            (
                RequestBody::Resolution(ResolutionRequest {
                    handle: key.handle.clone().into_bytes(),
                    indexes: vec![],
                    types: vec![],
                }),
                flags,
            )
        }
        Op::SiteInfo => (RequestBody::GetSiteInfo { handle: b"/".to_vec() }, OpFlags::REC),
        other => return Err(unsupported(other)),
    })
}

fn http_err(e: HttpError) -> (String, bool) {
    (e.kind, e.connection)
}

async fn tunnel(h: &HttpTarget, c: &mut HttpConn, op: &Op, recorder: &Arc<Recorder>) -> Res {
    let (body, flags) = request_body(op)?;
    let request_id = rand::random::<i32>() & 0x7fff_ffff | 1;
    let unit = encode_request(&body, flags, request_id);
    let builder = hyper::Request::post("/").header("content-type", HDL).header("accept", HDL);
    let reply = c.send(h, recorder, builder, Bytes::from(unit)).await.map_err(http_err)?;
    if !(200..300).contains(&reply.status) {
        return Ok(Outcome::Refused { kind: format!("http {}", reply.status), server: reply.server_time });
    }
    // The body may hold several messages (CN); the first carries the code.
    let first = Envelope::read(&mut Reader::new(&reply.body))
        .ok()
        .and_then(|e| e.check_message_length().ok())
        .and_then(|len| reply.body.get(..ENVELOPE_LEN + len));
    let Some(first) = first else {
        return Err(("malformed".into(), false));
    };
    let response = decode_response(first, request_id).map_err(client_error)?;
    Ok(code_outcome(response.code(), reply.server_time))
}

pub fn fill_template(template: &str, op: &Op) -> String {
    match op {
        Op::Resolve(key) | Op::ResolveCertified(key) => template
            .replace("{handle_enc}", &percent_encode(&key.handle))
            .replace("{handle}", &key.handle)
            .replace("{n}", &key.n.to_string()),
        _ => template.to_string(),
    }
}

async fn url_request(h: &HttpTarget, request: &UrlRequest, c: &mut HttpConn, op: &Op, recorder: &Arc<Recorder>) -> Res {
    let mut builder = hyper::Request::builder()
        .method(request.method.clone())
        .uri(fill_template(&request.template, op))
        .header("accept", "application/json");
    if let Some(auth) = &request.authorization {
        builder = builder.header("authorization", auth.as_str());
    }
    let body = match &request.body {
        Some(template) => {
            builder = builder.header("content-type", "application/json");
            Bytes::from(fill_template(template, op))
        }
        None => Bytes::new(),
    };
    let reply = c.send(h, recorder, builder, body).await.map_err(http_err)?;
    Ok(http_outcome(&reply))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Key;

    #[test]
    fn templates_fill_handle_forms() {
        let op = Op::Resolve(Key { handle: "TEST/a b".into(), n: 7 });
        assert_eq!(fill_template("/api/handles/{handle}", &op), "/api/handles/TEST/a b");
        assert_eq!(fill_template("/hyperty/url/{handle_enc}?i={n}", &op), "/hyperty/url/TEST%2Fa%20b?i=7");
    }
}
