//! `/user/storage_packs` (the caller's packs) and `/admin/storage_pack` (list, grant, revoke).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::guard::{AdminRequired, AuthRequired};
use nubo_model::domain::ids::UserId;
use nubo_service::capacity::storage_packs::{self, GrantRequest, PackView};
use nubo_service::context::Context;
use nubo_service::{Page, PageRequest};

/// The caller's storage packs, active and past (expired, revoked, scheduled), newest first.
#[utoipa::path(get, path = "/user/storage_packs", tag = "user", security(("bearer" = [])),
    responses(
        (status = 200, description = "The caller's packs", body = Vec<PackView>),
        (status = 403, description = "Account not active", body = ErrorBody),
    ))]
pub async fn mine(State(state): State<Context>, caller: AuthRequired) -> ApiResult<Json<Vec<PackView>>> {
    Ok(Json(storage_packs::list_mine(&state, caller.claims.sub).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PackListQuery {
    pub user_id: Option<Uuid>,
    /// `true`: counting now; `false`: scheduled, expired or revoked.
    pub active: Option<bool>,
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    /// 1..=1000, default 50.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// List storage packs, newest first, with filters.
#[utoipa::path(get, path = "/admin/storage_pack", tag = "admin", security(("bearer" = [])), params(PackListQuery),
    responses(
        (status = 200, description = "One page of packs", body = Page<PackView>),
        (status = 400, description = "Unreadable query", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 422, description = "Paging out of range", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiQuery(query): ApiQuery<PackListQuery>,
) -> ApiResult<Json<Page<PackView>>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    Ok(Json(storage_packs::list(&state, query.user_id.map(UserId::from), query.active, page).await?))
}

/// A pack to grant. It starts at `starts_at` (default: now) and ends at `expires_at`, or
/// `duration_days` after its start, or never when neither is given.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantPackRequest {
    pub user_id: Uuid,
    /// 1..=100 characters (trimmed).
    #[schema(min_length = 1, max_length = 100)]
    pub name: String,
    /// Bytes added to the user's capacity (1 or more).
    #[schema(minimum = 1)]
    pub size: i64,
    /// RFC 3339.
    pub starts_at: Option<String>,
    /// RFC 3339, after the start and in the future.
    pub expires_at: Option<String>,
    #[schema(minimum = 1, maximum = 36500)]
    pub duration_days: Option<i64>,
}

/// Grant a storage pack to a user.
#[utoipa::path(post, path = "/admin/storage_pack", tag = "admin", security(("bearer" = [])),
    request_body = GrantPackRequest,
    responses(
        (status = 201, description = "Granted", body = PackView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 422, description = "Invalid field (unknown user, size, times)", body = ErrorBody),
    ))]
pub async fn grant(
    State(state): State<Context>,
    AdminRequired(admin): AdminRequired,
    ApiJson(request): ApiJson<GrantPackRequest>,
) -> ApiResult<(StatusCode, Json<PackView>)> {
    let request = GrantRequest {
        user_id: request.user_id,
        name: request.name,
        size: request.size,
        starts_at: request.starts_at,
        expires_at: request.expires_at,
        duration_days: request.duration_days,
    };
    Ok((StatusCode::CREATED, Json(storage_packs::grant(&state, admin.sub, request).await?)))
}

/// Revoke a storage pack: it stops counting at once (the revocation is recorded; revoking
/// again changes nothing). Files are never deleted: a user left over quota can only remove.
#[utoipa::path(delete, path = "/admin/storage_pack/{id}", tag = "admin", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses(
        (status = 204, description = "Revoked"),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such pack", body = ErrorBody),
    ))]
pub async fn revoke(
    State(state): State<Context>,
    AdminRequired(admin): AdminRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    storage_packs::revoke(&state, admin.sub, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
