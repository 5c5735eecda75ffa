//! `PUT /api/v1/slave/blob/{credential}`: the master writes one whole blob in one stream (a
//! policy migration moving a file onto this node), authorised by a write credential naming the
//! key and the most bytes allowed. Answers the size and blake3 of what was stored; a body that
//! fails or passes the limit leaves nothing at the key.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use futures_util::TryStreamExt;
use nubo_common::storage::{BlobStore, ByteStream, StorageKey};
use nubo_protocol::credential::{self, WriteGrant};
use nubo_protocol::unix_now;
use serde::Serialize;

use crate::error::ApiError;
use crate::state::Shared;

/// What was stored.
#[derive(Debug, Serialize)]
pub struct Written {
    pub size: u64,
    pub blake3: String,
}

pub async fn write(
    State(node): State<Shared>,
    Path(token): Path<String>,
    body: Body,
) -> Result<(StatusCode, Json<Written>), ApiError> {
    let grant = credential::verify::<WriteGrant>(&node.key, &token, &node.node_id, unix_now())?;
    let key = StorageKey::parse(&grant.storage_key)?;
    let stream: ByteStream = Box::pin(body.into_data_stream().map_err(std::io::Error::other));
    let outcome = node.store.put_stream(&key, stream, grant.max_size).await?;
    tracing::info!(%key, size = outcome.size, "blob written by the master");
    Ok((StatusCode::CREATED, Json(Written { size: outcome.size, blake3: outcome.blake3 })))
}
