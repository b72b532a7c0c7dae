//! Derived-prefix referrals (§3.6), as the Java server sends them from a
//! root: a prefix handle `0.NA/a.b` this server is responsible for but does
//! not hold, under an ancestor `0.NA/a` whose HS_SITE.PREFIX (HS_NA_DELEGATE,
//! HS_SERV.PREFIX) values delegate the prefixes derived from it elsewhere, is
//! answered 303 with those public values and an empty referral handle;
//! unless the request has DNR ("do not refer"), as in Java's
//! `getPrefixReferralResponseIfAppropriate`: then what is held here stands
//! (the prefix handle is not found).

use super::chain::{Lookup, Query, ResolutionSource};
use crate::directory::Directory;
use crate::ops::OpError;
use async_trait::async_trait;
use handled_proto::handle;
use handled_proto::value::{types, HandleValue};
use std::sync::Arc;

/// Ancestors looked at (each a store read), nearest first.
const MAX_ANCESTORS: usize = 8;
const DELEGATING: [&[u8]; 3] = [types::HS_SITE_PREFIX, types::HS_NA_DELEGATE, types::HS_SERV_PREFIX];

pub struct DerivedPrefixReferral {
    directory: Arc<Directory>,
}

impl DerivedPrefixReferral {
    pub fn new(directory: Arc<Directory>) -> Self {
        DerivedPrefixReferral { directory }
    }
}

#[async_trait]
impl ResolutionSource for DerivedPrefixReferral {
    async fn lookup(&self, query: &Query<'_>, not_found: bool) -> Result<Lookup, OpError> {
        let state = &self.directory;
        if !not_found || query.request.do_not_refer || !handle::is_prefix_handle(query.canonical) {
            return Ok(Lookup::Pass);
        }
        let own = handle::normalize(query.canonical, false);
        let mut ancestors = handle::ancestors(&own);
        ancestors.pop(); // the handle itself, which is not there
        for ancestor in ancestors.iter().rev().take(MAX_ANCESTORS) {
            let Some(record) = state.record(&state.storage_key(ancestor)).await? else { continue };
            let delegating: Vec<HandleValue> = record
                .values
                .into_iter()
                .filter(|v| {
                    v.permissions.public_read() && DELEGATING.iter().any(|t| v.value_type.eq_ignore_ascii_case(t))
                })
                .collect();
            if !delegating.is_empty() {
                return Err(OpError::prefix_referral(delegating));
            }
        }
        Ok(Lookup::Pass)
    }
}
