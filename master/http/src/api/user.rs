//! `/user`: registration, sign-in sessions, the caller's profile, settings and theme.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::request::Parts;
use nubo_common::secret::Secret;
use nubo_model::domain::settings::AuthMethod;
use nubo_model::domain::theme::ThemeColors;
use nubo_model::domain::time::to_rfc3339;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::captcha::{CaptchaAnswer, CaptchaJson, scene};
use crate::error::ErrorBody;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath, ClientAddress};
use crate::guard::{AuthRequired, JwtRequired, bearer_token};
use nubo_service::capacity::storage_packs;
use nubo_service::context::Context;
use nubo_service::credentials::token::GroupClaims;
use nubo_service::error::{ErrorKind, ServiceError};
use nubo_service::error_codes as codes;
use nubo_service::identity::accounts::{
    self, EffectiveTheme, SettingOption, SettingValue, ThemeChoice, UserSettingsView, UserView,
};
use nubo_service::identity::sign_in::{self, LoginAttempt, LoginView, TokenPair};

/// Registration request. `identifier` is the e-mail address and `credential` the password.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterRequest {
    pub provider: AuthMethod,
    pub identifier: String,
    #[schema(value_type = String, format = Password)]
    pub credential: Secret,
    pub nickname: Option<String>,
    /// The answer to the `register` scene's captcha, when the site has one (`GET /site/config`):
    /// `{id}:{text}` for the built-in image, the widget's token for reCAPTCHA and Turnstile.
    pub captcha: Option<String>,
}

impl CaptchaAnswer for RegisterRequest {
    fn captcha(&self) -> Option<&str> {
        self.captcha.as_deref()
    }
}

/// Create an account (e-mail and password). Refused when registration is closed or the
/// provider is not enabled in `auth_methods`. With `register_email_verification` on, the
/// account is created `INACTIVE` and mailed a link; `POST /user/verify_email` activates it.
#[utoipa::path(post, path = "/user", tag = "user", request_body = RegisterRequest,
    responses(
        (status = 201, description = "Account created", body = UserView),
        (status = 403, description = "Registration closed or provider disabled, or a wrong captcha answer (`captcha.invalid`)", body = ErrorBody),
        (status = 409, description = "E-mail address taken", body = ErrorBody),
        (status = 422, description = "Invalid e-mail or password, or no captcha answer (`captcha.required`)", body = ErrorBody),
        (status = 429, description = "Too many attempts from this address", body = ErrorBody),
        (status = 502, description = "The captcha provider could not be reached (`captcha.unavailable`)", body = ErrorBody),
    ))]
pub async fn register(
    State(state): State<Context>,
    ClientAddress(address): ClientAddress,
    CaptchaJson(request, _): CaptchaJson<RegisterRequest, scene::Register>,
) -> ApiResult<(StatusCode, Json<UserView>)> {
    sign_in::limit_registration(&state, address).await?;
    let user = accounts::register(
        &state,
        request.provider,
        &request.identifier,
        &request.credential,
        request.nickname.as_deref(),
    )
    .await?;
    Ok((StatusCode::CREATED, Json(user)))
}

/// Unified sign-in request. What `identifier` and `credential` hold depends on the provider:
///
/// | provider | identifier | credential |
/// |---|---|---|
/// | `email_password` | the e-mail address | the password |
/// | `passkey` | `challenge_token` from `POST /user/authn/options` | the `PublicKeyCredential` from `navigator.credentials.get`, as JSON with base64url byte fields |
/// | `magic_link` | the `token` of the link mailed by `POST /user/magic_link` (single use, 15 minutes) | none |
/// | `github`, `qq`, `oidc` | the `ticket` the OAuth callback put in its redirect to `/login/oauth` (single use, two minutes) | none |
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    pub provider: AuthMethod,
    pub identifier: String,
    #[schema(value_type = Option<String>, format = Password)]
    pub credential: Option<Secret>,
    /// The second factor, when the account has two-factor sign-in on: the six digits its
    /// authenticator app shows now, or one of its recovery codes. Asked for with
    /// `email_password` and `magic_link` (428 `auth.two_factor_required` without it); ignored
    /// with `passkey`, which already verifies the user on the authenticator.
    pub two_fa_code: Option<String>,
    /// The answer to the `login` scene's captcha, when the site has one, for `email_password`
    /// (every attempt, the one with `two_fa_code` too): `{id}:{text}` for the built-in image,
    /// the widget's token for reCAPTCHA and Turnstile. The other providers present a single-use
    /// token this server issued and need none.
    pub captcha: Option<String>,
}

impl CaptchaAnswer for LoginRequest {
    fn captcha(&self) -> Option<&str> {
        self.captcha.as_deref()
    }

    fn asks_captcha(&self) -> bool {
        self.provider == AuthMethod::EmailPassword
    }
}

/// Sign in. Answers an access token (1 hour) and a refresh token. Wrong e-mail and wrong
/// password answer the same 401, so accounts cannot be discovered.
///
/// Two-factor sign-in: when the account has it on, a sign-in with `email_password` or
/// `magic_link` without `two_fa_code` answers 428 `auth.two_factor_required`; send it again
/// with the code. A code counts once (the same code again in its 30 seconds answers 401), and
/// so does each recovery code. A passkey sign-in asks for no code: a passkey with user
/// verification is already two factors.
#[utoipa::path(post, path = "/user/session", tag = "user", request_body = LoginRequest,
    responses(
        (status = 200, description = "Signed in", body = LoginView),
        (status = 401, description = "Wrong e-mail or password (`auth.invalid_credentials`), a passkey refused, a wrong or already used two-factor code (`auth.two_factor_invalid`), a magic-link token unknown or expired (`auth.magic_link_invalid`), or an OAuth ticket unknown or used (`auth.oauth_ticket_invalid`)", body = ErrorBody),
        (status = 403, description = "Provider disabled, or account not active, or a wrong captcha answer (`captcha.invalid`)", body = ErrorBody),
        (status = 409, description = "Magic-link token already used (`auth.magic_link_used`)", body = ErrorBody),
        (status = 422, description = "Missing credential, or no captcha answer (`captcha.required`)", body = ErrorBody),
        (status = 428, description = "The account asks for a two-factor code (`auth.two_factor_required`)", body = ErrorBody),
        (status = 429, description = "Too many attempts for this identifier or address, or too many wrong two-factor codes for the account", body = ErrorBody),
        (status = 502, description = "The captcha provider could not be reached (`captcha.unavailable`)", body = ErrorBody),
    ))]
pub async fn login(
    State(state): State<Context>,
    ClientAddress(address): ClientAddress,
    CaptchaJson(request, _): CaptchaJson<LoginRequest, scene::Login>,
) -> ApiResult<Json<LoginView>> {
    let attempt = LoginAttempt {
        provider: request.provider,
        identifier: &request.identifier,
        credential: request.credential.as_ref(),
        two_fa_code: request.two_fa_code.as_deref(),
        address,
    };
    let view = sign_in::login(&state, attempt).await?;
    Ok(Json(view))
}

/// The refresh token presented as `Authorization: Bearer`.
pub struct RefreshBearer(String);

impl axum::extract::FromRequestParts<Context> for RefreshBearer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &Context) -> Result<Self, Self::Rejection> {
        Ok(Self(bearer_token(parts)?.to_owned()))
    }
}

/// Exchange the refresh token (as Bearer) for a new pair; the old refresh token stops working.
/// Presenting an already exchanged refresh token revokes its whole chain.
#[utoipa::path(post, path = "/user/session/refresh", tag = "user", security(("refresh_token" = [])),
    responses(
        (status = 200, description = "New token pair", body = TokenPair),
        (status = 401, description = "Refresh token missing, invalid, expired, revoked or reused", body = ErrorBody),
        (status = 403, description = "Account not active", body = ErrorBody),
    ))]
pub async fn refresh(State(state): State<Context>, RefreshBearer(token): RefreshBearer) -> ApiResult<Json<TokenPair>> {
    Ok(Json(sign_in::refresh(&state, &token).await?))
}

/// Sign out: revokes the refresh token (as Bearer) and every token rotated from the same sign-in.
#[utoipa::path(delete, path = "/user/session", tag = "user", security(("refresh_token" = [])),
    responses(
        (status = 204, description = "Signed out"),
        (status = 401, description = "Refresh token missing or invalid", body = ErrorBody),
    ))]
pub async fn logout(State(state): State<Context>, RefreshBearer(token): RefreshBearer) -> ApiResult<StatusCode> {
    sign_in::logout(&state, &token).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// What the access token itself says (no database lookup).
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionView {
    pub user_id: Uuid,
    pub group: GroupClaims,
    pub issued_at: String,
    pub expires_at: String,
}

/// The current access token's facts: user id, group permissions snapshot, expiry.
/// Access level `jwt_required`: token validity only.
#[utoipa::path(get, path = "/user/session", tag = "user", security(("bearer" = [])),
    responses(
        (status = 200, description = "Token facts", body = SessionView),
        (status = 403, description = "Account banned", body = ErrorBody),
    ))]
pub async fn session(JwtRequired(claims): JwtRequired) -> Json<SessionView> {
    Json(SessionView {
        user_id: claims.sub.into(),
        group: claims.group,
        issued_at: to_rfc3339(claims.iat * 1000),
        expires_at: to_rfc3339(claims.exp * 1000),
    })
}

/// The caller's storage: `used` bytes (the trash and unfinished uploads' `reserved` bytes included), `total` (the group's quota plus
/// active storage packs, also given apart as `group` and `packs`), `free` (never below 0) and
/// `overrun` (how far usage exceeds capacity, after a pack ended: writes that add bytes answer
/// 507 until it is 0; nothing is deleted).
#[utoipa::path(get, path = "/user/storage", tag = "user", security(("bearer" = [])),
    responses(
        (status = 200, description = "Storage", body = StorageView),
        (status = 403, description = "Account not active", body = ErrorBody),
    ))]
pub async fn storage(State(state): State<Context>, caller: AuthRequired) -> ApiResult<Json<StorageView>> {
    let figures = storage_packs::storage_of(&state, caller.claims.sub).await?;
    let (used, total) = (figures.used, figures.total());
    Ok(Json(StorageView {
        used,
        reserved: figures.reserved,
        total,
        free: (total - used).max(0),
        overrun: (used - total).max(0),
        group: figures.group,
        packs: figures.packs,
    }))
}

/// What a user stores and may store, in bytes.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct StorageView {
    pub used: i64,
    /// Of `used`, the bytes held for uploads that have not finished (`GET /file/upload` lists
    /// them; cancelling one gives its bytes back).
    pub reserved: i64,
    pub total: i64,
    pub free: i64,
    /// Bytes used beyond `total` (0 within the quota).
    pub overrun: i64,
    /// The group's quota.
    pub group: i64,
    /// What active storage packs add.
    pub packs: i64,
}

/// The caller's profile. Access level `auth_required`.
#[utoipa::path(get, path = "/user/me", tag = "user", security(("bearer" = [])),
    responses(
        (status = 200, description = "Profile", body = UserView),
        (status = 403, description = "Account not active", body = ErrorBody),
    ))]
pub async fn me(State(state): State<Context>, caller: AuthRequired) -> ApiResult<Json<UserView>> {
    Ok(Json(accounts::user_view(&state, caller.user.row()).await?))
}

/// The caller's settings and effective theme.
#[utoipa::path(get, path = "/user/settings", tag = "user", security(("bearer" = [])),
    responses(
        (status = 200, description = "Settings", body = UserSettingsView),
        (status = 403, description = "Account not active", body = ErrorBody),
    ))]
pub async fn settings(State(state): State<Context>, caller: AuthRequired) -> ApiResult<Json<UserSettingsView>> {
    Ok(Json(accounts::settings(&state, caller.user.row()).await?))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangePasswordRequest {
    #[schema(value_type = String, format = Password)]
    pub old_password: Secret,
    #[schema(value_type = String, format = Password)]
    pub new_password: Secret,
}

/// Change the caller's password. Every session of the caller ends: refresh tokens are
/// revoked, and access and WOPI tokens issued before are refused (all devices sign in again).
#[utoipa::path(patch, path = "/user/settings/password", tag = "user", security(("bearer" = [])),
    request_body = ChangePasswordRequest,
    responses(
        (status = 204, description = "Password changed"),
        (status = 403, description = "Current password wrong, or account not active", body = ErrorBody),
        (status = 422, description = "New password too short or long", body = ErrorBody),
    ))]
pub async fn change_password(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<ChangePasswordRequest>,
) -> ApiResult<StatusCode> {
    accounts::change_password(&state, caller.claims.sub, &request.old_password, &request.new_password).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `UserSettingUpdateRequest`: carries the value for the option named in the path; the other
/// two are ignored, and a field of another name is refused (422) like on every request body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UserSettingUpdateRequest {
    pub nickname: Option<String>,
    pub language: Option<String>,
    /// Hours from UTC, -12..=14.
    pub timezone: Option<i64>,
}

/// Change one setting: `nickname`, `language` or `timezone`. A null or missing value for the
/// named option is refused, and so is a timezone outside -12..=14.
#[utoipa::path(patch, path = "/user/settings/{option}", tag = "user", security(("bearer" = [])),
    params(("option" = String, Path, description = "nickname, language or timezone")),
    request_body = UserSettingUpdateRequest,
    responses(
        (status = 204, description = "Setting changed"),
        (status = 403, description = "Account not active", body = ErrorBody),
        (status = 422, description = "Unknown option or invalid value; `field` names it", body = ErrorBody),
    ))]
pub async fn update_setting(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(option): ApiPath<String>,
    ApiJson(request): ApiJson<UserSettingUpdateRequest>,
) -> ApiResult<StatusCode> {
    let option = SettingOption::parse(&option)?;
    let value = match option {
        SettingOption::Nickname => request.nickname.map(SettingValue::Text),
        SettingOption::Language => request.language.map(SettingValue::Text),
        SettingOption::Timezone => request.timezone.map(SettingValue::Timezone),
    };
    accounts::update_setting(&state, caller.claims.sub, option, value).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The caller's theme choice: a preset to copy, explicit colours, or neither to follow the
/// site default again.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetThemeRequest {
    pub preset_id: Option<Uuid>,
    pub colors: Option<ThemeColors>,
}

/// Set the caller's theme. The chosen colours are copied into the user's `color_*` columns as
/// a snapshot. Also answers at `PATCH /theme`.
#[utoipa::path(patch, path = "/user/settings/theme", tag = "user", security(("bearer" = [])),
    request_body = SetThemeRequest,
    responses(
        (status = 200, description = "The effective theme", body = EffectiveTheme),
        (status = 404, description = "No such preset", body = ErrorBody),
        (status = 422, description = "Both or an unknown colour given", body = ErrorBody),
    ))]
pub async fn set_theme(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<SetThemeRequest>,
) -> ApiResult<Json<EffectiveTheme>> {
    let choice = match (request.preset_id, request.colors) {
        (Some(preset), None) => ThemeChoice::Preset(preset),
        (None, Some(colors)) => ThemeChoice::Colors(colors),
        (None, None) => ThemeChoice::Reset,
        (Some(_), Some(_)) => {
            return Err(ServiceError::new(
                ErrorKind::Validation,
                codes::THEME_AMBIGUOUS,
                "give preset_id or colors, not both",
            )
            .with_field("colors")
            .into());
        }
    };
    Ok(Json(accounts::set_theme(&state, caller.claims.sub, choice).await?))
}

/// The spec's user-scope `PATCH /theme`, same as `PATCH /user/settings/theme`.
#[utoipa::path(patch, path = "/theme", tag = "user", security(("bearer" = [])),
    request_body = SetThemeRequest,
    responses(
        (status = 200, description = "The effective theme", body = EffectiveTheme),
        (status = 404, description = "No such preset", body = ErrorBody),
        (status = 422, description = "Both or an unknown colour given", body = ErrorBody),
    ))]
pub async fn set_theme_alias(
    state: State<Context>,
    caller: AuthRequired,
    request: ApiJson<SetThemeRequest>,
) -> ApiResult<Json<EffectiveTheme>> {
    set_theme(state, caller, request).await
}
