//! Authorization (§5.6): does an identity hold the permissions an operation
//! needs, through an HS_ADMIN value that names it directly or through admin
//! groups (HS_VLIST, nested, expanded breadth-first), or as server admin?

use crate::auth::Identity;
use crate::directory::Directory;
use handled_proto::data::admin::{AdminPermissions, AdminRecord};
use handled_proto::data::vlist::ValueList;
use handled_proto::handle;
use handled_proto::value::{types, HandleValue};
use handled_store::StoreError;
use std::collections::{HashSet, VecDeque};

/// Group expansion stops after visiting this many references (cycles are
/// already cut by the visited set; this bounds fan-out).
const MAX_GROUP_VISITS: usize = 256;
/// Groups held on other servers resolved for one authorization: each is an
/// outgoing certified lookup.
const MAX_REMOTE_GROUPS: usize = 8;

/// The HS_ADMIN records among `values`; undecodable ones are ignored.
pub fn admin_records(values: &[HandleValue]) -> Vec<AdminRecord> {
    values
        .iter()
        .filter(|v| v.is_type(types::HS_ADMIN))
        .filter_map(|v| AdminRecord::decode_data(&v.data).ok())
        .collect()
}

/// May `identity` act on `target` with `needed` permissions, given the
/// HS_ADMIN records that govern it? Server admins with full access always
/// may, and so may a prefix's default admin under its own prefix.
pub async fn permitted(
    state: &Directory,
    identity: &Identity,
    target: &[u8],
    admins: &[AdminRecord],
    needed: AdminPermissions,
) -> Result<bool, StoreError> {
    // Only records granting everything needed count (§5.6).
    let relevant: Vec<(Vec<u8>, i32)> =
        admins.iter().filter(|a| a.permissions.contains(needed)).map(|a| (a.handle.clone(), a.index)).collect();
    if relevant.iter().any(|(h, i)| identity.matches(h, *i)) {
        return Ok(true);
    }
    if is_prefix_admin(state, identity, target) {
        return Ok(true);
    }
    if state.live().server_admin_full_access && is_server_admin(state, identity).await? {
        return Ok(true);
    }
    group_member(state, identity, relevant).await
}

/// Is `identity` one of the configured server administrators (or in a group
/// one of them names)?
pub async fn is_server_admin(state: &Directory, identity: &Identity) -> Result<bool, StoreError> {
    in_admin_list(state, identity, state.live().server_admins.clone()).await
}

/// Is `identity` named by one of `admins` (handle, index) or in a group one
/// of them names (`server_admins`, `replication_admins`, ...)?
pub async fn in_admin_list(
    state: &Directory,
    identity: &Identity,
    admins: Vec<(Vec<u8>, i32)>,
) -> Result<bool, StoreError> {
    if admins.iter().any(|(h, i)| identity.matches(h, *i)) {
        return Ok(true);
    }
    group_member(state, identity, admins).await
}

/// The prefix handles (`0.NA/<PREFIX>`) `identity` administers as a prefix
/// administrator (none when `server_admins` is configured).
pub fn administered_prefixes(state: &Directory, identity: &Identity) -> Vec<Vec<u8>> {
    state.live().prefix_admins.iter().filter(|(admin, _)| identity.matches(admin, 0)).map(|(_, p)| p.clone()).collect()
}

/// Without configured `server_admins`, `<prefix>/ADMIN` administers the
/// handles of its own prefix (and its prefix handle), nothing else: tenants
/// sharing a server do not administer each other.
fn is_prefix_admin(state: &Directory, identity: &Identity, target: &[u8]) -> bool {
    let target_prefix = if handle::is_prefix_handle(target) {
        handle::normalize(&handle::canonical(target), false)
    } else {
        handle::prefix_handle(target)
    };
    state.live().prefix_admins.iter().any(|(admin, scope)| *scope == target_prefix && identity.matches(admin, 0))
}

/// Breadth-first over admin groups: each reference names a value that may be
/// an HS_VLIST whose members are matched (and expanded) in turn. References
/// with index 0 name a whole handle, not a value, and are not expanded.
async fn group_member(state: &Directory, identity: &Identity, start: Vec<(Vec<u8>, i32)>) -> Result<bool, StoreError> {
    let mut queue: VecDeque<(Vec<u8>, i32)> = start.into_iter().filter(|(_, i)| *i != 0).collect();
    let mut visited: HashSet<(Vec<u8>, i32)> = HashSet::new();
    let mut remote_left = MAX_REMOTE_GROUPS;
    while let Some((handle, index)) = queue.pop_front() {
        if !visited.insert((state.storage_key(&handle), index)) {
            continue;
        }
        if visited.len() > MAX_GROUP_VISITS {
            tracing::warn!("admin group expansion stopped after {MAX_GROUP_VISITS} references");
            break;
        }
        let Some(values) = group_values(state, &handle, index, &mut remote_left).await? else { continue };
        for v in values.iter().filter(|v| v.index == index && v.is_type(types::HS_VLIST)) {
            let Ok(members) = ValueList::decode_data(&v.data) else { continue };
            for m in members.0 {
                if identity.matches(&m.handle, m.index) {
                    return Ok(true);
                }
                if m.index != 0 {
                    queue.push_back((m.handle, m.index));
                }
            }
        }
    }
    Ok(false)
}

/// The values of a group handle: from the store when it lives here, else
/// (with `root_info`, within `remote_left` lookups) from its own server. A
/// group that cannot be read is skipped.
async fn group_values(
    state: &Directory,
    handle: &[u8],
    index: i32,
    remote_left: &mut usize,
) -> Result<Option<Vec<HandleValue>>, StoreError> {
    if state.is_homed(handle).await {
        return Ok(state.record(&state.storage_key(handle)).await?.map(|r| r.values));
    }
    let Some(remote) = state.remote_auth() else { return Ok(None) };
    if *remote_left == 0 {
        tracing::info!("admin group {index}:{} not resolved: remote lookups spent", String::from_utf8_lossy(handle));
        return Ok(None);
    }
    *remote_left -= 1;
    Ok(remote.values(handle, index, types::HS_VLIST).await.ok())
}
