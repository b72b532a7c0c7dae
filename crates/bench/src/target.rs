//! Where the load goes and over what: the native protocol through
//! `handled-client` (UDP, TCP per request or persistent), the HTTP tunnel
//! (the client's encoder/decoder in our HTTP engine, which adds TLS,
//! `Connection: close`, socket counts and `Server-Timing`), requests to a URL
//! template (the JSON API, or any HTTP service), or, as an administrator, an
//! authenticated session or the JSON API with Basic (`admin.rs`).

use crate::admin::{AdminConn, AdminTarget, JsonApiTarget};
use crate::http::{HttpConn, HttpError, HttpTarget};
use crate::outcome::{http_outcome, percent_encode, Res};
use crate::recorder::{Outcome, Recorder};
use crate::wire::{first_unit, judge, ReplyCheck, UnitCache, WireConn};
use crate::workload::{Op, OpKind};
use bytes::Bytes;
use handled_client::Protocol;
use hyper::Method;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Tries of opening an admin session that the server answers "too busy" (its
/// bound on proofs checked at once), backing off 50 ms doubling to 1 s.
const PREPARE_BUSY_TRIES: usize = 12;

pub enum Target {
    Native {
        protocol: Protocol,
        persistent: bool,
        addrs: Vec<SocketAddr>,
        check: ReplyCheck,
    },
    /// POST `application/x-hdl-message` to `/`.
    Tunnel {
        http: HttpTarget,
        check: ReplyCheck,
    },
    /// Requests to a URL template, `{handle}`, `{handle_enc}` (percent-encoded)
    /// and `{n}` (or `{seq}`) filled in, in the path and the body alike.
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
    Native {
        conn: Option<WireConn>,
        addr_index: usize,
    },
    /// The tunnel: the HTTP connection and this client's request units.
    Tunnel(HttpConn, UnitCache),
    Http(HttpConn),
    // Boxed: a session (keys, connection) is large next to the other states.
    Admin(Box<AdminConn>),
}

const HDL: &str = "application/x-hdl-message";

impl Target {
    pub fn describe(&self) -> String {
        let raw =
            |check: &ReplyCheck| if *check == ReplyCheck::Raw { ", raw: replies counted, not parsed" } else { "" };
        match self {
            Target::Native { protocol, persistent, check, .. } => {
                let how = match (protocol, persistent) {
                    (Protocol::Udp, _) => "udp",
                    (Protocol::Tcp, false) => "tcp (connection per request)",
                    (Protocol::Tcp, true) => "tcp (persistent)",
                    (Protocol::Http, _) => "http (client tunnel)",
                };
                format!("{how}{}", raw(check))
            }
            Target::Tunnel { http: h, check } => format!("{} tunnel ({}{})", scheme(h), ka(h), raw(check)),
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
            Target::Tunnel { http: h, .. }
            | Target::Url { http: h, .. }
            | Target::JsonApi(JsonApiTarget { http: h, .. }) => h.addrs[0],
        }
    }

    /// Can this target carry `op`?
    pub fn supports(&self, op: OpKind) -> bool {
        match self {
            Target::Admin(_) => true,
            Target::JsonApi(j) => op != OpKind::SiteInfo && (!op.is_admin() || j.authorization.is_some()),
            Target::Url { .. } => op != OpKind::SiteInfo && !op.is_admin(),
            Target::Native { .. } | Target::Tunnel { .. } => !op.is_admin(),
        }
    }

    /// A fresh client connection; sockets are opened lazily by `call`, or
    /// by `prepare` for sessions.
    pub fn conn(&self) -> Conn {
        match self {
            Target::Native { .. } => Conn::Native { conn: None, addr_index: 0 },
            Target::Tunnel { .. } => Conn::Tunnel(HttpConn::default(), UnitCache::default()),
            Target::Admin(_) => Conn::Admin(Box::default()),
            _ => Conn::Http(HttpConn::default()),
        }
    }

    /// Get a client ready before measurement: an admin session is opened and
    /// authenticated (a failure here is the run's error: bad credentials).
    pub async fn prepare(&self, conn: &mut Conn, recorder: &Recorder, timeout: Duration) -> Result<(), String> {
        match (self, conn) {
            (Target::Admin(a), Conn::Admin(c)) => {
                // A server checks a bounded number of proofs at once and says
                // "too busy" beyond: sessions opened together take turns, as
                // a client that backs off would.
                let mut pause = Duration::from_millis(50);
                for _ in 0..PREPARE_BUSY_TRIES {
                    match tokio::time::timeout(timeout, a.open(c, recorder, timeout)).await {
                        Ok(Ok(())) => return Ok(()),
                        Ok(Err((kind, _))) if kind.starts_with("SERVER_TOO_BUSY") => {
                            a.drop_session(c, recorder);
                            tokio::time::sleep(pause).await;
                            pause = (pause * 2).min(Duration::from_secs(1));
                        }
                        Ok(Err((kind, _))) => {
                            return Err(format!("cannot open an admin session ({}): {kind}", a.describe()))
                        }
                        Err(_) => {
                            return Err(format!(
                                "cannot open an admin session ({}): no answer within {timeout:?}",
                                a.describe()
                            ))
                        }
                    }
                }
                Err(format!("cannot open an admin session ({}): the server stayed too busy", a.describe()))
            }
            _ => Ok(()),
        }
    }

    /// Release what a connection holds (for the socket counts).
    pub fn close(&self, conn: Conn, recorder: &Recorder) {
        match (self, conn) {
            (_, Conn::Native { conn: Some(c), .. }) => c.release(recorder),
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
            (Target::Native { addrs, .. }, Conn::Native { conn, addr_index }) => {
                if let Some(c) = conn.take() {
                    c.release(recorder);
                }
                *addr_index = (*addr_index + 1) % addrs.len();
            }
            (
                Target::Tunnel { http: h, .. }
                | Target::Url { http: h, .. }
                | Target::JsonApi(JsonApiTarget { http: h, .. }),
                Conn::Http(c) | Conn::Tunnel(c, _),
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
            (Target::Native { protocol, persistent, addrs, check }, Conn::Native { conn: c, addr_index }) => {
                let addr = addrs[*addr_index % addrs.len()];
                native(*protocol, *persistent, addr, *check, c, op, recorder, timeout).await
            }
            (Target::Tunnel { http, check }, Conn::Tunnel(c, units)) => {
                tunnel(http, *check, c, units, op, recorder).await
            }
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
    check: ReplyCheck,
    slot: &mut Option<WireConn>,
    op: &Op,
    recorder: &Recorder,
    timeout: Duration,
) -> Res {
    if slot.is_none() {
        let conn = WireConn::open(protocol, addr, persistent, timeout, recorder).await;
        *slot = Some(conn.map_err(|e| (format!("io {:?}", e.kind()), true))?);
    }
    slot.as_mut().expect("opened above").exchange(op, check, recorder).await
}

fn http_err(e: HttpError) -> (String, bool) {
    (e.kind, e.connection)
}

async fn tunnel(
    h: &HttpTarget,
    check: ReplyCheck,
    c: &mut HttpConn,
    units: &mut UnitCache,
    op: &Op,
    recorder: &Arc<Recorder>,
) -> Res {
    let (unit, id) = units.unit(op)?;
    let unit = Bytes::copy_from_slice(unit);
    let builder = hyper::Request::post("/").header("content-type", HDL).header("accept", HDL);
    let reply = c.send(h, recorder, builder, unit).await.map_err(http_err)?;
    if !(200..300).contains(&reply.status) {
        return Ok(Outcome::Refused { kind: format!("http {}", reply.status), server: reply.server_time });
    }
    match check {
        ReplyCheck::Raw => judge(&reply.body, id, check, reply.server_time),
        // The body may hold several messages (CN); the first carries the code.
        ReplyCheck::Protocol => {
            let first = first_unit(&reply.body).ok_or_else(|| ("malformed".to_string(), false))?;
            judge(first, id, check, reply.server_time)
        }
    }
}

pub fn fill_template(template: &str, op: &Op) -> String {
    match op {
        Op::Resolve(key) | Op::ResolveCertified(key) => template
            .replace("{handle_enc}", &percent_encode(&key.handle))
            .replace("{handle}", &key.handle)
            .replace("{n}", &key.n.to_string())
            .replace("{seq}", &key.n.to_string()),
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
        assert_eq!(fill_template("/x?i={seq}", &op), "/x?i=7", "the alias the help can show");
    }
}
