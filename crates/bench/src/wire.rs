//! The native protocol as the load loop needs it, kept cheap so that the
//! client costs less CPU per request than the server it measures: request
//! units encoded once per distinct operation (only the request id changes),
//! reply buffers reused, replies matched by request id and judged by the
//! response code in their header, the body not decoded.
//!
//! Raw mode (`--raw`) checks only that a reply carries the request's id: for
//! the echo references (which answer every request with its own bytes) and
//! other targets that do not speak the protocol.

use crate::outcome::{code_outcome, Res};
use crate::recorder::{Outcome, Recorder};
use crate::workload::Op;
use handled_client::{encode_request, Protocol};
use handled_proto::codec::{Codec, Reader};
use handled_proto::envelope::{Envelope, ENVELOPE_LEN, MAX_MESSAGE_LEN};
use handled_proto::header::{Header, OpFlags, HEADER_LEN};
use handled_proto::request::{RequestBody, ResolutionRequest};
use handled_proto::udp::{split_datagrams, Reassembly, MAX_DATAGRAM};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// How a reply is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyCheck {
    /// A Handle response: its response code decides (success or a refusal).
    Protocol,
    /// Any reply carrying the request's id counts as answered.
    Raw,
}

/// Where the request id sits in an envelope (bytes 8..12, big-endian).
const REQUEST_ID_AT: usize = 8;
/// Largest UDP datagram we accept.
const DATAGRAM_BUFFER: usize = 65_536;
/// A cached request unit is re-encoded after this long, so its expiration
/// time (12 h after encoding) stays in the future on long runs.
const UNIT_MAX_AGE: Duration = Duration::from_secs(3600);

/// The request unit for `op`: what handled-client's `resolve()` sends
/// (REC, CA, PO; CT when certified), or GET_SITE_INFO.
pub fn request_body(op: &Op) -> Result<(RequestBody, OpFlags), (String, bool)> {
    Ok(match op {
        Op::Resolve(key) | Op::ResolveCertified(key) => {
            let flags = OpFlags::REC.with(OpFlags::CA).with(OpFlags::PO);
            let flags = if matches!(op, Op::ResolveCertified(_)) { flags.with(OpFlags::CT) } else { flags };
            let body = RequestBody::Resolution(ResolutionRequest {
                handle: key.handle.as_bytes().to_vec(),
                indexes: vec![],
                types: vec![],
            });
            (body, flags)
        }
        Op::SiteInfo => (RequestBody::GetSiteInfo { handle: b"/".to_vec() }, OpFlags::REC),
        other => return Err((format!("{} needs an authenticated target", other.name()), false)),
    })
}

/// Request units of one client: the last operation's unit is kept and reused
/// with a new request id (the hot-handle case encodes once per client).
#[derive(Default)]
pub struct UnitCache {
    last: Option<(Op, Vec<u8>, Instant)>,
    next_id: i32,
    /// Set KA: the units go over a TCP connection kept for the next request.
    keep_alive: bool,
}

impl UnitCache {
    /// Units asking the server to keep the connection open (KA), as
    /// handled-client's kept connections do.
    pub fn keeping_alive() -> UnitCache {
        UnitCache { keep_alive: true, ..UnitCache::default() }
    }

    /// The unit for `op` with a fresh request id (positive, never 0).
    pub fn unit(&mut self, op: &Op) -> Result<(&[u8], i32), (String, bool)> {
        if self.next_id == 0 {
            self.next_id = rand::random::<i32>() & 0x3fff_ffff | 1;
        }
        let id = self.next_id;
        self.next_id = if self.next_id >= 0x7fff_fffe { 1 } else { self.next_id + 1 };
        Ok((self.unit_with_id(op, id)?, id))
    }

    /// The unit for `op` carrying request id `id`.
    pub fn unit_with_id(&mut self, op: &Op, id: i32) -> Result<&[u8], (String, bool)> {
        let fresh = matches!(&self.last, Some((last, _, at)) if last == op && at.elapsed() < UNIT_MAX_AGE);
        if !fresh {
            let (body, flags) = request_body(op)?;
            let flags = flags.set(OpFlags::KA, self.keep_alive);
            self.last = Some((op.clone(), encode_request(&body, flags, id), Instant::now()));
        }
        let (_, unit, _) = self.last.as_mut().expect("set above");
        unit[REQUEST_ID_AT..REQUEST_ID_AT + 4].copy_from_slice(&id.to_be_bytes());
        Ok(unit.as_slice())
    }
}

impl UnitCache {
    /// The unit last made (with the id last given), to send it again.
    pub fn last_unit(&self) -> Option<&[u8]> {
        self.last.as_ref().map(|(_, unit, _)| unit.as_slice())
    }
}

fn request_id_of(unit: &[u8]) -> Option<i32> {
    unit.get(REQUEST_ID_AT..REQUEST_ID_AT + 4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn malformed() -> (String, bool) {
    ("malformed".into(), false)
}

/// Judge one complete reply unit (envelope and message) to request `id`.
pub fn judge(unit: &[u8], id: i32, check: ReplyCheck, server: Option<Duration>) -> Res {
    if request_id_of(unit) != Some(id) {
        return Err(("wrong-request-id".into(), false));
    }
    match check {
        ReplyCheck::Raw => Ok(Outcome::Ok { server }),
        ReplyCheck::Protocol => Ok(code_outcome(response_header(unit)?.response_code, server)),
    }
}

/// The header of a reply unit whose lengths agree with its size.
fn response_header(unit: &[u8]) -> Result<Header, (String, bool)> {
    let envelope = Envelope::parse(unit).map_err(|_| malformed())?;
    let length = envelope.check_message_length().map_err(|_| malformed())?;
    if envelope.encrypted || unit.len() != ENVELOPE_LEN + length || length < HEADER_LEN {
        return Err(malformed());
    }
    let header = Header::read(&mut Reader::new(&unit[ENVELOPE_LEN..])).map_err(|_| malformed())?;
    // A request echoed back (response code 0) is not an answer.
    if header.is_request() || header.body_length as usize > length - HEADER_LEN {
        return Err(malformed());
    }
    Ok(header)
}

/// One client's native connection: a connected UDP socket, or a TCP stream
/// (kept between requests when persistent).
pub struct WireConn {
    io: Io,
    units: UnitCache,
    /// Reused for every reply.
    buffer: Vec<u8>,
    /// A socket counted as in use in the recorder's gauge.
    held: bool,
}

enum Io {
    Udp { socket: UdpSocket, retry_after: Duration },
    Tcp { addr: SocketAddr, stream: Option<TcpStream>, persistent: bool },
}

impl WireConn {
    /// UDP binds and connects now (the socket is counted until released);
    /// TCP connects on the first request.
    pub async fn open(
        protocol: Protocol,
        addr: SocketAddr,
        persistent: bool,
        timeout: Duration,
        recorder: &Recorder,
    ) -> std::io::Result<WireConn> {
        let (io, held) = match protocol {
            Protocol::Udp => {
                let local: SocketAddr = if addr.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { ([0u16; 8], 0).into() };
                let socket = UdpSocket::bind(local).await?;
                socket.connect(addr).await?;
                recorder.sockets.open();
                // The Java client re-sends after 0.5 s; keep at least that.
                (Io::Udp { socket, retry_after: (timeout / 3).max(Duration::from_millis(500)) }, true)
            }
            Protocol::Tcp => (Io::Tcp { addr, stream: None, persistent }, false),
            Protocol::Http => {
                return Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "the tunnel is not a wire connection"))
            }
        };
        let units =
            if protocol == Protocol::Tcp && persistent { UnitCache::keeping_alive() } else { UnitCache::default() };
        Ok(WireConn { io, units, buffer: Vec::new(), held })
    }

    /// Give back the counted socket (at the end, or before failing over).
    pub fn release(self, recorder: &Recorder) {
        if self.held {
            recorder.sockets.close();
        }
    }

    /// Send `op` and wait for its reply. The caller bounds the whole call
    /// with its timeout; UDP re-sends after `retry_after` meanwhile.
    pub async fn exchange(&mut self, op: &Op, check: ReplyCheck, recorder: &Recorder) -> Res {
        let (unit, id) = self.units.unit(op)?;
        match &mut self.io {
            Io::Udp { socket, retry_after } => {
                udp_exchange(socket, *retry_after, unit, id, &mut self.buffer, check).await
            }
            Io::Tcp { addr, stream, persistent } => {
                if stream.is_none() {
                    let s = TcpStream::connect(*addr).await.map_err(io_error)?;
                    s.set_nodelay(true).map_err(io_error)?;
                    *stream = Some(s);
                    recorder.sockets.open();
                    self.held = true;
                }
                let s = stream.as_mut().expect("connected above");
                let result = tcp_exchange(s, unit, id, &mut self.buffer, check).await;
                if result.is_err() || !*persistent {
                    *stream = None;
                    recorder.sockets.close();
                    self.held = false;
                }
                result
            }
        }
    }
}

fn io_error(e: std::io::Error) -> (String, bool) {
    (format!("io {:?}", e.kind()), true)
}

async fn udp_exchange(
    socket: &UdpSocket,
    retry_after: Duration,
    unit: &[u8],
    id: i32,
    buffer: &mut Vec<u8>,
    check: ReplyCheck,
) -> Res {
    // Requests larger than one datagram (long handles) go out in pieces.
    let pieces = if unit.len() > MAX_DATAGRAM {
        let envelope = Envelope::parse(unit).map_err(|_| malformed())?;
        split_datagrams(&envelope, &unit[ENVELOPE_LEN..], true)
    } else {
        Vec::new()
    };
    buffer.resize(DATAGRAM_BUFFER, 0);
    loop {
        if pieces.is_empty() {
            socket.send(unit).await.map_err(io_error)?;
        } else {
            for p in &pieces {
                socket.send(p).await.map_err(io_error)?;
            }
        }
        let deadline = tokio::time::Instant::now() + retry_after;
        let mut reassembly: Option<Reassembly> = None;
        loop {
            let n = match tokio::time::timeout_at(deadline, socket.recv(buffer)).await {
                Ok(r) => r.map_err(io_error)?,
                Err(_) => break, // re-send
            };
            let datagram = &buffer[..n];
            if request_id_of(datagram) != Some(id) {
                continue; // a late answer to an earlier try, or noise
            }
            if check == ReplyCheck::Raw {
                return judge(datagram, id, check, None);
            }
            let envelope = Envelope::parse(datagram).map_err(|_| malformed())?;
            let length = envelope.check_message_length().map_err(|_| malformed())?;
            if reassembly.is_none() && n == ENVELOPE_LEN + length {
                return judge(datagram, id, check, None);
            }
            // A reply in several datagrams: rare for resolutions, so it may allocate.
            let r = reassembly.get_or_insert_with(|| Reassembly::new(&envelope));
            if let Some(message) = r.add_datagram(&envelope, &datagram[ENVELOPE_LEN..]).map_err(|_| malformed())? {
                let mut whole = datagram[..ENVELOPE_LEN].to_vec();
                whole.extend_from_slice(&message);
                return judge(&whole, id, check, None);
            }
        }
    }
}

/// Read one unit (envelope and message) into `buffer`.
async fn read_unit(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Result<(), (String, bool)> {
    buffer.resize(ENVELOPE_LEN, 0);
    stream.read_exact(buffer).await.map_err(io_error)?;
    let length = u32::from_be_bytes([buffer[16], buffer[17], buffer[18], buffer[19]]) as usize;
    if length > MAX_MESSAGE_LEN {
        return Err(("malformed".into(), true)); // the stream cannot be re-synchronised
    }
    buffer.resize(ENVELOPE_LEN + length, 0);
    stream.read_exact(&mut buffer[ENVELOPE_LEN..]).await.map_err(io_error)?;
    Ok(())
}

async fn tcp_exchange(stream: &mut TcpStream, unit: &[u8], id: i32, buffer: &mut Vec<u8>, check: ReplyCheck) -> Res {
    stream.write_all(unit).await.map_err(io_error)?;
    read_unit(stream, buffer).await?;
    let outcome = judge(buffer, id, check, None).map_err(|(kind, _)| (kind, true))?;
    if check == ReplyCheck::Protocol {
        // Further messages of a multi-message answer (CN): read past them.
        let mut more = continues(buffer);
        while more {
            read_unit(stream, buffer).await?;
            if request_id_of(buffer) != Some(id) {
                return Err(("wrong-request-id".into(), true));
            }
            more = continues(buffer);
        }
    }
    Ok(outcome)
}

/// Does this response unit say more messages follow (CN)?
fn continues(unit: &[u8]) -> bool {
    response_header(unit).is_ok_and(|h| h.op_flags.contains(OpFlags::CN))
}

/// The first unit of an HTTP tunnel reply body (which may hold several).
pub fn first_unit(body: &[u8]) -> Option<&[u8]> {
    let length = u32::from_be_bytes(body.get(16..20)?.try_into().ok()?) as usize;
    body.get(..ENVELOPE_LEN + length.min(MAX_MESSAGE_LEN))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Key;
    use handled_proto::header::{OpCode, ResponseCode};

    fn resolve(handle: &str) -> Op {
        Op::Resolve(Key { handle: handle.into(), n: 0 })
    }

    /// A reply unit: the request's envelope and a header with `code`, an empty body.
    fn reply(id: i32, code: ResponseCode) -> Vec<u8> {
        let mut header = Vec::new();
        Header::response_to(&Header::request(OpCode::RESOLUTION, OpFlags::REC), code).encode(&mut header);
        let mut envelope = Envelope::new(handled_client::CLIENT_VERSION, handled_client::CLIENT_VERSION, id);
        envelope.message_length = header.len() as i32;
        let mut unit = envelope.to_array().to_vec();
        unit.extend_from_slice(&header);
        unit
    }

    #[test]
    fn units_are_reused_with_a_new_request_id() {
        let mut units = UnitCache::default();
        let (first, id1) = units.unit(&resolve("TEST/1")).map(|(u, id)| (u.to_vec(), id)).unwrap();
        let (second, id2) = units.unit(&resolve("TEST/1")).map(|(u, id)| (u.to_vec(), id)).unwrap();
        assert_ne!(id1, id2);
        assert_eq!((request_id_of(&first), request_id_of(&second)), (Some(id1), Some(id2)));
        assert_eq!(first[..8], second[..8]);
        assert_eq!(first[12..], second[12..], "only the request id differs");
        let (third, _) = units.unit(&resolve("TEST/22")).unwrap();
        assert_eq!(third.len(), first.len() + 1, "another handle is encoded anew");
        assert_eq!(units.last_unit().map(<[u8]>::len), Some(first.len() + 1));
        assert!(units.unit(&Op::Delete("TEST/1".into())).is_err(), "admin operations need a session");
    }

    #[test]
    fn replies_are_judged_by_id_and_response_code() {
        let ok = judge(&reply(7, ResponseCode::SUCCESS), 7, ReplyCheck::Protocol, None).unwrap();
        assert!(matches!(ok, Outcome::Ok { .. }));
        let refused = judge(&reply(7, ResponseCode::HANDLE_NOT_FOUND), 7, ReplyCheck::Protocol, None).unwrap();
        assert!(matches!(refused, Outcome::Refused { kind, .. } if kind == "HANDLE_NOT_FOUND"));
        assert_eq!(
            judge(&reply(8, ResponseCode::SUCCESS), 7, ReplyCheck::Protocol, None).unwrap_err().0,
            "wrong-request-id"
        );
        // The request itself, echoed: an answer only in raw mode.
        let mut units = UnitCache::default();
        let (request, id) = units.unit(&resolve("TEST/1")).map(|(u, id)| (u.to_vec(), id)).unwrap();
        assert_eq!(judge(&request, id, ReplyCheck::Protocol, None).unwrap_err().0, "malformed");
        assert!(matches!(judge(&request, id, ReplyCheck::Raw, None), Ok(Outcome::Ok { .. })));
        // Lengths that disagree with the bytes, and garbage, never panic.
        let mut short = reply(7, ResponseCode::SUCCESS);
        short.pop();
        assert!(judge(&short, 7, ReplyCheck::Protocol, None).is_err());
        assert!(judge(&[1, 2, 3], 7, ReplyCheck::Raw, None).is_err());
        assert_eq!(first_unit(&[0u8; 10]), None);
    }
}
