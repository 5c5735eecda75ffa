//! The ways a user signs in (`auth_identities`) and the OAuth use cases around them: starting
//! an OAuth sign-in or link, the provider's callback (link, sign in, or register, and for
//! OpenID Connect the group its group claim maps to), listing the caller's identities and
//! unlinking one. The protocol itself is `identity::providers::oauth`'s (and `oidc`'s).

use nubo_model::db::identities::{IdentityRow, NewOAuthIdentity};
use nubo_model::db::users::NewUser;
use nubo_model::db::{self, DbError};
use nubo_model::domain::ids::UserId;
use nubo_model::domain::time::{now_ms, to_rfc3339};
use nubo_model::domain::user::{Email, UserStatus};
use serde::Serialize;
use utoipa::ToSchema;

use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::identity::providers::oauth::{self, Flow, OidcSettings, Profile, Provider};
use crate::identity::users::{self, UserUpdate};
use crate::{identity::accounts, identity::bootstrap, settings::site};

/// One of the caller's ways to sign in, passkeys excepted (`GET /user/settings/authns` lists those).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct IdentityView {
    /// `email_password`, `github`, `qq` or `oidc`.
    pub provider: String,
    /// What the person knows the identity by: the e-mail address, the GitHub login, the QQ
    /// nickname, the OpenID Connect `preferred_username` (else `name`, `email` or `sub`).
    pub display: String,
    pub created_at: String,
    pub last_used_at: Option<String>,
}

fn view(row: IdentityRow) -> IdentityView {
    IdentityView {
        display: row.display.unwrap_or_else(|| row.identifier.clone()),
        provider: row.provider,
        created_at: to_rfc3339(row.created_at),
        last_used_at: row.last_used_at.map(to_rfc3339),
    }
}

pub async fn list(ctx: &Context, caller: UserId) -> ServiceResult<Vec<IdentityView>> {
    Ok(db::identities::list_of(ctx.db(), caller).await?.into_iter().map(view).collect())
}

/// The provider named in a path, enabled in `auth_methods` and configured.
async fn usable(ctx: &Context, provider: &str) -> ServiceResult<oauth::ProviderSettings> {
    let provider = Provider::parse(provider)?;
    site::require_method(ctx, provider.method()).await?;
    oauth::settings(ctx, provider).await
}

/// Starts an OAuth sign-in: the provider's authorize URL to send the browser to.
pub async fn start_sign_in(ctx: &Context, provider: &str) -> ServiceResult<String> {
    let settings = usable(ctx, provider).await?;
    oauth::begin(ctx, &settings, None).await
}

/// Starts linking a provider to the caller's account: the authorize URL to navigate to.
pub async fn start_link(ctx: &Context, caller: UserId, provider: &str) -> ServiceResult<String> {
    let settings = usable(ctx, provider).await?;
    let user = accounts::load_active_user(ctx, caller).await?;
    oauth::begin(ctx, &settings, Some(user.row().id)).await
}

/// Unlinks the caller's identity at an OAuth provider, unless it is their last way to sign in.
pub async fn unlink(ctx: &Context, caller: UserId, provider: &str) -> ServiceResult<()> {
    let provider = Provider::parse(provider)?;
    match db::identities::unlink_unless_last(ctx.db(), caller, provider.name()).await? {
        None => Err(ServiceError::not_found(codes::AUTH_IDENTITY_NOT_FOUND, "no identity of this provider is linked")),
        Some(false) => Err(ServiceError::conflict(
            codes::AUTH_LAST_SIGN_IN_METHOD,
            "this is your only way to sign in: set a password, add a passkey or link another provider first",
        )),
        Some(true) => Ok(()),
    }
}

/// What the provider's callback carries.
#[derive(Debug, Default)]
pub struct Callback<'a> {
    pub code: Option<&'a str>,
    pub state: Option<&'a str>,
    /// Set when the person declined, or the provider failed, at its end.
    pub error: Option<&'a str>,
}

/// Finishes a flow at the provider's callback. Answers where to send the browser: the web app's
/// sign-in ticket page, Settings after a link, or the page that shows the error's code (the
/// callback is a browser navigation: it never answers a JSON error page).
pub async fn callback(ctx: &Context, provider: &str, answer: Callback<'_>) -> ServiceResult<String> {
    let provider = Provider::parse(provider)?;
    let flow = match oauth::take_flow(ctx, provider, answer.state.unwrap_or_default()).await {
        Ok(flow) => flow,
        Err(err) => return Ok(error_page(None, &err)),
    };
    let linking = flow.link_user.is_some();
    match finish(ctx, provider, &flow, &answer).await {
        Ok(Finished::Linked) => Ok(format!("/settings?linked={}", provider.name())),
        Ok(Finished::SignedIn(user_id)) => {
            let ticket = oauth::issue_ticket(ctx, provider, user_id).await?;
            Ok(format!("/login/oauth?provider={}&ticket={ticket}", provider.name()))
        }
        Err(err) if err.kind == ErrorKind::Internal => Err(err),
        Err(err) => Ok(error_page(Some(linking), &err)),
    }
}

/// Settings for a failed link, the sign-in page otherwise (or when it is unknown which).
fn error_page(linking: Option<bool>, err: &ServiceError) -> String {
    tracing::info!(code = %err.code, message = %err.message, "OAuth callback refused");
    let page = if linking == Some(true) { "/settings" } else { "/login" };
    format!("{page}?oauth_error={}", err.code)
}

enum Finished {
    Linked,
    SignedIn(UserId),
}

async fn finish(ctx: &Context, provider: Provider, flow: &Flow, answer: &Callback<'_>) -> ServiceResult<Finished> {
    site::require_method(ctx, provider.method()).await?;
    let settings = oauth::settings(ctx, provider).await?;
    if let Some(error) = answer.error {
        return Err(oauth::exchange_failed(provider, format_args!("the callback carries error={error}")));
    }
    let code = answer.code.filter(|c| !c.is_empty()).ok_or_else(|| oauth::exchange_failed(provider, "no code"))?;
    let tokens = oauth::exchange(&settings, flow, code).await?;
    let profile = oauth::profile(&settings, flow, &tokens).await?;
    match flow.link_user {
        Some(user) => link(ctx, provider, user, &profile).await.map(|()| Finished::Linked),
        None => {
            let user_id = sign_in(ctx, provider, &profile).await?;
            if let Some(oidc) = &settings.oidc {
                apply_group_map(ctx, oidc, user_id, &profile.groups).await?;
            }
            Ok(Finished::SignedIn(user_id))
        }
    }
}

/// Puts a user who signs in through OpenID Connect (at registration and at every sign-in) in
/// the group of the first `oidc_group_map` entry whose value the group claim carries. When no
/// entry matches, a user in one of the mapped groups (which the map gave them) returns to the
/// registration group, and anyone else stays where an administrator put them. A move is an
/// administrator's move: it outdates the user's access tokens and ends a temporary group.
async fn apply_group_map(ctx: &Context, oidc: &OidcSettings, user_id: UserId, values: &[String]) -> ServiceResult<()> {
    if oidc.group_claim.is_empty() || oidc.group_map.is_empty() {
        return Ok(());
    }
    let Some(user) = db::users::find(ctx.db(), user_id).await? else { return Ok(()) };
    let mapped = oidc.group_map.iter().find(|(value, _)| values.contains(value)).map(|(_, g)| *g);
    let target = match mapped {
        Some(group) => group,
        None if oidc.group_map.iter().any(|(_, g)| *g == user.group_id) => bootstrap::registration_group(ctx).await?,
        None => return Ok(()),
    };
    if target == user.group_id {
        return Ok(());
    }
    if db::groups::find(ctx.db(), target).await?.is_none() {
        // Deleted since the map was saved: the sign-in goes on, the map wants mending.
        tracing::warn!(group = %target, "oidc_group_map names a group that no longer exists");
        return Ok(());
    }
    let update = UserUpdate { group_id: Some(target.as_uuid()), ..UserUpdate::default() };
    users::update(ctx, user_id, user_id, update).await?;
    tracing::info!(user = %user_id, group = %target, "moved by the OpenID Connect group map");
    Ok(())
}

fn linked_elsewhere() -> ServiceError {
    ServiceError::conflict(
        codes::AUTH_IDENTITY_LINKED_ELSEWHERE,
        "this account at the provider is linked to another user: sign in with it, or unlink it there",
    )
}

/// Links the profile's identity to `user_id`; linking it again is a no-op.
async fn link(ctx: &Context, provider: Provider, user_id: UserId, profile: &Profile) -> ServiceResult<()> {
    accounts::load_active_user(ctx, user_id).await?;
    let now = now_ms();
    let identity =
        NewOAuthIdentity { provider: provider.name(), identifier: &profile.identifier, display: &profile.display };
    match db::users::find_identity(ctx.db(), provider.name(), &profile.identifier).await? {
        Some((owner, _)) if owner == user_id => {
            db::identities::record_use(ctx.db(), provider.name(), &profile.identifier, &profile.display, now).await?;
            return Ok(());
        }
        Some(_) => return Err(linked_elsewhere()),
        None => {}
    }
    if db::identities::identifier_of(ctx.db(), user_id, provider.name()).await?.is_some() {
        return Err(ServiceError::conflict(
            codes::AUTH_IDENTITY_ALREADY_LINKED,
            "another account at this provider is linked to you: unlink it first",
        ));
    }
    db::identities::link(ctx.db(), user_id, &identity, now)
        .await
        .map_err(|err: DbError| if err.is_unique_violation() { linked_elsewhere() } else { err.into() })
}

/// The user the profile's identity belongs to, registered now when it is new and the site
/// takes registrations.
async fn sign_in(ctx: &Context, provider: Provider, profile: &Profile) -> ServiceResult<UserId> {
    if let Some((user_id, _)) = db::users::find_identity(ctx.db(), provider.name(), &profile.identifier).await? {
        db::identities::record_use(ctx.db(), provider.name(), &profile.identifier, &profile.display, now_ms()).await?;
        return Ok(user_id);
    }
    if !site::current(ctx).await?.register_enabled {
        return Err(ServiceError::new(
            ErrorKind::Forbidden,
            codes::USER_REGISTRATION_CLOSED,
            "registration is closed on this site: an existing account can link this provider in Settings",
        ));
    }
    let email = profile.email.as_deref().and_then(|e| Email::parse(e).ok()).ok_or_else(|| {
        ServiceError::new(
            ErrorKind::Validation,
            codes::AUTH_OAUTH_NO_EMAIL,
            "the provider gives no verified e-mail address: register otherwise, then link it in Settings",
        )
    })?;
    let email_taken = || {
        ServiceError::conflict(
            codes::AUTH_OAUTH_EMAIL_TAKEN,
            "an account with this e-mail address exists: sign in to it and link the provider in Settings",
        )
    };
    // Never linked automatically: a provider's say-so is not proof of owning this account.
    if db::identities::email_in_use(ctx.db(), email.as_str()).await? {
        return Err(email_taken());
    }
    let nickname = accounts::parse_nickname(&profile.display)
        .unwrap_or_else(|_| email.as_str().split('@').next().unwrap_or("user").chars().take(64).collect());
    let user_id = UserId::random();
    let group_id = bootstrap::registration_group(ctx).await?;
    let user =
        NewUser { id: user_id, email: email.as_str(), nickname: &nickname, status: UserStatus::Active, group_id };
    let now = now_ms();
    let identity = db::users::NewIdentity {
        provider: provider.name(),
        identifier: &profile.identifier,
        credential: None,
        display: Some(&profile.display),
        last_used_at: Some(now),
    };
    db::users::insert_with_identity(ctx.db(), &user, &identity, now).await.map_err(|err: DbError| {
        // A race with another registration of the same address or identity.
        if err.is_unique_violation() { email_taken() } else { err.into() }
    })?;
    tracing::info!(user = %user_id, provider = provider.name(), "registered through OAuth");
    Ok(user_id)
}
