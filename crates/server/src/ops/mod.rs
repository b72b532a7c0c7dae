//! The operations layer: what each Handle operation does to the store, with
//! its checks in the order and with the response codes of §3.5 / §7, and the
//! authorization of §5.6. Transport- and encoding-free: the native protocol
//! (`crate::native`) and the JSON REST API call the same functions with an
//! already authenticated [`Caller`]; an [`OpError`] carries the response code
//! and message both turn into their own wire forms.

mod create;
mod list;
pub mod resolve;
pub mod status_handle;
mod values;

pub use create::{create_handle, CreateHandle, Created};
pub use list::{home_prefix, list_handles, list_homed_prefixes};
pub use resolve::{resolve, resolve_with, select, Recurse, Resolve};
pub use values::{add_values, delete_handle, modify_values, remove_values};

use crate::access::authorize::{admin_records, permitted};
use crate::access::verify::AuthError;
use crate::auth::{Caller, Identity};
use crate::directory::Directory;
use handled_proto::data::admin::AdminPermissions;
use handled_proto::header::ResponseCode;
use handled_proto::value::{types, HandleValue};
use handled_store::{HandleRecord, StoreError};

/// How often a compare-and-set write is retried when another writer got there first.
const MAX_CAS_RETRIES: usize = 32;

/// A refused or failed operation: the response code and a message for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpError {
    pub code: ResponseCode,
    pub message: String,
    /// With 303 (a derived prefix delegated elsewhere): the values naming where.
    pub referral: Vec<HandleValue>,
    /// Refused by a per-client rate limit (native: 3 as any "too busy"; HTTP: 429, not 503).
    pub rate_limited: bool,
    /// The global resolver's upstream failed (native: 2, ERROR, as any error; HTTP:
    /// 504 or 502, not 500, so that the client sees whose fault it was).
    pub upstream: Option<UpstreamFailure>,
}

/// How the upstream service of a recursive resolution failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamFailure {
    /// No responsible site answered in time (or could be reached).
    NoAnswer,
    /// A site answered something that could not be verified.
    Unverifiable,
}

impl OpError {
    pub fn new(code: ResponseCode, message: impl Into<String>) -> Self {
        OpError { code, message: message.into(), referral: Vec::new(), rate_limited: false, upstream: None }
    }

    /// 3, "too busy" for this client alone: it asked too often.
    pub fn rate_limited(message: impl Into<String>) -> Self {
        OpError { rate_limited: true, ..OpError::new(ResponseCode::SERVER_TOO_BUSY, message) }
    }

    /// 2 (ERROR): the upstream service of a recursive resolution failed as `how` says.
    pub fn upstream(how: UpstreamFailure, message: impl Into<String>) -> Self {
        OpError { upstream: Some(how), ..OpError::new(ResponseCode::ERROR, message) }
    }

    /// 303 to the sites `values` name (§3.6).
    pub fn prefix_referral(values: Vec<HandleValue>) -> Self {
        OpError { referral: values, ..OpError::new(ResponseCode::PREFIX_REFERRAL, "Prefix referral") }
    }

    /// The caller must authenticate first (native: a 402 challenge; REST: 401).
    pub fn needs_authentication() -> Self {
        OpError::new(ResponseCode::AUTHENTICATION_NEEDED, "Authentication needed")
    }

    /// 301: the handle's prefix is not homed here (§7.2).
    pub fn not_responsible() -> Self {
        OpError::new(ResponseCode::SERVER_NOT_RESP, "That prefix doesn't live here")
    }

    pub fn is_authentication_needed(&self) -> bool {
        self.code == ResponseCode::AUTHENTICATION_NEEDED
    }
}

impl From<StoreError> for OpError {
    fn from(e: StoreError) -> Self {
        let (code, message) = crate::store_answer::store_answer(&e);
        OpError::new(code, message)
    }
}

impl From<AuthError> for OpError {
    fn from(e: AuthError) -> Self {
        OpError::new(e.code, e.message)
    }
}

pub(crate) fn show(h: &[u8]) -> String {
    String::from_utf8_lossy(h).into_owned()
}

/// 301 unless this server is responsible for `handle` (§7.2).
async fn check_homed(state: &Directory, handle: &[u8]) -> Result<(), OpError> {
    if state.is_homed(handle).await {
        Ok(())
    } else {
        Err(OpError::not_responsible())
    }
}

/// What a Handle.Net mirror answers to any administration request (RC 301).
pub const NOT_A_PRIMARY: &str = "Not a primary server";

/// On a replication mirror every write (create, delete, add, remove, modify,
/// home, unhome: Java's `isAdminRequest`) is for the primary: RC 301 before
/// any authentication, as the original's `processRequest` answers. Listing
/// handles and homed prefixes is no such request there, and works on a mirror.
/// A read-only store (Handle.Net's `sql_read_only`) is answered the same way.
pub(crate) fn check_primary(state: &Directory) -> Result<(), OpError> {
    match state.mirror() {
        Some(m) if m.is_read_only() => Err(OpError::new(ResponseCode::SERVER_NOT_RESP, NOT_A_PRIMARY)),
        _ if state.admin().capabilities().read_only => Err(OpError::new(ResponseCode::SERVER_NOT_RESP, NOT_A_PRIMARY)),
        _ => Ok(()),
    }
}

fn require(caller: &Caller) -> Result<&Identity, OpError> {
    caller.identity().ok_or_else(OpError::needs_authentication)
}

/// 400 unless `identity` holds `needed` through `admins` (or as server admin).
async fn permit(
    state: &Directory,
    identity: &Identity,
    target: &[u8],
    admins: &[handled_proto::data::admin::AdminRecord],
    needed: AdminPermissions,
) -> Result<(), OpError> {
    if permitted(state, identity, target, admins, needed).await? {
        Ok(())
    } else {
        Err(OpError::new(
            ResponseCode::INVALID_ADMIN,
            format!("{} is not an administrator with the needed permissions", identity.display()),
        ))
    }
}

async fn load(state: &Directory, key: &[u8]) -> Result<Option<HandleRecord>, OpError> {
    Ok(state.record(key).await?)
}

fn is_admin_value(v: &HandleValue) -> bool {
    v.is_type(types::HS_ADMIN)
}

/// Does this value decide who someone is or what they may do: an HS_ADMIN, a
/// key an identity is checked against, a group (HS_VLIST) or a secret? Only
/// admins may write one, even over a publicly writable value (F13: anyone could
/// turn such a value into an HS_SECKEY and then authenticate with it).
fn grants_authority(v: &HandleValue) -> bool {
    [types::HS_ADMIN, types::HS_SECKEY, types::HS_PUBKEY, types::HS_VLIST].iter().any(|t| v.is_type(t))
        || handled_proto::value::is_secret_type(&v.value_type)
}

/// Equal apart from the timestamp (which the server sets).
fn same_value(a: &HandleValue, b: &HandleValue) -> bool {
    HandleValue { timestamp: 0, ..a.clone() } == HandleValue { timestamp: 0, ..b.clone() }
}

/// Permissions implied by changing one value (§5.6): adding, removing or
/// replacing, with the HS_ADMIN variants and the admin↔non-admin conversions.
fn change_permissions(old: Option<&HandleValue>, new: Option<&HandleValue>) -> AdminPermissions {
    use AdminPermissions as P;
    AdminPermissions(match (old, new) {
        (None, None) => 0,
        (None, Some(n)) => {
            if is_admin_value(n) {
                P::ADD_ADMIN
            } else {
                P::ADD_VALUE
            }
        }
        (Some(o), None) => {
            if is_admin_value(o) {
                P::REMOVE_ADMIN
            } else {
                P::REMOVE_VALUE
            }
        }
        (Some(o), Some(n)) if same_value(o, n) => 0,
        (Some(o), Some(n)) => match (is_admin_value(o), is_admin_value(n)) {
            (true, true) => P::MODIFY_ADMIN,
            (true, false) => P::REMOVE_ADMIN | P::MODIFY_VALUE,
            (false, true) => P::MODIFY_VALUE | P::ADD_ADMIN,
            (false, false) => P::MODIFY_VALUE,
        },
    })
}

/// New values must have positive, distinct indexes (202 / 201).
fn check_new_values(values: &[HandleValue]) -> Result<(), OpError> {
    if values.iter().any(|v| v.index <= 0) {
        return Err(OpError::new(ResponseCode::INVALID_VALUE, "Value indexes must be positive"));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(v) = values.iter().find(|v| !seen.insert(v.index)) {
        return Err(OpError::new(ResponseCode::VALUE_ALREADY_EXISTS, format!("Duplicate value index {}", v.index)));
    }
    Ok(())
}

/// `values` as stored: stamped now, except values identical to the one they
/// replace, which keep their timestamp (§7.4).
fn stamp(values: &[HandleValue], old: Option<&HandleRecord>) -> Vec<HandleValue> {
    let t = handled_store::clock::now_secs_i32();
    values
        .iter()
        .map(|v| match old.and_then(|r| r.values.iter().find(|o| o.index == v.index)) {
            Some(o) if same_value(o, v) => o.clone(),
            _ => HandleValue { timestamp: t, ..v.clone() },
        })
        .collect()
}

fn admins_of(record: &HandleRecord) -> Vec<handled_proto::data::admin::AdminRecord> {
    admin_records(&record.values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use AdminPermissions as P;

    #[test]
    fn change_permissions_follow_the_admin_rules() {
        let url = HandleValue::new(1, "URL", "a");
        let url2 = HandleValue::new(1, "URL", "b");
        let adm = HandleValue::new(1, "HS_ADMIN", "x");
        let adm_sub = HandleValue::new(1, "HS_ADMIN.extra", "y");
        assert_eq!(change_permissions(None, Some(&url)).0, P::ADD_VALUE);
        assert_eq!(change_permissions(None, Some(&adm)).0, P::ADD_ADMIN);
        assert_eq!(change_permissions(Some(&adm_sub), None).0, P::REMOVE_ADMIN);
        assert_eq!(change_permissions(Some(&url), Some(&url2)).0, P::MODIFY_VALUE);
        assert_eq!(change_permissions(Some(&url), Some(&url)).0, 0);
        assert_eq!(change_permissions(Some(&adm), Some(&url)).0, P::REMOVE_ADMIN | P::MODIFY_VALUE);
        assert_eq!(change_permissions(Some(&url), Some(&adm)).0, P::MODIFY_VALUE | P::ADD_ADMIN);
        assert_eq!(change_permissions(Some(&adm), Some(&adm_sub)).0, P::MODIFY_ADMIN);
    }

    #[test]
    fn new_value_checks() {
        assert_eq!(check_new_values(&[HandleValue::new(0, "URL", "a")]).unwrap_err().code, ResponseCode::INVALID_VALUE);
        let dup = [HandleValue::new(2, "URL", "a"), HandleValue::new(2, "EMAIL", "b")];
        assert_eq!(check_new_values(&dup).unwrap_err().code, ResponseCode::VALUE_ALREADY_EXISTS);
        assert!(check_new_values(&[HandleValue::new(1, "URL", "a")]).is_ok());
    }
}
