//! Framing per protocol: UDP datagrams (with 492-byte chunking), TCP streams
//! and HTTP/1.1 POSTs of `application/x-hdl-message`.

use crate::ClientError;
use bytes::Bytes;
use handled_proto::codec::{Codec, Reader};
use handled_proto::envelope::{Envelope, ENVELOPE_LEN};
use handled_proto::header::{Header, OpFlags, HEADER_LEN};
use handled_proto::udp::{split_datagrams, Reassembly};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Udp,
    Tcp,
    Http,
}

pub(crate) enum Transport {
    Udp { socket: UdpSocket, retry_after: Duration },
    Tcp { addr: SocketAddr, stream: Option<TcpStream>, persistent: bool, opened: u64 },
    Http { addr: SocketAddr, sender: SendRequest<Full<Bytes>>, opened: u64 },
}

async fn http_connect(addr: SocketAddr) -> Result<SendRequest<Full<Bytes>>, ClientError> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| ClientError::Http(e.to_string()))?;
    tokio::spawn(conn);
    Ok(sender)
}

impl Transport {
    pub(crate) async fn open(
        protocol: Protocol,
        addr: SocketAddr,
        timeout: Duration,
        persistent: bool,
    ) -> Result<Self, ClientError> {
        Ok(match protocol {
            Protocol::Udp => {
                let local: SocketAddr =
                    if addr.is_ipv4() { "0.0.0.0:0".parse().unwrap() } else { "[::]:0".parse().unwrap() };
                let socket = UdpSocket::bind(local).await?;
                socket.connect(addr).await?;
                // The Java client retries after 0.5 s; keep at least that.
                Transport::Udp { socket, retry_after: (timeout / 3).max(Duration::from_millis(500)) }
            }
            Protocol::Tcp => Transport::Tcp { addr, stream: None, persistent, opened: 0 },
            Protocol::Http => Transport::Http { addr, sender: http_connect(addr).await?, opened: 1 },
        })
    }

    /// A TCP connection kept for the next request.
    pub(crate) fn keeps_stream(&self) -> bool {
        matches!(self, Transport::Tcp { persistent: true, .. })
    }

    pub(crate) fn connections_opened(&self) -> u64 {
        match self {
            Transport::Udp { .. } => 0,
            Transport::Tcp { opened, .. } | Transport::Http { opened, .. } => *opened,
        }
    }

    /// Send a request unit; return the response units.
    pub(crate) async fn exchange(&mut self, unit: &[u8], request_id: i32) -> Result<Vec<Vec<u8>>, ClientError> {
        match self {
            Transport::Udp { socket, retry_after } => {
                udp_exchange(socket, *retry_after, unit, request_id).await.map(|u| vec![u])
            }
            Transport::Tcp { addr, stream, persistent, opened } => {
                if let Some(mut kept) = stream.take() {
                    match tcp_exchange(&mut kept, unit).await {
                        Ok(units) => {
                            *stream = Some(kept);
                            return Ok(units);
                        }
                        // Closed before any answer came: the server ended it
                        // between requests (its idle timeout; Handle.Net closes
                        // after every answer), so send on a new connection.
                        Err(Unanswered::Closed) => {}
                        Err(Unanswered::Failed(e)) => return Err(e),
                    }
                }
                *opened += 1;
                let mut conn = TcpStream::connect(*addr).await?;
                conn.set_nodelay(true)?;
                conn.write_all(unit).await?;
                let units = read_units(&mut conn).await?;
                if *persistent {
                    *stream = Some(conn);
                }
                Ok(units)
            }
            Transport::Http { addr, sender, opened } => {
                if sender.ready().await.is_err() {
                    *sender = http_connect(*addr).await?;
                    *opened += 1;
                }
                let request = hyper::Request::post("/")
                    .header("host", addr.to_string())
                    .header("content-type", "application/x-hdl-message")
                    .header("accept", "application/x-hdl-message")
                    .body(Full::new(Bytes::copy_from_slice(unit)))
                    .map_err(|e| ClientError::Http(e.to_string()))?;
                let response = sender.send_request(request).await.map_err(|e| ClientError::Http(e.to_string()))?;
                if !response.status().is_success() {
                    return Err(ClientError::Http(format!("status {}", response.status())));
                }
                let body =
                    response.into_body().collect().await.map_err(|e| ClientError::Http(e.to_string()))?.to_bytes();
                split_units(&body)
            }
        }
    }
}

/// Why a TCP exchange got no answer.
enum Unanswered {
    /// The connection was closed (or reset) before any of an answer came.
    Closed,
    Failed(ClientError),
}

/// Write a request unit on a kept connection and read its answer's units.
async fn tcp_exchange(conn: &mut TcpStream, unit: &[u8]) -> Result<Vec<Vec<u8>>, Unanswered> {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    let closed = |e: &std::io::Error| matches!(e.kind(), BrokenPipe | ConnectionReset | ConnectionAborted);
    if let Err(e) = conn.write_all(unit).await {
        return Err(if closed(&e) { Unanswered::Closed } else { Unanswered::Failed(e.into()) });
    }
    // The first byte tells a closed connection from an answer that broke off.
    let mut first = [0u8; 1];
    match conn.read(&mut first).await {
        Ok(0) => return Err(Unanswered::Closed),
        Ok(_) => {}
        Err(e) if closed(&e) => return Err(Unanswered::Closed),
        Err(e) => return Err(Unanswered::Failed(e.into())),
    }
    read_units_after(conn, Some(first[0])).await.map_err(Unanswered::Failed)
}

/// Does this response unit say more messages follow (CN)?
/// An encrypted unit's header can't be read here; it counts as the last one.
fn continues(unit: &[u8]) -> bool {
    let encrypted = Envelope::read(&mut Reader::new(unit)).is_ok_and(|e| e.encrypted);
    !encrypted
        && unit.len() >= ENVELOPE_LEN + HEADER_LEN
        && Header::read(&mut Reader::new(&unit[ENVELOPE_LEN..])).is_ok_and(|h| h.op_flags.contains(OpFlags::CN))
}

pub(crate) async fn read_units(stream: &mut TcpStream) -> Result<Vec<Vec<u8>>, ClientError> {
    read_units_after(stream, None).await
}

/// [`read_units`] when the answer's first byte was read already.
async fn read_units_after(stream: &mut TcpStream, mut first: Option<u8>) -> Result<Vec<Vec<u8>>, ClientError> {
    let mut units = Vec::new();
    loop {
        let mut unit = vec![0u8; ENVELOPE_LEN];
        let start = match first.take() {
            Some(byte) => {
                unit[0] = byte;
                1
            }
            None => 0,
        };
        stream.read_exact(&mut unit[start..]).await?;
        let envelope = Envelope::read(&mut Reader::new(&unit))?;
        let length = envelope.check_message_length()?;
        unit.resize(ENVELOPE_LEN + length, 0);
        stream.read_exact(&mut unit[ENVELOPE_LEN..]).await?;
        let more = continues(&unit);
        units.push(unit);
        if !more {
            return Ok(units);
        }
    }
}

fn split_units(mut body: &[u8]) -> Result<Vec<Vec<u8>>, ClientError> {
    let mut units = Vec::new();
    while !body.is_empty() {
        let envelope = Envelope::read(&mut Reader::new(body))?;
        let end = ENVELOPE_LEN + envelope.check_message_length()?;
        if body.len() < end {
            return Err(ClientError::Http(format!("body truncated: {} of {end} bytes", body.len())));
        }
        units.push(body[..end].to_vec());
        body = &body[end..];
    }
    Ok(units)
}

async fn udp_exchange(
    socket: &UdpSocket,
    retry_after: Duration,
    unit: &[u8],
    request_id: i32,
) -> Result<Vec<u8>, ClientError> {
    let envelope = Envelope::read(&mut Reader::new(unit))?;
    let datagrams = if unit.len() <= handled_proto::udp::MAX_DATAGRAM {
        vec![unit.to_vec()]
    } else {
        split_datagrams(&envelope, &unit[ENVELOPE_LEN..], true)
    };
    let mut buf = vec![0u8; 65_536];
    loop {
        for d in &datagrams {
            socket.send(d).await?;
        }
        let deadline = tokio::time::Instant::now() + retry_after;
        let mut reassembly: Option<(Vec<u8>, Reassembly)> = None;
        loop {
            let n = match tokio::time::timeout_at(deadline, socket.recv(&mut buf)).await {
                Ok(r) => r?,
                Err(_) => break, // resend
            };
            let datagram = &buf[..n];
            let Ok(env) = Envelope::read(&mut Reader::new(datagram)) else { continue };
            if env.request_id != request_id {
                continue; // a late answer to an earlier try
            }
            let length = env.check_message_length()?;
            if reassembly.is_none() && n == ENVELOPE_LEN + length {
                return Ok(datagram.to_vec());
            }
            let (first, r) =
                reassembly.get_or_insert_with(|| (datagram[..ENVELOPE_LEN].to_vec(), Reassembly::new(&env)));
            if let Some(message) = r.add(env.sequence, &datagram[ENVELOPE_LEN..])? {
                let mut whole = std::mem::take(first);
                whole.extend_from_slice(&message);
                return Ok(whole);
            }
        }
    }
}
