//! SQL of `file_versions`: earlier contents of files, each holding a reference to its blob.

use super::{Conn, Db, DbError};
use crate::domain::ids::{ObjectId, UserId};
use crate::domain::time::Millis;

/// `$1` id, `$2` file, `$3` blob, `$4` size, `$5` when the content was written, `$6` when it was
/// replaced.
pub(super) const INSERT: &str =
    "INSERT INTO file_versions (id, object_id, blob_id, size, created_at, replaced_at) VALUES ($1, $2, $3, $4, $5, $6)";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct VersionRow {
    pub id: String,
    pub object_id: ObjectId,
    pub blob_id: String,
    pub size: i64,
    pub created_at: Millis,
    pub replaced_at: Millis,
    /// The content's hash (from its blob).
    pub blake3: Option<String>,
}

const COLUMNS: &str = "v.id, v.object_id, v.blob_id, v.size, v.created_at, v.replaced_at, b.blake3";
const FROM: &str = "file_versions v JOIN physical_files b ON b.id = v.blob_id";

/// Keeps the content `blob_id` of `size`, written at `written`, as a version of `object_id`.
pub async fn insert(
    conn: &mut Conn,
    object_id: ObjectId,
    blob_id: &str,
    size: i64,
    written: Millis,
    now: Millis,
) -> Result<(), DbError> {
    sqlx::query(INSERT)
        .bind(crate::domain::object::new_id().to_string())
        .bind(object_id)
        .bind(blob_id)
        .bind(size)
        .bind(written)
        .bind(now)
        .execute(conn)
        .await?;
    Ok(())
}

/// The versions of a file, newest first.
pub async fn list(db: &Db, object_id: ObjectId) -> Result<Vec<VersionRow>, DbError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM {FROM} WHERE v.object_id = $1 ORDER BY v.replaced_at DESC, v.id DESC"
    ))
    .bind(object_id)
    .fetch_all(db.reader())
    .await?)
}

/// Version `id` of file `object_id`.
pub async fn find(db: &Db, object_id: ObjectId, id: &str) -> Result<Option<VersionRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM {FROM} WHERE v.id = $1 AND v.object_id = $2"))
        .bind(id)
        .bind(object_id)
        .fetch_optional(db.reader())
        .await?)
}

/// Removes version `id` of `object_id`; answers its blob and size, or `None` when it was not
/// there (any more).
pub async fn delete(conn: &mut Conn, object_id: ObjectId, id: &str) -> Result<Option<(String, i64)>, DbError> {
    Ok(sqlx::query_as("DELETE FROM file_versions WHERE id = $1 AND object_id = $2 RETURNING blob_id, size")
        .bind(id)
        .bind(object_id)
        .fetch_optional(conn)
        .await?)
}

/// Removes the versions of every file in the tree under `root`; answers their blobs and sizes.
pub async fn delete_in_subtree(conn: &mut Conn, root: ObjectId) -> Result<Vec<(String, i64)>, DbError> {
    Ok(sqlx::query_as(
        "DELETE FROM file_versions WHERE object_id IN (
             WITH RECURSIVE tree(id) AS (
                 SELECT id FROM objects WHERE id = $1
                 UNION ALL
                 SELECT o.id FROM objects o JOIN tree t ON o.parent_id = t.id
             )
             SELECT id FROM tree
         ) RETURNING blob_id, size",
    )
    .bind(root)
    .fetch_all(conn)
    .await?)
}

/// Points file `object_id` at the content `blob_id` of `size` only while it still has the
/// content `current_blob` of `current_size` and is not in the trash; answers whether it did.
pub async fn swap_content(
    conn: &mut Conn,
    object_id: ObjectId,
    (current_blob, current_size): (&str, i64),
    (blob_id, size): (&str, i64),
    now: Millis,
) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE objects SET physical_file_id = $2, size = $3, updated_at = $4
         WHERE id = $1 AND physical_file_id = $5 AND size = $6 AND trashed_at IS NULL",
    )
    .bind(object_id)
    .bind(blob_id)
    .bind(size)
    .bind(now)
    .bind(current_blob)
    .bind(current_size)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// A version past its group's retention, with what deleting it gives back.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ExpiredVersion {
    pub id: String,
    pub object_id: ObjectId,
    pub owner_id: UserId,
}

/// Up to `limit` versions past their owner's group retention at `now`: beyond the
/// `version_max_count` newest of their file, or replaced more than `version_max_days` ago.
pub async fn expired(db: &Db, now: Millis, limit: i64) -> Result<Vec<ExpiredVersion>, DbError> {
    Ok(sqlx::query_as(
        "SELECT r.id, r.object_id, r.owner_id FROM (
             SELECT v.id, v.object_id, o.owner_id, v.replaced_at, g.version_max_count, g.version_max_days,
                    ROW_NUMBER() OVER (PARTITION BY v.object_id ORDER BY v.replaced_at DESC, v.id DESC) AS position
             FROM file_versions v
             JOIN objects o ON o.id = v.object_id
             JOIN users u ON u.id = o.owner_id
             JOIN groups g ON g.id = u.group_id
         ) r
         WHERE r.position > r.version_max_count
            OR (r.version_max_days > 0 AND r.replaced_at < $1 - CAST(r.version_max_days AS BIGINT) * 86400000)
         LIMIT $2",
    )
    .bind(now)
    .bind(limit)
    .fetch_all(db.reader())
    .await?)
}

/// The bytes of every version of the user's files (they count in the used storage).
pub async fn owned_bytes(db: &Db, owner: UserId) -> Result<i64, DbError> {
    let (bytes,): (Option<i64>,) = sqlx::query_as(
        "SELECT CAST(SUM(v.size) AS BIGINT) FROM file_versions v JOIN objects o ON o.id = v.object_id
         WHERE o.owner_id = $1",
    )
    .bind(owner)
    .fetch_one(db.reader())
    .await?;
    Ok(bytes.unwrap_or(0))
}
