//! Housekeeping the periodic jobs run: collecting unreferenced blobs, purging trash past its
//! group's retention, and deleting refresh tokens that can no longer be used. Each takes the
//! time to act as of, so tests can drive them explicitly.

use std::time::Duration;

use nubo_common::storage::StorageKey;

use crate::app::AppState;
use crate::db::{self};
use crate::domain::time::Millis;
use crate::service::{ServiceError, ServiceResult, files, policies};

/// How old an unreferenced blob must be before it is collected: long enough that a copy in
/// progress (whose journal row has no reference yet) is never taken.
pub const BLOB_GRACE: Duration = Duration::from_secs(6 * 3600);

/// Deletes blobs without references created before `now - grace` (interrupted migrations,
/// deletions that failed), bytes first, then rows. Answers how many were collected.
pub async fn collect_blobs(ctx: &AppState, now: Millis, grace: Duration) -> ServiceResult<usize> {
    let mut collected = 0;
    loop {
        let blobs = db::blobs::unreferenced_before(ctx.db(), now - grace.as_millis() as i64, 100).await?;
        if blobs.is_empty() {
            return Ok(collected);
        }
        for blob in &blobs {
            let policy = policies::find(ctx.db(), files::parse_uuid(&blob.policy_id)?).await?;
            let store = ctx.storage().store(&policy).map_err(ServiceError::internal)?;
            store.delete(&StorageKey::parse(&blob.storage_key)?).await?;
            let mut conn = ctx.db().writer().acquire().await.map_err(db::DbError::from)?;
            if db::blobs::delete_unreferenced(&mut conn, &blob.id).await? {
                collected += 1;
            }
        }
    }
}

/// Deletes for good what has been in the trash longer than its owner's group keeps it.
pub async fn purge_expired_trash(ctx: &AppState, now: Millis) -> ServiceResult<usize> {
    let expired = db::objects::expired_trash(ctx.db(), now, 500).await?;
    let mut purged = 0;
    for (owner, id) in expired {
        let ids = [files::parse_uuid(&id)?];
        match files::purge(ctx, files::parse_uuid(&owner)?, &ids).await {
            Ok(()) => purged += 1,
            // An upload into the folder is still running: try again next time.
            Err(err) => tracing::info!(object = %id, error = %err, "trash purge postponed"),
        }
    }
    Ok(purged)
}

/// Deletes refresh tokens that expired, or were retired or revoked more than a day ago (reuse
/// detection needs the retired ones for a while).
pub async fn clean_refresh_tokens(ctx: &AppState, now: Millis) -> ServiceResult<u64> {
    Ok(db::refresh_tokens::delete_dead(ctx.db(), now, now - 86_400_000).await?)
}
