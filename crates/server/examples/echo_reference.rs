//! Reference servers for benchmarks: echo every request back over UDP, TCP and
//! HTTP, using the server's own listeners (batched UDP threads, the TCP
//! backlog, hyper with the same settings) but doing no protocol work. Requests
//! per core-second against these bound what `handled` can reach on the same box.
//!
//! cargo run --release -p handled-server --example echo_reference -- 127.0.0.1 12700 18700

use handled_server::transport::tcp::bind as bind_tcp;
use handled_server::transport::udp::{bind as bind_udp, send_batch, BatchReceiver};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioIo, TokioTimer};
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

    let tcp = bind_tcp(SocketAddr::new(ip, port))?;
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = tcp.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let mut unit = vec![0u8; 20];
                while stream.read_exact(&mut unit[..20]).await.is_ok() {
                    let len = u32::from_be_bytes([unit[16], unit[17], unit[18], unit[19]]).min(262_144) as usize;
                    unit.resize(20 + len, 0);
                    if stream.read_exact(&mut unit[20..]).await.is_err() || stream.write_all(&unit).await.is_err() {
                        return;
                    }
                    unit.truncate(20);
                }
            });
        }
    });

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
