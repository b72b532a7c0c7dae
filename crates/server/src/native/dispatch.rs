//! Native requests onto the operations layer, the one place where request
//! bodies meet operations: bodies become typed operations (or the replication
//! source's), outcomes become response messages (several for long lists).

use super::respond::{encode_reply, Reply, RequestContext};
use super::{Answer, Origin, Transport};
use crate::auth::Caller;
use crate::handler::FollowOn;
use crate::native::NativeContext;
use crate::ops::{self, OpError};
use crate::replication::{source, ReplicationContext};
use handled_proto::envelope::Version;
use handled_proto::header::{OpFlags, ResponseCode};
use handled_proto::request::RequestBody;
use handled_proto::response::ResponseBody;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::net::TcpStream;

/// Handles per message of a list answer, as the Java server sends them (§3.5).
pub const LIST_CHUNK: usize = 50;

/// Run an administration, resolution or replication request for `caller`. Ok
/// holds the response units (and after a replication pull, the stream the
/// connection carries next); an `OpError` is for the caller to encode (or to
/// turn into a challenge when it asks for authentication). `flags` are the
/// request's own (after a challenge, the original's: answers don't carry OW or MINT).
pub async fn run(
    state: &NativeContext,
    ctx: &RequestContext<'_>,
    request: &RequestBody,
    flags: OpFlags,
    caller: &Caller,
    reply: Reply<'_>,
    origin: Origin,
) -> Result<Answer, OpError> {
    let one = |body: ResponseBody, reply: Reply<'_>| {
        vec![encode_reply(state, ctx, ResponseCode::SUCCESS, &body, false, reply)]
    };
    let replicate = |op| async move {
        let Origin { transport, peer, .. } = origin;
        let over_tcp = transport == Transport::Tcp;
        let answered =
            Box::pin(source::answer(&state.replication, op, caller, over_tcp, peer, ctx.response_version())).await?;
        let stream = answered
            .stream
            .map(|stream| Box::new(Replicating { stream, context: state.replication.clone() }) as Box<dyn FollowOn>);
        Ok::<_, OpError>(Answer { units: one(answered.body, reply), stream })
    };
    // Every operation but resolution is boxed: a future holds the state of
    // every path it may take, and create's alone is 6 KiB, which each
    // resolution's future would carry (and the UDP thread move) otherwise.
    Ok(Answer::units(match request {
        RequestBody::Resolution(r) => {
            let req = ops::Resolve {
                handle: r.handle.clone(),
                indexes: r.indexes.clone(),
                types: r.types.clone(),
                public_only: flags.contains(OpFlags::PO),
                do_not_refer: flags.contains(OpFlags::DNR),
                recurse: flags
                    .contains(OpFlags::REC)
                    .then_some(ops::Recurse { client: origin.peer.ip(), native: true }),
            };
            let values = match ops::resolve_with(&state.chain, caller, &req, origin.cache_only).await {
                Err(e) if e.code == ResponseCode::PREFIX_REFERRAL => {
                    let body = ResponseBody::Referral { handle: Vec::new(), values: e.referral };
                    return Ok(Answer::units(vec![encode_reply(state, ctx, e.code, &body, false, reply)]));
                }
                other => other?,
            };
            // ≥ 2.8: non-public values travel encrypted inside a session (§1.7).
            let secret = values.iter().any(|v| !v.permissions.public_read()) && ctx.response_version() >= Version::V2_8;
            let reply = Reply { encrypt: reply.encrypt || (secret && reply.session.is_some()), ..reply };
            one(ResponseBody::Resolution { handle: r.handle.clone(), values }, reply)
        }
        RequestBody::CreateHandle { handle, values } => {
            let req = ops::CreateHandle {
                handle: handle.clone(),
                values: values.clone(),
                overwrite: flags.contains(OpFlags::OW),
                mint: flags.contains(OpFlags::MINT),
            };
            let created = Box::pin(ops::create_handle(state, caller, req)).await?;
            let reply = Reply { extra_flags: if created.overwritten { OpFlags::OW } else { OpFlags::NONE }, ..reply };
            one(ResponseBody::Created { handle: Some(created.handle) }, reply)
        }
        RequestBody::DeleteHandle { handle } => {
            Box::pin(ops::delete_handle(state, caller, handle)).await?;
            one(ResponseBody::Empty, reply)
        }
        RequestBody::AddValue { handle, values } => {
            let replaced =
                Box::pin(ops::add_values(state, caller, handle, values, flags.contains(OpFlags::OW))).await?;
            let reply = Reply { extra_flags: if replaced { OpFlags::OW } else { OpFlags::NONE }, ..reply };
            one(ResponseBody::Empty, reply)
        }
        RequestBody::RemoveValue { handle, indexes } => {
            Box::pin(ops::remove_values(state, caller, handle, indexes)).await?;
            one(ResponseBody::Empty, reply)
        }
        RequestBody::ModifyValue { handle, values } => {
            Box::pin(ops::modify_values(state, caller, handle, values)).await?;
            one(ResponseBody::Empty, reply)
        }
        RequestBody::ListHandles { prefix } => {
            list(state, ctx, Box::pin(ops::list_handles(state, caller, prefix)).await?, reply)
        }
        RequestBody::HomeNa { prefix } => {
            Box::pin(ops::home_prefix(state, caller, prefix, true)).await?;
            one(ResponseBody::Empty, reply)
        }
        RequestBody::UnhomeNa { prefix } => {
            Box::pin(ops::home_prefix(state, caller, prefix, false)).await?;
            one(ResponseBody::Empty, reply)
        }
        RequestBody::ListHomedNas { .. } => {
            list(state, ctx, Box::pin(ops::list_homed_prefixes(state, caller)).await?, reply)
        }
        RequestBody::GetNextTxnId { .. } => return replicate(source::SourceOp::NextTxnId).await,
        RequestBody::RetrieveTxnLog(r) => return replicate(source::SourceOp::RetrieveTxnLog(r)).await,
        RequestBody::DumpHandles(r) => return replicate(source::SourceOp::DumpHandles(r)).await,
        RequestBody::BackupServer { .. } => return replicate(source::SourceOp::Backup).await,
        other => {
            let op = other.op_code();
            return Err(OpError::new(
                ResponseCode::OPERATION_NOT_SUPPORTED,
                format!("Operation {} is not supported here", op.0),
            ));
        }
    }))
}

/// The replication source's stream after its answer, which the connection
/// carries next: the transport only drives it.
struct Replicating {
    stream: source::Stream,
    context: Arc<ReplicationContext>,
}

impl FollowOn for Replicating {
    fn run(self: Box<Self>, connection: TcpStream) -> Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>> {
        let Replicating { stream, context } = *self;
        Box::pin(async move { stream.run(&context, connection).await })
    }
}

/// A list answer: 50 entries per message, CN on all but the last; an empty
/// list is one message with no entries.
fn list(state: &NativeContext, ctx: &RequestContext<'_>, items: Vec<Vec<u8>>, reply: Reply<'_>) -> Vec<Vec<u8>> {
    if items.is_empty() {
        return vec![encode_reply(
            state,
            ctx,
            ResponseCode::SUCCESS,
            &ResponseBody::HandleList(Vec::new()),
            false,
            reply,
        )];
    }
    let chunks: Vec<&[Vec<u8>]> = items.chunks(LIST_CHUNK).collect();
    let last = chunks.len() - 1;
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            encode_reply(state, ctx, ResponseCode::SUCCESS, &ResponseBody::HandleList(c.to_vec()), i < last, reply)
        })
        .collect()
}
