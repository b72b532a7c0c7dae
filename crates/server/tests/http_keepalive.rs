//! Keep-alive done right on the HTTP port: `Keep-Alive: timeout, max`
//! advertised and honoured, idle and slow-header connections closed,
//! `Connection: close` honoured, HTTPS on the same port.

mod http_common;

use http_common::{closed_within, get, header, read_response, start};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

#[tokio::test]
async fn max_requests_is_advertised_and_honoured() {
    let addr = start(|c| c.transport.http_max_requests = 3).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut buf = Vec::new();
    for expected in ["timeout=15, max=2", "timeout=15, max=1"] {
        get(&mut s, "/api/site").await;
        let (status, headers, _) = read_response(&mut s, &mut buf).await.unwrap();
        assert_eq!((status, header(&headers, "keep-alive")), (200, Some(expected)));
    }
    get(&mut s, "/api/site").await;
    let (status, headers, _) = read_response(&mut s, &mut buf).await.unwrap();
    assert_eq!((status, header(&headers, "connection")), (200, Some("close")));
    assert!(closed_within(&mut s, Duration::from_secs(2)).await, "closed after the last allowed request");
}

#[tokio::test]
async fn idle_and_slow_header_connections_are_closed() {
    let addr = start(|c| c.transport.http_keep_alive_secs = 1).await;
    let mut idle = TcpStream::connect(addr).await.unwrap();
    let mut buf = Vec::new();
    get(&mut idle, "/api/site").await;
    let (_, headers, _) = read_response(&mut idle, &mut buf).await.unwrap();
    assert_eq!(header(&headers, "keep-alive"), Some("timeout=1, max=99999"));
    assert!(!closed_within(&mut idle, Duration::from_millis(500)).await, "kept open within the timeout");
    assert!(closed_within(&mut idle, Duration::from_millis(1500)).await, "closed once idle past the timeout");

    // Slowloris: a header dribbled a byte at a time never completes.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /api/site HTTP/1.1\r\nHost: t\r\n").await.unwrap();
    let started = std::time::Instant::now();
    let mut closed = false;
    for _ in 0..20 {
        if slow.write_all(b"X").await.is_err() || closed_within(&mut slow, Duration::from_millis(200)).await {
            closed = true;
            break;
        }
    }
    assert!(closed && started.elapsed() < Duration::from_secs(3), "slow header cut off after {:?}", started.elapsed());

    // A connection that never sends anything is dropped too.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    assert!(closed_within(&mut silent, Duration::from_secs(3)).await);
}

#[tokio::test]
async fn connection_close_and_http10_are_honoured() {
    let addr = start(|_| {}).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /api/site HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut buf = Vec::new();
    let (status, headers, _) = read_response(&mut s, &mut buf).await.unwrap();
    assert_eq!(status, 200);
    assert!(header(&headers, "keep-alive").is_none());
    assert!(closed_within(&mut s, Duration::from_secs(2)).await);

    let mut old = TcpStream::connect(addr).await.unwrap();
    old.write_all(b"GET /api/site HTTP/1.0\r\n\r\n").await.unwrap();
    let (status, _, body) = read_response(&mut old, &mut buf).await.unwrap();
    assert_eq!(status, 200);
    assert!(body.starts_with(b"{\"responseCode\":1"));
    assert!(closed_within(&mut old, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn https_on_the_same_port_with_the_site_key() {
    use rustls::pki_types::ServerName;
    let addr = start(|_| {}).await;
    // Trust nothing but look at the certificate the server presents.
    #[derive(Debug)]
    struct Capture(std::sync::Mutex<Vec<u8>>);
    impl rustls::client::danger::ServerCertVerifier for Capture {
        fn verify_server_cert(
            &self,
            end_entity: &rustls::pki_types::CertificateDer<'_>,
            _: &[rustls::pki_types::CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            *self.0.lock().unwrap() = end_entity.to_vec();
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn verify_tls13_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            rustls::crypto::aws_lc_rs::default_provider().signature_verification_algorithms.supported_schemes()
        }
    }
    let capture = std::sync::Arc::new(Capture(Default::default()));
    let config =
        rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(capture.clone())
            .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut tls = connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
    tls.write_all(b"GET /api/site HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::io::AsyncReadExt::read_to_end(&mut tls, &mut out).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    // The certificate's key is the one our site record publishes.
    let body: serde_json::Value = serde_json::from_str(&text[text.find("\r\n\r\n").unwrap() + 4..]).unwrap();
    let n = body["site"]["servers"][0]["publicKey"]["value"]["n"].as_str().unwrap().to_string();
    let modulus = base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, n).unwrap();
    let cert = capture.0.lock().unwrap().clone();
    assert!(cert.windows(modulus.len()).any(|w| w == modulus.as_slice()), "certificate carries the HS_SITE key");
}
