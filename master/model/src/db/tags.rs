//! SQL of the `tags` and `object_tags` tables.

use uuid::Uuid;

use super::objects::{COLUMNS as OBJECT_COLUMNS, ObjectRow};
use super::{Db, DbError, Where};
use crate::domain::ids::{ObjectId, UserId};
use crate::domain::time::Millis;

const COLUMNS: &str = "id, owner_id, name, kind, expression, color, created_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TagRow {
    /// Stored as UUID text; tags have no id type of their own.
    #[sqlx(try_from = "String")]
    pub id: Uuid,
    pub owner_id: UserId,
    pub name: String,
    /// `manual` or `automatic`.
    pub kind: String,
    /// An automatic tag's rule, as given.
    pub expression: Option<String>,
    pub color: Option<String>,
    pub created_at: Millis,
}

/// A tag's fields as written.
pub struct TagFields<'a> {
    pub name: &'a str,
    pub kind: &'a str,
    pub expression: Option<&'a str>,
    pub color: Option<&'a str>,
}

/// Inserts a tag; a name the owner already uses is a unique violation.
pub async fn insert(db: &Db, id: Uuid, owner_id: UserId, tag: &TagFields<'_>, now: Millis) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO tags (id, owner_id, name, kind, expression, color, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(id.to_string())
    .bind(owner_id)
    .bind(tag.name)
    .bind(tag.kind)
    .bind(tag.expression)
    .bind(tag.color)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(())
}

pub async fn list_of(db: &Db, owner_id: UserId) -> Result<Vec<TagRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM tags WHERE owner_id = $1 ORDER BY name, id"))
        .bind(owner_id)
        .fetch_all(db.reader())
        .await?)
}

pub async fn find_owned(db: &Db, owner_id: UserId, id: Uuid) -> Result<Option<TagRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM tags WHERE owner_id = $1 AND id = $2"))
        .bind(owner_id)
        .bind(id.to_string())
        .fetch_optional(db.reader())
        .await?)
}

/// Rewrites a tag's fields (its kind included: a tag may turn manual or automatic; turning
/// automatic drops its manual links).
pub async fn update(db: &Db, id: Uuid, tag: &TagFields<'_>) -> Result<(), DbError> {
    let mut tx = db.begin().await?;
    sqlx::query("UPDATE tags SET name = $2, kind = $3, expression = $4, color = $5 WHERE id = $1")
        .bind(id.to_string())
        .bind(tag.name)
        .bind(tag.kind)
        .bind(tag.expression)
        .bind(tag.color)
        .execute(&mut *tx)
        .await?;
    if tag.kind != "manual" {
        sqlx::query("DELETE FROM object_tags WHERE tag_id = $1").bind(id.to_string()).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

pub async fn delete(db: &Db, id: Uuid) -> Result<(), DbError> {
    sqlx::query("DELETE FROM tags WHERE id = $1").bind(id.to_string()).execute(db.writer()).await?;
    Ok(())
}

/// Links `tag_id` to each of `objects` (already linked ones stay as they are).
pub async fn attach(db: &Db, tag_id: Uuid, objects: &[ObjectId]) -> Result<(), DbError> {
    for_each_link(
        db,
        "INSERT INTO object_tags (tag_id, object_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        tag_id,
        objects,
    )
    .await
}

pub async fn detach(db: &Db, tag_id: Uuid, objects: &[ObjectId]) -> Result<(), DbError> {
    for_each_link(db, "DELETE FROM object_tags WHERE tag_id = $1 AND object_id = $2", tag_id, objects).await
}

/// Runs `sql` for the link of `tag_id` with each of `objects`, in one transaction.
async fn for_each_link(db: &Db, sql: &str, tag_id: Uuid, objects: &[ObjectId]) -> Result<(), DbError> {
    let mut tx = db.begin().await?;
    for object in objects {
        sqlx::query(sql).bind(tag_id.to_string()).bind(*object).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// One page of the live objects linked to manual tag `tag_id`, by name, and how many there are.
pub async fn linked_page(db: &Db, tag_id: Uuid, offset: i64, limit: i64) -> Result<(Vec<ObjectRow>, i64), DbError> {
    let mut clause = Where::new();
    clause.and("t.tag_id = {}", Some(tag_id.to_string()));
    let columns = OBJECT_COLUMNS.split(", ").map(|column| format!("o.{column}")).collect::<Vec<_>>().join(", ");
    let from = "object_tags t JOIN objects o ON o.id = t.object_id";
    clause.page(db, (&columns, from, " AND o.trashed_at IS NULL"), "o.name, o.id", (offset, limit)).await
}

/// One page of `owner_id`'s live files whose search key matches any of the LIKE `patterns`
/// (search keys, `\` escaping), by name, and how many there are.
pub async fn matching_page(
    db: &Db,
    owner_id: UserId,
    patterns: &[String],
    offset: i64,
    limit: i64,
) -> Result<(Vec<ObjectRow>, i64), DbError> {
    let mut clause = Where::new();
    clause.and("owner_id = {}", Some(owner_id.to_string()));
    clause.and_any("name_key LIKE {} ESCAPE '\\'", patterns);
    let extra = " AND kind = 'file' AND trashed_at IS NULL";
    clause.page(db, (OBJECT_COLUMNS, "objects", extra), "name, id", (offset, limit)).await
}

/// The manual tags linked to each of `ids`, as (object, tag) pairs by object and tag name.
pub async fn manual_of(db: &Db, ids: &[ObjectId]) -> Result<Vec<(ObjectId, TagRow)>, DbError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let placeholders = super::placeholders(ids.len());
    let columns = COLUMNS.split(", ").map(|column| format!("g.{column}")).collect::<Vec<_>>().join(", ");
    let sql = format!(
        "SELECT t.object_id, {columns} FROM object_tags t JOIN tags g ON g.id = t.tag_id
         WHERE t.object_id IN ({placeholders}) ORDER BY t.object_id, g.name"
    );
    let mut query = sqlx::query_as::<_, LinkedTagRow>(&sql);
    for id in ids {
        query = query.bind(*id);
    }
    Ok(query.fetch_all(db.reader()).await?.into_iter().map(|row| (row.object_id, row.tag)).collect())
}

#[derive(sqlx::FromRow)]
struct LinkedTagRow {
    object_id: ObjectId,
    #[sqlx(flatten)]
    tag: TagRow,
}

/// `owner_id`'s automatic tags, by name.
pub async fn automatic_of(db: &Db, owner_id: UserId) -> Result<Vec<TagRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM tags WHERE owner_id = $1 AND kind = 'automatic' ORDER BY name"))
        .bind(owner_id)
        .fetch_all(db.reader())
        .await?)
}
