//! `/admin`: the site summary, users, groups, site settings and every user's files (access level `admin_required`).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use nubo_common::secret::Secret;
use nubo_model::domain::group::GroupPermissions;
use nubo_model::domain::ids::{GroupId, UserId};
use nubo_model::domain::user::UserFilter;
use nubo_model::domain::user::UserStatus;
use nubo_service::tree::files::FileFilter;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::guard::AdminRequired;
use nubo_service::context::Context;
use nubo_service::identity::accounts::{self, UserView};
use nubo_service::identity::groups::{self, GroupInput, GroupView};
use nubo_service::ops::summary::{self, SiteSummary};
use nubo_service::ops::user_detail::{self, UserDetail};
use nubo_service::settings::site::SettingEntry;
use nubo_service::tree::files::{self, AdminFileView};
use nubo_service::{Page, PageRequest, identity::users, settings::site};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UserListQuery {
    pub group_id: Option<Uuid>,
    pub status: Option<UserStatus>,
    /// Case-insensitive substring of the e-mail address.
    pub email_contains: Option<String>,
    /// Case-insensitive substring of the nickname.
    pub nickname_contains: Option<String>,
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    /// 1..=1000, default 50.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// List users, newest first, with filters.
#[utoipa::path(get, path = "/admin/user", tag = "admin", security(("bearer" = [])), params(UserListQuery),
    responses(
        (status = 200, description = "One page of users", body = Page<UserView>),
        (status = 400, description = "Unreadable query", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 422, description = "Paging out of range", body = ErrorBody),
    ))]
pub async fn list_users(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiQuery(query): ApiQuery<UserListQuery>,
) -> ApiResult<Json<Page<UserView>>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    let filter = UserFilter {
        group_id: query.group_id.map(|g| g.to_string()),
        status: query.status.map(|s| s.as_str().to_owned()),
        email_contains: query.email_contains.filter(|s| !s.is_empty()),
        nickname_contains: query.nickname_contains.filter(|s| !s.is_empty()),
    };
    Ok(Json(users::list(&state, &filter, page).await?))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUserRequest {
    pub email: String,
    #[schema(value_type = String, format = Password)]
    pub password: Secret,
    pub nickname: Option<String>,
    pub group_id: Uuid,
    /// Defaults to ACTIVE.
    pub status: Option<UserStatus>,
}

/// Create a user.
#[utoipa::path(post, path = "/admin/user", tag = "admin", security(("bearer" = [])), request_body = CreateUserRequest,
    responses(
        (status = 201, description = "Created", body = UserView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 409, description = "E-mail taken", body = ErrorBody),
        (status = 422, description = "Invalid field", body = ErrorBody),
    ))]
pub async fn create_user(
    State(state): State<Context>,
    AdminRequired(admin): AdminRequired,
    ApiJson(request): ApiJson<CreateUserRequest>,
) -> ApiResult<(StatusCode, Json<UserView>)> {
    let status = request.status.unwrap_or(UserStatus::Active);
    let user = accounts::create_user(
        &state,
        admin.sub,
        &request.email,
        &request.password,
        request.nickname.as_deref(),
        request.group_id.into(),
        status,
    )
    .await?;
    Ok((StatusCode::CREATED, Json(user)))
}

/// One user in detail: the profile, storage used and capacity, ways to sign in (providers and
/// display names, never credentials), passkeys, and counts of files, folders and shares.
#[utoipa::path(get, path = "/admin/user/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The user", body = UserDetail),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such user", body = ErrorBody),
    ))]
pub async fn get_user(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<UserId>,
) -> ApiResult<Json<UserDetail>> {
    Ok(Json(user_detail::detail(&state, id).await?))
}

/// Changes to a user; absent fields stay as they are.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateUserRequest {
    pub nickname: Option<String>,
    pub group_id: Option<Uuid>,
    /// Anything but ACTIVE bans the user at once, also for tokens already issued.
    pub status: Option<UserStatus>,
    #[schema(value_type = Option<String>, format = Password)]
    pub password: Option<Secret>,
}

/// Change a user: nickname, group (tokens issued before must be refreshed), status (ban/unban,
/// effective at once) or password (signs out every session).
#[utoipa::path(patch, path = "/admin/user/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    request_body = UpdateUserRequest,
    responses(
        (status = 200, description = "The changed user", body = UserView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such user", body = ErrorBody),
        (status = 409, description = "Administrators cannot ban themselves, or no active administrator would be left", body = ErrorBody),
        (status = 422, description = "Invalid field", body = ErrorBody),
    ))]
pub async fn update_user(
    State(state): State<Context>,
    AdminRequired(admin): AdminRequired,
    ApiPath(id): ApiPath<UserId>,
    ApiJson(request): ApiJson<UpdateUserRequest>,
) -> ApiResult<Json<UserView>> {
    let update = users::UserUpdate {
        nickname: request.nickname,
        group_id: request.group_id,
        status: request.status,
        password: request.password,
    };
    Ok(Json(users::update(&state, admin.sub, id, update).await?))
}

/// Delete a user and everything they own.
#[utoipa::path(delete, path = "/admin/user/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such user", body = ErrorBody),
        (status = 409, description = "Administrators cannot delete themselves", body = ErrorBody),
    ))]
pub async fn delete_user(
    State(state): State<Context>,
    AdminRequired(admin): AdminRequired,
    ApiPath(id): ApiPath<UserId>,
) -> ApiResult<StatusCode> {
    users::delete(&state, admin.sub, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Recompute a user's used storage from their files and open uploads.
#[utoipa::path(post, path = "/admin/user/{id}/calibrate", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The user with the recomputed storage", body = UserView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such user", body = ErrorBody),
    ))]
pub async fn calibrate_user(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<UserId>,
) -> ApiResult<Json<UserView>> {
    Ok(Json(users::calibrate(&state, id).await?))
}

/// A group as written.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupRequest {
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    #[serde(default)]
    pub is_admin: bool,
    /// Bytes; 64-bit.
    #[schema(minimum = 0)]
    pub max_storage: i64,
    #[serde(default)]
    pub permissions: GroupPermissions,
    /// Ordered; the first is the default policy of new members.
    #[serde(default)]
    pub policy_ids: Vec<Uuid>,
    /// Days trashed objects are kept (1..=3650, default 30).
    #[serde(default = "default_retention")]
    #[schema(minimum = 1, maximum = 3650)]
    pub trash_retention_days: i32,
    /// How many earlier contents (versions) each file keeps (0..=1000, default 10; 0 keeps none).
    #[serde(default = "default_version_count")]
    #[schema(minimum = 0, maximum = 1000)]
    pub version_max_count: i32,
    /// Days a version is kept after it was replaced (0..=36500, default 30; 0: no limit by age).
    #[serde(default = "default_retention")]
    #[schema(minimum = 0, maximum = 36500)]
    pub version_max_days: i32,
}

/// A group's settings as `PUT` replaces them: those of [`GroupRequest`], with `is_admin`
/// required (left out, it once defaulted to false and took administration away).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupReplacement {
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    pub is_admin: bool,
    /// Bytes; 64-bit.
    #[schema(minimum = 0)]
    pub max_storage: i64,
    #[serde(default)]
    pub permissions: GroupPermissions,
    /// Ordered; the first is the default policy of new members.
    #[serde(default)]
    pub policy_ids: Vec<Uuid>,
    /// Days trashed objects are kept (1..=3650, default 30).
    #[serde(default = "default_retention")]
    #[schema(minimum = 1, maximum = 3650)]
    pub trash_retention_days: i32,
    /// How many earlier contents (versions) each file keeps (0..=1000, default 10; 0 keeps none).
    #[serde(default = "default_version_count")]
    #[schema(minimum = 0, maximum = 1000)]
    pub version_max_count: i32,
    /// Days a version is kept after it was replaced (0..=36500, default 30; 0: no limit by age).
    #[serde(default = "default_retention")]
    #[schema(minimum = 0, maximum = 36500)]
    pub version_max_days: i32,
}

fn default_retention() -> i32 {
    30
}

fn default_version_count() -> i32 {
    10
}

impl From<GroupRequest> for GroupInput {
    fn from(r: GroupRequest) -> Self {
        GroupInput {
            name: r.name,
            is_admin: r.is_admin,
            max_storage: r.max_storage,
            permissions: r.permissions,
            policy_ids: r.policy_ids,
            trash_retention_days: r.trash_retention_days,
            version_max_count: r.version_max_count,
            version_max_days: r.version_max_days,
        }
    }
}

impl From<GroupReplacement> for GroupInput {
    fn from(r: GroupReplacement) -> Self {
        GroupInput {
            name: r.name,
            is_admin: r.is_admin,
            max_storage: r.max_storage,
            permissions: r.permissions,
            policy_ids: r.policy_ids,
            trash_retention_days: r.trash_retention_days,
            version_max_count: r.version_max_count,
            version_max_days: r.version_max_days,
        }
    }
}

/// List groups with member counts.
#[utoipa::path(get, path = "/admin/group", tag = "admin", security(("bearer" = [])),
    responses(
        (status = 200, description = "All groups", body = Vec<GroupView>),
        (status = 403, description = "Not an administrator", body = ErrorBody),
    ))]
pub async fn list_groups(State(state): State<Context>, _admin: AdminRequired) -> ApiResult<Json<Vec<GroupView>>> {
    Ok(Json(groups::list(&state).await?))
}

/// Create a group.
#[utoipa::path(post, path = "/admin/group", tag = "admin", security(("bearer" = [])), request_body = GroupRequest,
    responses(
        (status = 201, description = "Created", body = GroupView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 409, description = "Name taken", body = ErrorBody),
        (status = 422, description = "Invalid field or unknown policy", body = ErrorBody),
    ))]
pub async fn create_group(
    State(state): State<Context>,
    AdminRequired(admin): AdminRequired,
    ApiJson(request): ApiJson<GroupRequest>,
) -> ApiResult<(StatusCode, Json<GroupView>)> {
    Ok((StatusCode::CREATED, Json(groups::create(&state, admin.sub, request.into()).await?)))
}

/// One group.
#[utoipa::path(get, path = "/admin/group/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The group", body = GroupView),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such group", body = ErrorBody),
    ))]
pub async fn get_group(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<GroupId>,
) -> ApiResult<Json<GroupView>> {
    Ok(Json(groups::get(&state, id).await?))
}

/// Replace a group's settings (`is_admin` included: there is no default). Refused when it would
/// take administration from the last active administrators.
#[utoipa::path(put, path = "/admin/group/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    request_body = GroupReplacement,
    responses(
        (status = 200, description = "Updated", body = GroupView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such group", body = ErrorBody),
        (status = 409, description = "Name taken, or no active administrator would be left", body = ErrorBody),
        (status = 422, description = "Invalid field (`is_admin` missing) or unknown policy", body = ErrorBody),
    ))]
pub async fn update_group(
    State(state): State<Context>,
    AdminRequired(admin): AdminRequired,
    ApiPath(id): ApiPath<GroupId>,
    ApiJson(request): ApiJson<GroupReplacement>,
) -> ApiResult<Json<GroupView>> {
    Ok(Json(groups::update(&state, admin.sub, id, request.into()).await?))
}

/// Delete a group; refused while it has members.
#[utoipa::path(delete, path = "/admin/group/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such group", body = ErrorBody),
        (status = 409, description = "The group still has members", body = ErrorBody),
    ))]
pub async fn delete_group(
    State(state): State<Context>,
    AdminRequired(admin): AdminRequired,
    ApiPath(id): ApiPath<GroupId>,
) -> ApiResult<StatusCode> {
    groups::delete(&state, admin.sub, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Every known site setting with its value (stored or default). Secret settings (OAuth client
/// secrets) always read as an empty string: they can be written, never read back.
#[utoipa::path(get, path = "/admin/settings", tag = "admin", security(("bearer" = [])),
    responses(
        (status = 200, description = "Setting name to value (as stored text); secrets (`mail_smtp_password`) are never listed", body = std::collections::HashMap<String, String>),
        (status = 403, description = "Not an administrator", body = ErrorBody),
    ))]
pub async fn get_settings(
    State(state): State<Context>,
    _admin: AdminRequired,
) -> ApiResult<Json<std::collections::HashMap<&'static str, String>>> {
    Ok(Json(site::listed_settings(&state).await?))
}

/// Every known setting described for forms: its name, group (`SettingsType`), type, allowed
/// choices, default and current value typed; secrets say only whether one is set.
#[utoipa::path(get, path = "/admin/settings/catalog", tag = "admin", security(("bearer" = [])),
    responses(
        (status = 200, description = "Every setting in form order, grouped by category", body = Vec<SettingEntry>),
        (status = 403, description = "Not an administrator", body = ErrorBody),
    ))]
pub async fn settings_catalog(
    State(state): State<Context>,
    _admin: AdminRequired,
) -> ApiResult<Json<Vec<SettingEntry>>> {
    Ok(Json(site::catalog(&state).await?))
}

/// Change settings: an object of setting name to value (string, boolean or list as the
/// setting requires). All are written or none.
#[utoipa::path(patch, path = "/admin/settings", tag = "admin", security(("bearer" = [])),
    request_body = Object,
    responses(
        (status = 204, description = "Saved"),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 422, description = "Unknown setting or invalid value; `field` names it", body = ErrorBody),
    ))]
pub async fn update_settings(
    State(state): State<Context>,
    AdminRequired(admin): AdminRequired,
    ApiJson(values): ApiJson<serde_json::Map<String, serde_json::Value>>,
) -> ApiResult<StatusCode> {
    site::save_settings(&state, admin.sub, &values).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FileListQuery {
    /// Only this user's files.
    pub owner_id: Option<Uuid>,
    /// Case-insensitive substring of the name (ASCII letters fold).
    pub name_contains: Option<String>,
    /// Only files stored under this policy.
    pub policy_id: Option<Uuid>,
    /// At least this many bytes.
    #[param(minimum = 0)]
    pub min_size: Option<i64>,
    /// At most this many bytes.
    #[param(minimum = 0)]
    pub max_size: Option<i64>,
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    /// 1..=1000, default 50.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// Every user's files (not in the trash), newest first, with filters.
#[utoipa::path(get, path = "/admin/file", tag = "admin", security(("bearer" = [])), params(FileListQuery),
    responses(
        (status = 200, description = "One page of files", body = Page<AdminFileView>),
        (status = 400, description = "Unreadable query", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 422, description = "Paging or a size out of range", body = ErrorBody),
    ))]
pub async fn list_files(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiQuery(query): ApiQuery<FileListQuery>,
) -> ApiResult<Json<Page<AdminFileView>>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    let filter = FileFilter {
        owner_id: query.owner_id.map(Into::into),
        name_contains: query.name_contains.as_deref().filter(|text| !text.is_empty()),
        policy_id: query.policy_id.map(Into::into),
        min_size: query.min_size,
        max_size: query.max_size,
    };
    Ok(Json(files::admin_files(&state, &filter, page).await?))
}

/// Which objects an administrator deletes, and how.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdminDeleteRequest {
    #[schema(min_items = 1)]
    pub ids: Vec<Uuid>,
    /// Delete for good (quota and storage released) instead of moving to the owners' trash.
    #[serde(default)]
    pub purge: bool,
}

/// Put any users' objects in their owners' trash, or delete them for good with `purge`. Every
/// id must name an object not in the trash (and not a root), checked before anything changes.
#[utoipa::path(delete, path = "/admin/file", tag = "admin", security(("bearer" = [])), request_body = AdminDeleteRequest,
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, description = "Not an administrator, or a root folder", body = ErrorBody),
        (status = 404, description = "No such object, or it is in the trash", body = ErrorBody),
        (status = 409, description = "An upload into a folder is in progress", body = ErrorBody),
        (status = 422, description = "No ids", body = ErrorBody),
    ))]
pub async fn delete_files(
    State(state): State<Context>,
    AdminRequired(admin): AdminRequired,
    ApiJson(request): ApiJson<AdminDeleteRequest>,
) -> ApiResult<StatusCode> {
    files::admin_delete(&state, admin.sub, &request.ids, request.purge).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The site at a glance: users, objects, logical and physical bytes, shares, tasks and nodes by
/// status, registrations and uploads of the last 30 UTC days (zeros where nothing happened),
/// and this master's version and uptime. Read from counters the database keeps, so it stays
/// fast however many objects there are.
#[utoipa::path(get, path = "/admin/summary", tag = "admin", security(("bearer" = [])),
    responses(
        (status = 200, description = "The summary", body = SiteSummary),
        (status = 403, description = "Not an administrator", body = ErrorBody),
    ))]
pub async fn summary(State(state): State<Context>, _admin: AdminRequired) -> ApiResult<Json<SiteSummary>> {
    Ok(Json(summary::summary(&state).await?))
}
