//! Where a replication stream goes: the request's own TCP connection, after
//! the response message. Protocol ≥ 2.8: the TLS marker word, then a TLS
//! server session on the socket with the certificate of our HS_SITE key.
//! Older: the PK-signed stream, each item followed by its signature with that
//! key. Every write has a deadline, and at most [`FLUSH_AT`] bytes (plus one
//! item) wait in memory, so a mirror that stops reading holds little, briefly.

use crate::keys::RsaSigner;
use handled_proto::replication::framing::StreamItem;
use handled_proto::replication::{BlockSigner, StreamType, StreamWriter};
use std::io;
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

/// The hash named in a signed stream's preamble. The Java receiver picks the
/// signature algorithm by this name and takes "SHA-256" as well as "SHA1"
/// (`Util.getSigIdFromHashAlgId`); our key signs SHA-256 only (no SHA-1 path).
pub const SIGNED_STREAM_HASH: &[u8] = b"SHA-256";
/// Encoded items are written out once this much has gathered.
const FLUSH_AT: usize = 64 * 1024;

/// Signs stream blocks with the server's HS_SITE key (SHA256withRSA).
struct SiteKeySigner<'k> {
    key: &'k RsaSigner,
    block: Vec<u8>,
}

impl BlockSigner for SiteKeySigner<'_> {
    fn update(&mut self, data: &[u8]) {
        self.block.extend_from_slice(data);
    }

    fn sign(&mut self) -> Vec<u8> {
        let signed = self.key.sign(&self.block);
        self.block.clear();
        // A signature the mirror cannot verify makes it drop the stream.
        signed.map(|(_, s)| s).unwrap_or_else(|e| {
            tracing::error!("replication stream: {e}");
            Vec::new()
        })
    }
}

enum Channel {
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    Plain(TcpStream),
}

/// The secured stream to a mirror: items are sent, `finish` ends it cleanly.
pub struct Sink<'k> {
    channel: Channel,
    writer: StreamWriter<SiteKeySigner<'k>>,
    buf: Vec<u8>,
    write_timeout: Duration,
}

impl<'k> Sink<'k> {
    /// Announce TLS on `tcp` and run the server side of the handshake.
    pub async fn tls(mut tcp: TcpStream, acceptor: &TlsAcceptor, write_timeout: Duration) -> io::Result<Sink<'k>> {
        let mut preamble = Vec::with_capacity(4);
        let writer = StreamWriter::plain(StreamType::Tls, &mut preamble);
        timed(write_timeout, tcp.write_all(&preamble)).await?;
        let tls = timed(write_timeout, acceptor.accept(tcp)).await?;
        Ok(Sink { channel: Channel::Tls(Box::new(tls)), writer, buf: Vec::new(), write_timeout })
    }

    /// Announce a signed stream on `tcp`: every item is followed by its
    /// signature with `key` (the server's HS_SITE key).
    pub async fn signed(mut tcp: TcpStream, key: &'k RsaSigner, write_timeout: Duration) -> io::Result<Sink<'k>> {
        let mut preamble = Vec::with_capacity(16);
        let signer = SiteKeySigner { key, block: Vec::new() };
        let writer = StreamWriter::signed(signer, SIGNED_STREAM_HASH, &mut preamble);
        timed(write_timeout, tcp.write_all(&preamble)).await?;
        Ok(Sink { channel: Channel::Plain(tcp), writer, buf: Vec::new(), write_timeout })
    }

    /// Send one item (buffered up to [`FLUSH_AT`] bytes).
    pub async fn send(&mut self, item: &impl StreamItem) -> io::Result<()> {
        self.writer.write(item, &mut self.buf);
        if self.buf.len() >= FLUSH_AT {
            self.flush().await?;
        }
        Ok(())
    }

    /// Write out what is buffered.
    pub async fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let limit = self.write_timeout;
        match &mut self.channel {
            Channel::Tls(tls) => timed(limit, write_out(tls.as_mut(), &self.buf)).await?,
            Channel::Plain(tcp) => timed(limit, write_out(tcp, &self.buf)).await?,
        }
        self.buf.clear();
        Ok(())
    }

    /// Send what is left and close the stream (TLS: with close_notify).
    pub async fn finish(mut self) -> io::Result<()> {
        self.flush().await?;
        let limit = self.write_timeout;
        match &mut self.channel {
            Channel::Tls(tls) => timed(limit, tls.shutdown()).await,
            Channel::Plain(tcp) => timed(limit, tcp.shutdown()).await,
        }
    }
}

async fn write_out(w: &mut (impl AsyncWrite + Unpin), bytes: &[u8]) -> io::Result<()> {
    w.write_all(bytes).await?;
    w.flush().await
}

/// `f` within `limit`, else a timed-out error (the stream is then dropped).
async fn timed<T>(limit: Duration, f: impl std::future::Future<Output = io::Result<T>>) -> io::Result<T> {
    match tokio::time::timeout(limit, f).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "mirror did not read the stream in time")),
    }
}
