//! `GET /object/{id}/thumbnail` and, for a share's visitor, `GET /share/{code}/thumbnail/{object_id}`:
//! image thumbnails (made in the background, cached for good).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::captcha::ShareVisitor;
use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiPath, ApiQuery};
use crate::guard::AuthRequired;
use nubo_model::domain::ids::ObjectId;
use nubo_service::content::thumbnails::{self, ThumbnailAnswer};
use nubo_service::context::Context;
use nubo_service::error::ServiceError;
use nubo_service::sharing::shares;
use nubo_service::tree::access::{self, Reach, Readable};
use uuid::Uuid;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ThumbnailQuery {
    /// Longest side in pixels: 256 (grid tiles) or 1024 (previews).
    #[param(default = 256)]
    #[serde(default = "default_size")]
    pub size: u32,
    /// Ignored by the server: clients put the object's `updated_at` here, so a file whose
    /// content was replaced gets a new URL (thumbnails are cached for a year).
    pub v: Option<String>,
}

fn default_size() -> u32 {
    256
}

/// The answer while a thumbnail is being made.
#[derive(Debug, Serialize, ToSchema)]
pub struct ThumbnailPending {
    /// Always `pending`.
    pub status: &'static str,
    /// Seconds to wait before asking again (also in `Retry-After`).
    pub retry_after: u64,
}

/// The JPEG thumbnail of an image file the caller may read (PNG, JPEG, GIF's first frame,
/// WebP), fitting a square of `size` px (smaller images keep their size; transparency is laid
/// over white). The first request for a content queues a `THUMBNAIL` task and answers 202 with
/// `Retry-After`; ask again then. Files with the same content share one thumbnail, so it is
/// often ready at once. A ready thumbnail answers with a strong `ETag` (304 when
/// `If-None-Match` names it) and `Cache-Control: private, max-age=31536000, immutable`; put the
/// object's `updated_at` in `v` so replaced content is a new URL. A file that cannot have one
/// answers 422 with the reason, every time (it is recorded, not retried): decoding is bounded
/// to 100 megapixels, 512 MiB and 8 s, so a decompression bomb costs nothing more. On a policy
/// bound to a storage node, the node makes it and only the thumbnail crosses to the master.
/// A share's visitor asks `GET /share/{code}/thumbnail/{object_id}`.
#[utoipa::path(get, path = "/object/{id}/thumbnail", tag = "files", security(("bearer" = [])),
    params(("id" = Uuid, Path), ThumbnailQuery),
    responses(
        (status = 200, description = "The thumbnail", content_type = "image/jpeg", body = Vec<u8>,
            headers(("ETag" = String), ("Cache-Control" = String))),
        (status = 202, description = "Being made: ask again after `Retry-After` seconds", body = ThumbnailPending,
            headers(("Retry-After" = u64))),
        (status = 304, description = "The copy named by `If-None-Match` is current"),
        (status = 400, description = "Malformed id or size", body = ErrorBody),
        (status = 404, description = "No such object", body = ErrorBody),
        (status = 422, description = "No thumbnail: `thumbnail.size_unsupported`, `thumbnail.not_image`, \
            `thumbnail.too_many_pixels`, `thumbnail.too_large`, `thumbnail.timeout`, `thumbnail.failed`",
            body = ErrorBody),
    ))]
pub async fn thumbnail(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<ObjectId>,
    ApiQuery(query): ApiQuery<ThumbnailQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let side = thumbnails::parse_side(query.size)?;
    let file = access::readable(&state, caller.claims.sub, id, Reach::Any).await?;
    answer(&state, &file, side, &headers).await
}

/// The thumbnail of an image in a share, for its visitor, as `GET /object/{id}/thumbnail`
/// answers the owner (202 while it is made, 304, 422 when it cannot have one), when the share
/// allows previews (`allow_preview`; otherwise 403 `share.preview_not_allowed`). A
/// password-protected share needs its grant in `X-Share-Grant`. Thumbnails do not count as
/// downloads.
#[utoipa::path(get, path = "/share/{code}/thumbnail/{object_id}", tag = "shares",
    params(("code" = String, Path), ("object_id" = Uuid, Path), ThumbnailQuery,
        ("X-Share-Grant" = Option<String>, Header, description = "The share grant, for a password-protected share")),
    responses(
        (status = 200, description = "The thumbnail", content_type = "image/jpeg", body = Vec<u8>,
            headers(("ETag" = String), ("Cache-Control" = String))),
        (status = 202, description = "Being made: ask again after `Retry-After` seconds", body = ThumbnailPending,
            headers(("Retry-After" = u64))),
        (status = 304, description = "The copy named by `If-None-Match` is current"),
        (status = 400, description = "Malformed id or size", body = ErrorBody),
        (status = 401, description = "Password-protected and no valid grant (`share.password_required`)", body = ErrorBody),
        (status = 403, description = "The share does not allow previews (`share.preview_not_allowed`)", body = ErrorBody),
        (status = 404, description = "No such share, or the object is not in it", body = ErrorBody),
        (status = 410, description = "The share has expired", body = ErrorBody),
        (status = 422, description = "No thumbnail (as for the owner)", body = ErrorBody),
    ))]
pub async fn share_thumbnail(
    State(state): State<Context>,
    ApiPath((code, object_id)): ApiPath<(String, Uuid)>,
    ApiQuery(query): ApiQuery<ThumbnailQuery>,
    visitor: ShareVisitor,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let side = thumbnails::parse_side(query.size)?;
    let file = shares::preview_in(&state, &code, &visitor.visitor(), object_id.into()).await?;
    answer(&state, &file, side, &headers).await
}

/// The answer for `file`'s thumbnail: the JPEG, 304, or 202 while it is made.
async fn answer(state: &Context, file: &Readable, side: u32, headers: &HeaderMap) -> ApiResult<Response> {
    let if_none_match = headers.get(header::IF_NONE_MATCH).and_then(|value| value.to_str().ok());
    let cache = (header::CACHE_CONTROL, HeaderValue::from_static(thumbnails::CACHE_CONTROL));
    Ok(match thumbnails::serve(state, file, side, if_none_match).await? {
        ThumbnailAnswer::Image { jpeg, etag } => {
            let etag = HeaderValue::try_from(etag).map_err(ServiceError::internal)?;
            let jpeg_type = (header::CONTENT_TYPE, HeaderValue::from_static(nubo_common::thumbnail::CONTENT_TYPE));
            ([jpeg_type, cache, (header::ETAG, etag)], jpeg).into_response()
        }
        ThumbnailAnswer::NotModified { etag } => {
            let etag = HeaderValue::try_from(etag).map_err(ServiceError::internal)?;
            (StatusCode::NOT_MODIFIED, [cache, (header::ETAG, etag)]).into_response()
        }
        ThumbnailAnswer::Pending { retry_after } => {
            let retry = (header::RETRY_AFTER, HeaderValue::from(retry_after));
            let no_store = (header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            (StatusCode::ACCEPTED, [retry, no_store], Json(ThumbnailPending { status: "pending", retry_after }))
                .into_response()
        }
    })
}
