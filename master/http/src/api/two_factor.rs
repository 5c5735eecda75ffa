//! `/user/settings/2fa`: setting up, enabling and disabling the caller's two-factor sign-in
//! (TOTP codes and recovery codes). Thin handlers over `service::identity::two_factor`; the code at
//! sign-in goes to `POST /user/session` as `two_fa_code`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::ApiJson;
use crate::guard::AuthRequired;
use nubo_service::context::Context;
use nubo_service::identity::two_factor::{self, RecoveryCodes, TwoFactorSetup};

/// A code proving the second factor.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TwoFactorCode {
    /// The six digits the authenticator app shows now (spaces allowed); to disable, a recovery
    /// code (`abcd-efgh-ijkl`) also works.
    pub code: String,
}

/// Begin setting up two-factor sign-in: a new secret and its `otpauth://` URI (issuer: the
/// `site_name` setting; account: the caller's e-mail address), not enabled yet. Codes are
/// RFC 6238: HMAC-SHA-1, six digits, 30 seconds. The secret waits ten minutes for
/// `POST /user/settings/2fa`; asking again replaces it.
#[utoipa::path(get, path = "/user/settings/2fa", tag = "user", security(("bearer" = [])),
    responses(
        (status = 200, description = "A secret to add to an authenticator app", body = TwoFactorSetup),
        (status = 403, description = "Account not active", body = ErrorBody),
        (status = 409, description = "Two-factor sign-in is already on (`user.two_factor_enabled`)", body = ErrorBody),
    ))]
pub async fn start_setup(State(state): State<Context>, caller: AuthRequired) -> ApiResult<Json<TwoFactorSetup>> {
    Ok(Json(two_factor::start_setup(&state, caller.user.row()).await?))
}

/// Enable two-factor sign-in: the current code from the app proves it holds the pending
/// secret. Answers ten single-use recovery codes, shown this once (only their hashes are
/// kept). From then on, signing in with `email_password` or `magic_link` needs `two_fa_code`.
#[utoipa::path(post, path = "/user/settings/2fa", tag = "user", security(("bearer" = [])),
    request_body = TwoFactorCode,
    responses(
        (status = 200, description = "Enabled; the recovery codes", body = RecoveryCodes),
        (status = 403, description = "Wrong or already used code (`user.two_factor_wrong_code`), or account not active", body = ErrorBody),
        (status = 409, description = "Already on (`user.two_factor_enabled`), or no setup pending (`user.two_factor_no_setup`)", body = ErrorBody),
        (status = 422, description = "Invalid body", body = ErrorBody),
        (status = 429, description = "Too many wrong codes for this account (`auth.rate_limited`)", body = ErrorBody),
    ))]
pub async fn enable(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<TwoFactorCode>,
) -> ApiResult<Json<RecoveryCodes>> {
    Ok(Json(two_factor::enable(&state, caller.user.row(), &request.code).await?))
}

/// Disable two-factor sign-in with a current code from the app or a recovery code; the
/// remaining recovery codes are deleted.
#[utoipa::path(delete, path = "/user/settings/2fa", tag = "user", security(("bearer" = [])),
    request_body = TwoFactorCode,
    responses(
        (status = 204, description = "Disabled"),
        (status = 403, description = "Wrong or already used code (`user.two_factor_wrong_code`), or account not active", body = ErrorBody),
        (status = 409, description = "Two-factor sign-in is not on (`user.two_factor_not_enabled`)", body = ErrorBody),
        (status = 422, description = "Invalid body", body = ErrorBody),
        (status = 429, description = "Too many wrong codes for this account (`auth.rate_limited`)", body = ErrorBody),
    ))]
pub async fn disable(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<TwoFactorCode>,
) -> ApiResult<StatusCode> {
    two_factor::disable(&state, caller.user.row(), &request.code).await?;
    Ok(StatusCode::NO_CONTENT)
}
