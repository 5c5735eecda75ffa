//! Housekeeping the periodic jobs run: collecting unreferenced blobs, purging trash past its
//! group's retention, and deleting refresh tokens that can no longer be used. Each takes the
//! time to act as of, so tests can drive them explicitly.

use std::time::Duration;

use nubo_common::storage::{ListedBlob, StorageKey};
use nubo_model::db::{self};
use nubo_model::domain::time::Millis;

use crate::context::Context;
use crate::error::ServiceResult;
use crate::{storage::policies, tree::files};

/// How old an unreferenced blob must be before it is collected: long enough that a copy in
/// progress (whose journal row has no reference yet) is never taken.
pub const BLOB_GRACE: Duration = Duration::from_secs(6 * 3600);

/// Collects what storage holds for nobody, once older than `grace`: blob rows without
/// references (interrupted migrations, deletions that failed; bytes first, then the row), and
/// bytes no row and no open upload knows (a crash between writing and recording) written since
/// their policy was created (older bytes are files waiting to be imported). Answers how many
/// blobs were collected.
pub async fn collect_blobs(ctx: &Context, now: Millis, grace: Duration) -> ServiceResult<usize> {
    let collected = collect_unreferenced_rows(ctx, now, grace).await?;
    Ok(collected + collect_unknown_bytes(ctx, now, grace).await?)
}

async fn collect_unknown_bytes(ctx: &Context, now: Millis, grace: Duration) -> ServiceResult<usize> {
    let cutoff = now - grace.as_millis() as i64;
    let mut collected = 0;
    // Nodes do not list their blobs (see `NodeBlobStore::list`), and a node may serve several
    // policies, so one policy's listing could not tell another's blobs from orphans anyway.
    for policy in db::policies::list(ctx.db()).await?.into_iter().filter(|p| p.node_id.is_none()) {
        let store = policies::store(ctx, &policy).await?;
        let listed = store.list().await?;
        let mut known: std::collections::HashSet<String> =
            db::blobs::keys_of_policy(ctx.db(), policy.id).await?.into_iter().collect();
        known.extend(db::uploads::keys_of_policy(ctx.db(), policy.id).await?);
        // Bytes older than the policy cannot be a write of Nubo's that went unrecorded: they were
        // there before, waiting to be imported (docs/src/admin/import.md), and are never collected; nor
        // are bytes in a folder an import was asked to read (more files to import later).
        let areas = db::imports::sources_of(ctx.db(), policy.id).await?;
        let in_area = |key: &str| {
            areas
                .iter()
                .any(|area| area.is_empty() || key.strip_prefix(area.as_str()).is_some_and(|r| r.starts_with('/')))
        };
        let orphan = |b: &ListedBlob| b.modified_ms < cutoff && b.modified_ms >= policy.created_at && !in_area(&b.key);
        for blob in listed.into_iter().filter(|b| orphan(b) && !known.contains(&b.key)) {
            // Check again just before deleting: a row may have appeared since the listing.
            if db::blobs::key_exists(ctx.db(), policy.id, &blob.key).await? {
                continue;
            }
            if let Ok(key) = StorageKey::parse(&blob.key) {
                store.delete(&key).await?;
                tracing::info!(policy = %policy.name, key = %blob.key, "collected bytes no record knows");
                collected += 1;
            }
        }
    }
    Ok(collected)
}

async fn collect_unreferenced_rows(ctx: &Context, now: Millis, grace: Duration) -> ServiceResult<usize> {
    let mut collected = 0;
    loop {
        let blobs = db::blobs::unreferenced_before(ctx.db(), now - grace.as_millis() as i64, 100).await?;
        if blobs.is_empty() {
            return Ok(collected);
        }
        for blob in &blobs {
            let policy = policies::find(ctx, blob.policy_id).await?;
            let store = policies::store(ctx, &policy).await?;
            store.delete(&StorageKey::parse(&blob.storage_key)?).await?;
            let mut conn = ctx.db().writer().acquire().await.map_err(db::DbError::from)?;
            if db::blobs::delete_unreferenced(&mut conn, &blob.id).await? {
                tracing::info!(blob = %blob.id, key = %blob.storage_key, "collected an unreferenced blob");
                collected += 1;
            }
        }
    }
}

/// Deletes for good what has been in the trash longer than its owner's group keeps it.
pub async fn purge_expired_trash(ctx: &Context, now: Millis) -> ServiceResult<usize> {
    let expired = db::objects::expired_trash(ctx.db(), now, 500).await?;
    let mut purged = 0;
    for (owner, id) in expired {
        let ids = [id.into()];
        match files::purge_as(ctx, owner, &ids, None).await {
            Ok(()) => purged += 1,
            // An upload into the folder is still running: try again next time.
            Err(err) => tracing::info!(object = %id, error = %err, "trash purge postponed"),
        }
    }
    Ok(purged)
}

/// Deletes refresh tokens that expired, or were retired or revoked more than a day ago (reuse
/// detection needs the retired ones for a while).
pub async fn clean_refresh_tokens(ctx: &Context, now: Millis) -> ServiceResult<u64> {
    Ok(db::refresh_tokens::delete_dead(ctx.db(), now, now - 86_400_000).await?)
}
