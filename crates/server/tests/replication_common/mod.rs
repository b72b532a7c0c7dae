//! A replication puller for the source tests: it sends RETRIEVE_TXN_LOG /
//! DUMP_HANDLES as a Handle.Net mirror does (answering the challenge with a
//! secret key, on a new connection as the Java client), then reads the stream
//! that follows on the same connection: TLS (checking that the certificate's
//! key is the one in the server's HS_SITE, as the Java mirror does) or the
//! PK-signed form (checking each signature with that key), decoded with the
//! proto decoders.

#![allow(dead_code)]

use handled_client::session::{encode_unit_with, UnitOptions};
use handled_client::{decode_response, Response};
use handled_proto::codec::{Codec, Reader};
use handled_proto::crypto::seckey::{self, AnswerAlg, JAVA_PBKDF2_ITERATIONS, JAVA_PBKDF2_KEY_BITS};
use handled_proto::data::pubkey::PublicKey;
use handled_proto::data::site::SiteInfo;
use handled_proto::envelope::{Envelope, Version, ENVELOPE_LEN};
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::replication::framing::Framing;
use handled_proto::replication::{
    BlockVerifier, DumpStreamDecoder, DumpStreamItem, Preamble, StreamDecoder, StreamGrammar, TxnStreamDecoder,
    TxnStreamItem, DEFAULT_MAX_ITEM_LEN,
};
use handled_proto::request::{ChallengeAnswer, RequestBody, AUTH_TYPE_SECKEY};
use handled_proto::response::ResponseBody;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A mirror's identity: a secret key at an index of a handle.
#[derive(Clone)]
pub struct Identity {
    pub handle: Vec<u8>,
    pub index: i32,
    pub secret: Vec<u8>,
}

/// Talks to one source as a mirror would.
pub struct Puller {
    pub addr: SocketAddr,
    pub identity: Option<Identity>,
    pub version: Version,
    /// The key in the source's HS_SITE (the one streams must be secured with).
    pub site_key: PublicKey,
}

/// A request unit as a peer of `version` sends it: it suggests no later
/// version either.
fn unit_of(body: &RequestBody, rid: i32, version: Version, session_id: i32) -> (Vec<u8>, Vec<u8>) {
    let opts = UnitOptions { version, suggested: Some(version), session_id, ..UnitOptions::default() };
    encode_unit_with(body, OpFlags::REC, rid, opts)
}

fn request_id() -> i32 {
    rand::random::<i32>() & 0x7fff_ffff | 1
}

async fn read_unit(tcp: &mut TcpStream) -> Vec<u8> {
    let mut unit = vec![0u8; ENVELOPE_LEN];
    tcp.read_exact(&mut unit).await.expect("response envelope");
    let envelope = Envelope::read(&mut Reader::new(&unit)).unwrap();
    let n = envelope.check_message_length().unwrap();
    unit.resize(ENVELOPE_LEN + n, 0);
    tcp.read_exact(&mut unit[ENVELOPE_LEN..]).await.expect("response message");
    unit
}

/// The server key its HS_SITE record names.
pub fn site_key(site_bytes: &[u8]) -> PublicKey {
    let site = SiteInfo::from_bytes(site_bytes).expect("site record");
    PublicKey::decode_data(&site.servers[0].public_key).expect("HS_SITE key")
}

/// Every item of a whole `what` stream in `bytes`, which ends with `end`.
fn all_items<G: StreamGrammar, V: BlockVerifier>(
    mut decoder: StreamDecoder<G, V>,
    bytes: &[u8],
    what: &str,
    end: &str,
) -> Vec<G::Item> {
    decoder.feed(bytes);
    let mut items = Vec::new();
    while let Some(item) = decoder.next_item().unwrap_or_else(|e| panic!("a well-formed {what}: {e}")) {
        items.push(item);
    }
    assert!(decoder.is_done(), "the stream ends with {end}");
    items
}

impl Puller {
    /// Send `body`; answer a challenge if the server asks for one. Returns the
    /// final response and the connection it came on (the stream follows there).
    pub async fn request(&self, body: &RequestBody) -> (Response, TcpStream) {
        let rid = request_id();
        let (unit, hb) = unit_of(body, rid, self.version, 0);
        let mut tcp = TcpStream::connect(self.addr).await.unwrap();
        tcp.write_all(&unit).await.unwrap();
        let first = decode_response(&read_unit(&mut tcp).await, rid).unwrap();
        if first.code() != ResponseCode::AUTHENTICATION_NEEDED {
            return (first, tcp);
        }
        let Some(identity) = &self.identity else { return (first, tcp) };
        let ResponseBody::Challenge { nonce } = &first.body else { panic!("402 without a nonce") };
        let digest = first.digest.as_ref().expect("challenge digest");
        assert!(digest.matches(&hb), "the challenge is for our request");
        let alg = AnswerAlg::Pbkdf2HmacSha1 { iterations: JAVA_PBKDF2_ITERATIONS, key_bits: JAVA_PBKDF2_KEY_BITS };
        let salt: [u8; 16] = rand::random();
        let answer = RequestBody::ChallengeAnswer(ChallengeAnswer {
            auth_type: AUTH_TYPE_SECKEY.to_vec(),
            identity_handle: identity.handle.clone(),
            identity_index: identity.index,
            answer: seckey::answer(alg, &identity.secret, nonce, &digest.digest, &salt).to_vec(),
        });
        let rid = request_id();
        let (unit, _) = unit_of(&answer, rid, self.version, first.envelope.session_id);
        // As the Java client: the answer goes on a connection of its own.
        let mut tcp = TcpStream::connect(self.addr).await.unwrap();
        tcp.write_all(&unit).await.unwrap();
        (decode_response(&read_unit(&mut tcp).await, rid).unwrap(), tcp)
    }

    /// The items of a RETRIEVE_TXN_LOG answer (panics on a refusal).
    pub async fn pull(&self, body: &RequestBody) -> Vec<TxnStreamItem> {
        let (response, tcp) = self.request(body).await;
        assert_eq!(response.code(), ResponseCode::SUCCESS, "{:?}", response.message());
        assert!(matches!(response.body, ResponseBody::RetrieveTxnLog { .. }), "{:?}", response.body);
        let (bytes, framing) = self.read_stream(tcp).await;
        all_items(TxnStreamDecoder::new(framing, DEFAULT_MAX_ITEM_LEN), &bytes, "transaction stream", "END")
    }

    /// The items of a DUMP_HANDLES answer.
    pub async fn dump(&self, body: &RequestBody) -> Vec<DumpStreamItem> {
        let (response, tcp) = self.request(body).await;
        assert_eq!(response.code(), ResponseCode::SUCCESS, "{:?}", response.message());
        let (bytes, framing) = self.read_stream(tcp).await;
        all_items(DumpStreamDecoder::new(framing, DEFAULT_MAX_ITEM_LEN), &bytes, "dump stream", "ABSOLUTELY_DONE")
    }

    /// Everything after the response: through TLS, or checked block by block.
    async fn read_stream(&self, mut tcp: TcpStream) -> (Vec<u8>, Framing<SiteKeyVerifier>) {
        let mut word = [0u8; 4];
        tcp.read_exact(&mut word).await.expect("stream type");
        let mut rest = Vec::new();
        if Preamble::decode(&word).unwrap() == Some((Preamble::Tls, 4)) {
            assert!(self.version >= Version::V2_8, "TLS only for 2.8 and later");
            let mut tls = tls_client(&self.site_key, tcp).await;
            tls.read_to_end(&mut rest).await.expect("stream through TLS");
            return (rest, Framing::Plain);
        }
        assert!(self.version < Version::V2_8, "signed streams only before 2.8");
        tcp.read_to_end(&mut rest).await.unwrap();
        let all = [&word[..], &rest].concat();
        let (preamble, used) = Preamble::decode(&all).unwrap().expect("signed preamble");
        assert_eq!(preamble, Preamble::Signed { hash_alg_id: b"SHA-256".to_vec() });
        (all[used..].to_vec(), Framing::Signed(SiteKeyVerifier::new(&self.site_key)))
    }
}

/// Checks each block's signature with the site key (SHA256withRSA).
pub struct SiteKeyVerifier {
    key: (Vec<u8>, Vec<u8>),
    block: Vec<u8>,
}

fn unsigned(b: &[u8]) -> Vec<u8> {
    b.iter().skip_while(|&&x| x == 0).copied().collect()
}

impl SiteKeyVerifier {
    fn new(key: &PublicKey) -> Self {
        let PublicKey::Rsa { exponent, modulus } = key else { panic!("RSA site key") };
        SiteKeyVerifier { key: (unsigned(modulus), unsigned(exponent)), block: Vec::new() }
    }
}

impl BlockVerifier for SiteKeyVerifier {
    fn update(&mut self, data: &[u8]) {
        self.block.extend_from_slice(data);
    }

    fn verify(&mut self, signature: &[u8]) -> bool {
        let (n, e) = &self.key;
        let key = aws_lc_rs::signature::RsaPublicKeyComponents { n, e };
        let ok = key.verify(&aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256, &self.block, signature).is_ok();
        self.block.clear();
        ok
    }
}

/// The stream's TLS, trusting only the site key: the client crate's (what the mirror uses).
async fn tls_client(site_key: &PublicKey, tcp: TcpStream) -> tokio_rustls::client::TlsStream<TcpStream> {
    handled_client::replication::tls_connect(tcp, site_key, std::time::Duration::from_secs(30))
        .await
        .expect("TLS handshake with the site key")
}
