//! SQL of `change_events` (written by triggers on `objects`), `change_event_floor` and
//! `server_epoch`.

use super::{Db, DbError};
use crate::domain::ids::{ObjectId, UserId};
use crate::domain::time::Millis;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct EventRow {
    pub seq: i64,
    pub owner_id: UserId,
    pub kind: String,
    pub object_id: ObjectId,
    pub object_kind: String,
    pub parent_id: Option<ObjectId>,
    pub name: String,
    pub at: Millis,
}

const COLUMNS: &str = "seq, owner_id, kind, object_id, object_kind, parent_id, name, at";

/// Every user's events after `after`, oldest first, at most `limit`.
pub async fn after(db: &Db, after: i64, limit: i64) -> Result<Vec<EventRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM change_events WHERE seq > $1 ORDER BY seq LIMIT $2"))
        .bind(after)
        .bind(limit)
        .fetch_all(db.reader())
        .await?)
}

/// The events of `owner` after `after` and up to `upto`, oldest first, at most `limit`.
pub async fn of_owner(db: &Db, owner: UserId, (after, upto): (i64, i64), limit: i64) -> Result<Vec<EventRow>, DbError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM change_events WHERE owner_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4"
    ))
    .bind(owner)
    .bind(after)
    .bind(upto)
    .bind(limit)
    .fetch_all(db.reader())
    .await?)
}

/// The cursor of `owner`'s newest event up to `upto` (0 when there is none).
pub async fn newest_of_owner(db: &Db, owner: UserId, upto: i64) -> Result<i64, DbError> {
    let (seq,): (Option<i64>,) = sqlx::query_as("SELECT MAX(seq) FROM change_events WHERE owner_id = $1 AND seq <= $2")
        .bind(owner)
        .bind(upto)
        .fetch_one(db.reader())
        .await?;
    Ok(seq.unwrap_or(0))
}

/// On PostgreSQL, the transactions running now (`pg_current_snapshot()` as text); `None` on
/// SQLite, whose one writer commits its cursors in order.
pub async fn running_transactions(db: &Db) -> Result<Option<String>, DbError> {
    if db.backend() != super::Backend::Postgres {
        return Ok(None);
    }
    let (snapshot,): (String,) = sqlx::query_as("SELECT pg_current_snapshot()::text").fetch_one(db.reader()).await?;
    Ok(Some(snapshot))
}

/// Whether every transaction of `snapshot` (from [`running_transactions`]) has ended,
/// committed or rolled back.
pub async fn transactions_ended(db: &Db, snapshot: &str) -> Result<bool, DbError> {
    let (ended,): (bool,) = sqlx::query_as(
        "SELECT COALESCE(bool_and(pg_xact_status(xid) <> 'in progress'), TRUE) FROM pg_snapshot_xip($1::pg_snapshot) AS xid",
    )
    .bind(snapshot)
    .fetch_one(db.reader())
    .await?;
    Ok(ended)
}

/// The newest event's cursor (0 when there is none).
pub async fn latest(db: &Db) -> Result<i64, DbError> {
    let (seq,): (Option<i64>,) = sqlx::query_as("SELECT MAX(seq) FROM change_events").fetch_one(db.reader()).await?;
    Ok(seq.unwrap_or(0))
}

/// The newest cursor this database has handed out: its newest event, or the floor when every
/// event was pruned. A client's cursor beyond it comes from another history (a restored backup).
pub async fn newest(db: &Db) -> Result<i64, DbError> {
    let (seq,): (i64,) = sqlx::query_as(
        "SELECT MAX(seq) FROM (SELECT MAX(seq) AS seq FROM change_events UNION ALL SELECT seq FROM change_event_floor) AS cursors",
    )
    .fetch_one(db.reader())
    .await?;
    Ok(seq)
}

/// The random id made when the database was created (see migration 0024).
pub async fn epoch(db: &Db) -> Result<String, DbError> {
    let (epoch,): (String,) =
        sqlx::query_as("SELECT epoch FROM server_epoch WHERE id = 1").fetch_one(db.reader()).await?;
    Ok(epoch)
}

/// Every event up to this cursor was pruned.
pub async fn floor(db: &Db) -> Result<i64, DbError> {
    let (seq,): (i64,) =
        sqlx::query_as("SELECT seq FROM change_event_floor WHERE id = 1").fetch_one(db.reader()).await?;
    Ok(seq)
}

/// Deletes the events older than `before` (and everything up to the newest of them, so the
/// floor is one cursor); answers how many went.
pub async fn prune(db: &Db, before: Millis) -> Result<u64, DbError> {
    let mut tx = db.begin().await?;
    let (newest,): (Option<i64>,) =
        sqlx::query_as("SELECT MAX(seq) FROM change_events WHERE at < $1").bind(before).fetch_one(&mut *tx).await?;
    let Some(newest) = newest else { return Ok(0) };
    sqlx::query("UPDATE change_event_floor SET seq = $1 WHERE id = 1 AND seq < $1")
        .bind(newest)
        .execute(&mut *tx)
        .await?;
    let done = sqlx::query("DELETE FROM change_events WHERE seq <= $1").bind(newest).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(done.rows_affected())
}
