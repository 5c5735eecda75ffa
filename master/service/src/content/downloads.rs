//! Bytes out: single-use download tokens, permanent source links, and opening a file's
//! content to serve it (a stream from its store, or a redirect to a presigned URL: the store's
//! own, or for local disk a signed blob URL of the master's).

use nubo_model::db::objects::ObjectRow;
use nubo_model::db::{self};
use nubo_model::domain::ids::{ObjectId, UserId};
use nubo_model::domain::time::{Millis, now_ms, to_rfc3339};

use crate::context::Context;
use crate::credentials::token::token_error;
use crate::credentials::token::{BlobClaims, DownloadClaims, TokenType};
use crate::error::{ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::tree::access::{self, Grant, Reach, Readable, Writable};
use crate::tree::files::{self, PathEntry};
use crate::{identity::accounts, sharing::shares, storage::policies};
use nubo_common::storage::{BlobStore, StorageKey};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;
use utoipa::ToSchema;
use uuid::Uuid;

/// Lifetime of a download token (the interface leaves it open): one hour to start using it.
pub const DOWNLOAD_TOKEN_LIFETIME: Duration = Duration::from_secs(3600);
/// Lifetime of the presigned URL a redirect points at.
const REDIRECT_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// A download token and where to use it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DownloadTokenView {
    /// A JWT valid for one download.
    pub access_token: String,
    /// `GET` this (relative to the site) to download.
    pub url: String,
    pub expires: String,
}

/// A file ready to be served: either a stream from its store or a redirect elsewhere.
pub struct Download {
    pub name: String,
    pub size: u64,
    pub blake3: Option<String>,
    pub updated_at: Millis,
    pub store: Arc<dyn BlobStore>,
    pub key: StorageKey,
    /// Set when the policy is public and its store can hand out a direct URL.
    pub redirect: Option<String>,
}

fn not_a_file() -> ServiceError {
    ServiceError::conflict(codes::OBJECT_NOT_A_FILE, "the object is a folder, not a file")
}

pub(crate) fn expect_file(row: &ObjectRow) -> ServiceResult<()> {
    if row.is_folder() { Err(not_a_file()) } else { Ok(()) }
}

/// A single-use token to download a live file ([`Reach::Live`]) for whoever holds the handle:
/// its owner, or a visitor of the share it was reached through. Using the token checks that
/// access again (and counts a share's download).
pub async fn create_download_token(ctx: &Context, file: &Readable) -> ServiceResult<DownloadTokenView> {
    download_token(ctx, file, None)
}

/// A single-use token to download version `version` of a file (the caller found it).
pub fn create_version_download_token(
    ctx: &Context,
    file: &Readable,
    version: &str,
) -> ServiceResult<DownloadTokenView> {
    download_token(ctx, file, Some(version.to_owned()))
}

fn download_token(ctx: &Context, file: &Readable, ver: Option<String>) -> ServiceResult<DownloadTokenView> {
    expect_file(file.row())?;
    let now = now_ms() / 1000;
    let exp = now + DOWNLOAD_TOKEN_LIFETIME.as_secs() as i64;
    let (sub, shr) = match file.grant() {
        Grant::Owner(owner) => (owner, None),
        Grant::Share(share) => (file.row().owner_id, Some(share)),
    };
    let claims =
        DownloadClaims { sub, jti: Uuid::new_v4(), obj: file.id(), shr, ver, iat: now, exp, typ: TokenType::Download };
    let token = ctx.tokens().sign(&claims);
    Ok(DownloadTokenView { url: (ctx.links().download)(&token), access_token: token, expires: to_rfc3339(exp * 1000) })
}

/// Opens the file a download token names. With `consume`, the token is spent: a second use
/// is refused, also on another master sharing the store. (`HEAD` does not consume it.)
pub async fn open_download(ctx: &Context, token: &str, consume: bool) -> ServiceResult<Download> {
    let claims = ctx.tokens().verify_download(token).map_err(token_error)?;
    if consume {
        let remaining = (claims.exp - now_ms() / 1000).max(1) as u64 + 60;
        let first = ctx
            .store()
            .set_if_absent(&format!("download-used:{}", claims.jti), "1", Duration::from_secs(remaining))
            .await?;
        if !first {
            return Err(ServiceError::conflict(codes::DOWNLOAD_TOKEN_USED, "this download link was already used"));
        }
    }
    // The caller must still be allowed in, and still reach the file, not in the trash; a share's
    // visitor, through a share that still serves it.
    let file = match claims.shr {
        Some(share) => shares::readable_for_download(ctx, share, claims.obj, consume).await?,
        None => {
            accounts::load_active_user(ctx, claims.sub).await?;
            access::readable(ctx, claims.sub, claims.obj, Reach::Live).await?
        }
    };
    match claims.ver {
        Some(version) => open_version(ctx, file.row(), &version).await,
        None => prepare(ctx, file.row()).await,
    }
}

/// The content of version `version` of the file `row`, under the file's name (never a
/// redirect: versions are not public); 404 when the version is gone.
pub async fn open_version(ctx: &Context, row: &ObjectRow, version: &str) -> ServiceResult<Download> {
    let version =
        db::versions::find(ctx.db(), row.id, version).await?.ok_or_else(crate::content::versions::not_found)?;
    let (blob, policy) = db::blobs::find_with_policy(ctx.db(), &version.blob_id)
        .await?
        .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("blob row missing")))?;
    let content = db::objects::FileContentRow { name: row.name.clone(), updated_at: version.created_at, blob, policy };
    serve_content(ctx, content, false).await
}

async fn prepare(ctx: &Context, row: &ObjectRow) -> ServiceResult<Download> {
    open_row(ctx, row, true).await
}

/// The current content of `file`, its access checked by the caller: a stream, or on a public
/// policy a redirect (as a download).
pub(crate) async fn open_readable(ctx: &Context, file: &Readable) -> ServiceResult<Download> {
    prepare(ctx, file.row()).await
}

/// The content of the file `file` streamed through the master, never a redirect (a WOPI
/// client fetches it server to server and need not follow one).
pub async fn open_streamed(ctx: &Context, file: &Readable) -> ServiceResult<Download> {
    open_row(ctx, file.row(), false).await
}

async fn open_row(ctx: &Context, row: &ObjectRow, may_redirect: bool) -> ServiceResult<Download> {
    expect_file(row)?;
    let blob_id =
        row.physical_file_id.as_deref().ok_or_else(|| ServiceError::internal(anyhow::anyhow!("file without blob")))?;
    let (blob, policy) = db::blobs::find_with_policy(ctx.db(), blob_id)
        .await?
        .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("blob row missing")))?;
    let content = db::objects::FileContentRow { name: row.name.clone(), updated_at: row.updated_at, blob, policy };
    serve_content(ctx, content, may_redirect).await
}

/// The file's content ready to serve. With `may_redirect`, a public policy answers a redirect:
/// to the backend when it can serve the bytes itself (S3, a storage node: `presigned_get`
/// answers a URL), else (local disk) to a signed blob URL of the master's, which serves them
/// without the caller's token for [`REDIRECT_LIFETIME`] (the interface: "is_private false:
/// downloads answer with a redirect"). Otherwise, and for a private policy, they stream
/// through the master.
async fn serve_content(
    ctx: &Context,
    content: db::objects::FileContentRow,
    may_redirect: bool,
) -> ServiceResult<Download> {
    let db::objects::FileContentRow { name, updated_at, blob, policy } = content;
    let store = policies::store(ctx, &policy).await?;
    let key = StorageKey::parse(&blob.storage_key)?;
    let redirect = if may_redirect && !policy.is_private {
        match store.presigned_get(&key, REDIRECT_LIFETIME, &name).await? {
            Some(url) => Some(url),
            None => Some(signed_blob_url(ctx, &blob.id, &name, updated_at)),
        }
    } else {
        None
    };
    Ok(Download { name, size: blob.size as u64, blake3: blob.blake3, updated_at, store, key, redirect })
}

/// A URL that serves blob `blob_id` as `name` to anyone for [`REDIRECT_LIFETIME`].
fn signed_blob_url(ctx: &Context, blob_id: &str, name: &str, modified: Millis) -> String {
    let now = now_ms() / 1000;
    let claims = BlobClaims {
        sub: blob_id.to_owned(),
        name: name.to_owned(),
        modified,
        iat: now,
        exp: now + REDIRECT_LIFETIME.as_secs() as i64,
        typ: TokenType::Blob,
    };
    (ctx.links().blob)(&ctx.tokens().sign(&claims))
}

/// Opens the blob a signed blob URL names, streamed (it is the redirect's target). Reusable
/// until it expires, as a presigned URL is (a client may resume with `Range`); 404 once the
/// blob has no file left.
pub async fn open_signed_blob(ctx: &Context, token: &str) -> ServiceResult<Download> {
    let claims = ctx.tokens().verify_blob(token).map_err(token_error)?;
    let gone = || ServiceError::not_found(codes::OBJECT_NOT_FOUND, "the file is gone");
    let (blob, policy) = db::blobs::find_with_policy(ctx.db(), &claims.sub).await?.ok_or_else(gone)?;
    if blob.ref_count <= 0 {
        return Err(gone());
    }
    let content = db::objects::FileContentRow { name: claims.name, updated_at: claims.modified, blob, policy };
    serve_content(ctx, content, false).await
}

/// The permanent source link of a file.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SourceLinkView {
    /// Public URL (relative to the site); works until the file is deleted.
    pub url: String,
    pub downloads: i64,
}

/// Creates the source link of a live file ([`Reach::Live`]), or answers the existing one.
pub async fn create_source_link(ctx: &Context, file: &Writable) -> ServiceResult<SourceLinkView> {
    expect_file(file.row())?;
    let row = file.row();
    db::objects::insert_source_link(ctx.db(), &Uuid::new_v4().to_string(), row.id, &row.name, now_ms()).await?;
    source_link(ctx, file.as_readable()).await
}

pub async fn source_link(ctx: &Context, file: &Readable) -> ServiceResult<SourceLinkView> {
    let row = file.row();
    let (_, downloads) = db::objects::source_link_of(ctx.db(), row.id)
        .await?
        .ok_or_else(|| ServiceError::not_found(codes::SOURCE_NOT_FOUND, "the file has no source link"))?;
    let downloads = downloads + ctx.source_downloads().pending(row.id);
    Ok(SourceLinkView { url: (ctx.links().source)(row.id, &row.name), downloads })
}

/// Opens a file through its public source link: the link is the grant, and anyone holding the
/// URL may read. The name in the URL must be the file's name; a trashed file, or one whose
/// owner is not active, is not served.
pub async fn open_source(ctx: &Context, object_id: ObjectId, name: &str) -> ServiceResult<Download> {
    let missing = || ServiceError::not_found(codes::SOURCE_NOT_FOUND, "no such source link");
    let content = db::objects::source_file_content(ctx.db(), object_id, name).await?.ok_or_else(missing)?;
    let download = serve_content(ctx, content, true).await?;
    ctx.source_downloads().add(object_id);
    Ok(download)
}

/// Writes down the source-link downloads counted since the last time (a periodic job, and at
/// shutdown). Answers how many links' counts were written; on failure they are kept for the
/// next time.
pub async fn flush_source_downloads(ctx: &Context) -> ServiceResult<usize> {
    let counts = ctx.source_downloads().take();
    if counts.is_empty() {
        return Ok(0);
    }
    let batch: Vec<(ObjectId, i64)> = counts.iter().map(|(id, count)| (*id, *count)).collect();
    if let Err(error) = db::objects::count_source_downloads(ctx.db(), &batch).await {
        ctx.source_downloads().restore(counts);
        return Err(error.into());
    }
    Ok(batch.len())
}

/// Opens live file `id` for reading through the master (an archive's entries): always a
/// stream, never a redirect; `None` when it is no longer a live file (trashed or deleted since
/// it was listed). Whose it is was decided before.
pub(crate) async fn open_live_file(ctx: &Context, id: ObjectId) -> ServiceResult<Option<Download>> {
    match db::objects::live_file_content(ctx.db(), id).await? {
        Some(content) => serve_content(ctx, content, false).await.map(Some),
        None => Ok(None),
    }
}

/// Opens a file `caller` found by a path walk (WebDAV) for reading through the master: always a
/// stream, never a redirect. One statement checks the file is still live and reads its blob
/// and policy; anything else (trashed since, a folder, gone) is not found.
pub async fn open_entry(ctx: &Context, caller: UserId, entry: &PathEntry) -> ServiceResult<Download> {
    access::entry_readable(caller, entry)?;
    let content = db::objects::live_file_content(ctx.db(), entry.id.into()).await?.ok_or_else(files::not_found)?;
    serve_content(ctx, content, false).await
}

/// A single-use download token for file `object_id` inside share `code`, for its visitor.
pub async fn share_download_token(
    ctx: &Context,
    code: &str,
    visitor: &shares::Visitor<'_>,
    object_id: ObjectId,
) -> ServiceResult<DownloadTokenView> {
    let share = shares::opened(ctx, code, visitor).await?;
    let file = shares::reach(&share, ctx, object_id).await?;
    create_download_token(ctx, &file).await
}
