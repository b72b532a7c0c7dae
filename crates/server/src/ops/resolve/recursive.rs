//! The global resolver as the last resolution source: a handle no source
//! before is responsible for is resolved by walking the global system
//! (`crate::recursion`, the `[resolver]` table), for the web proxy and the JSON
//! API, and for native requests with REC when `allow_recursion` (never
//! without REC: Handle.Net's semantics). Clients outside the allow-list get
//! 301 as from a server without recursion, with a message saying why.

use super::chain::{Asked, Lookup, Query, ResolutionSource};
use crate::directory::Directory;
use crate::ops::{OpError, UpstreamFailure};
use crate::recursion::Recursion;
use async_trait::async_trait;
use handled_proto::handle;
use handled_proto::header::ResponseCode;
use handled_resolver::{Referrals, ResolveError};
use handled_store::HandleRecord;
use std::sync::Arc;

pub struct Recursive {
    directory: Arc<Directory>,
    recursion: Arc<Recursion>,
}

impl Recursive {
    pub fn new(directory: Arc<Directory>, recursion: Arc<Recursion>) -> Self {
        Recursive { directory, recursion }
    }
}

#[async_trait]
impl ResolutionSource for Recursive {
    /// With native recursion on, a REC resolution may wait on the network;
    /// without REC this source never recurses, nor for a handle homed here
    /// (the local store is responsible for it, found or not).
    /// Nor for a handle whose answer the resolver's cache holds: then, asked
    /// with `Query::cache_only` (run inline), the answer comes from the cache alone.
    fn answers_locally(&self, asked: &Asked<'_>) -> bool {
        if !asked.recursion || !self.recursion.native() {
            return true;
        }
        let Some(h) = asked.handle else { return false };
        self.directory.is_homed_now(&handle::canonical(h))
            || self.recursion.current().is_some_and(|offer| offer.resolver.has_fresh(h, referrals(asked.do_not_refer)))
    }

    async fn lookup(&self, query: &Query<'_>, not_found: bool) -> Result<Lookup, OpError> {
        let (Some(offer), Some(asker)) = (self.recursion.current(), query.request.recurse) else {
            return Ok(Lookup::Pass);
        };
        // A source before is responsible for the handle: its answer stands.
        if not_found || (asker.native && !offer.native) {
            return Ok(Lookup::Pass);
        }
        if !offer.allows(asker.client) {
            return Err(OpError::new(ResponseCode::SERVER_NOT_RESP, "Recursion is not offered to this client"));
        }
        let Some(_turn) = self.recursion.turn(&offer, asker.client) else {
            return Err(OpError::new(ResponseCode::SERVER_TOO_BUSY, "Too many recursive requests under way"));
        };
        let admit = || self.recursion.admit(asker.client);
        let referrals = referrals(query.request.do_not_refer);
        let resolved = if query.cache_only {
            // Answered from the cache an instant ago; gone since (evicted, or
            // expired with no stale window): this thread must not wait, the
            // client asks again and finds the refresh this started.
            offer.resolver.cached(query.canonical, referrals).unwrap_or(Err(ResolveError::Busy))
        } else {
            offer.resolver.resolve_admitted(query.canonical, referrals, admit).await
        };
        match resolved {
            Ok(answer) => Ok(Lookup::Record(HandleRecord { values: answer.values.to_vec(), name: None })),
            Err(ResolveError::NotFound) => Ok(Lookup::NotFound),
            // The code, not the other side's text.
            Err(ResolveError::Refused { code, .. }) => {
                Err(OpError::new(code, format!("The handle's server answered {}", code.name())))
            }
            Err(ResolveError::RateLimited) => Err(OpError::rate_limited(
                "Too many lookups needing an upstream query from this client; try again later",
            )),
            Err(ResolveError::Busy) => {
                Err(OpError::new(ResponseCode::SERVER_TOO_BUSY, "Too many handles being resolved at once"))
            }
            Err(ResolveError::InvalidHandle) => Err(OpError::new(
                ResponseCode::INVALID_HANDLE,
                "A handle with control characters is not resolved at other servers",
            )),
            Err(ResolveError::NotAllowed(why)) => {
                tracing::info!("recursion for {}: {why}", String::from_utf8_lossy(query.canonical));
                Err(OpError::new(
                    ResponseCode::ERROR,
                    "The handle's service is at an address this resolver does not query (docs/resolver.md)",
                ))
            }
            Err(ResolveError::Unreachable(why)) => {
                // Whoever controls a prefix's HS_SITE chooses the addresses
                // asked: the details go to the log, not to the client.
                tracing::info!("recursion for {}: {why}", String::from_utf8_lossy(query.canonical));
                Err(OpError::upstream(UpstreamFailure::NoAnswer, "The handle's service could not be reached in time"))
            }
            Err(ResolveError::Unverifiable(why)) => {
                tracing::info!("recursion for {}: {why}", String::from_utf8_lossy(query.canonical));
                Err(OpError::upstream(UpstreamFailure::Unverifiable, "The handle's service did not answer verifiably"))
            }
        }
    }
}

fn referrals(do_not_refer: bool) -> Referrals {
    if do_not_refer {
        Referrals::DoNotRefer
    } else {
        Referrals::Follow
    }
}
