//! SQL of the persistent task queue. Claims are single conditional UPDATEs, so two masters on
//! one PostgreSQL never hold the same task; a task whose lease ran out (its worker died) is
//! claimable again.

use super::columns::Flag;
use super::{Conn, Db, DbError};
use crate::domain::ids::UserId;
use crate::domain::task::{TaskProgress, TaskProps, TaskStatus, TaskType};
use crate::domain::time::Millis;

pub const COLUMNS: &str = "id, type, status, owner_id, props, progress, error, attempts, max_attempts, run_after, \
     lease_owner, lease_until, cancel_requested, created_at, updated_at, finished_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TaskRow {
    pub id: String,
    #[sqlx(rename = "type")]
    pub kind: TaskType,
    pub status: TaskStatus,
    pub owner_id: Option<UserId>,
    pub props: TaskProps,
    pub progress: TaskProgress,
    pub error: Option<String>,
    pub attempts: i32,
    pub max_attempts: i32,
    pub run_after: Millis,
    pub lease_owner: Option<String>,
    pub lease_until: Option<Millis>,
    #[sqlx(try_from = "Flag")]
    pub cancel_requested: bool,
    pub created_at: Millis,
    pub updated_at: Millis,
    pub finished_at: Option<Millis>,
}

pub async fn insert(db: &Db, row: &TaskRow) -> Result<(), DbError> {
    let mut conn = db.writer().acquire().await?;
    insert_in(&mut conn, row).await
}

/// [`insert`] inside the caller's transaction (a task queued together with the row it serves).
pub async fn insert_in(conn: &mut Conn, row: &TaskRow) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO tasks (id, type, status, owner_id, props, progress, attempts, max_attempts, run_after, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $8, $9, $9)",
    )
    .bind(row.id.as_str())
    .bind(row.kind)
    .bind(row.status)
    .bind(row.owner_id)
    .bind(&row.props)
    .bind(&row.progress)
    .bind(row.max_attempts)
    .bind(row.run_after)
    .bind(row.created_at)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn find(db: &Db, id: &str) -> Result<Option<TaskRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM tasks WHERE id = $1"))
        .bind(id)
        .fetch_optional(db.reader())
        .await?)
}

/// Claims the next due task for `worker` until `lease_until`: a queued one whose time has come,
/// or a running one whose lease expired. Answers `None` when there is none (or another worker
/// won the race for it). Only types this build knows are claimed: a task another version
/// queued waits for a master that can run it, instead of being taken and failing to decode.
pub async fn claim(db: &Db, worker: &str, now: Millis, lease_until: Millis) -> Result<Option<TaskRow>, DbError> {
    let due = "((status = 'queued' AND run_after <= $3) OR (status = 'running' AND lease_until < $3)) \
               AND type IN ('POLICY_MIGRATE', 'EXTERNAL_DOWNLOAD', 'THUMBNAIL', 'IMPORT')";
    let sql = format!(
        "UPDATE tasks SET status = 'running', lease_owner = $1, lease_until = $2, attempts = attempts + 1, updated_at = $3
         WHERE id = (SELECT id FROM tasks WHERE {due} ORDER BY run_after, created_at LIMIT 1) AND {due}
         RETURNING {COLUMNS}"
    );
    Ok(sqlx::query_as(&sql).bind(worker).bind(lease_until).bind(now).fetch_optional(db.writer()).await?)
}

/// Extends the lease of a task `worker` still holds; answers `None` when the lease was lost, or
/// whether a cancel was requested.
pub async fn heartbeat(
    db: &Db,
    id: &str,
    worker: &str,
    lease_until: Millis,
    progress: &TaskProgress,
    now: Millis,
) -> Result<Option<bool>, DbError> {
    let row: Option<(Flag,)> = sqlx::query_as(
        "UPDATE tasks SET lease_until = $3, progress = $4, updated_at = $5
         WHERE id = $1 AND lease_owner = $2 AND status = 'running' RETURNING cancel_requested",
    )
    .bind(id)
    .bind(worker)
    .bind(lease_until)
    .bind(progress)
    .bind(now)
    .fetch_optional(db.writer())
    .await?;
    Ok(row.map(|(cancel,)| cancel.into()))
}

/// Ends a task `worker` holds with a final status; answers false when the lease was lost.
pub async fn finish(
    db: &Db,
    id: &str,
    worker: &str,
    status: TaskStatus,
    error: Option<&str>,
    progress: &TaskProgress,
    now: Millis,
) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE tasks SET status = $3, error = $4, progress = $5, lease_owner = NULL, lease_until = NULL,
         updated_at = $6, finished_at = $6 WHERE id = $1 AND lease_owner = $2 AND status = 'running'",
    )
    .bind(id)
    .bind(worker)
    .bind(status)
    .bind(error)
    .bind(progress)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Puts a task `worker` holds back in the queue until `run_after` (a retry after a transient error).
pub async fn requeue(
    db: &Db,
    id: &str,
    worker: &str,
    error: &str,
    run_after: Millis,
    now: Millis,
) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE tasks SET status = 'queued', error = $3, run_after = $4, lease_owner = NULL, lease_until = NULL, updated_at = $5
         WHERE id = $1 AND lease_owner = $2 AND status = 'running'",
    )
    .bind(id)
    .bind(worker)
    .bind(error)
    .bind(run_after)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Cancels a task: a queued one at once, a running one at its worker's next safe point.
/// Answers the status it now has, or `None` when it had already ended.
pub async fn cancel(db: &Db, id: &str, now: Millis) -> Result<Option<TaskStatus>, DbError> {
    let mut tx = db.begin().await?;
    let queued = sqlx::query(
        "UPDATE tasks SET status = 'canceled', updated_at = $2, finished_at = $2 WHERE id = $1 AND status = 'queued'",
    )
    .bind(id)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    if queued.rows_affected() > 0 {
        tx.commit().await?;
        return Ok(Some(TaskStatus::Canceled));
    }
    let running =
        sqlx::query("UPDATE tasks SET cancel_requested = 1, updated_at = $2 WHERE id = $1 AND status = 'running'")
            .bind(id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok((running.rows_affected() > 0).then_some(TaskStatus::Running))
}

/// Filters of task lists; `None` means any.
#[derive(Debug, Default, Clone)]
pub struct TaskFilter {
    pub owner_id: Option<UserId>,
    pub status: Option<TaskStatus>,
    pub kind: Option<TaskType>,
}

/// One page of tasks, newest first, and the total count.
pub async fn list(db: &Db, filter: &TaskFilter, offset: i64, limit: i64) -> Result<(i64, Vec<TaskRow>), DbError> {
    // Absent filters bind NULL and match everything, keeping one fixed statement.
    let condition = "($1 IS NULL OR owner_id = $1) AND ($2 IS NULL OR status = $2) AND ($3 IS NULL OR type = $3)";
    let (count,): (i64,) = sqlx::query_as(&format!("SELECT COUNT(*) FROM tasks WHERE {condition}"))
        .bind(filter.owner_id)
        .bind(filter.status)
        .bind(filter.kind)
        .fetch_one(db.reader())
        .await?;
    let rows = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM tasks WHERE {condition} ORDER BY created_at DESC, id LIMIT $4 OFFSET $5"
    ))
    .bind(filter.owner_id)
    .bind(filter.status)
    .bind(filter.kind)
    .bind(limit)
    .bind(offset)
    .fetch_all(db.reader())
    .await?;
    Ok((count, rows))
}

pub async fn delete(db: &Db, id: &str) -> Result<bool, DbError> {
    let done = sqlx::query("DELETE FROM tasks WHERE id = $1").bind(id).execute(db.writer()).await?;
    Ok(done.rows_affected() > 0)
}

/// How many tasks there are of each type in each status (`/metrics`).
pub async fn count_by_type_and_status(db: &Db) -> Result<Vec<(String, String, i64)>, DbError> {
    Ok(sqlx::query_as("SELECT type, status, COUNT(*) FROM tasks GROUP BY type, status").fetch_all(db.reader()).await?)
}
