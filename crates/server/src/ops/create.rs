//! CREATE_HANDLE (§3.5) with the overwrite (OW) and mint (MINT) flags.

use super::*;
use handled_proto::handle;
use handled_store::{Expect, SwapOutcome};

/// A create request as every front end states it.
#[derive(Debug, Clone)]
pub struct CreateHandle {
    /// As the client wrote it; with `mint`, the text the new suffix is appended to.
    pub handle: Vec<u8>,
    pub values: Vec<HandleValue>,
    pub overwrite: bool,
    pub mint: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    /// The handle created (the minted one with MINT), in the caller's spelling.
    pub handle: Vec<u8>,
    /// An existing handle was replaced (OW).
    pub overwritten: bool,
}

/// A lower-case random UUID v4, what the Java server appends with MINT.
fn uuid_v4() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

pub async fn create_handle(state: &Directory, caller: &Caller, req: CreateHandle) -> Result<Created, OpError> {
    check_primary(state)?;
    if std::str::from_utf8(&req.handle).is_err() {
        return Err(OpError::new(ResponseCode::INVALID_HANDLE, "Handle is not valid UTF-8"));
    }
    check_homed(state, &handle::canonical(&req.handle)).await?;
    let identity = require(caller)?;
    check_new_values(&req.values)?;
    if req.mint {
        return mint(state, identity, &req).await;
    }
    let canonical = handle::canonical(&req.handle).into_owned();
    let key = state.storage_key(&canonical);
    for _ in 0..MAX_CAS_RETRIES {
        let current = load(state, &key).await?;
        let expect = match &current {
            None => {
                may_create(state, identity, &canonical).await?;
                Expect::Absent
            }
            Some(_) if !req.overwrite => {
                return Err(OpError::new(
                    ResponseCode::HANDLE_ALREADY_EXISTS,
                    format!("Handle {} already exists", show(&req.handle)),
                ));
            }
            Some(old) => {
                may_overwrite(state, identity, &canonical, old, &req.values).await?;
                Expect::Present(old.clone())
            }
        };
        let record = HandleRecord::named(stamp(&req.values, current.as_ref()), &canonical, &key);
        if let SwapOutcome::Done { .. } = state.records().swap(&key, expect, Some(record)).await? {
            return Ok(Created { handle: req.handle.clone(), overwritten: current.is_some() });
        }
    }
    Err(OpError::new(ResponseCode::SERVER_TOO_BUSY, "Handle changed concurrently too often; try again"))
}

/// MINT: append a UUID until the handle is unused (a collision is astronomically rare).
async fn mint(state: &Directory, identity: &Identity, req: &CreateHandle) -> Result<Created, OpError> {
    let probe = [req.handle.as_slice(), b"x"].concat();
    may_create(state, identity, &handle::canonical(&probe)).await?;
    for _ in 0..MAX_CAS_RETRIES {
        let name = [req.handle.as_slice(), uuid_v4().as_bytes()].concat();
        let key = state.storage_key(&handle::canonical(&name));
        let record = HandleRecord::named(stamp(&req.values, None), &handle::canonical(&name), &key);
        if let SwapOutcome::Done { .. } = state.records().swap(&key, Expect::Absent, Some(record)).await? {
            return Ok(Created { handle: name, overwritten: false });
        }
    }
    Err(OpError::new(ResponseCode::ERROR, "Could not mint an unused handle"))
}

/// The create rule (§5.6): ADD_HANDLE in the prefix handle's HS_ADMIN; for a
/// derived prefix handle `0.NA/a.b`, ADD_DERIVED_PREFIX in `0.NA/a`'s. Prefix
/// handles without a parent here (the root governs them) need a server admin.
async fn may_create(state: &Directory, identity: &Identity, canonical: &[u8]) -> Result<(), OpError> {
    let (governing, needed) = if handle::is_prefix_handle(canonical) {
        match handle::parent_prefix_handle(&handle::normalize(canonical, false)) {
            Some(parent) => (Some(parent), AdminPermissions::ADD_DERIVED_PREFIX),
            None => (None, AdminPermissions::ADD_HANDLE),
        }
    } else {
        (Some(handle::prefix_handle(canonical)), AdminPermissions::ADD_HANDLE)
    };
    let admins = match governing {
        Some(g) if state.is_homed(&g).await => {
            load(state, &state.storage_key(&g)).await?.map(|r| admins_of(&r)).unwrap_or_default()
        }
        _ => Vec::new(),
    };
    permit(state, identity, canonical, &admins, AdminPermissions(needed)).await
}

/// Create with OW over an existing handle (§5.6): allowed if the existing
/// HS_ADMIN values grant (a) every permission the differences imply, or
/// (b) ADD_ADMIN, or (c) DELETE_HANDLE and the create rule passes.
async fn may_overwrite(
    state: &Directory,
    identity: &Identity,
    canonical: &[u8],
    old: &HandleRecord,
    new: &[HandleValue],
) -> Result<(), OpError> {
    let mut needed = AdminPermissions(0);
    for v in new {
        needed = needed | change_permissions(old.values.iter().find(|o| o.index == v.index), Some(v));
    }
    for o in old.values.iter().filter(|o| !new.iter().any(|v| v.index == o.index)) {
        needed = needed | change_permissions(Some(o), None);
    }
    if needed.0 == 0 {
        return Ok(());
    }
    let admins = admins_of(old);
    if permitted(state, identity, canonical, &admins, needed).await?
        || permitted(state, identity, canonical, &admins, AdminPermissions(AdminPermissions::ADD_ADMIN)).await?
    {
        return Ok(());
    }
    if permitted(state, identity, canonical, &admins, AdminPermissions(AdminPermissions::DELETE_HANDLE)).await? {
        return may_create(state, identity, canonical).await;
    }
    Err(OpError::new(
        ResponseCode::INVALID_ADMIN,
        format!("{} may not overwrite {}", identity.display(), show(canonical)),
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn uuid_shape() {
        let u = super::uuid_v4();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!(u.bytes().all(|b| b == b'-' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    }
}
