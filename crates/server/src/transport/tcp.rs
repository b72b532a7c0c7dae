//! TCP (§4.2): the Java client sends one request per connection, others keep
//! the connection open; we answer requests until the peer closes or idles out.

use super::serve_unit;
use crate::native::respond::{error_response, RequestContext};
use crate::native::{read_envelope, Transport};
use crate::state::ServerState;
use handled_proto::envelope::ENVELOPE_LEN;
use handled_proto::header::ResponseCode;
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

pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let s =
        socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(BACKLOG)?;
    TcpListener::from_std(s.into())
}

pub async fn serve(state: Arc<ServerState>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let state = state.clone();
                tokio::spawn(async move {
                    if let Err(e) = connection(&state, stream).await {
                        tracing::debug!("tcp connection from {peer}: {e}");
                    }
                });
            }
            Err(e) => {
                // Running out of file descriptors must not end the accept loop.
                tracing::warn!("tcp accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// How a read of an exact number of bytes ended.
enum Fill {
    Complete,
    /// The peer closed or stalled after this many bytes.
    Short(usize),
}

async fn fill(stream: &mut (impl AsyncRead + Unpin), buf: &mut [u8], limit: Duration) -> std::io::Result<Fill> {
    let mut got = 0;
    let deadline = tokio::time::Instant::now() + limit;
    while got < buf.len() {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf[got..])).await {
            Ok(Ok(0)) | Err(_) => return Ok(Fill::Short(got)),
            Ok(Ok(n)) => got += n,
            Ok(Err(e)) => return Err(e),
        }
    }
    Ok(Fill::Complete)
}

async fn connection(state: &ServerState, mut stream: TcpStream) -> std::io::Result<()> {
    let peer = stream.peer_addr()?;
    let _open = state.metrics.connection("tcp");
    stream.set_nodelay(true)?;
    let idle = Duration::from_secs(state.config.tcp_idle_timeout_secs);
    let mut unit = Vec::new();
    loop {
        unit.clear();
        unit.resize(ENVELOPE_LEN, 0);
        match fill(&mut stream, &mut unit, idle).await? {
            Fill::Complete => {}
            Fill::Short(_) => return Ok(()),
        }
        let Some(envelope) = read_envelope(&unit) else { return Ok(()) };
        let length = match envelope.check_message_length() {
            Ok(n) => n,
            Err(_) => {
                // The rest of the stream can't be framed any more: answer, then close.
                let responses = serve_unit(state, &unit, Transport::Tcp, peer).await;
                for r in responses {
                    stream.write_all(&r).await?;
                }
                return Ok(());
            }
        };
        unit.resize(ENVELOPE_LEN + length, 0);
        if let Fill::Short(got) = fill(&mut stream, &mut unit[ENVELOPE_LEN..], MESSAGE_READ_TIMEOUT).await? {
            let ctx = RequestContext { envelope, header: None, header_and_body: &[] };
            let text = format!("Expecting {length} bytes, only received {got}");
            let _ = stream.write_all(&error_response(state, &ctx, ResponseCode::PROTOCOL_ERROR, &text)).await;
            return Ok(());
        }
        let responses = serve_unit(state, &unit, Transport::Tcp, peer).await;
        match responses.as_slice() {
            [one] => stream.write_all(one).await?,
            many => stream.write_all(&many.concat()).await?,
        }
    }
}
