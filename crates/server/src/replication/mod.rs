//! Replication with Handle.Net (docs/replication.md): `handled` as a source
//! that stock Handle.Net mirrors pull from ([`source`]).

pub mod source;
