//! The caller's passkeys: registering one (both ceremony steps), listing, renaming and
//! removing them, and the options that begin a passkey sign-in. The ceremonies themselves are
//! the passkey provider's (`identity::providers::passkey`).

use nubo_model::db::passkeys::PasskeyRow;
use nubo_model::db::{self, DbError};
use nubo_model::domain::ids::UserId;
use nubo_model::domain::settings::AuthMethod;
use nubo_model::domain::time::{now_ms, to_rfc3339};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::identity::providers::passkey::{self, Ceremony};
use crate::{identity::accounts, settings::site};

const MAX_NAME_CHARS: usize = 64;
const DEFAULT_NAME: &str = "Passkey";

/// A passkey as its owner sees it (never its key material).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PasskeyView {
    pub id: Uuid,
    pub name: String,
    /// The credential id, base64url, as `navigator.credentials` spells it.
    pub credential_id: String,
    pub created_at: String,
    pub last_used_at: Option<String>,
}

fn view(row: &PasskeyRow) -> PasskeyView {
    PasskeyView {
        id: row.id,
        name: row.name.clone(),
        credential_id: row.credential_id.clone(),
        created_at: to_rfc3339(row.created_at),
        last_used_at: row.last_used_at.map(to_rfc3339),
    }
}

fn not_found() -> ServiceError {
    ServiceError::new(ErrorKind::NotFound, codes::AUTH_PASSKEY_NOT_FOUND, "no such passkey")
}

fn parse_name(name: &str) -> ServiceResult<String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(ServiceError::validation("name", format!("must be 1 to {MAX_NAME_CHARS} printable characters")));
    }
    Ok(name.to_owned())
}

/// Passkeys are offered, registered and accepted only while the site enables them.
async fn require_enabled(ctx: &Context) -> ServiceResult<()> {
    site::require_method(ctx, AuthMethod::Passkey).await
}

pub async fn list(ctx: &Context, caller: UserId) -> ServiceResult<Vec<PasskeyView>> {
    Ok(db::passkeys::list_of(ctx.db(), caller).await?.iter().map(view).collect())
}

/// Begins registering a passkey for the caller.
pub async fn start_registration(ctx: &Context, caller: UserId) -> ServiceResult<Ceremony> {
    require_enabled(ctx).await?;
    let user = accounts::load_active_user(ctx, caller).await?;
    let existing = db::passkeys::list_of(ctx.db(), user.row().id).await?;
    passkey::start_registration(ctx, user.row(), &existing).await
}

/// Finishes the registration begun under `challenge_token`, storing the passkey and its
/// sign-in identity.
pub async fn finish_registration(
    ctx: &Context,
    caller: UserId,
    challenge_token: &str,
    name: Option<&str>,
    credential: serde_json::Value,
) -> ServiceResult<PasskeyView> {
    require_enabled(ctx).await?;
    let name = name.map(parse_name).transpose()?.unwrap_or_else(|| DEFAULT_NAME.to_owned());
    let registered = passkey::finish_registration(ctx, caller, challenge_token, credential).await?;
    let row = PasskeyRow {
        id: Uuid::new_v4(),
        user_id: caller,
        credential_id: registered.credential_id,
        name,
        passkey: registered.passkey,
        created_at: now_ms(),
        last_used_at: None,
    };
    db::passkeys::insert(ctx.db(), &row).await.map_err(|err: DbError| {
        if err.is_unique_violation() {
            ServiceError::conflict(codes::AUTH_PASSKEY_EXISTS, "this passkey is already registered")
        } else {
            err.into()
        }
    })?;
    Ok(view(&row))
}

pub async fn rename(ctx: &Context, caller: UserId, id: Uuid, name: &str) -> ServiceResult<PasskeyView> {
    let name = parse_name(name)?;
    if !db::passkeys::rename(ctx.db(), caller, id, &name).await? {
        return Err(not_found());
    }
    let row = db::passkeys::find_owned(ctx.db(), caller, id).await?.ok_or_else(not_found)?;
    Ok(view(&row))
}

/// Removes a passkey, unless it is the account's last way to sign in.
pub async fn delete(ctx: &Context, caller: UserId, id: Uuid) -> ServiceResult<()> {
    match db::passkeys::delete_unless_last(ctx.db(), caller, id).await? {
        None => Err(not_found()),
        Some(false) => Err(ServiceError::conflict(
            codes::AUTH_LAST_SIGN_IN_METHOD,
            "this passkey is your only way to sign in: set a password or add another passkey first",
        )),
        Some(true) => Ok(()),
    }
}

/// The options that begin a passkey sign-in (no account named: the passkey says whose it is).
pub async fn sign_in_options(ctx: &Context) -> ServiceResult<Ceremony> {
    require_enabled(ctx).await?;
    passkey::start_sign_in(ctx).await
}
