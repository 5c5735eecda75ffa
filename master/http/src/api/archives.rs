//! Archives at `/file/archive`: a single-use token for a ZIP of the caller's files and folders,
//! and the streamed ZIP itself; thin handlers over `service::content::archives` (a share's visitors ask
//! for a token at `/share/{code}/archive`, in `shares`).

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use nubo_model::domain::object::attachment_disposition;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::content_safety;
use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath};
use crate::guard::AuthRequired;
use nubo_service::content::archives::{self, ArchiveTokenView};
use nubo_service::context::Context;

/// The caller's files and folders to put in one archive.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveRequest {
    /// The caller's live objects (a repeated id counts once).
    #[schema(min_items = 1, max_items = 1000)]
    pub ids: Vec<Uuid>,
}

/// Create a single-use token for a ZIP archive of the caller's files and folders (folders with
/// everything below them, structure kept); valid for one hour. Every id must be one of the
/// caller's objects, not in the trash.
#[utoipa::path(post, path = "/file/archive", tag = "files", security(("bearer" = [])), request_body = ArchiveRequest,
    responses(
        (status = 200, description = "Token and URL", body = ArchiveTokenView),
        (status = 404, description = "An id that is not a live object of the caller (`object.not_found`)", body = ErrorBody),
        (status = 422, description = "No ids, or more than 1000", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<ArchiveRequest>,
) -> ApiResult<Json<ArchiveTokenView>> {
    Ok(Json(archives::owner_token(&state, caller.claims.sub, &request.ids).await?))
}

/// Download the archive a token from `POST /file/archive` (or `POST /share/{code}/archive`)
/// names; the token is the grant (no bearer) and works once (`HEAD` does not use it up). Access
/// is checked again first: the owner still active, every object still live; for a share, the
/// share still open (one archive counts as one download). The ZIP is streamed as it is written
/// (chunked, no `Content-Length`): entries are stored uncompressed (most files are compressed
/// already; throughput comes first), with UTF-8 names, ZIP64 fields (valid past 4 GiB) and data
/// descriptors; every folder has its own entry, so empty ones are kept. A file that cannot be
/// read midway aborts the transfer rather than end it with a shorter archive.
#[utoipa::path(get, path = "/file/archive/{token}", tag = "files",
    params(("token" = String, Path, description = "The archive token")),
    responses(
        (status = 200, description = "The ZIP archive, streamed", content_type = "application/zip"),
        (status = 401, description = "The owner's account no longer exists", body = ErrorBody),
        (status = 403, description = "The owner's account is banned or inactive", body = ErrorBody),
        (status = 404, description = "No such token or it expired (`archive.not_found`), or an object or the share is gone", body = ErrorBody),
        (status = 409, description = "Token already used (`archive.token_used`)", body = ErrorBody),
        (status = 410, description = "The share expired or is out of downloads", body = ErrorBody),
    ))]
pub async fn download(
    State(state): State<Context>,
    ApiPath(token): ApiPath<String>,
    method: Method,
) -> ApiResult<Response> {
    let archive = archives::open(&state, &token, method != Method::HEAD).await?;
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/zip"));
    let disposition = attachment_disposition(&archive.file_name);
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_str(&disposition).unwrap_or_else(|_| HeaderValue::from_static("attachment")),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    content_safety::harden_file_response(&mut headers);
    if method == Method::HEAD {
        return Ok((StatusCode::OK, headers).into_response());
    }
    Ok((StatusCode::OK, headers, Body::from_stream(archive.into_stream())).into_response())
}
