//! SQL of `thumbnails`: one row per (content hash, side), pending, ready with its JPEG, or
//! failed with the reason; and the sweep of rows no file needs any more.

use super::tasks::TaskRow;
use super::{Db, DbError};
use crate::domain::time::Millis;

pub const PENDING: &str = "pending";
pub const READY: &str = "ready";
pub const FAILED: &str = "failed";

/// A thumbnail's row; `image` is read only when it is ready.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ThumbnailRow {
    pub state: String,
    pub image: Option<Vec<u8>>,
    pub error_code: Option<String>,
    pub updated_at: Millis,
}

pub async fn find(db: &Db, blake3: &str, side: i64) -> Result<Option<ThumbnailRow>, DbError> {
    Ok(sqlx::query_as("SELECT state, image, error_code, updated_at FROM thumbnails WHERE blake3 = $1 AND side = $2")
        .bind(blake3)
        .bind(side)
        .fetch_optional(db.reader())
        .await?)
}

/// Records that the thumbnail is being made and queues `task` to make it, in one
/// transaction; when a row exists already (another request got there first) nothing is
/// queued. Answers whether this call queued the task.
pub async fn start(db: &Db, blake3: &str, side: i64, task: &TaskRow, now: Millis) -> Result<bool, DbError> {
    let mut tx = db.begin().await?;
    let inserted = sqlx::query(
        "INSERT INTO thumbnails (blake3, side, state, created_at, updated_at) VALUES ($1, $2, 'pending', $3, $3)
         ON CONFLICT (blake3, side) DO NOTHING",
    )
    .bind(blake3)
    .bind(side)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    if inserted.rows_affected() == 0 {
        return Ok(false);
    }
    super::tasks::insert_in(&mut tx, task).await?;
    tx.commit().await?;
    Ok(true)
}

/// Stores the made thumbnail (the row again, should the sweep have taken it meanwhile).
pub async fn store_ready(db: &Db, blake3: &str, side: i64, jpeg: &[u8], now: Millis) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO thumbnails (blake3, side, state, image, created_at, updated_at) VALUES ($1, $2, 'ready', $3, $4, $4)
         ON CONFLICT (blake3, side) DO UPDATE SET state = 'ready', image = excluded.image, error_code = NULL,
         updated_at = excluded.updated_at",
    )
    .bind(blake3)
    .bind(side)
    .bind(jpeg)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// Records for good why the content gets no thumbnail.
pub async fn store_failed(db: &Db, blake3: &str, side: i64, code: &str, now: Millis) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO thumbnails (blake3, side, state, error_code, created_at, updated_at)
         VALUES ($1, $2, 'failed', $3, $4, $4)
         ON CONFLICT (blake3, side) DO UPDATE SET state = 'failed', image = NULL, error_code = excluded.error_code,
         updated_at = excluded.updated_at",
    )
    .bind(blake3)
    .bind(side)
    .bind(code)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// Forgets a pending thumbnail whose task gave up (storage down, blob gone), so the next
/// request starts again instead of waiting for ever.
pub async fn forget_pending(db: &Db, blake3: &str, side: i64) -> Result<(), DbError> {
    sqlx::query("DELETE FROM thumbnails WHERE blake3 = $1 AND side = $2 AND state = 'pending'")
        .bind(blake3)
        .bind(side)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// Removes thumbnails of content no live blob has any more, and pending ones older than
/// `stale_before` (their task was lost); answers how many went.
pub async fn sweep(db: &Db, stale_before: Millis) -> Result<u64, DbError> {
    let done = sqlx::query(
        "DELETE FROM thumbnails WHERE (state = 'pending' AND updated_at < $1)
         OR NOT EXISTS (SELECT 1 FROM physical_files b WHERE b.blake3 = thumbnails.blake3 AND b.ref_count > 0)",
    )
    .bind(stale_before)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected())
}

/// How many thumbnail rows exist for a content hash (tests and benchmarks look).
pub async fn count_for(db: &Db, blake3: &str) -> Result<i64, DbError> {
    let (count,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM thumbnails WHERE blake3 = $1").bind(blake3).fetch_one(db.reader()).await?;
    Ok(count)
}
