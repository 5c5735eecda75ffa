//! SQL of `upload_sessions` and `upload_chunks`.

use super::{Conn, Db, DbError};
use crate::domain::time::Millis;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SessionRow {
    pub id: String,
    pub owner_id: String,
    pub parent_id: String,
    pub file_name: String,
    pub policy_id: String,
    /// The storage node that receives the chunks directly, for node-backed policies.
    pub node_id: Option<String>,
    pub declared_size: i64,
    pub chunk_size: i64,
    pub total_chunks: i32,
    pub storage_key: String,
    pub driver_state: String,
    pub replace_object_id: Option<String>,
    pub status: String,
    pub expires_at: Millis,
    pub created_at: Millis,
}

const COLUMNS: &str = "id, owner_id, parent_id, file_name, policy_id, node_id, declared_size, chunk_size, total_chunks, storage_key, \
     driver_state, replace_object_id, status, expires_at, created_at";

/// Session states: receiving chunks, or claimed by one request that is finishing or aborting it.
pub const UPLOADING: &str = "uploading";
pub const FINISHING: &str = "finishing";
pub const ABORTING: &str = "aborting";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ChunkRow {
    pub chunk_index: i32,
    pub size: i64,
    pub etag: Option<String>,
    pub chaining_value: String,
}

pub async fn insert(conn: &mut Conn, s: &SessionRow) -> Result<(), DbError> {
    sqlx::query(&format!(
        "INSERT INTO upload_sessions ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"
    ))
    .bind(s.id.as_str())
    .bind(s.owner_id.as_str())
    .bind(s.parent_id.as_str())
    .bind(s.file_name.as_str())
    .bind(s.policy_id.as_str())
    .bind(s.node_id.as_deref())
    .bind(s.declared_size)
    .bind(s.chunk_size)
    .bind(s.total_chunks)
    .bind(s.storage_key.as_str())
    .bind(s.driver_state.as_str())
    .bind(s.replace_object_id.as_deref())
    .bind(s.status.as_str())
    .bind(s.expires_at)
    .bind(s.created_at)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn find_owned(db: &Db, owner_id: &str, id: &str) -> Result<Option<SessionRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM upload_sessions WHERE id = $1 AND owner_id = $2"))
        .bind(id)
        .bind(owner_id)
        .fetch_optional(db.reader())
        .await?)
}

/// The session of node `node_id` whose blob goes to `storage_key` (what a node's completion
/// report names).
pub async fn find_for_node(db: &Db, node_id: &str, storage_key: &str) -> Result<Option<SessionRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM upload_sessions WHERE node_id = $1 AND storage_key = $2"))
        .bind(node_id)
        .bind(storage_key)
        .fetch_optional(db.reader())
        .await?)
}

pub async fn chunks(db: &Db, session_id: &str) -> Result<Vec<ChunkRow>, DbError> {
    Ok(sqlx::query_as(
        "SELECT chunk_index, size, etag, chaining_value FROM upload_chunks WHERE session_id = $1 ORDER BY chunk_index",
    )
    .bind(session_id)
    .fetch_all(db.reader())
    .await?)
}

/// Records a received chunk, replacing an earlier copy of the same index.
pub async fn upsert_chunk(db: &Db, session_id: &str, chunk: &ChunkRow, now: Millis) -> Result<(), DbError> {
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

/// Moves a session from `from` to `to`; answers false when another request got there first.
pub async fn transition(db: &Db, id: &str, from: &str, to: &str) -> Result<bool, DbError> {
    let done = sqlx::query("UPDATE upload_sessions SET status = $3 WHERE id = $1 AND status = $2")
        .bind(id)
        .bind(from)
        .bind(to)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() > 0)
}

pub async fn delete(conn: &mut Conn, id: &str) -> Result<(), DbError> {
    sqlx::query("DELETE FROM upload_sessions WHERE id = $1").bind(id).execute(conn).await?;
    Ok(())
}

/// Sessions whose time ran out before `now`, in any state (one left `finishing` or `aborting`
/// by a master that died half-way is expired too).
pub async fn expired(db: &Db, now: Millis, limit: i64) -> Result<Vec<SessionRow>, DbError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM upload_sessions WHERE expires_at < $1 ORDER BY expires_at LIMIT $2"
    ))
    .bind(now)
    .bind(limit)
    .fetch_all(db.reader())
    .await?)
}

/// Bytes reserved by a user's open sessions.
pub async fn reserved_bytes(db: &Db, owner_id: &str) -> Result<i64, DbError> {
    let (n,): (Option<i64>,) =
        sqlx::query_as("SELECT CAST(SUM(declared_size) AS BIGINT) FROM upload_sessions WHERE owner_id = $1")
            .bind(owner_id)
            .fetch_one(db.reader())
            .await?;
    Ok(n.unwrap_or(0))
}

/// Storage keys open sessions of a policy will complete into.
pub async fn keys_of_policy(db: &Db, policy_id: &str) -> Result<Vec<String>, DbError> {
    let rows: Vec<(String,)> = sqlx::query_as("SELECT storage_key FROM upload_sessions WHERE policy_id = $1")
        .bind(policy_id)
        .fetch_all(db.reader())
        .await?;
    Ok(rows.into_iter().map(|(k,)| k).collect())
}
