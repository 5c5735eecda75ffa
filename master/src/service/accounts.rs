//! Accounts: creating users with their first credential.

use nubo_common::secret::Secret;
use uuid::Uuid;

use crate::auth::password::{PasswordError, hash_password};
use crate::db::{self, Db, DbError};
use crate::domain::time::now_ms;
use crate::domain::user::{Email, UserStatus};
use crate::service::{ErrorKind, ServiceError, ServiceResult};

/// Provider name of e-mail-and-password credentials in `auth_identities`.
pub const EMAIL_PASSWORD: &str = "email_password";

/// Creates an active administrator with an e-mail-and-password credential; answers its id.
pub async fn create_admin(db: &Db, email: &str, password: &Secret) -> ServiceResult<Uuid> {
    let email = Email::parse(email).map_err(|why| ServiceError::validation("email", why))?;
    let group = db::groups::first_admin_group(db).await?.ok_or_else(|| {
        ServiceError::internal(anyhow::anyhow!("no administrators' group exists"))
    })?;
    let hash = hash_password(password).await.map_err(|e| match e {
        PasswordError::Length => ServiceError::validation("password", e.to_string()),
        PasswordError::Hash(_) => ServiceError::internal(e),
    })?;
    let user_id = Uuid::new_v4();
    let nickname = email
        .as_str()
        .split('@')
        .next()
        .unwrap_or("admin")
        .to_owned();
    let user = db::users::NewUser {
        id: &user_id.to_string(),
        email: email.as_str(),
        nickname: &nickname,
        status: UserStatus::Active.as_str(),
        group_id: &group.id,
    };
    let identity = db::users::NewIdentity {
        id: &Uuid::new_v4().to_string(),
        provider: EMAIL_PASSWORD,
        identifier: email.as_str(),
        credential: Some(&hash),
    };
    match db::users::insert_with_identity(db, &user, &identity, now_ms()).await {
        Ok(()) => Ok(user_id),
        Err(DbError::Sqlx(e)) if db::is_unique_violation(&e) => Err(ServiceError::new(
            ErrorKind::Conflict,
            "user.email_taken",
            format!("an account with the e-mail address {email} already exists"),
        )
        .with_field("email")),
        Err(e) => Err(e.into()),
    }
}
