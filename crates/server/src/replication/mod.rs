//! Replication with Handle.Net (docs/replication.md): `handled` as a source
//! that stock Handle.Net mirrors pull from ([`source`]), and as a mirror that
//! pulls from a Handle.Net (or `handled`) primary ([`mirror`]).

pub mod mirror;
pub mod source;
