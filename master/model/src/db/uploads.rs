//! SQL of `upload_sessions` and `upload_chunks`.

use super::ingest::{Step, StepArg};
use super::{Conn, Db, DbError};
use crate::domain::ids::{NodeId, ObjectId, PolicyId, UploadId, UserId};
use crate::domain::time::Millis;
use crate::domain::upload::UploadStatus;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SessionRow {
    pub id: UploadId,
    pub owner_id: UserId,
    pub parent_id: ObjectId,
    pub file_name: String,
    pub policy_id: PolicyId,
    /// The storage node that receives the chunks directly, for node-backed policies.
    pub node_id: Option<NodeId>,
    pub declared_size: i64,
    pub chunk_size: i64,
    pub total_chunks: i32,
    pub storage_key: String,
    pub driver_state: String,
    pub replace_object_id: Option<ObjectId>,
    /// The blob of `replace_object_id` the upload may replace, when the client named the content
    /// it replaces: completion refuses once the file has other content.
    pub replace_blob_id: Option<String>,
    pub status: UploadStatus,
    pub expires_at: Millis,
    pub created_at: Millis,
}

const COLUMNS: &str = "id, owner_id, parent_id, file_name, policy_id, node_id, declared_size, chunk_size, total_chunks, storage_key, \
     driver_state, replace_object_id, replace_blob_id, status, expires_at, created_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ChunkRow {
    pub chunk_index: i32,
    pub size: i64,
    pub etag: Option<String>,
    pub chaining_value: String,
}

pub async fn insert(conn: &mut Conn, s: &SessionRow) -> Result<(), DbError> {
    sqlx::query(&format!(
        "INSERT INTO upload_sessions ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)"
    ))
    .bind(s.id)
    .bind(s.owner_id)
    .bind(s.parent_id)
    .bind(s.file_name.as_str())
    .bind(s.policy_id)
    .bind(s.node_id)
    .bind(s.declared_size)
    .bind(s.chunk_size)
    .bind(s.total_chunks)
    .bind(s.storage_key.as_str())
    .bind(s.driver_state.as_str())
    .bind(s.replace_object_id)
    .bind(s.replace_blob_id.as_deref())
    .bind(s.status)
    .bind(s.expires_at)
    .bind(s.created_at)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn find_owned(db: &Db, owner_id: UserId, id: UploadId) -> Result<Option<SessionRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM upload_sessions WHERE id = $1 AND owner_id = $2"))
        .bind(id)
        .bind(owner_id)
        .fetch_optional(db.reader())
        .await?)
}

/// The session of node `node_id` whose blob goes to `storage_key` (what a node's completion
/// report names).
pub async fn find_for_node(db: &Db, node_id: NodeId, storage_key: &str) -> Result<Option<SessionRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM upload_sessions WHERE node_id = $1 AND storage_key = $2"))
        .bind(node_id)
        .bind(storage_key)
        .fetch_optional(db.reader())
        .await?)
}

pub async fn chunks(db: &Db, session_id: UploadId) -> Result<Vec<ChunkRow>, DbError> {
    Ok(sqlx::query_as(
        "SELECT chunk_index, size, etag, chaining_value FROM upload_chunks WHERE session_id = $1 ORDER BY chunk_index",
    )
    .bind(session_id)
    .fetch_all(db.reader())
    .await?)
}

/// Forgets the receipt of chunk `index`, before its bytes are sent again: while they arrive the
/// chunk counts as missing, so no completion can pair the old receipt with new bytes.
pub async fn forget_chunk(db: &Db, session_id: UploadId, index: i32) -> Result<(), DbError> {
    sqlx::query("DELETE FROM upload_chunks WHERE session_id = $1 AND chunk_index = $2")
        .bind(session_id)
        .bind(index)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// Records a received chunk, replacing an earlier copy of the same index.
pub async fn upsert_chunk(db: &Db, session_id: UploadId, chunk: &ChunkRow, now: Millis) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO upload_chunks (session_id, chunk_index, size, etag, chaining_value, received_at)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (session_id, chunk_index) DO UPDATE
         SET size = excluded.size, etag = excluded.etag, chaining_value = excluded.chaining_value, received_at = excluded.received_at",
    )
    .bind(session_id)
    .bind(chunk.chunk_index)
    .bind(chunk.size)
    .bind(chunk.etag.as_deref())
    .bind(chunk.chaining_value.as_str())
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// Claims a session for one request, which will finish (`to` = [`UploadStatus::Finishing`]) or
/// abort ([`UploadStatus::Aborting`]) it: from `uploading`, or over a claim in one of `stale_states` whose lease ran
/// out (not renewed since `stale_before`, or never timed). Answers false when another request
/// holds a live claim (or the session is gone).
pub async fn claim(
    db: &Db,
    id: UploadId,
    to: UploadStatus,
    token: &str,
    now: Millis,
    stale_before: Millis,
    stale_states: &[UploadStatus],
) -> Result<bool, DbError> {
    // Two slots for the states a stale claim may be in; an unused one repeats the first.
    let first = stale_states.first().copied().unwrap_or(UploadStatus::Uploading);
    let second = stale_states.get(1).copied().unwrap_or(first);
    let done = sqlx::query(
        "UPDATE upload_sessions SET status = $2, claim_token = $3, claimed_at = $4
         WHERE id = $1 AND (status = 'uploading'
             OR (status IN ($6, $7) AND (claimed_at IS NULL OR claimed_at < $5)))",
    )
    .bind(id)
    .bind(to)
    .bind(token)
    .bind(now)
    .bind(stale_before)
    .bind(first)
    .bind(second)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Renews the lease of the claim `token`; answers false when the claim was lost.
pub async fn renew_claim(db: &Db, id: UploadId, token: &str, now: Millis) -> Result<bool, DbError> {
    let done = sqlx::query("UPDATE upload_sessions SET claimed_at = $3 WHERE id = $1 AND claim_token = $2")
        .bind(id)
        .bind(token)
        .bind(now)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Gives the claim `token` up: the session is `uploading` again. Answers false when the claim
/// was no longer held.
pub async fn release_claim(db: &Db, id: UploadId, token: &str) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE upload_sessions SET status = 'uploading', claim_token = NULL, claimed_at = NULL
         WHERE id = $1 AND claim_token = $2",
    )
    .bind(id)
    .bind(token)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}

/// [`delete_claimed`] as a step of a file's commit ([`super::ingest`]): the session ends with
/// the file it became, and nothing is committed when the claim was taken over.
pub fn end_claimed_step(id: UploadId, token: &str) -> Step {
    Step {
        sql: "DELETE FROM upload_sessions WHERE id = $1 AND claim_token = $2",
        args: vec![StepArg::Text(id.to_string()), StepArg::Text(token.to_owned())],
        required: true,
    }
}

/// Deletes the session only while the claim `token` holds it (the fence that keeps a finisher
/// whose claim was taken over from recording the file a second time). Answers whether it did.
pub async fn delete_claimed(conn: &mut Conn, id: UploadId, token: &str) -> Result<bool, DbError> {
    let done = sqlx::query("DELETE FROM upload_sessions WHERE id = $1 AND claim_token = $2")
        .bind(id)
        .bind(token)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Sessions claimed (`finishing` or `aborting`) whose lease was not renewed since
/// `stale_before`: their holder died.
pub async fn stale_claims(db: &Db, stale_before: Millis, limit: i64) -> Result<Vec<SessionRow>, DbError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM upload_sessions
         WHERE status IN ('finishing', 'aborting') AND (claimed_at IS NULL OR claimed_at < $1)
         ORDER BY created_at LIMIT $2"
    ))
    .bind(stale_before)
    .bind(limit)
    .fetch_all(db.reader())
    .await?)
}

/// Sessions whose time ran out before `now`: open ones, and claimed ones whose claim is stale
/// (not renewed since `stale_before`: a master died half-way). A live claim is left to its
/// holder, which deletes the session itself.
pub async fn expired(db: &Db, now: Millis, stale_before: Millis, limit: i64) -> Result<Vec<SessionRow>, DbError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM upload_sessions
         WHERE expires_at < $1 AND (status = 'uploading' OR claimed_at IS NULL OR claimed_at < $2)
         ORDER BY expires_at LIMIT $3"
    ))
    .bind(now)
    .bind(stale_before)
    .bind(limit)
    .fetch_all(db.reader())
    .await?)
}

/// One page of `owner_id`'s sessions, newest first, and how many there are.
pub async fn page_owned(db: &Db, owner_id: UserId, offset: i64, limit: i64) -> Result<(Vec<SessionRow>, i64), DbError> {
    let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM upload_sessions WHERE owner_id = $1")
        .bind(owner_id)
        .fetch_one(db.reader())
        .await?;
    let rows = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM upload_sessions WHERE owner_id = $1 ORDER BY created_at DESC, id LIMIT $2 OFFSET $3"
    ))
    .bind(owner_id)
    .bind(limit)
    .bind(offset)
    .fetch_all(db.reader())
    .await?;
    Ok((rows, count))
}

/// Bytes reserved by a user's open sessions.
pub async fn reserved_bytes(db: &Db, owner_id: UserId) -> Result<i64, DbError> {
    let (n,): (Option<i64>,) =
        sqlx::query_as("SELECT CAST(SUM(declared_size) AS BIGINT) FROM upload_sessions WHERE owner_id = $1")
            .bind(owner_id)
            .fetch_one(db.reader())
            .await?;
    Ok(n.unwrap_or(0))
}

/// Storage keys open sessions of a policy will complete into.
pub async fn keys_of_policy(db: &Db, policy_id: PolicyId) -> Result<Vec<String>, DbError> {
    let rows: Vec<(String,)> = sqlx::query_as("SELECT storage_key FROM upload_sessions WHERE policy_id = $1")
        .bind(policy_id)
        .fetch_all(db.reader())
        .await?;
    Ok(rows.into_iter().map(|(k,)| k).collect())
}
