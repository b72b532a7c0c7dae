//! Reference servers for benchmarks: echo every request back over UDP, TCP and
//! HTTP, using the server's own listeners (batched UDP threads, the TCP
//! backlog, hyper with the same settings) but doing no protocol work. Requests
//! per core-second against these bound what `handled` can reach on the same box.
//!
//! cargo run --release -p handled-server --example echo_reference -- 127.0.0.1 12700 18700

use handled_server::transport::tcp::{bind as bind_tcp, bind_native, ACCEPT_LOOPS};
use handled_server::transport::tcp_reset::reset_if_all_delivered;
use handled_server::transport::udp::{bind as bind_udp, send_batch, BatchReceiver};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let ip: IpAddr = args.next().unwrap_or_else(|| "127.0.0.1".into()).parse().expect("an IP address");
    let port: u16 = args.next().map(|p| p.parse().expect("port")).unwrap_or(12700);
    let http_port: u16 = args.next().map(|p| p.parse().expect("port")).unwrap_or(18700);

    for socket in bind_udp(SocketAddr::new(ip, port), 2)? {
        std::thread::spawn(move || {
            let mut receiver = BatchReceiver::new(&socket);
            loop {
                if let Ok(batch) = receiver.receive(true) {
                    let replies: Vec<_> = batch.into_iter().map(|d| (d.peer, d.bytes)).collect();
                    send_batch(&socket, &replies);
                }
            }
        });
    }

    // Accept deferred until the request arrived, as `handled`'s native port
    // does, by as many accept loops (transport/tcp.rs, ACCEPT_LOOPS).
    let tcp = std::sync::Arc::new(bind_native(SocketAddr::new(ip, port))?);
    for _ in 0..ACCEPT_LOOPS {
        tokio::spawn(accept_loop(tcp.clone()));
    }

    let http = bind_tcp(SocketAddr::new(ip, http_port))?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = http.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
                    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(body)))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    println!("ready");
    std::future::pending::<()>().await;
    Ok(())
}

async fn accept_loop(tcp: std::sync::Arc<tokio::net::TcpListener>) {
    while let Ok((mut stream, _)) = tcp.accept().await {
        // TCP_NODELAY: inherited from the listener (bind_native) on Linux.
        #[cfg(not(target_os = "linux"))]
        let _ = stream.set_nodelay(true);
        // As `handled` does (transport/tcp_early.rs): the first request,
        // usually there already, is read and echoed right after accept.
        let mut first = [0u8; 2048];
        let n = (&*socket2::SockRef::from(&stream)).read(&mut first).unwrap_or(0);
        let (mut carried, mut unsent) = (first[..n].to_vec(), Vec::new());
        if let Some(len) = whole_unit(&carried) {
            let sent = socket2::SockRef::from(&stream).send(&carried[..len]).unwrap_or(0);
            unsent = carried[sent..len].to_vec();
            carried.drain(..len);
            // As `handled` does without KA: once the client holds the whole
            // answer, a reset ends the connection here, without a task.
            let keep_alive = first.get(28..32).is_some_and(|f| u32::from_be_bytes(f.try_into().unwrap()) & KA != 0);
            if !keep_alive && unsent.is_empty() && carried.is_empty() && reset_if_all_delivered(&stream) {
                continue;
            }
        }
        tokio::spawn(async move {
            if stream.write_all(&unsent).await.is_err() {
                return;
            }
            // What followed the first request (or its start) is read on from.
            let mut unit = carried;
            loop {
                let have = unit.len();
                if have < 20 {
                    unit.resize(20, 0);
                    if stream.read_exact(&mut unit[have..]).await.is_err() {
                        // As `handled` does when the client closes first: a
                        // reset, leaving no TIME_WAIT.
                        reset_if_all_delivered(&stream);
                        return;
                    }
                }
                let len = 20 + u32::from_be_bytes([unit[16], unit[17], unit[18], unit[19]]).min(262_144) as usize;
                let have = unit.len();
                if have < len {
                    unit.resize(len, 0);
                    if stream.read_exact(&mut unit[have..]).await.is_err() {
                        return;
                    }
                }
                if stream.write_all(&unit[..len]).await.is_err() {
                    return;
                }
                unit.drain(..len);
            }
        });
    }
}

/// The KA op flag (RFC 3652), in the header's op flags (bytes 8..12 of the message).
const KA: u32 = handled_proto::header::OpFlags::KA.0;

/// The length of the unit at the start of `bytes`, when all of it is there.
fn whole_unit(bytes: &[u8]) -> Option<usize> {
    let len = 20 + u32::from_be_bytes(bytes.get(16..20)?.try_into().ok()?).min(262_144) as usize;
    (bytes.len() >= len).then_some(len)
}
