//! Sign-in sessions: the unified login, refresh-token rotation with reuse detection, and
//! sign-out.

use std::net::IpAddr;
use std::time::Duration;

use nubo_common::secret::Secret;
use nubo_model::db::users::UserRow;
use nubo_model::db::{self};
use nubo_model::domain::activity::{Action, TargetKind};
use nubo_model::domain::ids::UserId;
use nubo_model::domain::settings::AuthMethod;
use nubo_model::domain::time::{now_ms, to_rfc3339};
use nubo_model::domain::user::{Email, UserStatus};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::audit::activity::{self, Activity};
use crate::context::Context;
use crate::credentials::token::token_error;
use crate::credentials::token::{ACCESS_TOKEN_LIFETIME, GroupClaims, JwtPayload, RefreshClaims, TokenType};
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::identity::accounts::{self, UserView};
use crate::identity::providers::{magic_link, oauth, passkey, password};
use crate::{identity::two_factor, settings::site};

/// A freshly issued pair of tokens.
#[derive(Debug, Clone, Serialize, serde::Deserialize, ToSchema)]
pub struct TokenPair {
    pub access_token: String,
    /// When the access token expires (RFC 3339).
    pub access_expires: String,
    pub refresh_token: String,
    /// When the refresh token expires (RFC 3339).
    pub refresh_expires: String,
}

/// The answer to a successful sign-in.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LoginView {
    #[serde(flatten)]
    pub tokens: TokenPair,
    pub user: UserView,
}

fn invalid_credentials() -> ServiceError {
    ServiceError::new(ErrorKind::Unauthorized, codes::AUTH_INVALID_CREDENTIALS, "e-mail or password is wrong")
}

pub fn rate_limited() -> ServiceError {
    ServiceError::new(ErrorKind::RateLimited, codes::AUTH_RATE_LIMITED, "too many sign-in attempts, try again later")
}

/// Counts an attempt from `address`; refuses when the address is over its budget.
async fn limit_address(ctx: &Context, scope: &str, address: IpAddr) -> ServiceResult<()> {
    let window = Duration::from_secs(ctx.config().login_rate_window_seconds);
    let attempts = ctx.store().increment(&format!("rate:{scope}:addr:{address}"), window).await?;
    if attempts > ctx.config().login_attempts_per_address {
        return Err(rate_limited());
    }
    Ok(())
}

pub async fn limit_registration(ctx: &Context, address: IpAddr) -> ServiceResult<()> {
    limit_address(ctx, "register", address).await
}

/// Counts a request that mails a link (or redeems a mailed token) from `address`.
pub async fn limit_mail_requests(ctx: &Context, address: IpAddr) -> ServiceResult<()> {
    limit_address(ctx, "mail", address).await
}

/// Mails to one recipient allowed per rate window, whoever asks: enough to retry, too few to
/// flood a mailbox. Counted whether or not the address has an account.
const MAILS_PER_RECIPIENT: u64 = 5;

/// Counts a mail requested for `email`; refuses when the recipient is over its budget.
pub async fn limit_recipient(ctx: &Context, email: &Email) -> ServiceResult<()> {
    let window = Duration::from_secs(ctx.config().login_rate_window_seconds);
    let mails = ctx.store().increment(&format!("rate:mail:to:{email}"), window).await?;
    if mails > MAILS_PER_RECIPIENT {
        return Err(ServiceError::new(
            ErrorKind::RateLimited,
            codes::AUTH_RATE_LIMITED,
            "too many mails were asked for this address, try again later",
        ));
    }
    Ok(())
}

/// Counts a ceremony begun from `address` (a passkey sign-in, a captcha image): each keeps
/// state for minutes.
pub async fn limit_ceremonies(ctx: &Context, address: IpAddr) -> ServiceResult<()> {
    limit_address(ctx, "ceremony", address).await
}

/// Failure counters in the `KvStore`, each key with its budget within `window`: the one limit
/// of every check that lets someone guess at a secret (a password per e-mail address, a share's
/// password per share and per address, two-factor codes per account, redeem codes per user and
/// per address). A guess is charged to every counter before it is checked and refunded when it
/// was right ([`refund_guess`]), so concurrent guesses, on one master or several, never check
/// more than the budget allows. Answers false, charging nothing, when a counter is used up.
pub async fn charge_guess(ctx: &Context, budget: &[(String, u64)], window: Duration) -> ServiceResult<bool> {
    Ok(ctx.store().charge(budget, window).await?)
}

/// Gives back the charge of a guess that was right (see [`charge_guess`]).
pub async fn refund_guess(ctx: &Context, budget: &[(String, u64)]) -> ServiceResult<()> {
    let keys: Vec<String> = budget.iter().map(|(key, _)| key.clone()).collect();
    Ok(ctx.store().refund(&keys).await?)
}

/// The window of the sign-in failure budgets (`login_rate_window_seconds`).
pub fn failure_window(ctx: &Context) -> Duration {
    Duration::from_secs(ctx.config().login_rate_window_seconds)
}

/// Enters a password check for `subjects` (`share:{id}`, `account:{email}`, `addr:{address}`)
/// on this master, or refuses with `refusal` and `Retry-After` when one of them already has its
/// checks waiting (see [`WaitingChecks`](crate::credentials::password::WaitingChecks)).
pub fn wait_for_check<'a>(
    ctx: &'a Context,
    subjects: &[String],
    refusal: impl FnOnce() -> ServiceError,
) -> ServiceResult<crate::credentials::password::WaitingCheck<'a>> {
    ctx.waiting_checks().enter(subjects).ok_or_else(|| refusal().with_retry_after(1))
}

/// What a person presents to sign in, as the unified login request carries it.
#[derive(Debug, Clone, Copy)]
pub struct LoginAttempt<'a> {
    pub provider: AuthMethod,
    /// The e-mail address (`email_password`), the challenge token (`passkey`), the ticket of
    /// the OAuth callback (`github`, `qq`, `oidc`), the mailed token (`magic_link`).
    pub identifier: &'a str,
    /// The password (`email_password`), the assertion as JSON (`passkey`).
    pub credential: Option<&'a Secret>,
    /// The current code of the account's second factor, when it has one.
    pub two_fa_code: Option<&'a str>,
    pub address: IpAddr,
}

/// Unified sign-in: the provider named in the attempt (enabled in `auth_methods`) identifies
/// the user; the account's status, its second factor and issuing tokens are the same for all.
/// The sign-in, or its refusal, is recorded in the activity log.
pub async fn login(ctx: &Context, attempt: LoginAttempt<'_>) -> ServiceResult<LoginView> {
    let outcome = sign_in(ctx, attempt).await;
    if let Some(entry) = sign_in_activity(ctx, &attempt, &outcome).await {
        activity::record(ctx.db(), entry).await;
    }
    outcome
}

/// What the activity log keeps of a sign-in: the account, provider and address; for a refusal
/// its code and, for a password, the e-mail address tried (its account, if any, as the actor),
/// never a credential or a token. A request for the second factor is a step, not a refusal.
async fn sign_in_activity(
    ctx: &Context,
    attempt: &LoginAttempt<'_>,
    outcome: &ServiceResult<LoginView>,
) -> Option<Activity> {
    let provider = serde_json::to_value(attempt.provider).unwrap_or_default();
    match outcome {
        Ok(view) => Some(
            Activity::by(UserId::from(view.user.id), Action::SignIn)
                .on(TargetKind::User, view.user.id, Some(&view.user.email))
                .from(attempt.address)
                .with("provider", provider),
        ),
        // Refusals for the rate limit are not written: the attempts that reached it were, and a
        // flood must not turn into as many inserts.
        Err(error) if matches!(error.kind, ErrorKind::PreconditionRequired | ErrorKind::RateLimited) => None,
        Err(error) => {
            let email = (attempt.provider == AuthMethod::EmailPassword)
                .then(|| Email::parse(attempt.identifier).ok())
                .flatten();
            let account = match &email {
                Some(email) => db::users::find_by_email(ctx.db(), email.as_str()).await.ok().flatten(),
                None => None,
            };
            let actor = account.as_ref().map(|user| user.id);
            let mut failed = Activity::new(Action::SignInFailed, actor).from(attempt.address);
            failed = match (actor, &email) {
                (Some(id), Some(email)) => failed.on(TargetKind::User, id, Some(email.as_str())),
                (None, Some(email)) => failed.on_name(TargetKind::User, email.as_str()),
                _ => failed,
            };
            Some(failed.with("provider", provider).with("code", error.code.as_ref()))
        }
    }
}

async fn sign_in(ctx: &Context, attempt: LoginAttempt<'_>) -> ServiceResult<LoginView> {
    let config = site::current(ctx).await?;
    site::require_enabled_method(&config, attempt.provider)?;
    limit_address(ctx, "login", attempt.address).await?;
    let user_id = match attempt.provider {
        AuthMethod::EmailPassword => identify_by_password(ctx, &attempt).await?,
        AuthMethod::Passkey => passkey::identify(ctx, attempt.identifier, attempt.credential).await?,
        AuthMethod::MagicLink => magic_link::identify(ctx, attempt.identifier).await?,
        AuthMethod::Github | AuthMethod::Qq | AuthMethod::Oidc => {
            let provider = oauth::Provider::from_method(attempt.provider).ok_or_else(invalid_credentials)?;
            oauth::redeem_ticket(ctx, provider, attempt.identifier).await?
        }
    };
    let user = db::users::find(ctx.db(), user_id).await?.ok_or_else(invalid_credentials)?;
    if user.status != UserStatus::Active {
        return Err(ServiceError::user_inactive());
    }
    if asks_second_factor(attempt.provider) {
        two_factor::check_sign_in(ctx, &user, attempt.two_fa_code).await?;
    }
    // Single-use credentials are spent last: a sign-in refused for its code can be sent again.
    match attempt.provider {
        AuthMethod::MagicLink => magic_link::use_up(ctx, attempt.identifier, user_id).await?,
        AuthMethod::Github | AuthMethod::Qq | AuthMethod::Oidc => {
            let provider = oauth::Provider::from_method(attempt.provider).ok_or_else(invalid_credentials)?;
            oauth::use_up_ticket(ctx, provider, attempt.identifier, user_id).await?;
        }
        AuthMethod::EmailPassword | AuthMethod::Passkey => {}
    }
    let tokens = issue(ctx, &user, Uuid::new_v4()).await?;
    Ok(LoginView { tokens, user: accounts::user_view(ctx, &user).await? })
}

/// Whether a sign-in through `provider` is one factor, so an account with two-factor sign-in
/// on must add its code. A passkey with user verification (which the ceremony requires) is
/// already two factors: something held and something known or being.
fn asks_second_factor(provider: AuthMethod) -> bool {
    match provider {
        AuthMethod::EmailPassword | AuthMethod::MagicLink | AuthMethod::Github | AuthMethod::Qq | AuthMethod::Oidc => {
            true
        }
        AuthMethod::Passkey => false,
    }
}

/// The e-mail and password step, with its per-identifier failure budget and its bound on
/// waiting checks per account and per address.
async fn identify_by_password(ctx: &Context, attempt: &LoginAttempt<'_>) -> ServiceResult<UserId> {
    let credential =
        attempt.credential.ok_or_else(|| ServiceError::validation("credential", "password is required"))?;
    let email = Email::parse(attempt.identifier).map_err(|_| invalid_credentials())?;

    let subjects = [format!("account:{email}"), format!("addr:{}", attempt.address)];
    let _waiting = wait_for_check(ctx, &subjects, rate_limited)?;
    let budget = [(format!("rate:login:id:{email}"), ctx.config().login_failures_per_identifier)];
    if !charge_guess(ctx, &budget, failure_window(ctx)).await? {
        return Err(rate_limited());
    }
    let Some(user_id) = password::identify(ctx.db(), &email, credential).await? else {
        return Err(invalid_credentials());
    };
    // The right password gives its own charge back; the wrong ones before it stay counted for
    // the window, so a sign-in of the owner never hands a guesser a fresh budget.
    refund_guess(ctx, &budget).await?;
    password::mark_used(ctx.db(), &email).await?;
    Ok(user_id)
}

/// The group claims snapshot of a user's current group.
async fn group_claims(ctx: &Context, user: &UserRow) -> ServiceResult<GroupClaims> {
    let group = db::groups::find(ctx.db(), user.group_id)
        .await?
        .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("user {} has no group", user.id)))?;
    Ok(GroupClaims {
        id: group.id.into(),
        name: group.name,
        admin: group.is_admin,
        max_storage: group.max_storage,
        permissions: group.permissions,
        version: group.claims_changed_at,
    })
}

/// Issues an access token and a refresh token in `family`, recording the refresh token.
async fn issue(ctx: &Context, user: &UserRow, family: Uuid) -> ServiceResult<TokenPair> {
    let user_id = user.id;
    let now_ms = now_ms();
    let now = now_ms / 1000;
    let access_exp = now + ACCESS_TOKEN_LIFETIME.as_secs() as i64;
    let refresh_exp = now + i64::from(ctx.config().refresh_token_days) * 86_400;
    let access = JwtPayload {
        sub: user_id,
        jti: Uuid::new_v4(),
        iat: now,
        exp: access_exp,
        typ: TokenType::Access,
        group: group_claims(ctx, user).await?,
        user_version: user.claims_changed_at,
    };
    let refresh = RefreshClaims {
        sub: user_id,
        jti: Uuid::new_v4(),
        fam: family,
        iat: now,
        exp: refresh_exp,
        typ: TokenType::Refresh,
    };
    db::refresh_tokens::insert(
        ctx.db(),
        &refresh.jti.to_string(),
        user.id,
        &family.to_string(),
        refresh_exp * 1000,
        now_ms,
    )
    .await?;
    Ok(TokenPair {
        access_token: ctx.tokens().sign(&access),
        access_expires: to_rfc3339(access_exp * 1000),
        refresh_token: ctx.tokens().sign(&refresh),
        refresh_expires: to_rfc3339(refresh_exp * 1000),
    })
}

fn refresh_refused() -> ServiceError {
    ServiceError::new(
        ErrorKind::Unauthorized,
        codes::AUTH_REFRESH_TOKEN_INVALID,
        "refresh token is no longer valid: sign in again",
    )
}

/// How long a refresh token, once exchanged, answers again with the pair it was exchanged for:
/// a client whose answer was lost on the way sends it again, which is not a leak.
pub const REFRESH_GRACE: Duration = Duration::from_secs(60);

fn grace_key(jti: &str) -> String {
    format!("refresh-grace:{jti}")
}

/// The pair `jti` was exchanged for, while its grace lasts: for [`REFRESH_GRACE`], and only
/// until that pair's refresh token is exchanged in turn (then the client has the pair, and the
/// old token coming back is a replay). Waits a moment for a concurrent exchange of the same
/// token to record its pair.
async fn exchanged_for(ctx: &Context, jti: &str) -> ServiceResult<Option<TokenPair>> {
    for attempt in 0..20 {
        if let Some(recorded) = ctx.store().get(&grace_key(jti)).await? {
            let Ok(pair) = serde_json::from_str::<TokenPair>(&recorded) else { return Ok(None) };
            let Ok(next) = ctx.tokens().verify_refresh(&pair.refresh_token) else { return Ok(None) };
            let next = db::refresh_tokens::find(ctx.db(), &next.jti.to_string()).await?;
            let unused = next.is_some_and(|row| row.retired_at.is_none() && row.revoked_at.is_none());
            return Ok(unused.then_some(pair));
        }
        if attempt < 19 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(None)
}

/// Exchanges a refresh token for a new pair and retires it. The same token presented again
/// within [`REFRESH_GRACE`] answers the same pair (the first answer may have been lost); later,
/// it means the token leaked (or a client replays it): the whole family is revoked.
pub async fn refresh(ctx: &Context, token: &str) -> ServiceResult<TokenPair> {
    let claims = ctx.tokens().verify_refresh(token).map_err(token_error)?;
    let now = now_ms();
    let id = claims.jti.to_string();
    let row = db::refresh_tokens::find(ctx.db(), &id).await?.ok_or_else(refresh_refused)?;
    if row.revoked_at.is_some() {
        return Err(refresh_refused());
    }
    if !db::refresh_tokens::retire(ctx.db(), &id, now).await? {
        // Exchanged a moment ago (through any master): the same answer again.
        if let Some(pair) = exchanged_for(ctx, &id).await? {
            accounts::load_active_user(ctx, claims.sub).await?;
            return Ok(pair);
        }
        // Retired before, beyond the grace: reuse. Revoke the family, refuse.
        let revoked = db::refresh_tokens::revoke_family(ctx.db(), &row.family_id, now).await?;
        tracing::warn!(user = %row.user_id, family = %row.family_id, revoked, "refresh token reused; family revoked");
        return Err(ServiceError::new(
            ErrorKind::Unauthorized,
            codes::AUTH_REFRESH_TOKEN_REUSED,
            "refresh token was already used: sign in again",
        ));
    }
    let user = accounts::load_active_user(ctx, claims.sub).await?;
    let pair = issue(ctx, user.row(), claims.fam).await?;
    let recorded = serde_json::to_string(&pair).map_err(ServiceError::internal)?;
    ctx.store().set(&grace_key(&id), &recorded, Some(REFRESH_GRACE)).await?;
    Ok(pair)
}

/// Signs out: revokes the refresh token's whole family. Idempotent.
pub async fn logout(ctx: &Context, token: &str) -> ServiceResult<()> {
    let claims = ctx.tokens().verify_refresh(token).map_err(token_error)?;
    db::refresh_tokens::revoke_family(ctx.db(), &claims.fam.to_string(), now_ms()).await?;
    Ok(())
}
