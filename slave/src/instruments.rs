//! The node's instruments: `GET /metrics` in the Prometheus text format (behind the
//! `metrics_token`; requests by route template, bytes moved, uploads in progress) and the
//! readiness check `GET /api/v1/slave/health`. What it counts is `state::Instruments`.

use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use nubo_common::metrics::{Access, TEXT_FORMAT, Transfer, check_bearer};
use nubo_common::storage::BlobStore;
use serde::Serialize;

use crate::error::ApiError;
use crate::state::Shared;

/// Longest the storage check may take; a disk slower than this counts as down.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The node's routes whose bodies are file bytes: chunks and whole blobs up, downloads down.
pub fn classify_transfer(method: &Method, route: &str) -> Option<Transfer> {
    match (method, route) {
        (&Method::PUT, "/api/v1/slave/upload/{session_id}/{index}" | "/api/v1/slave/blob/{credential}") => {
            Some(Transfer::Upload)
        }
        (&Method::GET, "/api/v1/slave/download/{credential}") => Some(Transfer::Download),
        _ => None,
    }
}

/// `GET /metrics`: 404 while metrics are off, 401 without the right bearer token.
pub async fn scrape(State(state): State<Shared>, headers: HeaderMap) -> Result<Response, ApiError> {
    let Some(instruments) = state.instruments.as_ref() else {
        return Err(ApiError::not_found("route.not_found", "no such endpoint"));
    };
    match check_bearer(&headers, &instruments.token) {
        Access::Granted => {}
        Access::Missing => {
            return Err(ApiError::new(StatusCode::UNAUTHORIZED, "auth.missing_token", "the metrics token is required"));
        }
        Access::Wrong => {
            return Err(ApiError::new(StatusCode::UNAUTHORIZED, "auth.invalid_token", "wrong metrics token"));
        }
    }
    let text = instruments.registry.render();
    Ok(([(header::CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT))], text).into_response())
}

#[derive(Debug, Serialize)]
pub struct CheckView {
    pub ok: bool,
    pub ms: u64,
}

#[derive(Debug, Serialize)]
pub struct Checks {
    /// A probe blob written, read back and removed in the blob directory.
    pub storage: CheckView,
}

#[derive(Debug, Serialize)]
pub struct HealthResponse {
    pub status: &'static str,
    pub checks: Checks,
}

/// `GET /api/v1/slave/health`: readiness for a load balancer or the operator; public (it names
/// the check, never its cause, which goes to the log). 503 `node.unhealthy` when the blob
/// directory does not take a probe within [`CHECK_TIMEOUT`].
pub async fn health(State(state): State<Shared>) -> Result<Json<HealthResponse>, ApiError> {
    let started = Instant::now();
    let outcome = tokio::time::timeout(CHECK_TIMEOUT, state.store.check()).await;
    let ms = started.elapsed().as_millis() as u64;
    let how = match outcome {
        Ok(Ok(())) => {
            return Ok(Json(HealthResponse { status: "ok", checks: Checks { storage: CheckView { ok: true, ms } } }));
        }
        Ok(Err(error)) => {
            tracing::warn!(%error, "readiness check of the storage failed");
            "failed"
        }
        Err(_) => {
            tracing::warn!(ms, "readiness check of the storage timed out");
            "timed out"
        }
    };
    Err(ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "node.unhealthy",
        format!("not ready: the check of storage ({how}) did not pass"),
    ))
}
