//! SQL of the `nodes` table: the storage nodes this master knows.

use super::columns::{Flag, JsonDocument};
use super::{Db, DbError};
use crate::domain::ids::NodeId;
use crate::domain::node::NodeStatus;
use crate::domain::time::Millis;

const COLUMNS: &str =
    "id, name, base_url, secret_key, enabled, status, last_heartbeat, free_space, capabilities, created_at, updated_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct NodeRow {
    pub id: NodeId,
    pub name: String,
    pub base_url: String,
    /// The key shared with the node (it signs with it, so it is kept as is).
    pub secret_key: String,
    #[sqlx(try_from = "Flag")]
    pub enabled: bool,
    pub status: NodeStatus,
    pub last_heartbeat: Option<Millis>,
    pub free_space: Option<i64>,
    /// What the node said it can do at its last check (`{}` before the first).
    #[sqlx(try_from = "JsonDocument")]
    pub capabilities: serde_json::Value,
    pub created_at: Millis,
    pub updated_at: Millis,
}

pub async fn list(db: &Db) -> Result<Vec<NodeRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM nodes ORDER BY name")).fetch_all(db.reader()).await?)
}

pub async fn find(db: &Db, id: NodeId) -> Result<Option<NodeRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM nodes WHERE id = $1"))
        .bind(id)
        .fetch_optional(db.reader())
        .await?)
}

pub async fn insert(db: &Db, node: &NodeRow) -> Result<(), DbError> {
    sqlx::query(&format!("INSERT INTO nodes ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"))
        .bind(node.id)
        .bind(node.name.as_str())
        .bind(node.base_url.as_str())
        .bind(node.secret_key.as_str())
        .bind(i64::from(node.enabled))
        .bind(node.status)
        .bind(node.last_heartbeat)
        .bind(node.free_space)
        .bind(node.capabilities.to_string())
        .bind(node.created_at)
        .bind(node.updated_at)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// Replaces the fields administrators edit.
pub async fn update(db: &Db, node: &NodeRow) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE nodes SET name = $2, base_url = $3, secret_key = $4, enabled = $5, updated_at = $6 WHERE id = $1",
    )
    .bind(node.id)
    .bind(node.name.as_str())
    .bind(node.base_url.as_str())
    .bind(node.secret_key.as_str())
    .bind(i64::from(node.enabled))
    .bind(node.updated_at)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Records the outcome of a health check.
pub async fn set_health(
    db: &Db,
    id: NodeId,
    status: NodeStatus,
    heartbeat: Option<Millis>,
    free_space: Option<i64>,
    capabilities: &serde_json::Value,
) -> Result<(), DbError> {
    sqlx::query(
        "UPDATE nodes SET status = $2, last_heartbeat = COALESCE($3, last_heartbeat), free_space = $4, capabilities = $5
         WHERE id = $1",
    )
    .bind(id)
    .bind(status)
    .bind(heartbeat)
    .bind(free_space)
    .bind(capabilities.to_string())
    .execute(db.writer())
    .await?;
    Ok(())
}

/// How many policies store their bytes on the node.
pub async fn policies_using(db: &Db, id: NodeId) -> Result<i64, DbError> {
    let (n,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM policies WHERE node_id = $1").bind(id).fetch_one(db.reader()).await?;
    Ok(n)
}

pub async fn delete(db: &Db, id: NodeId) -> Result<bool, DbError> {
    let done = sqlx::query("DELETE FROM nodes WHERE id = $1").bind(id).execute(db.writer()).await?;
    Ok(done.rows_affected() > 0)
}
