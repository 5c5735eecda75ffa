//! SQL of the `shares` table.

use uuid::Uuid;

use super::columns::Flag;
use super::{Db, DbError, Where};
use crate::domain::ids::{ObjectId, UserId};
use crate::domain::object::ObjectKind;
use crate::domain::time::Millis;
use crate::domain::user::UserStatus;

const COLUMNS: &str = "s.id, s.code, s.owner_id, s.object_id, s.password_hash, s.expires_at, s.max_downloads, \
     s.allow_preview, s.views, s.downloads, s.removed_at, s.created_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ShareRow {
    /// Stored as UUID text; shares have no id type of their own.
    #[sqlx(try_from = "String")]
    pub id: Uuid,
    pub code: String,
    pub owner_id: UserId,
    pub object_id: ObjectId,
    pub password_hash: Option<String>,
    pub expires_at: Option<Millis>,
    pub max_downloads: Option<i64>,
    #[sqlx(try_from = "Flag")]
    pub allow_preview: bool,
    pub views: i64,
    pub downloads: i64,
    /// When an administrator removed it after a report (visitors then get 404).
    pub removed_at: Option<Millis>,
    pub created_at: Millis,
}

/// A share with what deciding about it needs: its object's name, kind, size and whether it is
/// in the trash, and its owner's nickname and status.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ShareWithObject {
    #[sqlx(flatten)]
    pub share: ShareRow,
    pub object_name: String,
    pub object_kind: ObjectKind,
    pub object_size: i64,
    pub object_trashed_at: Option<Millis>,
    pub owner_nickname: String,
    pub owner_status: UserStatus,
}

/// The columns of [`ShareWithObject`] besides the share's, and the tables they come from.
const OBJECT_COLUMNS: &str = "o.name AS object_name, o.kind AS object_kind, o.size AS object_size, \
     o.trashed_at AS object_trashed_at, u.nickname AS owner_nickname, u.status AS owner_status";
const WITH_OBJECT_FROM: &str = "shares s JOIN objects o ON o.id = s.object_id JOIN users u ON u.id = s.owner_id";

/// What a new share holds.
pub struct NewShare<'a> {
    pub id: Uuid,
    pub code: &'a str,
    pub owner_id: UserId,
    pub object_id: ObjectId,
    pub password_hash: Option<&'a str>,
    pub expires_at: Option<Millis>,
    pub max_downloads: Option<i64>,
    pub allow_preview: bool,
    pub created_at: Millis,
}

/// Inserts a share; a taken code is a unique violation (the caller draws another).
pub async fn insert(db: &Db, share: &NewShare<'_>) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO shares (id, code, owner_id, object_id, password_hash, expires_at, max_downloads, allow_preview, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(share.id.to_string())
    .bind(share.code)
    .bind(share.owner_id)
    .bind(share.object_id)
    .bind(share.password_hash)
    .bind(share.expires_at)
    .bind(share.max_downloads)
    .bind(i64::from(share.allow_preview))
    .bind(share.created_at)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// The share with `code`, with its object and owner.
pub async fn find_by_code(db: &Db, code: &str) -> Result<Option<ShareWithObject>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS}, {OBJECT_COLUMNS} FROM {WITH_OBJECT_FROM} WHERE s.code = $1"))
        .bind(code)
        .fetch_optional(db.reader())
        .await?)
}

/// The share with id `id`, with its object and owner.
pub async fn find_by_id(db: &Db, id: Uuid) -> Result<Option<ShareWithObject>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS}, {OBJECT_COLUMNS} FROM {WITH_OBJECT_FROM} WHERE s.id = $1"))
        .bind(id.to_string())
        .fetch_optional(db.reader())
        .await?)
}

/// Which of `ids` have at least one share link (the file list's "shared" marker).
pub async fn shared_among(db: &Db, ids: &[ObjectId]) -> Result<Vec<ObjectId>, DbError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!("SELECT DISTINCT object_id FROM shares WHERE object_id IN ({})", super::placeholders(ids.len()));
    let mut query = sqlx::query_scalar::<_, ObjectId>(&sql);
    for id in ids {
        query = query.bind(*id);
    }
    Ok(query.fetch_all(db.reader()).await?)
}

/// Which shares a list holds (an owner's, or an administrator's choice): every field set must
/// match.
#[derive(Debug, Default)]
pub struct ShareFilter<'a> {
    pub owner_id: Option<UserId>,
    pub object_id: Option<ObjectId>,
    pub code: Option<&'a str>,
}

/// One page of the shares matching `filter`, newest first, and how many match.
pub async fn page_filtered(
    db: &Db,
    filter: &ShareFilter<'_>,
    offset: i64,
    limit: i64,
) -> Result<(Vec<ShareWithObject>, i64), DbError> {
    let mut clause = Where::new();
    clause.and("s.owner_id = {}", filter.owner_id.map(|id| id.to_string()));
    clause.and("s.object_id = {}", filter.object_id.map(|id| id.to_string()));
    clause.and("s.code = {}", filter.code.map(str::to_owned));
    let columns = format!("{COLUMNS}, {OBJECT_COLUMNS}");
    clause.page(db, (&columns, WITH_OBJECT_FROM, ""), "s.created_at DESC, s.id", (offset, limit)).await
}

/// What a change of a share sets (every field, as the service merged it).
pub struct ShareSettings<'a> {
    pub password_hash: Option<&'a str>,
    pub expires_at: Option<Millis>,
    pub max_downloads: Option<i64>,
    pub allow_preview: bool,
}

/// Sets a share's settings; answers whether the share exists.
pub async fn update(db: &Db, id: Uuid, settings: &ShareSettings<'_>) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE shares SET password_hash = $2, expires_at = $3, max_downloads = $4, allow_preview = $5 WHERE id = $1",
    )
    .bind(id.to_string())
    .bind(settings.password_hash)
    .bind(settings.expires_at)
    .bind(settings.max_downloads)
    .bind(i64::from(settings.allow_preview))
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}

pub async fn delete(db: &Db, id: Uuid) -> Result<bool, DbError> {
    let done = sqlx::query("DELETE FROM shares WHERE id = $1").bind(id.to_string()).execute(db.writer()).await?;
    Ok(done.rows_affected() > 0)
}

pub async fn count_view(db: &Db, id: Uuid) -> Result<(), DbError> {
    sqlx::query("UPDATE shares SET views = views + 1 WHERE id = $1").bind(id.to_string()).execute(db.writer()).await?;
    Ok(())
}

/// Counts a download if the share allows one more at `now`; answers whether it did. One
/// conditional statement, so concurrent downloads cannot pass the limit.
pub async fn count_download(db: &Db, id: Uuid, now: Millis) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE shares SET downloads = downloads + 1
         WHERE id = $1 AND (max_downloads IS NULL OR downloads < max_downloads) AND (expires_at IS NULL OR expires_at > $2)",
    )
    .bind(id.to_string())
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}
