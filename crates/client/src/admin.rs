//! Authenticated administration: [`AdminSession`] opens a DH session (or
//! works without one), answers the server's challenge with a secret or RSA
//! key, and then sends MACed (and, for secret values, encrypted) requests.
//!
//! ```no_run
//! # async fn demo() -> Result<(), handled_client::AdminError> {
//! use handled_client::{AdminSession, ConnectParams, Credentials, KeyChoice, Protocol};
//! let creds = Credentials::load("data/admin-TEST.json".as_ref(), KeyChoice::Secret).unwrap();
//! let mut admin = AdminSession::open(ConnectParams::new(Protocol::Tcp, "127.0.0.1:2641".parse().unwrap()), creds).await?;
//! admin.create(b"TEST/1", &[handled_proto::value::HandleValue::new(1, "URL", "https://example.org")]).await?;
//! # Ok(()) }
//! ```

use crate::certify::{site_key, verify_signature};
use crate::credentials::{rsa_sign_sha256, Credentials, Key};
use crate::session::{decrypt_unit, encode_unit_with, finish_setup, setup_request, ClientSession, UnitOptions};
use crate::{decode_response, AdminError, Connection, Protocol, Response};
use handled_proto::crypto::seckey::{self, AnswerAlg, JAVA_PBKDF2_ITERATIONS, JAVA_PBKDF2_KEY_BITS};
use handled_proto::data::pubkey::PublicKey;
use handled_proto::envelope::Version;
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::request::{ChallengeAnswer, RequestBody, ResolutionRequest, AUTH_TYPE_PUBKEY, AUTH_TYPE_SECKEY};
use handled_proto::response::ResponseBody;
use handled_proto::session::PublicKeyAnswer;
use handled_proto::value::HandleValue;
use std::net::SocketAddr;
use std::time::Duration;

/// Where and how to talk to the server.
#[derive(Debug, Clone)]
pub struct ConnectParams {
    pub protocol: Protocol,
    pub addr: SocketAddr,
    pub timeout: Duration,
    /// Keep the TCP connection open between requests (HTTP always keeps alive).
    pub persistent: bool,
    /// Open a DH session (the Java client's default); false = plain
    /// challenge/response for every request.
    pub use_session: bool,
    /// Session idle timeout to ask for, seconds.
    pub session_timeout: i32,
}

impl ConnectParams {
    pub fn new(protocol: Protocol, addr: SocketAddr) -> Self {
        ConnectParams {
            protocol,
            addr,
            timeout: Duration::from_secs(10),
            persistent: true,
            use_session: true,
            session_timeout: 86_400,
        }
    }
}

fn request_id() -> i32 {
    rand::random::<i32>() & 0x7fff_ffff | 1
}

/// One authenticated administrator's connection to one server.
pub struct AdminSession {
    conn: Connection,
    params: ConnectParams,
    creds: Credentials,
    /// The server's key from its site record: session setup responses must verify with it.
    server_key: Option<PublicKey>,
    session: Option<ClientSession>,
}

impl AdminSession {
    /// Connect, fetch the server's key (GET_SITE_INFO) and, unless switched
    /// off, set up a session. Authentication happens at the first request.
    pub async fn open(params: ConnectParams, creds: Credentials) -> Result<Self, AdminError> {
        let mut conn = Connection::open(params.protocol, params.addr, params.timeout, params.persistent).await?;
        let site = conn.site_info().await?;
        let server_key = site_key(&site);
        let mut admin = AdminSession { conn, params, creds, server_key, session: None };
        if admin.params.use_session {
            admin.session = Some(admin.setup_session().await?);
        }
        Ok(admin)
    }

    /// The session id, if a session is open.
    pub fn session_id(&self) -> Option<i32> {
        self.session.as_ref().map(|s| s.id)
    }

    /// The open session, for callers building their own units.
    pub fn session(&self) -> Option<&ClientSession> {
        self.session.as_ref()
    }

    /// The underlying connection, for raw exchanges.
    pub fn connection(&mut self) -> &mut Connection {
        &mut self.conn
    }

    async fn setup_session(&mut self) -> Result<ClientSession, AdminError> {
        let (secret, body) = setup_request(Some((&self.creds.handle, self.creds.index)), self.params.session_timeout);
        let rid = request_id();
        let (unit, hb) = encode_unit_with(
            &body,
            self.conn.keep_alive(OpFlags::CT | OpFlags::RD | OpFlags::REC | OpFlags::CA),
            rid,
            UnitOptions::default(),
        );
        let r = self.send(&unit, rid, None).await?.remove(0);
        if r.code() != ResponseCode::SUCCESS {
            return Err(refused(&r));
        }
        if !r.digest.as_ref().is_some_and(|d| d.matches(&hb)) {
            return Err(AdminError::Session("setup response does not carry our request's digest".into()));
        }
        if let Some(key @ PublicKey::Rsa { .. }) = &self.server_key {
            verify_signature(&r, key).map_err(|e| AdminError::Session(format!("setup response: {e}")))?;
        }
        let ResponseBody::SessionSetup(s) = &r.body else {
            return Err(AdminError::Unexpected(format!("{:?}", r.body)));
        };
        finish_setup(&secret, r.envelope.session_id, r.envelope.version, &s.data)
    }

    async fn send(
        &mut self,
        unit: &[u8],
        rid: i32,
        session: Option<&ClientSession>,
    ) -> Result<Vec<Response>, AdminError> {
        let units = self.conn.exchange(unit, rid).await?;
        let mut out = Vec::with_capacity(units.len());
        for u in units {
            out.push(decode_response(&decrypt_unit(&u, session)?, rid)?);
        }
        Ok(out)
    }

    /// Send a request as this administrator: in the session when there is
    /// one, answering a challenge when asked. Non-success codes are errors.
    /// A session the server has forgotten (500, or 501–505) is set up again once.
    pub async fn request(&mut self, body: &RequestBody, flags: OpFlags) -> Result<Vec<Response>, AdminError> {
        match self.try_request(body, flags).await {
            Err(AdminError::Refused { code, .. }) if code.0 >= 500 && self.params.use_session => {
                self.session = Some(self.setup_session().await?);
                self.try_request(body, flags).await
            }
            other => other,
        }
    }

    async fn try_request(&mut self, body: &RequestBody, flags: OpFlags) -> Result<Vec<Response>, AdminError> {
        let session = self.session.take();
        let result = self.exchange(body, flags, session.as_ref()).await;
        self.session = session;
        result
    }

    async fn exchange(
        &mut self,
        body: &RequestBody,
        flags: OpFlags,
        session: Option<&ClientSession>,
    ) -> Result<Vec<Response>, AdminError> {
        let rid = request_id();
        let opts = match session {
            Some(s) => UnitOptions {
                version: s.version,
                session_id: s.id,
                session: Some(s),
                encrypt: should_encrypt(body, s.version),
                suggested: None,
            },
            None => UnitOptions::default(),
        };
        let flags = self.conn.keep_alive(flags);
        let (unit, hb) = encode_unit_with(body, flags, rid, opts);
        let mut responses = self.send(&unit, rid, session).await?;
        if responses[0].code() == ResponseCode::AUTHENTICATION_NEEDED {
            let challenge = responses.remove(0);
            let answer = answer_challenge(&self.creds, &challenge, &hb)?;
            let rid = request_id();
            let opts = UnitOptions {
                version: challenge.envelope.version,
                session_id: challenge.envelope.session_id,
                session: None,
                encrypt: false,
                suggested: None,
            };
            // As the Java client: the answer carries the original's flags but not OW/MINT.
            let (unit, _) = encode_unit_with(&answer, flags.without(OpFlags::OW).without(OpFlags::MINT), rid, opts);
            responses = self.send(&unit, rid, session).await?;
        }
        if responses[0].code() != ResponseCode::SUCCESS {
            return Err(refused(&responses[0]));
        }
        Ok(responses)
    }

    /// Create a handle; returns the created handle.
    pub async fn create(&mut self, handle: &[u8], values: &[HandleValue]) -> Result<Vec<u8>, AdminError> {
        self.create_with(handle, values, false, false).await
    }

    /// Create with the overwrite and mint flags.
    pub async fn create_with(
        &mut self,
        handle: &[u8],
        values: &[HandleValue],
        overwrite: bool,
        mint: bool,
    ) -> Result<Vec<u8>, AdminError> {
        let body = RequestBody::CreateHandle { handle: handle.to_vec(), values: values.to_vec() };
        let flags = admin_flags().set(OpFlags::OW, overwrite).set(OpFlags::MINT, mint);
        match self.request(&body, flags).await?.remove(0).body {
            ResponseBody::Created { handle: Some(h) } => Ok(h),
            ResponseBody::Created { handle: None } => Ok(handle.to_vec()),
            other => Err(AdminError::Unexpected(format!("{other:?}"))),
        }
    }

    pub async fn delete(&mut self, handle: &[u8]) -> Result<(), AdminError> {
        self.request(&RequestBody::DeleteHandle { handle: handle.to_vec() }, admin_flags()).await.map(drop)
    }

    pub async fn add_values(
        &mut self,
        handle: &[u8],
        values: &[HandleValue],
        overwrite: bool,
    ) -> Result<(), AdminError> {
        let body = RequestBody::AddValue { handle: handle.to_vec(), values: values.to_vec() };
        self.request(&body, admin_flags().set(OpFlags::OW, overwrite)).await.map(drop)
    }

    pub async fn remove_values(&mut self, handle: &[u8], indexes: &[i32]) -> Result<(), AdminError> {
        let body = RequestBody::RemoveValue { handle: handle.to_vec(), indexes: indexes.to_vec() };
        self.request(&body, admin_flags()).await.map(drop)
    }

    pub async fn modify_values(&mut self, handle: &[u8], values: &[HandleValue]) -> Result<(), AdminError> {
        let body = RequestBody::ModifyValue { handle: handle.to_vec(), values: values.to_vec() };
        self.request(&body, admin_flags()).await.map(drop)
    }

    /// All handles under a prefix (`TEST` or `0.NA/TEST`).
    pub async fn list_handles(&mut self, prefix: &[u8]) -> Result<Vec<Vec<u8>>, AdminError> {
        let responses = self.request(&RequestBody::ListHandles { prefix: prefix.to_vec() }, admin_flags()).await?;
        list_of(responses)
    }

    pub async fn list_homed_prefixes(&mut self) -> Result<Vec<Vec<u8>>, AdminError> {
        list_of(self.request(&RequestBody::ListHomedNas { handle: b"/".to_vec() }, admin_flags()).await?)
    }

    pub async fn home_prefix(&mut self, prefix: &[u8]) -> Result<(), AdminError> {
        self.request(&RequestBody::HomeNa { prefix: prefix.to_vec() }, admin_flags()).await.map(drop)
    }

    pub async fn unhome_prefix(&mut self, prefix: &[u8]) -> Result<(), AdminError> {
        self.request(&RequestBody::UnhomeNa { prefix: prefix.to_vec() }, admin_flags()).await.map(drop)
    }

    /// Resolve with PO clear: non-public values too, as this administrator.
    pub async fn resolve_all(&mut self, handle: &[u8]) -> Result<Vec<HandleValue>, AdminError> {
        let body =
            RequestBody::Resolution(ResolutionRequest { handle: handle.to_vec(), indexes: vec![], types: vec![] });
        match self.request(&body, OpFlags::REC | OpFlags::CA).await?.remove(0).body {
            ResponseBody::Resolution { values, .. } => Ok(values),
            other => Err(AdminError::Unexpected(format!("{other:?}"))),
        }
    }

    /// End the session (if any) politely.
    pub async fn close(mut self) -> Result<(), AdminError> {
        if self.session.is_some() {
            self.try_request(&RequestBody::SessionTerminate { handle: b"/".to_vec() }, admin_flags()).await?;
        }
        Ok(())
    }
}

/// The answer to `challenge` for our request `hb` (header+body as sent), as `creds`.
pub(crate) fn answer_challenge(
    creds: &Credentials,
    challenge: &Response,
    hb: &[u8],
) -> Result<RequestBody, AdminError> {
    let ResponseBody::Challenge { nonce } = &challenge.body else {
        return Err(AdminError::Unexpected("402 without a nonce".into()));
    };
    let digest =
        challenge.digest.as_ref().ok_or_else(|| AdminError::Unexpected("challenge without a request digest".into()))?;
    // Sign only what we asked for (the Java client checks this too).
    if !digest.matches(hb) {
        return Err(AdminError::Session("challenge is for a request we did not send".into()));
    }
    let version = challenge.envelope.version.min(challenge.envelope.suggested);
    let (auth_type, answer) = match &creds.key {
        Key::Secret(secret) => {
            let alg = if version >= Version::V2_7 {
                AnswerAlg::Pbkdf2HmacSha1 { iterations: JAVA_PBKDF2_ITERATIONS, key_bits: JAVA_PBKDF2_KEY_BITS }
            } else {
                AnswerAlg::Sha1
            };
            let salt: [u8; 16] = rand::random();
            (AUTH_TYPE_SECKEY, seckey::answer(alg, secret, nonce, &digest.digest, &salt).to_vec())
        }
        Key::Rsa(pair) => {
            let signed = [nonce.as_slice(), &digest.digest].concat();
            let signature =
                rsa_sign_sha256(pair, &signed).ok_or_else(|| AdminError::Session("RSA signing failed".into()))?;
            (AUTH_TYPE_PUBKEY, PublicKeyAnswer { hash_name: b"SHA-256".to_vec(), signature }.to_vec())
        }
    };
    Ok(RequestBody::ChallengeAnswer(ChallengeAnswer {
        auth_type: auth_type.to_vec(),
        identity_handle: creds.handle.clone(),
        identity_index: creds.index,
        answer,
    }))
}

fn admin_flags() -> OpFlags {
    OpFlags::REC | OpFlags::CA
}

fn refused(r: &Response) -> AdminError {
    AdminError::Refused { code: r.code(), message: r.message().unwrap_or_default() }
}

fn list_of(responses: Vec<Response>) -> Result<Vec<Vec<u8>>, AdminError> {
    let mut out = Vec::new();
    for r in responses {
        match r.body {
            ResponseBody::HandleList(items) => out.extend(items),
            other => return Err(AdminError::Unexpected(format!("{other:?}"))),
        }
    }
    Ok(out)
}

/// ≥ 2.8: create/add/modify carrying non-public values go encrypted (§1.7).
fn should_encrypt(body: &RequestBody, version: Version) -> bool {
    version >= Version::V2_8
        && match body {
            RequestBody::CreateHandle { values, .. }
            | RequestBody::AddValue { values, .. }
            | RequestBody::ModifyValue { values, .. } => values.iter().any(|v| !v.permissions.public_read()),
            _ => false,
        }
}
