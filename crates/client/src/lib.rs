//! Our client for the native Handle protocol over UDP, TCP and the HTTP tunnel.
//! One [`Connection`] per peer and protocol; it frames requests and reads
//! replies (multi-datagram UDP and multi-message CN answers included).

pub mod admin;
pub mod certify;
pub mod credentials;
pub mod replication;
pub mod session;
pub mod sites;
mod transport;

pub use admin::{AdminSession, ConnectParams};
pub use credentials::{Credentials, KeyChoice};
pub use transport::Protocol;

use handled_proto::codec::{Codec, Reader};
use handled_proto::credential::Credential;
use handled_proto::digest::RequestDigest;
use handled_proto::envelope::{Envelope, Version, ENVELOPE_LEN};
use handled_proto::header::{Header, OpFlags, ResponseCode};
use handled_proto::message::parse_message;
use handled_proto::request::{RequestBody, ResolutionRequest};
use handled_proto::response::{decode_response_body, ResponseBody};
use handled_proto::value::HandleValue;
use std::net::SocketAddr;
use std::time::Duration;

/// The version we speak.
pub const CLIENT_VERSION: Version = Version::V2_10;

/// Why an administration request failed: the connection, the session, or the server's refusal.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("session: {0}")]
    Session(String),
    /// The server answered with an error code.
    #[error("{} ({}){}", .code.name(), .code.0, if .message.is_empty() { String::new() } else { format!(": {}", .message) })]
    Refused { code: ResponseCode, message: String },
    #[error("unexpected response: {0}")]
    Unexpected(String),
}

impl AdminError {
    /// The server's response code, for refusals.
    pub fn code(&self) -> Option<ResponseCode> {
        match self {
            AdminError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("malformed response: {0}")]
    Decode(#[from] handled_proto::DecodeError),
    #[error("HTTP: {0}")]
    Http(String),
    #[error("response for request id {got}, expected {expected}")]
    WrongRequestId { expected: i32, got: i32 },
}

/// A decoded response message.
#[derive(Debug, Clone)]
pub struct Response {
    pub envelope: Envelope,
    pub header: Header,
    pub body: ResponseBody,
    /// The request digest prefix (RD, and always in challenges).
    pub digest: Option<RequestDigest>,
    /// The signature or MAC, if the server sent one.
    pub credential: Option<Credential>,
    /// Header and body as received: with the envelope, what a signature covers.
    pub header_and_body: Vec<u8>,
}

impl Response {
    pub fn code(&self) -> ResponseCode {
        self.header.response_code
    }

    /// The error message of a non-success response, if any.
    pub fn message(&self) -> Option<String> {
        match &self.body {
            ResponseBody::Error { message } => Some(String::from_utf8_lossy(message).into_owned()),
            _ => None,
        }
    }
}

/// Options of a resolution request.
#[derive(Debug, Clone)]
pub struct ResolveOptions {
    pub indexes: Vec<i32>,
    pub types: Vec<Vec<u8>>,
    pub public_only: bool,
    pub certify: bool,
}

impl Default for ResolveOptions {
    fn default() -> Self {
        ResolveOptions { indexes: Vec::new(), types: Vec::new(), public_only: true, certify: false }
    }
}

/// A connection to one server over one protocol.
pub struct Connection {
    transport: transport::Transport,
    timeout: Duration,
}

impl Connection {
    /// `persistent` keeps TCP connections open between requests (HTTP always keeps alive).
    pub async fn open(
        protocol: Protocol,
        addr: SocketAddr,
        timeout: Duration,
        persistent: bool,
    ) -> Result<Self, ClientError> {
        let transport = transport::Transport::open(protocol, addr, timeout, persistent).await?;
        Ok(Connection { transport, timeout })
    }

    /// TCP connections opened so far (one per request unless persistent).
    pub fn connections_opened(&self) -> u64 {
        self.transport.connections_opened()
    }

    /// Send a complete request unit and collect the response units (several
    /// when CN is set), undecoded: for callers that build their own units.
    pub async fn exchange(&mut self, unit: &[u8], request_id: i32) -> Result<Vec<Vec<u8>>, ClientError> {
        tokio::time::timeout(self.timeout, self.transport.exchange(unit, request_id))
            .await
            .map_err(|_| ClientError::Timeout(self.timeout))?
    }

    /// `flags` with KA when this connection keeps its TCP stream for the next
    /// request, as RFC 3652 asks (Handle.Net closes after every answer all the
    /// same, and `handled` keeps every connection).
    pub fn keep_alive(&self, flags: OpFlags) -> OpFlags {
        flags.set(OpFlags::KA, self.transport.keeps_stream())
    }

    /// Send one request and collect its response messages (several when CN is set).
    pub async fn request(&mut self, body: &RequestBody, flags: OpFlags) -> Result<Vec<Response>, ClientError> {
        let request_id = rand::random::<i32>() & 0x7fff_ffff | 1;
        let unit = encode_request(body, self.keep_alive(flags), request_id);
        let units = tokio::time::timeout(self.timeout, self.transport.exchange(&unit, request_id))
            .await
            .map_err(|_| ClientError::Timeout(self.timeout))??;
        units.iter().map(|u| decode_response(u, request_id)).collect()
    }

    pub async fn resolve(&mut self, handle: &[u8], options: &ResolveOptions) -> Result<Response, ClientError> {
        let body = RequestBody::Resolution(ResolutionRequest {
            handle: handle.to_vec(),
            indexes: options.indexes.clone(),
            types: options.types.clone(),
        });
        let mut flags = OpFlags::REC.with(OpFlags::CA);
        if options.public_only {
            flags = flags.with(OpFlags::PO);
        }
        if options.certify {
            flags = flags.with(OpFlags::CT);
        }
        let mut responses = self.request(&body, flags).await?;
        Ok(responses.remove(0))
    }

    pub async fn site_info(&mut self) -> Result<Response, ClientError> {
        let mut responses = self.request(&RequestBody::GetSiteInfo { handle: b"/".to_vec() }, OpFlags::REC).await?;
        Ok(responses.remove(0))
    }
}

/// Values of a successful resolution, else None.
pub fn resolved_values(response: &Response) -> Option<&[HandleValue]> {
    match &response.body {
        ResponseBody::Resolution { values, .. } => Some(values),
        _ => None,
    }
}

/// Encode a complete request unit outside any session.
pub fn encode_request(body: &RequestBody, flags: OpFlags, request_id: i32) -> Vec<u8> {
    session::encode_unit_with(body, flags, request_id, session::UnitOptions::default()).0
}

/// Decode a response unit, checking it answers `request_id`.
pub fn decode_response(unit: &[u8], request_id: i32) -> Result<Response, ClientError> {
    let envelope = Envelope::read(&mut Reader::new(unit))?;
    if envelope.request_id != request_id {
        return Err(ClientError::WrongRequestId { expected: request_id, got: envelope.request_id });
    }
    let view = parse_message(&unit[ENVELOPE_LEN..])?;
    let (digest, body) = decode_response_body(&view.header, envelope.version, view.body)?;
    Ok(Response {
        envelope,
        header: view.header,
        body,
        digest,
        credential: view.credential.clone(),
        header_and_body: view.header_and_body.to_vec(),
    })
}
