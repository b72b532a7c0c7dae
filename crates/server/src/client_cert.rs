//! Client certificates on HTTPS (Technical Manual §14.6.2): a certificate
//! whose subject UID (or, without one, CN) is `index:handle` authenticates the
//! JSON API's requests as that identity when its public key is the HS_PUBKEY
//! at that index. Self-signed is fine: the issuer is ignored, the handshake
//! proves the client holds the private key, and the key is compared with the
//! handle's value at each request ([`crate::access::verify::certificate_key`]).
//!
//! Handle.Net asks for a certificate only when a request says
//! `Authorization: Handle clientCert="true"`, by renegotiating the connection.
//! rustls renegotiates nothing (TLS 1.3 has no renegotiation, and its
//! post-handshake authentication is not offered either), so with
//! `https_client_certificates = true` every handshake asks for an optional
//! certificate instead; clients without one carry on as before.

use handled_proto::data::pubkey::PublicKey;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use x509_parser::oid_registry::{OID_USERID, OID_X509_COMMON_NAME};
use x509_parser::public_key::PublicKey as CertKey;

/// What a connection's client certificate claims: checked per request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertificate {
    /// `index:handle` as written in the subject (UID, else CN).
    pub identity: String,
    /// The certificate's key in the form HS_PUBKEY values decode to; None for
    /// a key type handles cannot hold (it then matches no value).
    pub key: Option<PublicKey>,
}

impl ClientCertificate {
    /// The claim of a certificate (DER); None when it has no UID or CN.
    pub fn parse(der: &[u8]) -> Option<ClientCertificate> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = cert.subject();
        let (uid, cn) = (OID_USERID, OID_X509_COMMON_NAME);
        let first = |oid| subject.iter_by_oid(oid).next().and_then(|a| a.as_str().ok()).map(str::to_string);
        let identity = first(&uid).or_else(|| first(&cn))?;
        let key = match cert.public_key().parsed() {
            Ok(CertKey::RSA(rsa)) => Some(PublicKey::Rsa {
                exponent: unsigned(rsa.exponent).to_vec(),
                modulus: unsigned(rsa.modulus).to_vec(),
            }),
            _ => None,
        };
        Some(ClientCertificate { identity, key })
    }

    /// Is `value` (HS_PUBKEY data) this certificate's key?
    pub fn matches(&self, value: &PublicKey) -> bool {
        match (&self.key, value) {
            (Some(PublicKey::Rsa { exponent: e1, modulus: m1 }), PublicKey::Rsa { exponent: e2, modulus: m2 }) => {
                unsigned(e1) == unsigned(e2) && unsigned(m1) == unsigned(m2)
            }
            _ => false,
        }
    }
}

/// A big-endian integer without its leading zero bytes (DER and Java's
/// BigInteger add one to keep the sign positive).
fn unsigned(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
    &bytes[start..]
}

/// Asks every client for a certificate, requires none, and accepts any issuer:
/// the handshake signature is checked (the client holds the key), the key
/// against the handle later.
#[derive(Debug)]
pub struct AnyClientCertificate {
    algorithms: WebPkiSupportedAlgorithms,
}

impl AnyClientCertificate {
    pub fn new(provider: &rustls::crypto::CryptoProvider) -> AnyClientCertificate {
        AnyClientCertificate { algorithms: provider.signature_verification_algorithms }
    }
}

impl ClientCertVerifier for AnyClientCertificate {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        // The issuer is ignored (§14.6.2); a certificate naming no identity
        // is refused here rather than carried along.
        match ClientCertificate::parse(end_entity) {
            Some(_) => Ok(ClientCertVerified::assertion()),
            None => Err(rustls::Error::General("client certificate names no index:handle (UID or CN)".into())),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate(subject: &[(rcgen::DnType, &str)]) -> (Vec<u8>, rcgen::KeyPair) {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (kind, text) in subject {
            params.distinguished_name.push(kind.clone(), *text);
        }
        (params.self_signed(&pair).unwrap().der().to_vec(), pair)
    }

    #[test]
    fn uid_wins_over_cn_and_the_rsa_key_is_read() {
        let uid = rcgen::DnType::CustomDnType(vec![0, 9, 2342, 19200300, 100, 1, 1]);
        let (der, _) = certificate(&[(rcgen::DnType::CommonName, "someone"), (uid, "301:TEST/ADMIN")]);
        let c = ClientCertificate::parse(&der).unwrap();
        assert_eq!(c.identity, "301:TEST/ADMIN");
        let Some(PublicKey::Rsa { modulus, exponent }) = &c.key else { panic!("{:?}", c.key) };
        assert_eq!(unsigned(exponent), [1, 0, 1]);
        let padded = PublicKey::Rsa { exponent: exponent.clone(), modulus: [&[0u8][..], modulus].concat() };
        assert!(c.matches(&padded), "a leading zero byte does not change the key");
        let other = PublicKey::Rsa { exponent: exponent.clone(), modulus: vec![1; modulus.len()] };
        assert!(!c.matches(&other));
    }

    #[test]
    fn cn_serves_without_uid_and_a_nameless_certificate_has_no_claim() {
        let (der, _) = certificate(&[(rcgen::DnType::CommonName, "300:TEST/ADMIN")]);
        assert_eq!(ClientCertificate::parse(&der).unwrap().identity, "300:TEST/ADMIN");
        let (der, _) = certificate(&[(rcgen::DnType::OrganizationName, "x")]);
        assert_eq!(ClientCertificate::parse(&der), None);
        assert_eq!(ClientCertificate::parse(b"not a certificate"), None);
    }
}
