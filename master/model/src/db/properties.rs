//! SQL of `custom_property_definitions`: user-defined properties stored as object metadata.

use uuid::Uuid;

use super::{Db, DbError};
use crate::domain::ids::UserId;
use crate::domain::time::Millis;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PropertyRow {
    /// Stored as UUID text; properties have no id type of their own.
    #[sqlx(try_from = "String")]
    pub id: Uuid,
    pub owner_id: UserId,
    pub name: String,
    #[sqlx(rename = "type")]
    pub kind: String,
    pub options: String,
    pub default_value: Option<String>,
    pub created_at: Millis,
}

const COLUMNS: &str = "id, owner_id, name, type, options, default_value, created_at";

pub async fn list(db: &Db, owner_id: UserId) -> Result<Vec<PropertyRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM custom_property_definitions WHERE owner_id = $1 ORDER BY name"))
        .bind(owner_id)
        .fetch_all(db.reader())
        .await?)
}

pub async fn find_owned(db: &Db, owner_id: UserId, id: Uuid) -> Result<Option<PropertyRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM custom_property_definitions WHERE id = $1 AND owner_id = $2"))
        .bind(id.to_string())
        .bind(owner_id)
        .fetch_optional(db.reader())
        .await?)
}

pub async fn find_by_name(db: &Db, owner_id: UserId, name: &str) -> Result<Option<PropertyRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM custom_property_definitions WHERE owner_id = $1 AND name = $2"))
        .bind(owner_id)
        .bind(name)
        .fetch_optional(db.reader())
        .await?)
}

pub async fn insert(db: &Db, row: &PropertyRow) -> Result<(), DbError> {
    sqlx::query(&format!("INSERT INTO custom_property_definitions ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"))
        .bind(row.id.to_string())
        .bind(row.owner_id)
        .bind(row.name.as_str())
        .bind(row.kind.as_str())
        .bind(row.options.as_str())
        .bind(row.default_value.as_deref())
        .bind(row.created_at)
        .execute(db.writer())
        .await?;
    Ok(())
}

pub async fn update(db: &Db, row: &PropertyRow) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE custom_property_definitions SET name = $3, type = $4, options = $5, default_value = $6
         WHERE id = $1 AND owner_id = $2",
    )
    .bind(row.id.to_string())
    .bind(row.owner_id)
    .bind(row.name.as_str())
    .bind(row.kind.as_str())
    .bind(row.options.as_str())
    .bind(row.default_value.as_deref())
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}

pub async fn delete(db: &Db, owner_id: UserId, id: Uuid) -> Result<bool, DbError> {
    let done = sqlx::query("DELETE FROM custom_property_definitions WHERE id = $1 AND owner_id = $2")
        .bind(id.to_string())
        .bind(owner_id)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() > 0)
}
