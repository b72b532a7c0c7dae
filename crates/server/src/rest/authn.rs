//! Who is calling the REST API (§4.6): `Authorization: Basic` (index:handle
//! and the secret) per request, or `Authorization: Handle` answering an HTTP
//! session's nonce. Proofs are checked by [`crate::access::verify`], the code
//! the native protocol uses; this file only parses headers (the sessions
//! themselves are in `http_sessions.rs`).

use super::{params::percent_decode, Reply, Req, Rest};
use crate::access::verify::{self, AuthError};
use crate::auth::{Caller, Identity};
use crate::client_cert::ClientCertificate;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use handled_proto::header::ResponseCode;
use handled_proto::session::SecretKeyAnswer;
use hyper::header::{HeaderValue, WWW_AUTHENTICATE};
use hyper::StatusCode;

/// `300:TEST/ADMIN` → (handle, 300); no digits before a `:` → index 0 (any key).
pub(crate) fn parse_identity(text: &[u8]) -> (Vec<u8>, i32) {
    if let Some(colon) = text.iter().position(|&b| b == b':') {
        let (index, handle) = (&text[..colon], &text[colon + 1..]);
        if !index.is_empty() && index.iter().all(u8::is_ascii_digit) {
            if let Some(i) = std::str::from_utf8(index).ok().and_then(|s| s.parse().ok()) {
                return (handle.to_vec(), i);
            }
        }
    }
    (text.to_vec(), 0)
}

/// `curl -u "300:TEST/ADMIN:secret"` splits at the first colon: user `300`,
/// password `TEST/ADMIN:secret`. When the user part has no encoded colon and
/// the password looks like `HANDLE:SECRET`, say how to write the identity
/// (never echoing the secret).
fn unencoded_identity_hint(user: &[u8], password: &[u8]) -> Option<String> {
    if user.contains(&b':') || !user.iter().all(u8::is_ascii_digit) || user.is_empty() {
        return None;
    }
    let colon = password.iter().position(|&b| b == b':')?;
    let handle = String::from_utf8_lossy(&password[..colon]);
    if !handle.contains('/') {
        return None;
    }
    let encoded: String = handle
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let index = String::from_utf8_lossy(user);
    Some(format!(
        "the Basic user name must be the percent-encoded identity: for {index}:{handle} send \
         {index}%3A{encoded}:SECRET (e.g. curl -u \"{index}%3A{encoded}:SECRET\")"
    ))
}

/// `Authorization: Handle clientCert="true"` (with or without `renegotiate`)
/// and no session: "authenticate me by my certificate".
fn asks_client_certificate(fields: &str) -> bool {
    let f = HandleFields::parse(fields);
    f.get("clientcert").is_some_and(|v| v.eq_ignore_ascii_case("true")) && f.get("sessionid").is_none()
}

/// The parameters of an `Authorization: Handle` header (or the same fields in
/// a sessions JSON body): keys case-insensitive, values quoted or bare.
#[derive(Debug, Default, Clone)]
pub(crate) struct HandleFields(pub Vec<(String, String)>);

impl HandleFields {
    pub fn parse(s: &str) -> HandleFields {
        let mut out = Vec::new();
        let mut rest = s.trim();
        while !rest.is_empty() {
            rest = rest.trim_start_matches([',', ' ', '\t']);
            let Some(eq) = rest.find('=') else { break };
            let key = rest[..eq].trim().to_ascii_lowercase();
            rest = rest[eq + 1..].trim_start();
            let value;
            if let Some(q) = rest.strip_prefix('"') {
                let mut v = String::new();
                let mut chars = q.char_indices();
                let mut end = q.len();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, n)) = chars.next() {
                                v.push(n);
                            }
                        }
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        c => v.push(c),
                    }
                }
                value = v;
                rest = &q[end.min(q.len())..];
            } else {
                let end = rest.find(',').unwrap_or(rest.len());
                value = rest[..end].trim().to_string();
                rest = &rest[end..];
            }
            out.push((key, value));
        }
        HandleFields(out)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    fn b64(&self, key: &str) -> Result<Option<Vec<u8>>, AuthError> {
        self.get(key)
            .map(|v| B64.decode(v.trim()).map_err(|_| AuthError::failed(format!("{key} is not base64"))))
            .transpose()
    }

    /// `id`, percent-decoded unless it came from JSON (`decoded`).
    pub fn identity(&self, decoded: bool) -> Option<(Vec<u8>, i32)> {
        let id = self.get("id")?;
        Some(parse_identity(&if decoded { id.as_bytes().to_vec() } else { percent_decode(id, false) }))
    }
}

/// Is `alg` (punctuation and case ignored) this name?
fn alg_is(alg: &str, names: &[&str]) -> bool {
    let norm: String = alg.chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>().to_ascii_uppercase();
    names.contains(&norm.as_str())
}

/// The secret-key answer an `alg` + `signature` (+ PBKDF2 fields) describe (§4.6).
fn seckey_answer(f: &HandleFields, mac: Vec<u8>) -> Result<SecretKeyAnswer, AuthError> {
    let alg = f.get("alg").unwrap_or("SHA1");
    let int = |k: &str| -> Result<i32, AuthError> {
        f.get(k)
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| AuthError::failed(format!("PBKDF2 answers need {k}")))
    };
    Ok(if alg_is(alg, &["SHA1", "SHA"]) {
        SecretKeyAnswer::Sha1(mac)
    } else if alg_is(alg, &["SHA256", "SHA2"]) {
        SecretKeyAnswer::Sha256(mac)
    } else if alg_is(alg, &["MD5"]) {
        SecretKeyAnswer::Md5(mac)
    } else if alg_is(alg, &["HMACSHA1"]) {
        SecretKeyAnswer::HmacSha1(mac)
    } else if alg_is(alg, &["HMACSHA256"]) {
        SecretKeyAnswer::HmacSha256(mac)
    } else if alg_is(alg, &["PBKDF2HMACSHA1"]) {
        let salt = f.b64("salt")?.ok_or_else(|| AuthError::failed("PBKDF2 answers need salt"))?;
        SecretKeyAnswer::Pbkdf2HmacSha1 { salt, iterations: int("iterations")?, key_bits: int("length")?, mac }
    } else {
        return Err(AuthError::failed(format!("unknown secret key algorithm {alg:?}")));
    })
}

impl Rest {
    /// Check a Handle answer to `nonce` (signed data `nonce ‖ cnonce`) from a
    /// client signing in at `peer`; a wrong one is logged as every front end
    /// logs failed authentications (`None`: a check for someone else, not logged).
    pub(crate) async fn verify_fields(
        &self,
        nonce: &[u8],
        f: &HandleFields,
        id_decoded: bool,
        peer: Option<std::net::SocketAddr>,
    ) -> Result<Identity, AuthError> {
        let verified = self.check_fields(nonce, f, id_decoded).await;
        if let (Some(e), Some(peer)) = (verified.as_ref().err().filter(|e| e.judged_credentials()), peer) {
            let identity = f.identity(id_decoded).map_or_else(
                || f.get("id").unwrap_or("-").to_owned(),
                |(handle, index)| format!("{index}:{}", String::from_utf8_lossy(&handle)),
            );
            self.ctx.logs.auth_failed(&identity, Some(peer), &e.message);
        }
        verified
    }

    async fn check_fields(&self, nonce: &[u8], f: &HandleFields, id_decoded: bool) -> Result<Identity, AuthError> {
        if f.get("version").is_some_and(|v| v.trim() != "0") {
            return Err(AuthError::failed("unsupported authorization version"));
        }
        let (handle, index) = f.identity(id_decoded).ok_or_else(|| AuthError::failed("missing id"))?;
        let cnonce = f.b64("cnonce")?.ok_or_else(|| AuthError::failed("missing cnonce"))?;
        let signature = f.b64("signature")?.ok_or_else(|| AuthError::failed("missing signature"))?;
        let signed = [nonce, &cnonce].concat();
        let state = &self.ctx;
        match f.get("type").unwrap_or("HS_SECKEY") {
            t if t.eq_ignore_ascii_case("HS_PUBKEY") => {
                let alg = f.get("alg").unwrap_or("SHA1");
                verify::signature_by(state, &handle, index, alg.as_bytes(), &signature, &signed).await
            }
            t if t.eq_ignore_ascii_case("HS_SECKEY") => {
                let mut answer = Vec::new();
                seckey_answer(f, signature)?.encode(&mut answer);
                verify::secret_key_answer(state, &handle, index, &answer, nonce, &cnonce).await
            }
            t => Err(AuthError::failed(format!("unknown key type {t:?}"))),
        }
    }

    /// Our signature over `nonce ‖ cnonce` when a client asks the server to
    /// authenticate itself (cnonce without id): (`serverAlg`, `serverSignature`).
    pub(crate) fn server_signature(&self, nonce: &[u8], f: &HandleFields) -> Option<(String, String)> {
        if f.get("id").is_some() {
            return None;
        }
        let cnonce = B64.decode(f.get("cnonce")?.trim()).ok()?;
        let (_, sig) = self.ctx.key.sign(&[nonce, &cnonce].concat()).ok()?;
        Some(("SHA256".to_string(), B64.encode(sig)))
    }

    /// The caller of a request. Credentials are ignored on plain HTTP unless
    /// configured; wrong ones are a 401 with a fresh challenge.
    pub(crate) async fn caller(&self, req: &Req) -> Result<Caller, Reply> {
        if !self.credentials_count(req) {
            return Ok(Caller::Anonymous);
        }
        let failed = |e: AuthError| self.auth_failure(req, e);
        let header = req.header("authorization");
        // A certificate authenticates requests that send no other credentials (§14.6.2).
        let asks_certificate = header.and_then(|h| strip_scheme(h, "handle")).is_some_and(asks_client_certificate);
        if header.is_none() || asks_certificate {
            return match &req.conn.client_cert {
                Some(certificate) => {
                    self.certificate(certificate, req.conn.peer).await.map(Caller::Authenticated).map_err(failed)
                }
                None if asks_certificate => Err(failed(AuthError {
                    code: ResponseCode::AUTHENTICATION_NEEDED,
                    message: "no client certificate on this connection: this server asks for one in the TLS \
                              handshake (https_client_certificates = true), it cannot renegotiate"
                        .into(),
                })),
                None => Ok(Caller::Anonymous),
            };
        }
        let Some(header) = header else { return Ok(Caller::Anonymous) };
        if let Some(b) = strip_scheme(header, "basic") {
            return self.basic(b, req.conn.peer).await.map(Caller::Authenticated).map_err(failed);
        }
        if let Some(h) = strip_scheme(header, "handle") {
            let f = HandleFields::parse(h);
            let Some(id) = f.get("sessionid") else {
                return Err(failed(AuthError {
                    code: ResponseCode::AUTHENTICATION_NEEDED,
                    message: "Handle authorization needs a sessionId".into(),
                }));
            };
            let Some(session) = self.sessions.get(id).await else {
                return Err(failed(AuthError {
                    code: ResponseCode::AUTHENTICATION_NEEDED,
                    message: "Unknown session".into(),
                }));
            };
            if f.get("signature").is_some() {
                let identity =
                    self.verify_fields(&session.nonce, &f, false, Some(req.conn.peer)).await.map_err(failed)?;
                self.sessions.prove(&session, identity.clone()).await;
                return Ok(Caller::Authenticated(identity));
            }
            return Ok(session.identity().map_or(Caller::Anonymous, Caller::Authenticated));
        }
        Ok(Caller::Anonymous)
    }

    /// A 401 with fresh challenges when the credentials were judged; a check
    /// that could not be made (too busy, the store out of reach) is answered
    /// as such (503), which says nothing of the credentials.
    fn auth_failure(&self, req: &Req, e: AuthError) -> Reply {
        if !e.judged_credentials() {
            return Reply::error(super::status_of(e.code, super::OpKind::Other, true), e.code, e.message);
        }
        self.challenge(req, Reply::error(StatusCode::UNAUTHORIZED, e.code, e.message))
    }

    /// The identity of a client certificate; a wrong one is logged with `peer`.
    async fn certificate(&self, c: &ClientCertificate, peer: std::net::SocketAddr) -> Result<Identity, AuthError> {
        let (handle, index) = parse_identity(c.identity.as_bytes());
        let verified = verify::certificate_key(&self.ctx, &handle, index, c).await;
        if let Some(e) = verified.as_ref().err().filter(|e| e.judged_credentials()) {
            self.ctx.logs.auth_failed(&c.identity, Some(peer), &e.message);
        }
        verified
    }

    /// `Basic base64(percent-encoded index:handle ":" secret)`; a wrong one is logged with `peer`.
    pub(crate) async fn basic(&self, b64: &str, peer: std::net::SocketAddr) -> Result<Identity, AuthError> {
        let raw = B64.decode(b64.trim()).map_err(|_| AuthError::failed("Basic credentials are not base64"))?;
        let colon = raw
            .iter()
            .position(|&b| b == b':')
            .ok_or_else(|| AuthError::failed("Basic credentials need user:password"))?;
        let user = percent_decode(&String::from_utf8_lossy(&raw[..colon]), false);
        let (handle, index) = parse_identity(&user);
        let verified = verify::secret(&self.ctx, &handle, index, &raw[colon + 1..]).await;
        if let Some(e) = verified.as_ref().err().filter(|e| e.judged_credentials()) {
            self.ctx.logs.auth_failed(&format!("{index}:{}", String::from_utf8_lossy(&handle)), Some(peer), &e.message);
        }
        verified.map_err(|mut e| {
            if let Some(hint) = unencoded_identity_hint(&user, &raw[colon + 1..]) {
                e.message = format!("{}; {hint}", e.message);
            }
            e
        })
    }

    /// Add the `WWW-Authenticate` challenges of §4.6 to a 401 (a new session's
    /// id and nonce; Basic too unless the client used another scheme or is XHR).
    pub(crate) fn challenge(&self, req: &Req, mut reply: Reply) -> Reply {
        {
            let s = self.sessions.create();
            let mut text = format!("Handle sessionId=\"{}\", nonce=\"{}\"", s.id, B64.encode(s.nonce));
            if let Some(h) = req.header("authorization").and_then(|h| strip_scheme(h, "handle")) {
                if let Some((alg, sig)) = self.server_signature(&s.nonce, &HandleFields::parse(h)) {
                    text.push_str(&format!(", serverAlg=\"{alg}\", serverSignature=\"{sig}\""));
                }
            }
            if let Ok(v) = HeaderValue::from_str(&text) {
                reply.headers.push((WWW_AUTHENTICATE, v));
            }
        }
        let other_scheme = req.header("authorization").is_some_and(|h| strip_scheme(h, "basic").is_none());
        let xhr = req.header("x-requested-with").is_some_and(|v| v.eq_ignore_ascii_case("XMLHttpRequest"));
        if !other_scheme && !xhr {
            reply.headers.push((WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"handle\"")));
        }
        reply
    }
}

/// The rest of an Authorization header after `scheme` (case-insensitive).
pub(crate) fn strip_scheme<'a>(header: &'a str, scheme: &str) -> Option<&'a str> {
    let h = header.trim_start();
    let (s, rest) = h.split_at(h.find(' ').unwrap_or(h.len()));
    s.eq_ignore_ascii_case(scheme).then_some(rest.trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unencoded_basic_identities_get_a_hint() {
        let hint = unencoded_identity_hint(b"300", b"TEST/ADMIN:s:e/cret").unwrap();
        assert!(hint.contains("send 300%3ATEST%2FADMIN:SECRET"), "{hint}");
        assert!(!hint.contains("cret"), "never the secret: {hint}");
        assert_eq!(unencoded_identity_hint(b"300:TEST/ADMIN", b"secret"), None, "encoded: no hint");
        assert_eq!(unencoded_identity_hint(b"300", b"plainsecret"), None);
        assert_eq!(unencoded_identity_hint(b"admin", b"TEST/ADMIN:x"), None, "not an index");
    }

    #[test]
    fn handle_header_fields() {
        let f = HandleFields::parse(
            r#"sessionId="abc", ID="300%3A20.5000%2FADMIN", type=HS_SECKEY, cnonce="8OH=", alg="HMAC-SHA256", q="a\"b""#,
        );
        assert_eq!(f.get("sessionid"), Some("abc"));
        assert_eq!(f.identity(false), Some((b"20.5000/ADMIN".to_vec(), 300)));
        assert_eq!(f.get("type"), Some("HS_SECKEY"));
        assert_eq!(f.get("cnonce"), Some("8OH="));
        assert_eq!(f.get("q"), Some("a\"b"));
    }

    #[test]
    fn identities_and_schemes() {
        assert_eq!(parse_identity(b"300:TEST/ADMIN"), (b"TEST/ADMIN".to_vec(), 300));
        assert_eq!(parse_identity(b"TEST/ADMIN"), (b"TEST/ADMIN".to_vec(), 0));
        assert_eq!(parse_identity(b"x:TEST/A"), (b"x:TEST/A".to_vec(), 0));
        assert_eq!(strip_scheme("basic abc", "Basic"), Some("abc"));
        assert_eq!(strip_scheme("Handle  a=b", "handle"), Some("a=b"));
        assert_eq!(strip_scheme("Bearer x", "basic"), None);
    }

    /// The MACs of `http_auth.json` (made by the Java library) verify as the
    /// answers our field mapping builds.
    #[test]
    fn vector_seckey_answers() {
        let v = crate::auth::test_vector("http_auth.json");
        let s = |k: &str| v[k].as_str().unwrap().to_string();
        let nonce = B64.decode(s("nonce_b64")).unwrap();
        let cnonce = B64.decode(s("cnonce_b64")).unwrap();
        let secret = s("secret_key_utf8").into_bytes();
        for (alg, key) in [
            ("SHA1", "seckey_alg_SHA1_signature_b64"),
            ("SHA-256", "seckey_alg_SHA256_signature_b64"),
            ("HMAC-SHA256", "seckey_alg_HMAC-SHA256_signature_b64"),
        ] {
            let f = HandleFields(vec![("alg".into(), alg.into())]);
            let answer = seckey_answer(&f, B64.decode(s(key)).unwrap()).unwrap();
            assert!(handled_proto::crypto::seckey::verify(&answer, &secret, &nonce, &cnonce).unwrap(), "{alg}");
            assert!(!handled_proto::crypto::seckey::verify(&answer, b"wrong", &nonce, &cnonce).unwrap(), "{alg}");
        }
        let f = HandleFields(vec![
            ("alg".into(), "PBKDF2-HMAC-SHA1".into()),
            ("salt".into(), s("seckey_alg_PBKDF2-HMAC-SHA1_salt_b64")),
            ("iterations".into(), v["seckey_alg_PBKDF2-HMAC-SHA1_iterations"].to_string()),
            ("length".into(), v["seckey_alg_PBKDF2-HMAC-SHA1_length"].to_string()),
        ]);
        let answer = seckey_answer(&f, B64.decode(s("seckey_alg_PBKDF2-HMAC-SHA1_signature_b64")).unwrap()).unwrap();
        assert!(handled_proto::crypto::seckey::verify(&answer, &secret, &nonce, &cnonce).unwrap());
        let basic = s("example_authorization_header_basic");
        let raw = B64.decode(strip_scheme(&basic, "basic").unwrap()).unwrap();
        let colon = raw.iter().position(|&b| b == b':').unwrap();
        assert_eq!(
            parse_identity(&percent_decode(std::str::from_utf8(&raw[..colon]).unwrap(), false)),
            (b"20.5000/ADMIN".to_vec(), 300)
        );
    }
}
