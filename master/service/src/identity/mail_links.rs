//! Use cases that mail a link carrying a single-use token (`identity::mailed_token`): the magic
//! sign-in link, the password reset (asking for it, then choosing the new password) and the
//! verification of a new account's address. Asking answers the same whether or not the address
//! has an account, and the mail leaves in the background, so neither the answer nor its timing
//! tells who has one.

use std::net::IpAddr;

use nubo_common::secret::Secret;
use nubo_model::db;
use nubo_model::db::users::UserRow;
use nubo_model::domain::settings::AuthMethod;
use nubo_model::domain::time::now_ms;
use nubo_model::domain::user::{Email, UserStatus};

use crate::context::Context;
use crate::credentials::password::{check_password_rules, hash_password};
use crate::credentials::revocation;
use crate::error::{ServiceError, ServiceResult};
use crate::identity::accounts::password_error;
use crate::identity::mailed_token::{self, Purpose};
use crate::identity::providers::password::EMAIL_PASSWORD;
use crate::settings::mail::{self, Language, Mailer, Template};
use crate::{identity::sign_in, settings::site};

/// The web app's pages the links open (see web/src/lib/router.svelte.ts).
const MAGIC_LINK_PAGE: &str = "/login/magic";
const RESET_PAGE: &str = "/reset";
const VERIFY_PAGE: &str = "/verify";

/// The address asked for, counted against its budget (counted also for unknown addresses).
async fn recipient(ctx: &Context, email: &str, address: IpAddr) -> ServiceResult<Email> {
    sign_in::limit_mail_requests(ctx, address).await?;
    let email = Email::parse(email).map_err(|why| ServiceError::validation("email", why))?;
    sign_in::limit_recipient(ctx, &email).await?;
    Ok(email)
}

/// The active account of `email`, if there is one.
async fn active_user(ctx: &Context, email: &Email) -> ServiceResult<Option<UserRow>> {
    let user = db::users::find_by_email(ctx.db(), email.as_str()).await?;
    Ok(user.filter(|user| user.status == UserStatus::Active))
}

/// Mails `user` a link to `page` with a new token for `purpose`. The token is stored before
/// this returns; the mail is sent in the background and a failure only logged, so the answer
/// is the same whether a mail leaves or not.
async fn mail_link(ctx: &Context, user: &UserRow, purpose: Purpose, page: &str) -> ServiceResult<()> {
    let Ok(to) = mail::recipient(&user.email) else {
        tracing::warn!(user = %user.id, "the account's e-mail address cannot receive mail");
        return Ok(());
    };
    let token = mailed_token::issue(ctx.store(), purpose, user.id).await?;
    let link = format!("{}{page}?token={token}", site::link_base(ctx).await?);
    let site_name = site::current(ctx).await?.site_name.clone();
    let lifetime = purpose.lifetime().as_secs();
    let template = match purpose {
        Purpose::MagicLink => Template::MagicLink,
        Purpose::PasswordReset => Template::PasswordReset,
        Purpose::VerifyEmail => Template::VerifyEmail,
    };
    let values = [
        ("site_name", site_name.as_str()),
        ("link", link.as_str()),
        ("minutes", &(lifetime / 60).to_string()),
        ("hours", &(lifetime / 3600).to_string()),
        ("email", user.email.as_str()),
    ];
    let rendered = mail::render(template, Language::for_tag(&user.language), &values);
    let (ctx, user_id) = (ctx.clone(), user.id);
    // One send, finished or failed within the SMTP timeout; nothing waits for it.
    tokio::spawn(async move {
        let sent = match Mailer::from_settings(&ctx).await {
            Ok(mailer) => mailer.send(to, rendered).await,
            Err(err) => Err(err),
        };
        match sent {
            Ok(()) => tracing::info!(user = %user_id, ?purpose, "mailed a link"),
            Err(err) => tracing::warn!(user = %user_id, ?purpose, %err, "a link could not be mailed"),
        }
    });
    Ok(())
}

/// Mails a sign-in link to the address, when an active account has it. Only while
/// `magic_link` is in `auth_methods`.
pub async fn request_magic_link(ctx: &Context, email: &str, address: IpAddr) -> ServiceResult<()> {
    site::require_method(ctx, AuthMethod::MagicLink).await?;
    let email = recipient(ctx, email, address).await?;
    if let Some(user) = active_user(ctx, &email).await? {
        mail_link(ctx, &user, Purpose::MagicLink, MAGIC_LINK_PAGE).await?;
    }
    Ok(())
}

/// Mails a password reset link to the address, when an active account signs in with it and a
/// password. Only while `email_password` is in `auth_methods`.
pub async fn request_password_reset(ctx: &Context, email: &str, address: IpAddr) -> ServiceResult<()> {
    site::require_method(ctx, AuthMethod::EmailPassword).await?;
    let email = recipient(ctx, email, address).await?;
    let Some(user) = active_user(ctx, &email).await? else { return Ok(()) };
    if db::users::credential_of(ctx.db(), user.id, EMAIL_PASSWORD).await?.is_some() {
        mail_link(ctx, &user, Purpose::PasswordReset, RESET_PAGE).await?;
    }
    Ok(())
}

/// Sets the password of the account the reset token was mailed to and signs out all its
/// sessions (refresh tokens are revoked; access and WOPI tokens issued before are refused). The password is checked before the token is
/// spent, so a too short one can be corrected with the same link.
pub async fn reset_password(ctx: &Context, token: &str, password: &Secret, address: IpAddr) -> ServiceResult<()> {
    sign_in::limit_mail_requests(ctx, address).await?;
    check_password_rules(password).map_err(|e| password_error("password", e))?;
    let user_id = mailed_token::redeem(ctx.store(), Purpose::PasswordReset, token).await?;
    let hash = hash_password(password).await.map_err(|e| password_error("password", e))?;
    if !db::users::set_credential(ctx.db(), user_id, EMAIL_PASSWORD, &hash).await? {
        return Err(ServiceError::internal(anyhow::anyhow!("user {user_id} lost its password identity")));
    }
    revocation::end_sessions(ctx.db(), ctx.store(), user_id).await?;
    Ok(())
}

/// Mails a newly registered (still `INACTIVE`) account the link that activates it.
pub async fn send_verification(ctx: &Context, user: &UserRow) -> ServiceResult<()> {
    mail_link(ctx, user, Purpose::VerifyEmail, VERIFY_PAGE).await
}

/// Activates the account the verification token was mailed to (a banned account stays banned).
pub async fn verify_email(ctx: &Context, token: &str, address: IpAddr) -> ServiceResult<()> {
    sign_in::limit_mail_requests(ctx, address).await?;
    let user_id = mailed_token::redeem(ctx.store(), Purpose::VerifyEmail, token).await?;
    if db::users::activate_inactive(ctx.db(), user_id, now_ms()).await? {
        // Start-up restores bans for every non-active account; this one is welcome now.
        revocation::unban(ctx.store(), user_id).await?;
    }
    Ok(())
}
