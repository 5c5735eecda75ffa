//! Media URLs: a signed URL of one file's current content that a player may use for every
//! ranged request it makes while it seeks, bound to one user (or one share's visitors) and
//! checked again on each request. The single-use download token stays as it is.

use std::time::Duration;

use nubo_model::domain::time::{now_ms, to_rfc3339};
use serde::Serialize;
use utoipa::ToSchema;

use crate::content::downloads::{self, Download, expect_file};
use crate::context::Context;
use crate::credentials::token::{MediaClaims, TokenType, token_error};
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::identity::accounts;
use crate::sharing::shares;
use crate::tree::access::{self, Grant, Reach, Readable};

/// How long a media URL works: long enough for a film, short enough that a leaked one ends.
pub const MEDIA_URL_LIFETIME: Duration = Duration::from_secs(4 * 3600);

/// A media URL and when it ends.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MediaUrlView {
    /// `GET` this (relative to the site) as often as needed, with `Range`, until `expires`.
    pub url: String,
    pub expires: String,
}

fn content_changed() -> ServiceError {
    ServiceError::new(
        ErrorKind::Gone,
        codes::MEDIA_CONTENT_CHANGED,
        "the file's content changed since this media URL was made: ask for a new one",
    )
}

/// A media URL for a live file the holder of `file` may read: its owner, or a share's visitor
/// (the share must allow previews, and making the URL counts one download of the share).
pub async fn create(ctx: &Context, file: &Readable) -> ServiceResult<MediaUrlView> {
    expect_file(file.row())?;
    let blob = file
        .row()
        .physical_file_id
        .clone()
        .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("file without blob")))?;
    let (sub, shr, user_version) = match file.grant() {
        Grant::Owner(owner) => (owner, None, accounts::load_active_user(ctx, owner).await?.row().claims_changed_at),
        Grant::Share(share) => {
            shares::previewable(ctx, share, file.id(), true).await?;
            (file.row().owner_id, Some(share), 0)
        }
    };
    let now = now_ms() / 1000;
    let exp = now + MEDIA_URL_LIFETIME.as_secs() as i64;
    let claims = MediaClaims { sub, obj: file.id(), shr, blob, user_version, iat: now, exp, typ: TokenType::Media };
    Ok(MediaUrlView { url: (ctx.links().media)(&ctx.tokens().sign(&claims)), expires: to_rfc3339(exp * 1000) })
}

/// Opens the file a media URL names, checking everything again: a ban, a sign-out everywhere,
/// a deactivated owner, a share deleted, expired or with previews turned off, the file
/// trashed, moved out of the share or given new content each end the URL at once.
pub async fn open(ctx: &Context, token: &str) -> ServiceResult<Download> {
    let claims = ctx.tokens().verify_media(token).map_err(token_error)?;
    let file = match claims.shr {
        Some(share) => shares::previewable(ctx, share, claims.obj, false).await?,
        None => {
            accounts::credential_holder(ctx, claims.sub, claims.user_version).await?;
            access::readable(ctx, claims.sub, claims.obj, Reach::Live).await?
        }
    };
    if file.row().physical_file_id.as_deref() != Some(claims.blob.as_str()) {
        return Err(content_changed());
    }
    downloads::open_readable(ctx, &file).await
}
