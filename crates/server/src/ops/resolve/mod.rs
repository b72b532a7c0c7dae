//! Resolution (§3.3): index/type filters, public-only semantics, and read
//! access to non-public values for authenticated admins with READ_VALUE.

pub mod chain;
pub use chain::Asked;
mod local;
mod recursive;
mod referral;
mod templates;
#[cfg(feature = "fuzzing")]
pub use templates::fuzz_build as fuzz_build_template;

use super::*;
pub use chain::ResolutionChain;
use chain::{Query, Resolved};
use handled_proto::handle;
use std::sync::Arc;

/// What the sources of the standard chain read, handed over at start.
pub struct ChainParts {
    pub directory: Arc<Directory>,
    pub metrics: Arc<crate::metrics::Metrics>,
    pub recursion: Arc<crate::recursion::Recursion>,
    pub templates: crate::config::templates::TemplatesConfig,
    pub case_sensitive: bool,
    /// The status handle's monitor value (`enable_monitor_daemon`).
    pub status_monitor: bool,
}

/// The sources asked, in order: the status handle, the local store,
/// template handles (for a handle homed here that the store does not hold),
/// derived-prefix referrals (for a prefix handle delegated by an ancestor),
/// then the global resolver (for a handle homed elsewhere).
pub fn standard_chain(parts: ChainParts) -> ResolutionChain {
    let ChainParts { directory, metrics, recursion, templates, case_sensitive, status_monitor } = parts;
    let dir = || directory.clone();
    ResolutionChain::new(
        dir(),
        vec![
            Box::new(super::status_handle::StatusHandle::new(dir(), metrics.clone(), status_monitor)),
            Box::new(local::LocalStore::new(dir())),
            Box::new(templates::Templates::new(dir(), metrics, templates, case_sensitive)),
            Box::new(referral::DerivedPrefixReferral::new(dir())),
            Box::new(recursive::Recursive::new(dir(), recursion)),
        ],
    )
}

/// A resolution request as every front end states it.
#[derive(Debug, Clone, Default)]
pub struct Resolve {
    pub handle: Vec<u8>,
    pub indexes: Vec<i32>,
    pub types: Vec<Vec<u8>>,
    /// PO: only publicly readable values, never a challenge.
    pub public_only: bool,
    /// DNR: never answer with a prefix referral (nor take one from upstream).
    pub do_not_refer: bool,
    /// Who asks that a handle homed elsewhere be resolved (None: not asked).
    pub recurse: Option<Recurse>,
}

/// A client asking for recursion: over the native protocol with REC, or
/// through the web proxy or the JSON API.
#[derive(Debug, Clone, Copy)]
pub struct Recurse {
    pub client: std::net::IpAddr,
    pub native: bool,
}

/// Values selected by index and type lists: the union of both; empty lists mean all.
pub fn select<'a>(values: &'a [HandleValue], indexes: &[i32], types: &[Vec<u8>]) -> Vec<&'a HandleValue> {
    if indexes.is_empty() && types.is_empty() {
        return values.iter().collect();
    }
    values.iter().filter(|v| indexes.contains(&v.index) || types.iter().any(|t| v.type_matches(t))).collect()
}

/// The selected values, in stored order, from the first source of `chain`
/// that has the handle. Non-public values need PO clear and an identity with
/// READ_VALUE; values without admin read are never served.
pub async fn resolve(chain: &ResolutionChain, caller: &Caller, req: &Resolve) -> Result<Vec<HandleValue>, OpError> {
    resolve_with(chain, caller, req, false).await
}

/// [`resolve`], from the resolver's cache only when `cache_only` (a request
/// answered on a thread that must not wait on the network, [`chain::Query`]).
pub async fn resolve_with(
    chain: &ResolutionChain,
    caller: &Caller,
    req: &Resolve,
    cache_only: bool,
) -> Result<Vec<HandleValue>, OpError> {
    let canonical = handle::canonical(&req.handle);
    let query = Query { request: req, canonical: &canonical, caller, cache_only };
    let record = match chain.lookup(&query).await? {
        Resolved::Values(values) => return Ok(values),
        Resolved::Record(record) => record,
    };
    let mut selected = select(&record.values, &req.indexes, &req.types);
    if req.public_only {
        selected.retain(|v| v.permissions.public_read());
    } else if selected.iter().any(|v| !v.permissions.public_read()) {
        if selected.iter().any(|v| !v.permissions.public_read() && !v.permissions.admin_read()) {
            return Err(OpError::new(ResponseCode::INSUFFICIENT_PERMISSIONS, "Values are not readable"));
        }
        let identity = require(caller)?;
        permit(
            &chain.directory,
            identity,
            &canonical,
            &admins_of(&record),
            AdminPermissions(AdminPermissions::READ_VALUE),
        )
        .await?;
    }
    if selected.is_empty() {
        return Err(OpError::new(ResponseCode::VALUES_NOT_FOUND, "No values found"));
    }
    Ok(selected.into_iter().cloned().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_a_union() {
        let values =
            vec![HandleValue::new(1, "URL", "a"), HandleValue::new(2, "EMAIL", "b"), HandleValue::new(3, "URL.x", "c")];
        let idx = |sel: Vec<&HandleValue>| sel.iter().map(|v| v.index).collect::<Vec<_>>();
        assert_eq!(idx(select(&values, &[], &[])), vec![1, 2, 3]);
        assert_eq!(idx(select(&values, &[2], &[b"URL".to_vec()])), vec![1, 2]);
        assert_eq!(idx(select(&values, &[], &[b"url.".to_vec()])), vec![1, 3]);
        assert!(select(&values, &[9], &[]).is_empty());
    }
}
