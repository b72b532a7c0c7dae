//! Fuzzing's way in (`fuzz/fuzz_targets/web_request.rs`, feature `fuzzing`):
//! what the JSON API reads of a request before any store is asked: the
//! `Authorization` header's `Handle` fields, the query's parameters, and a PUT
//! body's values.

use super::authn::{strip_scheme, HandleFields};
use super::params::Params;
use handled_proto::value::HandleValue;

/// What came of one request.
pub struct Read {
    /// The identity the `Handle` fields claim (`id=`), read both ways.
    pub identity: Option<(Vec<u8>, i32)>,
    pub identity_encoded: Option<(Vec<u8>, i32)>,
    pub fields: usize,
    /// `index=` and the paging parameters, or why they are refused.
    pub indexes: Result<Vec<i32>, String>,
    pub paging: Result<(Option<i64>, Option<i64>), String>,
    /// A PUT body's values for `handle`, or the refusal's message.
    pub values: Result<Vec<HandleValue>, String>,
}

pub fn read_request(authorization: &str, query: &str, body: &[u8], handle: &[u8]) -> Read {
    let fields = HandleFields::parse(strip_scheme(authorization, "Handle").unwrap_or(authorization));
    let params = Params::from_query(Some(query));
    Read {
        identity: fields.identity(true),
        identity_encoded: fields.identity(false),
        fields: fields.0.len(),
        indexes: params.ints("index"),
        paging: params.paging(),
        values: super::handles::body_values(body, handle).map_err(|e| e.message),
    }
}
