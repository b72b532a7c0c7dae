//! The response code and message a store failure is answered with, one
//! mapping for an operation (`ops::OpError`) and for an authentication that
//! could not read the identity's keys (`auth::work::AuthError`), so that a
//! client can tell "try again later" (7, HTTP 503) from "refused for good"
//! (a 1xx/2xx code naming what, HTTP 4xx) and neither from wrong credentials.

use handled_proto::header::ResponseCode;
use handled_store::{Refused, StoreError};

/// What "the store is out of reach" says (RC 7).
const STORAGE_UNAVAILABLE: &str = "Storage unavailable, try again later";

/// The answer to a store failure; logged as an error unless it is the
/// client's (a record or name the store refuses for good).
pub fn store_answer(e: &StoreError) -> (ResponseCode, String) {
    let refusal = match e {
        // A record the decoders could not read back (e.g. a value over 1 MiB):
        // the client's mistake, not the store's (was RC 2, HTTP 500).
        StoreError::Invalid(why) => Some((ResponseCode::INVALID_VALUE, why.to_string())),
        // Refused by the database for good: at once, naming what (a retry answer would loop).
        StoreError::Refused { what, message } => {
            let code = match what {
                Refused::Name => ResponseCode::INVALID_HANDLE,
                Refused::Value => ResponseCode::INVALID_VALUE,
                Refused::Taken => ResponseCode::HANDLE_ALREADY_EXISTS,
            };
            Some((code, message.clone()))
        }
        _ => None,
    };
    if let Some(answer) = refusal {
        tracing::debug!("store refused: {e}");
        return answer;
    }
    tracing::error!("store: {e}");
    match e {
        // The store is out of reach (a database down, a cluster that lost its
        // quorum, a closed store): try again later, elsewhere (RC 7, HTTP 503).
        // A store that lacks the feature (e.g. Cassandra with replication_log =
        // false) was a backend error before it had its own variant; still answered so.
        StoreError::Backend(_) | StoreError::Closed | StoreError::Io(_) | StoreError::Unsupported(_) => {
            (ResponseCode::SERVER_BACKUP, STORAGE_UNAVAILABLE.into())
        }
        _ => (ResponseCode::ERROR, "Internal storage error".into()),
    }
}
