//! The magic-link provider: the token from a mailed sign-in link identifies its user, once.
//! Mailing the link is `service::mail_links`; the token's storage is `auth::mailed_token`.

use crate::auth::mailed_token::{self, Purpose};
use crate::context::Context;
use crate::domain::ids::UserId;
use crate::error::ServiceResult;

/// The user the sign-in link was mailed to; the token is used up by this call.
pub async fn identify(ctx: &Context, token: &str) -> ServiceResult<UserId> {
    mailed_token::redeem(ctx.store(), Purpose::MagicLink, token).await
}
