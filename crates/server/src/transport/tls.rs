//! HTTPS on the HTTP port (§4.4, "port unification"): the first byte of a
//! connection tells TLS (a handshake record, 0x16) from plain HTTP and the
//! native tunnel. The certificate comes from the configuration (PEM files) or
//! is made at start from the server key, self-signed: Java clients accept an
//! HTTPS certificate only if its public key is the one in our HS_SITE.

use crate::config::Config;
use crate::keys::RsaSigner;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
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
    let (certs, private) = match (&config.tls_cert, &config.tls_key) {
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
        (None, None) => self_signed(config, key)?,
        _ => return Err(TlsError::Half),
    };
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut server = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, private)?;
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(server)))
}

/// A certificate for the server's own RSA key, valid for `localhost` and the
/// listen and public addresses.
fn self_signed(
    config: &Config,
    key: &RsaSigner,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let pkcs8 = PrivatePkcs8KeyDer::from(key.pkcs8().to_vec());
    let pair = rcgen::KeyPair::from_pkcs8_der_and_sign_algo(&pkcs8, &rcgen::PKCS_RSA_SHA256)?;
    let mut names = vec!["localhost".to_string(), config.listen.to_string()];
    if config.public_address() != config.listen {
        names.push(config.public_address().to_string());
    }
    let mut params = rcgen::CertificateParams::new(names)?;
    params.distinguished_name.push(rcgen::DnType::CommonName, format!("handled {}", config.description));
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
        let (certs, _) = self_signed(&Config::default(), &key).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&certs[0]).unwrap();
        let spki = cert.public_key().subject_public_key.data.to_vec();
        // The SPKI bit string is the PKCS#1 RSAPublicKey: same modulus as HS_SITE's key.
        let handled_proto::data::pubkey::PublicKey::Rsa { modulus, .. } = key.public_key() else { panic!() };
        let m = modulus.iter().skip_while(|&&b| b == 0).copied().collect::<Vec<_>>();
        assert!(spki.windows(m.len()).any(|w| w == m.as_slice()));
        assert!(acceptor(&Config::default(), &key).is_ok());
        let half = Config { tls_cert: Some("x.pem".into()), ..Config::default() };
        assert!(matches!(acceptor(&half, &key), Err(TlsError::Half)));
    }
}
