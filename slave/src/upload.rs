//! Client-direct chunk uploads: `PUT /api/v1/slave/upload/{session_id}/{index}` streams one chunk
//! into the session's staged upload, and `GET /api/v1/slave/upload/{session_id}` lists the chunks
//! received, both authorised by an upload credential (`Authorization: Bearer ...`) for this node
//! and this session. Chunks are idempotent and may arrive in any order; when the last one is in,
//! the blob is completed locally and reported to the master (`upload_complete`, see `report`);
//! the chunk request that completed the upload answers with the master's reply (the created
//! file, or its refusal). When the master does not answer in time the answer is 202 and the
//! report goes on in the background; the status endpoint then carries the outcome once known.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use futures_util::TryStreamExt;
use nubo_common::storage::{BlobStore, ByteStream, StorageError};
use nubo_protocol::credential::{self, UploadGrant};
use nubo_protocol::unix_now;
use serde::Serialize;
use std::time::Duration;

use axum::response::{IntoResponse, Response as HttpResponse};

use crate::error::{ApiError, Rendered};
use crate::report;
use crate::sessions::{ReportOutcome, SessionRecord, valid_session_id};
use crate::state::Shared;

/// What the chunk endpoints answer: the session's progress.
#[derive(Debug, Serialize)]
pub struct UploadStatus {
    pub session_id: String,
    pub total_chunks: u32,
    /// Indexes of the chunks received, ascending.
    pub received: Vec<u32>,
    /// Whether the blob is in place at its key.
    pub completed: bool,
    /// The master's answer once it acknowledged the upload: `status` 200 with the created file
    /// in `body`, or its refusal. Absent while the report is pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<ReportOutcome>,
}

/// Checks the bearer credential and that it is for the session in the path.
fn authorise(node: &Shared, headers: &HeaderMap, session_id: &str) -> Result<UploadGrant, ApiError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "credential.missing",
                "send the upload credential as a bearer token",
            )
        })?;
    let grant = credential::verify::<UploadGrant>(&node.key, token.trim(), &node.node_id, unix_now())?;
    if grant.session_id != session_id {
        tracing::warn!(path_session = %session_id, "upload credential used for another session");
        return Err(ApiError::forbidden("credential.wrong_session", "the credential is for another upload session"));
    }
    Ok(grant)
}

async fn load_session(node: &Shared, session_id: &str) -> Result<SessionRecord, ApiError> {
    if !valid_session_id(session_id) {
        return Err(ApiError::not_found("upload.session_not_found", "no such upload session"));
    }
    node.sessions
        .load(session_id)
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::not_found("upload.session_not_found", "no such upload session"))
}

/// The credential's declared shape must be the session's: a credential minted for other sizes
/// would make the client and the node disagree about chunk boundaries.
fn check_shape(grant: &UploadGrant, record: &SessionRecord) -> Result<(), ApiError> {
    let staged = &record.staged;
    if grant.size != staged.size
        || grant.chunk_size != staged.chunk_size
        || grant.total_chunks != u64::from(staged.total_chunks())
    {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "upload.shape_mismatch",
            "the credential's size or chunking differs from the session's",
        ));
    }
    Ok(())
}

async fn status_of(node: &Shared, record: &SessionRecord) -> Result<UploadStatus, ApiError> {
    let receipts = node.sessions.receipts(&record.session_id).await.map_err(ApiError::internal)?;
    Ok(UploadStatus {
        session_id: record.session_id.clone(),
        total_chunks: record.staged.total_chunks(),
        received: receipts.iter().map(|receipt| receipt.index).collect(),
        completed: record.completed,
        result: record.outcome.clone(),
    })
}

pub async fn status(
    State(node): State<Shared>,
    Path(session_id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<UploadStatus>, ApiError> {
    let grant = authorise(&node, &headers, &session_id)?;
    let record = load_session(&node, &session_id).await?;
    check_shape(&grant, &record)?;
    Ok(Json(status_of(&node, &record).await?))
}

pub async fn put_chunk(
    State(node): State<Shared>,
    Path((session_id, index)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let grant = authorise(&node, &headers, &session_id)?;
    let index: u32 =
        index.parse().map_err(|_| ApiError::bad_request("upload.invalid_index", "the chunk index is not a number"))?;
    let record = load_session(&node, &session_id).await?;
    check_shape(&grant, &record)?;
    if record.completed {
        // A resend after completion changes nothing: answer the final state for received chunks.
        let status = status_of(&node, &record).await?;
        return if status.received.contains(&index) {
            Ok(Json(status).into_response())
        } else {
            Err(ApiError::new(StatusCode::CONFLICT, "upload.completed", "the upload is already complete"))
        };
    }
    record.staged.expect_chunk(index)?;
    let writing = ChunkWriter::claim(&node, &session_id, index)?;
    // The old receipt goes before any new byte is written: a receipt only ever describes bytes
    // written whole by the request that made it.
    node.sessions.forget_receipt(&session_id, index).await.map_err(ApiError::internal)?;
    let stream: ByteStream = Box::pin(body.into_data_stream().map_err(std::io::Error::other));
    let receipt = node.store.put_chunk(&record.staged, index, stream).await?;
    node.sessions.save_receipt(&session_id, &receipt).await.map_err(ApiError::internal)?;
    drop(writing);
    let status = status_of(&node, &record).await?;
    if status.received.len() < record.staged.total_chunks() as usize {
        return Ok(Json(status).into_response());
    }
    complete(&node, &session_id).await?;
    report::spawn(&node, &session_id);
    // Without a master to ask there is nothing to wait for; the sweep reports once one is set.
    let wait =
        if node.master.is_some() { Duration::from_secs(node.config.report_wait_seconds) } else { Duration::ZERO };
    match report::await_outcome(&node, &session_id, wait).await {
        Some(outcome) => {
            let status = StatusCode::from_u16(outcome.status).unwrap_or(StatusCode::BAD_GATEWAY);
            let mut answer = (status, Json(outcome.body)).into_response();
            // A refusal's body is the master's uniform error body: relayed as it is, not rewritten.
            answer.extensions_mut().insert(Rendered);
            Ok(answer)
        }
        None => {
            let status = status_of(&node, &load_session(&node, &session_id).await?).await?;
            Ok((StatusCode::ACCEPTED, Json(status)).into_response())
        }
    }
}

/// A request's hold on one chunk of a session (the node is one process: a set in memory is
/// enough); a second request for the same chunk meanwhile is refused. Released when dropped.
struct ChunkWriter {
    node: Shared,
    chunk: (String, u32),
}

impl ChunkWriter {
    fn claim(node: &Shared, session_id: &str, index: u32) -> Result<Self, ApiError> {
        let chunk = (session_id.to_owned(), index);
        let mut writing = node.writing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !writing.insert(chunk.clone()) {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "upload.chunk_busy",
                format!("chunk {index} is being sent by another request; send it again once it ended"),
            ));
        }
        Ok(Self { node: node.clone(), chunk })
    }
}

impl Drop for ChunkWriter {
    fn drop(&mut self) {
        self.node.writing.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&self.chunk);
    }
}

/// Assembles the blob once every chunk is in; one completion at a time, so two last chunks
/// arriving together complete once. Returns whether the blob is in place.
async fn complete(node: &Shared, session_id: &str) -> Result<bool, ApiError> {
    let _guard = node.completing.lock().await;
    let mut record = load_session(node, session_id).await?;
    if record.completed {
        return Ok(true);
    }
    let receipts = node.sessions.receipts(session_id).await.map_err(ApiError::internal)?;
    match node.store.complete_upload(&record.staged, &receipts).await {
        Ok(()) => {}
        Err(StorageError::AlreadyExists(key)) => {
            tracing::warn!(session = %session_id, %key, "a blob already exists at the session's key");
            return Err(StorageError::AlreadyExists(key).into());
        }
        Err(error) => return Err(error.into()),
    }
    record.completed = true;
    node.sessions.save(&record).await.map_err(ApiError::internal)?;
    tracing::info!(session = %session_id, key = %record.staged.key, "upload completed");
    Ok(true)
}
