//! SQL of `node_upload_results` and `external_downloads`: what storage nodes reported, kept so
//! a repeated report gets the same answer.

use super::columns::{Flag, OptionalFlag};
use super::ingest::{Step, StepArg};
use super::{Db, DbError};
use crate::domain::ids::{NodeId, ObjectId, PolicyId, UserId};
use crate::domain::time::Millis;

/// A settled `upload_complete` report.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct UploadResultRow {
    pub object_id: Option<ObjectId>,
    pub owner_id: UserId,
    #[sqlx(try_from = "Flag")]
    pub keep_blob: bool,
}

pub async fn upload_result(db: &Db, node_id: NodeId, handle: &str) -> Result<Option<UploadResultRow>, DbError> {
    Ok(sqlx::query_as(
        "SELECT object_id, owner_id, keep_blob FROM node_upload_results WHERE node_id = $1 AND session_handle = $2",
    )
    .bind(node_id)
    .bind(handle)
    .fetch_optional(db.reader())
    .await?)
}

/// Remembers a node's settled upload report as a step of the file's commit
/// ([`super::ingest`]): the file `object_id` of `owner_id`, and whether the node keeps its blob.
pub fn upload_result_step(node_id: NodeId, handle: &str, object_id: ObjectId, owner_id: UserId, now: Millis) -> Step {
    Step {
        sql: "INSERT INTO node_upload_results (node_id, session_handle, object_id, owner_id, keep_blob, created_at)
              VALUES ($1, $2, $3, $4, $5, $6)",
        args: vec![
            StepArg::Text(node_id.to_string()),
            StepArg::Text(handle.to_owned()),
            StepArg::Text(object_id.to_string()),
            StepArg::Text(owner_id.to_string()),
            StepArg::KeepsNewBlob,
            StepArg::Int(now),
        ],
        required: true,
    }
}

/// Settles a running fetch as completed as a step of the file's commit ([`super::ingest`]):
/// nothing is committed when another report settled it first.
pub fn complete_external_download_step(task_id: &str, object_id: ObjectId, size: i64, now: Millis) -> Step {
    Step {
        sql: "UPDATE external_downloads SET state = 'completed', object_id = $2, keep_blob = $3, downloaded = $4,
              updated_at = $5 WHERE task_id = $1 AND state = 'running'",
        args: vec![
            StepArg::Text(task_id.to_owned()),
            StepArg::Text(object_id.to_string()),
            StepArg::KeepsNewBlob,
            StepArg::Int(size),
            StepArg::Int(now),
        ],
        required: true,
    }
}

/// Forgets settled reports older than `before` (a node stops retrying long before).
pub async fn prune_upload_results(db: &Db, before: Millis) -> Result<u64, DbError> {
    let done =
        sqlx::query("DELETE FROM node_upload_results WHERE created_at < $1").bind(before).execute(db.writer()).await?;
    Ok(done.rows_affected())
}

/// States of an external download.
pub const RUNNING: &str = "running";
pub const COMPLETED: &str = "completed";
pub const FAILED: &str = "failed";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ExternalDownloadRow {
    pub task_id: String,
    pub node_id: NodeId,
    pub policy_id: PolicyId,
    pub storage_key: String,
    pub state: String,
    pub downloaded: i64,
    pub total: Option<i64>,
    pub object_id: Option<ObjectId>,
    #[sqlx(try_from = "OptionalFlag")]
    pub keep_blob: Option<bool>,
    pub error: Option<String>,
    pub updated_at: Millis,
}

const FETCH_COLUMNS: &str =
    "task_id, node_id, policy_id, storage_key, state, downloaded, total, object_id, keep_blob, error, updated_at";

pub async fn external_download(db: &Db, task_id: &str) -> Result<Option<ExternalDownloadRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {FETCH_COLUMNS} FROM external_downloads WHERE task_id = $1"))
        .bind(task_id)
        .fetch_optional(db.reader())
        .await?)
}

/// Starts (or restarts, for a new attempt) the fetch of a task on a node.
pub async fn start_external_download(db: &Db, row: &ExternalDownloadRow) -> Result<(), DbError> {
    let mut tx = db.begin().await?;
    sqlx::query("DELETE FROM external_downloads WHERE task_id = $1")
        .bind(row.task_id.as_str())
        .execute(&mut *tx)
        .await?;
    sqlx::query(&format!(
        "INSERT INTO external_downloads ({FETCH_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
    ))
    .bind(row.task_id.as_str())
    .bind(row.node_id)
    .bind(row.policy_id)
    .bind(row.storage_key.as_str())
    .bind(row.state.as_str())
    .bind(row.downloaded)
    .bind(row.total)
    .bind(row.object_id)
    .bind(row.keep_blob.map(i64::from))
    .bind(row.error.as_deref())
    .bind(row.updated_at)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Records progress of a running fetch; answers false when it is not running (any more).
pub async fn external_download_progress(
    db: &Db,
    task_id: &str,
    node_id: NodeId,
    downloaded: i64,
    total: Option<i64>,
    now: Millis,
) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE external_downloads SET downloaded = $3, total = $4, updated_at = $5
         WHERE task_id = $1 AND node_id = $2 AND state = 'running'",
    )
    .bind(task_id)
    .bind(node_id)
    .bind(downloaded)
    .bind(total)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Ends a running fetch as failed with `error`.
pub async fn fail_external_download(db: &Db, task_id: &str, error: &str, now: Millis) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE external_downloads SET state = 'failed', error = $2, updated_at = $3
         WHERE task_id = $1 AND state = 'running'",
    )
    .bind(task_id)
    .bind(error)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}
