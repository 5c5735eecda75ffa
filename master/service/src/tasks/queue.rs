//! Background tasks as users and administrators see them: creating a policy migration, listing,
//! reading and cancelling.

use nubo_model::db::tasks::{TaskFilter, TaskRow};
use nubo_model::db::{self, Db};
use nubo_model::domain::ids::{GroupId, UserId};
use nubo_model::domain::task::{TaskProgress, TaskProps, TaskStatus, TaskType};
use nubo_model::domain::time::{Millis, now_ms, to_rfc3339};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::tree::access::Writable;
use crate::{Page, PageRequest, storage::policies};

/// Attempts a task gets before a transient failure becomes final.
pub const MAX_ATTEMPTS: i32 = 5;

/// A task with its status and type as enumerations.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaskView {
    pub id: Uuid,
    #[serde(rename = "type")]
    pub kind: TaskType,
    pub status: TaskStatus,
    pub owner_id: Option<Uuid>,
    pub props: TaskProps,
    pub progress: TaskProgress,
    /// Why it failed (or why the last attempt failed, while retrying).
    pub error: Option<String>,
    pub attempts: i32,
    /// A cancel was requested and the worker has not stopped yet.
    pub cancel_requested: bool,
    pub created_at: String,
    pub updated_at: String,
    pub finished_at: Option<String>,
}

fn not_found() -> ServiceError {
    ServiceError::not_found(codes::TASK_NOT_FOUND, "no such task")
}

pub fn view(row: &TaskRow) -> ServiceResult<TaskView> {
    Ok(TaskView {
        // Task ids stay text in the queue and on the node protocol (no id type of their own yet).
        id: row
            .id
            .parse()
            .map_err(|_| ServiceError::internal(anyhow::anyhow!("stored task id {:?} is not a UUID", row.id)))?,
        kind: row.kind,
        status: row.status,
        owner_id: row.owner_id.map(Uuid::from),
        props: row.props.clone(),
        progress: row.progress.clone(),
        error: row.error.clone(),
        attempts: row.attempts,
        cancel_requested: row.cancel_requested,
        created_at: to_rfc3339(row.created_at),
        updated_at: to_rfc3339(row.updated_at),
        finished_at: row.finished_at.map(to_rfc3339),
    })
}

/// Queues a `POLICY_MIGRATE` task of `caller` for a live object (resolved with
/// [`Reach::Live`](crate::tree::access::Reach::Live)), after checking that the caller's
/// group may use the target policy (403 and no task otherwise).
pub async fn create_migration(
    ctx: &Context,
    caller: UserId,
    group_id: GroupId,
    object: &Writable,
    policy_id: Uuid,
) -> ServiceResult<TaskView> {
    policies::policy_for(ctx.db(), group_id, Some(policy_id)).await?;
    let props = TaskProps {
        object_id: Some(object.as_readable().id().into()),
        target_policy_id: Some(policy_id),
        ..TaskProps::default()
    };
    enqueue(ctx.db(), TaskType::PolicyMigrate, Some(caller), &props).await
}

pub async fn enqueue(db: &Db, kind: TaskType, owner: Option<UserId>, props: &TaskProps) -> ServiceResult<TaskView> {
    let row = new_row(kind, owner, props.clone(), now_ms());
    db::tasks::insert(db, &row).await?;
    view(&row)
}

/// A task of `kind` queued at `now`, to run at once, not yet tried.
pub fn new_row(kind: TaskType, owner: Option<UserId>, props: TaskProps, now: Millis) -> TaskRow {
    TaskRow {
        id: Uuid::new_v4().to_string(),
        kind,
        status: TaskStatus::Queued,
        owner_id: owner,
        props,
        progress: TaskProgress::default(),
        error: None,
        attempts: 0,
        max_attempts: MAX_ATTEMPTS,
        run_after: now,
        lease_owner: None,
        lease_until: None,
        cancel_requested: false,
        created_at: now,
        updated_at: now,
        finished_at: None,
    }
}

async fn load(db: &Db, owner: Option<UserId>, id: Uuid) -> ServiceResult<TaskRow> {
    let row = db::tasks::find(db, &id.to_string()).await?.ok_or_else(not_found)?;
    match owner {
        Some(owner) if row.owner_id != Some(owner) => Err(not_found()),
        _ => Ok(row),
    }
}

/// Tasks of `owner` (or everyone's for administrators, `None`), filtered, newest first.
pub async fn list(
    ctx: &Context,
    owner: Option<UserId>,
    status: Option<TaskStatus>,
    kind: Option<TaskType>,
    page: PageRequest,
) -> ServiceResult<Page<TaskView>> {
    let db = ctx.db();
    let filter = TaskFilter { owner_id: owner, status, kind };
    let (count, rows) = db::tasks::list(db, &filter, page.offset, page.limit).await?;
    Ok(Page { count, items: rows.iter().map(view).collect::<ServiceResult<_>>()? })
}

/// One task of `owner` (any task for administrators, `None`).
pub async fn get(ctx: &Context, owner: Option<UserId>, id: Uuid) -> ServiceResult<TaskView> {
    let db = ctx.db();
    view(&load(db, owner, id).await?)
}

/// Cancels a task: a queued one at once; a running one stops at the worker's next safe point
/// (what it already changed stays consistent). A task that has ended answers 409.
pub async fn cancel(ctx: &Context, owner: Option<UserId>, id: Uuid) -> ServiceResult<TaskView> {
    let db = ctx.db();
    let row = load(db, owner, id).await?;
    if db::tasks::cancel(db, &row.id, now_ms()).await?.is_none() {
        return Err(ServiceError::new(ErrorKind::Conflict, codes::TASK_FINISHED, "the task has already ended"));
    }
    get(ctx, None, id).await
}
