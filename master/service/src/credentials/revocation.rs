//! Token revocation in the [`KvStore`], checked on every authenticated request without touching
//! the database, so a ban or a change of privileges bites at once at every guard level and on
//! every master. Three independent facts, each under its own key, so no later change can erase
//! an earlier one:
//! - a user's ban (lifting it leaves the other two as they were), or the user's deletion, which
//!   refuses the same tokens under another code (401 `auth.user_not_found`, not 403);
//! - a user's claims version: when they last moved group or were signed out everywhere;
//! - a group's claims version: when its name, admin flag, capacity or permissions last changed.
//!
//! Versions are the change's time in milliseconds, also kept in the database
//! (`claims_changed_at`) and copied into each access token when it is issued; a token carrying
//! an older version than the store's was issued before the change and is refused (401), so the
//! client refreshes and gets the new claims at once, even within the same second.
//!
//! Entries live as long as an access token can, then vanish: by then every token issued before
//! the change has expired, and refresh and sign-in consult the database. A master restarted
//! with the in-memory store rebuilds them from the database ([`restore`]).

use std::fmt::Display;
use std::time::Duration;

use nubo_model::db::{self, Db};
use nubo_model::domain::ids::UserId;
use nubo_model::domain::time::now_ms;
use nubo_model::kv::{KvStore, StoreError};

use crate::credentials::token::{ACCESS_TOKEN_LIFETIME, JwtPayload};
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;

/// Longer than any access token lives, with a margin for clock skew between masters.
const ENTRY_LIFETIME: Duration = Duration::from_secs(ACCESS_TOKEN_LIFETIME.as_secs() + 120);

fn ban_key(user: UserId) -> String {
    format!("user-ban:{user}")
}

fn user_version_key(user: UserId) -> String {
    format!("user-claims:{user}")
}

fn group_version_key(group: impl Display) -> String {
    format!("group-claims:{group}")
}

impl From<StoreError> for ServiceError {
    fn from(err: StoreError) -> Self {
        let mut e = ServiceError::new(
            ErrorKind::Unavailable,
            codes::STORE_UNAVAILABLE,
            "a shared store is unavailable, try again",
        );
        e.source = Some(err.into());
        e
    }
}

/// The value of a ban entry that records a deletion rather than a ban.
const DELETED: &str = "deleted";

/// What the store says about the credentials of one user in one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// Banned or deleted: no token of the user is admitted.
    pub banned: bool,
    /// The user was deleted (a ban entry saying so).
    pub deleted: bool,
    /// The oldest user and group claims versions still current (0: no change recorded).
    pub user_version: i64,
    pub group_version: i64,
}

impl Standing {
    /// Whether credentials made with these claims versions still reflect the user's privileges.
    pub fn admits(&self, user_version: i64, group_version: i64) -> bool {
        user_version >= self.user_version && group_version >= self.group_version
    }
}

/// The user's ban and the user's and the group's claims versions, in one round trip.
pub async fn standing(store: &dyn KvStore, user: UserId, group: impl Display) -> ServiceResult<Standing> {
    let keys = [ban_key(user), user_version_key(user), group_version_key(group)];
    let values = store.get_many(&keys).await?;
    let number = |i: usize| values.get(i).and_then(|v| v.as_deref()).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
    let ban = values.first().and_then(|v| v.as_deref());
    Ok(Standing {
        banned: ban.is_some(),
        deleted: ban == Some(DELETED),
        user_version: number(1),
        group_version: number(2),
    })
}

/// Refuses every token of the user at once.
pub async fn ban(store: &dyn KvStore, user: UserId) -> ServiceResult<()> {
    store.set(&ban_key(user), "1", Some(ENTRY_LIFETIME)).await?;
    Ok(())
}

/// Refuses every token of a user being deleted at once, as [`ban`] does, but answered as the
/// deletion it is (401 `auth.user_not_found`, as a guard that reads the database would say).
pub async fn deleted(store: &dyn KvStore, user: UserId) -> ServiceResult<()> {
    store.set(&ban_key(user), DELETED, Some(ENTRY_LIFETIME)).await?;
    Ok(())
}

/// Whether the user is banned (or deleted) right now (for credentials checked without a token: WebDAV).
pub async fn is_banned(store: &dyn KvStore, user: UserId) -> ServiceResult<bool> {
    Ok(store.get(&ban_key(user)).await?.is_some())
}

/// Lifts a ban: tokens issued before it work again until they expire, unless a change of
/// privileges made them stale meanwhile (that entry is kept).
pub async fn unban(store: &dyn KvStore, user: UserId) -> ServiceResult<()> {
    store.delete(&ban_key(user)).await?;
    Ok(())
}

/// Moves a version entry forward to `version`, never back.
async fn raise_version(store: &dyn KvStore, key: &str, version: i64) -> ServiceResult<()> {
    let current = store.get(key).await?.and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
    if version > current {
        store.set(key, &version.to_string(), Some(ENTRY_LIFETIME)).await?;
    }
    Ok(())
}

/// Refuses the user's access tokens issued before the move to another group recorded as
/// `version` (they must refresh to get the claims of the new group).
pub async fn user_claims_changed(store: &dyn KvStore, user: UserId, version: i64) -> ServiceResult<()> {
    raise_version(store, &user_version_key(user), version).await
}

/// Refuses the access tokens issued to members of the group before the change recorded as
/// `version`.
pub async fn group_claims_changed(store: &dyn KvStore, group: impl Display, version: i64) -> ServiceResult<()> {
    raise_version(store, &group_version_key(group), version).await
}

/// Checks the token against the store: 401 when its user was deleted, 403 when banned, 401
/// when it was issued before a change of the user's privileges.
pub async fn check(store: &dyn KvStore, claims: &JwtPayload) -> ServiceResult<()> {
    let standing = standing(store, claims.sub, claims.group.id).await?;
    if standing.deleted {
        return Err(ServiceError::user_not_found());
    }
    if standing.banned {
        return Err(ServiceError::user_inactive());
    }
    if !standing.admits(claims.user_version, claims.group.version) {
        return Err(ServiceError::token_revoked("token was revoked: refresh or sign in again"));
    }
    Ok(())
}

/// Signs `user` out everywhere (a new password, a reset): every refresh token is revoked and
/// the user's claims version moves forward, in the database and in the store, so every access
/// token and WOPI token issued before is refused at once.
pub async fn end_sessions(db: &Db, store: &dyn KvStore, user: UserId) -> ServiceResult<()> {
    let now = now_ms();
    db::refresh_tokens::revoke_user(db, user, now).await?;
    let version = db::users::raise_claims_version(db, user, now).await?;
    user_claims_changed(store, user, version).await
}

/// Re-creates the entries of bans and privilege changes made within an access-token lifetime,
/// so a master restarted with the in-memory store forgets none of them.
pub async fn restore(db: &Db, store: &dyn KvStore) -> ServiceResult<usize> {
    let since = now_ms() - ENTRY_LIFETIME.as_millis() as i64;
    let banned = db::users::inactive_changed_since(db, since).await?;
    for id in &banned {
        ban(store, *id).await?;
    }
    let users = db::users::claims_changed_since(db, since).await?;
    for (id, at) in &users {
        user_claims_changed(store, *id, *at).await?;
    }
    let groups = db::groups::claims_changed_since(db, since).await?;
    for (id, at) in &groups {
        group_claims_changed(store, id, *at).await?;
    }
    Ok(banned.len() + users.len() + groups.len())
}
