//! Mailed links and mail settings: asking for a magic sign-in link (`/user/magic_link`; the
//! token itself signs in at `POST /user/session`), the password reset (`/user/password_reset`),
//! the address verification (`/user/verify_email`) and the administrators' test mail
//! (`/admin/settings/mail/test`). Thin handlers over `service::identity::mail_links` and `service::settings::mail`.

use axum::extract::State;
use axum::http::StatusCode;
use nubo_common::secret::Secret;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::captcha::{CaptchaAnswer, CaptchaJson, scene};
use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ClientAddress};
use crate::guard::AdminRequired;
use nubo_service::context::Context;
use nubo_service::{identity::mail_links, settings::mail};

/// Asking for a mail with a link.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MailLinkRequest {
    /// The account's e-mail address.
    pub email: String,
    /// The answer to the scene's captcha (`magic_link` or `password_reset`), when the site has
    /// one: `{id}:{text}` for the built-in image, the widget's token for reCAPTCHA and Turnstile.
    pub captcha: Option<String>,
}

impl CaptchaAnswer for MailLinkRequest {
    fn captcha(&self) -> Option<&str> {
        self.captcha.as_deref()
    }
}

/// Choosing a new password with a mailed reset token.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordResetRequest {
    /// The `token` of the mailed link (`/reset?token=...`).
    pub token: String,
    /// The new password (8 to 256 bytes, as at registration).
    #[schema(value_type = String, format = Password)]
    pub password: Secret,
}

/// A mailed verification token.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyEmailRequest {
    /// The `token` of the mailed link (`/verify?token=...`).
    pub token: String,
}

/// Where to send the test mail.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TestMailRequest {
    /// The recipient's address.
    pub to: String,
}

/// Mail a sign-in link. Answers 204 whether or not an active account has the address (and
/// mails only when one does), so the answer tells nobody who has an account. The link
/// (`{site_url}/login/magic?token=...`) works once, for 15 minutes: send its `token` to
/// `POST /user/session` as `identifier` with `provider: magic_link`.
#[utoipa::path(post, path = "/user/magic_link", tag = "user", request_body = MailLinkRequest,
    responses(
        (status = 204, description = "Mailed when the address has an active account"),
        (status = 403, description = "Magic links are not enabled (`auth.provider_disabled`), or a wrong captcha answer (`captcha.invalid`)", body = ErrorBody),
        (status = 422, description = "Not an e-mail address, or no captcha answer (`captcha.required`)", body = ErrorBody),
        (status = 429, description = "Too many requests from this address or for this recipient", body = ErrorBody),
        (status = 502, description = "The captcha provider could not be reached (`captcha.unavailable`)", body = ErrorBody),
    ))]
pub async fn request_magic_link(
    State(state): State<Context>,
    ClientAddress(address): ClientAddress,
    CaptchaJson(request, _): CaptchaJson<MailLinkRequest, scene::MagicLink>,
) -> ApiResult<StatusCode> {
    mail_links::request_magic_link(&state, &request.email, address).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Mail a password reset link. Answers 204 whether or not an active account with a password
/// has the address. The link (`{site_url}/reset?token=...`) works once, for 30 minutes.
#[utoipa::path(post, path = "/user/password_reset", tag = "user", request_body = MailLinkRequest,
    responses(
        (status = 204, description = "Mailed when the address has an active account with a password"),
        (status = 403, description = "E-mail and password sign-in is not enabled (`auth.provider_disabled`), or a wrong captcha answer (`captcha.invalid`)", body = ErrorBody),
        (status = 422, description = "Not an e-mail address, or no captcha answer (`captcha.required`)", body = ErrorBody),
        (status = 429, description = "Too many requests from this address or for this recipient", body = ErrorBody),
        (status = 502, description = "The captcha provider could not be reached (`captcha.unavailable`)", body = ErrorBody),
    ))]
pub async fn request_password_reset(
    State(state): State<Context>,
    ClientAddress(address): ClientAddress,
    CaptchaJson(request, _): CaptchaJson<MailLinkRequest, scene::PasswordReset>,
) -> ApiResult<StatusCode> {
    mail_links::request_password_reset(&state, &request.email, address).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Choose a new password with a mailed reset token. The token works once; every refresh token
/// of the account is revoked, so all devices sign in again.
#[utoipa::path(patch, path = "/user/password_reset", tag = "user", request_body = PasswordResetRequest,
    responses(
        (status = 204, description = "Password changed"),
        (status = 401, description = "Token unknown or expired (`auth.reset_token_invalid`)", body = ErrorBody),
        (status = 409, description = "Token already used (`auth.reset_token_used`)", body = ErrorBody),
        (status = 422, description = "Password too short or too long", body = ErrorBody),
        (status = 429, description = "Too many attempts from this address", body = ErrorBody),
    ))]
pub async fn reset_password(
    State(state): State<Context>,
    ClientAddress(address): ClientAddress,
    ApiJson(request): ApiJson<PasswordResetRequest>,
) -> ApiResult<StatusCode> {
    mail_links::reset_password(&state, &request.token, &request.password, address).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Confirm a new account's e-mail address with the mailed token: the account (registered
/// while `register_email_verification` is on, status `INACTIVE`) becomes `ACTIVE`. Once.
#[utoipa::path(post, path = "/user/verify_email", tag = "user", request_body = VerifyEmailRequest,
    responses(
        (status = 204, description = "Verified; the account can sign in"),
        (status = 401, description = "Token unknown or expired (`auth.verify_token_invalid`)", body = ErrorBody),
        (status = 409, description = "Token already used (`auth.verify_token_used`)", body = ErrorBody),
        (status = 422, description = "Invalid field", body = ErrorBody),
        (status = 429, description = "Too many attempts from this address", body = ErrorBody),
    ))]
pub async fn verify_email(
    State(state): State<Context>,
    ClientAddress(address): ClientAddress,
    ApiJson(request): ApiJson<VerifyEmailRequest>,
) -> ApiResult<StatusCode> {
    mail_links::verify_email(&state, &request.token, address).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Send a test mail with the current mail settings, now: 204 once the SMTP server accepted
/// it, 502 with the server's reason when it did not.
#[utoipa::path(post, path = "/admin/settings/mail/test", tag = "admin", security(("bearer" = [])),
    request_body = TestMailRequest,
    responses(
        (status = 204, description = "The SMTP server accepted the mail"),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 422, description = "`to` is not an e-mail address", body = ErrorBody),
        (status = 502, description = "The SMTP server could not be reached or refused the mail (`mail.send_failed`)", body = ErrorBody),
        (status = 503, description = "No SMTP host or sender is set (`mail.not_configured`)", body = ErrorBody),
    ))]
pub async fn send_test(
    State(state): State<Context>,
    admin: AdminRequired,
    ApiJson(request): ApiJson<TestMailRequest>,
) -> ApiResult<StatusCode> {
    mail::send_test(&state, admin.0.sub, &request.to).await?;
    Ok(StatusCode::NO_CONTENT)
}
