//! Accounts: registration, the caller's profile and settings, password changes, and the
//! caller's theme.

use nubo_common::secret::Secret;
use nubo_model::db::users::{ProfileField, UserRow};
use nubo_model::db::{self, Db};
use nubo_model::domain::activity::{Action, TargetKind};
use nubo_model::domain::ids::{GroupId, UserId};
use nubo_model::domain::settings::AuthMethod;
use nubo_model::domain::theme::{ThemeColors, ThemeSource};
use nubo_model::domain::time::{now_ms, to_rfc3339};
use nubo_model::domain::user::{Email, UserStatus};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::audit::activity::{self, Activity};
use crate::context::Context;
use crate::credentials::password::{PasswordError, hash_password, verify_password};
use crate::credentials::revocation;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::identity::providers::password::EMAIL_PASSWORD;
use crate::{identity::bootstrap, identity::mail_links, settings::site, settings::themes};

/// The group a user belongs to, as shown with the user.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GroupRef {
    pub id: Uuid,
    pub name: String,
}

/// A user as the API shows it. Never carries credentials or the two-factor key.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UserView {
    pub id: Uuid,
    pub email: String,
    pub nickname: String,
    pub status: UserStatus,
    pub group: GroupRef,
    /// Bytes used (including space reserved by unfinished uploads).
    pub storage: i64,
    pub language: String,
    /// Hours from UTC, -12..=14.
    pub timezone: i32,
    pub two_factor_enabled: bool,
    /// Where the avatar is served (`GET /user/avatar/{id}/l`, 256 px; `s` and `m` are 64 and
    /// 128 px), carrying a version so a changed avatar is a new URL; null: none, show initials.
    pub avatar_url: Option<String>,
    pub created_at: String,
}

/// Builds the API view of a user row (one extra lookup for the group name).
pub async fn user_view(ctx: &Context, user: &UserRow) -> ServiceResult<UserView> {
    let group = db::groups::find(ctx.db(), user.group_id).await?;
    Ok(UserView {
        id: user.id.into(),
        email: user.email.clone(),
        nickname: user.nickname.clone(),
        status: user.status,
        group: GroupRef { id: user.group_id.into(), name: group.map(|g| g.name).unwrap_or_default() },
        storage: user.storage,
        language: user.language.clone(),
        timezone: user.timezone,
        two_factor_enabled: user.two_factor_key.is_some(),
        avatar_url: crate::identity::avatars::avatar_url(ctx, user),
        created_at: to_rfc3339(user.created_at),
    })
}

/// A user whose account was found `ACTIVE` for this request: what the user-level guard carries.
#[derive(Debug, Clone)]
pub struct ActiveUser(UserRow);

impl ActiveUser {
    pub fn group_id(&self) -> GroupId {
        self.0.group_id
    }

    pub fn row(&self) -> &UserRow {
        &self.0
    }
}

/// The user behind a token, refused unless `ACTIVE`.
pub async fn load_active_user(ctx: &Context, id: UserId) -> ServiceResult<ActiveUser> {
    let db = ctx.db();
    let user = db::users::find(db, id).await?.ok_or_else(ServiceError::user_not_found)?;
    if user.status != UserStatus::Active {
        return Err(ServiceError::user_inactive());
    }
    Ok(ActiveUser(user))
}

/// The user a long-lived credential (a WOPI token, a media URL) was issued to, checked again
/// at each use: not banned (401 `auth.token_revoked`), still `ACTIVE` (as
/// [`load_active_user`]), and not signed out everywhere or moved to another group since
/// `issued_version`, read from the database because such a credential outlives the store's
/// revocation entries (401 `auth.token_revoked`).
pub async fn credential_holder(ctx: &Context, id: UserId, issued_version: i64) -> ServiceResult<ActiveUser> {
    if revocation::is_banned(ctx.store(), id).await? {
        return Err(ServiceError::token_revoked("the credential's user is banned"));
    }
    let user = load_active_user(ctx, id).await?;
    if issued_version < user.row().claims_changed_at {
        return Err(ServiceError::token_revoked("the credential was issued before its user signed out everywhere"));
    }
    Ok(user)
}

pub(crate) fn password_error(field: &str, err: PasswordError) -> ServiceError {
    match err {
        PasswordError::Length => ServiceError::validation(field, err.to_string()),
        PasswordError::Hash(_) => ServiceError::internal(err),
    }
}

fn nickname_from(email: &Email) -> String {
    email.as_str().split('@').next().unwrap_or("user").chars().take(64).collect()
}

/// Inserts a user with an e-mail-and-password identity; a taken address answers 409.
async fn insert_password_user(
    db: &Db,
    email: &Email,
    nickname: &str,
    password: &Secret,
    group_id: GroupId,
    status: UserStatus,
) -> ServiceResult<UserId> {
    let hash = hash_password(password).await.map_err(|e| password_error("password", e))?;
    let user_id = UserId::random();
    let user = db::users::NewUser { id: user_id, email: email.as_str(), nickname, status, group_id };
    let identity = db::users::NewIdentity {
        provider: EMAIL_PASSWORD,
        identifier: email.as_str(),
        credential: Some(&hash),
        display: None,
        last_used_at: None,
    };
    match db::users::insert_with_identity(db, &user, &identity, now_ms()).await {
        Ok(()) => Ok(user_id),
        Err(e) if e.is_unique_violation() => Err(ServiceError::conflict(
            codes::USER_EMAIL_TAKEN,
            format!("an account with the e-mail address {email} already exists"),
        )
        .with_field("email")),
        Err(e) => Err(e.into()),
    }
}

/// Validates a nickname: 1..=64 characters after trimming, no control characters.
pub fn parse_nickname(raw: &str) -> ServiceResult<String> {
    let nickname = raw.trim();
    let length = nickname.chars().count();
    if length == 0 || length > 64 || nickname.chars().any(char::is_control) {
        return Err(ServiceError::validation(
            "nickname",
            "nickname must be 1 to 64 characters without control characters",
        ));
    }
    Ok(nickname.to_owned())
}

/// Creates an active administrator with an e-mail-and-password credential.
pub async fn create_admin(db: &Db, email: &str, password: &Secret) -> ServiceResult<Uuid> {
    let email = Email::parse(email).map_err(|why| ServiceError::validation("email", why))?;
    let group = db::groups::first_admin_group(db)
        .await?
        .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("no administrators' group exists")))?;
    let id = insert_password_user(db, &email, &nickname_from(&email), password, group.id, UserStatus::Active).await?;
    Ok(id.into())
}

/// Creates a user in a given group (administrators' API; `actor` is the administrator).
pub async fn create_user(
    ctx: &Context,
    actor: UserId,
    email: &str,
    password: &Secret,
    nickname: Option<&str>,
    group_id: GroupId,
    status: UserStatus,
) -> ServiceResult<UserView> {
    let db = ctx.db();
    let email = Email::parse(email).map_err(|why| ServiceError::validation("email", why))?;
    let nickname = nickname.map(parse_nickname).transpose()?.unwrap_or_else(|| nickname_from(&email));
    if db::groups::find(db, group_id).await?.is_none() {
        return Err(ServiceError::validation("group_id", "no such group"));
    }
    let id = insert_password_user(db, &email, &nickname, password, group_id, status).await?;
    activity::record(db, Activity::by(actor, Action::AdminUserCreate).on(TargetKind::User, id, Some(email.as_str())))
        .await;
    let row = db::users::find(db, id).await?.ok_or_else(|| ServiceError::internal(anyhow::anyhow!("user vanished")))?;
    user_view(ctx, &row).await
}

/// Self-service registration with e-mail and password, into the registrations group. With
/// `register_email_verification` on, the account starts `INACTIVE` and is mailed a link that
/// activates it.
pub async fn register(
    ctx: &Context,
    provider: AuthMethod,
    email: &str,
    password: &Secret,
    nickname: Option<&str>,
) -> ServiceResult<UserView> {
    let config = site::current(ctx).await?;
    site::require_enabled_method(&config, provider)?;
    if provider != AuthMethod::EmailPassword {
        return Err(ServiceError::new(
            ErrorKind::BadRequest,
            codes::AUTH_REGISTRATION_UNSUPPORTED,
            "this provider registers through its own sign-in",
        ));
    }
    if !config.register_enabled {
        return Err(ServiceError::new(
            ErrorKind::Forbidden,
            codes::USER_REGISTRATION_CLOSED,
            "registration is closed on this site",
        ));
    }
    let email = Email::parse(email).map_err(|why| ServiceError::validation("identifier", why))?;
    let nickname = nickname.map(parse_nickname).transpose()?.unwrap_or_else(|| nickname_from(&email));
    let group_id = bootstrap::registration_group(ctx).await?;
    let verify = config.register_email_verification;
    let status = if verify { UserStatus::Inactive } else { UserStatus::Active };
    let id = insert_password_user(ctx.db(), &email, &nickname, password, group_id, status)
        .await
        .map_err(|e| if e.field.as_deref() == Some("password") { e.with_field("credential") } else { e })?;
    let registered = Activity::by(id, Action::Register).on(TargetKind::User, id, Some(email.as_str()));
    activity::record(ctx.db(), registered).await;
    let row =
        db::users::find(ctx.db(), id).await?.ok_or_else(|| ServiceError::internal(anyhow::anyhow!("user vanished")))?;
    if verify {
        mail_links::send_verification(ctx, &row).await?;
    }
    user_view(ctx, &row).await
}

/// A user-editable setting addressed by `PATCH /user/settings/{option}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingOption {
    Nickname,
    Language,
    Timezone,
}

impl SettingOption {
    pub fn parse(option: &str) -> ServiceResult<Self> {
        match option {
            "nickname" => Ok(Self::Nickname),
            "language" => Ok(Self::Language),
            "timezone" => Ok(Self::Timezone),
            other => Err(ServiceError::new(
                ErrorKind::Validation,
                codes::USER_UNKNOWN_SETTING,
                format!("{other:?} is not a setting: use nickname, language or timezone"),
            )
            .with_field("option")),
        }
    }
}

/// The value of one setting, as extracted from the request.
#[derive(Debug, Clone)]
pub enum SettingValue {
    Text(String),
    Timezone(i64),
}

/// Sets one of the caller's settings; values are validated per option.
pub async fn update_setting(
    ctx: &Context,
    user_id: UserId,
    option: SettingOption,
    value: Option<SettingValue>,
) -> ServiceResult<()> {
    let db = ctx.db();
    let field = match option {
        SettingOption::Nickname => "nickname",
        SettingOption::Language => "language",
        SettingOption::Timezone => "timezone",
    };
    let value =
        value.ok_or_else(|| ServiceError::validation(field, format!("{field} is required and may not be null")))?;
    let now = now_ms();
    match (option, value) {
        (SettingOption::Nickname, SettingValue::Text(text)) => {
            db::users::set_profile_text(db, user_id, ProfileField::Nickname, &parse_nickname(&text)?, now).await?;
        }
        (SettingOption::Language, SettingValue::Text(text)) => {
            let valid = (2..=35).contains(&text.len()) && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            if !valid {
                return Err(ServiceError::validation("language", "language must be a language tag such as en-US"));
            }
            db::users::set_profile_text(db, user_id, ProfileField::Language, &text, now).await?;
        }
        (SettingOption::Timezone, SettingValue::Timezone(hours)) => {
            if !(-12..=14).contains(&hours) {
                return Err(ServiceError::validation("timezone", "timezone must be an integer from -12 to 14"));
            }
            db::users::set_timezone(db, user_id, hours as i32, now).await?;
        }
        _ => return Err(ServiceError::validation(field, format!("{field} has the wrong type"))),
    }
    activity::record(
        db,
        Activity::by(user_id, Action::SettingsUpdate).on(TargetKind::User, user_id, None).with("option", field),
    )
    .await;
    Ok(())
}

/// Changes the caller's password after checking the current one, and signs out every session
/// (all refresh tokens are revoked; access and WOPI tokens issued before are refused).
pub async fn change_password(ctx: &Context, user_id: UserId, old: &Secret, new: &Secret) -> ServiceResult<()> {
    let db = ctx.db();
    let stored = db::users::credential_of(db, user_id, EMAIL_PASSWORD).await?.ok_or_else(|| {
        ServiceError::new(ErrorKind::Conflict, codes::USER_NO_PASSWORD, "this account signs in without a password")
    })?;
    if !verify_password(old, &stored).await {
        return Err(ServiceError::new(
            ErrorKind::Forbidden,
            codes::USER_WRONG_PASSWORD,
            "the current password is wrong",
        )
        .with_field("old_password"));
    }
    let hash = hash_password(new).await.map_err(|e| password_error("new_password", e))?;
    db::users::set_credential(db, user_id, EMAIL_PASSWORD, &hash).await?;
    revocation::end_sessions(db, ctx.store(), user_id).await?;
    activity::record(db, Activity::by(user_id, Action::PasswordChange).on(TargetKind::User, user_id, None)).await;
    Ok(())
}

/// The caller's settings page.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UserSettingsView {
    pub nickname: String,
    pub language: String,
    pub timezone: i32,
    pub two_factor_enabled: bool,
    pub theme: EffectiveTheme,
    /// The password is the one the server generated at its first start (printed once in its
    /// log) and has not been changed since: the web app asks to change it.
    pub password_generated: bool,
}

/// The theme a user sees and where it came from.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EffectiveTheme {
    pub source: ThemeSource,
    /// The default preset's id when `source` is `default_preset`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset_id: Option<Uuid>,
    pub colors: ThemeColors,
}

fn user_colors(user: &UserRow) -> Option<ThemeColors> {
    let columns = [
        user.color_primary.as_deref()?,
        user.color_secondary.as_deref()?,
        user.color_success.as_deref()?,
        user.color_info.as_deref()?,
        user.color_warning.as_deref()?,
        user.color_error.as_deref()?,
        user.color_neutral.as_deref()?,
    ];
    ThemeColors::from_columns(columns).ok()
}

/// The user's own snapshot, else the default preset, else the built-in theme.
pub async fn effective_theme(db: &Db, user: &UserRow) -> ServiceResult<EffectiveTheme> {
    if let Some(colors) = user_colors(user) {
        return Ok(EffectiveTheme { source: ThemeSource::User, preset_id: None, colors });
    }
    if let Some(preset) = themes::default_preset(db).await? {
        return Ok(EffectiveTheme {
            source: ThemeSource::DefaultPreset,
            preset_id: Some(preset.id),
            colors: preset.colors,
        });
    }
    Ok(EffectiveTheme { source: ThemeSource::BuiltIn, preset_id: None, colors: ThemeColors::BUILT_IN })
}

pub async fn settings(ctx: &Context, user: &UserRow) -> ServiceResult<UserSettingsView> {
    let db = ctx.db();
    Ok(UserSettingsView {
        nickname: user.nickname.clone(),
        language: user.language.clone(),
        timezone: user.timezone,
        two_factor_enabled: user.two_factor_key.is_some(),
        theme: effective_theme(db, user).await?,
        password_generated: db::users::credential_generated(db, user.id, EMAIL_PASSWORD).await?,
    })
}

/// What the caller picked as theme.
#[derive(Debug, Clone)]
pub enum ThemeChoice {
    /// Copy a preset's colours.
    Preset(Uuid),
    /// Use these colours.
    Colors(ThemeColors),
    /// Drop the snapshot and follow the site default.
    Reset,
}

/// Stores the caller's theme as a snapshot of colours (a later change of the preset does not
/// change it) and answers the effective theme.
pub async fn set_theme(ctx: &Context, user_id: UserId, choice: ThemeChoice) -> ServiceResult<EffectiveTheme> {
    let db = ctx.db();
    let colors = match choice {
        ThemeChoice::Preset(preset) => Some(themes::get(ctx, preset).await?.colors),
        ThemeChoice::Colors(colors) => Some(colors),
        ThemeChoice::Reset => None,
    };
    db::users::set_colors(db, user_id, colors.as_ref().map(ThemeColors::as_columns), now_ms()).await?;
    let user = load_active_user(ctx, user_id).await?;
    effective_theme(db, user.row()).await
}
