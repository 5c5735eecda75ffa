//! SQL of avatars: the source in `users.avatar` and the uploaded image in `user_avatars`, which
//! are written together.

use super::{Db, DbError};
use crate::domain::ids::UserId;
use crate::domain::time::Millis;

/// The source value of an uploaded avatar.
pub const SOURCE_FILE: &str = "file";

/// An uploaded avatar as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AvatarRow {
    pub image: Vec<u8>,
    pub etag: String,
}

/// Stores `image` as the user's avatar and makes the upload the source in force; answers
/// whether the user exists.
pub async fn put_file(db: &Db, user_id: UserId, image: &[u8], etag: &str, now: Millis) -> Result<bool, DbError> {
    let mut tx = db.begin().await?;
    let done = sqlx::query("UPDATE users SET avatar = $2, updated_at = $3 WHERE id = $1")
        .bind(user_id)
        .bind(SOURCE_FILE)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    if done.rows_affected() != 1 {
        return Ok(false);
    }
    sqlx::query(
        "INSERT INTO user_avatars (user_id, image, etag, updated_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (user_id) DO UPDATE SET image = excluded.image, etag = excluded.etag,
         updated_at = excluded.updated_at",
    )
    .bind(user_id)
    .bind(image)
    .bind(etag)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// Makes `source` (an outside service, or none) the source in force and drops any uploaded
/// image; answers whether the user exists.
pub async fn set_source(db: &Db, user_id: UserId, source: Option<&str>, now: Millis) -> Result<bool, DbError> {
    let mut tx = db.begin().await?;
    let done = sqlx::query("UPDATE users SET avatar = $2, updated_at = $3 WHERE id = $1")
        .bind(user_id)
        .bind(source)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM user_avatars WHERE user_id = $1").bind(user_id).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(done.rows_affected() == 1)
}

/// The uploaded avatar of a user, if any.
pub async fn find_file(db: &Db, user_id: UserId) -> Result<Option<AvatarRow>, DbError> {
    Ok(sqlx::query_as("SELECT image, etag FROM user_avatars WHERE user_id = $1")
        .bind(user_id)
        .fetch_optional(db.reader())
        .await?)
}
