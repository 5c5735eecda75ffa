//! The e-mail and password provider: the identity's argon2id hash, verified so that an unknown
//! address costs the same time as a wrong password.

use nubo_common::secret::Secret;
use nubo_model::db::{self, Db};
use nubo_model::domain::ids::UserId;
use nubo_model::domain::time::now_ms;
use nubo_model::domain::user::Email;

use crate::credentials::password::{generate_password, hash_password, verify_password};
use crate::error::{ServiceError, ServiceResult};

/// The provider's name in `auth_identities` and in the sign-in request.
pub const EMAIL_PASSWORD: &str = "email_password";

/// A hash of a password nobody knows, verified when the account does not exist so that a
/// missing account costs the same time as a wrong password.
pub async fn dummy_hash() -> ServiceResult<&'static str> {
    static DUMMY: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    DUMMY
        .get_or_try_init(|| async { hash_password(&generate_password()).await.map_err(ServiceError::internal) })
        .await
        .map(String::as_str)
}

/// The id of the user whose e-mail and password these are; `None` when there is no such
/// identity or the password is wrong (indistinguishable, also in time).
pub async fn identify(db: &Db, email: &Email, password: &Secret) -> ServiceResult<Option<UserId>> {
    let identity = db::users::find_identity(db, EMAIL_PASSWORD, email.as_str()).await?;
    let (user_id, stored) = match identity {
        Some((user_id, Some(hash))) => (Some(user_id), hash),
        _ => (None, dummy_hash().await?.to_owned()),
    };
    let verified = verify_password(password, &stored).await;
    Ok(user_id.filter(|_| verified))
}

/// Records that the identity was just used to sign in.
pub async fn mark_used(db: &Db, email: &Email) -> ServiceResult<()> {
    db::users::touch_identity(db, EMAIL_PASSWORD, email.as_str(), now_ms()).await?;
    Ok(())
}
