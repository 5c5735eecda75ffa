//! SQL of redeem codes (`redeem_codes`, `redeem_uses`) and of the temporary groups a group code
//! gives (`temporary_groups`), with the conditional statements that keep a code's uses within
//! its limit on both databases and across masters.

use uuid::Uuid;

use super::{Conn, Db, DbError, Where};
use crate::domain::ids::{GroupId, UserId};
use crate::domain::time::Millis;

const COLUMNS: &str = "id, hint, batch_id, name, kind, pack_size, group_id, duration, uses_per_code, used, \
     expires_at, disabled_at, created_by, created_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CodeRow {
    #[sqlx(try_from = "String")]
    pub id: Uuid,
    pub hint: String,
    #[sqlx(try_from = "String")]
    pub batch_id: Uuid,
    pub name: String,
    /// `storage_pack` or `group`.
    pub kind: String,
    pub pack_size: Option<i64>,
    pub group_id: Option<GroupId>,
    /// Seconds.
    pub duration: i64,
    pub uses_per_code: i64,
    pub used: i64,
    pub expires_at: Option<Millis>,
    pub disabled_at: Option<Millis>,
    pub created_by: Option<String>,
    pub created_at: Millis,
}

/// One code of a batch, as stored (its hash, never the code).
pub struct NewCode<'a> {
    pub id: Uuid,
    pub code_hash: &'a str,
    pub hint: &'a str,
}

/// What every code of a batch shares.
pub struct BatchFields<'a> {
    pub batch_id: Uuid,
    pub name: &'a str,
    pub kind: &'a str,
    pub pack_size: Option<i64>,
    pub group_id: Option<GroupId>,
    pub duration: i64,
    pub uses_per_code: i64,
    pub expires_at: Option<Millis>,
    pub created_by: Uuid,
}

/// Inserts a batch of codes together, or none (a hash met twice is a unique violation).
pub async fn insert_batch(db: &Db, batch: &BatchFields<'_>, codes: &[NewCode<'_>], now: Millis) -> Result<(), DbError> {
    let mut tx = db.begin().await?;
    for code in codes {
        sqlx::query(
            "INSERT INTO redeem_codes (id, code_hash, hint, batch_id, name, kind, pack_size, group_id, duration,
             uses_per_code, expires_at, created_by, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
        )
        .bind(code.id.to_string())
        .bind(code.code_hash)
        .bind(code.hint)
        .bind(batch.batch_id.to_string())
        .bind(batch.name)
        .bind(batch.kind)
        .bind(batch.pack_size)
        .bind(batch.group_id)
        .bind(batch.duration)
        .bind(batch.uses_per_code)
        .bind(batch.expires_at)
        .bind(batch.created_by.to_string())
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

pub async fn find(db: &Db, id: Uuid) -> Result<Option<CodeRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM redeem_codes WHERE id = $1"))
        .bind(id.to_string())
        .fetch_optional(db.reader())
        .await?)
}

pub async fn find_by_hash(db: &Db, code_hash: &str) -> Result<Option<CodeRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM redeem_codes WHERE code_hash = $1"))
        .bind(code_hash)
        .fetch_optional(db.reader())
        .await?)
}

/// What the administrators' list filters on.
#[derive(Debug, Default)]
pub struct CodeFilter {
    pub batch_id: Option<Uuid>,
    pub kind: Option<String>,
}

/// One page of codes, newest first, with the total count.
pub async fn list(db: &Db, filter: &CodeFilter, offset: i64, limit: i64) -> Result<(i64, Vec<CodeRow>), DbError> {
    let mut clause = Where::new();
    clause.and("batch_id = {}", filter.batch_id.map(|id| id.to_string()));
    clause.and("kind = {}", filter.kind.clone());
    let (rows, total) = clause.page(db, (COLUMNS, "redeem_codes", ""), "created_at DESC, id", (offset, limit)).await?;
    Ok((total, rows))
}

/// Disables (`Some(time)`) or enables (`None`) a code; answers whether it exists.
pub async fn set_disabled(db: &Db, id: Uuid, disabled_at: Option<Millis>) -> Result<bool, DbError> {
    let done = sqlx::query("UPDATE redeem_codes SET disabled_at = $2 WHERE id = $1")
        .bind(id.to_string())
        .bind(disabled_at)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Deletes a code with its uses (what it gave stays); answers whether it existed.
pub async fn delete(db: &Db, id: Uuid) -> Result<bool, DbError> {
    let done = sqlx::query("DELETE FROM redeem_codes WHERE id = $1").bind(id.to_string()).execute(db.writer()).await?;
    Ok(done.rows_affected() > 0)
}

/// Records the user's use of a code; answers false when they used it before. The primary key
/// (code, user) makes a second use, even a concurrent one, insert nothing.
pub async fn record_use(conn: &mut Conn, code_id: Uuid, user_id: UserId, now: Millis) -> Result<bool, DbError> {
    let done = sqlx::query(
        "INSERT INTO redeem_uses (code_id, user_id, used_at) VALUES ($1, $2, $3) ON CONFLICT (code_id, user_id) DO NOTHING",
    )
    .bind(code_id.to_string())
    .bind(user_id)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Takes one use of a code that is enabled, unexpired at `now` and not used up; answers
/// whether it did. One conditional statement: PostgreSQL re-checks the condition on the row a
/// concurrent transaction just changed, SQLite runs one writer at a time, so no two
/// transactions (on any master) can both take the last use.
pub async fn take_use(conn: &mut Conn, code_id: Uuid, now: Millis) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE redeem_codes SET used = used + 1
         WHERE id = $1 AND used < uses_per_code AND disabled_at IS NULL AND (expires_at IS NULL OR expires_at > $2)",
    )
    .bind(code_id.to_string())
    .bind(now)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() > 0)
}

// ---- temporary groups ----

const TEMPORARY_COLUMNS: &str = "user_id, group_id, previous_group_id, starts_at, ends_at, redeem_code_id";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TemporaryGroupRow {
    pub user_id: UserId,
    pub group_id: GroupId,
    /// `None` when that group was deleted meanwhile.
    pub previous_group_id: Option<GroupId>,
    pub starts_at: Millis,
    pub ends_at: Millis,
    pub redeem_code_id: Option<String>,
}

/// The user's group and temporary group, read inside a redemption's transaction.
pub async fn group_standing(conn: &mut Conn, user_id: UserId) -> Result<(GroupId, Option<TemporaryGroupRow>), DbError> {
    let (group_id,): (GroupId,) =
        sqlx::query_as("SELECT group_id FROM users WHERE id = $1").bind(user_id).fetch_one(&mut *conn).await?;
    let temporary = sqlx::query_as(&format!("SELECT {TEMPORARY_COLUMNS} FROM temporary_groups WHERE user_id = $1"))
        .bind(user_id)
        .fetch_optional(&mut *conn)
        .await?;
    Ok((group_id, temporary))
}

pub async fn temporary_group_of(db: &Db, user_id: UserId) -> Result<Option<TemporaryGroupRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {TEMPORARY_COLUMNS} FROM temporary_groups WHERE user_id = $1"))
        .bind(user_id)
        .fetch_optional(db.reader())
        .await?)
}

/// Records a temporary group.
pub async fn insert_temporary(conn: &mut Conn, row: &TemporaryGroupRow) -> Result<(), DbError> {
    sqlx::query(&format!("INSERT INTO temporary_groups ({TEMPORARY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)"))
        .bind(row.user_id)
        .bind(row.group_id)
        .bind(row.previous_group_id)
        .bind(row.starts_at)
        .bind(row.ends_at)
        .bind(row.redeem_code_id.as_deref())
        .execute(conn)
        .await?;
    Ok(())
}

/// Moves the end of the user's temporary group in `group_id` from `ends_at` to `new_end`;
/// answers whether it was still that.
pub async fn extend_temporary(
    conn: &mut Conn,
    user_id: UserId,
    group_id: GroupId,
    ends_at: Millis,
    new_end: Millis,
) -> Result<bool, DbError> {
    let done =
        sqlx::query("UPDATE temporary_groups SET ends_at = $4 WHERE user_id = $1 AND group_id = $2 AND ends_at = $3")
            .bind(user_id)
            .bind(group_id)
            .bind(ends_at)
            .bind(new_end)
            .execute(conn)
            .await?;
    Ok(done.rows_affected() > 0)
}

/// Forgets the user's temporary group (an administrator moved them: their choice stands).
pub async fn forget_temporary(db: &Db, user_id: UserId) -> Result<bool, DbError> {
    let done =
        sqlx::query("DELETE FROM temporary_groups WHERE user_id = $1").bind(user_id).execute(db.writer()).await?;
    Ok(done.rows_affected() > 0)
}

/// Temporary groups ended by `now`, soonest first.
pub async fn ended_temporary(db: &Db, now: Millis, limit: i64) -> Result<Vec<TemporaryGroupRow>, DbError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {TEMPORARY_COLUMNS} FROM temporary_groups WHERE ends_at <= $1 ORDER BY ends_at, user_id LIMIT $2"
    ))
    .bind(now)
    .bind(limit)
    .fetch_all(db.reader())
    .await?)
}

/// Removes the temporary group `row` if it is still as read (not extended, not ended by
/// another master); answers whether this call removed it.
pub async fn take_ended(conn: &mut Conn, row: &TemporaryGroupRow) -> Result<bool, DbError> {
    let done = sqlx::query("DELETE FROM temporary_groups WHERE user_id = $1 AND group_id = $2 AND ends_at = $3")
        .bind(row.user_id)
        .bind(row.group_id)
        .bind(row.ends_at)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Moves the user from group `from` to group `to` if they are still in `from`, raising their
/// claims version past `now` (their tokens then refresh); answers the new version, or `None`
/// when they were no longer in `from`.
pub async fn move_user(
    conn: &mut Conn,
    user_id: UserId,
    (from, to): (GroupId, GroupId),
    now: Millis,
) -> Result<Option<Millis>, DbError> {
    let version: Option<(Millis,)> = sqlx::query_as(
        "UPDATE users SET group_id = $3, updated_at = $4,
         claims_changed_at = CASE WHEN claims_changed_at >= $4 THEN claims_changed_at + 1 ELSE $4 END
         WHERE id = $1 AND group_id = $2 RETURNING claims_changed_at",
    )
    .bind(user_id)
    .bind(from)
    .bind(to)
    .bind(now)
    .fetch_optional(conn)
    .await?;
    Ok(version.map(|(v,)| v))
}
