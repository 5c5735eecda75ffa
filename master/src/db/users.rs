//! SQL of the `users` and `auth_identities` tables.

use super::{Db, DbError};
use crate::domain::time::Millis;

pub struct NewUser<'a> {
    pub id: &'a str,
    pub email: &'a str,
    pub nickname: &'a str,
    pub status: &'a str,
    pub group_id: &'a str,
}

pub struct NewIdentity<'a> {
    pub id: &'a str,
    pub provider: &'a str,
    pub identifier: &'a str,
    pub credential: Option<&'a str>,
}

/// Creates a user and its first credential together, or neither.
pub async fn insert_with_identity(
    db: &Db,
    user: &NewUser<'_>,
    identity: &NewIdentity<'_>,
    now: Millis,
) -> Result<(), DbError> {
    let mut tx = db.writer().begin().await?;
    sqlx::query(
        "INSERT INTO users (id, email, nickname, status, group_id, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $6)",
    )
    .bind(user.id)
    .bind(user.email)
    .bind(user.nickname)
    .bind(user.status)
    .bind(user.group_id)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO auth_identities (id, user_id, provider, identifier, credential, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(identity.id)
    .bind(user.id)
    .bind(identity.provider)
    .bind(identity.identifier)
    .bind(identity.credential)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// The credential of `(provider, identifier)` with its user's id, if such an identity exists.
pub async fn find_identity(
    db: &Db,
    provider: &str,
    identifier: &str,
) -> Result<Option<(String, Option<String>)>, DbError> {
    Ok(sqlx::query_as(
        "SELECT user_id, credential FROM auth_identities WHERE provider = $1 AND identifier = $2",
    )
    .bind(provider)
    .bind(identifier)
    .fetch_optional(db.reader())
    .await?)
}
