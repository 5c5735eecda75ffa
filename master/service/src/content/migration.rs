//! `POLICY_MIGRATE`: moving the files of an object (recursively) to another storage policy.
//! Each file is copied streaming, its blake3 verified, and its reference switched in one
//! transaction; the old blob is released after the commit. A blob already on the target with
//! the same content is reused. Every step is safe to repeat, so a task that stopped anywhere
//! (crash, restart, cancel) can simply run again.

use nubo_common::storage::{BlobStore, StorageKey};
use nubo_model::db::blobs::BlobRow;
use nubo_model::db::objects::ObjectRow;
use nubo_model::db::{self, DbError};
use nubo_model::domain::ids::{PolicyId, UserId};
use nubo_model::domain::naming::{self, NamingContext};
use nubo_model::domain::task::{TaskProgress, TaskProps};
use nubo_model::domain::time::now_ms;
use uuid::Uuid;

use crate::context::Context;
use crate::tasks::run::{Checkpoint, TaskFailure};
use crate::tree::access::{self, Reach};
use crate::{storage::policies, tree::files};

/// Runs a migration to the end, or until the checkpoint says stop.
pub async fn run(
    ctx: &Context,
    owner: Option<UserId>,
    props: &TaskProps,
    control: &mut dyn Checkpoint,
) -> Result<TaskProgress, TaskFailure> {
    let missing = |what: &str| TaskFailure::Permanent(format!("the task has no {what}"));
    let object_id = props.object_id.ok_or_else(|| missing("object"))?;
    let target_id = props.target_policy_id.ok_or_else(|| missing("target policy"))?;
    let owner = owner.ok_or_else(|| missing("owner"))?;
    let object = access::writable(ctx, owner, object_id.into(), Reach::Live)
        .await
        .map_err(|_| TaskFailure::Permanent("the object no longer exists".to_owned()))?;
    let target = policies::find(ctx, target_id.into())
        .await
        .map_err(|_| TaskFailure::Permanent("the target policy no longer exists".to_owned()))?;

    let files: Vec<ObjectRow> = {
        let mut conn = ctx.db().writer().acquire().await.map_err(DbError::from)?;
        db::objects::subtree(&mut conn, object.row().id).await?
    }
    .into_iter()
    .filter(|row| !row.is_folder() && row.trashed_at.is_none())
    .collect();
    let mut progress = TaskProgress {
        files_total: files.len() as u64,
        bytes_total: files.iter().map(|f| f.size as u64).sum(),
        ..TaskProgress::default()
    };
    for file in &files {
        control.checkpoint(&progress).await?;
        migrate_file(ctx, file, &target).await?;
        progress.files_done += 1;
        progress.bytes_done += file.size as u64;
    }
    control.checkpoint(&progress).await?;
    Ok(progress)
}

/// Moves one file's content to `target` (or points it at an identical blob already there).
async fn migrate_file(ctx: &Context, file: &ObjectRow, target: &db::policies::PolicyRow) -> Result<(), TaskFailure> {
    let db = ctx.db();
    // Re-read: the file may have changed since the plan was made.
    let Some(current) = db::objects::find_by_id(db, file.id).await? else { return Ok(()) };
    let Some(old_blob_id) = current.physical_file_id.clone() else { return Ok(()) };
    let Some(old) = db::blobs::find(db, &old_blob_id).await? else { return Ok(()) };
    let target_id = target.id;
    if old.policy_id == target_id {
        return Ok(());
    }
    let hash = old.blake3.clone().ok_or_else(|| TaskFailure::Permanent(format!("blob {} has no hash", old.id)))?;

    let mut tx = db.begin().await?;
    if let Some(existing) =
        db::blobs::find_same_content(&mut tx, target_id, (&hash, old.size), current.owner_id).await?
    {
        let orphans = switch(&mut tx, &current, &old, &existing.id, target_id).await?;
        tx.commit().await.map_err(DbError::from)?;
        files::release_blobs(ctx, &orphans).await;
        return Ok(());
    }
    drop(tx);

    // Journal the new blob first (no references yet): if we stop before the switch, the
    // collector finds the row and removes the bytes.
    let source_policy = policies::find(ctx, old.policy_id).await?;
    let source = policies::store(ctx, &source_policy).await?;
    let destination = policies::store(ctx, target).await?;
    let owner = current.owner_id.into();
    let context = NamingContext { user_id: owner, original_name: &current.name, now: time::OffsetDateTime::now_utc() };
    let key = StorageKey::parse(&naming::storage_key(&target.dir_name_rule, &target.file_name_rule, &context))?;
    let journal = BlobRow {
        id: Uuid::new_v4().to_string(),
        policy_id: target_id,
        storage_key: key.to_string(),
        size: old.size,
        blake3: None,
        ref_count: 0,
    };
    {
        let mut conn = db.writer().acquire().await.map_err(DbError::from)?;
        db::blobs::insert(&mut conn, &journal, now_ms()).await?;
    }
    let copied = async {
        let stream = source.get(&StorageKey::parse(&old.storage_key)?, None).await?;
        let outcome = destination.put_stream(&key, stream, None).await?;
        if outcome.blake3 != hash || outcome.size as i64 != old.size {
            return Err(TaskFailure::Permanent(format!("the copy of {} does not match its hash", current.name)));
        }
        Ok(())
    }
    .await;
    if let Err(failure) = copied {
        drop_copy(destination.as_ref(), &key).await;
        forget_journal(ctx, &journal.id).await;
        return Err(failure);
    }

    let mut tx = db.begin().await?;
    db::blobs::activate(&mut tx, &journal.id, &hash).await?;
    let orphans = switch(&mut tx, &current, &old, &journal.id, target_id).await?;
    if orphans.contains(&journal.id) {
        // The file changed meanwhile: nothing points at the copy.
        drop(tx);
        drop_copy(destination.as_ref(), &key).await;
        forget_journal(ctx, &journal.id).await;
        return Ok(());
    }
    tx.commit().await.map_err(DbError::from)?;
    files::release_blobs(ctx, &orphans).await;
    Ok(())
}

/// Points `file` at `new_blob` if it still points at `old`; answers the blobs left without
/// references (the old one, or the new one when the file had changed).
async fn switch(
    tx: &mut db::Conn,
    file: &ObjectRow,
    old: &BlobRow,
    new_blob: &str,
    policy_id: PolicyId,
) -> Result<Vec<String>, TaskFailure> {
    if !db::objects::switch_blob(tx, file.id, &old.id, new_blob, policy_id).await? {
        return Ok(vec![new_blob.to_owned()]);
    }
    db::blobs::add_refs(tx, new_blob, 1).await?;
    let mut orphans = Vec::new();
    if db::blobs::add_refs(tx, &old.id, -1).await? == 0 {
        orphans.push(old.id.clone());
    }
    Ok(orphans)
}

/// Removes a copy no file points at; a failure is logged and left to the orphan collector.
async fn drop_copy(destination: &dyn BlobStore, key: &StorageKey) {
    if let Err(err) = destination.delete(key).await {
        tracing::warn!(key = %key, error = %err, "could not remove an unused migration copy; the collector will");
    }
}

async fn forget_journal(ctx: &Context, id: &str) {
    let forgotten = match ctx.db().writer().acquire().await {
        Ok(mut conn) => db::blobs::delete_unreferenced(&mut conn, id).await,
        Err(err) => Err(DbError::from(err)),
    };
    if let Err(err) = forgotten {
        tracing::warn!(blob = %id, error = %err, "could not forget a migration journal entry");
    }
}
