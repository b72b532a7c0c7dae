//! Bodies of RETRIEVE_TXN_LOG (1001) and DUMP_HANDLES (1002) requests.
//!
//! How a receiver tells the two RETRIEVE_TXN_LOG forms apart (Java 9.0.0
//! `Encoder.encodeRetrieveTxnRequest` / `decodeRetrieveTxnRequest`): by the
//! **request envelope's own protocol version**, not by the body. A sender whose
//! message is at 2.9 or later writes a leading flag byte (1 = "all queues" with
//! the `ReplicationStateInfo` JSON, 0 = the classic fields); below 2.9 it writes the
//! classic fields with no flag. The Java resolver sets a request's version from the
//! HS_SITE it sends to (`setSupportedProtocolVersion(site)`, capped at 2.10), so a
//! mirror using a site record that says 2.1 sends the pre-2.9 form. The Java
//! decoder treats every flag value other than 1 as the classic form; we accept only
//! 0 and 1 (the values Java sends) so a body has one reading.
//!
//! Our extension, `waitMillis`: an optional trailing `i32` after the fields of
//! either form, asking the source to hold the answer up to that long until a newer
//! transaction commits (a long poll for low-latency mirrors). Java's decoder reads
//! field by field at fixed offsets and never looks at the body length, so a Java
//! source ignores it (checked against the library: vector
//! `retrieve_txn_request_wait_ignored_by_java`).

use super::state_info::ReplicationStateInfo;
use crate::codec::{put_bytes, put_i32, put_u64, put_u8, DecodeError, DecodeResult, Reader};
use crate::envelope::Version;
use crate::handle::MAX_HANDLE_LEN;

/// The requesting mirror server's own place in its site: the source sends only
/// the handles with `abs(hash % num_servers) == server_num` (HOME/UNHOME always).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MirrorLayout {
    /// 0 = hash the prefix, 1 = the suffix, 2 = the whole handle (HS_SITE hash option).
    pub hash_type: u8,
    pub num_servers: i32,
    pub server_num: i32,
}

impl MirrorLayout {
    /// A single-server mirror: every handle belongs to it.
    pub const SINGLE: MirrorLayout = MirrorLayout { hash_type: 0, num_servers: 1, server_num: 0 };

    fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        Ok(MirrorLayout {
            hash_type: r.u8("receiver hash type")?,
            num_servers: r.i32("receiver server count")?,
            server_num: r.i32("receiver server number")?,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        put_u8(out, self.hash_type);
        put_i32(out, self.num_servers);
        put_i32(out, self.server_num);
    }
}

/// What a RETRIEVE_TXN_LOG asks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TxnQuery {
    /// This server's own queue after `last_txn_id`; `last_query_date_ms` is the
    /// END date of the mirror's previous pull (the redump check compares it with
    /// the queue's first date).
    Since { last_txn_id: u64, last_query_date_ms: u64 },
    /// Every queue the source knows ("proxied mirroring", needs ≥ 2.9), with the
    /// mirror's position in each.
    AllQueues(ReplicationStateInfo),
}

/// RETRIEVE_TXN_LOG (1001) request body.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RetrieveTxnRequest {
    pub query: TxnQuery,
    pub layout: MirrorLayout,
    /// The ≥ 2.9 form (leading flag byte). Always written for `AllQueues`; for
    /// `Since` it must match the envelope version: see [`RetrieveTxnRequest::flagged_at`].
    pub flagged: bool,
    /// Our long-poll extension (see the module doc); `None` on the wire = absent.
    pub wait_millis: Option<i32>,
}

const FLAG_SINCE: u8 = 0;
const FLAG_ALL_QUEUES: u8 = 1;
/// Largest `ReplicationStateInfo` JSON we read (one entry is ~60 bytes).
const MAX_STATE_JSON_LEN: usize = 256 * 1024;

impl RetrieveTxnRequest {
    /// Whether a request in an envelope of `version` carries the flag byte.
    pub fn flagged_at(version: Version) -> bool {
        version >= Version::V2_9
    }

    /// The classic query in the form that fits an envelope of `version`.
    pub fn since(version: Version, last_txn_id: u64, last_query_date_ms: u64, layout: MirrorLayout) -> Self {
        RetrieveTxnRequest {
            query: TxnQuery::Since { last_txn_id, last_query_date_ms },
            layout,
            flagged: Self::flagged_at(version),
            wait_millis: None,
        }
    }

    /// Decode a body that arrived in an envelope of `version`. Bytes after the
    /// fields (and after `waitMillis`) are ignored, as Java ignores them.
    pub fn decode(version: Version, r: &mut Reader<'_>) -> DecodeResult<Self> {
        let flagged = Self::flagged_at(version);
        let flag = if flagged { r.u8("retrieve-transactions flag")? } else { FLAG_SINCE };
        let query = match flag {
            FLAG_SINCE => TxnQuery::Since {
                last_txn_id: r.u64("last transaction id")?,
                last_query_date_ms: r.u64("last query date")?,
            },
            FLAG_ALL_QUEUES => {
                let n = r.len("replication state JSON")?;
                if n > MAX_STATE_JSON_LEN {
                    return Err(DecodeError::BadLength { what: "replication state JSON", len: n as i64 });
                }
                TxnQuery::AllQueues(ReplicationStateInfo::from_json(r.take(n, "replication state JSON")?)?)
            }
            other => {
                return Err(DecodeError::Invalid {
                    what: "retrieve-transactions flag",
                    detail: format!("{other} (0 = one queue, 1 = all queues)"),
                })
            }
        };
        let layout = MirrorLayout::read(r)?;
        let wait_millis = if r.remaining() >= 4 { Some(r.i32("wait millis")?) } else { None };
        Ok(RetrieveTxnRequest { query, layout, flagged, wait_millis })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        match &self.query {
            TxnQuery::Since { last_txn_id, last_query_date_ms } => {
                if self.flagged {
                    put_u8(out, FLAG_SINCE);
                }
                put_u64(out, *last_txn_id);
                put_u64(out, *last_query_date_ms);
            }
            TxnQuery::AllQueues(state) => {
                put_u8(out, FLAG_ALL_QUEUES);
                put_bytes(out, &state.to_json());
            }
        }
        self.layout.encode(out);
        if let Some(w) = self.wait_millis {
            put_i32(out, w);
        }
    }
}

/// `startingPointType` of a resumed dump: after this handle of the handle dates.
pub const RESUME_AFTER_HANDLE_DATE: i32 = 0;
/// ... after this prefix of the NA dates.
pub const RESUME_AFTER_NA_DATE: i32 = 1;
/// ... after this handle of the storage scan.
pub const RESUME_AFTER_HANDLE: i32 = 2;
/// ... after this prefix of the homed-prefix scan.
pub const RESUME_AFTER_NA: i32 = 3;

/// DUMP_HANDLES (1002) request body.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DumpHandlesRequest {
    pub layout: MirrorLayout,
    /// `(startingPoint, startingPointType)` to resume after (≥ 2.8 sources);
    /// types `RESUME_AFTER_*`.
    pub resume: Option<(Vec<u8>, i32)>,
}

/// The fixed part: hash type, server count, server number.
const DUMP_REQUEST_FIXED_LEN: usize = 9;

impl DumpHandlesRequest {
    /// Like Java, the resume point is there iff the body is longer than the
    /// fixed part; bytes after it are ignored.
    pub fn decode(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let layout = MirrorLayout::read(r)?;
        let resume = if r.is_empty() {
            None
        } else {
            let n = r.len("dump starting point")?;
            if n > MAX_HANDLE_LEN {
                return Err(DecodeError::BadLength { what: "dump starting point", len: n as i64 });
            }
            let point = r.take(n, "dump starting point")?.to_vec();
            Some((point, r.i32("dump starting point type")?))
        };
        Ok(DumpHandlesRequest { layout, resume })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.reserve(DUMP_REQUEST_FIXED_LEN);
        self.layout.encode(out);
        if let Some((point, kind)) = &self.resume {
            put_bytes(out, point);
            put_i32(out, *kind);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(version: Version, body: &[u8]) -> DecodeResult<RetrieveTxnRequest> {
        RetrieveTxnRequest::decode(version, &mut Reader::new(body))
    }

    #[test]
    fn retrieve_forms() {
        let layout = MirrorLayout { hash_type: 2, num_servers: 3, server_num: 1 };
        for version in [Version::V2_1, Version::V2_8, Version::V2_9, Version::V2_10] {
            let mut req = RetrieveTxnRequest::since(version, 7, 8, layout);
            let body = {
                let mut b = Vec::new();
                req.encode(&mut b);
                b
            };
            assert_eq!(body.len(), if version >= Version::V2_9 { 26 } else { 25 });
            assert_eq!(decode(version, &body).unwrap(), req);
            // One to three stray bytes are ignored (as Java does); four are waitMillis.
            for extra in 1..4 {
                let padded = [&body[..], &vec![9; extra]].concat();
                assert_eq!(decode(version, &padded).unwrap(), req);
            }
            req.wait_millis = Some(30_000);
            let mut with_wait = Vec::new();
            req.encode(&mut with_wait);
            assert_eq!(with_wait[body.len()..], 30_000i32.to_be_bytes());
            assert_eq!(decode(version, &with_wait).unwrap(), req);
        }
        let mut flagged = vec![2];
        flagged.extend([0; 25]);
        assert!(matches!(decode(Version::V2_10, &flagged), Err(DecodeError::Invalid { .. })));
        let mut huge = vec![1];
        huge.extend(((MAX_STATE_JSON_LEN + 1) as u32).to_be_bytes());
        assert!(matches!(decode(Version::V2_10, &huge), Err(DecodeError::BadLength { .. })));
    }

    #[test]
    fn dump_resume_by_length() {
        let plain = DumpHandlesRequest { layout: MirrorLayout::SINGLE, resume: None };
        let mut body = Vec::new();
        plain.encode(&mut body);
        assert_eq!(body.len(), DUMP_REQUEST_FIXED_LEN);
        assert_eq!(DumpHandlesRequest::decode(&mut Reader::new(&body)).unwrap(), plain);
        let resumed = DumpHandlesRequest { resume: Some((b"20.5000/x".to_vec(), RESUME_AFTER_HANDLE)), ..plain };
        let mut body = Vec::new();
        resumed.encode(&mut body);
        assert_eq!(DumpHandlesRequest::decode(&mut Reader::new(&body)).unwrap(), resumed);
        // Anything after the fixed part is read as a resume point.
        assert!(DumpHandlesRequest::decode(&mut Reader::new(&body[..DUMP_REQUEST_FIXED_LEN + 1])).is_err());
    }
}
