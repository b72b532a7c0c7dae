//! One request to the server of a site responsible for a handle (§2.7: the
//! site's hash picks the server). Protocols in the Java client's order: UDP
//! when asked for and offered, then TCP, then the HTTP tunnel. With a trust
//! policy other than [`Trust::Off`] the request asks for a certified reply
//! (CT, RD), which must carry our request's digest and verify with the public
//! key the server publishes in its site record (§1.5), else it is not believed.

use super::guard::{GuardCounters, Walk};
use super::policy::AddressRules;
use super::{addresses, LookupError};
use crate::replication::SignatureCheck;
use crate::session::{encode_unit_with, UnitOptions};
use crate::{decode_response, Connection, Protocol, Response};
use handled_proto::credential::signed_input;
use handled_proto::data::pubkey::PublicKey;
use handled_proto::data::site::{ServerInfo, SiteInfo, TransportProtocol};
use handled_proto::digest::DigestAlg;
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::request::RequestBody;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// How far replies from other servers are believed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Trust {
    /// Every reply must be signed by the responding server's published key.
    #[default]
    Require,
    /// Certified replies are asked for and checked; an unsigned one is taken
    /// (a server that cannot sign), a signature that does not verify is not.
    Prefer,
    /// Nothing asked for or checked.
    Off,
}

/// How requests go out, the same for every site asked.
#[derive(Clone, Copy)]
pub(super) struct Asking<'a> {
    pub trust: Trust,
    pub check: SignatureCheck,
    pub udp: bool,
    /// Flags asked for besides ours (DNR, passed on for a client).
    pub extra: OpFlags,
    /// Replies whose signature did not verify, counted (a metric).
    pub unverified: &'a AtomicU64,
    /// Which addresses may be asked.
    pub rules: &'a AddressRules,
    /// Attempts not made, counted (metrics).
    pub guards: &'a GuardCounters,
}

/// The longest a UDP attempt may take before TCP is tried: the transport
/// resends after 0.5 s, so this is two or three datagrams.
const UDP_SHARE: Duration = Duration::from_millis(1500);

/// Send `body` to the server of `site` responsible for `handle` and return
/// its reply, checked as `how.trust` says; give up at the walk's deadline. A
/// reply over UDP that is not final (too busy, "ask over TCP", unverified)
/// tries TCP. Addresses the policy refuses are not asked; each protocol and
/// address asked takes one of the walk's attempts.
pub(super) async fn ask(
    site: &SiteInfo,
    handle: &[u8],
    body: &RequestBody,
    walk: &Walk,
    how: Asking<'_>,
) -> Result<Response, LookupError> {
    let deadline = walk.deadline();
    let position = site.server_index(handle);
    let server =
        site.servers.get(position).ok_or_else(|| LookupError::Unreachable("a site record without servers".into()))?;
    let key = match how.trust {
        Trust::Off => None,
        _ => Some(PublicKey::decode_data(&server.public_key).map_err(|e| {
            LookupError::Unreachable(format!("server {} publishes no usable key: {e}", server.server_id))
        })?),
    };
    let ip = server.ip_addr();
    // All zeros: the server is named by the site's `domain` attribute.
    let ips = if ip.is_unspecified() { addresses::by_domain(site, position, deadline).await? } else { vec![ip] };
    let mut last = LookupError::Unreachable(format!("server {} has no UDP, TCP or HTTP interface", server.server_id));
    for ip in ips {
        if let Err(why) = how.rules.check(ip) {
            how.guards.refused.fetch_add(1, Ordering::Relaxed);
            last = LookupError::NotAllowed(format!("server {}: {why}", server.server_id));
            continue;
        }
        for (protocol, port) in protocols(server, how.udp) {
            let addr = SocketAddr::new(ip, port);
            if !walk.take_attempt() {
                walk.count_cut(how.guards);
                return Err(LookupError::Unreachable(format!(
                    "{addr}: not asked, the walk's {} upstream attempts are spent",
                    walk.attempts()
                )));
            }
            let until = match protocol {
                Protocol::Udp => deadline.min(Instant::now() + UDP_SHARE),
                _ => deadline,
            };
            match once(protocol, addr, body, until, how, key.as_ref()).await {
                Ok(r) if protocol != Protocol::Udp || is_final(r.code()) => return Ok(r),
                Ok(r) => last = LookupError::Unreachable(format!("{addr} over UDP: {}", r.code().name())),
                Err(e) => last = e,
            }
            if Instant::now() >= deadline {
                return Err(last);
            }
        }
    }
    Err(last)
}

/// The server's query interfaces in the order tried, with usable ports.
pub(super) fn protocols(server: &ServerInfo, udp: bool) -> Vec<(Protocol, u16)> {
    let order = [(Protocol::Udp, TransportProtocol::Udp), (Protocol::Tcp, TransportProtocol::Tcp)];
    order
        .into_iter()
        .filter(|(p, _)| udp || *p != Protocol::Udp)
        .chain([(Protocol::Http, TransportProtocol::Http)])
        .filter_map(|(p, t)| server.interface(t, false).and_then(|i| u16::try_from(i.port).ok()).map(|port| (p, port)))
        .collect()
}

/// Codes that answer the question whatever the transport; others over UDP
/// (too busy, "ask over TCP" as 500, errors) are asked again over TCP.
fn is_final(code: ResponseCode) -> bool {
    matches!(
        code,
        ResponseCode::SUCCESS
            | ResponseCode::HANDLE_NOT_FOUND
            | ResponseCode::VALUES_NOT_FOUND
            | ResponseCode::SERVER_NOT_RESP
            | ResponseCode::SERVICE_REFERRAL
            | ResponseCode::PREFIX_REFERRAL
    )
}

async fn once(
    protocol: Protocol,
    addr: SocketAddr,
    body: &RequestBody,
    deadline: Instant,
    how: Asking<'_>,
    key: Option<&PublicKey>,
) -> Result<Response, LookupError> {
    let left = deadline.saturating_duration_since(Instant::now());
    let request_id = rand::random::<i32>() & 0x7fff_ffff | 1;
    // No REC: the servers asked are authoritative, and a resolver upstream
    // must not recurse on our behalf (no loops between resolvers).
    let mut flags = OpFlags::CA | OpFlags::PO | how.extra;
    if how.trust != Trust::Off {
        flags = flags | OpFlags::CT | OpFlags::RD;
    }
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
    if let Some(key) = key {
        check(&response, &header_and_body, key, how).map_err(|e| {
            how.unverified.fetch_add(1, Ordering::Relaxed);
            LookupError::Uncertified(format!("{addr}: {e}"))
        })?;
    }
    Ok(response)
}

/// Is `response` the answer to our request (its digest) signed by `key`?
/// Under [`Trust::Prefer`] an unsigned reply passes; a bad signature never does.
fn check(response: &Response, request: &[u8], key: &PublicKey, how: Asking<'_>) -> Result<(), String> {
    let signed = response.credential.as_ref().filter(|c| c.is_signature());
    let Some(credential) = signed else {
        return match how.trust {
            Trust::Prefer => Ok(()),
            _ => Err("the reply is not signed".into()),
        };
    };
    if !response.digest.as_ref().is_some_and(|d| d.matches(request)) {
        return Err("the reply does not carry our request's digest".into());
    }
    let alg = DigestAlg::from_name(&credential.algorithm)
        .ok_or_else(|| format!("unknown signature hash {:?}", String::from_utf8_lossy(&credential.algorithm)))?;
    let input = signed_input(&response.envelope, &response.header_and_body, credential.session_counter);
    if !(how.check)(key, alg, &input, &credential.signature) {
        return Err("the reply's signature does not verify with the server's published key".into());
    }
    Ok(())
}
