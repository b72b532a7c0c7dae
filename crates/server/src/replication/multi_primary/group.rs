//! The group of a multi-primary member: the primary HS_SITE values of
//! `replication_sites_handle`, found anew at every cycle (Handle.Net re-reads
//! its sources each time too). This server recognises its own value by
//! address and TCP port; that value's index is its priority, and every other
//! primary is a peer to pull from, whose priority is its own value's index.

use super::GroupSettings;
use crate::replication::mirror::source::{local_values, only_server, remote_values, source_server, tcp_address};
use crate::replication::ReplicationContext;
use handled_client::replication::SourceServer;
use handled_proto::data::site::SiteInfo;
use handled_proto::value::types;

/// Most HS_SITE values taken from the sites handle: one pull each per cycle.
pub const MAX_PRIMARIES: usize = 64;

pub struct Peer {
    /// Handle.Net's queue name, `0:<index>:<sites handle>`: labels, progress key.
    pub queue: String,
    pub priority: i32,
    pub server: SourceServer,
}

pub struct Group {
    pub own_priority: i32,
    pub peers: Vec<Peer>,
}

/// The group as the sites handle says now: in our own store, else (a new
/// member that has not pulled it yet; `remote`) at `replication_resolver`.
pub async fn find(state: &ReplicationContext, settings: &GroupSettings, remote: bool) -> Result<Group, String> {
    let h = &settings.sites_handle;
    let show = String::from_utf8_lossy(h).into_owned();
    let values = match (local_values(state, h).await?, &settings.resolver) {
        (Some(v), _) => v,
        (None, Some(r)) if remote => remote_values(r, settings.timeout, h, Vec::new()).await?,
        (None, resolver) => {
            let hint = if resolver.is_none() { " (set replication_resolver)" } else { " yet" };
            return Err(format!("replication_sites_handle {show} is not in our store{hint}"));
        }
    };
    let own = state.settings.own_address;
    let mut own_priority = None;
    let mut peers = Vec::new();
    for v in values.iter().filter(|v| v.is_type(types::HS_SITE)).take(MAX_PRIMARIES) {
        let site = SiteInfo::decode_data(&v.data).map_err(|e| format!("{}:{show}: {e}", v.index))?;
        if !site.primary {
            continue;
        }
        let server = only_server(&site).map_err(|e| format!("{}:{show}: {e}", v.index))?;
        let addr = tcp_address(server).map_err(|e| format!("{}:{show}: {e}", v.index))?;
        if addr == own {
            own_priority = Some(v.index);
            continue;
        }
        peers.push(Peer {
            queue: format!("0:{}:{show}", v.index),
            priority: v.index,
            server: source_server(addr, &server.public_key, settings.timeout)?,
        });
    }
    let own_priority = own_priority.ok_or_else(|| {
        format!("no primary HS_SITE value of {show} is this server ({own}): add this server's site record there")
    })?;
    Ok(Group { own_priority, peers })
}
