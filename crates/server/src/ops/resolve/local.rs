//! The local store as a resolution source: handles of the prefixes homed here.

use super::chain::{Asked, Lookup, Query, ResolutionSource};
use crate::ops::OpError;
use crate::state::ServerState;
use async_trait::async_trait;

pub struct LocalStore;

#[async_trait]
impl ResolutionSource for LocalStore {
    /// A database server's store answers after a round trip: on the UDP
    /// receive thread, one at a time, its reads would queue behind each other.
    fn answers_locally(&self, state: &ServerState, _asked: &Asked<'_>) -> bool {
        !state.store.capabilities().remote
    }

    async fn lookup(&self, state: &ServerState, query: &Query<'_>, _not_found: bool) -> Result<Lookup, OpError> {
        if !state.is_homed(query.canonical).await {
            return Ok(Lookup::Pass);
        }
        Ok(match state.store.get(&state.storage_key(query.canonical)).await? {
            Some(record) => Lookup::Record(record),
            None => Lookup::NotFound,
        })
    }
}
