//! Two-factor sign-in for an account: setting it up (a pending secret waits in the `KvStore`
//! for ten minutes until a code proves the app has it), enabling it with ten recovery codes,
//! disabling it, and the check `service::identity::sign_in` runs after a provider identified the user.
//! Every code is charged per account to the sign-in failure budget before it is checked;
//! a right one is refunded.

use std::time::Duration;

use nubo_model::db;
use nubo_model::db::users::UserRow;
use nubo_model::domain::ids::UserId;
use nubo_model::domain::time::now_ms;
use serde::Serialize;
use utoipa::ToSchema;

use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::identity::second_factor::{self, Verdict};
use crate::{identity::sign_in, settings::site};

/// How long a started setup waits for the code that enables it.
const SETUP_LIFETIME: Duration = Duration::from_secs(10 * 60);

/// A started setup: what an authenticator app needs.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TwoFactorSetup {
    /// The secret, base32, for typing into an app by hand.
    pub secret: String,
    /// `otpauth://totp/{issuer}:{e-mail}?secret=...&issuer=...`, for a QR code. The issuer is
    /// the `site_name` setting.
    pub uri: String,
}

/// The recovery codes made when two-factor sign-in is enabled; shown this once.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RecoveryCodes {
    /// Ten codes; each works once in place of a code from the app.
    pub recovery_codes: Vec<String>,
}

fn pending_key(user_id: UserId) -> String {
    format!("2fa:pending:{user_id}")
}

fn failures_key(user_id: UserId) -> String {
    format!("rate:2fa:user:{user_id}")
}

fn already_enabled() -> ServiceError {
    ServiceError::conflict(codes::USER_TWO_FACTOR_ENABLED, "two-factor sign-in is already on: disable it first")
}

fn wrong_code() -> ServiceError {
    ServiceError::new(
        ErrorKind::Forbidden,
        codes::USER_TWO_FACTOR_WRONG_CODE,
        "the code is wrong or was already used: enter the current code from your app",
    )
    .with_field("code")
}

/// The account's budget of wrong codes.
fn budget(ctx: &Context, user_id: UserId) -> [(String, u64); 1] {
    [(failures_key(user_id), ctx.config().login_failures_per_identifier)]
}

/// Charges a code to the account's budget before it is checked; refuses when it is used up.
async fn charge(ctx: &Context, user_id: UserId) -> ServiceResult<()> {
    if !sign_in::charge_guess(ctx, &budget(ctx, user_id), sign_in::failure_window(ctx)).await? {
        return Err(sign_in::rate_limited());
    }
    Ok(())
}

/// Gives the charge back when the code was right; a wrong one stays counted.
async fn settle(ctx: &Context, user_id: UserId, verdict: Verdict) -> ServiceResult<()> {
    if verdict == Verdict::Accepted {
        sign_in::refund_guess(ctx, &budget(ctx, user_id)).await?;
    }
    Ok(())
}

/// Whether `code` (from the app, or a recovery code) proves the second factor of `user`, whose
/// two-factor sign-in is on with `secret`; either is used up when it does.
async fn prove(ctx: &Context, user_id: UserId, secret: &str, code: &str) -> ServiceResult<Verdict> {
    if second_factor::as_totp_code(code).is_some() {
        return second_factor::accept_code(ctx, user_id, secret, code).await;
    }
    let used = db::two_factor::use_recovery_code(ctx.db(), user_id, &second_factor::recovery_code_hash(code)).await?;
    Ok(if used { Verdict::Accepted } else { Verdict::Wrong })
}

/// Begins a setup: a new secret, kept for ten minutes for the caller alone. Starting again
/// replaces it.
pub async fn start_setup(ctx: &Context, user: &UserRow) -> ServiceResult<TwoFactorSetup> {
    if user.two_factor_key.is_some() {
        return Err(already_enabled());
    }
    let enrolment = second_factor::enrol(&site::current(ctx).await?.site_name, &user.email)?;
    ctx.store().set(&pending_key(user.id), &enrolment.secret, Some(SETUP_LIFETIME)).await?;
    Ok(TwoFactorSetup { secret: enrolment.secret, uri: enrolment.uri })
}

/// Enables two-factor sign-in with the pending secret once `code` shows the app has it, and
/// answers the ten recovery codes (stored hashed only).
pub async fn enable(ctx: &Context, user: &UserRow, code: &str) -> ServiceResult<RecoveryCodes> {
    if user.two_factor_key.is_some() {
        return Err(already_enabled());
    }
    let no_setup = || {
        ServiceError::conflict(
            codes::USER_TWO_FACTOR_NO_SETUP,
            "no two-factor setup is pending (they last ten minutes): start the setup again",
        )
    };
    let secret = ctx.store().get(&pending_key(user.id)).await?.ok_or_else(no_setup)?;
    charge(ctx, user.id).await?;
    let verdict = second_factor::accept_code(ctx, user.id, &secret, code).await?;
    settle(ctx, user.id, verdict).await?;
    if verdict != Verdict::Accepted {
        return Err(wrong_code());
    }
    // Taken, not just read: of two enabling requests with the same setup, one wins.
    let secret = ctx.store().take(&pending_key(user.id)).await?.filter(|s| *s == secret).ok_or_else(no_setup)?;
    let recovery_codes = second_factor::new_recovery_codes();
    let hashes: Vec<String> = recovery_codes.iter().map(|c| second_factor::recovery_code_hash(c)).collect();
    if !db::two_factor::enable(ctx.db(), user.id, &secret, &hashes, now_ms()).await? {
        return Err(already_enabled());
    }
    Ok(RecoveryCodes { recovery_codes })
}

/// Disables two-factor sign-in once `code` (from the app, or a recovery code) proves the
/// second factor; the recovery codes go too.
pub async fn disable(ctx: &Context, user: &UserRow, code: &str) -> ServiceResult<()> {
    let Some(secret) = &user.two_factor_key else {
        return Err(ServiceError::conflict(codes::USER_TWO_FACTOR_NOT_ENABLED, "two-factor sign-in is not on"));
    };
    charge(ctx, user.id).await?;
    let verdict = prove(ctx, user.id, secret, code).await?;
    settle(ctx, user.id, verdict).await?;
    if verdict != Verdict::Accepted {
        return Err(wrong_code());
    }
    db::two_factor::disable(ctx.db(), user.id, now_ms()).await?;
    Ok(())
}

/// The second step of a sign-in, after a provider identified `user`: nothing to do when the
/// account has no second factor; otherwise `code` must prove it (428 when absent).
pub async fn check_sign_in(ctx: &Context, user: &UserRow, code: Option<&str>) -> ServiceResult<()> {
    let Some(secret) = &user.two_factor_key else { return Ok(()) };
    let Some(code) = code.map(str::trim).filter(|c| !c.is_empty()) else {
        return Err(ServiceError::new(
            ErrorKind::PreconditionRequired,
            codes::AUTH_TWO_FACTOR_REQUIRED,
            "this account asks for a second factor: send the sign-in again with two_fa_code",
        ));
    };
    charge(ctx, user.id).await?;
    let verdict = prove(ctx, user.id, secret, code).await?;
    settle(ctx, user.id, verdict).await?;
    match verdict {
        Verdict::Accepted => Ok(()),
        Verdict::Wrong => Err(ServiceError::new(
            ErrorKind::Unauthorized,
            codes::AUTH_TWO_FACTOR_INVALID,
            "the two-factor code is wrong: enter the current code from your app, or a recovery code",
        )),
        Verdict::Replayed => Err(ServiceError::new(
            ErrorKind::Unauthorized,
            codes::AUTH_TWO_FACTOR_INVALID,
            "this two-factor code was already used: wait for the next one",
        )),
    }
}
