//! Client side of replication (RETRIEVE_TXN_LOG 1001, DUMP_HANDLES 1002): one
//! authenticated request whose answer is followed, on the same TCP connection,
//! by a streamed part (docs/replication.md §1.4). The stream starts with an
//! `i32` type: TLS (the source turns the socket into a TLS server whose
//! certificate must carry the source's HS_SITE key, whatever its names or
//! issuer), or the older PK-signed stream (a signature with that key after
//! each item). Every read has a timeout and no item may exceed a size cap.
//!
//! Like the Java resolver, the challenge is answered on a fresh connection
//! (a Handle.Net server answers one message per TCP connection): the response
//! and its stream come on the connection that carried the answer.

use crate::admin::answer_challenge;
use crate::credentials::Credentials;
use crate::session::{encode_unit_with, UnitOptions};
use crate::transport::read_units;
use crate::{decode_response, AdminError, ClientError, Response};
use handled_proto::data::pubkey::{unsigned, PublicKey};
use handled_proto::digest::DigestAlg;
use handled_proto::envelope::Version;
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::replication::{
    BlockVerifier, DumpStreamDecoder, Framing, StreamDecoder, StreamGrammar, StreamType, TxnStreamDecoder,
};
use handled_proto::request::RequestBody;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest hash algorithm name a signed stream may announce.
const MAX_HASH_ID: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum ReplicationError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("authentication: {0}")]
    Auth(String),
    /// The source answered with an error code.
    #[error("the source refused: {} ({}){}", .code.name(), .code.0, if .message.is_empty() { String::new() } else { format!(": {}", .message) })]
    Refused { code: ResponseCode, message: String },
    #[error("no data from the source within {0:?}")]
    Timeout(Duration),
    #[error("TLS with the source: {0}")]
    Tls(String),
    #[error("stream: {0}")]
    Stream(String),
    #[error("an item of the stream exceeds {0} bytes")]
    TooLarge(usize),
    #[error("the source closed the stream")]
    Closed,
}

impl From<AdminError> for ReplicationError {
    fn from(e: AdminError) -> Self {
        match e {
            AdminError::Client(c) => ReplicationError::Client(c),
            AdminError::Refused { code, message } => ReplicationError::Refused { code, message },
            other => ReplicationError::Auth(other.to_string()),
        }
    }
}

/// One source server and how to talk to it.
#[derive(Clone, Debug)]
pub struct SourceServer {
    pub addr: SocketAddr,
    /// The server's key from its HS_SITE record: the TLS certificate and the
    /// signatures of the stream must match it.
    pub key: PublicKey,
    /// Limit of every connect and read.
    pub timeout: Duration,
    /// Largest item (one record of the stream) accepted.
    pub max_item_bytes: usize,
    /// The protocol version we ask in: ≥ 2.8 gets the TLS stream, below it the
    /// PK-signed one (what a source with a DSA key, which TLS here cannot
    /// verify, must be asked in).
    pub version: Version,
    /// Checks one signature of a PK-signed stream: (key, hash, data, signature).
    pub check_signature: SignatureCheck,
}

/// A signature check `(key, hash, data, signature) -> valid`.
pub type SignatureCheck = fn(&PublicKey, DigestAlg, &[u8], &[u8]) -> bool;

impl SourceServer {
    /// The version to ask a source with `key` in: TLS for RSA keys, the
    /// PK-signed stream (2.7) otherwise.
    pub fn version_for(key: &PublicKey) -> Version {
        match key {
            PublicKey::Rsa { .. } => Version::V2_10,
            _ => Version::V2_7,
        }
    }
}

impl SourceServer {
    async fn timed<T>(&self, f: impl std::future::Future<Output = std::io::Result<T>>) -> Result<T, ReplicationError> {
        match tokio::time::timeout(self.timeout, f).await {
            Ok(r) => r.map_err(|e| ReplicationError::Client(ClientError::Io(e))),
            Err(_) => Err(ReplicationError::Timeout(self.timeout)),
        }
    }

    async fn connect(&self) -> Result<TcpStream, ReplicationError> {
        let s = self.timed(TcpStream::connect(self.addr)).await?;
        let _ = s.set_nodelay(true);
        Ok(s)
    }

    async fn exchange(&self, conn: &mut TcpStream, unit: &[u8], rid: i32) -> Result<Response, ReplicationError> {
        self.timed(conn.write_all(unit)).await?;
        let units = match tokio::time::timeout(self.timeout, read_units(conn)).await {
            Ok(r) => r?,
            Err(_) => return Err(ReplicationError::Timeout(self.timeout)),
        };
        let last = units.last().ok_or(ReplicationError::Closed)?;
        Ok(decode_response(last, rid)?)
    }

    /// Send `body` as `creds` and return the success response with the
    /// stream that follows it, positioned after the stream's type word (and,
    /// for a signed stream, its hash algorithm).
    pub async fn request_stream(
        &self,
        creds: &Credentials,
        body: &RequestBody,
    ) -> Result<(Response, ItemStream), ReplicationError> {
        let flags = OpFlags::NONE;
        let rid = request_id();
        let pinned = UnitOptions { version: self.version, suggested: Some(self.version), ..UnitOptions::default() };
        let (unit, hb) = encode_unit_with(body, flags, rid, pinned);
        let mut conn = self.connect().await?;
        let mut response = self.exchange(&mut conn, &unit, rid).await?;
        if response.code() == ResponseCode::AUTHENTICATION_NEEDED {
            let answer = answer_challenge(creds, &response, &hb)?;
            let rid = request_id();
            let version = response.envelope.version.min(self.version);
            let opts = UnitOptions {
                version,
                session_id: response.envelope.session_id,
                session: None,
                encrypt: false,
                suggested: Some(version),
            };
            let (unit, _) = encode_unit_with(&answer, flags, rid, opts);
            drop(conn);
            conn = self.connect().await?;
            response = self.exchange(&mut conn, &unit, rid).await?;
        }
        if response.code() != ResponseCode::SUCCESS {
            return Err(ReplicationError::Refused {
                code: response.code(),
                message: response.message().unwrap_or_default(),
            });
        }
        let mut word = [0u8; 4];
        self.timed(conn.read_exact(&mut word)).await?;
        let kind =
            StreamType::from_word(i32::from_be_bytes(word)).map_err(|e| ReplicationError::Stream(e.to_string()))?;
        let stream = match kind {
            StreamType::Tls => {
                let tls = tls_connect(conn, &self.key, self.timeout).await?;
                ItemStream::new(Box::new(tls), self)
            }
            StreamType::Signed => {
                let alg = read_field(&mut conn, MAX_HASH_ID, self).await?;
                let verifier = SiteKeyBlocks::new(&alg, &self.key, self.check_signature)?;
                let mut stream = ItemStream::new(Box::new(conn), self);
                (stream.signed, stream.is_signed) = (Some(verifier), true);
                stream
            }
            StreamType::Unsigned => {
                return Err(ReplicationError::Stream(
                    "the source sent an unsigned stream over a plain connection".into(),
                ))
            }
        };
        Ok((response, stream))
    }
}

fn request_id() -> i32 {
    rand::random::<i32>() & 0x7fff_ffff | 1
}

/// The streamed part: bytes read on demand with a timeout, cut into items by a
/// decoder of `handled_proto::replication` (which checks a signed stream's
/// signatures through [`SiteKeyBlocks`] and caps each item's size).
pub struct ItemStream {
    io: Box<dyn AsyncRead + Send + Unpin>,
    /// Some for a PK-signed stream, until a decoder takes it.
    signed: Option<SiteKeyBlocks>,
    is_signed: bool,
    timeout: Duration,
    max_item: usize,
    chunk: Vec<u8>,
}

impl ItemStream {
    fn new(io: Box<dyn AsyncRead + Send + Unpin>, server: &SourceServer) -> Self {
        ItemStream {
            io,
            signed: None,
            is_signed: false,
            timeout: server.timeout,
            max_item: server.max_item_bytes,
            chunk: vec![0; 64 * 1024],
        }
    }

    /// Is this a PK-signed stream (a signature after every item)?
    pub fn is_signed(&self) -> bool {
        self.is_signed
    }

    fn framing(&mut self) -> Framing<SiteKeyBlocks> {
        match self.signed.take() {
            Some(v) => Framing::Signed(v),
            None => Framing::Plain,
        }
    }

    /// The decoder for a RETRIEVE_TXN_LOG stream (call once).
    pub fn txn_decoder(&mut self) -> TxnStreamDecoder<SiteKeyBlocks> {
        TxnStreamDecoder::new(self.framing(), self.max_item)
    }

    /// The decoder for a DUMP_HANDLES stream (call once).
    pub fn dump_decoder(&mut self) -> DumpStreamDecoder<SiteKeyBlocks> {
        DumpStreamDecoder::new(self.framing(), self.max_item)
    }

    /// The next item, reading (each read within the timeout) as needed.
    pub async fn next<G: StreamGrammar, V: BlockVerifier>(
        &mut self,
        decoder: &mut StreamDecoder<G, V>,
    ) -> Result<G::Item, ReplicationError> {
        loop {
            if let Some(item) = decoder.next_item().map_err(|e| ReplicationError::Stream(e.to_string()))? {
                return Ok(item);
            }
            let n = match tokio::time::timeout(self.timeout, self.io.read(&mut self.chunk)).await {
                Ok(r) => r.map_err(|e| ReplicationError::Client(ClientError::Io(e)))?,
                Err(_) => return Err(ReplicationError::Timeout(self.timeout)),
            };
            if n == 0 {
                return Err(ReplicationError::Closed);
            }
            decoder.feed(&self.chunk[..n]);
        }
    }
}

/// `u32 length ‖ bytes` read straight from the socket (a signed stream's hash id).
async fn read_field(conn: &mut TcpStream, max: usize, server: &SourceServer) -> Result<Vec<u8>, ReplicationError> {
    let mut len = [0u8; 4];
    server.timed(conn.read_exact(&mut len)).await?;
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(ReplicationError::Stream(format!("a field of {len} bytes where at most {max} fit")));
    }
    let mut out = vec![0; len];
    server.timed(conn.read_exact(&mut out)).await?;
    Ok(out)
}

/// Checks the signature a PK-signed stream puts after each block, over the
/// block's bytes, with the source's key (`SHA1withDSA`, `SHA1withRSA`, ...).
pub struct SiteKeyBlocks {
    key: PublicKey,
    hash: DigestAlg,
    check: SignatureCheck,
    block: Vec<u8>,
}

impl SiteKeyBlocks {
    fn new(hash_id: &[u8], key: &PublicKey, check: SignatureCheck) -> Result<Self, ReplicationError> {
        let hash = match hash_id.to_ascii_uppercase().as_slice() {
            b"SHA1" | b"SHA-1" => DigestAlg::Sha1,
            b"SHA256" | b"SHA-256" => DigestAlg::Sha256,
            other => {
                return Err(ReplicationError::Stream(format!(
                    "unsupported stream signature hash {:?}",
                    String::from_utf8_lossy(other)
                )))
            }
        };
        Ok(SiteKeyBlocks { key: key.clone(), hash, check, block: Vec::new() })
    }
}

impl BlockVerifier for SiteKeyBlocks {
    fn update(&mut self, data: &[u8]) {
        self.block.extend_from_slice(data);
    }

    fn verify(&mut self, signature: &[u8]) -> bool {
        let ok = (self.check)(&self.key, self.hash, &self.block, signature);
        self.block.clear();
        ok
    }
}

/// TLS client over the source's socket, trusting exactly the certificate key
/// that equals the source's HS_SITE key.
pub async fn tls_connect(
    conn: TcpStream,
    key: &PublicKey,
    timeout: Duration,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, ReplicationError> {
    let PublicKey::Rsa { exponent, modulus } = key else {
        return Err(ReplicationError::Tls("the source's site key is not an RSA key".into()));
    };
    let verifier = Arc::new(SiteKeyVerifier {
        n: unsigned(modulus).to_vec(),
        e: unsigned(exponent).to_vec(),
        schemes: rustls::crypto::aws_lc_rs::default_provider().signature_verification_algorithms.supported_schemes(),
    });
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ReplicationError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    // The name is not checked (the key is); it only has to be a valid DNS name.
    let name = rustls::pki_types::ServerName::try_from("handle-source").expect("a valid DNS name");
    match tokio::time::timeout(timeout, connector.connect(name, conn)).await {
        Ok(r) => r.map_err(|e| ReplicationError::Tls(e.to_string())),
        Err(_) => Err(ReplicationError::Timeout(timeout)),
    }
}

/// Accepts the source's certificate iff its public key is the site key, and
/// checks the handshake signatures with that key (not with a CA or name).
#[derive(Debug)]
struct SiteKeyVerifier {
    n: Vec<u8>,
    e: Vec<u8>,
    schemes: Vec<rustls::SignatureScheme>,
}

impl SiteKeyVerifier {
    fn check_signature(
        &self,
        message: &[u8],
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        use aws_lc_rs::signature as sig;
        use rustls::SignatureScheme as S;
        let algorithm: &aws_lc_rs::signature::RsaParameters = match dss.scheme {
            S::RSA_PKCS1_SHA256 => &sig::RSA_PKCS1_2048_8192_SHA256,
            S::RSA_PKCS1_SHA384 => &sig::RSA_PKCS1_2048_8192_SHA384,
            S::RSA_PKCS1_SHA512 => &sig::RSA_PKCS1_2048_8192_SHA512,
            S::RSA_PSS_SHA256 => &sig::RSA_PSS_2048_8192_SHA256,
            S::RSA_PSS_SHA384 => &sig::RSA_PSS_2048_8192_SHA384,
            S::RSA_PSS_SHA512 => &sig::RSA_PSS_2048_8192_SHA512,
            _ => return Err(rustls::Error::General(format!("unexpected signature scheme {:?}", dss.scheme))),
        };
        let key = aws_lc_rs::rsa::PublicKeyComponents { n: self.n.as_slice(), e: self.e.as_slice() };
        key.verify(algorithm, message, dss.signature())
            .map(|_| rustls::client::danger::HandshakeSignatureValid::assertion())
            .map_err(|_| rustls::Error::InvalidCertificate(rustls::CertificateError::BadSignature))
    }
}

impl rustls::client::danger::ServerCertVerifier for SiteKeyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        use x509_parser::prelude::*;
        let bad = |why: &str| rustls::Error::General(format!("source certificate: {why}"));
        let (_, cert) = X509Certificate::from_der(end_entity.as_ref()).map_err(|_| bad("not X.509"))?;
        match cert.public_key().parsed() {
            Ok(x509_parser::public_key::PublicKey::RSA(rsa))
                if unsigned(rsa.modulus) == self.n.as_slice() && unsigned(rsa.exponent) == self.e.as_slice() =>
            {
                Ok(rustls::client::danger::ServerCertVerified::assertion())
            }
            _ => Err(bad("its key is not the source's HS_SITE key")),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        _cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.check_signature(message, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        _cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.check_signature(message, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        use rustls::SignatureScheme as S;
        let rsa = [
            S::RSA_PSS_SHA256,
            S::RSA_PSS_SHA384,
            S::RSA_PSS_SHA512,
            S::RSA_PKCS1_SHA256,
            S::RSA_PKCS1_SHA384,
            S::RSA_PKCS1_SHA512,
        ];
        rsa.into_iter().filter(|s| self.schemes.contains(s)).collect()
    }
}
