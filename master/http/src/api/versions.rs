//! `/object/{id}/versions`: a file's earlier contents, thin handlers over `service::content::versions`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::ApiPath;
use crate::guard::AuthRequired;
use nubo_model::domain::ids::ObjectId;
use nubo_service::content::downloads::DownloadTokenView;
use nubo_service::content::versions::{self, VersionView};
use nubo_service::context::Context;
use nubo_service::tree::files::ObjectView;

/// The earlier contents of a file, newest first. Each replacement of the content (`PATCH
/// /file/content`, WebDAV `PUT`, WOPI `PutFile`, an upload with `overwrite`) keeps the previous
/// content as a version when the owner's group keeps versions (`version_max_count`, default
/// 10; `version_max_days`, default 30, enforced by an hourly job). Versions count in the used
/// storage; identical contents share one stored blob. Trashing and restoring the file keep
/// them; deleting it for good deletes them.
#[utoipa::path(get, path = "/object/{id}/versions", tag = "files", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The file")),
    responses(
        (status = 200, description = "The versions", body = Vec<VersionView>),
        (status = 404, description = "No such file", body = ErrorBody),
        (status = 409, description = "The object is a folder", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<ObjectId>,
) -> ApiResult<Json<Vec<VersionView>>> {
    Ok(Json(versions::list(&state, caller.claims.sub, id).await?))
}

/// A single-use download token for one version (use its `url` as `GET /file/download/{token}`).
#[utoipa::path(post, path = "/object/{id}/versions/{vid}/download", tag = "files", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The file"), ("vid" = String, Path, description = "The version")),
    responses(
        (status = 200, description = "Token and URL", body = DownloadTokenView),
        (status = 404, description = "No such file or version", body = ErrorBody),
    ))]
pub async fn download(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath((id, version)): ApiPath<(ObjectId, String)>,
) -> ApiResult<Json<DownloadTokenView>> {
    Ok(Json(versions::download(&state, caller.claims.sub, id, &version).await?))
}

/// Make a version the file's content again; the current content becomes a version (the used
/// storage does not change).
#[utoipa::path(post, path = "/object/{id}/versions/{vid}/restore", tag = "files", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The file"), ("vid" = String, Path, description = "The version")),
    responses(
        (status = 200, description = "The file with the restored content", body = ObjectView),
        (status = 404, description = "No such file (or it is in the trash) or version", body = ErrorBody),
        (status = 409, description = "Another write changed the file meanwhile (`object.changed`)", body = ErrorBody),
    ))]
pub async fn restore(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath((id, version)): ApiPath<(ObjectId, String)>,
) -> ApiResult<Json<ObjectView>> {
    Ok(Json(versions::restore(&state, caller.claims.sub, id, &version).await?))
}

/// Delete a version: its bytes stop counting, and its blob goes when nothing else refers to it.
#[utoipa::path(delete, path = "/object/{id}/versions/{vid}", tag = "files", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The file"), ("vid" = String, Path, description = "The version")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such file or version", body = ErrorBody),
    ))]
pub async fn delete(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath((id, version)): ApiPath<(ObjectId, String)>,
) -> ApiResult<StatusCode> {
    versions::delete(&state, caller.claims.sub, id, &version).await?;
    Ok(StatusCode::NO_CONTENT)
}
