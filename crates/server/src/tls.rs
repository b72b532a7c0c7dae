//! HTTPS on the HTTP port (§4.4, "port unification"): the first byte of a
//! connection tells TLS (a handshake record, 0x16) from plain HTTP and the
//! native tunnel. The certificate comes from the configuration (PEM files) or
//! is made at start from the server key, self-signed: Java clients accept an
//! HTTPS certificate only if its public key is the one in our HS_SITE.

use crate::client_cert::AnyClientCertificate;
use crate::config::Config;
use crate::keys::RsaSigner;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

/// First byte of a TLS handshake record.
pub const TLS_HANDSHAKE: u8 = 0x16;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("tls_cert and tls_key must be given together")]
    Half,
    #[error("{path}: {reason}")]
    Pem { path: String, reason: String },
    #[error("cannot make a certificate from the server key: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The acceptor for HTTPS connections on the HTTP port.
pub fn acceptor(config: &Config, key: &RsaSigner) -> Result<TlsAcceptor, TlsError> {
    Ok(CertSlot::load(config, key, None)?.acceptor(config.transport.https_client_certificates))
}

/// The certificate HTTPS presents, replaceable while serving (SIGHUP):
/// connections after a [`CertSlot::reload`] get the new one.
#[derive(Debug)]
pub struct CertSlot {
    current: std::sync::RwLock<Arc<CertifiedKey>>,
    /// What the self-signed certificate names ([`site_identity`]).
    identity: Option<String>,
}

impl ResolvesServerCert for CertSlot {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

impl CertSlot {
    /// `identity`: the HS_SITE value that publishes the server key, named in
    /// the self-signed certificate ([`site_identity`]).
    pub fn load(config: &Config, key: &RsaSigner, identity: Option<String>) -> Result<Arc<CertSlot>, TlsError> {
        let current = std::sync::RwLock::new(Arc::new(certified(config, key, identity.as_deref())?));
        Ok(Arc::new(CertSlot { current, identity }))
    }

    /// Read the certificate again (the files may have been renewed); on an
    /// error the one in use stays.
    pub fn reload(&self, config: &Config, key: &RsaSigner) -> Result<(), TlsError> {
        let new = Arc::new(certified(config, key, self.identity.as_deref())?);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = new;
        Ok(())
    }

    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// `client_certificates`: ask every client for an optional certificate
    /// ([`crate::client_cert`]).
    pub fn acceptor(self: &Arc<Self>, client_certificates: bool) -> TlsAcceptor {
        let provider = provider();
        let versions = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("the default provider supports the default versions");
        let server = if client_certificates {
            versions.with_client_cert_verifier(Arc::new(AnyClientCertificate::new(&provider)))
        } else {
            versions.with_no_client_auth()
        };
        let mut server = server.with_cert_resolver(self.clone());
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        TlsAcceptor::from(Arc::new(server))
    }
}

/// The acceptor for replication streams (TLS after a RETRIEVE_TXN_LOG or
/// DUMP_HANDLES response): always the self-signed certificate of the server
/// key, whatever HTTPS presents, because a Handle.Net mirror accepts exactly a
/// certificate whose public key is the one in our HS_SITE (it checks nothing else).
pub fn site_key_acceptor(subject: &SelfSigned, key: &RsaSigner) -> Result<TlsAcceptor, TlsError> {
    let (certs, private) = self_signed(subject, key, None)?;
    let server = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, private)?;
    Ok(TlsAcceptor::from(Arc::new(server)))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// The configured certificate and key (checked to match), or a self-signed one.
fn certified(config: &Config, key: &RsaSigner, identity: Option<&str>) -> Result<CertifiedKey, TlsError> {
    let (certs, private) = match (&config.transport.tls_cert, &config.transport.tls_key) {
        (Some(c), Some(k)) => {
            let pem = |p: &std::path::Path, e: rustls::pki_types::pem::Error| TlsError::Pem {
                path: p.display().to_string(),
                reason: e.to_string(),
            };
            let certs = CertificateDer::pem_file_iter(c)
                .map_err(|e| pem(c, e))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| pem(c, e))?;
            let private = PrivateKeyDer::from_pem_file(k).map_err(|e| pem(k, e))?;
            (certs, private)
        }
        (None, None) => self_signed(&SelfSigned::of(config), key, identity)?,
        _ => return Err(TlsError::Half),
    };
    if certs.is_empty() {
        return Err(TlsError::Rustls(rustls::Error::General("no certificate in tls_cert".into())));
    }
    Ok(CertifiedKey::from_der(certs, private, &provider())?)
}

/// The subject attribute UID (RFC 4519 `userid`, 0.9.2342.19200300.100.1.1).
const USER_ID_OID: [u64; 7] = [0, 9, 2342, 19200300, 100, 1, 1];

/// The handle value that publishes the certificate's key, as `index:handle`
/// (Manual §14.6.1, handle-based certificates): the HS_SITE of a prefix
/// handle this server wrote, which carries the server key. The Java library's
/// `X509HSTrustManager` reads it from the subject's UID, resolves it and
/// compares keys. Bootstrap says which (none on a mirror, a promoted mirror
/// or a read-only server: their prefix handles are another's).
pub fn site_identity(prefix: &str) -> String {
    format!("{}:0.NA/{prefix}", crate::site::SITE_INDEX)
}

/// A certificate for the server's own RSA key, valid for `localhost` and the
/// listen and public addresses, naming the handle that publishes its key.
/// What a self-signed certificate of the server key names: the server's
/// addresses and its description (all it reads of the configuration).
#[derive(Clone, Debug)]
pub struct SelfSigned {
    names: Vec<String>,
    common_name: String,
}

impl SelfSigned {
    pub fn of(config: &Config) -> SelfSigned {
        let mut names = vec!["localhost".to_string(), config.listen.to_string()];
        if config.public_address() != config.listen {
            names.push(config.public_address().to_string());
        }
        SelfSigned { names, common_name: format!("handled {}", config.description) }
    }
}

fn self_signed(
    subject: &SelfSigned,
    key: &RsaSigner,
    identity: Option<&str>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let pkcs8 = PrivatePkcs8KeyDer::from(key.pkcs8().to_vec());
    let pair = rcgen::KeyPair::from_pkcs8_der_and_sign_algo(&pkcs8, &rcgen::PKCS_RSA_SHA256)?;
    let mut params = rcgen::CertificateParams::new(subject.names.clone())?;
    params.distinguished_name.push(rcgen::DnType::CommonName, subject.common_name.clone());
    if let Some(identity) = identity {
        params.distinguished_name.push(rcgen::DnType::CustomDnType(USER_ID_OID.to_vec()), identity);
    }
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2100, 1, 1);
    let cert = params.self_signed(&pair)?;
    Ok((vec![cert.der().clone()], PrivateKeyDer::Pkcs8(pkcs8)))
}

/// The connection's first byte without consuming it; None when the peer
/// closed or sent nothing within `wait` (slow openers are dropped).
pub async fn sniff(stream: &TcpStream, wait: Duration) -> Option<u8> {
    let mut b = [0u8; 1];
    match tokio::time::timeout(wait, stream.peek(&mut b)).await {
        Ok(Ok(1)) => Some(b[0]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_certificate_carries_the_server_key() {
        let key = RsaSigner::generate().unwrap();
        let (certs, _) = self_signed(&SelfSigned::of(&Config::default()), &key, None).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&certs[0]).unwrap();
        let spki = cert.public_key().subject_public_key.data.to_vec();
        // The SPKI bit string is the PKCS#1 RSAPublicKey: same modulus as HS_SITE's key.
        let handled_proto::data::pubkey::PublicKey::Rsa { modulus, .. } = key.public_key() else { panic!() };
        let m = modulus.iter().skip_while(|&&b| b == 0).copied().collect::<Vec<_>>();
        assert!(spki.windows(m.len()).any(|w| w == m.as_slice()));
        assert!(acceptor(&Config::default(), &key).is_ok());
        // Named by the handle value that publishes the key (§14.6.1): as the
        // Java library's X509HSTrustManager reads a subject.
        let (certs, _) = self_signed(&SelfSigned::of(&Config::default()), &key, Some(&site_identity("TEST"))).unwrap();
        let claim = crate::client_cert::ClientCertificate::parse(&certs[0]).unwrap();
        assert_eq!(claim.identity, "1:0.NA/TEST");
        let (certs, _) = self_signed(&SelfSigned::of(&Config::default()), &key, None).unwrap();
        let claim = crate::client_cert::ClientCertificate::parse(&certs[0]).unwrap();
        assert!(claim.identity.starts_with("handled"), "without one, no handle is named: {}", claim.identity);
        let mut half = Config::default();
        half.transport.tls_cert = Some("x.pem".into());
        assert!(matches!(acceptor(&half, &key), Err(TlsError::Half)));
    }

    /// SIGHUP's certificate reload: renewed files are presented afterwards; a
    /// broken file leaves the certificate in use.
    #[test]
    fn reload_presents_renewed_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.transport.tls_cert = Some(dir.path().join("cert.pem"));
        config.transport.tls_key = Some(dir.path().join("key.pem"));
        let pem = |label: &str, der: &[u8]| {
            use base64::Engine;
            let b64 = base64::engine::general_purpose::STANDARD.encode(der);
            let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap()).collect();
            format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
        };
        let write = |name: &str| {
            let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
            let cert = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap().self_signed(&pair).unwrap();
            std::fs::write(config.transport.tls_cert.as_ref().unwrap(), pem("CERTIFICATE", cert.der())).unwrap();
            std::fs::write(config.transport.tls_key.as_ref().unwrap(), pem("PRIVATE KEY", &pair.serialize_der()))
                .unwrap();
            cert.der().clone()
        };
        let key = RsaSigner::generate().unwrap();
        let first = write("first.example");
        let slot = CertSlot::load(&config, &key, None).unwrap();
        assert_eq!(slot.current().cert[0], first);
        let renewed = write("renewed.example");
        slot.reload(&config, &key).unwrap();
        assert_eq!(slot.current().cert[0], renewed);
        std::fs::write(config.transport.tls_key.as_ref().unwrap(), "not a key").unwrap();
        assert!(slot.reload(&config, &key).is_err());
        assert_eq!(slot.current().cert[0], renewed, "a failed reload keeps the certificate in use");
    }
}
