//! Wire codec for the Handle System protocol (`../shared/docs/handle-protocol.md`).
//!
//! Sans-I/O: this crate turns bytes into typed messages and back. It opens no
//! sockets, spawns no tasks and knows nothing of storage.

pub mod codec;
pub mod value;

pub use codec::{Codec, DecodeError, DecodeResult, Reader};
pub use value::{HandleValue, TtlType, ValuePermissions, ValueReference};
