//! SQL of the `webdav_accounts` table.

use uuid::Uuid;

use super::columns::Flag;
use super::{Db, DbError};
use crate::domain::ids::{GroupId, UserId};
use crate::domain::time::Millis;
use crate::domain::user::UserStatus;

const COLUMNS: &str = "id, owner_id, name, password_hash, root_path, read_only, created_at, updated_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WebdavAccountRow {
    /// Stored as UUID text; accounts have no id type of their own.
    #[sqlx(try_from = "String")]
    pub id: Uuid,
    pub owner_id: UserId,
    pub name: String,
    pub password_hash: String,
    pub root_path: String,
    #[sqlx(try_from = "Flag")]
    pub read_only: bool,
    pub created_at: Millis,
    pub updated_at: Millis,
}

/// An account found by its sign-in name, with what authentication needs of its owner.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LoginRow {
    #[sqlx(flatten)]
    pub account: WebdavAccountRow,
    pub user_status: UserStatus,
    pub group_id: GroupId,
    /// The owner's and their group's claims versions (see `credentials::revocation`).
    pub user_version: Millis,
    pub group_version: Millis,
}

pub async fn list_of(db: &Db, owner_id: UserId) -> Result<Vec<WebdavAccountRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM webdav_accounts WHERE owner_id = $1 ORDER BY name"))
        .bind(owner_id)
        .fetch_all(db.reader())
        .await?)
}

pub async fn find_owned(db: &Db, owner_id: UserId, id: Uuid) -> Result<Option<WebdavAccountRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM webdav_accounts WHERE owner_id = $1 AND id = $2"))
        .bind(owner_id)
        .bind(id.to_string())
        .fetch_optional(db.reader())
        .await?)
}

/// The account `name` of the user with (normalised) `email`.
pub async fn find_for_login(db: &Db, email: &str, name: &str) -> Result<Option<LoginRow>, DbError> {
    Ok(sqlx::query_as(
        "SELECT a.id, a.owner_id, a.name, a.password_hash, a.root_path, a.read_only, a.created_at, a.updated_at,
                u.status AS user_status, u.group_id, u.claims_changed_at AS user_version,
                g.claims_changed_at AS group_version
         FROM webdav_accounts a JOIN users u ON u.id = a.owner_id JOIN groups g ON g.id = u.group_id
         WHERE u.email = $1 AND a.name = $2",
    )
    .bind(email)
    .bind(name)
    .fetch_optional(db.reader())
    .await?)
}

pub async fn insert(db: &Db, row: &WebdavAccountRow) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO webdav_accounts (id, owner_id, name, password_hash, root_path, read_only, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(row.id.to_string())
    .bind(row.owner_id)
    .bind(&row.name)
    .bind(&row.password_hash)
    .bind(&row.root_path)
    .bind(i64::from(row.read_only))
    .bind(row.created_at)
    .bind(row.updated_at)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// Writes every mutable field of `row`; false when the account is gone.
pub async fn update(db: &Db, row: &WebdavAccountRow) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE webdav_accounts SET name = $3, password_hash = $4, root_path = $5, read_only = $6, updated_at = $7
         WHERE id = $1 AND owner_id = $2",
    )
    .bind(row.id.to_string())
    .bind(row.owner_id)
    .bind(&row.name)
    .bind(&row.password_hash)
    .bind(&row.root_path)
    .bind(i64::from(row.read_only))
    .bind(row.updated_at)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn delete(db: &Db, owner_id: UserId, id: Uuid) -> Result<bool, DbError> {
    let done = sqlx::query("DELETE FROM webdav_accounts WHERE id = $1 AND owner_id = $2")
        .bind(id.to_string())
        .bind(owner_id)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() == 1)
}
