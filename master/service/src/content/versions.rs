//! File versions: the earlier contents a file keeps when its content is replaced (by any write
//! path: `PATCH /file/content`, WebDAV `PUT`, WOPI `PutFile`, an upload over the file), listed,
//! downloaded, restored (the current content becomes a version) and deleted; and the periodic
//! pruning to each group's retention. Versions hold references to their blobs, so identical
//! contents share one blob, and their bytes count in the owner's used storage.

use nubo_model::db::{self, DbError};
use nubo_model::domain::ids::{ObjectId, UserId};
use nubo_model::domain::time::{Millis, now_ms, to_rfc3339};
use serde::Serialize;
use utoipa::ToSchema;

use crate::content::downloads::{self, DownloadTokenView, expect_file};
use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::tree::access::{self, Reach};
use crate::tree::files::{self, ObjectView};

/// Versions pruned per statement batch of the retention job.
const PRUNE_BATCH: i64 = 500;

/// One earlier content of a file.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VersionView {
    pub id: String,
    pub size: i64,
    /// BLAKE3 of the content, hex.
    pub blake3: Option<String>,
    /// When this content was written.
    pub created_at: String,
    /// When newer content took its place.
    pub replaced_at: String,
}

fn view(row: db::versions::VersionRow) -> VersionView {
    VersionView {
        id: row.id,
        size: row.size,
        blake3: row.blake3,
        created_at: to_rfc3339(row.created_at),
        replaced_at: to_rfc3339(row.replaced_at),
    }
}

pub fn not_found() -> ServiceError {
    ServiceError::not_found(codes::VERSION_NOT_FOUND, "the file has no such version")
}

/// The versions of the caller's file `object_id` (also in the trash), newest first.
pub async fn list(ctx: &Context, caller: UserId, object_id: ObjectId) -> ServiceResult<Vec<VersionView>> {
    let file = access::readable(ctx, caller, object_id, Reach::Any).await?;
    expect_file(file.row())?;
    Ok(db::versions::list(ctx.db(), file.row().id).await?.into_iter().map(view).collect())
}

/// A single-use download token for version `version` of the caller's live file.
pub async fn download(
    ctx: &Context,
    caller: UserId,
    object_id: ObjectId,
    version: &str,
) -> ServiceResult<DownloadTokenView> {
    let file = access::readable(ctx, caller, object_id, Reach::Live).await?;
    expect_file(file.row())?;
    db::versions::find(ctx.db(), file.row().id, version).await?.ok_or_else(not_found)?;
    downloads::create_version_download_token(ctx, &file, version)
}

/// Makes version `version` the file's content again; the current content becomes a version in
/// the same transaction. The used storage does not change (both contents stay counted). Of a
/// restore and another write that overlap, the second to finish answers 409 `object.changed`.
pub async fn restore(ctx: &Context, caller: UserId, object_id: ObjectId, version: &str) -> ServiceResult<ObjectView> {
    let file = access::writable(ctx, caller, object_id, Reach::Live).await?;
    let row = file.row();
    expect_file(row)?;
    let current_blob =
        row.physical_file_id.clone().ok_or_else(|| ServiceError::internal(anyhow::anyhow!("file without blob")))?;
    let restored = db::versions::find(ctx.db(), row.id, version).await?.ok_or_else(not_found)?;
    let now = now_ms();
    let mut tx = ctx.db().begin().await?;
    // The version first: a restore racing a deletion of the same version finds it gone.
    if db::versions::delete(&mut tx, row.id, version).await?.is_none() {
        return Err(not_found());
    }
    let swapped =
        db::versions::swap_content(&mut tx, row.id, (&current_blob, row.size), (&restored.blob_id, restored.size), now)
            .await?;
    if !swapped {
        return Err(changed());
    }
    db::versions::insert(&mut tx, row.id, &current_blob, row.size, row.updated_at, now).await?;
    tx.commit().await.map_err(DbError::from)?;
    files::view_now(ctx.db(), file.as_readable()).await
}

/// Deletes version `version` of the caller's file: its bytes no longer count, and its blob is
/// deleted when this was its last reference.
pub async fn delete(ctx: &Context, caller: UserId, object_id: ObjectId, version: &str) -> ServiceResult<()> {
    let file = access::writable(ctx, caller, object_id, Reach::Any).await?;
    expect_file(file.row())?;
    let mut tx = ctx.db().begin().await?;
    let (blob, size) = db::versions::delete(&mut tx, file.row().id, version).await?.ok_or_else(not_found)?;
    let refs = db::blobs::add_refs(&mut tx, &blob, -1).await?;
    db::users::release_storage(&mut tx, file.row().owner_id, size).await?;
    tx.commit().await.map_err(DbError::from)?;
    if refs == 0 {
        files::release_blobs(ctx, &[blob]).await;
    }
    Ok(())
}

/// Deletes the versions past their group's retention at `now` (the periodic job); answers how
/// many went.
pub async fn prune(ctx: &Context, now: Millis) -> ServiceResult<usize> {
    let mut pruned = 0;
    loop {
        let expired = db::versions::expired(ctx.db(), now, PRUNE_BATCH).await?;
        if expired.is_empty() {
            return Ok(pruned);
        }
        let mut orphans = Vec::new();
        let mut tx = ctx.db().begin().await?;
        for version in &expired {
            // Deleted meanwhile by its owner: nothing to give back twice.
            let Some((blob, size)) = db::versions::delete(&mut tx, version.object_id, &version.id).await? else {
                continue;
            };
            if db::blobs::add_refs(&mut tx, &blob, -1).await? == 0 {
                orphans.push(blob);
            }
            db::users::release_storage(&mut tx, version.owner_id, size).await?;
            pruned += 1;
        }
        tx.commit().await.map_err(DbError::from)?;
        files::release_blobs(ctx, &orphans).await;
        if (expired.len() as i64) < PRUNE_BATCH {
            return Ok(pruned);
        }
    }
}

fn changed() -> ServiceError {
    ServiceError::new(
        ErrorKind::Conflict,
        codes::OBJECT_CHANGED,
        "the file was changed or removed meanwhile; look at its versions again",
    )
}
