//! SQL of the `users` and `auth_identities` tables.

use super::{Arg, Conn, Db, DbError, Values, Where, like_pattern};
use crate::domain::ids::{GroupId, UserId};
use crate::domain::time::Millis;
use crate::domain::user::{UserFilter, UserStatus};

const USER_COLUMNS: &str = "id, email, nickname, status, group_id, storage, language, timezone, \
     two_factor_key, color_primary, color_secondary, color_success, \
     color_info, color_warning, color_error, color_neutral, created_at, updated_at, claims_changed_at, avatar";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct UserRow {
    pub id: UserId,
    pub email: String,
    pub nickname: String,
    pub status: UserStatus,
    pub group_id: GroupId,
    pub storage: i64,
    pub language: String,
    pub timezone: i32,
    /// TOTP secret when two-factor sign-in is on; never leaves the server.
    pub two_factor_key: Option<String>,
    pub color_primary: Option<String>,
    pub color_secondary: Option<String>,
    pub color_success: Option<String>,
    pub color_info: Option<String>,
    pub color_warning: Option<String>,
    pub color_error: Option<String>,
    pub color_neutral: Option<String>,
    pub created_at: Millis,
    pub updated_at: Millis,
    /// When the user last moved group or was signed out everywhere (0: never); access and WOPI
    /// tokens carry it as `user_version`, and those of an older one are refused.
    pub claims_changed_at: Millis,
    /// Where the avatar comes from: `file` (in `user_avatars`), `gravatar`, or none.
    pub avatar: Option<String>,
}

pub struct NewUser<'a> {
    pub id: UserId,
    pub email: &'a str,
    pub nickname: &'a str,
    pub status: UserStatus,
    pub group_id: GroupId,
}

pub struct NewIdentity<'a> {
    pub provider: &'a str,
    pub identifier: &'a str,
    /// A password's hash; providers that keep no secret here have none.
    pub credential: Option<&'a str>,
    /// What to call the identity in lists (an OAuth login or nickname).
    pub display: Option<&'a str>,
    /// When it was last used: at once for an identity that signs its new account in.
    pub last_used_at: Option<Millis>,
}

/// Creates a user and its first credential together, or neither.
pub async fn insert_with_identity(
    db: &Db,
    user: &NewUser<'_>,
    identity: &NewIdentity<'_>,
    now: Millis,
) -> Result<(), DbError> {
    let mut tx = db.begin().await?;
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
        "INSERT INTO auth_identities (id, user_id, provider, identifier, credential, display, created_at, last_used_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(uuid::Uuid::new_v4().to_string())
    .bind(user.id)
    .bind(identity.provider)
    .bind(identity.identifier)
    .bind(identity.credential)
    .bind(identity.display)
    .bind(now)
    .bind(identity.last_used_at)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

pub async fn count(db: &Db) -> Result<i64, DbError> {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM users").fetch_one(db.reader()).await?;
    Ok(n)
}

/// The user id and stored credential of `(provider, identifier)`, if such an identity exists.
pub async fn find_identity(
    db: &Db,
    provider: &str,
    identifier: &str,
) -> Result<Option<(UserId, Option<String>)>, DbError> {
    Ok(sqlx::query_as("SELECT user_id, credential FROM auth_identities WHERE provider = $1 AND identifier = $2")
        .bind(provider)
        .bind(identifier)
        .fetch_optional(db.reader())
        .await?)
}

/// The stored credential of a user for a provider.
pub async fn credential_of(db: &Db, user_id: UserId, provider: &str) -> Result<Option<String>, DbError> {
    let row: Option<(Option<String>,)> =
        sqlx::query_as("SELECT credential FROM auth_identities WHERE user_id = $1 AND provider = $2")
            .bind(user_id)
            .bind(provider)
            .fetch_optional(db.reader())
            .await?;
    Ok(row.and_then(|(c,)| c))
}

/// Moves the user's claims version forward to `now` (strictly past the last one, even within a
/// millisecond) and answers it: every token carrying an older one is stale.
pub async fn raise_claims_version(db: &Db, id: UserId, now: Millis) -> Result<Millis, DbError> {
    let (version,): (Millis,) = sqlx::query_as(
        "UPDATE users SET claims_changed_at = CASE WHEN claims_changed_at >= $2 THEN claims_changed_at + 1 ELSE $2 END
         WHERE id = $1 RETURNING claims_changed_at",
    )
    .bind(id)
    .bind(now)
    .fetch_one(db.writer())
    .await?;
    Ok(version)
}

/// Replaces a user's credential for a provider; answers whether the identity exists.
/// Replaces the credential of the user's `provider` identity (a chosen one: any generated mark
/// goes).
pub async fn set_credential(db: &Db, user_id: UserId, provider: &str, credential: &str) -> Result<bool, DbError> {
    let done =
        sqlx::query("UPDATE auth_identities SET credential = $3, generated = 0 WHERE user_id = $1 AND provider = $2")
            .bind(user_id)
            .bind(provider)
            .bind(credential)
            .execute(db.writer())
            .await?;
    Ok(done.rows_affected() > 0)
}

/// Marks the credential of the user's `provider` identity as generated by the server.
pub async fn mark_credential_generated(db: &Db, user_id: UserId, provider: &str) -> Result<(), DbError> {
    sqlx::query("UPDATE auth_identities SET generated = 1 WHERE user_id = $1 AND provider = $2")
        .bind(user_id)
        .bind(provider)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// Whether the credential of the user's `provider` identity is one the server generated.
pub async fn credential_generated(db: &Db, user_id: UserId, provider: &str) -> Result<bool, DbError> {
    let row: Option<(i64,)> =
        sqlx::query_as("SELECT generated FROM auth_identities WHERE user_id = $1 AND provider = $2")
            .bind(user_id)
            .bind(provider)
            .fetch_optional(db.reader())
            .await?;
    Ok(row.is_some_and(|(generated,)| generated == 1))
}

pub async fn touch_identity(db: &Db, provider: &str, identifier: &str, now: Millis) -> Result<(), DbError> {
    sqlx::query("UPDATE auth_identities SET last_used_at = $3 WHERE provider = $1 AND identifier = $2")
        .bind(provider)
        .bind(identifier)
        .bind(now)
        .execute(db.writer())
        .await?;
    Ok(())
}

pub async fn find(db: &Db, id: UserId) -> Result<Option<UserRow>, DbError> {
    // Every user-level request reads this (the guard): on SQLite on the calling thread.
    db.read_row(&format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1"), &[Arg::Text(&id.to_string())], decode_user)
        .await
}

/// `(id, email, nickname)` of each of `ids` that exists (lists that name owners).
pub async fn names_of(db: &Db, ids: &[UserId]) -> Result<Vec<(UserId, String, String)>, DbError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!("SELECT id, email, nickname FROM users WHERE id IN ({})", super::placeholders(ids.len()));
    let mut query = sqlx::query_as::<_, (UserId, String, String)>(&sql);
    for id in ids {
        query = query.bind(*id);
    }
    Ok(query.fetch_all(db.reader()).await?)
}

/// The user with this e-mail address (stored lower-case, as `Email` spells it).
pub async fn find_by_email(db: &Db, email: &str) -> Result<Option<UserRow>, DbError> {
    db.read_row(&format!("SELECT {USER_COLUMNS} FROM users WHERE email = $1"), &[Arg::Text(email)], decode_user).await
}

/// Activates a user awaiting e-mail verification; answers whether it was `INACTIVE` (a banned
/// user stays banned).
pub async fn activate_inactive(db: &Db, id: UserId, now: Millis) -> Result<bool, DbError> {
    let done = sqlx::query("UPDATE users SET status = 'ACTIVE', updated_at = $2 WHERE id = $1 AND status = 'INACTIVE'")
        .bind(id)
        .bind(now)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() > 0)
}

/// A [`UserRow`] from the columns of [`USER_COLUMNS`], by position.
fn decode_user(row: &dyn Values) -> Result<UserRow, DbError> {
    Ok(UserRow {
        id: row.parsed_at(0)?,
        email: row.text_at(1)?,
        nickname: row.text_at(2)?,
        status: row.parsed_at(3)?,
        group_id: row.parsed_at(4)?,
        storage: row.int_at(5)?,
        language: row.text_at(6)?,
        timezone: i32::try_from(row.int_at(7)?)
            .map_err(|error| DbError::Invalid { column: "timezone (users)".to_owned(), reason: error.to_string() })?,
        two_factor_key: row.opt_text_at(8)?,
        color_primary: row.opt_text_at(9)?,
        color_secondary: row.opt_text_at(10)?,
        color_success: row.opt_text_at(11)?,
        color_info: row.opt_text_at(12)?,
        color_warning: row.opt_text_at(13)?,
        color_error: row.opt_text_at(14)?,
        color_neutral: row.opt_text_at(15)?,
        created_at: row.int_at(16)?,
        updated_at: row.int_at(17)?,
        claims_changed_at: row.int_at(18)?,
        avatar: row.opt_text_at(19)?,
    })
}

/// A user-editable profile column.
#[derive(Debug, Clone, Copy)]
pub enum ProfileField {
    Nickname,
    Language,
}

pub async fn set_profile_text(
    db: &Db,
    id: UserId,
    field: ProfileField,
    value: &str,
    now: Millis,
) -> Result<bool, DbError> {
    // One fixed statement per column: column names never come from input.
    let sql = match field {
        ProfileField::Nickname => "UPDATE users SET nickname = $2, updated_at = $3 WHERE id = $1",
        ProfileField::Language => "UPDATE users SET language = $2, updated_at = $3 WHERE id = $1",
    };
    let done = sqlx::query(sql).bind(id).bind(value).bind(now).execute(db.writer()).await?;
    Ok(done.rows_affected() > 0)
}

pub async fn set_timezone(db: &Db, id: UserId, timezone: i32, now: Millis) -> Result<bool, DbError> {
    let done = sqlx::query("UPDATE users SET timezone = $2, updated_at = $3 WHERE id = $1")
        .bind(id)
        .bind(timezone)
        .bind(now)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Sets (or with `None` clears) the user's theme colour snapshot, in the order primary,
/// secondary, success, info, warning, error, neutral.
pub async fn set_colors(db: &Db, id: UserId, colors: Option<[&str; 7]>, now: Millis) -> Result<bool, DbError> {
    let c = colors.map(|c| c.map(Some)).unwrap_or([None; 7]);
    let done = sqlx::query(
        "UPDATE users SET color_primary = $2, color_secondary = $3, color_success = $4, color_info = $5,
         color_warning = $6, color_error = $7, color_neutral = $8, updated_at = $9 WHERE id = $1",
    )
    .bind(id)
    .bind(c[0])
    .bind(c[1])
    .bind(c[2])
    .bind(c[3])
    .bind(c[4])
    .bind(c[5])
    .bind(c[6])
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}

/// The WHERE clause for `filter`.
fn user_filter(filter: &UserFilter) -> Where {
    let mut clause = Where::new();
    clause.and("group_id = {}", filter.group_id.clone());
    clause.and("status = {}", filter.status.clone());
    clause.and("email LIKE {} ESCAPE '\\'", filter.email_contains.as_deref().map(|e| like_pattern(&e.to_lowercase())));
    clause.and(
        "LOWER(nickname) LIKE {} ESCAPE '\\'",
        filter.nickname_contains.as_deref().map(|n| like_pattern(&n.to_lowercase())),
    );
    clause
}

/// One page of users matching `filter`, newest first, with the total count.
pub async fn list(db: &Db, filter: &UserFilter, offset: i64, limit: i64) -> Result<(i64, Vec<UserRow>), DbError> {
    let (rows, total) =
        user_filter(filter).page(db, (USER_COLUMNS, "users", ""), "created_at DESC, id", (offset, limit)).await?;
    Ok((total, rows))
}

/// Changes administrators may make; `None` leaves a column as it is.
#[derive(Debug, Default)]
pub struct UserChanges<'a> {
    pub nickname: Option<&'a str>,
    pub group_id: Option<GroupId>,
    pub status: Option<UserStatus>,
    /// The new claims version when the change alters what the user's access tokens snapshot
    /// (their group).
    pub claims_version: Option<Millis>,
}

/// Applies `changes` to user `id`, unless the user is an active administrator whom the change
/// would make no longer one (another group, another status) while no other active
/// administrator exists: the check and the change are one statement. Answers whether it
/// changed a row (false: no such user, or the last administrator).
pub async fn update(db: &Db, id: UserId, changes: &UserChanges<'_>, now: Millis) -> Result<bool, DbError> {
    let done = sqlx::query(&format!(
        "UPDATE users SET nickname = COALESCE($2, nickname), group_id = COALESCE($3, group_id),
         status = COALESCE($4, status), updated_at = $5, claims_changed_at = COALESCE($6, claims_changed_at)
         WHERE id = $1 AND (
           NOT (users.status = 'ACTIVE' AND EXISTS (SELECT 1 FROM groups g WHERE g.id = users.group_id AND g.is_admin = 1))
           OR (COALESCE($4, users.status) = 'ACTIVE'
               AND EXISTS (SELECT 1 FROM groups g WHERE g.id = COALESCE($3, users.group_id) AND g.is_admin = 1))
           OR {OTHER_ACTIVE_ADMIN})"
    ))
    .bind(id)
    .bind(changes.nickname)
    .bind(changes.group_id)
    .bind(changes.status)
    .bind(now)
    .bind(changes.claims_version)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}

/// An active administrator other than the user `$1` exists (SQL condition).
pub(crate) const OTHER_ACTIVE_ADMIN: &str = "EXISTS (SELECT 1 FROM users o JOIN groups og ON og.id = o.group_id \
     WHERE og.is_admin = 1 AND o.status = 'ACTIVE' AND o.id <> $1)";

pub async fn delete(db: &Db, id: UserId) -> Result<bool, DbError> {
    let done = sqlx::query("DELETE FROM users WHERE id = $1").bind(id).execute(db.writer()).await?;
    Ok(done.rows_affected() > 0)
}

/// Users whose status is not `ACTIVE` and changed since `since` (to restore bans at start-up).
pub async fn inactive_changed_since(db: &Db, since: Millis) -> Result<Vec<UserId>, DbError> {
    let rows: Vec<(UserId,)> = sqlx::query_as("SELECT id FROM users WHERE status <> 'ACTIVE' AND updated_at >= $1")
        .bind(since)
        .fetch_all(db.reader())
        .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// Users whose group changed since `since`, with the time of that change (to restore token
/// revocations at start-up).
pub async fn claims_changed_since(db: &Db, since: Millis) -> Result<Vec<(UserId, Millis)>, DbError> {
    Ok(sqlx::query_as("SELECT id, claims_changed_at FROM users WHERE claims_changed_at >= $1")
        .bind(since)
        .fetch_all(db.reader())
        .await?)
}

// ---- storage quota ----

/// A user's used bytes, group quota and active storage packs at `$2`, for a query `FROM`
/// [`USAGE_FROM`] `WHERE u.id = $1`. The packs are summed as doubles and capped at 4e18 bytes:
/// SQLite's integer `SUM` fails on overflow, and packs are sized by administrators. Doubles are
/// exact for totals below 2^53 bytes (8 PiB).
const USAGE_COLUMNS: &str = "u.storage AS used, g.max_storage AS group_storage, \
     CAST(g.version_max_count AS BIGINT) AS versions, \
     (SELECT CAST(CASE WHEN SUM(CAST(sp.size AS DOUBLE PRECISION)) > 4e18 THEN 4e18 \
     ELSE SUM(CAST(sp.size AS DOUBLE PRECISION)) END AS BIGINT) \
     FROM storage_packs sp WHERE sp.user_id = u.id AND sp.starts_at <= $2 \
     AND (sp.expires_at IS NULL OR sp.expires_at > $2) AND sp.revoked_at IS NULL) AS packs";
const USAGE_FROM: &str = "users u JOIN groups g ON g.id = u.group_id";

/// Used bytes and capacity (group quota plus packs) from a row with [`USAGE_COLUMNS`].
fn usage_of(row: &dyn Values) -> Result<(i64, i64), DbError> {
    let (used, group, packs) = (row.int("used")?, row.int("group_storage")?, row.opt_int("packs")?);
    Ok((used, group.saturating_add(packs.unwrap_or(0))))
}

/// The user's used bytes and capacity (group quota plus active storage packs at `now`).
pub async fn usage_and_capacity(db: &Db, user_id: UserId, now: Millis) -> Result<(i64, i64), DbError> {
    let row = sqlx::query(&format!("SELECT {USAGE_COLUMNS} FROM {USAGE_FROM} WHERE u.id = $1"))
        .bind(user_id)
        .bind(now)
        .fetch_one(db.reader())
        .await?;
    usage_of(&row)
}

/// The user's used bytes, group quota and bytes of packs counting at `now`.
pub async fn usage_parts(db: &Db, user_id: UserId, now: Millis) -> Result<(i64, i64, i64), DbError> {
    let row = sqlx::query(&format!("SELECT {USAGE_COLUMNS} FROM {USAGE_FROM} WHERE u.id = $1"))
        .bind(user_id)
        .bind(now)
        .fetch_one(db.reader())
        .await?;
    Ok((row.int("used")?, row.int("group_storage")?, row.opt_int("packs")?.unwrap_or(0)))
}

/// [`usage_and_capacity`], and whether replaced content is kept as a version (the group keeps
/// versions): what replacing a file's content needs to know.
pub async fn write_usage(db: &Db, user_id: UserId, now: Millis) -> Result<(i64, i64, bool), DbError> {
    let row = sqlx::query(&format!("SELECT {USAGE_COLUMNS} FROM {USAGE_FROM} WHERE u.id = $1"))
        .bind(user_id)
        .bind(now)
        .fetch_one(db.reader())
        .await?;
    let (used, capacity) = usage_of(&row)?;
    Ok((used, capacity, row.int("versions")? > 0))
}

/// [`write_usage`] together with the first storage policy of group `group_id` (`None`
/// when the group has none): what writing a new file needs to know, in one statement.
pub async fn usage_capacity_and_policy(
    db: &Db,
    user_id: UserId,
    group_id: GroupId,
    now: Millis,
) -> Result<(i64, i64, bool, Option<super::policies::PolicyRow>), DbError> {
    let policy_columns = super::policies::qualified_columns("p");
    let sql = format!(
        "SELECT {USAGE_COLUMNS}, {policy_columns} FROM {USAGE_FROM}
         LEFT JOIN policies p ON p.id = (SELECT gp.policy_id FROM group_policies gp WHERE gp.group_id = $3 ORDER BY gp.position LIMIT 1)
         WHERE u.id = $1"
    );
    let (user_id, group_id) = (user_id.to_string(), group_id.to_string());
    let args = [Arg::Text(&user_id), Arg::Int(now), Arg::Text(&group_id)];
    let decode = |row: &dyn Values| {
        let (used, capacity) = usage_of(row)?;
        let keeps_versions = row.int("versions")? > 0;
        let policy = match row.opt_text("id")? {
            Some(_) => Some(super::policies::PolicyRow::read(row)?),
            None => None,
        };
        Ok((used, capacity, keeps_versions, policy))
    };
    db.read_row(&sql, &args, decode).await?.ok_or(DbError::Sqlx(sqlx::Error::RowNotFound))
}

/// A user's capacity: the group's `max_storage` plus storage packs active at `now`.
pub async fn capacity(db: &Db, user_id: UserId, now: Millis) -> Result<i64, DbError> {
    Ok(usage_and_capacity(db, user_id, now).await?.1)
}

/// Adds `bytes` to the user's used storage only if the total stays within `capacity`; answers
/// whether it did. One conditional statement, so concurrent reservations cannot overshoot.
pub async fn reserve_storage(conn: &mut Conn, user_id: UserId, bytes: i64, capacity: i64) -> Result<bool, DbError> {
    let done = sqlx::query(RESERVE_STORAGE).bind(user_id).bind(bytes).bind(capacity).execute(conn).await?;
    Ok(done.rows_affected() > 0)
}

/// Changes the user's used storage by `bytes`: a positive change only if the total stays within
/// `capacity` ([`reserve_storage`]), a negative one always ([`release_storage`]). Answers
/// whether it was made.
pub async fn charge_storage(conn: &mut Conn, user_id: UserId, bytes: i64, capacity: i64) -> Result<bool, DbError> {
    match bytes {
        1.. => reserve_storage(conn, user_id, bytes, capacity).await,
        ..0 => release_storage(conn, user_id, -bytes).await.map(|()| true),
        0 => Ok(true),
    }
}

/// The statement [`charge_storage`] runs for `user_id` (as stored, text), for a caller that
/// runs it itself (the ingest sequence), and whether it must change a row: a reservation
/// that would pass the capacity changes none. `None`: a charge of 0 changes nothing.
pub(super) fn charge_statement(user_id: &str, bytes: i64, capacity: i64) -> Option<(&'static str, Vec<Arg<'_>>, bool)> {
    match bytes {
        1.. => Some((RESERVE_STORAGE, vec![Arg::Text(user_id), Arg::Int(bytes), Arg::Int(capacity)], true)),
        ..0 => Some((RELEASE_STORAGE, vec![Arg::Text(user_id), Arg::Int(-bytes)], false)),
        0 => None,
    }
}

/// `$1` the user, `$2` the bytes, `$3` the capacity the total must stay within.
const RESERVE_STORAGE: &str = "UPDATE users SET storage = storage + $2 WHERE id = $1 AND storage + $2 <= $3";
/// `$1` the user, `$2` the bytes given back.
const RELEASE_STORAGE: &str =
    "UPDATE users SET storage = CASE WHEN storage > $2 THEN storage - $2 ELSE 0 END WHERE id = $1";

/// Gives back `bytes` of used storage (never below zero).
pub async fn release_storage(conn: &mut Conn, user_id: UserId, bytes: i64) -> Result<(), DbError> {
    sqlx::query(RELEASE_STORAGE).bind(user_id).bind(bytes).execute(conn).await?;
    Ok(())
}

/// Sets the user's used storage (calibration).
pub async fn set_storage(db: &Db, user_id: UserId, bytes: i64) -> Result<(), DbError> {
    sqlx::query("UPDATE users SET storage = $2 WHERE id = $1").bind(user_id).bind(bytes).execute(db.writer()).await?;
    Ok(())
}
