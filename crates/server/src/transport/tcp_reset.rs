//! Ending a native TCP connection with a reset instead of a FIN, when that
//! can lose nothing: everything sent has been acknowledged (`SIOCOUTQ` is 0),
//! so the peer holds all of it, and neither side keeps a TIME_WAIT socket.
//! A client making a connection per request (the Java library) otherwise kept
//! one TIME_WAIT socket per request, and its `connect()` spent half of its CPU
//! searching for a free port (BENCHMARKS.md, "TCP, a connection per request:
//! where the time goes"). Handle.Net closes first, so its TIME_WAIT sockets
//! are its own; a reset leaves none.

use std::time::Duration;
use tokio::net::TcpStream;

/// Close `stream` (when it is dropped) with a reset if everything written to
/// it has been acknowledged; true if so.
pub fn reset_if_all_delivered(stream: &TcpStream) -> bool {
    unacknowledged_bytes(stream) == Some(0) && socket2::SockRef::from(stream).set_linger(Some(Duration::ZERO)).is_ok()
}

/// Bytes written to `stream` that the peer has not acknowledged (SIOCOUTQ).
#[cfg(target_os = "linux")]
fn unacknowledged_bytes(stream: &TcpStream) -> Option<usize> {
    use std::os::fd::AsRawFd;
    let mut queued: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (= TIOCOUTQ) writes one int to the pointer we pass; the fd is open.
    let done = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
    (done == 0).then(|| usize::try_from(queued).ok()).flatten()
}

#[cfg(not(target_os = "linux"))]
fn unacknowledged_bytes(_stream: &TcpStream) -> Option<usize> {
    None
}
