//! Administrators' management of users: list with filters, a detail view, create, change (including bans and
//! group moves, which take effect on already-issued tokens), delete.

use nubo_common::secret::Secret;
use nubo_model::db::users::{UserChanges, UserRow};
use nubo_model::db::{self};
use nubo_model::domain::activity::{Action, TargetKind};
use nubo_model::domain::ids::{GroupId, UserId};
use nubo_model::domain::time::now_ms;
use nubo_model::domain::user::UserFilter;
use nubo_model::domain::user::UserStatus;
use uuid::Uuid;

use crate::audit::activity::{self, Activity};
use crate::context::Context;
use crate::credentials::password::hash_password;
use crate::credentials::revocation;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::identity::accounts::{self, UserView};
use crate::identity::providers::password::EMAIL_PASSWORD;
use crate::{Page, PageRequest, identity::groups};

pub(crate) fn not_found() -> ServiceError {
    ServiceError::not_found(codes::USER_NOT_FOUND, "no such user")
}

pub async fn list(ctx: &Context, filter: &UserFilter, page: PageRequest) -> ServiceResult<Page<UserView>> {
    let (count, rows) = db::users::list(ctx.db(), filter, page.offset, page.limit).await?;
    let mut items = Vec::with_capacity(rows.len());
    for row in &rows {
        items.push(accounts::user_view(ctx, row).await?);
    }
    Ok(Page { count, items })
}

pub async fn get(ctx: &Context, id: UserId) -> ServiceResult<UserView> {
    let row = db::users::find(ctx.db(), id).await?.ok_or_else(not_found)?;
    accounts::user_view(ctx, &row).await
}

/// What an administrator may change about a user; `None` keeps the current value.
#[derive(Debug, Default)]
pub struct UserUpdate {
    pub nickname: Option<String>,
    pub group_id: Option<Uuid>,
    pub status: Option<UserStatus>,
    pub password: Option<Secret>,
}

pub async fn update(ctx: &Context, actor: UserId, id: UserId, update: UserUpdate) -> ServiceResult<UserView> {
    let current = db::users::find(ctx.db(), id).await?.ok_or_else(not_found)?;
    if actor == id && update.status.is_some_and(|s| s != UserStatus::Active) {
        return Err(ServiceError::conflict(codes::USER_CANNOT_BAN_SELF, "administrators cannot deactivate themselves"));
    }
    let nickname = update.nickname.as_deref().map(accounts::parse_nickname).transpose()?;
    let group_id = update.group_id.map(GroupId::from);
    if let Some(group) = group_id
        && db::groups::find(ctx.db(), group).await?.is_none()
    {
        return Err(ServiceError::validation("group_id", "no such group"));
    }
    let password_hash = match &update.password {
        Some(password) => {
            Some(hash_password(password).await.map_err(|e| ServiceError::validation("password", e.to_string()))?)
        }
        None => None,
    };
    let now = now_ms();
    // A move to another group makes the user's tokens stale: a claims version strictly newer
    // than the last one.
    let moved = group_id.is_some_and(|g| g != current.group_id);
    let claims_version = moved.then(|| now.max(current.claims_changed_at + 1));
    let changes = UserChanges { nickname: nickname.as_deref(), group_id, status: update.status, claims_version };
    if !db::users::update(ctx.db(), id, &changes, now).await? {
        return Err(groups::last_administrator());
    }
    if let Some(hash) = password_hash {
        db::users::set_credential(ctx.db(), id, EMAIL_PASSWORD, &hash).await?;
        revocation::end_sessions(ctx.db(), ctx.store(), id).await?;
    }
    // Each effect has its own entry, so lifting a ban never revives claims a move made stale.
    if let Some(version) = claims_version {
        // The administrator's choice stands: a temporary group from a code does not move the
        // user back when it ends.
        db::redeem::forget_temporary(ctx.db(), id).await?;
        revocation::user_claims_changed(ctx.store(), id, version).await?;
    }
    match update.status {
        Some(UserStatus::Active) if current.status != UserStatus::Active => revocation::unban(ctx.store(), id).await?,
        Some(status) if status != UserStatus::Active => {
            revocation::ban(ctx.store(), id).await?;
            db::refresh_tokens::revoke_user(ctx.db(), id, now).await?;
        }
        _ => {}
    }
    activity::record(ctx.db(), update_activity(actor, &current, &update)).await;
    get(ctx, id).await
}

/// What the activity log keeps of an administrator's change to `user`: a ban as `admin.ban`,
/// anything else as `admin.user_update` with the names of the fields (never a password).
fn update_activity(actor: UserId, user: &UserRow, update: &UserUpdate) -> Activity {
    let banned = update.status.is_some_and(|status| status != UserStatus::Active) && user.status == UserStatus::Active;
    let action = if banned { Action::AdminBan } else { Action::AdminUserUpdate };
    let fields: Vec<&str> = [
        ("nickname", update.nickname.is_some()),
        ("group_id", update.group_id.is_some()),
        ("status", update.status.is_some()),
        ("password", update.password.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect();
    let mut entry = Activity::by(actor, action).on(TargetKind::User, user.id, Some(&user.email)).with("fields", fields);
    if let Some(status) = update.status {
        entry = entry.with("status", status);
    }
    entry
}

pub async fn delete(ctx: &Context, actor: UserId, id: UserId) -> ServiceResult<()> {
    if actor == id {
        return Err(ServiceError::new(
            ErrorKind::Conflict,
            codes::USER_CANNOT_DELETE_SELF,
            "administrators cannot delete themselves",
        ));
    }
    let Some(user) = db::users::find(ctx.db(), id).await? else { return Err(not_found()) };
    // Refuse the user's tokens first, so nothing slips through while the files go.
    revocation::deleted(ctx.store(), id).await?;
    crate::tree::files::delete_everything_of(ctx, id).await?;
    db::users::delete(ctx.db(), id).await?;
    activity::record(
        ctx.db(),
        Activity::by(actor, Action::AdminUserDelete).on(TargetKind::User, id, Some(&user.email)),
    )
    .await;
    Ok(())
}

/// Recomputes a user's used storage from their files and open upload sessions, repairing any
/// drift. Answers the user with the corrected figure.
pub async fn calibrate(ctx: &Context, id: UserId) -> ServiceResult<UserView> {
    db::users::find(ctx.db(), id).await?.ok_or_else(not_found)?;
    let used = db::objects::owned_bytes(ctx.db(), id).await?
        + db::versions::owned_bytes(ctx.db(), id).await?
        + db::uploads::reserved_bytes(ctx.db(), id).await?;
    db::users::set_storage(ctx.db(), id, used).await?;
    get(ctx, id).await
}
