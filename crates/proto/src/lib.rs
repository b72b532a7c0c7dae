//! Wire codec for the Handle System protocol (`docs/handle-protocol.md`).
//!
//! Sans-I/O: this crate turns bytes into typed messages and back. It opens no
//! sockets, spawns no tasks and knows nothing of storage.

pub mod codec;
pub mod crypto;
pub mod value;

// Framing and messages (§1, §3, §4.1, §5 wire forms).
pub mod credential;
pub mod digest;
pub mod envelope;
pub mod header;
pub mod message;
pub mod request;
pub mod response;
pub mod session;
pub mod udp;
pub mod unit;

// Structured value data (§2) and the JSON forms of §4.5.1.
pub mod data;
pub mod handle;
pub mod json;

// Replication (opcodes 1000–1003 and their streams).
pub mod replication;

// Handle.Net's configuration files (`config.dct`), read by `import-config`.
pub mod streamtable;

pub use codec::{Codec, DecodeError, DecodeResult, Reader};
pub use value::{HandleValue, TtlType, ValuePermissions, ValueReference};
