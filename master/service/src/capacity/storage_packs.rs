//! Storage packs: bytes added to one user's capacity for a time (or forever), granted by an
//! administrator or by a redeemed code through one function ([`grant_on`]), revoked at once,
//! and marked expired by a periodic job. Nothing here deletes files: a user over quota after a
//! pack ends keeps everything, and writes that add bytes answer 507 (the quota checks of
//! `writes`, `uploads`, `files::copy_into` and share saving) until usage falls within capacity.

use nubo_model::db::storage_packs::{NewPack, PackFilter, PackRow};
use nubo_model::db::{self, Conn, DbError};
use nubo_model::domain::ids::UserId;
use nubo_model::domain::time::{Millis, from_rfc3339, now_ms, to_rfc3339};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::context::Context;
use crate::error::{ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::{Page, PageRequest};

/// The longest a pack (or a code's duration) may last when it does not last forever: 100 years.
pub const MAX_DURATION_DAYS: i64 = 36_500;
const DAY_MS: i64 = 86_400_000;

/// Where a pack stands at the time it is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PackStatus {
    /// Counting now.
    Active,
    /// Starts later.
    Scheduled,
    Expired,
    Revoked,
}

/// A storage pack as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PackView {
    pub id: Uuid,
    pub user_id: Uuid,
    /// The owner's e-mail address (in administrators' lists).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_email: Option<String>,
    pub name: String,
    /// Bytes added to the capacity while active.
    pub size: i64,
    pub starts_at: String,
    /// Absent: the pack lasts forever.
    pub expires_at: Option<String>,
    pub status: PackStatus,
    /// `admin` (granted) or `redeem` (from a code).
    pub source: String,
    pub revoked_at: Option<String>,
    pub created_at: String,
}

fn view(row: &PackRow, now: Millis) -> PackView {
    let status = if row.revoked_at.is_some() {
        PackStatus::Revoked
    } else if row.expires_at.is_some_and(|end| end <= now) {
        PackStatus::Expired
    } else if row.starts_at > now {
        PackStatus::Scheduled
    } else {
        PackStatus::Active
    };
    PackView {
        id: row.id,
        user_id: row.user_id.into(),
        user_email: row.user_email.clone(),
        name: row.name.clone(),
        size: row.size,
        starts_at: to_rfc3339(row.starts_at),
        expires_at: row.expires_at.map(to_rfc3339),
        status,
        source: row.source.clone(),
        revoked_at: row.revoked_at.map(to_rfc3339),
        created_at: to_rfc3339(row.created_at),
    }
}

fn not_found() -> ServiceError {
    ServiceError::not_found(codes::STORAGE_PACK_NOT_FOUND, "no such storage pack")
}

/// A user's packs, active and past, newest first (their own list, and the admin user detail).
pub async fn list_mine(ctx: &Context, user: UserId) -> ServiceResult<Vec<PackView>> {
    let now = now_ms();
    Ok(db::storage_packs::list_of(ctx.db(), user).await?.iter().map(|row| view(row, now)).collect())
}

/// The caller's storage: used bytes, the group's quota and the active packs' bytes.
#[derive(Debug, Clone, Copy)]
pub struct StorageFigures {
    pub used: i64,
    /// Of `used`, what unfinished uploads hold.
    pub reserved: i64,
    pub group: i64,
    pub packs: i64,
}

impl StorageFigures {
    pub fn total(&self) -> i64 {
        self.group.saturating_add(self.packs)
    }
}

pub async fn storage_of(ctx: &Context, user: UserId) -> ServiceResult<StorageFigures> {
    let (used, group, packs) = db::users::usage_parts(ctx.db(), user, now_ms()).await?;
    let reserved = db::uploads::reserved_bytes(ctx.db(), user).await?;
    Ok(StorageFigures { used, reserved, group, packs })
}

/// Administrators' list of packs.
pub async fn list(
    ctx: &Context,
    user_id: Option<UserId>,
    active: Option<bool>,
    page: PageRequest,
) -> ServiceResult<Page<PackView>> {
    let now = now_ms();
    let filter = PackFilter { user_id, active, now };
    let (count, rows) = db::storage_packs::list(ctx.db(), &filter, page.offset, page.limit).await?;
    Ok(Page { count, items: rows.iter().map(|row| view(row, now)).collect() })
}

/// A grant as an administrator writes it: the end is `expires_at`, or `duration_days` after
/// the start, or never (neither given).
#[derive(Debug, Clone)]
pub struct GrantRequest {
    pub user_id: Uuid,
    pub name: String,
    pub size: i64,
    pub starts_at: Option<String>,
    pub expires_at: Option<String>,
    pub duration_days: Option<i64>,
}

/// A pack ready to be granted (checked).
#[derive(Debug, Clone)]
pub struct PackGrant {
    pub user_id: UserId,
    pub name: String,
    pub size: i64,
    pub starts_at: Millis,
    pub expires_at: Option<Millis>,
    pub granted_by: Option<Uuid>,
    pub redeem_code_id: Option<Uuid>,
}

/// Checks a pack's name (1..=100 characters once trimmed) and size (1 byte or more).
pub fn check_name_and_size(name: &str, size: i64) -> ServiceResult<String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(ServiceError::validation("name", "name must be 1 to 100 characters"));
    }
    if size <= 0 {
        return Err(ServiceError::validation("size", "size must be at least 1 byte"));
    }
    Ok(name.to_owned())
}

/// Checks a duration in days (1..=[`MAX_DURATION_DAYS`]) and answers it in milliseconds.
pub fn duration_ms(field: &str, days: i64) -> ServiceResult<i64> {
    if !(1..=MAX_DURATION_DAYS).contains(&days) {
        return Err(ServiceError::validation(field, format!("must be from 1 to {MAX_DURATION_DAYS} days")));
    }
    Ok(days * DAY_MS)
}

fn parse_time(field: &str, text: &str) -> ServiceResult<Millis> {
    from_rfc3339(text).ok_or_else(|| ServiceError::validation(field, "must be an RFC 3339 time"))
}

/// Grants a pack to a user (an administrator's grant).
pub async fn grant(ctx: &Context, admin: UserId, request: GrantRequest) -> ServiceResult<PackView> {
    let name = check_name_and_size(&request.name, request.size)?;
    let now = now_ms();
    let starts_at = request.starts_at.as_deref().map(|t| parse_time("starts_at", t)).transpose()?.unwrap_or(now);
    let expires_at = match (request.expires_at.as_deref(), request.duration_days) {
        (Some(_), Some(_)) => {
            return Err(ServiceError::validation("duration_days", "give expires_at or duration_days, not both"));
        }
        (Some(text), None) => Some(parse_time("expires_at", text)?),
        (None, Some(days)) => Some(starts_at + duration_ms("duration_days", days)?),
        (None, None) => None,
    };
    if expires_at.is_some_and(|end| end <= starts_at.max(now)) {
        return Err(ServiceError::validation("expires_at", "must be after the start and in the future"));
    }
    if db::users::find(ctx.db(), request.user_id.into()).await?.is_none() {
        return Err(ServiceError::validation("user_id", "no such user"));
    }
    let grant = PackGrant {
        user_id: request.user_id.into(),
        name,
        size: request.size,
        starts_at,
        expires_at,
        granted_by: Some(admin.as_uuid()),
        redeem_code_id: None,
    };
    let mut conn = ctx.db().writer().acquire().await.map_err(DbError::from)?;
    let id = grant_on(&mut conn, &grant, now).await?;
    drop(conn);
    let row = db::storage_packs::find(ctx.db(), id).await?.ok_or_else(not_found)?;
    Ok(view(&row, now))
}

/// Records a pack on `conn` (a connection, or a redemption's transaction): the one way a pack
/// comes into being. Answers its id.
pub async fn grant_on(conn: &mut Conn, grant: &PackGrant, now: Millis) -> ServiceResult<Uuid> {
    let id = Uuid::new_v4();
    let pack = NewPack {
        id,
        user_id: grant.user_id,
        name: &grant.name,
        size: grant.size,
        starts_at: grant.starts_at,
        expires_at: grant.expires_at,
        granted_by: grant.granted_by,
        redeem_code_id: grant.redeem_code_id,
    };
    db::storage_packs::insert(conn, &pack, now).await?;
    Ok(id)
}

/// The pack `id` as shown now.
pub async fn get(ctx: &Context, id: Uuid) -> ServiceResult<PackView> {
    let row = db::storage_packs::find(ctx.db(), id).await?.ok_or_else(not_found)?;
    Ok(view(&row, now_ms()))
}

/// Revokes a pack: it stops counting at once (the next write sees the smaller capacity).
/// Revoking a revoked pack changes nothing.
pub async fn revoke(ctx: &Context, admin: UserId, id: Uuid) -> ServiceResult<()> {
    if db::storage_packs::find(ctx.db(), id).await?.is_none() {
        return Err(not_found());
    }
    db::storage_packs::revoke(ctx.db(), id, admin.as_uuid(), now_ms()).await?;
    Ok(())
}

/// Marks the packs that expired by `now` (the periodic job; idempotent, and safe on several
/// masters at once). Capacity never waits for it: it compares times.
pub async fn mark_expired(ctx: &Context, now: Millis) -> ServiceResult<usize> {
    Ok(db::storage_packs::mark_expired(ctx.db(), now).await? as usize)
}
