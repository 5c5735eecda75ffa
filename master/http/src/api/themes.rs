//! Theme presets: the public list at `/site/themes` and administrators' CRUD at `/admin/theme`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use nubo_model::domain::theme::ThemeColors;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath};
use crate::guard::AdminRequired;
use nubo_service::context::Context;
use nubo_service::settings::themes::{self, ThemePresetView};

/// Public list of theme presets.
#[utoipa::path(get, path = "/site/themes", tag = "site",
    responses(
        (status = 200, description = "All presets, by name", body = Vec<ThemePresetView>),
        (status = 500, description = "Internal error", body = ErrorBody),
    ))]
pub async fn public_list(State(state): State<Context>) -> ApiResult<Json<Vec<ThemePresetView>>> {
    Ok(Json(themes::list(&state).await?))
}

/// A preset as written: a unique name and seven colours (17 chromatic hues, 5 neutral tones).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ThemePresetRequest {
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    pub colors: ThemeColors,
}

/// List presets.
#[utoipa::path(get, path = "/admin/theme", tag = "admin", security(("bearer" = [])),
    responses(
        (status = 200, description = "All presets", body = Vec<ThemePresetView>),
        (status = 403, description = "Not an administrator", body = ErrorBody),
    ))]
pub async fn list(State(state): State<Context>, _admin: AdminRequired) -> ApiResult<Json<Vec<ThemePresetView>>> {
    Ok(Json(themes::list(&state).await?))
}

/// Create a preset.
#[utoipa::path(post, path = "/admin/theme", tag = "admin", security(("bearer" = [])),
    request_body = ThemePresetRequest,
    responses(
        (status = 201, description = "Created", body = ThemePresetView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 409, description = "Name taken", body = ErrorBody),
        (status = 422, description = "Invalid name or colour", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiJson(request): ApiJson<ThemePresetRequest>,
) -> ApiResult<(StatusCode, Json<ThemePresetView>)> {
    Ok((StatusCode::CREATED, Json(themes::create(&state, &request.name, request.colors).await?)))
}

/// One preset.
#[utoipa::path(get, path = "/admin/theme/{id}", tag = "admin", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The preset", body = ThemePresetView),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such preset", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<ThemePresetView>> {
    Ok(Json(themes::get(&state, id).await?))
}

/// Replace a preset's name and colours.
#[utoipa::path(put, path = "/admin/theme/{id}", tag = "admin", security(("bearer" = [])),
    params(("id" = Uuid, Path)), request_body = ThemePresetRequest,
    responses(
        (status = 200, description = "Updated", body = ThemePresetView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such preset", body = ErrorBody),
        (status = 409, description = "Name taken", body = ErrorBody),
        (status = 422, description = "Invalid name or colour", body = ErrorBody),
    ))]
pub async fn update(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(request): ApiJson<ThemePresetRequest>,
) -> ApiResult<Json<ThemePresetView>> {
    Ok(Json(themes::update(&state, id, &request.name, request.colors).await?))
}

/// Delete a preset; users who chose it keep their colour snapshot.
#[utoipa::path(delete, path = "/admin/theme/{id}", tag = "admin", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such preset", body = ErrorBody),
    ))]
pub async fn delete(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    themes::delete(&state, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Make a preset the default (the previous default stops being one).
#[utoipa::path(patch, path = "/admin/theme/{id}/default", tag = "admin", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The new default", body = ThemePresetView),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such preset", body = ErrorBody),
    ))]
pub async fn set_default(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<ThemePresetView>> {
    Ok(Json(themes::set_default(&state, id).await?))
}
