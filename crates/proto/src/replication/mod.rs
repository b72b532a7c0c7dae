//! Handle.Net replication on the wire (opcodes 1000–1003 and the streamed part that
//! follows the 1001/1002 responses), after `docs/replication.md` and the official
//! Java library 9.0.0, which is the judge of every layout here.
//!
//! Sans-I/O like the rest of the crate: request/response bodies plug into
//! [`crate::request::RequestBody`] and [`crate::response::ResponseBody`]; the
//! streams are encoded into `Vec<u8>` by [`StreamWriter`] and decoded incrementally
//! by [`TxnStreamDecoder`] / [`DumpStreamDecoder`] (feed bytes, take whole items;
//! `Ok(None)` means "need more", never an error), with a cap on one item's size.
//!
//! * [`request`]: RETRIEVE_TXN_LOG and DUMP_HANDLES bodies, the mirror's layout.
//! * [`state_info`]: `ReplicationStateInfo`, the Gson JSON of the "all queues" query.
//! * [`framing`]: stream type word, PK-signed block framing, the incremental frame reader.
//! * [`txn_stream`] / [`dump_stream`]: the records of the two streams.

pub mod dump_stream;
pub mod framing;
pub mod request;
pub mod state_info;
pub mod txn_stream;

pub use dump_stream::{DumpStreamDecoder, DumpStreamItem, DUMP_STREAM_VERSION};
pub use framing::{BlockSigner, BlockVerifier, Framing, NoVerifier, Preamble, StreamError, StreamType, StreamWriter};
pub use request::{DumpHandlesRequest, MirrorLayout, RetrieveTxnRequest, TxnQuery};
pub use state_info::{ReplicationServerState, ReplicationStateInfo};
pub use txn_stream::{TxnAction, TxnRecord, TxnStreamDecoder, TxnStreamItem};

/// The handle a GET_NEXT_TXN_ID request names (`Common.SERVER_TXN_ID_HANDLE`).
pub const NEXT_TXN_ID_HANDLE: &[u8] = b"0.SITE/NEXT-TXN-ID";

/// Default cap on one streamed item (a record with all its values, plus its
/// signature): far above any real handle record, small enough to buffer.
pub const DEFAULT_MAX_ITEM_LEN: usize = 4 * 1024 * 1024;
