//! Who may use the source's operations (Handle.Net's rules): pulling the log
//! or a dump needs an identity in `replication_admins` or `server_admins`,
//! a checkpoint one in `backup_admins` or `server_admins`; GET_NEXT_TXN_ID
//! needs none. Each list names HS_PUBKEY/HS_SECKEY values or HS_VLIST groups.

use crate::access::authorize::in_admin_list;
use crate::auth::Caller;
use crate::config::parse_admin_list;
use crate::ops::OpError;
use crate::replication::ReplicationContext;
use handled_proto::header::ResponseCode;

/// Which list besides `server_admins` grants an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminList {
    Replication,
    Backup,
}

/// Ok if `caller` may; a challenge is asked for when nobody is proven yet;
/// a proven identity on neither list gets RC_INVALID_ADMIN (400), as from
/// the original.
pub async fn require(state: &ReplicationContext, caller: &Caller, list: AdminList) -> Result<(), OpError> {
    let Some(identity) = caller.identity() else { return Err(OpError::needs_authentication()) };
    let configured = match list {
        AdminList::Replication => &state.settings.replication.admins,
        AdminList::Backup => &state.settings.backup_admins,
    };
    // Validated at start (Config::validate), so this parses.
    let mut admins = parse_admin_list(configured).unwrap_or_default();
    admins.extend(state.live().server_admins.iter().cloned());
    if in_admin_list(state, identity, admins).await? {
        return Ok(());
    }
    let what = match list {
        AdminList::Replication => "replication_admins",
        AdminList::Backup => "backup_admins",
    };
    Err(OpError::new(ResponseCode::INVALID_ADMIN, format!("{} is not in {what} or server_admins", identity.display())))
}
