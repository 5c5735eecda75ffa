//! SQL of the `refresh_tokens` table: one row per issued refresh token, grouped in families
//! that descend from one sign-in.

use super::{Db, DbError};
use crate::domain::ids::UserId;
use crate::domain::time::Millis;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RefreshTokenRow {
    pub id: String,
    pub user_id: UserId,
    pub family_id: String,
    pub expires_at: Millis,
    pub retired_at: Option<Millis>,
    pub revoked_at: Option<Millis>,
}

pub async fn insert(
    db: &Db,
    id: &str,
    user_id: UserId,
    family_id: &str,
    expires_at: Millis,
    now: Millis,
) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO refresh_tokens (id, user_id, family_id, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(id)
    .bind(user_id)
    .bind(family_id)
    .bind(expires_at)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(())
}

pub async fn find(db: &Db, id: &str) -> Result<Option<RefreshTokenRow>, DbError> {
    Ok(sqlx::query_as(
        "SELECT id, user_id, family_id, expires_at, retired_at, revoked_at FROM refresh_tokens WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(db.reader())
    .await?)
}

/// Retires a live token; answers false when it was already retired, revoked or expired, so of
/// two concurrent uses exactly one wins.
pub async fn retire(db: &Db, id: &str, now: Millis) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE refresh_tokens SET retired_at = $2
         WHERE id = $1 AND retired_at IS NULL AND revoked_at IS NULL AND expires_at > $2",
    )
    .bind(id)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn revoke_family(db: &Db, family_id: &str, now: Millis) -> Result<u64, DbError> {
    let done = sqlx::query("UPDATE refresh_tokens SET revoked_at = $2 WHERE family_id = $1 AND revoked_at IS NULL")
        .bind(family_id)
        .bind(now)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected())
}

pub async fn revoke_user(db: &Db, user_id: UserId, now: Millis) -> Result<u64, DbError> {
    let done = sqlx::query("UPDATE refresh_tokens SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL")
        .bind(user_id)
        .bind(now)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected())
}

/// Deletes tokens expired before `now`, or retired or revoked before `dead_before`.
pub async fn delete_dead(db: &Db, now: Millis, dead_before: Millis) -> Result<u64, DbError> {
    let done = sqlx::query("DELETE FROM refresh_tokens WHERE expires_at < $1 OR retired_at < $2 OR revoked_at < $2")
        .bind(now)
        .bind(dead_before)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected())
}
