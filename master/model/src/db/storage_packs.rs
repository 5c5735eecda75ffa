//! SQL of the `storage_packs` table: grants, revocations, listings and the expiry marks. What a
//! pack adds to capacity is read in `users` (`USAGE_COLUMNS`), with the same activity rule.

use uuid::Uuid;

use super::{Conn, Db, DbError, Where};
use crate::domain::ids::UserId;
use crate::domain::time::Millis;

const COLUMNS: &str = "id, user_id, name, size, starts_at, expires_at, created_at, source, granted_by, redeem_code_id, \
     revoked_at, revoked_by, expired_at";

/// [`COLUMNS`] of the table aliased `alias`.
fn qualified(alias: &str) -> String {
    COLUMNS.split(", ").map(|c| format!("{alias}.{c}")).collect::<Vec<_>>().join(", ")
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PackRow {
    #[sqlx(try_from = "String")]
    pub id: Uuid,
    pub user_id: UserId,
    pub name: String,
    pub size: i64,
    pub starts_at: Millis,
    /// `None`: forever.
    pub expires_at: Option<Millis>,
    pub created_at: Millis,
    /// `admin` or `redeem`.
    pub source: String,
    pub granted_by: Option<String>,
    pub redeem_code_id: Option<String>,
    pub revoked_at: Option<Millis>,
    pub revoked_by: Option<String>,
    /// When the expiry job saw the pack expired.
    pub expired_at: Option<Millis>,
    /// The owner's e-mail address (administrators' list only).
    #[sqlx(default)]
    pub user_email: Option<String>,
}

/// A pack as granted.
pub struct NewPack<'a> {
    pub id: Uuid,
    pub user_id: UserId,
    pub name: &'a str,
    pub size: i64,
    pub starts_at: Millis,
    pub expires_at: Option<Millis>,
    /// The administrator who granted it, or none for a redeemed code.
    pub granted_by: Option<Uuid>,
    pub redeem_code_id: Option<Uuid>,
}

/// Inserts a pack on `conn` (inside a redemption's transaction, or on its own).
pub async fn insert(conn: &mut Conn, pack: &NewPack<'_>, now: Millis) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO storage_packs (id, user_id, name, size, starts_at, expires_at, created_at, source, granted_by,
         redeem_code_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(pack.id.to_string())
    .bind(pack.user_id)
    .bind(pack.name)
    .bind(pack.size)
    .bind(pack.starts_at)
    .bind(pack.expires_at)
    .bind(now)
    .bind(if pack.redeem_code_id.is_some() { "redeem" } else { "admin" })
    .bind(pack.granted_by.map(|id| id.to_string()))
    .bind(pack.redeem_code_id.map(|id| id.to_string()))
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn find(db: &Db, id: Uuid) -> Result<Option<PackRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM storage_packs WHERE id = $1"))
        .bind(id.to_string())
        .fetch_optional(db.reader())
        .await?)
}

/// Every pack of a user, newest first.
pub async fn list_of(db: &Db, user_id: UserId) -> Result<Vec<PackRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM storage_packs WHERE user_id = $1 ORDER BY created_at DESC, id"))
        .bind(user_id)
        .fetch_all(db.reader())
        .await?)
}

/// What the administrators' list filters on.
#[derive(Debug, Default)]
pub struct PackFilter {
    pub user_id: Option<UserId>,
    /// `Some(true)`: counting at `now`; `Some(false)`: not counting (scheduled, expired, revoked).
    pub active: Option<bool>,
    pub now: Millis,
}

/// The condition of a pack counting at `{}` (the same rule as `users::USAGE_COLUMNS`).
const ACTIVE: &str = "(starts_at <= CAST({} AS BIGINT) AND (expires_at IS NULL OR expires_at > CAST({} AS BIGINT)) \
     AND revoked_at IS NULL)";

/// One page of packs matching `filter`, newest first, with the total count.
pub async fn list(db: &Db, filter: &PackFilter, offset: i64, limit: i64) -> Result<(i64, Vec<PackRow>), DbError> {
    let mut clause = Where::new();
    clause.and("user_id = {}", filter.user_id.map(|id| id.to_string()));
    let now = filter.now.to_string();
    match filter.active {
        Some(true) => clause.and(ACTIVE, Some(now)),
        Some(false) => clause.and(&format!("NOT {ACTIVE}"), Some(now)),
        None => {}
    }
    // The owner's address beside each pack; the filters name only pack columns.
    let columns = format!("{}, u.email AS user_email", qualified("sp"));
    let from = "storage_packs sp JOIN users u ON u.id = sp.user_id";
    let (rows, total) = clause.page(db, (&columns, from, ""), "sp.created_at DESC, sp.id", (offset, limit)).await?;
    Ok((total, rows))
}

/// Revokes a pack (it stops counting at once); answers whether it was counting-or-scheduled
/// and is now revoked. A pack revoked before keeps its first revocation.
pub async fn revoke(db: &Db, id: Uuid, by: Uuid, now: Millis) -> Result<bool, DbError> {
    let done =
        sqlx::query("UPDATE storage_packs SET revoked_at = $2, revoked_by = $3 WHERE id = $1 AND revoked_at IS NULL")
            .bind(id.to_string())
            .bind(now)
            .bind(by.to_string())
            .execute(db.writer())
            .await?;
    Ok(done.rows_affected() > 0)
}

/// Marks the packs that expired by `now` and were not marked yet; answers how many. One
/// conditional statement: masters running it at once mark each pack once, and running it
/// again marks nothing.
pub async fn mark_expired(db: &Db, now: Millis) -> Result<u64, DbError> {
    let done = sqlx::query(
        "UPDATE storage_packs SET expired_at = $1
         WHERE expired_at IS NULL AND expires_at IS NOT NULL AND expires_at <= $1",
    )
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected())
}
