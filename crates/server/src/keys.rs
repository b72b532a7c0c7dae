//! RSA key pairs: the server's signing key (certified responses, session setup)
//! and the admin key made at init. Private-key operations go through aws-lc-rs
//! (constant time; `rsa` 0.9 carries RUSTSEC-2023-0071).

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{self, KeyPair, RsaKeyPair};
use handled_proto::codec::Codec;
use handled_proto::data::pubkey::{java_bigint, PublicKey};
use std::path::Path;

/// The site's signing key in the data directory (PKCS#8).
pub(crate) const SERVER_KEY_FILE: &str = handled_store::backup::SERVER_KEY_FILE_NAME;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot generate an RSA key")]
    Generate,
    #[error("{path}: not an RSA private key in PKCS#8 DER form ({reason})")]
    Parse { path: String, reason: String },
    #[error("signing failed")]
    Sign,
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

/// An RSA key pair that signs like Java's `SHA256withRSA` / `SHA1withRSA`.
pub struct RsaSigner {
    pair: RsaKeyPair,
    pkcs8: Vec<u8>,
    rng: SystemRandom,
}

impl RsaSigner {
    pub fn generate() -> Result<Self, KeyError> {
        let pair = RsaKeyPair::generate(KeySize::Rsa2048).map_err(|_| KeyError::Generate)?;
        let pkcs8 = pair.as_der().map_err(|_| KeyError::Generate)?.as_ref().to_vec();
        Ok(RsaSigner { pair, pkcs8, rng: SystemRandom::new() })
    }

    pub fn from_pkcs8(pkcs8: &[u8], origin: &str) -> Result<Self, KeyError> {
        let pair = RsaKeyPair::from_pkcs8(pkcs8)
            .map_err(|e| KeyError::Parse { path: origin.to_string(), reason: e.to_string() })?;
        Ok(RsaSigner { pair, pkcs8: pkcs8.to_vec(), rng: SystemRandom::new() })
    }

    /// Load a PKCS#8 DER file.
    pub fn load(path: &Path) -> Result<Self, KeyError> {
        let bytes = std::fs::read(path).map_err(|source| KeyError::Io { path: path.display().to_string(), source })?;
        Self::from_pkcs8(&bytes, &path.display().to_string())
    }

    /// Write the PKCS#8 DER form, readable by the owner only.
    pub fn save(&self, path: &Path) -> Result<(), KeyError> {
        write_private(path, &self.pkcs8)
    }

    pub fn pkcs8(&self) -> &[u8] {
        &self.pkcs8
    }

    /// The public half in HS_PUBKEY encoding (§2.8).
    pub fn hs_pubkey(&self) -> Vec<u8> {
        self.public_key().to_bytes()
    }

    pub fn public_key(&self) -> PublicKey {
        let public = self.pair.public_key();
        let components = aws_lc_rs::rsa::PublicKeyComponents::<Vec<u8>>::from(public);
        PublicKey::Rsa { exponent: java_bigint(&components.e), modulus: java_bigint(&components.n) }
    }

    /// Sign with SHA256withRSA. Java servers use SHA-1 below protocol 2.7, but
    /// verifiers take the hash from the credential's algorithm name (§1.5), so
    /// SHA-256 serves every version without a weaker code path.
    pub fn sign(&self, data: &[u8]) -> Result<(&'static [u8], Vec<u8>), KeyError> {
        let mut sig = vec![0u8; self.pair.public_modulus_len()];
        self.pair.sign(&signature::RSA_PKCS1_SHA256, &self.rng, data, &mut sig).map_err(|_| KeyError::Sign)?;
        Ok((b"SHA-256", sig))
    }
}

/// Create `path` with mode 0600 and write `bytes`, replacing it atomically.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), KeyError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| KeyError::Io { path: path.display().to_string(), source };
    let tmp = path.with_extension("tmp");
    let mut f =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp).map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::signature::{UnparsedPublicKey, RSA_PKCS1_2048_8192_SHA256};

    #[test]
    fn signs_verifiably_and_round_trips_pkcs8() {
        let k = RsaSigner::generate().unwrap();
        let (name, sig) = k.sign(b"hello").unwrap();
        assert_eq!(name, b"SHA-256");
        let public = k.pair.public_key().as_ref().to_vec();
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &public).verify(b"hello", &sig).unwrap();
        let again = RsaSigner::from_pkcs8(k.pkcs8(), "test").unwrap();
        assert_eq!(again.hs_pubkey(), k.hs_pubkey());
        assert!(RsaSigner::from_pkcs8(b"junk", "test").is_err());
    }
}
