//! The passkey provider (WebAuthn with discoverable credentials, through `webauthn-rs`): the
//! registration ceremony and the sign-in assertion. Each ceremony's state waits in the
//! `KvStore` between its two requests, under a random challenge token, for five minutes and
//! for one use, so a ceremony begun on one master can finish on another. The relying party is
//! the site URL setting: its host is the relying-party id, its origin the only one accepted.

use std::time::Duration;

use base64::Engine;
use nubo_common::secret::Secret;
use nubo_model::db;
use nubo_model::db::passkeys::PasskeyRow;
use nubo_model::db::users::UserRow;
use nubo_model::domain::ids::UserId;
use nubo_model::domain::time::now_ms;
use serde::Serialize;
use serde::de::DeserializeOwned;
use webauthn_rs::prelude::{
    CredentialID, DiscoverableAuthentication, Passkey, PasskeyRegistration, PublicKeyCredential,
    RegisterPublicKeyCredential, Url, Webauthn, WebauthnBuilder,
};

use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::settings::site;

/// How long a started ceremony waits for its second request.
const CEREMONY_LIFETIME: Duration = Duration::from_secs(5 * 60);

/// A started ceremony: the options for `navigator.credentials`, and the token that finishes it.
#[derive(Debug)]
pub struct Ceremony {
    pub challenge_token: String,
    /// `CreationChallengeResponse` or `RequestChallengeResponse`, as JSON with base64url bytes.
    pub options: serde_json::Value,
}

fn challenge_invalid() -> ServiceError {
    ServiceError::new(
        ErrorKind::Unauthorized,
        codes::AUTH_PASSKEY_CHALLENGE_INVALID,
        "this passkey challenge is unknown, expired or already used: start again",
    )
}

fn rejected(why: impl std::fmt::Display) -> ServiceError {
    tracing::info!(%why, "passkey refused");
    ServiceError::new(ErrorKind::Unauthorized, codes::AUTH_PASSKEY_REJECTED, "the passkey was not accepted")
}

fn site_url_unusable(why: &str) -> ServiceError {
    ServiceError::new(
        ErrorKind::Unavailable,
        codes::AUTH_PASSKEY_SITE_URL,
        format!("passkeys need the site_url setting to be this site's public address ({why}): ask an administrator"),
    )
}

/// The relying party the site URL describes. Built per ceremony: a changed site URL applies at
/// once (and orphans the passkeys registered under the old host, see docs/src/admin/sign-in.md).
async fn relying_party(ctx: &Context) -> ServiceResult<Webauthn> {
    let settings = site::current(ctx).await?;
    if settings.site_url.is_empty() {
        return Err(site_url_unusable("it is empty"));
    }
    let origin = Url::parse(&settings.site_url).map_err(|_| site_url_unusable("it is not a URL"))?;
    let rp_id = origin.domain().ok_or_else(|| site_url_unusable("its host must be a domain name"))?.to_owned();
    let rp_name = &settings.site_name;
    WebauthnBuilder::new(&rp_id, &origin)
        .and_then(|builder| builder.rp_name(if rp_name.is_empty() { "Nubo" } else { rp_name }).build())
        .map_err(|_| site_url_unusable("browsers accept https addresses, or http on localhost"))
}

fn new_challenge_token() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

fn registration_key(user_id: UserId, token: &str) -> String {
    format!("passkey:register:{user_id}:{token}")
}

fn sign_in_key(token: &str) -> String {
    format!("passkey:sign_in:{token}")
}

async fn keep_state(ctx: &Context, key: &str, state: &impl Serialize) -> ServiceResult<()> {
    let text = serde_json::to_string(state).map_err(ServiceError::internal)?;
    ctx.store().set(key, &text, Some(CEREMONY_LIFETIME)).await?;
    Ok(())
}

/// The ceremony state under `key`, taken so it cannot serve twice.
async fn take_state<T: DeserializeOwned>(ctx: &Context, key: &str) -> ServiceResult<T> {
    let text = ctx.store().take(key).await?.ok_or_else(challenge_invalid)?;
    serde_json::from_str(&text).map_err(ServiceError::internal)
}

fn stored_passkey(row: &PasskeyRow) -> ServiceResult<Passkey> {
    serde_json::from_str(&row.passkey).map_err(ServiceError::internal)
}

/// The credential id as stored and as browsers spell it: base64url without padding.
pub fn credential_id_text(id: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id)
}

/// Begins registering a passkey for `user`, excluding the credentials it already has so an
/// authenticator does not register twice. The options ask for a discoverable credential: sign
/// in starts without an e-mail address.
pub async fn start_registration(ctx: &Context, user: &UserRow, existing: &[PasskeyRow]) -> ServiceResult<Ceremony> {
    let webauthn = relying_party(ctx).await?;
    let exclude = existing
        .iter()
        .map(|row| stored_passkey(row).map(|passkey| passkey.cred_id().clone()))
        .collect::<ServiceResult<Vec<CredentialID>>>()?;
    let (options, state) = webauthn
        .start_passkey_registration(user.id.as_uuid(), &user.email, &user.nickname, Some(exclude))
        .map_err(ServiceError::internal)?;
    let mut options = serde_json::to_value(options).map_err(ServiceError::internal)?;
    // webauthn-rs leaves the resident key optional; sign-in names no account, so it must not be.
    if let Some(selection) = options.pointer_mut("/publicKey/authenticatorSelection").and_then(|s| s.as_object_mut()) {
        selection.insert("residentKey".to_owned(), "required".into());
        selection.insert("requireResidentKey".to_owned(), true.into());
    }
    let challenge_token = new_challenge_token();
    keep_state(ctx, &registration_key(user.id, &challenge_token), &state).await?;
    Ok(Ceremony { challenge_token, options })
}

/// A verified new credential: its id (base64url) and the state to store.
pub struct Registered {
    pub credential_id: String,
    pub passkey: String,
}

/// Verifies the authenticator's answer to the registration begun under `challenge_token`.
pub async fn finish_registration(
    ctx: &Context,
    user_id: UserId,
    challenge_token: &str,
    credential: serde_json::Value,
) -> ServiceResult<Registered> {
    let credential: RegisterPublicKeyCredential = serde_json::from_value(credential).map_err(|e| {
        ServiceError::validation(
            "credential",
            format!("not a PublicKeyCredential from navigator.credentials.create: {e}"),
        )
    })?;
    let state: PasskeyRegistration = take_state(ctx, &registration_key(user_id, challenge_token)).await?;
    let webauthn = relying_party(ctx).await?;
    let passkey = webauthn.finish_passkey_registration(&credential, &state).map_err(rejected)?;
    Ok(Registered {
        credential_id: credential_id_text(passkey.cred_id()),
        passkey: serde_json::to_string(&passkey).map_err(ServiceError::internal)?,
    })
}

/// Begins a sign-in with any discoverable passkey of this site.
pub async fn start_sign_in(ctx: &Context) -> ServiceResult<Ceremony> {
    let webauthn = relying_party(ctx).await?;
    let (options, state) = webauthn.start_discoverable_authentication().map_err(ServiceError::internal)?;
    let challenge_token = new_challenge_token();
    keep_state(ctx, &sign_in_key(&challenge_token), &state).await?;
    Ok(Ceremony { challenge_token, options: serde_json::to_value(options).map_err(ServiceError::internal)? })
}

/// The user whose passkey signed the challenge behind `challenge_token`. The credential must
/// be registered to the very user its handle names; its counter is stored for clone detection.
pub async fn identify(ctx: &Context, challenge_token: &str, assertion: Option<&Secret>) -> ServiceResult<UserId> {
    let assertion =
        assertion.ok_or_else(|| ServiceError::validation("credential", "the passkey assertion is required"))?;
    let assertion: PublicKeyCredential = serde_json::from_str(assertion.expose()).map_err(|e| {
        ServiceError::validation("credential", format!("not a PublicKeyCredential from navigator.credentials.get: {e}"))
    })?;
    let state: DiscoverableAuthentication = take_state(ctx, &sign_in_key(challenge_token)).await?;
    let webauthn = relying_party(ctx).await?;
    let (user_uuid, credential_id) = webauthn.identify_discoverable_authentication(&assertion).map_err(rejected)?;
    let user_id = UserId::from(user_uuid);
    let row = db::passkeys::find_credential(ctx.db(), user_id, &credential_id_text(credential_id))
        .await?
        .ok_or_else(|| rejected("no such credential of that user"))?;
    let mut passkey = stored_passkey(&row)?;
    let result = webauthn.finish_discoverable_authentication_v2(&assertion, state, &passkey).map_err(rejected)?;
    passkey.update_credential(&result);
    let updated = serde_json::to_string(&passkey).map_err(ServiceError::internal)?;
    db::passkeys::record_use(ctx.db(), row.id, &updated, now_ms()).await?;
    Ok(user_id)
}
