//! SQL of the `user_authns` table (passkeys) and their `auth_identities` rows, which are
//! written and removed together.

use uuid::Uuid;

use super::{Db, DbError};
use crate::domain::ids::UserId;
use crate::domain::time::Millis;

/// The provider name of a passkey's identity row.
pub const PASSKEY: &str = "passkey";

const COLUMNS: &str = "id, user_id, credential_id, name, passkey, created_at, last_used_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PasskeyRow {
    #[sqlx(try_from = "String")]
    pub id: Uuid,
    pub user_id: UserId,
    /// The credential id, base64url without padding.
    pub credential_id: String,
    pub name: String,
    /// The credential as webauthn-rs serialises it (public key, counter, flags).
    pub passkey: String,
    pub created_at: Millis,
    pub last_used_at: Option<Millis>,
}

pub async fn list_of(db: &Db, user_id: UserId) -> Result<Vec<PasskeyRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM user_authns WHERE user_id = $1 ORDER BY created_at, id"))
        .bind(user_id)
        .fetch_all(db.reader())
        .await?)
}

pub async fn find_owned(db: &Db, user_id: UserId, id: Uuid) -> Result<Option<PasskeyRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM user_authns WHERE user_id = $1 AND id = $2"))
        .bind(user_id)
        .bind(id.to_string())
        .fetch_optional(db.reader())
        .await?)
}

/// The passkey `credential_id` of `user_id`: both must match, so a credential cannot sign in
/// as anyone but the user it was registered to.
pub async fn find_credential(db: &Db, user_id: UserId, credential_id: &str) -> Result<Option<PasskeyRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM user_authns WHERE user_id = $1 AND credential_id = $2"))
        .bind(user_id)
        .bind(credential_id)
        .fetch_optional(db.reader())
        .await?)
}

/// Records a new passkey and its sign-in identity, or neither. A credential id registered
/// before answers a unique violation.
pub async fn insert(db: &Db, row: &PasskeyRow) -> Result<(), DbError> {
    let mut tx = db.begin().await?;
    sqlx::query(
        "INSERT INTO user_authns (id, user_id, credential_id, name, passkey, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(row.id.to_string())
    .bind(row.user_id)
    .bind(&row.credential_id)
    .bind(&row.name)
    .bind(&row.passkey)
    .bind(row.created_at)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO auth_identities (id, user_id, provider, identifier, created_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(Uuid::new_v4().to_string())
    .bind(row.user_id)
    .bind(PASSKEY)
    .bind(&row.credential_id)
    .bind(row.created_at)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

pub async fn rename(db: &Db, user_id: UserId, id: Uuid, name: &str) -> Result<bool, DbError> {
    let done = sqlx::query("UPDATE user_authns SET name = $3 WHERE user_id = $1 AND id = $2")
        .bind(user_id)
        .bind(id.to_string())
        .bind(name)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Stores the credential's state after a sign-in (its counter) and when it was used.
pub async fn record_use(db: &Db, id: Uuid, passkey: &str, now: Millis) -> Result<(), DbError> {
    let mut tx = db.begin().await?;
    let row: Option<(String,)> =
        sqlx::query_as("UPDATE user_authns SET passkey = $2, last_used_at = $3 WHERE id = $1 RETURNING credential_id")
            .bind(id.to_string())
            .bind(passkey)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
    if let Some((credential_id,)) = row {
        sqlx::query("UPDATE auth_identities SET last_used_at = $3 WHERE provider = $1 AND identifier = $2")
            .bind(PASSKEY)
            .bind(credential_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Removes a passkey and its identity unless it is the user's last way to sign in; answers
/// `None` when there is no such passkey, `Some(false)` when it is the last identity.
pub async fn delete_unless_last(db: &Db, user_id: UserId, id: Uuid) -> Result<Option<bool>, DbError> {
    let mut tx = db.begin().await?;
    // Locks the user's row (on PostgreSQL) so two removals cannot both see a second identity.
    sqlx::query("UPDATE users SET updated_at = updated_at WHERE id = $1").bind(user_id).execute(&mut *tx).await?;
    let row: Option<(String,)> = sqlx::query_as("SELECT credential_id FROM user_authns WHERE user_id = $1 AND id = $2")
        .bind(user_id)
        .bind(id.to_string())
        .fetch_optional(&mut *tx)
        .await?;
    let Some((credential_id,)) = row else { return Ok(None) };
    let (identities,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM auth_identities WHERE user_id = $1")
        .bind(user_id)
        .fetch_one(&mut *tx)
        .await?;
    if identities <= 1 {
        return Ok(Some(false));
    }
    sqlx::query("DELETE FROM user_authns WHERE id = $1").bind(id.to_string()).execute(&mut *tx).await?;
    sqlx::query("DELETE FROM auth_identities WHERE user_id = $1 AND provider = $2 AND identifier = $3")
        .bind(user_id)
        .bind(PASSKEY)
        .bind(credential_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Some(true))
}
