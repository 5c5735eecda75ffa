//! `/task` (the caller's background tasks) and `/admin/task` (everyone's).

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use utoipa::IntoParams;
use uuid::Uuid;

use crate::context::Context;
use crate::domain::task::{TaskStatus, TaskType};
use crate::error::ServiceResult;
use crate::http::error::ErrorBody;
use crate::http::extract::{ApiPath, ApiQuery};
use crate::http::guard::{AdminRequired, AuthRequired};
use crate::service::tasks::{self, TaskView};
use crate::service::{Page, PageRequest};

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
        (status = 401, description = "Token missing, invalid or expired", body = ErrorBody),
        (status = 422, description = "Paging out of range", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiQuery(query): ApiQuery<TaskQuery>,
) -> ServiceResult<Json<Page<TaskView>>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    Ok(Json(tasks::list(state.db(), Some(caller.claims.sub), query.status, query.kind, page).await?))
}

/// One of the caller's tasks, with status and type as enumerations, progress, error and props.
#[utoipa::path(get, path = "/task/{id}", tag = "tasks", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The task", body = TaskView),
        (status = 401, description = "Token missing, invalid or expired", body = ErrorBody),
        (status = 404, description = "No such task", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ServiceResult<Json<TaskView>> {
    Ok(Json(tasks::get(state.db(), Some(caller.claims.sub), id).await?))
}

/// Cancel a task: a queued one at once, a running one at its next safe point (what it already
/// did stays consistent: migrated files stay migrated, the rest stays where it was).
#[utoipa::path(delete, path = "/task/{id}", tag = "tasks", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The task after the request", body = TaskView),
        (status = 401, description = "Token missing, invalid or expired", body = ErrorBody),
        (status = 404, description = "No such task", body = ErrorBody),
        (status = 409, description = "The task has already ended", body = ErrorBody),
    ))]
pub async fn cancel(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ServiceResult<Json<TaskView>> {
    Ok(Json(tasks::cancel(state.db(), Some(caller.claims.sub), id).await?))
}

/// Everyone's tasks, filtered by status and type.
#[utoipa::path(get, path = "/admin/task", tag = "admin", security(("bearer" = [])), params(TaskQuery),
    responses(
        (status = 200, description = "Tasks", body = Page<TaskView>),
        (status = 401, description = "Token missing, invalid or expired", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 422, description = "Paging out of range", body = ErrorBody),
    ))]
pub async fn admin_list(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiQuery(query): ApiQuery<TaskQuery>,
) -> ServiceResult<Json<Page<TaskView>>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    Ok(Json(tasks::list(state.db(), None, query.status, query.kind, page).await?))
}

/// Any task.
#[utoipa::path(get, path = "/admin/task/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The task", body = TaskView),
        (status = 401, description = "Token missing, invalid or expired", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such task", body = ErrorBody),
    ))]
pub async fn admin_get(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ServiceResult<Json<TaskView>> {
    Ok(Json(tasks::get(state.db(), None, id).await?))
}

/// Cancel any task.
#[utoipa::path(delete, path = "/admin/task/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The task after the request", body = TaskView),
        (status = 401, description = "Token missing, invalid or expired", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such task", body = ErrorBody),
        (status = 409, description = "The task has already ended", body = ErrorBody),
    ))]
pub async fn admin_cancel(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ServiceResult<Json<TaskView>> {
    Ok(Json(tasks::cancel(state.db(), None, id).await?))
}
