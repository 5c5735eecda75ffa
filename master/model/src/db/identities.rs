//! SQL of the `auth_identities` rows of OAuth providers: linking, listing, unlinking. A user
//! registered through a provider is written with its identity by `db::users`; passkey
//! identities by `db::passkeys`.

use uuid::Uuid;

use super::{Db, DbError};
use crate::domain::ids::UserId;
use crate::domain::time::Millis;

/// One identity as its owner sees it listed.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct IdentityRow {
    pub provider: String,
    pub identifier: String,
    pub display: Option<String>,
    pub created_at: Millis,
    pub last_used_at: Option<Millis>,
}

/// A provider's identity: who it is there and what to call it.
pub struct NewOAuthIdentity<'a> {
    pub provider: &'a str,
    pub identifier: &'a str,
    pub display: &'a str,
}

/// The caller's identities except passkeys (listed with their own names by `db::passkeys`).
pub async fn list_of(db: &Db, user_id: UserId) -> Result<Vec<IdentityRow>, DbError> {
    Ok(sqlx::query_as(
        "SELECT provider, identifier, display, created_at, last_used_at FROM auth_identities
         WHERE user_id = $1 AND provider <> 'passkey' ORDER BY created_at, provider",
    )
    .bind(user_id)
    .fetch_all(db.reader())
    .await?)
}

/// The identifier of `user_id`'s identity at `provider`, if it has one.
pub async fn identifier_of(db: &Db, user_id: UserId, provider: &str) -> Result<Option<String>, DbError> {
    let row: Option<(String,)> =
        sqlx::query_as("SELECT identifier FROM auth_identities WHERE user_id = $1 AND provider = $2 LIMIT 1")
            .bind(user_id)
            .bind(provider)
            .fetch_optional(db.reader())
            .await?;
    Ok(row.map(|(identifier,)| identifier))
}

/// Whether an account uses this e-mail address (stored lower case, as `Email` parses it).
pub async fn email_in_use(db: &Db, email: &str) -> Result<bool, DbError> {
    let row: Option<(String,)> =
        sqlx::query_as("SELECT id FROM users WHERE email = $1").bind(email).fetch_optional(db.reader()).await?;
    Ok(row.is_some())
}

/// Links an identity to a user. An identity linked before (to anyone) answers a unique violation.
pub async fn link(db: &Db, user_id: UserId, identity: &NewOAuthIdentity<'_>, now: Millis) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO auth_identities (id, user_id, provider, identifier, display, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(Uuid::new_v4().to_string())
    .bind(user_id)
    .bind(identity.provider)
    .bind(identity.identifier)
    .bind(identity.display)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// Records a sign-in (or a renewed link) with the identity, keeping its display name current.
pub async fn record_use(db: &Db, provider: &str, identifier: &str, display: &str, now: Millis) -> Result<(), DbError> {
    sqlx::query("UPDATE auth_identities SET display = $3, last_used_at = $4 WHERE provider = $1 AND identifier = $2")
        .bind(provider)
        .bind(identifier)
        .bind(display)
        .bind(now)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// Removes `user_id`'s identities at `provider` unless none would be left; answers `None` when
/// it has none there, `Some(false)` when they are its last ones.
pub async fn unlink_unless_last(db: &Db, user_id: UserId, provider: &str) -> Result<Option<bool>, DbError> {
    let mut tx = db.begin().await?;
    // Locks the user's row (on PostgreSQL) so two removals cannot both see a second identity.
    sqlx::query("UPDATE users SET updated_at = updated_at WHERE id = $1").bind(user_id).execute(&mut *tx).await?;
    let (here, all): (i64, i64) = sqlx::query_as(
        "SELECT COALESCE(SUM(CASE WHEN provider = $2 THEN 1 ELSE 0 END), 0), COUNT(*)
         FROM auth_identities WHERE user_id = $1",
    )
    .bind(user_id)
    .bind(provider)
    .fetch_one(&mut *tx)
    .await?;
    if here == 0 {
        return Ok(None);
    }
    if all <= here {
        return Ok(Some(false));
    }
    sqlx::query("DELETE FROM auth_identities WHERE user_id = $1 AND provider = $2")
        .bind(user_id)
        .bind(provider)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Some(true))
}
