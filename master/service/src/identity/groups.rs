//! Administrators' management of user groups: quota, permissions, the ordered storage-policy
//! list; a group that still has members cannot be deleted.

use nubo_model::db::groups::{GroupRow, GroupValues};
use nubo_model::db::{self, Db, DbError};
use nubo_model::domain::activity::{Action, TargetKind};
use nubo_model::domain::group::GroupPermissions;
use nubo_model::domain::ids::{GroupId, PolicyId, UserId};
use nubo_model::domain::time::now_ms;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::audit::activity::{self, Activity};
use crate::context::Context;
use crate::credentials::revocation;
use crate::error::{ServiceError, ServiceResult};
use crate::error_codes as codes;

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GroupView {
    pub id: Uuid,
    pub name: String,
    pub is_admin: bool,
    /// Storage capacity of each member, in bytes.
    pub max_storage: i64,
    pub permissions: GroupPermissions,
    /// Storage policies members may use, in order; the first is the default for new users.
    pub policy_ids: Vec<Uuid>,
    /// Days trashed objects are kept before they are deleted for good.
    pub trash_retention_days: i32,
    /// How many earlier contents (versions) each file keeps; 0 keeps none.
    pub version_max_count: i32,
    /// Days a version is kept after it was replaced; 0: no limit by age.
    pub version_max_days: i32,
    pub member_count: i64,
}

/// A group as written by administrators.
#[derive(Debug, Clone)]
pub struct GroupInput {
    pub name: String,
    pub is_admin: bool,
    pub max_storage: i64,
    pub permissions: GroupPermissions,
    pub policy_ids: Vec<Uuid>,
    pub trash_retention_days: i32,
    pub version_max_count: i32,
    pub version_max_days: i32,
}

fn not_found() -> ServiceError {
    ServiceError::not_found(codes::GROUP_NOT_FOUND, "no such group")
}

/// A change refused because it would leave the site without an active administrator.
pub fn last_administrator() -> ServiceError {
    ServiceError::conflict(
        codes::GROUP_LAST_ADMINISTRATOR,
        "this would leave no active administrator: make someone else an administrator first",
    )
}

async fn view(db: &Db, row: GroupRow, member_count: i64) -> ServiceResult<GroupView> {
    let policy_ids = db::groups::policy_ids(db, row.id).await?.into_iter().map(Uuid::from).collect();
    Ok(GroupView {
        id: row.id.into(),
        name: row.name,
        is_admin: row.is_admin,
        max_storage: row.max_storage,
        permissions: row.permissions,
        policy_ids,
        trash_retention_days: row.trash_retention_days,
        version_max_count: row.version_max_count,
        version_max_days: row.version_max_days,
        member_count,
    })
}

pub async fn list(ctx: &Context) -> ServiceResult<Vec<GroupView>> {
    let db = ctx.db();
    let mut views = Vec::new();
    for (row, members) in db::groups::list(db).await? {
        views.push(view(db, row, members).await?);
    }
    Ok(views)
}

pub async fn get(ctx: &Context, id: GroupId) -> ServiceResult<GroupView> {
    let db = ctx.db();
    let row = db::groups::find(db, id).await?.ok_or_else(not_found)?;
    let members = db::groups::member_count(db, id).await?;
    view(db, row, members).await
}

/// Checks the input and answers the trimmed name and the policy ids.
async fn validate(db: &Db, input: &GroupInput) -> ServiceResult<(String, Vec<PolicyId>)> {
    let name = input.name.trim();
    if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        return Err(ServiceError::validation("name", "name must be 1 to 64 characters"));
    }
    if !(1..=3650).contains(&input.trash_retention_days) {
        return Err(ServiceError::validation("trash_retention_days", "trash_retention_days must be from 1 to 3650"));
    }
    if !(0..=1000).contains(&input.version_max_count) {
        return Err(ServiceError::validation("version_max_count", "version_max_count must be from 0 to 1000"));
    }
    if !(0..=36500).contains(&input.version_max_days) {
        return Err(ServiceError::validation("version_max_days", "version_max_days must be from 0 to 36500"));
    }
    if input.max_storage < 0 {
        return Err(ServiceError::validation("max_storage", "max_storage must be 0 or more bytes"));
    }
    let policy_ids: Vec<PolicyId> = input.policy_ids.iter().copied().map(PolicyId::from).collect();
    let mut unique = policy_ids.clone();
    unique.sort();
    unique.dedup();
    if unique.len() != policy_ids.len() {
        return Err(ServiceError::validation("policy_ids", "a policy is listed twice"));
    }
    let unknown = db::groups::unknown_policies(db, &policy_ids).await?;
    if !unknown.is_empty() {
        let unknown: Vec<String> = unknown.iter().map(PolicyId::to_string).collect();
        return Err(ServiceError::validation("policy_ids", format!("no such policy: {}", unknown.join(", "))));
    }
    Ok((name.to_owned(), policy_ids))
}

fn name_taken(e: DbError, name: &str) -> ServiceError {
    match e {
        ref err if err.is_unique_violation() => {
            ServiceError::conflict(codes::GROUP_NAME_TAKEN, format!("a group named {name:?} exists")).with_field("name")
        }
        other => other.into(),
    }
}

pub async fn create(ctx: &Context, actor: UserId, input: GroupInput) -> ServiceResult<GroupView> {
    let db = ctx.db();
    let (name, policy_ids) = validate(db, &input).await?;
    let id = GroupId::random();
    let values = GroupValues {
        name: &name,
        is_admin: input.is_admin,
        max_storage: input.max_storage,
        permissions: input.permissions,
        trash_retention_days: input.trash_retention_days,
        version_max_count: input.version_max_count,
        version_max_days: input.version_max_days,
    };
    db::groups::insert_all(db, &[(id, values)], now_ms()).await.map_err(|e| name_taken(e, &name))?;
    db::groups::set_policies(db, id, &policy_ids).await?;
    activity::record(db, Activity::by(actor, Action::AdminGroupCreate).on(TargetKind::Group, id, Some(&name))).await;
    get(ctx, id).await
}

/// Replaces a group's settings. A change to what access tokens snapshot (name, admin flag,
/// capacity, permissions) makes every member's tokens stale at once, on every master: they
/// refresh to get the new claims. Taking the admin flag from the group of the last active
/// administrators is refused (409 `group.last_administrator`).
pub async fn update(ctx: &Context, actor: UserId, id: GroupId, input: GroupInput) -> ServiceResult<GroupView> {
    let db = ctx.db();
    let (name, policy_ids) = validate(db, &input).await?;
    let current = db::groups::find(db, id).await?.ok_or_else(not_found)?;
    let claims_changed = current.name != name
        || current.is_admin != input.is_admin
        || current.max_storage != input.max_storage
        || current.permissions != input.permissions;
    let values = GroupValues {
        name: &name,
        is_admin: input.is_admin,
        max_storage: input.max_storage,
        permissions: input.permissions,
        trash_retention_days: input.trash_retention_days,
        version_max_count: input.version_max_count,
        version_max_days: input.version_max_days,
    };
    let now = now_ms();
    // Strictly newer than the last version, even for two changes within one millisecond.
    let version = claims_changed.then(|| now.max(current.claims_changed_at + 1));
    if !db::groups::update(db, id, &values, version, now).await.map_err(|e| name_taken(e, &name))? {
        // The group was found above: what refused the change is the last-administrator rule.
        return Err(last_administrator());
    }
    if let Some(version) = version {
        revocation::group_claims_changed(ctx.store(), id, version).await?;
    }
    db::groups::set_policies(db, id, &policy_ids).await?;
    activity::record(db, Activity::by(actor, Action::AdminGroupUpdate).on(TargetKind::Group, id, Some(&name))).await;
    get(ctx, id).await
}

/// What members of the group may do, read from the database (not from a token).
pub async fn permissions(db: &Db, group_id: GroupId) -> ServiceResult<GroupPermissions> {
    let group = db::groups::find(db, group_id).await?.ok_or_else(not_found)?;
    Ok(group.permissions)
}

pub async fn delete(ctx: &Context, actor: UserId, id: GroupId) -> ServiceResult<()> {
    let db = ctx.db();
    let Some(group) = db::groups::find(db, id).await? else { return Err(not_found()) };
    let members = db::groups::member_count(db, id).await?;
    if members > 0 {
        return Err(ServiceError::conflict(
            codes::GROUP_HAS_USERS,
            format!("the group still has {members} member(s): move them to another group first"),
        ));
    }
    match db::groups::delete(db, id).await {
        Ok(_) => {
            let deleted = Activity::by(actor, Action::AdminGroupDelete).on(TargetKind::Group, id, Some(&group.name));
            activity::record(db, deleted).await;
            Ok(())
        }
        // A member joined between the check and the delete.
        Err(DbError::Sqlx(e)) if matches!(&e, sqlx::Error::Database(d) if d.is_foreign_key_violation()) => {
            Err(ServiceError::conflict(codes::GROUP_HAS_USERS, "the group still has members"))
        }
        Err(e) => Err(e.into()),
    }
}
