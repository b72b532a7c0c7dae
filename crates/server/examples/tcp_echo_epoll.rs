//! The fastest TCP echo this box allows for a connection per request, as the
//! TCP reference ("ceiling") beside Handle.Net and the tokio echo
//! (echo_reference.rs): no runtime, one thread per core, each with its own
//! SO_REUSEPORT listener and epoll, accept deferred until data arrived
//! (TCP_DEFER_ACCEPT), the request read and echoed right after accept, and the
//! client's FIN answered with a reset (no TIME_WAIT), as `handled` does.
//! Bytes are echoed as they arrive (an echo needs no framing); a connection
//! whose reply does not fit the socket at once is closed (a reference for
//! small requests, not a server). Linux only.
//!
//! cargo run --release -p handled-server --example tcp_echo_epoll -- 127.0.0.1 12700 [threads]

#[cfg(target_os = "linux")]
fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let ip: std::net::IpAddr = args.next().unwrap_or_else(|| "127.0.0.1".into()).parse().expect("an IP address");
    let port: u16 = args.next().map(|p| p.parse().expect("port")).unwrap_or(12700);
    let threads = args
        .next()
        .map(|t| t.parse().expect("threads"))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let addr = std::net::SocketAddr::new(ip, port);
    // Bind all first, so that "ready" means every listener takes connections.
    let listeners = (0..threads).map(|_| linux::listener(addr)).collect::<std::io::Result<Vec<_>>>()?;
    let workers: Vec<_> = listeners.into_iter().map(|l| std::thread::spawn(move || linux::serve(l))).collect();
    println!("ready");
    for w in workers {
        let _ = w.join();
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("tcp_echo_epoll: Linux only");
}

#[cfg(target_os = "linux")]
mod linux {
    use socket2::{Domain, Protocol, Socket, Type};
    use std::io::{Read, Write};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

    pub fn listener(addr: std::net::SocketAddr) -> std::io::Result<Socket> {
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        s.set_reuse_address(true)?;
        s.set_reuse_port(true)?;
        s.set_tcp_nodelay(true)?; // inherited by accepted sockets
        s.set_nonblocking(true)?;
        s.bind(&addr.into())?;
        s.listen(4096)?;
        let secs: libc::c_int = 1;
        // SAFETY: setsockopt reads one int from the pointer and length given; the fd is open.
        let done = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_DEFER_ACCEPT,
                (&secs as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if done != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(s)
    }

    fn add(epoll: RawFd, fd: RawFd) {
        let mut event = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
        // SAFETY: both fds are open; the event is read during the call only.
        unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, fd, &mut event) };
    }

    /// Echo what is there; false when the connection is done (EOF, error, a short write).
    fn echo(socket: &mut Socket, buf: &mut [u8]) -> bool {
        loop {
            match socket.read(buf) {
                Ok(0) => {
                    // The client closed first and has all we sent: reset, no TIME_WAIT.
                    let _ = socket.set_linger(Some(std::time::Duration::ZERO));
                    return false;
                }
                Ok(n) => {
                    if socket.write(&buf[..n]).map_or(true, |w| w < n) {
                        return false;
                    }
                    if n < buf.len() {
                        // Drained for now (epoll is level-triggered: more wakes us): no EAGAIN read.
                        return true;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(_) => return false,
            }
        }
    }

    pub fn serve(listener: Socket) {
        // SAFETY: epoll_create1 returns a new fd or -1.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        assert!(epoll >= 0, "epoll_create1: {}", std::io::Error::last_os_error());
        // SAFETY: the fd was just created and is owned here only.
        let _epoll_owned = unsafe { OwnedFd::from_raw_fd(epoll) };
        let lfd = listener.as_raw_fd();
        add(epoll, lfd);
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: events has room for its length; epoll is open.
            let n = unsafe { libc::epoll_wait(epoll, events.as_mut_ptr(), events.len() as libc::c_int, -1) };
            for e in &events[..usize::try_from(n).unwrap_or(0)] {
                let fd = e.u64 as RawFd;
                if fd == lfd {
                    loop {
                        // SAFETY: lfd is an open listener; no address is asked for.
                        let fd = unsafe {
                            libc::accept4(
                                lfd,
                                std::ptr::null_mut(),
                                std::ptr::null_mut(),
                                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                            )
                        };
                        if fd < 0 {
                            break;
                        }
                        // SAFETY: accept4 returned a new fd owned by nobody else.
                        let mut socket = unsafe { Socket::from_raw_fd(fd) };
                        if echo(&mut socket, &mut buf) {
                            // Owned by epoll from here; closed when done (close removes it).
                            let fd = std::os::fd::IntoRawFd::into_raw_fd(socket);
                            add(epoll, fd);
                        }
                    }
                } else {
                    // SAFETY: fd came from into_raw_fd above and is still open (closed only here).
                    let mut socket = unsafe { Socket::from_raw_fd(fd) };
                    if echo(&mut socket, &mut buf) {
                        std::mem::forget(socket); // still open, still in epoll
                    }
                }
            }
        }
    }
}
