//! UDP (§4.1): several SO_REUSEPORT sockets so the kernel spreads datagrams
//! over cores; multi-datagram requests are reassembled by (peer, request id)
//! and replies over 512 bytes go out in 492-byte chunks.

use crate::native::{handle_unit, read_envelope, Transport};
use crate::state::ServerState;
use handled_proto::envelope::ENVELOPE_LEN;
use handled_proto::udp::{split_datagrams, Reassembly, MAX_DATAGRAM};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;

/// Unfinished multi-datagram requests are dropped after this long.
const REASSEMBLY_TIMEOUT: Duration = Duration::from_secs(5);
/// At most this many unfinished requests per socket (a flood cannot grow memory).
const MAX_PENDING: usize = 1024;
const SOCKET_BUFFER: usize = 4 << 20;

/// Bind `count` sockets to the same address with SO_REUSEPORT.
pub fn bind(addr: SocketAddr, count: usize) -> std::io::Result<Vec<UdpSocket>> {
    let mut sockets = Vec::with_capacity(count);
    let mut addr = addr;
    for _ in 0..count.max(1) {
        let s = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
        s.set_reuse_port(true)?;
        let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
        let _ = s.set_send_buffer_size(SOCKET_BUFFER);
        s.set_nonblocking(true)?;
        s.bind(&addr.into())?;
        // With port 0 the first bind picks the port; the others must share it.
        addr = s.local_addr()?.as_socket().unwrap_or(addr);
        sockets.push(UdpSocket::from_std(s.into())?);
    }
    Ok(sockets)
}

/// Serve one socket until the task is dropped.
pub async fn serve(state: Arc<ServerState>, socket: UdpSocket) {
    let mut buf = vec![0u8; 65_536];
    let mut pending: HashMap<(SocketAddr, i32), (Instant, Reassembly)> = HashMap::new();
    loop {
        let (n, peer) = match socket.recv_from(&mut buf).await {
            Ok(x) => x,
            Err(e) => {
                // ICMP errors from earlier sends surface here; they concern one peer only.
                tracing::debug!("udp recv: {e}");
                continue;
            }
        };
        let datagram = &buf[..n];
        let Some(envelope) = read_envelope(datagram) else { continue };
        let assembled;
        let unit: &[u8] = if envelope.truncated {
            match reassemble(&mut pending, peer, datagram) {
                Some(full) => {
                    assembled = full;
                    &assembled
                }
                None => continue,
            }
        } else {
            datagram
        };
        for response in handle_unit(&state, unit, Transport::Udp).await {
            send_response(&socket, peer, &response).await;
        }
    }
}

/// Add a chunk; returns the whole unit (first envelope + full message) once complete.
fn reassemble(pending: &mut HashMap<(SocketAddr, i32), (Instant, Reassembly)>, peer: SocketAddr, datagram: &[u8]) -> Option<Vec<u8>> {
    let envelope = read_envelope(datagram)?;
    let key = (peer, envelope.request_id);
    let now = Instant::now();
    if !pending.contains_key(&key) {
        if pending.len() >= MAX_PENDING {
            pending.retain(|_, (started, _)| now.duration_since(*started) < REASSEMBLY_TIMEOUT);
            if pending.len() >= MAX_PENDING {
                return None;
            }
        }
        pending.insert(key, (now, Reassembly::new(&envelope)));
    }
    let (_, reassembly) = pending.get_mut(&key)?;
    match reassembly.add(envelope.sequence, &datagram[ENVELOPE_LEN..]) {
        Ok(Some(message)) => {
            pending.remove(&key);
            let mut unit = Vec::with_capacity(ENVELOPE_LEN + message.len());
            unit.extend_from_slice(&datagram[..ENVELOPE_LEN]);
            unit.extend_from_slice(&message);
            Some(unit)
        }
        Ok(None) => None,
        Err(e) => {
            tracing::debug!("dropping inconsistent multi-datagram request from {peer}: {e}");
            pending.remove(&key);
            None
        }
    }
}

async fn send_response(socket: &UdpSocket, peer: SocketAddr, unit: &[u8]) {
    if unit.len() <= MAX_DATAGRAM {
        let _ = socket.send_to(unit, peer).await;
        return;
    }
    let Some(envelope) = read_envelope(unit) else { return };
    for datagram in split_datagrams(&envelope, &unit[ENVELOPE_LEN..], false) {
        if let Err(e) = socket.send_to(&datagram, peer).await {
            tracing::debug!("udp send to {peer}: {e}");
            return;
        }
    }
}
