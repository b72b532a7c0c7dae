//! LIST_HANDLES and the prefix operations HOME_NA, UNHOME_NA, LIST_HOMED_NAS (§3.5).

use super::*;
use crate::access::authorize::{administered_prefixes, is_server_admin};
use handled_proto::handle;

/// Keys fetched per store scan while listing.
const SCAN_PAGE: usize = 1000;

/// All handles under a prefix, spelled as they were created (matching stays
/// case-insensitive). Needs LIST_HANDLES in the prefix handle's HS_ADMIN.
pub async fn list_handles(state: &Directory, caller: &Caller, prefix: &[u8]) -> Result<Vec<Vec<u8>>, OpError> {
    if !state.live().allow_list_handles {
        return Err(OpError::new(ResponseCode::OPERATION_NOT_SUPPORTED, "Listing handles is disabled on this server"));
    }
    let canonical = handle::canonical(prefix);
    if !handle::is_prefix_handle(&canonical) {
        return Err(OpError::new(ResponseCode::INVALID_HANDLE, "List handles needs a prefix handle (0.NA/...)"));
    }
    let prefix_handle = handle::normalize(&canonical, false);
    if !state.is_homed(&[&prefix_handle[handle::NA_HANDLE_PREFIX.len()..], b"/x"].concat()).await {
        return Err(OpError::not_responsible());
    }
    let identity = require(caller)?;
    let admins = load(state, &prefix_handle).await?.map(|r| admins_of(&r)).unwrap_or_default();
    permit(state, identity, &prefix_handle, &admins, AdminPermissions(AdminPermissions::LIST_HANDLES)).await?;

    let mut scan_prefix = prefix_handle[handle::NA_HANDLE_PREFIX.len()..].to_vec();
    scan_prefix.push(b'/');
    let mut out = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = state.records().scan_keys(&scan_prefix, after.as_deref(), SCAN_PAGE).await?;
        let done = page.len() < SCAN_PAGE;
        after = page.last().cloned();
        for key in page {
            // The spelling the handle was created with, kept in its record.
            let name = match state.record(&key).await? {
                Some(record) => record.name_or(&key).to_vec(),
                None => continue, // deleted meanwhile
            };
            out.push(name);
        }
        if done {
            return Ok(out);
        }
    }
}

/// `x` or `0.NA/x` → normalized `0.NA/X`; anything else is 102 (§3.5).
fn prefix_handle_of(h: &[u8]) -> Result<Vec<u8>, OpError> {
    let canonical = handle::canonical(h);
    if !handle::is_prefix_handle(&canonical) || canonical.len() <= handle::NA_HANDLE_PREFIX.len() {
        return Err(OpError::new(
            ResponseCode::INVALID_HANDLE,
            format!("{} is not a prefix handle (0.NA/...)", show(h)),
        ));
    }
    Ok(handle::normalize(&canonical, false))
}

async fn require_server_admin<'a>(state: &Directory, caller: &'a Caller) -> Result<&'a Identity, OpError> {
    let identity = require(caller)?;
    if is_server_admin(state, identity).await? {
        Ok(identity)
    } else {
        Err(OpError::new(ResponseCode::INVALID_ADMIN, format!("{} is not a server administrator", identity.display())))
    }
}

/// Make this server responsible for `<prefix>/*` (HOME_NA), or no longer
/// (UNHOME_NA: `homed` false), persistently.
pub async fn home_prefix(state: &Directory, caller: &Caller, h: &[u8], homed: bool) -> Result<(), OpError> {
    check_primary(state)?;
    let prefix_handle = prefix_handle_of(h)?;
    require_server_admin(state, caller).await?;
    state.records().home(&prefix_handle, homed).await?;
    state.set_homed(prefix_handle, homed);
    Ok(())
}

/// Every homed prefix for a server administrator; for a prefix administrator
/// (the default scoping, no `server_admins`), the homed prefixes it
/// administers; anyone else is refused.
pub async fn list_homed_prefixes(state: &Directory, caller: &Caller) -> Result<Vec<Vec<u8>>, OpError> {
    let scoped = match require_server_admin(state, caller).await {
        Ok(_) => None,
        Err(refused) => {
            let own = caller.identity().map(|i| administered_prefixes(state, i)).unwrap_or_default();
            if own.is_empty() {
                return Err(refused);
            }
            Some(own)
        }
    };
    state.reload_homed().await;
    let homed = state.homed_prefixes();
    Ok(match scoped {
        None => homed,
        Some(own) => homed.into_iter().filter(|p| own.contains(p)).collect(),
    })
}
