//! The magic-link provider: the token from a mailed sign-in link identifies its user, once.
//! Mailing the link is `service::identity::mail_links`; the token's storage is `identity::mailed_token`.

use nubo_model::domain::ids::UserId;

use crate::context::Context;
use crate::error::{ServiceError, ServiceResult};
use crate::identity::mailed_token::{self, Purpose};

/// The user the sign-in link was mailed to. The token stays live: [`use_up`] spends it once
/// the sign-in passed every other check (the account's second factor may still be asked for).
pub async fn identify(ctx: &Context, token: &str) -> ServiceResult<UserId> {
    mailed_token::peek(ctx.store(), Purpose::MagicLink, token).await
}

/// Spends the token for `user`'s sign-in; of two sign-ins racing with one link, one wins.
pub async fn use_up(ctx: &Context, token: &str, user: UserId) -> ServiceResult<()> {
    let redeemed = mailed_token::redeem(ctx.store(), Purpose::MagicLink, token).await?;
    if redeemed != user {
        return Err(ServiceError::internal(anyhow::anyhow!("a sign-in link changed hands while it was used")));
    }
    Ok(())
}
