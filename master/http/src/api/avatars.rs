//! `/user/settings/avatar` (upload, use the public avatar service, reset) and the public
//! `/user/avatar/{id}/{size}` that serves avatars.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath, content_length};
use crate::guard::AuthRequired;
use nubo_service::context::Context;
use nubo_service::error::{ErrorKind, ServiceError};
use nubo_service::error_codes as codes;
use nubo_service::identity::avatars::{self, AvatarAnswer};

/// Upload an avatar: the body is the image file itself (PNG, JPEG, WebP or GIF, at most
/// 2 MiB, at most 8192 px a side). It is re-encoded as the centre square, at most 256 px, in
/// PNG, so nothing but the pixels of the upload is kept (no EXIF, no location). (The API
/// conventions list `PUT` and `POST` the other way round; issue 35 has `PUT` upload the bytes.)
#[utoipa::path(put, path = "/user/settings/avatar", tag = "user", security(("bearer" = [])),
    request_body(content = Vec<u8>, content_type = "image/*", description = "The image file"),
    responses(
        (status = 204, description = "Avatar stored"),
        (status = 403, description = "Account not active", body = ErrorBody),
        (status = 413, description = "Over 2 MiB (`user.avatar_too_large`)", body = ErrorBody),
        (status = 415, description = "Not a PNG, JPEG, WebP or GIF image (`user.avatar_not_image`)", body = ErrorBody),
        (status = 422, description = "Too many pixels to decode (`user.avatar_too_many_pixels`)", body = ErrorBody),
    ))]
pub async fn upload_avatar(
    State(state): State<Context>,
    caller: AuthRequired,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<StatusCode> {
    let bytes = avatars::read_limited(content_length(&headers), body.into_data_stream()).await?;
    avatars::upload(&state, caller.claims.sub, bytes).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Where an avatar comes from other than an upload.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AvatarSource {
    /// The public avatar service (the `avatar_gravatar_url` setting), by e-mail address.
    Gravatar,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AvatarSourceRequest {
    pub source: AvatarSource,
}

/// Use the public avatar service (Gravatar by default) for the caller's avatar; an uploaded
/// avatar is dropped.
#[utoipa::path(post, path = "/user/settings/avatar", tag = "user", security(("bearer" = [])),
    request_body = AvatarSourceRequest,
    responses(
        (status = 204, description = "The avatar service is in use"),
        (status = 403, description = "Account not active", body = ErrorBody),
        (status = 422, description = "Unknown source", body = ErrorBody),
    ))]
pub async fn use_avatar_service(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<AvatarSourceRequest>,
) -> ApiResult<StatusCode> {
    let AvatarSource::Gravatar = request.source;
    avatars::set_source(&state, caller.claims.sub, Some(avatars::SOURCE_GRAVATAR)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Reset the caller's avatar: none (clients show initials).
#[utoipa::path(delete, path = "/user/settings/avatar", tag = "user", security(("bearer" = [])),
    responses(
        (status = 204, description = "No avatar"),
        (status = 403, description = "Account not active", body = ErrorBody),
    ))]
pub async fn reset_avatar(State(state): State<Context>, caller: AuthRequired) -> ApiResult<StatusCode> {
    avatars::set_source(&state, caller.claims.sub, None).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A user's avatar, public. `size` is `s` (64 px), `m` (128), `l` (256) or a number of pixels
/// from 16 to 256. An uploaded avatar answers a square PNG with an `ETag` (304 when
/// `If-None-Match` names it); one from the public avatar service answers 302 to it; none 404
/// (show initials). `UserView.avatar_url` gives the URL with a version query that changes with
/// the avatar.
#[utoipa::path(get, path = "/user/avatar/{id}/{size}", tag = "user",
    params(("id" = Uuid, Path), ("size" = String, Path, description = "`s`, `m`, `l`, or 16 to 256",
        pattern = "^(s|m|l|1[6-9]|[2-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-6])$")),
    responses(
        (status = 200, description = "The avatar", content_type = "image/png", body = Vec<u8>,
            headers(("ETag" = String), ("Cache-Control" = String))),
        (status = 302, description = "The public avatar service has it", headers(("Location" = String))),
        (status = 304, description = "The copy named by `If-None-Match` is current"),
        (status = 400, description = "Malformed id or size", body = ErrorBody),
        (status = 404, description = "No avatar (`user.avatar_not_found`)", body = ErrorBody),
    ))]
pub async fn serve_avatar(
    State(state): State<Context>,
    ApiPath((id, size)): ApiPath<(Uuid, String)>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let side = avatars::parse_size(&size).ok_or_else(|| {
        ServiceError::new(ErrorKind::BadRequest, codes::REQUEST_INVALID_PATH, "size must be s, m, l or 16 to 256")
    })?;
    let if_none_match = headers.get(header::IF_NONE_MATCH).and_then(|value| value.to_str().ok());
    let cache = (header::CACHE_CONTROL, HeaderValue::from_static(avatars::CACHE_CONTROL));
    Ok(match avatars::serve(&state, id.into(), side, if_none_match).await? {
        AvatarAnswer::Image { png, etag } => {
            let etag = HeaderValue::try_from(etag).map_err(ServiceError::internal)?;
            let png_type = (header::CONTENT_TYPE, HeaderValue::from_static("image/png"));
            ([png_type, cache, (header::ETAG, etag)], png).into_response()
        }
        AvatarAnswer::NotModified { etag } => {
            let etag = HeaderValue::try_from(etag).map_err(ServiceError::internal)?;
            (StatusCode::NOT_MODIFIED, [cache, (header::ETAG, etag)]).into_response()
        }
        AvatarAnswer::Redirect(url) => {
            let location = HeaderValue::try_from(url).map_err(ServiceError::internal)?;
            (StatusCode::FOUND, [cache, (header::LOCATION, location)]).into_response()
        }
    })
}
