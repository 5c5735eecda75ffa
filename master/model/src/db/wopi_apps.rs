//! SQL of the `wopi_apps` table.

use uuid::Uuid;

use super::columns::Flag;
use super::{Db, DbError};
use crate::domain::time::Millis;

const COLUMNS: &str =
    "id, name, discovery_url, internal, allow_unsigned, discovery, error, refreshed_at, created_at, updated_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WopiAppRow {
    #[sqlx(try_from = "String")]
    pub id: Uuid,
    pub name: String,
    pub discovery_url: String,
    #[sqlx(try_from = "Flag")]
    pub internal: bool,
    #[sqlx(try_from = "Flag")]
    pub allow_unsigned: bool,
    /// The parsed discovery as JSON (`service::wopi_discovery::Discovery`).
    pub discovery: Option<String>,
    pub error: Option<String>,
    pub refreshed_at: Option<Millis>,
    pub created_at: Millis,
    pub updated_at: Millis,
}

pub async fn list(db: &Db) -> Result<Vec<WopiAppRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM wopi_apps ORDER BY name")).fetch_all(db.reader()).await?)
}

pub async fn find(db: &Db, id: Uuid) -> Result<Option<WopiAppRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM wopi_apps WHERE id = $1"))
        .bind(id.to_string())
        .fetch_optional(db.reader())
        .await?)
}

pub async fn insert(db: &Db, row: &WopiAppRow) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO wopi_apps (id, name, discovery_url, internal, allow_unsigned, discovery, error, refreshed_at,
                                created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(row.id.to_string())
    .bind(&row.name)
    .bind(&row.discovery_url)
    .bind(i64::from(row.internal))
    .bind(i64::from(row.allow_unsigned))
    .bind(row.discovery.as_deref())
    .bind(row.error.as_deref())
    .bind(row.refreshed_at)
    .bind(row.created_at)
    .bind(row.updated_at)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// Changes what the administrator sets; answers whether the application exists.
pub async fn update(db: &Db, row: &WopiAppRow) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE wopi_apps SET name = $2, discovery_url = $3, internal = $4, allow_unsigned = $5, updated_at = $6
         WHERE id = $1",
    )
    .bind(row.id.to_string())
    .bind(&row.name)
    .bind(&row.discovery_url)
    .bind(i64::from(row.internal))
    .bind(i64::from(row.allow_unsigned))
    .bind(row.updated_at)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Records a fetch: a new discovery (the error cleared), or only the error (the last good
/// discovery stays).
pub async fn record_fetch(
    db: &Db,
    id: Uuid,
    discovery: Option<&str>,
    error: Option<&str>,
    at: Millis,
) -> Result<(), DbError> {
    sqlx::query(
        "UPDATE wopi_apps SET discovery = COALESCE($2, discovery), error = $3, refreshed_at = $4 WHERE id = $1",
    )
    .bind(id.to_string())
    .bind(discovery)
    .bind(error)
    .bind(at)
    .execute(db.writer())
    .await?;
    Ok(())
}

pub async fn delete(db: &Db, id: Uuid) -> Result<bool, DbError> {
    let done = sqlx::query("DELETE FROM wopi_apps WHERE id = $1").bind(id.to_string()).execute(db.writer()).await?;
    Ok(done.rows_affected() > 0)
}
