//! Where the load goes and over what: the native protocol through
//! `handled-client` (UDP, TCP per request or persistent), the HTTP tunnel
//! (the client's encoder/decoder in our HTTP engine, which adds TLS,
//! `Connection: close`, socket counts and `Server-Timing`), or GETs of a URL
//! template (the JSON API, or any HTTP service).

use crate::http::{HttpConn, HttpError, HttpTarget};
use crate::stats::{Outcome, Recorder};
use crate::workload::Op;
use bytes::Bytes;
use handled_client::{
    decode_response, encode_request, ClientError, Connection, Protocol, ResolveOptions,
};
use handled_proto::codec::{Codec, Reader};
use handled_proto::envelope::{Envelope, ENVELOPE_LEN};
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::request::{RequestBody, ResolutionRequest};
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
    /// GET `template` with `{handle}`, `{handle_enc}` (percent-encoded) or `{n}` filled in.
    Get { http: HttpTarget, template: String },
}

/// One client's connection state.
pub enum Conn {
    Native {
        conn: Option<Connection>,
        addr_index: usize,
        holds_socket: bool,
    },
    Http(HttpConn),
}

const HDL: &str = "application/x-hdl-message";

impl Target {
    pub fn describe(&self) -> String {
        match self {
            Target::Native {
                protocol: Protocol::Udp,
                ..
            } => "udp".into(),
            Target::Native {
                protocol: Protocol::Tcp,
                persistent: false,
                ..
            } => "tcp (connection per request)".into(),
            Target::Native {
                protocol: Protocol::Tcp,
                persistent: true,
                ..
            } => "tcp (persistent)".into(),
            Target::Native {
                protocol: Protocol::Http,
                ..
            } => "http (client tunnel)".into(),
            Target::Tunnel(h) => format!("{} tunnel ({})", scheme(h), ka(h)),
            Target::Get { http, template } => format!(
                "GET {}://{}{} ({})",
                scheme(http),
                http.authority,
                template,
                ka(http)
            ),
        }
    }

    pub fn first_addr(&self) -> SocketAddr {
        match self {
            Target::Native { addrs, .. } => addrs[0],
            Target::Tunnel(h) | Target::Get { http: h, .. } => h.addrs[0],
        }
    }

    /// Can this target carry `op`?
    pub fn supports(&self, op: crate::workload::OpKind) -> bool {
        !matches!(
            (self, op),
            (Target::Get { .. }, crate::workload::OpKind::SiteInfo)
        )
    }

    /// A fresh client connection; sockets are opened lazily by `call`.
    pub fn conn(&self) -> Conn {
        match self {
            Target::Native { .. } => Conn::Native {
                conn: None,
                addr_index: 0,
                holds_socket: false,
            },
            _ => Conn::Http(HttpConn::default()),
        }
    }

    /// Release what a connection holds (for the socket counts).
    pub fn close(&self, conn: Conn, recorder: &Recorder) {
        if let Conn::Native {
            holds_socket: true, ..
        } = conn
        {
            recorder.sockets.close();
        }
    }

    /// Send one operation and wait for its answer, at most `timeout`.
    pub async fn call(
        &self,
        conn: &mut Conn,
        op: &Op,
        recorder: &Arc<Recorder>,
        timeout: Duration,
    ) -> Outcome {
        match tokio::time::timeout(timeout, self.call_inner(conn, op, recorder, timeout)).await {
            Ok(outcome) => outcome,
            Err(_) => {
                // The connection may hold a late answer: don't reuse it.
                self.fail_over(conn, recorder);
                Outcome::Failed {
                    kind: "timeout".into(),
                }
            }
        }
    }

    /// Drop the connection and move the client to the next address.
    fn fail_over(&self, conn: &mut Conn, recorder: &Recorder) {
        match (self, conn) {
            (
                Target::Native { addrs, .. },
                Conn::Native {
                    conn,
                    addr_index,
                    holds_socket,
                },
            ) => {
                *conn = None;
                if std::mem::take(holds_socket) {
                    recorder.sockets.close();
                }
                *addr_index = (*addr_index + 1) % addrs.len();
            }
            (Target::Tunnel(h) | Target::Get { http: h, .. }, Conn::Http(c)) => {
                c.reset();
                c.addr_index = (c.addr_index + 1) % h.addrs.len();
            }
            _ => {}
        }
    }

    async fn call_inner(
        &self,
        conn: &mut Conn,
        op: &Op,
        recorder: &Arc<Recorder>,
        timeout: Duration,
    ) -> Outcome {
        let outcome = match (self, &mut *conn) {
            (
                Target::Native {
                    protocol,
                    persistent,
                    addrs,
                },
                Conn::Native {
                    conn: c,
                    addr_index,
                    holds_socket,
                },
            ) => {
                native(
                    *protocol,
                    *persistent,
                    addrs[*addr_index % addrs.len()],
                    c,
                    holds_socket,
                    op,
                    recorder,
                    timeout,
                )
                .await
            }
            (Target::Tunnel(h), Conn::Http(c)) => tunnel(h, c, op, recorder).await,
            (Target::Get { http, template }, Conn::Http(c)) => {
                get(http, template, c, op, recorder).await
            }
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

type Res = Result<Outcome, (String, bool)>;

fn client_error(e: ClientError) -> (String, bool) {
    match e {
        ClientError::Timeout(_) => ("timeout".into(), true),
        ClientError::Io(e) => (format!("io {:?}", e.kind()), true),
        ClientError::Decode(_) => ("malformed".into(), false),
        ClientError::Http(_) => ("http".into(), true),
        ClientError::WrongRequestId { .. } => ("wrong-request-id".into(), true),
    }
}

fn code_outcome(code: ResponseCode, server: Option<Duration>) -> Outcome {
    if code == ResponseCode::SUCCESS {
        Outcome::Ok { server }
    } else {
        Outcome::Refused {
            kind: code.name().to_string(),
            server,
        }
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
        *slot = Some(
            Connection::open(protocol, addr, timeout, persistent)
                .await
                .map_err(client_error)?,
        );
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
        Op::Resolve(key) => {
            c.resolve(key.handle.as_bytes(), &ResolveOptions::default())
                .await
        }
        Op::ResolveCertified(key) => {
            c.resolve(
                key.handle.as_bytes(),
                &ResolveOptions {
                    certify: true,
                    ..ResolveOptions::default()
                },
            )
            .await
        }
        Op::SiteInfo => c.site_info().await,
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

fn request_body(op: &Op) -> (RequestBody, OpFlags) {
    match op {
        Op::Resolve(key) | Op::ResolveCertified(key) => {
            // What handled-client's resolve() sends by default, plus CT when certified.
            let flags = OpFlags::REC.with(OpFlags::CA).with(OpFlags::PO);
            let flags = if matches!(op, Op::ResolveCertified(_)) {
                flags.with(OpFlags::CT)
            } else {
                flags
            };
            (
                RequestBody::Resolution(ResolutionRequest {
                    handle: key.handle.clone().into_bytes(),
                    indexes: vec![],
                    types: vec![],
                }),
                flags,
            )
        }
        Op::SiteInfo => (
            RequestBody::GetSiteInfo {
                handle: b"/".to_vec(),
            },
            OpFlags::REC,
        ),
    }
}

fn http_err(e: HttpError) -> (String, bool) {
    (e.kind, e.connection)
}

async fn tunnel(h: &HttpTarget, c: &mut HttpConn, op: &Op, recorder: &Arc<Recorder>) -> Res {
    let (body, flags) = request_body(op);
    let request_id = rand::random::<i32>() & 0x7fff_ffff | 1;
    let unit = encode_request(&body, flags, request_id);
    let builder = hyper::Request::post("/")
        .header("content-type", HDL)
        .header("accept", HDL);
    let reply = c
        .send(h, recorder, builder, Bytes::from(unit))
        .await
        .map_err(http_err)?;
    if !(200..300).contains(&reply.status) {
        return Ok(Outcome::Refused {
            kind: format!("http {}", reply.status),
            server: reply.server_time,
        });
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

pub fn fill_template(template: &str, op: &Op) -> String {
    match op {
        Op::Resolve(key) | Op::ResolveCertified(key) => template
            .replace("{handle_enc}", &percent_encode(&key.handle))
            .replace("{handle}", &key.handle)
            .replace("{n}", &key.n.to_string()),
        Op::SiteInfo => template.to_string(),
    }
}

async fn get(
    h: &HttpTarget,
    template: &str,
    c: &mut HttpConn,
    op: &Op,
    recorder: &Arc<Recorder>,
) -> Res {
    let builder =
        hyper::Request::get(fill_template(template, op)).header("accept", "application/json");
    let reply = c
        .send(h, recorder, builder, Bytes::new())
        .await
        .map_err(http_err)?;
    Ok(if (200..300).contains(&reply.status) {
        Outcome::Ok {
            server: reply.server_time,
        }
    } else {
        Outcome::Refused {
            kind: format!("http {}", reply.status),
            server: reply.server_time,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Key;

    #[test]
    fn templates_fill_handle_forms() {
        let op = Op::Resolve(Key {
            handle: "TEST/a b".into(),
            n: 7,
        });
        assert_eq!(
            fill_template("/api/handles/{handle}", &op),
            "/api/handles/TEST/a b"
        );
        assert_eq!(
            fill_template("/hyperty/url/{handle_enc}?i={n}", &op),
            "/hyperty/url/TEST%2Fa%20b?i=7"
        );
    }
}

/// Resolve `host:port` to every address it has.
pub fn resolve_addrs(host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("{host} has no address"));
    }
    Ok(addrs)
}

/// A URL template split up: (https?, host, port, path with placeholders).
/// Parsed by hand because `{handle}` is not valid in a URI.
pub fn parse_url_template(url: &str) -> Result<(bool, String, u16, String), String> {
    let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else {
        return Err(format!("{url}: expected http:// or https://"));
    };
    let (authority, path) = rest
        .find('/')
        .map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
    let default_port = if tls { 443 } else { 80 };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => (
            h.trim_start_matches('[').trim_end_matches(']').to_string(),
            p.parse().map_err(|_| format!("{url}: bad port {p}"))?,
        ),
        _ => (authority.to_string(), default_port),
    };
    if host.is_empty() {
        return Err(format!("{url}: no host"));
    }
    Ok((tls, host, port, path.to_string()))
}

#[cfg(test)]
mod url_tests {
    use super::parse_url_template;

    #[test]
    fn url_templates_split() {
        assert_eq!(
            parse_url_template("http://127.0.0.1:8000/api/handles/{handle}").unwrap(),
            (
                false,
                "127.0.0.1".into(),
                8000,
                "/api/handles/{handle}".into()
            )
        );
        assert_eq!(
            parse_url_template("https://example.org").unwrap(),
            (true, "example.org".into(), 443, "/".into())
        );
        assert_eq!(
            parse_url_template("http://[::1]:81/x").unwrap(),
            (false, "::1".into(), 81, "/x".into())
        );
        assert!(parse_url_template("ftp://x/").is_err());
    }
}
