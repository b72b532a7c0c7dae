//! Finding the source server from `replication_source`: its site record (a
//! file, its own GET_SITE_INFO answer, or an HS_SITE value), and from that
//! the address of its native TCP interface and the key its streams must carry.

use super::progress::PINNED_KEY;
use super::settings::{MirrorSettings, SourceSpec};
use crate::replication::ReplicationContext;
use handled_client::replication::SourceServer;
use handled_client::{resolved_values, Connection, Protocol, ResolveOptions};
use handled_proto::codec::Codec;
use handled_proto::data::pubkey::PublicKey;
use handled_proto::data::site::{SiteInfo, TransportProtocol};
use handled_proto::handle;
use handled_proto::value::types;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// Largest stream item accepted from a source (a record with all its values).
pub const MAX_ITEM_BYTES: usize = handled_proto::replication::DEFAULT_MAX_ITEM_LEN;

/// Where to pull from, found anew at every cycle (the original also re-reads
/// its source sites each time, so a changed site record takes effect).
pub async fn find(
    settings: &MirrorSettings,
    state: &ReplicationContext,
    timeout: Duration,
) -> Result<SourceServer, String> {
    let site = match &settings.source {
        SourceSpec::File(path) => handled_client::sites::read_site_file(path)?,
        SourceSpec::Address(text) => {
            let addr = socket_addr(text)?;
            let site = fetch_site(addr, settings.timeout).await?;
            let server = only_server(&site)?;
            pin_key(state, &server.public_key).await?;
            // Pulls go where we were told, whatever address the record publishes.
            return source_server(addr, &server.public_key, timeout);
        }
        SourceSpec::SiteValue { index, handle } => site_value(settings, state, *index, handle).await?,
    };
    let server = only_server(&site)?;
    source_server(tcp_address(server)?, &server.public_key, timeout)
}

/// Where a site record's server takes native TCP requests.
pub(crate) fn tcp_address(server: &handled_proto::data::site::ServerInfo) -> Result<SocketAddr, String> {
    let interface = server
        .interface(TransportProtocol::Tcp, true)
        .or_else(|| server.interface(TransportProtocol::Tcp, false))
        .ok_or("the source's site record has no TCP interface")?;
    let port =
        u16::try_from(interface.port).map_err(|_| format!("bad TCP port {} in the site record", interface.port))?;
    Ok(SocketAddr::new(server.ip_addr(), port))
}

pub(crate) fn source_server(addr: SocketAddr, key: &[u8], timeout: Duration) -> Result<SourceServer, String> {
    let key = PublicKey::decode_data(key).map_err(|e| format!("the source's key is unreadable: {e}"))?;
    let version = SourceServer::version_for(&key);
    Ok(SourceServer {
        addr,
        key,
        timeout,
        max_item_bytes: MAX_ITEM_BYTES,
        version,
        check_signature: crate::auth::signature::verify,
    })
}

/// One-server source sites only: a several-server site keeps one transaction
/// sequence per server, which a single progress record cannot follow.
pub(crate) fn only_server(site: &SiteInfo) -> Result<&handled_proto::data::site::ServerInfo, String> {
    match site.servers.as_slice() {
        [one] => Ok(one),
        [] => Err("the source's site record lists no server".into()),
        many => Err(format!("the source's site has {} servers; only one-server sources are supported", many.len())),
    }
}

fn socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.to_socket_addrs()
        .map_err(|e| format!("replication_source {text}: {e}"))?
        .next()
        .ok_or_else(|| format!("replication_source {text}: no address"))
}

async fn fetch_site(addr: SocketAddr, timeout: Duration) -> Result<SiteInfo, String> {
    let mut conn = Connection::open(Protocol::Tcp, addr, timeout, false).await.map_err(|e| format!("{addr}: {e}"))?;
    let response = conn.site_info().await.map_err(|e| format!("{addr}: site info: {e}"))?;
    match &response.body {
        handled_proto::response::ResponseBody::SiteInfo(bytes) => {
            SiteInfo::from_bytes(bytes.as_slice()).map_err(|e| format!("{addr}: site info: {e}"))
        }
        other => Err(format!("{addr}: site info: unexpected answer {other:?}")),
    }
}

/// Trust on first use for a source named by address: its key is kept, and a
/// different key later is refused (someone else may be answering there).
async fn pin_key(state: &ReplicationContext, key: &[u8]) -> Result<(), String> {
    match state.records().meta_get(PINNED_KEY).await.map_err(|e| e.to_string())? {
        Some(pinned) if pinned == key => Ok(()),
        Some(_) => Err("the source's key differs from the one it had at first contact: refusing to pull \
                        (if its key really changed, name the source by its site record file instead)"
            .into()),
        None => {
            state.records().meta_put(PINNED_KEY, Some(key.to_vec())).await.map_err(|e| e.to_string())?;
            tracing::info!("replication source key pinned at first contact");
            Ok(())
        }
    }
}

/// The values of `h` (those at `indexes`; all when empty) resolved at `resolver` (`host:port`, native TCP).
pub(crate) async fn remote_values(
    resolver: &str,
    timeout: Duration,
    h: &[u8],
    indexes: Vec<i32>,
) -> Result<Vec<handled_proto::value::HandleValue>, String> {
    let show = String::from_utf8_lossy(h);
    let addr = socket_addr(resolver)?;
    let mut conn = Connection::open(Protocol::Tcp, addr, timeout, false).await.map_err(|e| format!("{addr}: {e}"))?;
    let options = ResolveOptions { indexes, ..ResolveOptions::default() };
    let response = conn.resolve(h, &options).await.map_err(|e| format!("resolving {show} at {addr}: {e}"))?;
    Ok(resolved_values(&response).ok_or_else(|| format!("resolving {show} at {addr}: {:?}", response.code()))?.to_vec())
}

/// The values of `h` in our own store (None: not there).
pub(crate) async fn local_values(
    state: &ReplicationContext,
    h: &[u8],
) -> Result<Option<Vec<handled_proto::value::HandleValue>>, String> {
    let key = handle::normalize(&handle::canonical(h), state.settings.case_sensitive);
    Ok(state.record(&key).await.map_err(|e| e.to_string())?.map(|r| r.values))
}

/// The HS_SITE value `index:handle`, resolved at `replication_resolver` or in
/// our own store.
async fn site_value(
    settings: &MirrorSettings,
    state: &ReplicationContext,
    index: i32,
    h: &[u8],
) -> Result<SiteInfo, String> {
    let show = format!("{index}:{}", String::from_utf8_lossy(h));
    let values = match &settings.resolver {
        Some(text) => remote_values(text, settings.timeout, h, vec![index]).await?,
        None => local_values(state, h)
            .await?
            .ok_or_else(|| format!("{show}: not in our store (set replication_resolver)"))?,
    };
    let value = values
        .iter()
        .find(|v| v.index == index && v.is_type(types::HS_SITE))
        .ok_or_else(|| format!("{show} is not an HS_SITE value"))?;
    SiteInfo::decode_data(&value.data).map_err(|e| format!("{show}: {e}"))
}
