//! Passkeys: the registration ceremony at `/user/authn/registration`, sign-in options at
//! `/user/authn/options` (the assertion itself goes to `POST /user/session` with provider
//! `passkey`), and the caller's passkeys at `/user/settings/authn(s)`. Thin handlers over
//! `service::identity::passkeys`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath, ClientAddress};
use crate::guard::JwtRequired;
use nubo_service::context::Context;
use nubo_service::identity::passkeys::{self, PasskeyView};
use nubo_service::identity::providers::passkey::Ceremony;
use nubo_service::identity::sign_in;

/// A started WebAuthn ceremony.
#[derive(Debug, Serialize, ToSchema)]
pub struct CeremonyView {
    /// Names this ceremony in the request that finishes it; single use, five minutes.
    pub challenge_token: String,
    /// What `navigator.credentials.create` (registration) or `.get` (sign-in) takes, with
    /// byte fields encoded as base64url: decode them to `ArrayBuffer`s before the call.
    pub options: serde_json::Value,
}

impl From<Ceremony> for CeremonyView {
    fn from(ceremony: Ceremony) -> Self {
        Self { challenge_token: ceremony.challenge_token, options: ceremony.options }
    }
}

/// Finishing a passkey registration.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FinishRegistration {
    pub challenge_token: String,
    /// What to call the passkey (1 to 64 characters; `Passkey` when absent).
    #[schema(min_length = 1, max_length = 64)]
    pub name: Option<String>,
    /// The `PublicKeyCredential` from `navigator.credentials.create`, as JSON with base64url
    /// byte fields (`id`, `rawId`, `response.attestationObject`, `response.clientDataJSON`).
    pub credential: serde_json::Value,
}

/// Renaming a passkey.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasskeyChanges {
    /// 1 to 64 printable characters (surrounding spaces are trimmed).
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
}

/// Begin registering a passkey: creation options that exclude the caller's existing passkeys
/// and ask for a discoverable credential with user verification. The relying party is the
/// `site_url` setting's host.
#[utoipa::path(post, path = "/user/authn/registration", tag = "user", security(("bearer" = [])),
    responses(
        (status = 200, description = "Options for `navigator.credentials.create`", body = CeremonyView),
        (status = 403, description = "Passkeys are not enabled (`auth.provider_disabled`), or the account is not active", body = ErrorBody),
        (status = 503, description = "The site URL cannot be a relying party (`auth.passkey_site_url`)", body = ErrorBody),
    ))]
pub async fn start_registration(
    State(state): State<Context>,
    JwtRequired(claims): JwtRequired,
) -> ApiResult<Json<CeremonyView>> {
    Ok(Json(passkeys::start_registration(&state, claims.sub).await?.into()))
}

/// Finish registering a passkey: verifies the authenticator's answer and stores the passkey
/// with its sign-in identity.
#[utoipa::path(put, path = "/user/authn/registration", tag = "user", security(("bearer" = [])),
    request_body = FinishRegistration,
    responses(
        (status = 201, description = "Registered", body = PasskeyView),
        (status = 401, description = "Token invalid, challenge unknown or used (`auth.passkey_challenge_invalid`), or the answer did not verify (`auth.passkey_rejected`)", body = ErrorBody),
        (status = 403, description = "Passkeys are not enabled", body = ErrorBody),
        (status = 409, description = "Already registered (`auth.passkey_exists`)", body = ErrorBody),
        (status = 422, description = "Invalid name or credential", body = ErrorBody),
        (status = 503, description = "The site URL cannot be a relying party", body = ErrorBody),
    ))]
pub async fn finish_registration(
    State(state): State<Context>,
    JwtRequired(claims): JwtRequired,
    ApiJson(request): ApiJson<FinishRegistration>,
) -> ApiResult<(StatusCode, Json<PasskeyView>)> {
    let view = passkeys::finish_registration(
        &state,
        claims.sub,
        &request.challenge_token,
        request.name.as_deref(),
        request.credential,
    )
    .await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// Begin a passkey sign-in: request options for any discoverable passkey of this site. Send
/// the assertion to `POST /user/session` with `provider: passkey`, the `challenge_token` as
/// `identifier` and the credential (JSON, base64url byte fields) as `credential`. A passkey
/// verifies the user, so no second factor is asked for.
#[utoipa::path(post, path = "/user/authn/options", tag = "user",
    responses(
        (status = 200, description = "Options for `navigator.credentials.get`", body = CeremonyView),
        (status = 403, description = "Passkeys are not enabled (`auth.provider_disabled`)", body = ErrorBody),
        (status = 429, description = "Too many attempts from this address", body = ErrorBody),
        (status = 503, description = "The site URL cannot be a relying party", body = ErrorBody),
    ))]
pub async fn sign_in_options(
    State(state): State<Context>,
    ClientAddress(address): ClientAddress,
) -> ApiResult<Json<CeremonyView>> {
    sign_in::limit_ceremonies(&state, address).await?;
    Ok(Json(passkeys::sign_in_options(&state).await?.into()))
}

/// The caller's passkeys, oldest first.
#[utoipa::path(get, path = "/user/settings/authns", tag = "user", security(("bearer" = [])),
    responses(
        (status = 200, description = "The passkeys", body = Vec<PasskeyView>),
    ))]
pub async fn list(State(state): State<Context>, JwtRequired(claims): JwtRequired) -> ApiResult<Json<Vec<PasskeyView>>> {
    Ok(Json(passkeys::list(&state, claims.sub).await?))
}

/// Rename one of the caller's passkeys.
#[utoipa::path(patch, path = "/user/settings/authn/{id}", tag = "user", security(("bearer" = [])),
    params(("id" = Uuid, Path)), request_body = PasskeyChanges,
    responses(
        (status = 200, description = "Renamed", body = PasskeyView),
        (status = 404, description = "No such passkey of the caller (`auth.passkey_not_found`)", body = ErrorBody),
        (status = 422, description = "Invalid name", body = ErrorBody),
    ))]
pub async fn rename(
    State(state): State<Context>,
    JwtRequired(claims): JwtRequired,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(changes): ApiJson<PasskeyChanges>,
) -> ApiResult<Json<PasskeyView>> {
    Ok(Json(passkeys::rename(&state, claims.sub, id, &changes.name).await?))
}

/// Remove one of the caller's passkeys; it no longer signs in. Refused when it is the
/// account's last way to sign in.
#[utoipa::path(delete, path = "/user/settings/authn/{id}", tag = "user", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses(
        (status = 204, description = "Removed"),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 404, description = "No such passkey of the caller (`auth.passkey_not_found`)", body = ErrorBody),
        (status = 409, description = "The account's last way to sign in (`auth.last_sign_in_method`)", body = ErrorBody),
    ))]
pub async fn delete(
    State(state): State<Context>,
    JwtRequired(claims): JwtRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    passkeys::delete(&state, claims.sub, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
