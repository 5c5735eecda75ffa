//! OAuth sign-in and linked accounts: the browser navigations `/user/oauth/{provider}` (to the
//! provider) and its `/callback` (back from it), and the caller's identities at
//! `/user/settings/identities`. Thin handlers over `service::identity::identities`.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiPath, ApiQuery, ClientAddress};
use crate::guard::JwtRequired;
use nubo_service::context::Context;
use nubo_service::identity::identities::{self, Callback, IdentityView};
use nubo_service::identity::sign_in;

/// A 302 the browser follows; never cached, it carries single-use values.
fn found(location: &str) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, location), (header::CACHE_CONTROL, "no-store")]).into_response()
}

/// Where to send the browser to link a provider.
#[derive(Debug, Serialize, ToSchema)]
pub struct LinkStart {
    /// The provider's authorize URL; navigate the browser there (single use, ten minutes).
    pub url: String,
}

/// What the provider sends back.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CallbackQuery {
    /// The authorization code.
    pub code: Option<String>,
    /// The `state` this site sent; single use.
    pub state: Option<String>,
    /// Set instead of `code` when the person declined or the provider failed.
    pub error: Option<String>,
}

/// Start an OAuth sign-in (a browser navigation): 302 to the provider's authorize URL with
/// `client_id`, `redirect_uri` (`{site_url}/api/v1/user/oauth/{provider}/callback`), `scope`,
/// `state` and a PKCE S256 `code_challenge`. The flow lives ten minutes, for one callback.
/// For `oidc` (OpenID Connect) the authorize URL is the `authorization_endpoint` of the
/// discovery document at `{oidc_issuer}/.well-known/openid-configuration`, `scope` is
/// `oidc_scopes` (always with `openid`), and a `nonce` goes along, kept with the state.
#[utoipa::path(get, path = "/user/oauth/{provider}", tag = "user",
    params(("provider" = String, Path, description = "`github`, `qq` or `oidc` (OpenID Connect)")),
    responses(
        (status = 302, description = "To the provider's authorize URL (`Location`)"),
        (status = 403, description = "The provider is not in `auth_methods` (`auth.provider_disabled`)", body = ErrorBody),
        (status = 404, description = "No such provider (`auth.oauth_provider_unknown`)", body = ErrorBody),
        (status = 429, description = "Too many attempts from this address", body = ErrorBody),
        (status = 502, description = "`oidc`: the discovery document cannot be fetched or read, or names another issuer (`auth.oidc_discovery_failed`)", body = ErrorBody),
        (status = 503, description = "The provider has no client id (`oidc`: or no issuer), or `site_url` is empty (`auth.oauth_not_configured`)", body = ErrorBody),
    ))]
pub async fn start(
    State(state): State<Context>,
    ClientAddress(address): ClientAddress,
    ApiPath(provider): ApiPath<String>,
) -> ApiResult<Response> {
    sign_in::limit_ceremonies(&state, address).await?;
    Ok(found(&identities::start_sign_in(&state, &provider).await?))
}

/// The provider's redirect back (a browser navigation). Takes the flow's `state` (once),
/// exchanges the code with the PKCE verifier and reads the profile. A link flow links the
/// identity and redirects to `/settings?linked={provider}`; a sign-in finds the identity's user
/// (or registers one when registration is open and the provider gives a verified e-mail that no
/// account uses) and redirects to `/login/oauth?provider={provider}&ticket=...`, a single-use
/// ticket (two minutes) that `POST /user/session` exchanges for tokens. Failures redirect to
/// `/login?oauth_error={code}` (`/settings?oauth_error={code}` for a link), never to a JSON page:
/// `auth.oauth_state_invalid`, `auth.oauth_exchange_failed`, `auth.oauth_no_email`,
/// `auth.oauth_email_taken`, `user.registration_closed`, `auth.identity_linked_elsewhere`,
/// `auth.identity_already_linked`, `auth.provider_disabled`, `auth.oauth_not_configured`.
///
/// For `oidc` the token endpoint must answer an ID token, checked against the issuer's JWKS
/// (asymmetric algorithms such as RS256 and ES256; the keys are fetched again once for an
/// unknown key id): its signature (`auth.oidc_signature_invalid`), `iss` equal to the
/// discovery's issuer (`auth.oidc_issuer_invalid`), `aud` containing `oidc_client_id`
/// (`auth.oidc_audience_invalid`), `exp` (`auth.oidc_token_expired`) and the flow's `nonce`
/// (`auth.oidc_nonce_invalid`); `auth.oidc_discovery_failed` when the discovery or keys cannot
/// be had. The identity is `{issuer}#{sub}`; its e-mail address registers an account only
/// while `email_verified` is not false. With `oidc_group_claim` and `oidc_group_map` set, every
/// OpenID Connect sign-in (the first one too) moves the user to the group the claim's value
/// maps to, and back to the registration group when no value maps any more.
#[utoipa::path(get, path = "/user/oauth/{provider}/callback", tag = "user",
    params(("provider" = String, Path, description = "`github`, `qq` or `oidc` (OpenID Connect)"), CallbackQuery),
    responses(
        (status = 302, description = "To the web app: the ticket page, Settings, or the page that shows `oauth_error`"),
        (status = 400, description = "Unreadable query", body = ErrorBody),
        (status = 404, description = "No such provider (`auth.oauth_provider_unknown`)", body = ErrorBody),
    ))]
pub async fn callback(
    State(state): State<Context>,
    ApiPath(provider): ApiPath<String>,
    ApiQuery(query): ApiQuery<CallbackQuery>,
) -> ApiResult<Response> {
    let answer = Callback { code: query.code.as_deref(), state: query.state.as_deref(), error: query.error.as_deref() };
    Ok(found(&identities::callback(&state, &provider, answer).await?))
}

/// Start linking a provider to the caller's account: answers the authorize URL to navigate the
/// browser to; the callback then links the identity (refused when it belongs to another user).
#[utoipa::path(post, path = "/user/settings/identities/{provider}", tag = "user", security(("bearer" = [])),
    params(("provider" = String, Path, description = "`github`, `qq` or `oidc` (OpenID Connect)")),
    responses(
        (status = 200, description = "Navigate to `url`", body = LinkStart),
        (status = 403, description = "The provider is not enabled (`auth.provider_disabled`), or the account is not active", body = ErrorBody),
        (status = 404, description = "No such provider (`auth.oauth_provider_unknown`)", body = ErrorBody),
        (status = 503, description = "The provider is not configured (`auth.oauth_not_configured`)", body = ErrorBody),
    ))]
pub async fn link(
    State(state): State<Context>,
    JwtRequired(claims): JwtRequired,
    ApiPath(provider): ApiPath<String>,
) -> ApiResult<Json<LinkStart>> {
    Ok(Json(LinkStart { url: identities::start_link(&state, claims.sub, &provider).await? }))
}

/// The caller's ways to sign in, oldest first: the e-mail and password, and linked OAuth
/// accounts. Passkeys are listed by `GET /user/settings/authns`.
#[utoipa::path(get, path = "/user/settings/identities", tag = "user", security(("bearer" = [])),
    responses(
        (status = 200, description = "The identities", body = Vec<IdentityView>),
    ))]
pub async fn list(
    State(state): State<Context>,
    JwtRequired(claims): JwtRequired,
) -> ApiResult<Json<Vec<IdentityView>>> {
    Ok(Json(identities::list(&state, claims.sub).await?))
}

/// Unlink the caller's account at a provider; it no longer signs in. Refused when it is the
/// account's last way to sign in.
#[utoipa::path(delete, path = "/user/settings/identities/{provider}", tag = "user", security(("bearer" = [])),
    params(("provider" = String, Path, description = "`github`, `qq` or `oidc` (OpenID Connect)")),
    responses(
        (status = 204, description = "Unlinked"),
        (status = 404, description = "No such provider (`auth.oauth_provider_unknown`), or none linked (`auth.identity_not_found`)", body = ErrorBody),
        (status = 409, description = "The account's last way to sign in (`auth.last_sign_in_method`)", body = ErrorBody),
    ))]
pub async fn unlink(
    State(state): State<Context>,
    JwtRequired(claims): JwtRequired,
    ApiPath(provider): ApiPath<String>,
) -> ApiResult<StatusCode> {
    identities::unlink(&state, claims.sub, &provider).await?;
    Ok(StatusCode::NO_CONTENT)
}
