//! SQL of the administration summary: every aggregate `GET /admin/summary` shows, in one place.
//! Object and blob totals and files added per day come from the counters that triggers keep
//! (migration 0014, `summary_counters` and `summary_daily`), not from scanning `objects`.

use super::{Db, DbError};
use crate::domain::ids::UserId;
use crate::domain::time::Millis;

/// One UTC day in milliseconds; days are numbered `millis / DAY_MS` in SQL and here alike.
pub const DAY_MS: i64 = 86_400_000;

/// The totals the triggers keep (root folders not counted; the trash is).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct Counters {
    pub files: i64,
    pub folders: i64,
    pub trashed: i64,
    pub file_bytes: i64,
    pub blobs: i64,
    pub blob_bytes: i64,
}

/// Sums the shards (PostgreSQL keeps 16, SQLite one). `SUM` of BIGINT is NUMERIC on
/// PostgreSQL, which the `Any` driver does not read: hence the casts.
pub async fn counters(db: &Db) -> Result<Counters, DbError> {
    Ok(sqlx::query_as(
        "SELECT CAST(COALESCE(SUM(files), 0) AS BIGINT) AS files,
                CAST(COALESCE(SUM(folders), 0) AS BIGINT) AS folders,
                CAST(COALESCE(SUM(trashed), 0) AS BIGINT) AS trashed,
                CAST(COALESCE(SUM(file_bytes), 0) AS BIGINT) AS file_bytes,
                CAST(COALESCE(SUM(blobs), 0) AS BIGINT) AS blobs,
                CAST(COALESCE(SUM(blob_bytes), 0) AS BIGINT) AS blob_bytes
         FROM summary_counters",
    )
    .fetch_one(db.reader())
    .await?)
}

/// `(status, count)` for each status some user has.
pub async fn users_by_status(db: &Db) -> Result<Vec<(String, i64)>, DbError> {
    Ok(sqlx::query_as("SELECT status, COUNT(*) FROM users GROUP BY status").fetch_all(db.reader()).await?)
}

/// Users created at or after `since`, one row per UTC day: `(day number, count)`. Reads a
/// range of the `users_created` index.
pub async fn registrations_per_day(db: &Db, since: Millis) -> Result<Vec<(i64, i64)>, DbError> {
    Ok(sqlx::query_as(
        "SELECT created_at / 86400000 AS day, COUNT(*) FROM users WHERE created_at >= $1
         GROUP BY created_at / 86400000",
    )
    .bind(since)
    .fetch_all(db.reader())
    .await?)
}

/// Users created at or after `since`.
pub async fn users_created_since(db: &Db, since: Millis) -> Result<i64, DbError> {
    let (n,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM users WHERE created_at >= $1").bind(since).fetch_one(db.reader()).await?;
    Ok(n)
}

/// Files added on each UTC day from `first_day` on: `(day number, files, bytes)`.
pub async fn uploads_per_day(db: &Db, first_day: i64) -> Result<Vec<(i64, i64, i64)>, DbError> {
    Ok(sqlx::query_as(
        "SELECT day, CAST(SUM(uploads) AS BIGINT), CAST(SUM(upload_bytes) AS BIGINT) FROM summary_daily
         WHERE day >= $1 GROUP BY day",
    )
    .bind(first_day)
    .fetch_all(db.reader())
    .await?)
}

pub async fn shares(db: &Db) -> Result<i64, DbError> {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM shares").fetch_one(db.reader()).await?;
    Ok(n)
}

/// `(status, count)` for each status some task has.
pub async fn tasks_by_status(db: &Db) -> Result<Vec<(String, i64)>, DbError> {
    Ok(sqlx::query_as("SELECT status, COUNT(*) FROM tasks GROUP BY status").fetch_all(db.reader()).await?)
}

/// `(status, count)` for each status some storage node has.
pub async fn nodes_by_status(db: &Db) -> Result<Vec<(String, i64)>, DbError> {
    Ok(sqlx::query_as("SELECT status, COUNT(*) FROM nodes GROUP BY status").fetch_all(db.reader()).await?)
}

/// One user's counts for the administrators' detail view: `(files, folders, shares)`, root
/// folder and trash left out.
pub async fn user_counts(db: &Db, user: UserId) -> Result<(i64, i64, i64), DbError> {
    Ok(sqlx::query_as(
        "SELECT
            (SELECT COUNT(*) FROM objects WHERE owner_id = $1 AND kind = 'file' AND trashed_at IS NULL),
            (SELECT COUNT(*) FROM objects WHERE owner_id = $1 AND kind = 'folder' AND trashed_at IS NULL
                AND parent_id IS NOT NULL),
            (SELECT COUNT(*) FROM shares WHERE owner_id = $1)",
    )
    .bind(user)
    .fetch_one(db.reader())
    .await?)
}
