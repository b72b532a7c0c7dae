//! Replication with Handle.Net (docs/replication.md): `handled` as a source
//! that stock Handle.Net mirrors pull from ([`source`]), and as a mirror that
//! pulls from a Handle.Net (or `handled`) primary ([`mirror`]), and as one of
//! several primaries that pull from each other ([`multi_primary`]).

mod context;
pub use context::ReplicationContext;
pub mod kept_queues;
pub mod mirror;
pub mod multi_primary;
pub mod source;
