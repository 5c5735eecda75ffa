//! Single-use tokens sent by mail: magic links, password resets and address verification.
//! A token is 32 random bytes (base64url); the store keeps only its BLAKE3 hash, under its
//! purpose and for its lifetime, and `take`s it on use so exactly one use wins, on any master.
//! A used token's hash is remembered until the token would have expired, so a second use is
//! told apart (409, "already used") from a token that is unknown or expired (401).

use std::time::Duration;

use base64::Engine;
use nubo_model::domain::ids::UserId;
use nubo_model::domain::time::now_ms;
use nubo_model::kv::KvStore;

use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;

/// What a mailed token allows; each purpose has its own key space, lifetime and codes, so a
/// token mailed for one can never serve another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    MagicLink,
    PasswordReset,
    VerifyEmail,
}

impl Purpose {
    fn key(self) -> &'static str {
        match self {
            Purpose::MagicLink => "magic_link",
            Purpose::PasswordReset => "password_reset",
            Purpose::VerifyEmail => "verify_email",
        }
    }

    /// How long a mailed token works: sign-in links briefly, a verification for a day (the
    /// mail may be read later).
    pub fn lifetime(self) -> Duration {
        match self {
            Purpose::MagicLink => Duration::from_secs(15 * 60),
            Purpose::PasswordReset => Duration::from_secs(30 * 60),
            Purpose::VerifyEmail => Duration::from_secs(24 * 60 * 60),
        }
    }

    fn invalid(self) -> ServiceError {
        let (code, message) = match self {
            Purpose::MagicLink => {
                (codes::AUTH_MAGIC_LINK_INVALID, "this sign-in link is unknown or expired: ask for a new one")
            }
            Purpose::PasswordReset => {
                (codes::AUTH_RESET_TOKEN_INVALID, "this password reset link is unknown or expired: ask for a new one")
            }
            Purpose::VerifyEmail => (codes::AUTH_VERIFY_TOKEN_INVALID, "this verification link is unknown or expired"),
        };
        ServiceError::new(ErrorKind::Unauthorized, code, message)
    }

    fn used(self) -> ServiceError {
        let (code, message) = match self {
            Purpose::MagicLink => {
                (codes::AUTH_MAGIC_LINK_USED, "this sign-in link was already used: ask for a new one")
            }
            Purpose::PasswordReset => {
                (codes::AUTH_RESET_TOKEN_USED, "this password reset link was already used: ask for a new one")
            }
            Purpose::VerifyEmail => (codes::AUTH_VERIFY_TOKEN_USED, "this address is already verified: sign in"),
        };
        ServiceError::conflict(code, message)
    }
}

/// The hash a token is stored under; the token itself is known only to the mail's reader.
fn digest(token: &str) -> String {
    blake3::hash(token.as_bytes()).to_hex().to_string()
}

fn live_key(purpose: Purpose, digest: &str) -> String {
    format!("mail_token:{}:{digest}", purpose.key())
}

fn used_key(purpose: Purpose, digest: &str) -> String {
    format!("mail_token_used:{}:{digest}", purpose.key())
}

/// A new token for `user`, stored (hashed) for the purpose's lifetime.
pub async fn issue(store: &dyn KvStore, purpose: Purpose, user: UserId) -> ServiceResult<String> {
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
    let lifetime = purpose.lifetime();
    let expires_at = now_ms() + lifetime.as_millis() as i64;
    store.set(&live_key(purpose, &digest(&token)), &format!("{user} {expires_at}"), Some(lifetime)).await?;
    Ok(token)
}

/// Why a token is not live: used before (until its expiry) or unknown.
async fn refusal(store: &dyn KvStore, purpose: Purpose, digest: &str) -> ServiceResult<ServiceError> {
    let used = store.get(&used_key(purpose, digest)).await?.is_some();
    Ok(if used { purpose.used() } else { purpose.invalid() })
}

/// The user and expiry (ms) of a stored token's value.
fn parse_value(value: &str) -> ServiceResult<(UserId, i64)> {
    let (user, expires_at) = value.split_once(' ').unwrap_or((value, "0"));
    Ok((user.parse().map_err(ServiceError::internal)?, expires_at.parse::<i64>().unwrap_or(0)))
}

/// The user a live token was issued to, leaving it live: a sign-in that still asks for the
/// account's second factor must not use up the link.
pub async fn peek(store: &dyn KvStore, purpose: Purpose, token: &str) -> ServiceResult<UserId> {
    let digest = digest(token);
    match store.get(&live_key(purpose, &digest)).await? {
        Some(value) => Ok(parse_value(&value)?.0),
        None => Err(refusal(store, purpose, &digest).await?),
    }
}

/// The user a token was issued to, once: the token is gone afterwards.
pub async fn redeem(store: &dyn KvStore, purpose: Purpose, token: &str) -> ServiceResult<UserId> {
    let digest = digest(token);
    let Some(value) = store.take(&live_key(purpose, &digest)).await? else {
        return Err(refusal(store, purpose, &digest).await?);
    };
    let (user, expires_at) = parse_value(&value)?;
    let remaining = expires_at - now_ms();
    if remaining > 0 {
        let remaining = Duration::from_millis(remaining as u64);
        store.set(&used_key(purpose, &digest), "1", Some(remaining)).await?;
    }
    Ok(user)
}

#[cfg(test)]
mod tests {
    use nubo_model::kv::MemoryStore;

    use super::*;

    #[tokio::test]
    async fn a_token_is_redeemed_once_and_only_for_its_purpose() {
        let store = MemoryStore::new();
        let user = UserId::random();
        let token = issue(&store, Purpose::MagicLink, user).await.unwrap();
        assert_eq!(token.len(), 43, "32 bytes, base64url without padding");

        let wrong = redeem(&store, Purpose::PasswordReset, &token).await.unwrap_err();
        assert_eq!(wrong.code, codes::AUTH_RESET_TOKEN_INVALID);
        assert_eq!(redeem(&store, Purpose::MagicLink, &token).await.unwrap(), user);
        let again = redeem(&store, Purpose::MagicLink, &token).await.unwrap_err();
        assert_eq!((again.kind, again.code.as_ref()), (ErrorKind::Conflict, codes::AUTH_MAGIC_LINK_USED));
        let unknown = redeem(&store, Purpose::MagicLink, "nonsense").await.unwrap_err();
        assert_eq!((unknown.kind, unknown.code.as_ref()), (ErrorKind::Unauthorized, codes::AUTH_MAGIC_LINK_INVALID));
    }

    #[tokio::test]
    async fn only_the_hash_is_stored() {
        let store = MemoryStore::new();
        let token = issue(&store, Purpose::VerifyEmail, UserId::random()).await.unwrap();
        assert!(store.get(&live_key(Purpose::VerifyEmail, &token)).await.unwrap().is_none());
        assert!(store.get(&live_key(Purpose::VerifyEmail, &digest(&token))).await.unwrap().is_some());
    }
}
