//! The master's side of the node protocol: what each method a storage node calls does here.
//! Signatures are checked before (see `http::node_rpc`); this module sees authenticated calls
//! of one known node and answers typed results or protocol errors.

use nubo_common::secret::Secret;
use nubo_model::db;
use nubo_model::domain::ids::NodeId;
use nubo_protocol::PROTOCOL_VERSION;
use nubo_protocol::methods::{
    Ack, Call, ExternalDownloadCompleteResult, ExternalDownloadProgressResult, PingParams, PingResult,
    UploadCompleteResult,
};
use nubo_protocol::rpc::{ErrorCode, RpcError, check_protocol_version, encode_outcome};
use serde_json::Value;

use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::{content::external, content::uploads};

/// Why a node's call got no result: a protocol error as it is, or a service refusal that the
/// HTTP front end turns into a protocol error carrying the client-facing body and status (the
/// service layer knows nothing about HTTP statuses).
#[derive(Debug)]
pub enum Refusal {
    Protocol(RpcError),
    Service(ServiceError),
}

impl From<RpcError> for Refusal {
    fn from(error: RpcError) -> Self {
        Refusal::Protocol(error)
    }
}

impl From<ServiceError> for Refusal {
    fn from(error: ServiceError) -> Self {
        Refusal::Service(error)
    }
}

/// A known, enabled node that signed a call: who it is and the key its signature is checked with.
pub struct Caller {
    pub id: NodeId,
    pub name: String,
    pub key: Secret,
}

/// The enabled node named `node_id` in a call's signature; `None` when it is unknown or disabled.
pub async fn caller(ctx: &Context, node_id: &str) -> ServiceResult<Option<Caller>> {
    let Ok(node_id) = node_id.parse::<NodeId>() else { return Ok(None) };
    let Some(node) = db::nodes::find(ctx.db(), node_id).await? else { return Ok(None) };
    Ok(node.enabled.then(|| Caller { id: node.id, name: node.name, key: Secret::new(node.secret_key) }))
}

/// Runs `call` from `node`.
pub async fn dispatch(ctx: &Context, node: &Caller, call: Call) -> Result<Value, Refusal> {
    match call {
        Call::Ping(params) => Ok(encode_outcome(ping(params))?),
        Call::UploadComplete(report) => {
            let (keep_blob, done) = uploads::complete_reported(ctx, node.id, &report).await?;
            let client_body = serde_json::to_value(done).map_err(|_| RpcError::internal())?;
            Ok(encode_outcome(Ok(UploadCompleteResult { keep_blob, client_body }))?)
        }
        Call::ExternalDownloadProgress(report) => {
            let cancel = external::progress(ctx, node.id, &report).await?;
            Ok(encode_outcome(Ok(ExternalDownloadProgressResult { cancel }))?)
        }
        Call::ExternalDownloadComplete(report) => {
            let keep_blob = external::complete(ctx, node.id, &report).await?;
            Ok(encode_outcome(Ok(ExternalDownloadCompleteResult { keep_blob }))?)
        }
        Call::ExternalDownloadFailed(report) => {
            external::failed(ctx, node.id, &report).await?;
            Ok(encode_outcome(Ok(Ack {}))?)
        }
        // `parse_for(Role::Master)` refuses node-side methods before they get here.
        other => Err(RpcError::unknown_method(other.method().as_str()).into()),
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

/// The protocol code for a service refusal: the coarse class a node acts on (drop the bytes,
/// retry later). The client-facing status travels next to it (see `http::node_rpc`).
pub fn protocol_code(kind: ErrorKind) -> ErrorCode {
    match kind {
        ErrorKind::NotFound => ErrorCode::NotFound,
        ErrorKind::Conflict | ErrorKind::QuotaExceeded | ErrorKind::Forbidden | ErrorKind::PayloadTooLarge => {
            ErrorCode::Conflict
        }
        ErrorKind::Validation | ErrorKind::BadRequest => ErrorCode::InvalidParams,
        ErrorKind::Unavailable => ErrorCode::Unavailable,
        _ => ErrorCode::Internal,
    }
}
