//! SQL of the `groups` table.

use super::{Db, DbError};
use crate::domain::time::Millis;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct GroupRow {
    pub id: String,
    pub name: String,
    pub is_admin: bool,
    pub max_storage: i64,
    pub permissions: String,
    pub created_at: Millis,
    pub updated_at: Millis,
}

pub struct NewGroup<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub is_admin: bool,
    pub max_storage: i64,
    pub permissions: &'a str,
}

pub async fn count(db: &Db) -> Result<i64, DbError> {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM groups")
        .fetch_one(db.reader())
        .await?;
    Ok(n)
}

/// The first administrators' group, by creation time.
pub async fn first_admin_group(db: &Db) -> Result<Option<GroupRow>, DbError> {
    Ok(sqlx::query_as(
        "SELECT id, name, is_admin, max_storage, permissions, created_at, updated_at
         FROM groups WHERE is_admin ORDER BY created_at, name LIMIT 1",
    )
    .fetch_optional(db.reader())
    .await?)
}

/// Inserts the groups in one transaction (used to seed an empty database).
pub async fn insert_all(db: &Db, groups: &[NewGroup<'_>], now: Millis) -> Result<(), DbError> {
    let mut tx = db.writer().begin().await?;
    for group in groups {
        sqlx::query(
            "INSERT INTO groups (id, name, is_admin, max_storage, permissions, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $6)",
        )
        .bind(group.id)
        .bind(group.name)
        .bind(group.is_admin)
        .bind(group.max_storage)
        .bind(group.permissions)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
