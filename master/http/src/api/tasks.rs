//! `/task` (the caller's background tasks), `/admin/task` (everyone's) and `/admin/import`
//! (starting an import of existing storage).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use nubo_model::domain::task::{TaskStatus, TaskType};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::guard::{AdminRequired, AuthRequired};
use nubo_service::content::import::{self, ImportRequest};
use nubo_service::context::Context;
use nubo_service::tasks::queue::{self, TaskView};
use nubo_service::{Page, PageRequest};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TaskQuery {
    pub status: Option<TaskStatus>,
    #[serde(rename = "type")]
    #[param(rename = "type")]
    pub kind: Option<TaskType>,
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// The caller's tasks, newest first.
#[utoipa::path(get, path = "/task", tag = "tasks", security(("bearer" = [])), params(TaskQuery),
    responses(
        (status = 200, description = "Tasks", body = Page<TaskView>),
        (status = 400, description = "Unreadable query", body = ErrorBody),
        (status = 422, description = "Paging out of range", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiQuery(query): ApiQuery<TaskQuery>,
) -> ApiResult<Json<Page<TaskView>>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    Ok(Json(queue::list(&state, Some(caller.claims.sub), query.status, query.kind, page).await?))
}

/// One of the caller's tasks, with status and type as enumerations, progress, error and props.
#[utoipa::path(get, path = "/task/{id}", tag = "tasks", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The task", body = TaskView),
        (status = 404, description = "No such task", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<TaskView>> {
    Ok(Json(queue::get(&state, Some(caller.claims.sub), id).await?))
}

/// Cancel a task: a queued one at once, a running one at its next safe point (what it already
/// did stays consistent: migrated files stay migrated, the rest stays where it was).
#[utoipa::path(delete, path = "/task/{id}", tag = "tasks", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The task after the request", body = TaskView),
        (status = 404, description = "No such task", body = ErrorBody),
        (status = 409, description = "The task has already ended", body = ErrorBody),
    ))]
pub async fn cancel(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<TaskView>> {
    Ok(Json(queue::cancel(&state, Some(caller.claims.sub), id).await?))
}

/// Everyone's tasks, filtered by status and type.
#[utoipa::path(get, path = "/admin/task", tag = "admin", security(("bearer" = [])), params(TaskQuery),
    responses(
        (status = 200, description = "Tasks", body = Page<TaskView>),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 422, description = "Paging out of range", body = ErrorBody),
    ))]
pub async fn admin_list(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiQuery(query): ApiQuery<TaskQuery>,
) -> ApiResult<Json<Page<TaskView>>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    Ok(Json(queue::list(&state, None, query.status, query.kind, page).await?))
}

/// Any task.
#[utoipa::path(get, path = "/admin/task/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The task", body = TaskView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such task", body = ErrorBody),
    ))]
pub async fn admin_get(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<TaskView>> {
    Ok(Json(queue::get(&state, None, id).await?))
}

/// Cancel any task.
#[utoipa::path(delete, path = "/admin/task/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The task after the request", body = TaskView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such task", body = ErrorBody),
        (status = 409, description = "The task has already ended", body = ErrorBody),
    ))]
pub async fn admin_cancel(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<TaskView>> {
    Ok(Json(queue::cancel(&state, None, id).await?))
}

/// Where the files of an import are.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportSource {
    /// A local or S3 policy (not one on a storage node).
    pub policy_id: Uuid,
    /// The folder to import, relative to the local policy's root or the S3 policy's prefix,
    /// without `..`; empty (the default) for all of it.
    #[serde(default)]
    pub path_or_prefix: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportBody {
    pub source: ImportSource,
    /// The user the files are recorded for.
    pub user_id: Uuid,
    /// An absolute folder path in the user's tree (`/imported`), made with its parents when
    /// missing; each file appears at this path plus its path below the source folder.
    pub dst_path: String,
}

/// Import files that already sit in a local or S3 policy's storage as a user's files, without
/// copying bytes: queues an `IMPORT` task (owned by the caller; its progress counts files seen,
/// imported, updated, skipped, conflicting and bytes hashed). Each file is hashed once (blake3),
/// de-duplicated against the policy's blobs and charged to the user's quota; files imported
/// before are skipped unless their size, time or ETag changed. A file with the name of a
/// different object at the destination is skipped and listed as a conflict. Imported bytes
/// belong to Nubo from then on (purging the file deletes them).
#[utoipa::path(post, path = "/admin/import", tag = "admin", security(("bearer" = [])), request_body = ImportBody,
    responses(
        (status = 202, description = "Import queued", body = TaskView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such policy or user", body = ErrorBody),
        (status = 409, description = "A file of the user is where the destination folder should be", body = ErrorBody),
        (status = 422, description = "A policy on a storage node, a source path with `..` or absolute, or a destination that is not an absolute path", body = ErrorBody),
    ))]
pub async fn admin_import(
    State(state): State<Context>,
    admin: AdminRequired,
    ApiJson(body): ApiJson<ImportBody>,
) -> ApiResult<(StatusCode, Json<TaskView>)> {
    let request = ImportRequest {
        policy_id: body.source.policy_id.into(),
        path_or_prefix: body.source.path_or_prefix,
        user_id: body.user_id.into(),
        dst_path: body.dst_path,
    };
    Ok((StatusCode::ACCEPTED, Json(import::start(&state, admin.0.sub, request).await?)))
}
