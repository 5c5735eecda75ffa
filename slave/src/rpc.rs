//! `POST /api/v1/slave/rpc`: the master's control-plane calls. Each request's signature is
//! checked (skew, MAC, nonce) before its body is parsed; the answer is always a JSON `Response`
//! with the HTTP status of its error code. Node-to-master methods answer `unknown_method`.

use std::time::UNIX_EPOCH;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response as HttpResponse};
use nubo_common::storage::{BlobStore, StorageError, StorageKey};
use nubo_protocol::methods::{
    Ack, BlobDeleteParams, BlobDeleteResult, BlobStatParams, BlobStatResult, Call, Capability, Method, PingParams,
    PingResult, ThumbnailRenderParams, ThumbnailRenderResult, UploadSessionAbortParams, UploadSessionCreateParams,
};
use nubo_protocol::rpc::{Request, Response, RpcError, check_protocol_version, encode_outcome};
use nubo_protocol::signing::{RequestParts, SignatureHeaders, VerifyError};
use nubo_protocol::{PROTOCOL_VERSION, Role, unix_now};
use serde_json::Value;

use crate::error::Rendered;
use crate::sessions::{SessionRecord, valid_session_id};
use crate::state::Shared;

pub async fn handle(State(node): State<Shared>, uri: Uri, headers: HeaderMap, body: Bytes) -> HttpResponse {
    if let Err(error) = authenticate(&node, &uri, &headers, &body).await {
        tracing::warn!(code = %error.code, reason = %error.message, "refused a control-plane request");
        return answer(Response { id: None, outcome: Err(error) });
    }
    let request = match Request::parse_for(Role::Node, &body) {
        Ok(request) => request,
        Err(rejected) => return answer(rejected.into_response()),
    };
    let method = request.method();
    let outcome = dispatch(&node, request.call).await;
    if let Err(error) = &outcome {
        tracing::debug!(%method, code = %error.code, "call refused");
    }
    answer(Response { id: Some(request.id), outcome })
}

async fn authenticate(node: &Shared, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Result<(), RpcError> {
    let signature = SignatureHeaders::parse(|name| headers.get(name).map(|value| value.as_bytes()))?;
    if signature.node != node.node_id {
        return Err(VerifyError::UnknownNode.into());
    }
    let path = uri.path_and_query().map_or(uri.path(), |path| path.as_str());
    let parts = RequestParts { method: "POST", path, body };
    node.verifier.verify(&node.key, &signature, &parts, unix_now(), &node.nonces).await?;
    Ok(())
}

fn answer(response: Response) -> HttpResponse {
    let status = StatusCode::from_u16(response.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut answer = (status, Json(response)).into_response();
    // The envelope is this endpoint's error body: the uniform-errors layer leaves it alone.
    answer.extensions_mut().insert(Rendered);
    answer
}

async fn dispatch(node: &Shared, call: Call) -> Result<Value, RpcError> {
    match call {
        Call::Ping(params) => encode_outcome(ping(node, params).await),
        Call::BlobStat(params) => encode_outcome(blob_stat(node, params).await),
        Call::BlobDelete(params) => encode_outcome(blob_delete(node, params).await),
        Call::UploadSessionCreate(params) => encode_outcome(upload_session_create(node, params).await),
        Call::UploadSessionAbort(params) => encode_outcome(upload_session_abort(node, params).await),
        Call::ExternalDownloadCreate(params) => encode_outcome(crate::fetch::create(node, params).await),
        Call::ExternalDownloadCancel(params) => encode_outcome(crate::fetch::cancel(node, params).await),
        Call::ThumbnailRender(params) => encode_outcome(thumbnail_render(node, params).await),
        // `parse_for(Role::Node)` refuses master-side methods before they get here.
        other => Err(RpcError::unknown_method(other.method().as_str())),
    }
}

async fn ping(node: &Shared, params: PingParams) -> Result<PingResult, RpcError> {
    check_protocol_version(params.protocol_version)?;
    let space = disk_space(node.config.blobs_dir()).await;
    Ok(PingResult {
        protocol_version: PROTOCOL_VERSION,
        software: format!("nubo-slave {}", env!("CARGO_PKG_VERSION")),
        capabilities: vec![
            Capability::Upload,
            Capability::Download,
            Capability::ExternalDownload,
            Capability::Thumbnail,
        ],
        free_space: space.as_ref().map(fs4::FsStats::available_space),
        total_space: space.as_ref().map(fs4::FsStats::total_space),
    })
}

/// The figures of the file system holding the blobs: the directory itself, or its nearest
/// existing ancestor before the first upload creates it. `None` (logged) when none can be read,
/// so a ping still answers.
async fn disk_space(blobs_dir: std::path::PathBuf) -> Option<fs4::FsStats> {
    let stats = tokio::task::spawn_blocking(move || {
        let existing = blobs_dir.ancestors().find(|dir| !dir.as_os_str().is_empty() && dir.exists());
        // A relative path none of whose parts exists yet lives in the working directory.
        fs4::statvfs(existing.unwrap_or(std::path::Path::new(".")))
    })
    .await;
    match stats {
        Ok(Ok(stats)) => Some(stats),
        Ok(Err(error)) => {
            tracing::warn!(%error, "cannot read the disk's free space");
            None
        }
        Err(error) => {
            tracing::warn!(%error, "the disk-space probe did not finish");
            None
        }
    }
}

fn storage_key(method: Method, raw: &str) -> Result<StorageKey, RpcError> {
    StorageKey::parse(raw).map_err(|error| RpcError::invalid_params(method, error))
}

/// Maps a storage failure to the protocol's codes; the cause is logged here.
fn storage_failure(error: StorageError) -> RpcError {
    match error {
        StorageError::NotFound(key) => RpcError::not_found(format!("no blob at {key}")),
        StorageError::AlreadyExists(key) => RpcError::conflict(format!("a blob already exists at {key}")),
        error if error.is_transient() => {
            tracing::warn!(%error, "storage unavailable");
            RpcError::unavailable("storage is unavailable")
        }
        error => {
            tracing::error!(%error, "storage failed");
            RpcError::internal()
        }
    }
}

fn io_failure(error: std::io::Error) -> RpcError {
    tracing::error!(%error, "session files failed");
    RpcError::internal()
}

async fn blob_stat(node: &Shared, params: BlobStatParams) -> Result<BlobStatResult, RpcError> {
    let key = storage_key(Method::BlobStat, &params.storage_key)?;
    let size = node.store.size(&key).await.map_err(storage_failure)?;
    let size = size.ok_or_else(|| RpcError::not_found(format!("no blob at {key}")))?;
    let modified_at = tokio::fs::metadata(node.store.root().join(key.as_str()))
        .await
        .ok()
        .and_then(|meta| meta.modified().ok())
        .and_then(|time| time.duration_since(UNIX_EPOCH).ok())
        .map(|elapsed| elapsed.as_secs());
    Ok(BlobStatResult { size, modified_at })
}

async fn blob_delete(node: &Shared, params: BlobDeleteParams) -> Result<BlobDeleteResult, RpcError> {
    let key = storage_key(Method::BlobDelete, &params.storage_key)?;
    let existed = node.store.size(&key).await.map_err(storage_failure)?.is_some();
    node.store.delete(&key).await.map_err(storage_failure)?;
    Ok(BlobDeleteResult { existed })
}

fn session_id(method: Method, id: &str) -> Result<(), RpcError> {
    if valid_session_id(id) {
        Ok(())
    } else {
        Err(RpcError::invalid_params(method, "session_id must be 1 to 128 of A-Z a-z 0-9 _ -"))
    }
}

/// Begins the staged upload and remembers it. Idempotent: the same params again acknowledge,
/// different ones for an existing session are a conflict.
async fn upload_session_create(node: &Shared, params: UploadSessionCreateParams) -> Result<Ack, RpcError> {
    const METHOD: Method = Method::UploadSessionCreate;
    session_id(METHOD, &params.session_id)?;
    let key = storage_key(METHOD, &params.storage_key)?;
    if let Some(existing) = node.sessions.load(&params.session_id).await.map_err(io_failure)? {
        let same = existing.staged.key == params.storage_key
            && existing.staged.size == params.size
            && existing.staged.chunk_size == params.chunk_size;
        return if same { Ok(Ack {}) } else { Err(RpcError::conflict("the session exists with other parameters")) };
    }
    let staged = node.store.begin_upload(&key, params.size, params.chunk_size).await.map_err(|error| match error {
        StorageError::Failed(detail) => RpcError::invalid_params(METHOD, detail),
        error @ StorageError::SizeUnsupported { .. } => RpcError::invalid_params(METHOD, error.to_string()),
        other => storage_failure(other),
    })?;
    if u64::from(staged.total_chunks()) != params.total_chunks {
        // Nothing references the staging area yet: drop it before refusing.
        if let Err(error) = node.store.abort_upload(&staged).await {
            tracing::warn!(key = %staged.key, %error, "cannot drop the staging area of a refused session");
        }
        let detail =
            format!("{} bytes in chunks of {} make {} chunks", params.size, params.chunk_size, staged.total_chunks());
        return Err(RpcError::invalid_params(METHOD, detail));
    }
    let mut record = SessionRecord {
        session_id: params.session_id,
        staged,
        expires_at: params.expires_at,
        completed: false,
        outcome: None,
    };
    node.sessions.save(&record).await.map_err(io_failure)?;
    if record.staged.total_chunks() == 0 {
        // An empty blob has no chunk whose arrival would complete it: it is complete now.
        node.store.complete_upload(&record.staged, &[]).await.map_err(storage_failure)?;
        record.completed = true;
        node.sessions.save(&record).await.map_err(io_failure)?;
    }
    tracing::info!(session = %record.session_id, key = %record.staged.key, "upload session created");
    Ok(Ack {})
}

/// Drops the staged bytes and the session's files. Idempotent; a completed blob stays.
async fn upload_session_abort(node: &Shared, params: UploadSessionAbortParams) -> Result<Ack, RpcError> {
    session_id(Method::UploadSessionAbort, &params.session_id)?;
    if let Some(record) = node.sessions.load(&params.session_id).await.map_err(io_failure)? {
        if !record.completed {
            node.store.abort_upload(&record.staged).await.map_err(storage_failure)?;
        }
        node.sessions.remove(&params.session_id).await.map_err(io_failure)?;
    }
    Ok(Ack {})
}

/// Makes the thumbnail of a blob here, so only the thumbnail travels to the master. A file
/// that gets none answers its refusal as a result (it is final), not as an error.
async fn thumbnail_render(node: &Shared, params: ThumbnailRenderParams) -> Result<ThumbnailRenderResult, RpcError> {
    use base64::Engine as _;
    use nubo_common::thumbnail::{self, Refusal, RenderError};
    const METHOD: Method = Method::ThumbnailRender;
    let key = storage_key(METHOD, &params.storage_key)?;
    if !thumbnail::is_supported_side(params.side) {
        return Err(RpcError::invalid_params(METHOD, format!("side must be one of {:?}", thumbnail::SIDES)));
    }
    let refused = |refusal| ThumbnailRenderResult { jpeg_base64: None, refusal: Some(refusal) };
    let size = node.store.size(&key).await.map_err(storage_failure)?;
    let size = size.ok_or_else(|| RpcError::not_found(format!("no blob at {key}")))?;
    if size > thumbnail::MAX_SOURCE_BYTES {
        return Ok(refused(Refusal::TooLarge));
    }
    let source = tokio::fs::read(node.store.root().join(key.as_str())).await.map_err(io_failure)?;
    match thumbnail::render_bounded(source, params.side).await {
        Ok(jpeg) => {
            tracing::debug!(%key, side = params.side, bytes = jpeg.len(), "thumbnail made");
            let jpeg_base64 = base64::engine::general_purpose::STANDARD.encode(jpeg);
            Ok(ThumbnailRenderResult { jpeg_base64: Some(jpeg_base64), refusal: None })
        }
        Err(RenderError::Refused(refusal)) => Ok(refused(refusal)),
        Err(RenderError::Crashed(detail)) => {
            tracing::error!(%key, %detail, "the thumbnail decoder crashed");
            Ok(refused(Refusal::Other))
        }
    }
}
