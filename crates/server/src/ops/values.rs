//! DELETE_HANDLE, ADD_VALUE, REMOVE_VALUE, MODIFY_VALUE (§3.5): each a
//! read–check–write loop on one handle, written with compare-and-set so a
//! concurrent change is never lost (the check is redone on the new state).

use super::*;
use handled_proto::handle;
use handled_store::{Expect, SwapOutcome};

fn not_found(h: &[u8]) -> OpError {
    OpError::new(ResponseCode::HANDLE_NOT_FOUND, format!("Handle {} not found", show(h)))
}

fn read_only(index: i32) -> OpError {
    OpError::new(ResponseCode::INSUFFICIENT_PERMISSIONS, format!("Value is read-only (index {index})"))
}

/// Write `new` over `old` if nobody changed it meanwhile; false = retry.
async fn replace(state: &Directory, key: &[u8], old: HandleRecord, new: Option<HandleRecord>) -> Result<bool, OpError> {
    Ok(matches!(state.records().swap(key, Expect::Present(old), new).await?, SwapOutcome::Done { .. }))
}

/// What every change to a handle checks first, in this order: this server
/// takes writes, and the handle's prefix is homed here. The handle's
/// canonical form.
async fn homed_on_this_primary<'h>(state: &Directory, h: &'h [u8]) -> Result<std::borrow::Cow<'h, [u8]>, OpError> {
    check_primary(state)?;
    let canonical = handle::canonical(h);
    check_homed(state, &canonical).await?;
    Ok(canonical)
}

fn too_busy() -> OpError {
    OpError::new(ResponseCode::SERVER_TOO_BUSY, "Handle changed concurrently too often; try again")
}

pub async fn delete_handle(state: &Directory, caller: &Caller, h: &[u8]) -> Result<(), OpError> {
    let canonical = homed_on_this_primary(state, h).await?;
    let identity = require(caller)?;
    let key = state.storage_key(&canonical);
    for _ in 0..MAX_CAS_RETRIES {
        let old = load(state, &key).await?.ok_or_else(|| not_found(h))?;
        permit(state, identity, &canonical, &admins_of(&old), AdminPermissions(AdminPermissions::DELETE_HANDLE))
            .await?;
        if replace(state, &key, old, None).await? {
            return Ok(());
        }
    }
    Err(too_busy())
}

/// Returns whether an existing value was replaced (only possible with `overwrite`).
pub async fn add_values(
    state: &Directory,
    caller: &Caller,
    h: &[u8],
    values: &[HandleValue],
    overwrite: bool,
) -> Result<bool, OpError> {
    let canonical = homed_on_this_primary(state, h).await?;
    let identity = require(caller)?;
    if values.is_empty() {
        return Err(OpError::new(ResponseCode::INVALID_VALUE, "Value list was empty"));
    }
    check_new_values(values)?;
    let key = state.storage_key(&canonical);
    for _ in 0..MAX_CAS_RETRIES {
        let old = load(state, &key).await?.ok_or_else(|| not_found(h))?;
        let mut needed = AdminPermissions(0);
        let mut replaced = false;
        for v in values {
            let existing = old.values.iter().find(|o| o.index == v.index);
            if let Some(o) = existing {
                if !overwrite {
                    return Err(OpError::new(
                        ResponseCode::VALUE_ALREADY_EXISTS,
                        format!("Value index {} already exists", v.index),
                    ));
                }
                if same_value(o, v) {
                    continue;
                }
                if !o.permissions.admin_write() {
                    return Err(read_only(v.index));
                }
                replaced = true;
            }
            needed = needed | change_permissions(existing, Some(v));
        }
        if needed.0 != 0 {
            permit(state, identity, &canonical, &admins_of(&old), needed).await?;
        }
        let fresh = stamp(values, Some(&old));
        let mut record = old.clone();
        for v in fresh {
            match record.values.iter_mut().find(|o| o.index == v.index) {
                Some(slot) => *slot = v,
                None => record.values.push(v),
            }
        }
        if record == old || replace(state, &key, old, Some(record)).await? {
            return Ok(replaced);
        }
    }
    Err(too_busy())
}

pub async fn remove_values(state: &Directory, caller: &Caller, h: &[u8], indexes: &[i32]) -> Result<(), OpError> {
    let canonical = homed_on_this_primary(state, h).await?;
    let identity = require(caller)?;
    let key = state.storage_key(&canonical);
    for _ in 0..MAX_CAS_RETRIES {
        let old = load(state, &key).await?.ok_or_else(|| not_found(h))?;
        let mut needed = AdminPermissions(0);
        for &i in indexes {
            let Some(v) = old.values.iter().find(|v| v.index == i) else {
                return Err(OpError::new(ResponseCode::VALUES_NOT_FOUND, format!("Value index {i} not found")));
            };
            if !v.permissions.admin_write() {
                return Err(read_only(i));
            }
            needed = needed | change_permissions(Some(v), None);
        }
        permit(state, identity, &canonical, &admins_of(&old), needed).await?;
        let values = old.values.iter().filter(|v| !indexes.contains(&v.index)).cloned().collect();
        let record = HandleRecord { values, name: old.name.clone() };
        if replace(state, &key, old, Some(record)).await? {
            return Ok(());
        }
    }
    Err(too_busy())
}

/// Replace values by index. Publicly writable values may be changed by anyone
/// (§3.5) unless the old or the new value grants authority ([`grants_authority`]);
/// everything else needs the matching admin permissions.
pub async fn modify_values(
    state: &Directory,
    caller: &Caller,
    h: &[u8],
    values: &[HandleValue],
) -> Result<(), OpError> {
    let canonical = homed_on_this_primary(state, h).await?;
    let mut seen = std::collections::HashSet::new();
    if !values.iter().all(|v| seen.insert(v.index)) {
        return Err(OpError::new(ResponseCode::INVALID_VALUE, "Duplicate value indexes"));
    }
    let key = state.storage_key(&canonical);
    for _ in 0..MAX_CAS_RETRIES {
        let old = load(state, &key).await?.ok_or_else(|| not_found(h))?;
        let mut needed = AdminPermissions(0);
        let mut public_only = true;
        for v in values {
            let Some(o) = old.values.iter().find(|o| o.index == v.index) else {
                return Err(OpError::new(ResponseCode::VALUES_NOT_FOUND, format!("Value index {} not found", v.index)));
            };
            public_only &= o.permissions.public_write() && !grants_authority(o) && !grants_authority(v);
            needed = needed | change_permissions(Some(o), Some(v));
        }
        if !public_only {
            let identity = require(caller)?;
            if let Some(v) =
                values.iter().find(|v| old.values.iter().any(|o| o.index == v.index && !o.permissions.admin_write()))
            {
                return Err(read_only(v.index));
            }
            if needed.0 != 0 {
                permit(state, identity, &canonical, &admins_of(&old), needed).await?;
            }
        }
        let mut record = old.clone();
        for v in stamp(values, Some(&old)) {
            if let Some(slot) = record.values.iter_mut().find(|o| o.index == v.index) {
                *slot = v;
            }
        }
        if record == old || replace(state, &key, old, Some(record)).await? {
            return Ok(());
        }
    }
    Err(too_busy())
}
