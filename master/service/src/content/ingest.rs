//! Where every file comes into being. Chunked uploads, nodes' upload reports, external fetches,
//! WebDAV writes and `PATCH /file/content` all hand a complete blob (key, size, blake3) and a
//! destination to [`commit`], which settles the quota, takes the de-duplication reference,
//! inserts or replaces the object row and records the caller's bookkeeping in one transaction
//! ([`db::ingest`]). Until that commit happens the bytes are a [`StagedBlob`]: unless it is told
//! the commit happened, it removes them and gives back what was held for them.

use std::sync::Arc;

use nubo_common::storage::{BlobStore, StorageKey};
use nubo_model::db;
use nubo_model::db::ingest::{Committed, Content, Destination, FileCommit, Refusal, Step};
use nubo_model::db::objects::ObjectRow;
use nubo_model::domain::ids::{ObjectId, PolicyId, UploadId, UserId};
use nubo_model::domain::object::new_id;
use nubo_model::domain::time::{Millis, now_ms};

use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::tree::files;

/// What was held for staged bytes, and so what giving them up gives back.
#[derive(Debug, Clone)]
pub enum Hold {
    /// Quota reserved for the bytes before they arrived (`bytes` may be 0).
    Reservation { owner_id: UserId, bytes: i64 },
    /// An upload session claimed for finishing with `claim_token`. Giving up ends the session
    /// and gives its reservation back, and removes the bytes, only while the claim holds: once
    /// taken over, the bytes are the new holder's. `on_node`: the bytes are a storage node's,
    /// which drops a duplicate itself when its report is answered.
    Session { session_id: UploadId, claim_token: String, owner_id: UserId, reserved: i64, on_node: bool },
    /// A storage node's fetch for task `task_id`: giving up ends the fetch as failed, and the
    /// node, answered that it may not keep the bytes, drops them.
    Fetch { task_id: String },
    /// Bytes that were in the policy's storage before Nubo knew them (an admin import): nothing
    /// was held for them, and they are never removed, neither when giving up nor when they
    /// duplicate content the policy holds already (they stay where they are, unreferenced).
    Adopted,
}

/// Bytes stored for a file-to-be that no row refers to yet. Dropped without [`commit`] having
/// happened (an error, a refusal, a cancelled request), it removes the bytes and gives back
/// what its [`Hold`] kept; [`StagedBlob::discard`] does the same and waits for it.
pub struct StagedBlob {
    ctx: Context,
    store: Arc<dyn BlobStore>,
    key: StorageKey,
    policy_id: PolicyId,
    size: i64,
    blake3: String,
    /// Whether `blake3` was computed over the stored bytes whole (see [`Content::hashed_whole`]).
    hashed_whole: bool,
    hold: Hold,
    /// Set once the bytes are a file's (or another holder's): nothing is undone any more.
    settled: bool,
}

impl StagedBlob {
    /// Takes charge of the bytes at `key` of `policy_id`'s `store` (stored, or about to be) and
    /// of what `hold` kept for them.
    pub fn new(ctx: &Context, store: Arc<dyn BlobStore>, key: StorageKey, policy_id: PolicyId, hold: Hold) -> Self {
        let (size, blake3, hashed_whole, settled) = (0, String::new(), false, false);
        Self { ctx: ctx.clone(), store, key, policy_id, size, blake3, hashed_whole, hold, settled }
    }

    /// The bytes are complete: `size` of them, with content hash `blake3`.
    pub fn holding(mut self, size: i64, blake3: &str) -> Self {
        self.size = size;
        self.blake3 = blake3.to_owned();
        self
    }

    /// The server hashed the bytes whole as they were stored (a streamed write, an import, a
    /// node's fetch), rather than merging a hash from chunk values: other owners' content may
    /// then be de-duplicated onto them.
    pub fn hashed_whole(mut self) -> Self {
        self.hashed_whole = true;
        self
    }

    pub fn store(&self) -> &Arc<dyn BlobStore> {
        &self.store
    }

    pub fn key(&self) -> &StorageKey {
        &self.key
    }

    pub fn size(&self) -> i64 {
        self.size
    }

    /// Gives the bytes up: they are removed and what was held for them is given back. Answers
    /// `error`, the reason, for the caller to return.
    pub async fn discard(mut self, error: ServiceError) -> ServiceError {
        self.settled = true;
        undo(&self.ctx, self.store.clone(), &self.key, &self.hold, &error.message).await;
        error
    }

    /// The bytes became a file's: a duplicate of content the policy held already is surplus.
    fn settle(&mut self, committed: &Committed) {
        self.settled = true;
        let someone_else_drops_surplus =
            matches!(self.hold, Hold::Fetch { .. } | Hold::Session { on_node: true, .. } | Hold::Adopted);
        if committed.duplicate && !someone_else_drops_surplus {
            let (store, key) = (self.store.clone(), self.key.clone());
            tokio::spawn(async move {
                if let Err(error) = store.delete(&key).await {
                    tracing::warn!(%error, %key, "could not remove the bytes of a duplicate; the collector will");
                }
            });
        }
    }
}

impl Drop for StagedBlob {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(key = %self.key, "staged bytes dropped outside the runtime; the collector will remove them");
            return;
        };
        let (ctx, store, key, hold) = (self.ctx.clone(), self.store.clone(), self.key.clone(), self.hold.clone());
        runtime.spawn(
            async move { undo(&ctx, store, &key, &hold, "the request ended before the file was recorded").await },
        );
    }
}

/// Gives staged bytes up (see [`Hold`]). Failures are logged: the collector removes bytes no row
/// knows, and the reaper ends sessions that expire.
async fn undo(ctx: &Context, store: Arc<dyn BlobStore>, key: &StorageKey, hold: &Hold, reason: &str) {
    let remove_bytes = match hold {
        Hold::Reservation { owner_id, bytes } => {
            give_back(ctx, *owner_id, *bytes).await;
            true
        }
        Hold::Session { session_id, claim_token, owner_id, reserved, .. } => {
            match end_session(ctx, *session_id, claim_token, *owner_id, *reserved).await {
                Ok(ended) => ended,
                Err(error) => {
                    tracing::warn!(session = %session_id, %error, "could not end a refused upload; it expires");
                    false
                }
            }
        }
        Hold::Fetch { task_id } => {
            if let Err(error) = db::node_reports::fail_external_download(ctx.db(), task_id, reason, now_ms()).await {
                tracing::warn!(task = %task_id, %error, "could not end a refused fetch; the node reports again");
            }
            false
        }
        Hold::Adopted => false,
    };
    if remove_bytes && let Err(error) = store.delete(key).await {
        tracing::warn!(%key, %error, "could not remove the bytes of a failed write; the collector will");
    }
}

/// Gives back `bytes` of quota reserved for a write that did not happen.
pub async fn give_back(ctx: &Context, owner_id: UserId, bytes: i64) {
    if bytes <= 0 {
        return;
    }
    let released = match ctx.db().writer().acquire().await {
        Ok(mut conn) => db::users::release_storage(&mut conn, owner_id, bytes).await,
        Err(err) => Err(err.into()),
    };
    if let Err(err) = released {
        // The usage stays counted too high until corrected: worth an operator's look.
        tracing::warn!(user = %owner_id, bytes, error = %err, "could not give back a reservation");
    }
}

/// Deletes a session row and gives back its reservation, in one transaction, while the claim
/// `claim_token` holds it. Answers false (and changes nothing) when the claim was taken over.
pub async fn end_session(
    ctx: &Context,
    session_id: UploadId,
    claim_token: &str,
    owner_id: UserId,
    reserved: i64,
) -> ServiceResult<bool> {
    let mut tx = ctx.db().begin().await?;
    if !db::uploads::delete_claimed(&mut tx, session_id, claim_token).await? {
        return Ok(false);
    }
    db::users::release_storage(&mut tx, owner_id, reserved).await?;
    tx.commit().await.map_err(db::DbError::from)?;
    Ok(true)
}

/// What a commit charges the owner: `amount` more bytes (the size or growth less what was
/// reserved before), which must fit below `capacity` when positive.
#[derive(Debug, Clone, Copy)]
pub struct Charge {
    pub amount: i64,
    pub capacity: i64,
}

impl Charge {
    /// Nothing more: the bytes were reserved in full before they arrived (upload sessions).
    pub const RESERVED: Charge = Charge { amount: 0, capacity: i64::MAX };
}

/// Where a commit puts the content, and what else it records.
pub struct Plan {
    pub owner_id: UserId,
    pub destination: Destination,
    pub charge: Charge,
    /// Bookkeeping that must precede the content's blob row (it frees what that row takes).
    pub first_steps: Vec<Step>,
    pub steps: Vec<Step>,
}

impl Plan {
    /// A new file `name` in the owner's folder `parent_id`, with a fresh id.
    pub fn new_file(owner_id: UserId, parent_id: ObjectId, name: &str, charge: Charge) -> Self {
        let destination = Destination::NewFile { object_id: new_id().into(), parent_id, name: name.to_owned() };
        Self { owner_id, destination, charge, first_steps: Vec::new(), steps: Vec::new() }
    }

    /// New content for the owner's file `row`, planned against its current blob and size; with
    /// `keep_version` the current content becomes a version of the file.
    pub fn replace(owner_id: UserId, row: &ObjectRow, charge: Charge, keep_version: bool) -> Self {
        let destination = Destination::Replace {
            object_id: row.id,
            old_blob_id: row.physical_file_id.clone(),
            old_size: row.size,
            keep_version,
        };
        Self { owner_id, destination, charge, first_steps: Vec::new(), steps: Vec::new() }
    }

    /// Adds a step run before anything else of the commit is written (and so before the
    /// content's blob row is added), for bookkeeping that makes room for that row.
    pub fn with_first_step(mut self, step: Step) -> Self {
        self.first_steps.push(step);
        self
    }

    /// Adds a step of the caller's bookkeeping, made with the file's id.
    pub fn with_step(mut self, step: impl FnOnce(ObjectId) -> Step) -> Self {
        let step = step(self.destination.object_id());
        self.steps.push(step);
        self
    }

    fn commit(self, content: Content) -> FileCommit {
        let Plan { owner_id, destination, charge, first_steps, steps } = self;
        FileCommit {
            owner_id,
            destination,
            content,
            charge: charge.amount,
            capacity: charge.capacity,
            first_steps,
            steps,
        }
    }
}

/// A file that came into being (or got its new content).
#[derive(Debug, Clone)]
pub struct Ingested {
    pub object_id: ObjectId,
    pub size: i64,
    /// The file refers to an older blob of the same content.
    pub duplicate: bool,
    pub at: Millis,
}

/// Commits `staged` as `plan` says. Answers the file, or `None` when the caller's bookkeeping
/// was settled by someone else first (then nothing was committed, and the bytes are theirs).
/// Any refusal or failure gives the bytes up (see [`StagedBlob`]) and answers why: 507 over
/// quota, 409 for a name taken or a file changed meanwhile.
pub async fn commit(ctx: &Context, mut staged: StagedBlob, plan: Plan) -> ServiceResult<Option<Ingested>> {
    let content = Content {
        blob_id: new_id().to_string(),
        policy_id: staged.policy_id,
        storage_key: Some(staged.key.as_str().to_owned()),
        size: staged.size,
        blake3: staged.blake3.clone(),
        hashed_whole: staged.hashed_whole,
    };
    let commit = plan.commit(content);
    let (object_id, size) = (commit.destination.object_id(), commit.content.size);
    let (outcome, at) = run(ctx, commit).await;
    match outcome {
        Ok(Ok(committed)) => {
            staged.settle(&committed);
            release_replaced(ctx, committed.released.clone());
            Ok(Some(ingested(object_id, size, &committed, at)))
        }
        Ok(Err(Refusal::Superseded)) => {
            staged.settled = true;
            Ok(None)
        }
        Ok(Err(refusal)) => Err(staged.discard(refused(refusal)).await),
        Err(error) => Err(staged.discard(files::on_name_clash(error)).await),
    }
}

/// Commits `plan` with content the policy already holds (a blob with `blake3` and `size`), so
/// no byte is stored again. Answers `None` when it holds no such blob any more or the charge
/// does not fit: the caller then stores the bytes, and the usual answer follows.
pub async fn commit_held(
    ctx: &Context,
    policy_id: PolicyId,
    (size, blake3): (i64, &str),
    plan: Plan,
) -> ServiceResult<Option<Ingested>> {
    let blake3 = blake3.to_owned();
    let content =
        Content { blob_id: new_id().to_string(), policy_id, storage_key: None, size, blake3, hashed_whole: false };
    let commit = plan.commit(content);
    let (object_id, size) = (commit.destination.object_id(), commit.content.size);
    let (outcome, at) = run(ctx, commit).await;
    match outcome.map_err(files::on_name_clash)? {
        Ok(committed) => {
            release_replaced(ctx, committed.released.clone());
            Ok(Some(ingested(object_id, size, &committed, at)))
        }
        Err(Refusal::QuotaExceeded | Refusal::NotReferenced | Refusal::Superseded) => Ok(None),
        Err(Refusal::Changed) => Err(changed_meanwhile()),
    }
}

/// Runs the commit's transaction. On SQLite it runs on the calling thread and a cancelled
/// request cannot stop it half-way (it has no await point once begun); on PostgreSQL it runs in
/// a task of its own, so a request cancelled while the commit is in flight still learns its
/// outcome and the staged bytes are never removed under a file that was committed.
async fn run(ctx: &Context, commit: FileCommit) -> (Result<Result<Committed, Refusal>, db::DbError>, Millis) {
    let at = now_ms();
    if ctx.db().inline().is_some() {
        return (db::ingest::commit(ctx.db(), &commit, at).await, at);
    }
    let db = ctx.db().clone();
    let outcome = tokio::spawn(async move { db::ingest::commit(&db, &commit, at).await })
        .await
        .unwrap_or_else(|join| Err(db::DbError::Sqlx(sqlx::Error::Protocol(format!("commit task failed: {join}")))));
    (outcome, at)
}

fn ingested(object_id: ObjectId, size: i64, committed: &Committed, at: Millis) -> Ingested {
    Ingested { object_id, size, duplicate: committed.duplicate, at }
}

/// Removes the replaced content's blob when the file held its last reference; nobody waits.
fn release_replaced(ctx: &Context, released: Option<String>) {
    if let Some(blob) = released {
        let ctx = ctx.clone();
        tokio::spawn(async move { files::release_blobs(&ctx, &[blob]).await });
    }
}

fn refused(refusal: Refusal) -> ServiceError {
    match refusal {
        Refusal::QuotaExceeded => files::quota_exceeded(),
        Refusal::Changed => changed_meanwhile(),
        // Only content that was not stored can be unreferenced, and staged bytes are stored.
        Refusal::NotReferenced | Refusal::Superseded => {
            ServiceError::internal(anyhow::anyhow!("unexpected refusal of a commit: {refusal:?}"))
        }
    }
}

/// 409 `object.changed`: the file a write was planned against changed or went meanwhile.
pub fn changed_meanwhile() -> ServiceError {
    ServiceError::new(
        ErrorKind::Conflict,
        codes::OBJECT_CHANGED,
        "the file was changed or removed while the new content arrived; send it again",
    )
}
