//! TCP (§4.2): the Java client sends one request per connection, others keep
//! the connection open; we answer requests until the peer closes or idles out.

use super::accept::Acceptor;
use super::serve_parsed;
use super::tcp_early::{first_request, Early, EarlyReply};
use super::tcp_reset::reset_if_all_delivered;
use crate::handler::{Answer, FollowOn, NativeHandler, Transport};
use crate::lifecycle::Stop;
use crate::metrics::Metrics;
use handled_proto::envelope::{Envelope, ENVELOPE_LEN};
use handled_proto::header::ResponseCode;
use handled_proto::unit::Unit;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The Java server's backlog of 50 overflowed under load (field notes); the
/// kernel caps this at net.core.somaxconn.
const BACKLOG: i32 = 4096;
/// Once a message has started, the rest must arrive within this time.
const MESSAGE_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The native TCP port's listener: [`bind`], with accept deferred until a
/// request's first bytes arrive ([`DEFER_ACCEPT`]).
pub fn bind_native(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let listener = bind(addr)?;
    defer_accept(&listener, DEFER_ACCEPT)?;
    // Accepted sockets inherit it on Linux: a system call less per connection.
    socket2::SockRef::from(&listener).set_tcp_nodelay(true)?;
    Ok(listener)
}

/// TCP_DEFER_ACCEPT: the kernel completes a connection for accept() only once
/// data arrived (the client speaks first here), so the read right after accept
/// (tcp_early.rs) finds the request instead of nothing. Measured: 1.69 empty
/// reads per connection without it (BENCHMARKS.md, "TCP, a connection per
/// request"). A peer that connects and stays silent costs the server nothing
/// for this long (the kernel keeps it, bounded by the backlog and SYN
/// cookies); then it is accepted anyway, under the connection limits and the
/// idle timeout as before. Native TCP only: no refusal answer is lost there.
pub const DEFER_ACCEPT: Duration = Duration::from_secs(1);

#[cfg(target_os = "linux")]
fn defer_accept(listener: &TcpListener, wait: Duration) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let secs = libc::c_int::try_from(wait.as_secs()).unwrap_or(libc::c_int::MAX);
    // SAFETY: setsockopt reads one int from the pointer and length we pass; the fd is open.
    let done = unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&secs as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn defer_accept(_listener: &TcpListener, _wait: Duration) -> std::io::Result<()> {
    Ok(())
}

pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let s =
        socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(BACKLOG)?;
    TcpListener::from_std(s.into())
}

/// Accept loops (tasks sharing the listener) on the native port: a cheap first
/// request is answered on the accepting task (tcp_early.rs), so with one loop
/// every connection's first answer waited for one worker thread.
pub const ACCEPT_LOOPS: usize = 2;

/// What the native TCP port's connections share.
pub struct NativePort<H> {
    pub handler: Arc<H>,
    /// `tcp_idle_timeout_secs`: how long a connection may wait for its next request.
    pub idle_timeout: Duration,
    /// Open connections are counted there.
    pub metrics: Arc<Metrics>,
}

/// Accept until dropped; connections run under `stop`.
pub async fn serve<H: NativeHandler>(port: NativePort<H>, listener: Acceptor, stop: Stop) {
    let port = Arc::new(port);
    // Dropped (the further loops aborted) when this future is.
    let mut loops = tokio::task::JoinSet::new();
    for _ in 1..ACCEPT_LOOPS {
        loops.spawn(accept_loop(port.clone(), listener.another(), stop.clone()));
    }
    accept_loop(port, listener, stop).await
}

async fn accept_loop<H: NativeHandler>(port: Arc<NativePort<H>>, mut listener: Acceptor, stop: Stop) {
    loop {
        let (stream, peer, slot) = listener.next().await;
        let open = port.metrics.connection("tcp");
        let early = first_request(&port.handler, &stream, peer);
        if matches!(early.reply, EarlyReply::Reset) {
            continue; // dropped: closed with a reset (tcp_early.rs)
        }
        let (port, draining) = (port.clone(), stop.clone());
        stop.spawn(async move {
            let _slot = slot;
            let _open = open;
            if let Err(e) = connection(&port, stream, peer, early, &draining).await {
                tracing::debug!("tcp connection from {peer}: {e}");
            }
        });
    }
}

/// A unit buffer grown past this is not kept for the connection's next message.
const KEPT_BUFFER: usize = 64 * 1024;

/// How a read of an exact number of bytes ended.
enum Fill {
    Complete,
    /// The peer closed or stalled after this many bytes.
    Short(usize),
}

/// Append `len` bytes to `buf`, first from `carried` (read earlier), then as
/// they arrive, allocating only for what came (at most `CHUNK` ahead): an
/// envelope announcing a 256 KB message followed by silence must not pin 256 KB
/// for the read timeout (F2). Read straight into `buf`'s spare room: a zeroed
/// bounce buffer cost a 16 KiB memset per read, twice per request (callgrind).
async fn fill(
    stream: &mut (impl AsyncRead + Unpin),
    carried: &mut Vec<u8>,
    buf: &mut Vec<u8>,
    len: usize,
    limit: Duration,
) -> std::io::Result<Fill> {
    const CHUNK: usize = 16 * 1024;
    let deadline = tokio::time::Instant::now() + limit;
    let start = buf.len();
    let from_carried = len.min(carried.len());
    buf.extend(carried.drain(..from_carried));
    while buf.len() - start < len {
        let want = (len - (buf.len() - start)).min(CHUNK);
        buf.reserve(want);
        let mut limited = (&mut *stream).take(want as u64);
        match tokio::time::timeout_at(deadline, limited.read_buf(buf)).await {
            Ok(Ok(0)) | Err(_) => return Ok(Fill::Short(buf.len() - start)),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e),
        }
    }
    Ok(Fill::Complete)
}

async fn connection<H: NativeHandler>(
    port: &NativePort<H>,
    mut stream: TcpStream,
    peer: SocketAddr,
    early: Early,
    stop: &Stop,
) -> std::io::Result<()> {
    // On Linux inherited from the listener (bind_native).
    #[cfg(not(target_os = "linux"))]
    stream.set_nodelay(true)?;
    let handler = &*port.handler;
    let idle = port.idle_timeout;
    let Early { mut carried, reply } = early;
    match reply {
        EarlyReply::Sent => {}
        EarlyReply::Reset => return Ok(()), // the accept loop drops these
        EarlyReply::Unsent(rest) => stream.write_all(&rest).await?,
        EarlyReply::Later(answer) => {
            if let Some(follow_on) = write_answer(&mut stream, answer.await).await? {
                return follow_on.run(stream).await;
            }
        }
    }
    let mut unit = Vec::new();
    loop {
        if unit.capacity() > KEPT_BUFFER {
            unit = Vec::new();
        }
        unit.clear();
        // Between requests a stopping server closes the connection; a request
        // already under way is answered.
        let next = tokio::select! {
            next = fill(&mut stream, &mut carried, &mut unit, ENVELOPE_LEN, idle) => next?,
            _ = stop.draining() => return Ok(()),
        };
        match next {
            Fill::Complete => {}
            Fill::Short(0) => {
                // The peer closed between requests (tcp_reset.rs).
                reset_if_all_delivered(&stream);
                return Ok(());
            }
            Fill::Short(_) => return Ok(()),
        }
        let Ok(envelope) = Envelope::parse(&unit) else { return Ok(()) };
        let length = match envelope.check_message_length() {
            Ok(n) => n,
            Err(_) => {
                // The rest of the stream can't be framed any more: answer, then close.
                let parsed = Unit::with_envelope(envelope, &unit[..]);
                let responses = serve_parsed(handler, &parsed, Transport::Tcp, peer).await.units;
                for r in responses {
                    stream.write_all(&r).await?;
                }
                return Ok(());
            }
        };
        if let Fill::Short(got) = fill(&mut stream, &mut carried, &mut unit, length, MESSAGE_READ_TIMEOUT).await? {
            let text = format!("Expecting {length} bytes, only received {got}");
            let _ = stream.write_all(&handler.envelope_error(&envelope, ResponseCode::PROTOCOL_ERROR, &text)).await;
            return Ok(());
        }
        let answer = serve_parsed(handler, &Unit::with_envelope(envelope, &unit[..]), Transport::Tcp, peer).await;
        if let Some(follow_on) = write_answer(&mut stream, answer).await? {
            // The connection now carries the stream, and ends with it.
            return follow_on.run(stream).await;
        }
    }
}

/// Send an answer's units; the stream that follows (replication), if any.
async fn write_answer(stream: &mut TcpStream, answer: Answer) -> std::io::Result<Option<Box<dyn FollowOn>>> {
    match answer.units.as_slice() {
        [one] => stream.write_all(one).await?,
        many => stream.write_all(&many.concat()).await?,
    }
    Ok(answer.stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// F2: the message buffer used to be sized from the envelope's announced
    /// length before any of it arrived; now it grows only with what came.
    #[tokio::test]
    async fn a_short_message_allocates_only_what_arrived() {
        let mut buf = vec![0u8; ENVELOPE_LEN];
        let mut stream: &[u8] = &[7u8; 100];
        let got = fill(&mut stream, &mut Vec::new(), &mut buf, 262_144, Duration::from_secs(1)).await.unwrap();
        assert!(matches!(got, Fill::Short(100)));
        assert_eq!(buf.len(), ENVELOPE_LEN + 100);
        assert!(buf.capacity() < 64 * 1024, "capacity {}", buf.capacity());
        let mut stream: &[u8] = &[7u8; 40_000];
        let mut buf = Vec::new();
        assert!(matches!(
            fill(&mut stream, &mut Vec::new(), &mut buf, 40_000, Duration::from_secs(1)).await.unwrap(),
            Fill::Complete
        ));
        assert_eq!(buf, vec![7u8; 40_000]);
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_native_listener_defers_accept() {
        use std::os::fd::AsRawFd;
        let listener = bind_native("127.0.0.1:0".parse().unwrap()).unwrap();
        let (mut secs, mut len) = (0 as libc::c_int, std::mem::size_of::<libc::c_int>() as libc::socklen_t);
        // SAFETY: getsockopt writes at most `len` bytes to the int we pass; the fd is open.
        let done = unsafe {
            libc::getsockopt(
                listener.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_DEFER_ACCEPT,
                (&mut secs as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(done, 0);
        assert!(secs >= 1, "TCP_DEFER_ACCEPT {secs}");
        // Accepted sockets inherit TCP_NODELAY from it (connection() relies on that).
        let addr = listener.local_addr().unwrap();
        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut client, b"x").await.unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        assert!(accepted.nodelay().unwrap());
    }

    /// Bytes read right after accept (tcp_early.rs) come first, only as many
    /// as asked for; the rest stays carried for the next unit.
    #[tokio::test]
    async fn carried_bytes_come_before_the_stream() {
        let (mut carried, mut buf) = (vec![1u8, 2, 3], Vec::new());
        let mut stream: &[u8] = &[4u8, 5];
        assert!(matches!(
            fill(&mut stream, &mut carried, &mut buf, 2, Duration::from_secs(1)).await.unwrap(),
            Fill::Complete
        ));
        assert_eq!((buf.as_slice(), carried.as_slice()), (&[1u8, 2][..], &[3u8][..]));
        assert!(matches!(
            fill(&mut stream, &mut carried, &mut buf, 3, Duration::from_secs(1)).await.unwrap(),
            Fill::Complete
        ));
        assert_eq!((buf.as_slice(), carried.len()), (&[1u8, 2, 3, 4, 5][..], 0));
    }
}
