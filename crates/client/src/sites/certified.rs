//! One certified request to the server of a site responsible for a handle
//! (§2.7 hash, §1.5 signatures): the reply must carry our request's digest
//! (RD) and verify with the public key that server publishes in its site
//! record, else it is not believed.

use super::LookupError;
use crate::replication::SignatureCheck;
use crate::session::{encode_unit_with, UnitOptions};
use crate::{decode_response, Connection, Protocol, Response};
use handled_proto::credential::signed_input;
use handled_proto::data::pubkey::PublicKey;
use handled_proto::data::site::{SiteInfo, TransportProtocol};
use handled_proto::digest::DigestAlg;
use handled_proto::header::OpFlags;
use handled_proto::request::RequestBody;
use std::net::SocketAddr;
use tokio::time::Instant;

/// Send `body` (with CT and RD) to the server of `site` responsible for
/// `handle`, over TCP (or the HTTP tunnel when the server has no TCP
/// interface), and return its reply as checked by `verify`; give up at `deadline`.
pub async fn certified(
    site: &SiteInfo,
    handle: &[u8],
    body: &RequestBody,
    deadline: Instant,
    verify: SignatureCheck,
) -> Result<Response, LookupError> {
    let server = site
        .servers
        .get(site.server_index(handle))
        .ok_or_else(|| LookupError::Unreachable("a site record without servers".into()))?;
    let key = PublicKey::decode_data(&server.public_key)
        .map_err(|e| LookupError::Unreachable(format!("server {} publishes no usable key: {e}", server.server_id)))?;
    let (protocol, interface) = [(Protocol::Tcp, TransportProtocol::Tcp), (Protocol::Http, TransportProtocol::Http)]
        .into_iter()
        .find_map(|(p, t)| server.interface(t, false).map(|i| (p, i)))
        .ok_or_else(|| LookupError::Unreachable(format!("server {} has no TCP or HTTP interface", server.server_id)))?;
    let ip = server.ip_addr();
    if ip.is_unspecified() {
        // The `domain` attribute would need a DNS lookup: not followed.
        return Err(LookupError::Unreachable(format!("server {} is named by domain only", server.server_id)));
    }
    let port = u16::try_from(interface.port)
        .map_err(|_| LookupError::Unreachable(format!("server {} has port {}", server.server_id, interface.port)))?;
    let addr = SocketAddr::new(ip, port);
    let left = deadline.saturating_duration_since(Instant::now());
    let request_id = rand::random::<i32>() & 0x7fff_ffff | 1;
    let flags = OpFlags::REC | OpFlags::CA | OpFlags::PO | OpFlags::CT | OpFlags::RD;
    let (unit, header_and_body) = encode_unit_with(body, flags, request_id, UnitOptions::default());
    let unreachable = |e: crate::ClientError| LookupError::Unreachable(format!("{addr}: {e}"));
    let exchange = async {
        let mut conn = Connection::open(protocol, addr, left, false).await.map_err(unreachable)?;
        let units = conn.exchange(&unit, request_id).await.map_err(unreachable)?;
        let first = units.first().ok_or_else(|| LookupError::Unreachable(format!("{addr}: empty reply")))?;
        decode_response(first, request_id).map_err(unreachable)
    };
    let response = tokio::time::timeout_at(deadline, exchange)
        .await
        .map_err(|_| LookupError::Unreachable(format!("{addr}: no reply in time")))??;
    check(&response, &header_and_body, &key, verify).map_err(|e| LookupError::Uncertified(format!("{addr}: {e}")))?;
    Ok(response)
}

/// Is `response` the answer to our request (its digest) signed by `key`?
fn check(response: &Response, request: &[u8], key: &PublicKey, verify: SignatureCheck) -> Result<(), String> {
    if !response.digest.as_ref().is_some_and(|d| d.matches(request)) {
        return Err("the reply does not carry our request's digest".into());
    }
    let credential = response.credential.as_ref().filter(|c| c.is_signature()).ok_or("the reply is not signed")?;
    let alg = DigestAlg::from_name(&credential.algorithm)
        .ok_or_else(|| format!("unknown signature hash {:?}", String::from_utf8_lossy(&credential.algorithm)))?;
    let input = signed_input(&response.envelope, &response.header_and_body, credential.session_counter);
    if !verify(key, alg, &input, &credential.signature) {
        return Err("the reply's signature does not verify with the server's published key".into());
    }
    Ok(())
}
