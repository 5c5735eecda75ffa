//! The master's side of the node protocol: what each method a storage node calls does here.
//! Signatures are checked before (see `http::node_rpc`); this module sees authenticated calls
//! of one known node and answers typed results or protocol errors.

use nubo_protocol::PROTOCOL_VERSION;
use nubo_protocol::methods::{
    Ack, Call, ExternalDownloadCompleteResult, ExternalDownloadProgressResult, PingParams, PingResult,
    UploadCompleteResult,
};
use nubo_protocol::rpc::{ErrorCode, RpcError, check_protocol_version, encode_outcome};
use serde_json::{Value, json};

use crate::app::AppState;
use crate::db::nodes::NodeRow;
use crate::service::{ErrorKind, ServiceError, external, uploads};

/// Runs `call` from `node`.
pub async fn dispatch(ctx: &AppState, node: &NodeRow, call: Call) -> Result<Value, RpcError> {
    match call {
        Call::Ping(params) => encode_outcome(ping(params)),
        Call::UploadComplete(report) => {
            let (keep_blob, done) = uploads::complete_reported(ctx, &node.id, &report).await.map_err(refusal)?;
            let client_body = serde_json::to_value(done).map_err(|_| RpcError::internal())?;
            encode_outcome(Ok(UploadCompleteResult { keep_blob, client_body }))
        }
        Call::ExternalDownloadProgress(report) => {
            let cancel = external::progress(ctx, &node.id, &report).await.map_err(refusal)?;
            encode_outcome(Ok(ExternalDownloadProgressResult { cancel }))
        }
        Call::ExternalDownloadComplete(report) => {
            let keep_blob = external::complete(ctx, &node.id, &report).await.map_err(refusal)?;
            encode_outcome(Ok(ExternalDownloadCompleteResult { keep_blob }))
        }
        Call::ExternalDownloadFailed(report) => {
            external::failed(ctx, &node.id, &report).await.map_err(refusal)?;
            encode_outcome(Ok(Ack {}))
        }
        // `parse_for(Role::Master)` refuses node-side methods before they get here.
        other => Err(RpcError::unknown_method(other.method().as_str())),
    }
}

fn ping(params: PingParams) -> Result<PingResult, RpcError> {
    check_protocol_version(params.protocol_version)?;
    Ok(PingResult {
        protocol_version: PROTOCOL_VERSION,
        software: format!("nubo-master {}", env!("CARGO_PKG_VERSION")),
        capabilities: Vec::new(),
        free_space: None,
        total_space: None,
    })
}

/// A service refusal as a protocol error; `data` carries the uniform error body for the client
/// the node relays it to. Internal faults are logged here and say nothing more.
fn refusal(error: ServiceError) -> RpcError {
    let code = match error.kind {
        ErrorKind::NotFound => ErrorCode::NotFound,
        ErrorKind::Conflict | ErrorKind::QuotaExceeded | ErrorKind::Forbidden | ErrorKind::PayloadTooLarge => {
            ErrorCode::Conflict
        }
        ErrorKind::Validation | ErrorKind::BadRequest => ErrorCode::InvalidParams,
        ErrorKind::Unavailable => ErrorCode::Unavailable,
        _ => ErrorCode::Internal,
    };
    if code == ErrorCode::Internal {
        // ERROR only for our own faults; a dependency that failed under us is a warning.
        if error.kind == ErrorKind::Internal {
            tracing::error!(error = %error.message, source = ?error.source, "a node's call failed");
        } else {
            tracing::warn!(code = %error.code, error = %error.message, "a node's call could not be served");
        }
        return RpcError::internal();
    }
    tracing::debug!(code = %error.code, "a node's call was refused");
    let body = json!({"code": error.code, "message": error.message});
    RpcError::new(code, error.message.to_string()).with_data(body)
}
