//! Replication with Handle.Net (docs/replication.md): `handled` as a mirror.

pub mod mirror;
