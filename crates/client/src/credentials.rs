//! Admin credentials: the JSON file `handled serve` writes at init
//! (`{"handle", "secret_key": {"index", "secret"}, "public_key": {"index",
//! "private_key_pkcs8"}}`), or the same pieces given directly.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{RsaKeyPair, RSA_PKCS1_SHA256};
use base64::Engine;
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{0}")]
    Invalid(String),
}

/// How to answer a challenge.
#[derive(Clone)]
pub enum Key {
    /// HS_SECKEY: the shared secret's bytes.
    Secret(Vec<u8>),
    /// HS_PUBKEY: an RSA private key (answers are `SHA256withRSA`).
    Rsa(Arc<RsaKeyPair>),
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Key::Secret(_) => f.write_str("Key::Secret(..)"),
            Key::Rsa(_) => f.write_str("Key::Rsa(..)"),
        }
    }
}

/// An admin identity `index:handle` with the key that proves it.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub handle: Vec<u8>,
    pub index: i32,
    pub key: Key,
}

/// Which key of a credentials file to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyChoice {
    Secret,
    PublicKey,
}

impl Credentials {
    pub fn secret(handle: impl Into<Vec<u8>>, index: i32, secret: impl Into<Vec<u8>>) -> Self {
        Credentials { handle: handle.into(), index, key: Key::Secret(secret.into()) }
    }

    /// An RSA private key in PKCS#8 DER form.
    pub fn rsa_pkcs8(handle: impl Into<Vec<u8>>, index: i32, pkcs8: &[u8]) -> Result<Self, CredentialsError> {
        let pair = RsaKeyPair::from_pkcs8(pkcs8)
            .map_err(|e| CredentialsError::Invalid(format!("not an RSA PKCS#8 private key: {e}")))?;
        Ok(Credentials { handle: handle.into(), index, key: Key::Rsa(Arc::new(pair)) })
    }

    /// Load the file `handled serve` wrote.
    pub fn load(path: &Path, choice: KeyChoice) -> Result<Self, CredentialsError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| CredentialsError::Read { path: path.display().to_string(), source })?;
        Self::parse(&text, choice).map_err(|e| CredentialsError::Invalid(format!("{}: {e}", path.display())))
    }

    pub fn parse(text: &str, choice: KeyChoice) -> Result<Self, CredentialsError> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| CredentialsError::Invalid(format!("not JSON: {e}")))?;
        let bad = |what: &str| CredentialsError::Invalid(format!("missing or invalid {what}"));
        let handle = v["handle"].as_str().ok_or_else(|| bad("\"handle\""))?.as_bytes().to_vec();
        match choice {
            KeyChoice::Secret => {
                let s = &v["secret_key"];
                let index = s["index"].as_i64().ok_or_else(|| bad("secret_key.index"))? as i32;
                let secret = s["secret"].as_str().ok_or_else(|| bad("secret_key.secret"))?;
                Ok(Credentials::secret(handle, index, secret.as_bytes()))
            }
            KeyChoice::PublicKey => {
                let k = &v["public_key"];
                let index = k["index"].as_i64().ok_or_else(|| bad("public_key.index"))? as i32;
                let b64 = k["private_key_pkcs8"].as_str().ok_or_else(|| bad("public_key.private_key_pkcs8"))?;
                let der = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|_| bad("public_key.private_key_pkcs8 (base64)"))?;
                Credentials::rsa_pkcs8(handle, index, &der)
            }
        }
    }

    /// `index:handle`.
    pub fn display(&self) -> String {
        format!("{}:{}", self.index, String::from_utf8_lossy(&self.handle))
    }
}

/// `SHA256withRSA` (PKCS#1 v1.5), what ≥ 2.7 peers expect.
pub(crate) fn rsa_sign_sha256(pair: &RsaKeyPair, data: &[u8]) -> Option<Vec<u8>> {
    let mut sig = vec![0u8; pair.public_modulus_len()];
    pair.sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), data, &mut sig).ok()?;
    Some(sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_server_file() {
        let text = r#"{"handle":"TEST/ADMIN","secret_key":{"index":300,"secret":"abc"},"public_key":{"index":301,"private_key_pkcs8":"AAAA"}}"#;
        let c = Credentials::parse(text, KeyChoice::Secret).unwrap();
        assert_eq!(c.display(), "300:TEST/ADMIN");
        assert!(matches!(c.key, Key::Secret(ref s) if s == b"abc"));
        assert!(Credentials::parse(text, KeyChoice::PublicKey).is_err(), "junk key is refused");
        assert!(Credentials::parse("{}", KeyChoice::Secret).is_err());
    }
}
