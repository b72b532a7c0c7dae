//! Resolution (§3.3): filters, public-only semantics and the outcome codes of
//! the Java server.

use super::respond::{encode_response, error_response, RequestContext};
use crate::state::ServerState;
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::request::ResolutionRequest;
use handled_proto::response::ResponseBody;
use handled_proto::value::HandleValue;

/// Values selected by index and type lists: the union of both; empty lists mean all.
pub fn select<'a>(values: &'a [HandleValue], indexes: &[i32], types: &[Vec<u8>]) -> Vec<&'a HandleValue> {
    if indexes.is_empty() && types.is_empty() {
        return values.iter().collect();
    }
    values
        .iter()
        .filter(|v| indexes.contains(&v.index) || types.iter().any(|t| v.type_matches(t)))
        .collect()
}

pub async fn resolve(state: &ServerState, ctx: &RequestContext<'_>, req: &ResolutionRequest) -> Vec<u8> {
    if !state.is_homed(&req.handle) {
        return error_response(state, ctx, ResponseCode::SERVER_NOT_RESP, "That prefix doesn't live here");
    }
    let record = match state.store.get(&state.storage_key(&req.handle)).await {
        Ok(Some(record)) => record,
        Ok(None) => return error_response(state, ctx, ResponseCode::HANDLE_NOT_FOUND, "Handle not found"),
        Err(e) => {
            tracing::error!("store read failed: {e}");
            return error_response(state, ctx, ResponseCode::ERROR, "Internal storage error");
        }
    };
    let mut selected = select(&record.values, &req.indexes, &req.types);
    if ctx.flags().contains(OpFlags::PO) {
        selected.retain(|v| v.permissions.public_read());
    } else if selected.iter().any(|v| !v.permissions.public_read()) {
        // Non-public values need an authenticated admin with READ_VALUE (§3.3).
        // Challenge/response arrives with administration; until then they stay
        // unreadable rather than being served unauthenticated.
        return error_response(state, ctx, ResponseCode::INSUFFICIENT_PERMISSIONS, "Values are not publicly readable");
    }
    if selected.is_empty() {
        return error_response(state, ctx, ResponseCode::VALUES_NOT_FOUND, "No values found");
    }
    let body = ResponseBody::Resolution { handle: req.handle.clone(), values: selected.into_iter().cloned().collect() };
    encode_response(state, ctx, ResponseCode::SUCCESS, &body, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_a_union() {
        let values = vec![HandleValue::new(1, "URL", "a"), HandleValue::new(2, "EMAIL", "b"), HandleValue::new(3, "URL.x", "c")];
        let idx = |sel: Vec<&HandleValue>| sel.iter().map(|v| v.index).collect::<Vec<_>>();
        assert_eq!(idx(select(&values, &[], &[])), vec![1, 2, 3]);
        assert_eq!(idx(select(&values, &[2], &[b"URL".to_vec()])), vec![1, 2]);
        assert_eq!(idx(select(&values, &[], &[b"url.".to_vec()])), vec![1, 3]);
        assert!(select(&values, &[9], &[]).is_empty());
    }
}
