//! Structured value data (§2): the value types the server parses.
//!
//! Every decoder works on a value's data bytes and returns a typed
//! [`DecodeError`](crate::DecodeError); none panics on any input.

pub mod admin;
pub mod hash;
pub mod pubkey;
pub mod site;
pub mod vlist;

pub use admin::{AdminPermissions, AdminRecord};
pub use hash::server_index;
pub use pubkey::PublicKey;
pub use site::{Interface, InterfaceKind, ServerInfo, SiteAttribute, SiteInfo, TransportProtocol};
pub use vlist::ValueList;
