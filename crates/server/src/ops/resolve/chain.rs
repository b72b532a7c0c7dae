//! The resolution chain: an ordered list of sources asked in turn for a
//! handle, as hickory-dns's `Catalog` chains its handlers. Each source either
//! answers or passes; the first answer wins.
//!
//! The chain is built once at start ([`super::standard_chain`]) and each
//! source owns what it reads (the directory, the resolver, its settings), so
//! a source added later brings its own state rather than a field of the
//! server's; a source whose subsystem is switched off passes.

use super::Resolve;
use crate::auth::Caller;
use crate::directory::Directory;
use crate::ops::OpError;
use async_trait::async_trait;
use handled_proto::header::ResponseCode;
use handled_proto::value::HandleValue;
use handled_store::HandleRecord;
use std::sync::Arc;

/// What a source made of a handle.
pub enum Lookup {
    /// The handle's record: selection and read permissions are applied to it
    /// afterwards, the same way whichever source found it.
    Record(HandleRecord),
    /// The values to send, already selected and permitted by the source (a
    /// handle with rules of its own, like the status handle).
    Values(Vec<HandleValue>),
    /// This server is responsible for the handle and it does not exist. Later
    /// sources that may answer for such a handle (templates) are still asked.
    NotFound,
    /// Not this source's handle.
    Pass,
}

/// What the transports know of a resolution before running it (to run it inline or not).
pub struct Asked<'a> {
    /// The REC flag.
    pub recursion: bool,
    /// The DNR flag.
    pub do_not_refer: bool,
    /// The handle, when it could be read from the request.
    pub handle: Option<&'a [u8]>,
}

/// One place handles can come from.
#[async_trait]
pub trait ResolutionSource: Send + Sync {
    /// Answers from this process only (memory, the local store) for the
    /// request `asked` describes: no network round trip, so the UDP receive
    /// thread may run it inline.
    fn answers_locally(&self, _asked: &Asked<'_>) -> bool {
        true
    }

    /// Look `query` up. `not_found` tells that a source before this one is
    /// responsible for the handle and does not hold it (a source that only
    /// answers for handles homed elsewhere then passes).
    async fn lookup(&self, query: &Query<'_>, not_found: bool) -> Result<Lookup, OpError>;
}

/// A resolution request with its handle in canonical form.
pub struct Query<'a> {
    pub request: &'a Resolve,
    pub canonical: &'a [u8],
    pub caller: &'a Caller,
    /// Answered on a thread that must not wait on the network (the UDP
    /// receive thread, the TCP accepting task): a source that would wait
    /// answers from what it holds or not at all.
    pub cache_only: bool,
}

/// What the chain answered: a record to filter, or values ready to send.
pub enum Resolved {
    Record(HandleRecord),
    Values(Vec<HandleValue>),
}

/// Ordered sources, and the directory that read permissions are checked in.
pub struct ResolutionChain {
    pub(super) directory: Arc<Directory>,
    sources: Vec<Box<dyn ResolutionSource>>,
}

impl ResolutionChain {
    pub fn new(directory: Arc<Directory>, sources: Vec<Box<dyn ResolutionSource>>) -> Self {
        ResolutionChain { directory, sources }
    }

    /// Every source answers locally: resolution never waits on the network.
    pub fn answers_locally(&self, asked: &Asked<'_>) -> bool {
        self.sources.iter().all(|s| s.answers_locally(asked))
    }

    /// Ask each source in turn. No answer: 100 (handle not found) when some
    /// source is responsible for the handle, else 301 (not responsible, §7.2).
    pub(super) async fn lookup(&self, query: &Query<'_>) -> Result<Resolved, OpError> {
        let mut not_found = false;
        for source in &self.sources {
            match source.lookup(query, not_found).await? {
                Lookup::Record(record) => return Ok(Resolved::Record(record)),
                Lookup::Values(values) => return Ok(Resolved::Values(values)),
                Lookup::NotFound => not_found = true,
                Lookup::Pass => {}
            }
        }
        Err(if not_found {
            OpError::new(ResponseCode::HANDLE_NOT_FOUND, "Handle not found")
        } else {
            OpError::not_responsible()
        })
    }
}
