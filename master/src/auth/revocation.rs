//! Per-user token state in the [`KvStore`]: a ban, or a "not before" time that invalidates
//! access tokens issued earlier (after a group change). Checked on every authenticated request
//! without touching the database, so a ban bites at once at every guard level.
//!
//! Entries live as long as an access token can, then vanish: by then every token issued before
//! the change has expired, and refresh and sign-in consult the database.

use std::time::Duration;

use uuid::Uuid;

use crate::auth::token::{ACCESS_TOKEN_LIFETIME, JwtPayload};
use crate::db::{self, Db};
use crate::domain::time::now_ms;
use crate::service::{ErrorKind, ServiceError, ServiceResult};
use crate::store::{KvStore, StoreError};

const BANNED: &str = "banned";
/// Longer than any access token lives, with a margin for clock skew between masters.
const ENTRY_LIFETIME: Duration = Duration::from_secs(ACCESS_TOKEN_LIFETIME.as_secs() + 120);

fn key(user: Uuid) -> String {
    format!("user-state:{user}")
}

impl From<StoreError> for ServiceError {
    fn from(err: StoreError) -> Self {
        let mut e =
            ServiceError::new(ErrorKind::Unavailable, "store.unavailable", "a shared store is unavailable, try again");
        e.source = Some(err.into());
        e
    }
}

/// Refuses every token of the user at once.
pub async fn ban(store: &dyn KvStore, user: Uuid) -> ServiceResult<()> {
    store.set(&key(user), BANNED, Some(ENTRY_LIFETIME)).await?;
    Ok(())
}

/// Whether the user is banned right now (for credentials checked without a token: WebDAV).
pub async fn is_banned(store: &dyn KvStore, user: Uuid) -> ServiceResult<bool> {
    Ok(store.get(&key(user)).await?.as_deref() == Some(BANNED))
}

/// Lifts a ban: tokens issued before it work again until they expire.
pub async fn unban(store: &dyn KvStore, user: Uuid) -> ServiceResult<()> {
    store.delete(&key(user)).await?;
    Ok(())
}

/// Refuses the user's access tokens issued before now (they must refresh to get fresh claims).
pub async fn reissue_required(store: &dyn KvStore, user: Uuid) -> ServiceResult<()> {
    let not_before = now_ms() / 1000;
    store.set(&key(user), &format!("nbf:{not_before}"), Some(ENTRY_LIFETIME)).await?;
    Ok(())
}

/// Checks the token's user against the store: 403 when banned, 401 when the token predates a
/// change that requires a new one.
pub async fn check(store: &dyn KvStore, claims: &JwtPayload) -> ServiceResult<()> {
    match store.get(&key(claims.sub)).await?.as_deref() {
        None => Ok(()),
        Some(BANNED) => Err(ServiceError::user_inactive()),
        Some(state) => {
            let not_before = state.strip_prefix("nbf:").and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
            // `iat` has one-second resolution: a token issued in the same second as the change
            // may predate it, so it is refused too (a refresh a second later succeeds).
            if claims.iat <= not_before {
                Err(ServiceError::new(
                    ErrorKind::Unauthorized,
                    "auth.token_revoked",
                    "token was revoked: refresh or sign in again",
                ))
            } else {
                Ok(())
            }
        }
    }
}

/// Re-creates ban entries for users deactivated within an access-token lifetime, so a master
/// restarted with the in-memory store does not forget a fresh ban.
pub async fn restore_bans(db: &Db, store: &dyn KvStore) -> ServiceResult<usize> {
    let since = now_ms() - ENTRY_LIFETIME.as_millis() as i64;
    let users = db::users::inactive_changed_since(db, since).await?;
    for id in &users {
        if let Ok(id) = id.parse() {
            ban(store, id).await?;
        }
    }
    Ok(users.len())
}
