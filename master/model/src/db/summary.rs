//! SQL of the administration summary: every aggregate `GET /admin/summary` shows, in one place.
//! Object and blob totals and files added per day come from the counters that triggers keep
//! (migration 0014, `summary_counters` and `summary_daily`, plus on PostgreSQL the changes in
//! `summary_deltas` not folded into them yet), not from scanning `objects`.

use super::{Backend, Db, DbError};
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

/// The counters with the changes not folded yet, read in one statement (one snapshot). `SUM`
/// of BIGINT is NUMERIC on PostgreSQL, which the `Any` driver does not read: hence the casts.
pub async fn counters(db: &Db) -> Result<Counters, DbError> {
    const SUMS: &str = "COALESCE(SUM(files), 0) AS files, COALESCE(SUM(folders), 0) AS folders,
        COALESCE(SUM(trashed), 0) AS trashed, COALESCE(SUM(file_bytes), 0) AS file_bytes,
        COALESCE(SUM(blobs), 0) AS blobs, COALESCE(SUM(blob_bytes), 0) AS blob_bytes";
    Ok(sqlx::query_as(&format!(
        "SELECT CAST(c.files + d.files AS BIGINT) AS files, CAST(c.folders + d.folders AS BIGINT) AS folders,
                CAST(c.trashed + d.trashed AS BIGINT) AS trashed,
                CAST(c.file_bytes + d.file_bytes AS BIGINT) AS file_bytes,
                CAST(c.blobs + d.blobs AS BIGINT) AS blobs, CAST(c.blob_bytes + d.blob_bytes AS BIGINT) AS blob_bytes
         FROM (SELECT {SUMS} FROM summary_counters) c, (SELECT {SUMS} FROM summary_deltas) d"
    ))
    .fetch_one(db.reader())
    .await?)
}

/// Folds PostgreSQL's appended changes into the counters and the days, in one statement: the
/// rows it deletes are the rows it adds up (one snapshot), and a second master folding at the
/// same time waits on the rows and then finds them gone. Answers how many changes were folded.
/// SQLite's triggers update the counters themselves: nothing to do there.
pub async fn fold(db: &Db) -> Result<u64, DbError> {
    if db.backend() != Backend::Postgres {
        return Ok(0);
    }
    let (folded,): (i64,) = sqlx::query_as(
        "WITH moved AS (DELETE FROM summary_deltas RETURNING *),
         totals AS (
             UPDATE summary_counters c SET files = c.files + m.files, folders = c.folders + m.folders,
                 trashed = c.trashed + m.trashed, file_bytes = c.file_bytes + m.file_bytes,
                 blobs = c.blobs + m.blobs, blob_bytes = c.blob_bytes + m.blob_bytes
             FROM (SELECT COALESCE(SUM(files), 0) AS files, COALESCE(SUM(folders), 0) AS folders,
                          COALESCE(SUM(trashed), 0) AS trashed, COALESCE(SUM(file_bytes), 0) AS file_bytes,
                          COALESCE(SUM(blobs), 0) AS blobs, COALESCE(SUM(blob_bytes), 0) AS blob_bytes
                   FROM moved) m
             WHERE c.shard = 0
         ),
         days AS (
             INSERT INTO summary_daily (day, shard, uploads, upload_bytes)
             SELECT day, 0, SUM(uploads), SUM(upload_bytes) FROM moved WHERE day IS NOT NULL GROUP BY day
             ON CONFLICT (day, shard) DO UPDATE SET uploads = summary_daily.uploads + excluded.uploads,
                 upload_bytes = summary_daily.upload_bytes + excluded.upload_bytes
         )
         SELECT COUNT(*) FROM moved",
    )
    .fetch_one(db.writer())
    .await?;
    Ok(folded as u64)
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

/// Files added on each UTC day from `first_day` on: `(day number, files, bytes)`, the changes
/// not folded yet included.
pub async fn uploads_per_day(db: &Db, first_day: i64) -> Result<Vec<(i64, i64, i64)>, DbError> {
    Ok(sqlx::query_as(
        "SELECT day, CAST(SUM(uploads) AS BIGINT), CAST(SUM(upload_bytes) AS BIGINT) FROM (
             SELECT day, uploads, upload_bytes FROM summary_daily WHERE day >= $1
             UNION ALL
             SELECT day, uploads, upload_bytes FROM summary_deltas WHERE day >= $1
         ) AS added GROUP BY day",
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
