//! SQL of `physical_files`: stored blobs with their content hash and reference count.

use super::{Arg, Conn, Db, DbError, Values};
use crate::domain::ids::{PolicyId, UserId};
use crate::domain::time::Millis;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct BlobRow {
    pub id: String,
    pub policy_id: PolicyId,
    pub storage_key: String,
    pub size: i64,
    pub blake3: Option<String>,
    pub ref_count: i64,
}

impl BlobRow {
    /// A blob of new content at `key`, with the one reference its first file takes.
    pub fn new_content(id: &str, policy_id: PolicyId, key: &str, size: i64, blake3: &str) -> Self {
        Self {
            id: id.to_owned(),
            policy_id,
            storage_key: key.to_owned(),
            size,
            blake3: Some(blake3.to_owned()),
            ref_count: 1,
        }
    }
}

const COLUMNS: &str = "id, policy_id, storage_key, size, blake3, ref_count";

pub async fn find(db: &Db, id: &str) -> Result<Option<BlobRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM physical_files WHERE id = $1"))
        .bind(id)
        .fetch_optional(db.reader())
        .await?)
}

/// The select list of a blob `b` with its policy `p`, for [`with_policy_of`]: the blob's
/// columns are renamed where the policy has one of the same name.
pub(super) fn with_policy_columns() -> String {
    format!(
        "b.id AS blob_id, b.policy_id AS blob_policy_id, b.storage_key, b.size AS blob_size, b.blake3, b.ref_count, {}",
        super::policies::qualified_columns("p")
    )
}

/// The blob and its policy from a row read with [`with_policy_columns`], from either executor.
pub(super) fn with_policy_of(row: &dyn Values) -> Result<(BlobRow, super::policies::PolicyRow), DbError> {
    let blob = BlobRow {
        id: row.text("blob_id")?,
        policy_id: row.parsed("blob_policy_id")?,
        storage_key: row.text("storage_key")?,
        size: row.int("blob_size")?,
        blake3: row.opt_text("blake3")?,
        ref_count: row.int("ref_count")?,
    };
    Ok((blob, super::policies::PolicyRow::read(row)?))
}

/// The blob with id `id` and the policy it is stored under, in one statement: what opening a
/// file's content needs.
pub async fn find_with_policy(db: &Db, id: &str) -> Result<Option<(BlobRow, super::policies::PolicyRow)>, DbError> {
    let sql = format!(
        "SELECT {} FROM physical_files b JOIN policies p ON p.id = b.policy_id WHERE b.id = $1",
        with_policy_columns()
    );
    db.read_row(&sql, &[Arg::Text(id)], with_policy_of).await
}

/// The policy's (`$1`) live blobs with blake3 `$2` and size `$3` (a macro, so the statements
/// built on it are constants).
macro_rules! same_content {
    () => {
        "policy_id = $1 AND blake3 = $2 AND size = $3 AND ref_count > 0"
    };
}

/// Of [`same_content!`], the blobs content of owner `$4` may be de-duplicated onto: one whose
/// hash the server computed over its stored bytes whole, or one the owner's own files refer to
/// (a hash merged from chunk values is taken on trust only from the owner who sent the chunks).
macro_rules! dedup_target {
    () => {
        concat!(
            same_content!(),
            " AND (hashed_whole = 1 OR EXISTS (SELECT 1 FROM objects o",
            " WHERE o.physical_file_id = physical_files.id AND o.owner_id = $4))"
        )
    };
}

/// The id of the oldest blob of [`dedup_target!`].
pub(super) const SAME_CONTENT_ID: &str =
    concat!("SELECT id FROM physical_files WHERE ", dedup_target!(), " ORDER BY created_at, id LIMIT 1");

/// Whether the policy holds a live blob with this content that a file of `owner_id` may refer to
/// instead of storing the bytes again (the one [`SAME_CONTENT_ID`] names).
pub async fn holds_content(
    db: &Db,
    policy_id: PolicyId,
    owner_id: UserId,
    blake3: &str,
    size: i64,
) -> Result<bool, DbError> {
    let (policy_id, owner_id) = (policy_id.to_string(), owner_id.to_string());
    let args = [Arg::Text(&policy_id), Arg::Text(blake3), Arg::Int(size), Arg::Text(&owner_id)];
    Ok(db.read_row(SAME_CONTENT_ID, &args, |row| row.text("id")).await?.is_some())
}

/// Whether `owner` has a file (in the trash or not) whose content is a live blob of the policy
/// with this hash and size: proof that the owner holds the bytes, so a new file of theirs may
/// refer to that content without sending it.
pub async fn owner_holds_content(
    db: &Db,
    owner_id: UserId,
    policy_id: PolicyId,
    blake3: &str,
    size: i64,
) -> Result<bool, DbError> {
    let (policy_id, owner_id) = (policy_id.to_string(), owner_id.to_string());
    let sql = concat!(
        "SELECT id FROM physical_files b WHERE ",
        same_content!(),
        " AND EXISTS (SELECT 1 FROM objects o WHERE o.physical_file_id = b.id AND o.owner_id = $4) LIMIT 1"
    );
    let args = [Arg::Text(&policy_id), Arg::Text(blake3), Arg::Int(size), Arg::Text(&owner_id)];
    Ok(db.read_row(sql, &args, |row| row.text("id")).await?.is_some())
}

/// The policy's oldest blob with the same content that content of `owner_id` may be
/// de-duplicated onto (the one [`SAME_CONTENT_ID`] names).
pub async fn find_same_content(
    conn: &mut Conn,
    policy_id: PolicyId,
    (blake3, size): (&str, i64),
    owner_id: UserId,
) -> Result<Option<BlobRow>, DbError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM physical_files WHERE {} ORDER BY created_at, id LIMIT 1",
        dedup_target!()
    ))
    .bind(policy_id)
    .bind(blake3)
    .bind(size)
    .bind(owner_id)
    .fetch_optional(conn)
    .await?)
}

/// `$1`..`$8`: id, policy, storage key, size, blake3, references, now, hashed whole (1 or 0).
pub(super) const INSERT: &str =
    "INSERT INTO physical_files (id, policy_id, storage_key, size, blake3, ref_count, created_at, hashed_whole)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

/// Adds the row of a blob whose hash is not known to be of its bytes whole (see [`INSERT`]).
pub async fn insert(conn: &mut Conn, blob: &BlobRow, now: Millis) -> Result<(), DbError> {
    insert_hashed(conn, blob, false, now).await
}

/// Adds the row of a blob; `hashed_whole`: the server computed its hash over the stored bytes.
pub async fn insert_hashed(conn: &mut Conn, blob: &BlobRow, hashed_whole: bool, now: Millis) -> Result<(), DbError> {
    sqlx::query(INSERT)
        .bind(blob.id.as_str())
        .bind(blob.policy_id)
        .bind(blob.storage_key.as_str())
        .bind(blob.size)
        .bind(blob.blake3.as_deref())
        .bind(blob.ref_count)
        .bind(now)
        .bind(i64::from(hashed_whole))
        .execute(conn)
        .await?;
    Ok(())
}

/// `$1` the blob, `$2` what its reference count changes by; answers the new count.
pub(super) const ADD_REFS: &str =
    "UPDATE physical_files SET ref_count = ref_count + $2 WHERE id = $1 RETURNING ref_count";

/// Adds `by` (which may be negative) to the reference count and answers the new count.
pub async fn add_refs(conn: &mut Conn, id: &str, by: i64) -> Result<i64, DbError> {
    let (count,): (i64,) = sqlx::query_as(ADD_REFS).bind(id).bind(by).fetch_one(conn).await?;
    Ok(count)
}

/// Removes the row of an unreferenced blob; answers whether it was removed.
pub async fn delete_unreferenced(conn: &mut Conn, id: &str) -> Result<bool, DbError> {
    let done = sqlx::query("DELETE FROM physical_files WHERE id = $1 AND ref_count = 0").bind(id).execute(conn).await?;
    Ok(done.rows_affected() > 0)
}

pub async fn count_for_policy(db: &Db, policy_id: PolicyId) -> Result<i64, DbError> {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM physical_files WHERE policy_id = $1")
        .bind(policy_id)
        .fetch_one(db.reader())
        .await?;
    Ok(n)
}

/// Gives a journalled blob (written, not yet referenced) its verified hash; the caller adds
/// the first reference in the same transaction.
pub async fn activate(conn: &mut Conn, id: &str, blake3: &str) -> Result<(), DbError> {
    sqlx::query("UPDATE physical_files SET blake3 = $2 WHERE id = $1").bind(id).bind(blake3).execute(conn).await?;
    Ok(())
}

/// Blobs without references created before `before` (journal rows of interrupted copies, or
/// blobs whose deletion failed), oldest first.
pub async fn unreferenced_before(db: &Db, before: Millis, limit: i64) -> Result<Vec<BlobRow>, DbError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM physical_files WHERE ref_count = 0 AND created_at < $1 ORDER BY created_at LIMIT $2"
    ))
    .bind(before)
    .bind(limit)
    .fetch_all(db.reader())
    .await?)
}

/// Storage keys of every blob row of a policy.
pub async fn keys_of_policy(db: &Db, policy_id: PolicyId) -> Result<Vec<String>, DbError> {
    let rows: Vec<(String,)> = sqlx::query_as("SELECT storage_key FROM physical_files WHERE policy_id = $1")
        .bind(policy_id)
        .fetch_all(db.reader())
        .await?;
    Ok(rows.into_iter().map(|(k,)| k).collect())
}

/// Whether a blob row of the policy has this storage key.
pub async fn key_exists(db: &Db, policy_id: PolicyId, key: &str) -> Result<bool, DbError> {
    let row: Option<(String,)> =
        sqlx::query_as("SELECT id FROM physical_files WHERE policy_id = $1 AND storage_key = $2")
            .bind(policy_id)
            .bind(key)
            .fetch_optional(db.reader())
            .await?;
    Ok(row.is_some())
}
