//! SQL of two-factor sign-in: the enabled secret in `users.two_factor_key` and the hashed
//! single-use recovery codes in `user_recovery_codes`, which are written and removed together.

use super::{Db, DbError};
use crate::domain::ids::UserId;
use crate::domain::time::Millis;

/// Turns two-factor sign-in on with `secret` and replaces the recovery codes, or does nothing
/// (answers false) when it is on already.
pub async fn enable(
    db: &Db,
    user_id: UserId,
    secret: &str,
    code_hashes: &[String],
    now: Millis,
) -> Result<bool, DbError> {
    let mut tx = db.begin().await?;
    let done =
        sqlx::query("UPDATE users SET two_factor_key = $2, updated_at = $3 WHERE id = $1 AND two_factor_key IS NULL")
            .bind(user_id)
            .bind(secret)
            .bind(now)
            .execute(&mut *tx)
            .await?;
    if done.rows_affected() != 1 {
        return Ok(false);
    }
    sqlx::query("DELETE FROM user_recovery_codes WHERE user_id = $1").bind(user_id).execute(&mut *tx).await?;
    for hash in code_hashes {
        sqlx::query("INSERT INTO user_recovery_codes (user_id, code_hash, created_at) VALUES ($1, $2, $3)")
            .bind(user_id)
            .bind(hash)
            .bind(now)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// Turns two-factor sign-in off and drops the recovery codes; answers whether it was on.
pub async fn disable(db: &Db, user_id: UserId, now: Millis) -> Result<bool, DbError> {
    let mut tx = db.begin().await?;
    let done = sqlx::query(
        "UPDATE users SET two_factor_key = NULL, updated_at = $2 WHERE id = $1 AND two_factor_key IS NOT NULL",
    )
    .bind(user_id)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    sqlx::query("DELETE FROM user_recovery_codes WHERE user_id = $1").bind(user_id).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(done.rows_affected() == 1)
}

/// Uses up the recovery code with this hash: answers whether it existed. The delete is the
/// check, so two concurrent uses of one code cannot both succeed.
pub async fn use_recovery_code(db: &Db, user_id: UserId, code_hash: &str) -> Result<bool, DbError> {
    let done = sqlx::query("DELETE FROM user_recovery_codes WHERE user_id = $1 AND code_hash = $2")
        .bind(user_id)
        .bind(code_hash)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() == 1)
}
