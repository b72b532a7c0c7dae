//! The local store as a resolution source: handles of the prefixes homed here.

use super::chain::{Asked, Lookup, Query, ResolutionSource};
use crate::directory::Directory;
use crate::ops::OpError;
use async_trait::async_trait;
use std::sync::Arc;

pub struct LocalStore {
    directory: Arc<Directory>,
}

impl LocalStore {
    pub fn new(directory: Arc<Directory>) -> Self {
        LocalStore { directory }
    }
}

#[async_trait]
impl ResolutionSource for LocalStore {
    /// A database server's store answers after a round trip: on the UDP
    /// receive thread, one at a time, its reads would queue behind each other.
    fn answers_locally(&self, _asked: &Asked<'_>) -> bool {
        !self.directory.admin().capabilities().remote
    }

    async fn lookup(&self, query: &Query<'_>, _not_found: bool) -> Result<Lookup, OpError> {
        let state = &self.directory;
        if !state.is_homed(query.canonical).await {
            return Ok(Lookup::Pass);
        }
        Ok(match state.record(&state.storage_key(query.canonical)).await? {
            Some(record) => Lookup::Record(record),
            None => Lookup::NotFound,
        })
    }
}
