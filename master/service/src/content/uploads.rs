//! Resumable chunked uploads: a session reserves the declared size against the quota, chunks
//! arrive in any order (idempotently), and the last one finalises: hash, de-duplicate, create
//! the object. Sessions that are aborted or expire give back their reservation and bytes.

use std::sync::Arc;
use std::time::Duration;

use nubo_common::hash;
use nubo_common::storage::{BlobStore, ByteStream, ChunkReceipt, StagedUpload, StorageError, StorageKey};
use nubo_model::db::objects::ObjectRow;
use nubo_model::db::uploads::{ChunkRow, SessionRow};
use nubo_model::db::{self, DbError};
use nubo_model::domain::activity::{Action, TargetKind};
use nubo_model::domain::ids::{GroupId, NodeId, UploadId, UserId};
use nubo_model::domain::naming::{self, NamingContext};
use nubo_model::domain::object::ObjectName;
use nubo_model::domain::time::{now_ms, to_rfc3339};
use nubo_model::domain::upload::UploadStatus::{self, Aborting, Finishing, Uploading};
use nubo_model::kv::Lease;
use nubo_protocol::methods::UploadCompleteParams;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::audit::activity::{self, Activity};
use crate::content::ingest::{self, Charge, Hold, Plan, StagedBlob};
use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::tree::access::{self, Reach};
use crate::tree::files::{self, ObjectView, quota_exceeded};
use crate::{Page, PageRequest, content::writes, storage::policies};

/// How long a session may wait for its chunks (the interface leaves it open): a day.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// What a client needs to send (or resume) an upload.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = UploadSessionView)]
pub struct SessionView {
    pub id: Uuid,
    pub file_name: String,
    pub file_size: i64,
    pub chunk_size: i64,
    pub total_chunks: i32,
    /// Indexes of the chunks already received.
    pub uploaded: Vec<i32>,
    pub expires_at: String,
    pub policy_id: Uuid,
    /// The created file, once the upload is complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<ObjectView>,
    /// Present when the policy keeps its files on a storage node: the client sends every chunk
    /// there (`PUT {url}/{index}` with `Authorization: Bearer {credential}`), never through the
    /// master; the node answers the last chunk with the created file. `uploaded` then lists
    /// nothing: `GET {url}` on the node tells which chunks it has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direct: Option<DirectUploadView>,
}

/// An upload that has not finished, as its owner's list of reservations shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PendingUploadView {
    pub id: Uuid,
    pub file_name: String,
    /// Bytes reserved against the quota until it completes, is cancelled or expires.
    pub file_size: i64,
    /// The folder it will land in.
    pub parent_id: Uuid,
    /// `uploading`; `finishing` or `aborting` while a completion or a cancellation runs.
    pub status: String,
    pub created_at: String,
    pub expires_at: String,
}

/// One page of `owner`'s unfinished uploads (each holding its size of the quota), newest first.
pub async fn pending(ctx: &Context, owner: UserId, page: PageRequest) -> ServiceResult<Page<PendingUploadView>> {
    let (rows, count) = db::uploads::page_owned(ctx.db(), owner, page.offset, page.limit).await?;
    let items = rows
        .iter()
        .map(|session| PendingUploadView {
            id: session.id.into(),
            file_name: session.file_name.clone(),
            file_size: session.declared_size,
            parent_id: session.parent_id.into(),
            status: session.status.as_str().to_owned(),
            created_at: to_rfc3339(session.created_at),
            expires_at: to_rfc3339(session.expires_at),
        })
        .collect();
    Ok(Page { count, items })
}

/// Where a client sends the chunks of an upload to a storage node.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DirectUploadView {
    /// `PUT {url}/{index}` stores chunk `index`; `GET {url}` lists the chunks received.
    pub url: String,
    /// Bearer credential for `url`, signed by the master for this session only.
    pub credential: String,
    pub expires_at: String,
}

/// What the last chunk sent to a storage node answers once the master recorded the file.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DirectUploadDone {
    pub completed: bool,
    /// The created file (absent when it was deleted since).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<ObjectView>,
}

/// A new upload as requested.
pub struct NewUpload {
    pub file_name: String,
    pub file_size: i64,
    pub parent_id: Uuid,
    pub policy_id: Option<Uuid>,
    /// Replace the content of a file of that name in the folder, when there is one.
    pub overwrite: bool,
    /// The content's blake3 (hexadecimal), when the client knows it: content the owner already
    /// holds is not sent again.
    pub blake3: Option<String>,
    /// With `overwrite`: the blake3 of the content the upload replaces; the file must have it
    /// when the session opens and still when it completes.
    pub replaces_blake3: Option<String>,
}

fn session_not_found() -> ServiceError {
    ServiceError::not_found(codes::UPLOAD_NOT_FOUND, "no such upload session")
}

fn view(session: &SessionRow, uploaded: Vec<i32>, object: Option<ObjectView>) -> ServiceResult<SessionView> {
    Ok(SessionView {
        direct: None,
        id: session.id.into(),
        file_name: session.file_name.clone(),
        file_size: session.declared_size,
        chunk_size: session.chunk_size,
        total_chunks: session.total_chunks,
        uploaded,
        expires_at: to_rfc3339(session.expires_at),
        policy_id: session.policy_id.into(),
        object,
    })
}

fn staged(session: &SessionRow) -> ServiceResult<StagedUpload> {
    serde_json::from_str(&session.driver_state).map_err(ServiceError::internal)
}

/// Refuses a file larger than the policy allows (0 = no limit).
pub fn check_max_size(max_size: i64, size: i64) -> ServiceResult<()> {
    if max_size > 0 && size > max_size {
        return Err(ServiceError::new(
            ErrorKind::PayloadTooLarge,
            codes::FILE_TOO_LARGE,
            format!("the file is larger than the policy's limit of {max_size} bytes"),
        ));
    }
    Ok(())
}

/// Looks again, once the bytes are in, at what admitted the upload when it began: the owner's
/// group may still use the policy, the file still fits the policy's size limit, the quota
/// still covers what the owner uses (this upload's reservation included), and a file replaced
/// on condition (`replaces_blake3`) still has the content named. An administrator may
/// have changed any of them while the bytes were in flight. `Ok(Some(refusal))` when the upload
/// may no longer be recorded; `Err` only for a fault while looking.
async fn refusal_on_completion(
    ctx: &Context,
    session: &SessionRow,
    policy: &db::policies::PolicyRow,
) -> ServiceResult<Option<ServiceError>> {
    let db = ctx.db();
    let owner = db::users::find(db, session.owner_id).await?.ok_or_else(files::not_found)?;
    if let Err(refused) = policies::policy_for(db, owner.group_id, Some(policy.id.into())).await {
        return match refused.kind {
            ErrorKind::Forbidden => Ok(Some(refused)),
            _ => Err(refused),
        };
    }
    if let Err(refused) = check_max_size(policy.max_size, session.declared_size) {
        return Ok(Some(refused));
    }
    if let (Some(target), Some(expected)) = (session.replace_object_id, &session.replace_blob_id) {
        let current = db::objects::find_owned(db, session.owner_id, target).await?;
        if current.is_none_or(|row| row.trashed_at.is_some() || row.physical_file_id.as_ref() != Some(expected)) {
            return Ok(Some(ingest::changed_meanwhile()));
        }
    }
    let (used, capacity) = db::users::usage_and_capacity(db, session.owner_id, now_ms()).await?;
    Ok((used > capacity).then(quota_exceeded))
}

/// Opens a session: checks the folder, the name, the policy and its size limit, and reserves
/// the declared size against the quota in the same transaction as the session row, so
/// concurrent sessions can never exceed the quota together.
pub async fn create(ctx: &Context, owner: UserId, group_id: GroupId, request: NewUpload) -> ServiceResult<SessionView> {
    let db = ctx.db();
    let parent = access::writable(ctx, owner, request.parent_id.into(), Reach::Folder).await?;
    let name = ObjectName::parse(&request.file_name).map_err(|why| ServiceError::validation("file_name", why))?;
    if request.file_size < 0 {
        return Err(ServiceError::validation("file_size", "file_size must be 0 or more bytes"));
    }
    // An overwrite goes to the replaced file's policy: a file's content lives under one policy.
    let replaced = match db::objects::child_by_name(db, parent.row().id, name.as_str()).await? {
        None => None,
        Some(row) if request.overwrite && !row.is_folder() => Some(row),
        Some(_) => {
            return Err(ServiceError::conflict(
                codes::OBJECT_NAME_TAKEN,
                "an object with that name exists in the folder (set `overwrite` to replace a file's content)",
            )
            .with_field("file_name"));
        }
    };
    let replace_blob_id = match request.replaces_blake3.as_deref() {
        None => None,
        Some(_) if !request.overwrite => {
            return Err(ServiceError::validation("replaces_blake3", "replaces_blake3 goes with overwrite"));
        }
        Some(expected) => Some(replaced_content(db, replaced.as_ref(), &parse_blake3(expected)?).await?),
    };
    let wanted_policy = replaced.as_ref().map_or(request.policy_id, |row| row.policy_id.map(Uuid::from));
    let policy = policies::policy_for(db, group_id, wanted_policy).await?;
    check_max_size(policy.max_size, request.file_size)?;
    // The quota is looked at before anything is staged: a size it cannot take never reaches
    // storage (a local staging file of 16 TiB cannot even be created). The reservation below
    // settles it atomically.
    let (used, capacity) = db::users::usage_and_capacity(db, owner, now_ms()).await?;
    if request.file_size > capacity.saturating_sub(used) {
        return Err(quota_exceeded());
    }
    if let Some(blake3) = request.blake3.as_deref() {
        let blake3 = parse_blake3(blake3)?;
        let at = (parent.row().id, &name);
        let held = (request.file_size, blake3.as_str());
        if let Some(object) = writes::claim_held_content(ctx, owner, at, replaced.as_ref(), &policy, held).await? {
            return Ok(made_from_held_content(&policy, object));
        }
    }
    let store = policies::store(ctx, &policy).await?;
    let context =
        NamingContext { user_id: owner.as_uuid(), original_name: name.as_str(), now: time::OffsetDateTime::now_utc() };
    let key = StorageKey::parse(&naming::storage_key(&policy.dir_name_rule, &policy.file_name_rule, &context))?;
    let upload = match store.begin_upload(&key, request.file_size as u64, policy.chunk_size as u64).await {
        Ok(upload) => upload,
        Err(StorageError::Unavailable(why)) if policy.node_id.is_some() => {
            tracing::warn!(policy = %policy.id, reason = %why, "storage node unavailable for a new upload");
            return Err(policies::node_unavailable(&policy.name, "(the policy's storage node) does not answer"));
        }
        Err(err) => return Err(err.into()),
    };
    let now = now_ms();
    let session = SessionRow {
        id: UploadId::random(),
        owner_id: owner,
        parent_id: parent.row().id,
        file_name: name.to_string(),
        policy_id: policy.id,
        node_id: policy.node_id,
        declared_size: request.file_size,
        chunk_size: policy.chunk_size,
        total_chunks: upload.total_chunks() as i32,
        storage_key: key.to_string(),
        driver_state: serde_json::to_string(&upload).map_err(ServiceError::internal)?,
        replace_object_id: replaced.map(|row| row.id),
        replace_blob_id,
        status: Uploading,
        expires_at: now + SESSION_LIFETIME.as_millis() as i64,
        created_at: now,
    };
    let reserved = async {
        let mut tx = db.begin().await?;
        if !db::users::reserve_storage(&mut tx, session.owner_id, session.declared_size, capacity).await? {
            return Ok::<bool, DbError>(false);
        }
        db::uploads::insert(&mut tx, &session).await?;
        tx.commit().await?;
        Ok(true)
    }
    .await;
    match reserved {
        Ok(true) => {}
        Ok(false) => {
            abort_staged(store.as_ref(), &upload).await;
            return Err(quota_exceeded());
        }
        Err(err) => {
            abort_staged(store.as_ref(), &upload).await;
            return Err(err.into());
        }
    }
    // An empty file has no chunks to wait for.
    if session.total_chunks == 0 {
        let claim = take_claim(ctx, &session, Finishing, now_ms()).await?.ok_or_else(being_completed)?;
        let object = finish_claimed(ctx, &session, &claim).await?;
        return view(&session, Vec::new(), Some(object));
    }
    with_direct(view(&session, Vec::new(), None)?, store.as_ref(), &session)
}

/// The blob of `replaced` when its content has the blake3 `expected`; 409 `object.changed` when
/// it has other content or there is no such file (both changed since the client looked).
async fn replaced_content(db: &db::Db, replaced: Option<&ObjectRow>, expected: &str) -> ServiceResult<String> {
    let blob_id = replaced.and_then(|row| row.physical_file_id.clone()).ok_or_else(ingest::changed_meanwhile)?;
    let blob = db::blobs::find(db, &blob_id).await?;
    match blob.and_then(|blob| blob.blake3).is_some_and(|blake3| blake3 == expected) {
        true => Ok(blob_id),
        false => Err(ingest::changed_meanwhile()),
    }
}

/// A blake3 as clients send it: 64 hexadecimal digits, kept in lower case.
fn parse_blake3(raw: &str) -> ServiceResult<String> {
    match raw.len() == 64 && raw.bytes().all(|b| b.is_ascii_hexdigit()) {
        true => Ok(raw.to_ascii_lowercase()),
        false => Err(ServiceError::validation("blake3", "a blake3 hash is 64 hexadecimal digits")),
    }
}

/// The answer for a file made at once from content its owner already held: complete, with the
/// file; its `id` names no session (there is nothing to resume).
fn made_from_held_content(policy: &db::policies::PolicyRow, object: ObjectView) -> SessionView {
    SessionView {
        id: Uuid::new_v4(),
        file_name: object.name.clone(),
        file_size: object.size,
        chunk_size: policy.chunk_size,
        total_chunks: 0,
        uploaded: Vec::new(),
        expires_at: to_rfc3339(now_ms()),
        policy_id: policy.id.into(),
        object: Some(object),
        direct: None,
    }
}

/// Adds where to send the chunks when the store takes them directly.
fn with_direct(mut view: SessionView, store: &dyn BlobStore, session: &SessionRow) -> ServiceResult<SessionView> {
    let expires_at = (session.expires_at / 1000).max(0) as u64;
    view.direct = store.direct_upload(&staged(session)?, expires_at).map(|direct| DirectUploadView {
        url: direct.url,
        credential: direct.credential,
        expires_at: to_rfc3339(direct.expires_at as i64 * 1000),
    });
    Ok(view)
}

fn direct_only() -> ServiceError {
    ServiceError::conflict(
        codes::UPLOAD_DIRECT_ONLY,
        "this upload goes to a storage node: send the chunks to the `direct.url` of the session",
    )
}

async fn load(ctx: &Context, owner: UserId, id: UploadId) -> ServiceResult<SessionRow> {
    db::uploads::find_owned(ctx.db(), owner, id).await?.ok_or_else(session_not_found)
}

fn being_completed() -> ServiceError {
    ServiceError::conflict(
        codes::UPLOAD_NOT_OPEN,
        "the upload is being completed or cancelled by another request; ask for its status in a moment",
    )
}

/// Refuses a session that expired or is being cancelled. A `finishing` one passes: its chunks
/// have all arrived, and the claim decides whether this request may finish it.
fn check_open(session: &SessionRow) -> ServiceResult<()> {
    if session.status == Aborting {
        return Err(ServiceError::conflict(codes::UPLOAD_NOT_OPEN, "the upload is being cancelled"));
    }
    if session.expires_at < now_ms() {
        return Err(ServiceError::not_found(codes::UPLOAD_EXPIRED, "the upload session has expired"));
    }
    Ok(())
}

pub async fn status(ctx: &Context, owner: UserId, id: UploadId) -> ServiceResult<SessionView> {
    let session = load(ctx, owner, id).await?;
    let uploaded = db::uploads::chunks(ctx.db(), session.id).await?.iter().map(|c| c.chunk_index).collect();
    let current = view(&session, uploaded, None)?;
    if session.node_id.is_none() {
        return Ok(current);
    }
    // Resuming a direct upload: a fresh look at the node's store (and a credential) for it.
    let policy = policies::find(ctx, session.policy_id).await?;
    let store = policies::store(ctx, &policy).await?;
    with_direct(current, store.as_ref(), &session)
}

/// Stores chunk `index`. Idempotent: a re-sent chunk replaces the earlier copy. When this was
/// the last missing chunk, the upload is finalised and the answer carries the new object.
pub async fn put_chunk(
    ctx: &Context,
    owner: UserId,
    id: UploadId,
    index: u32,
    content_length: Option<u64>,
    body: ByteStream,
) -> ServiceResult<SessionView> {
    let session = load(ctx, owner, id).await?;
    check_open(&session)?;
    if session.node_id.is_some() {
        return Err(direct_only());
    }
    let upload = staged(&session)?;
    let expected = upload.chunk_len(index).ok_or_else(|| {
        ServiceError::new(
            ErrorKind::Validation,
            codes::UPLOAD_CHUNK_OUT_OF_RANGE,
            format!("chunk {index} does not exist: the upload has {} chunks", upload.total_chunks()),
        )
        .with_field("index")
    })?;
    if let Some(length) = content_length
        && length != expected
    {
        return Err(ServiceError::new(
            ErrorKind::BadRequest,
            codes::UPLOAD_WRONG_LENGTH,
            format!("chunk {index} must be exactly {expected} bytes, the request says {length}"),
        ));
    }
    if session.status == Finishing {
        // Every chunk arrived before the session was claimed: this is a retry of the last one
        // (its first answer lost with a master that died finishing). Finish, or take over a
        // claim whose lease ran out.
        return complete_session(ctx, session).await;
    }
    let policy = policies::find(ctx, session.policy_id).await?;
    let store = policies::store(ctx, &policy).await?;
    let lease = take_chunk_lease(ctx, session.id, index).await?;
    // The old receipt goes before any new byte is written: a receipt only ever describes bytes
    // that were written whole by the request that made it.
    db::uploads::forget_chunk(ctx.db(), session.id, index as i32).await?;
    let stored = lease
        .hold_while(async {
            let receipt = store.put_chunk(&upload, index, body).await?;
            let chunk = ChunkRow {
                chunk_index: index as i32,
                size: receipt.size as i64,
                etag: receipt.etag,
                chaining_value: receipt.chaining_value,
            };
            db::uploads::upsert_chunk(ctx.db(), session.id, &chunk, now_ms()).await?;
            Ok::<(), ServiceError>(())
        })
        .await;
    lease.release().await;
    if let Err(error) = stored {
        return Err(explain_failed_chunk(ctx, &session, error).await);
    }
    let uploaded: Vec<i32> = db::uploads::chunks(ctx.db(), session.id).await?.iter().map(|c| c.chunk_index).collect();
    if uploaded.len() as i32 == session.total_chunks {
        return complete_session(ctx, session).await;
    }
    view(&session, uploaded, None)
}

/// How long a chunk's lease lasts unless renewed: the request sending the chunk renews it while
/// it writes, so this bounds only how long a sender that died (a killed master) keeps the chunk
/// from being sent again.
const CHUNK_LEASE: Duration = Duration::from_secs(6);

/// Takes the lease on one chunk of a session for the request sending it, so that every master
/// agrees: of two requests sending the same chunk at once the second is refused (409
/// `upload.chunk_busy`, with `Retry-After`). Even a writer that kept going after losing its
/// lease would be harmless: the drivers keep each copy of a chunk apart and complete from the
/// copies the receipts name.
async fn take_chunk_lease(ctx: &Context, session_id: UploadId, index: u32) -> ServiceResult<Lease> {
    let key = format!("upload-chunk:{session_id}:{index}");
    Lease::take(ctx.shared_store(), key, CHUNK_LEASE).await?.ok_or_else(|| {
        ServiceError::conflict(
            codes::UPLOAD_CHUNK_BUSY,
            format!("chunk {index} of the upload is being sent by another request; send it again once it ended"),
        )
        .with_retry_after(CHUNK_LEASE.as_secs())
    })
}

/// Why a chunk could not be stored: 409 `upload.not_open` when its session was completed or
/// cancelled while the bytes arrived (the storage or the foreign-key failure that caused is
/// not the client's news), else `error` itself.
async fn explain_failed_chunk(ctx: &Context, session: &SessionRow, error: ServiceError) -> ServiceError {
    match db::uploads::find_owned(ctx.db(), session.owner_id, session.id).await {
        Ok(Some(current)) if current.status == Uploading => error,
        Ok(_) => ServiceError::conflict(
            codes::UPLOAD_NOT_OPEN,
            "the upload was completed or cancelled while this chunk arrived",
        ),
        Err(_) => error,
    }
}

/// Explicitly finalises an upload whose chunks have all arrived (also retries a finalisation
/// that failed half-way).
pub async fn complete(ctx: &Context, owner: UserId, id: UploadId) -> ServiceResult<SessionView> {
    let session = load(ctx, owner, id).await?;
    check_open(&session)?;
    if session.node_id.is_some() {
        // The node completes the upload itself and reports it.
        return Err(direct_only());
    }
    let uploaded = db::uploads::chunks(ctx.db(), session.id).await?.len() as i32;
    if uploaded != session.total_chunks && session.status != Finishing {
        return Err(ServiceError::conflict(
            codes::UPLOAD_INCOMPLETE,
            format!("{uploaded} of {} chunks have arrived", session.total_chunks),
        ));
    }
    complete_session(ctx, session).await
}

/// Claims the session (so of two concurrent last chunks only one finalises, and a claim left
/// by a dead master is taken over once its lease ran out) and finishes it.
async fn complete_session(ctx: &Context, session: SessionRow) -> ServiceResult<SessionView> {
    let claim = take_claim(ctx, &session, Finishing, now_ms()).await?.ok_or_else(being_completed)?;
    let object = finish_claimed(ctx, &session, &claim).await?;
    let uploaded = (0..session.total_chunks).collect();
    view(&session, uploaded, Some(object))
}

/// How long a claim on a session lasts without being renewed.
fn claim_lease(ctx: &Context) -> Duration {
    Duration::from_secs(ctx.config().upload_claim_lease_seconds.max(1))
}

/// This request's claim on a session (`finishing` or `aborting`). Its token fences: the
/// session row is deleted, and the file recorded, only while the token still holds it, so a
/// holder whose claim was taken over can never record the file a second time or release the
/// reservation twice.
struct Claim {
    token: String,
}

/// Claims `session` for finishing or aborting (`to`) as of `now`: from `uploading`, or over a
/// stale claim (lease not renewed for [`claim_lease`]). A finish takes over only a finish (an
/// abort that died must still end as an abort); an abort takes over either. `None` when
/// another request holds a live claim.
async fn take_claim(ctx: &Context, session: &SessionRow, to: UploadStatus, now: i64) -> ServiceResult<Option<Claim>> {
    let token = Uuid::new_v4().simple().to_string();
    let stale_before = now - claim_lease(ctx).as_millis() as i64;
    let stale: &[UploadStatus] = if to == Finishing { &[Finishing] } else { &[Finishing, Aborting] };
    let claimed = db::uploads::claim(ctx.db(), session.id, to, &token, now, stale_before, stale).await?;
    if claimed && session.status != Uploading {
        tracing::warn!(session = %session.id, status = %session.status, "took over an upload claim whose lease ran out");
    }
    Ok(claimed.then_some(Claim { token }))
}

/// Runs `work` while renewing the claim's lease every third of it, so a finish that takes
/// longer than the lease (a large S3 completion, a slow fsync) is not taken over while alive.
async fn under_lease<T>(ctx: &Context, session_id: UploadId, claim: &Claim, work: impl Future<Output = T>) -> T {
    let every = claim_lease(ctx) / 3;
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut work = std::pin::pin!(work);
    loop {
        tokio::select! {
            done = &mut work => return done,
            _ = ticks.tick() => match db::uploads::renew_claim(ctx.db(), session_id, &claim.token, now_ms()).await {
                Ok(true) => {}
                // The fence keeps this request from recording anything now; it fails at its commit.
                Ok(false) => tracing::warn!(session = %session_id, "lost the claim on an upload while finishing it"),
                Err(err) => tracing::warn!(session = %session_id, error = %err, "could not renew an upload claim"),
            },
        }
    }
}

/// Finishes a claimed session under its lease; on failure the claim is given up, so the client
/// (or the reaper) can retry.
async fn finish_claimed(ctx: &Context, session: &SessionRow, claim: &Claim) -> ServiceResult<ObjectView> {
    let finished = under_lease(ctx, session.id, claim, finish(ctx, session, claim)).await;
    if finished.is_err() {
        give_up_claim(ctx, session.id, claim).await;
    }
    finished
}

/// Completes the staged blob, then records the file (see [`record_upload`]); a blob made
/// redundant by de-duplication is deleted after the commit.
async fn finish(ctx: &Context, session: &SessionRow, claim: &Claim) -> ServiceResult<ObjectView> {
    let db = ctx.db();
    let upload = staged(session)?;
    let chunks = db::uploads::chunks(db, session.id).await?;
    let receipts: Vec<ChunkReceipt> = chunks
        .iter()
        .map(|c| ChunkReceipt {
            index: c.chunk_index as u32,
            size: c.size as u64,
            etag: c.etag.clone(),
            chaining_value: c.chaining_value.clone(),
        })
        .collect();
    let chaining_values: Vec<String> = chunks.iter().map(|c| c.chaining_value.clone()).collect();
    let content_hash = hash::combine(&chaining_values, upload.chunk_size, upload.size)
        .map_err(|e| ServiceError::internal(anyhow::anyhow!("combining chunk hashes: {e}")))?;
    let policy = policies::find(ctx, session.policy_id).await?;
    if let Some(refused) = refusal_on_completion(ctx, session, &policy).await? {
        drop_session(ctx, session, claim).await?;
        return Err(refused);
    }
    let store = policies::store(ctx, &policy).await?;
    if let Err(err) = store.complete_upload(&upload, &receipts).await {
        // A finisher that died after completing the blob left it at the key (keys are unique
        // to a session, and no row references it before the commit below): take it over.
        let key = StorageKey::parse(&session.storage_key)?;
        match store.size(&key).await {
            Ok(Some(size)) if size == upload.size => {
                tracing::info!(session = %session.id, "the blob was completed before: recording it");
                // Staged bytes a crash may have left next to the blob; usually a no-op.
                abort_staged(store.as_ref(), &upload).await;
            }
            _ => return Err(err.into()),
        }
    }
    let staged = staged_blob(ctx, session, claim, store, &content_hash, false)?;
    Ok(record_upload(ctx, session, claim, staged, None).await?.0)
}

/// The node report a file is recorded for: the node and its session handle, remembered with
/// the outcome so the same report again gets the same answer.
struct NodeReport<'a> {
    node_id: NodeId,
    handle: &'a str,
}

/// The complete blob of a claimed session, held by the session until its file is recorded.
fn staged_blob(
    ctx: &Context,
    session: &SessionRow,
    claim: &Claim,
    store: Arc<dyn BlobStore>,
    content_hash: &str,
    on_node: bool,
) -> ServiceResult<StagedBlob> {
    let hold = Hold::Session {
        session_id: session.id,
        claim_token: claim.token.clone(),
        owner_id: session.owner_id,
        reserved: session.declared_size,
        on_node,
    };
    let key = StorageKey::parse(&session.storage_key)?;
    Ok(StagedBlob::new(ctx, store, key, session.policy_id, hold).holding(session.declared_size, content_hash))
}

/// Records the file of a complete blob ([`ingest::commit`]): the session ends with it (its
/// reservation becomes the file's usage) and, for a node's report, the outcome is remembered.
/// Answers the file and whether the blob turned out to be a duplicate. On failure the session
/// and its reservation are released and the blob removed, so nothing is left behind.
async fn record_upload(
    ctx: &Context,
    session: &SessionRow,
    claim: &Claim,
    staged: StagedBlob,
    report: Option<NodeReport<'_>>,
) -> ServiceResult<(ObjectView, bool)> {
    let db = ctx.db();
    let plan = match session.replace_object_id {
        None => Plan::new_file(session.owner_id, session.parent_id, &session.file_name, Charge::RESERVED),
        Some(target) => {
            // The file as it is now: the commit replaces exactly this content, or refuses.
            let row = db::objects::find_owned(db, session.owner_id, target)
                .await?
                .filter(|row| row.trashed_at.is_none() && !row.is_folder() && row.policy_id == Some(session.policy_id))
                .filter(|row| session.replace_blob_id.is_none() || row.physical_file_id == session.replace_blob_id)
                .ok_or_else(ingest::changed_meanwhile)?;
            let (_, _, keeps_versions) = db::users::write_usage(db, session.owner_id, now_ms()).await?;
            // The whole size was reserved; without a version the old content's bytes come back.
            let freed = if keeps_versions { 0 } else { row.size };
            Plan::replace(session.owner_id, &row, Charge { amount: -freed, capacity: i64::MAX }, keeps_versions)
        }
    };
    let mut plan = plan.with_step(|_| db::uploads::end_claimed_step(session.id, &claim.token));
    let uploaded = Activity::by(session.owner_id, Action::FileUpload).with("size", session.declared_size);
    // A node's report comes from the node, not from the client.
    let uploaded = if report.is_some() { uploaded.without_address() } else { uploaded };
    plan = plan
        .with_step(|object_id| activity::step(uploaded.on(TargetKind::Object, object_id, Some(&session.file_name))));
    if let Some(report) = report {
        let now = now_ms();
        plan = plan.with_step(|object_id| {
            db::node_reports::upload_result_step(report.node_id, report.handle, object_id, session.owner_id, now)
        });
    }
    // Superseded: the claim was taken over, and its new holder records the file.
    let file = ingest::commit(ctx, staged, plan).await?.ok_or_else(being_completed)?;
    let row = db::objects::find_owned(db, session.owner_id, file.object_id).await?.ok_or_else(files::not_found)?;
    Ok((files::view_of(db, &row).await?, file.duplicate))
}

/// A node's `upload_complete` report, settled: the answer for the node (keep the blob or drop
/// the duplicate) and the body it relays to the client. Idempotent: a report already settled
/// gets the same answer again; one whose session is being recorded right now is told to retry.
pub async fn complete_reported(
    ctx: &Context,
    node_id: NodeId,
    report: &UploadCompleteParams,
) -> ServiceResult<(bool, DirectUploadDone)> {
    let db = ctx.db();
    if let Some(settled) = db::node_reports::upload_result(db, node_id, &report.session_id).await? {
        let object = match settled.object_id {
            Some(id) => match db::objects::find_owned(db, settled.owner_id, id).await? {
                Some(row) => Some(files::view_of(db, &row).await?),
                None => None,
            },
            None => None,
        };
        return Ok((settled.keep_blob, DirectUploadDone { completed: true, object }));
    }
    let session = db::uploads::find_for_node(db, node_id, &report.storage_key).await?.ok_or_else(session_not_found)?;
    if staged(&session)?.handle != report.session_id {
        return Err(session_not_found());
    }
    let Some(claim) = take_claim(ctx, &session, Finishing, now_ms()).await? else {
        let current = db::uploads::find_for_node(db, node_id, &report.storage_key).await?;
        if current.is_some_and(|s| s.status == Aborting) {
            return Err(ServiceError::conflict(codes::UPLOAD_NOT_OPEN, "the upload was cancelled or has expired"));
        }
        // Another report (or a master that died recording it, until its lease runs out) holds
        // the session: the node reports again and gets the settled answer, or takes over.
        return Err(ServiceError::new(
            ErrorKind::Unavailable,
            codes::UPLOAD_FINISHING,
            "the upload is being recorded; report again",
        ));
    };
    let recorded = under_lease(ctx, session.id, &claim, async {
        let policy = policies::find(ctx, session.policy_id).await?;
        let store = policies::store(ctx, &policy).await?;
        let staged = staged_blob(ctx, &session, &claim, store, report.blake3.as_str(), true)?;
        if report.size != session.declared_size as u64 {
            // The node assembled something else than was declared: refuse and release everything.
            let wrong = ServiceError::conflict(
                codes::UPLOAD_WRONG_LENGTH,
                format!("the node holds {} bytes, {} were declared", report.size, session.declared_size),
            );
            return Err(staged.discard(wrong).await);
        }
        if let Some(refused) = refusal_on_completion(ctx, &session, &policy).await? {
            return Err(staged.discard(refused).await);
        }
        let handle = NodeReport { node_id, handle: &report.session_id };
        record_upload(ctx, &session, &claim, staged, Some(handle)).await
    })
    .await;
    match recorded {
        Ok((object, duplicate)) => Ok((!duplicate, DirectUploadDone { completed: true, object: Some(object) })),
        Err(err) => {
            // Settled or released already when it got that far; otherwise the next report retries.
            give_up_claim(ctx, session.id, &claim).await;
            Err(err)
        }
    }
}

/// Drops staged bytes nothing will complete; a failure is logged and left to the collector.
async fn abort_staged(store: &dyn BlobStore, upload: &StagedUpload) {
    if let Err(err) = store.abort_upload(upload).await {
        tracing::warn!(key = %upload.key, error = %err, "could not drop staged upload bytes; the collector will");
    }
}

/// Gives a claim back after a failed finish, so a retry need not wait for its lease to run out.
async fn give_up_claim(ctx: &Context, session_id: UploadId, claim: &Claim) {
    if let Err(err) = db::uploads::release_claim(ctx.db(), session_id, &claim.token).await {
        tracing::warn!(session = %session_id, error = %err, "could not give up an upload claim; it lapses with its lease");
    }
}

/// Cancels a session: its reservation and its staged bytes are released. A session left
/// `finishing` by a dead master can be cancelled once the claim's lease ran out.
pub async fn abort(ctx: &Context, owner: UserId, id: UploadId) -> ServiceResult<()> {
    let session = load(ctx, owner, id).await?;
    let claim = take_claim(ctx, &session, Aborting, now_ms()).await?.ok_or_else(being_completed)?;
    drop_session(ctx, &session, &claim).await
}

/// Ends a session claimed for aborting: the row and the reservation first, then its bytes.
async fn drop_session(ctx: &Context, session: &SessionRow, claim: &Claim) -> ServiceResult<()> {
    if !ingest::end_session(ctx, session.id, &claim.token, session.owner_id, session.declared_size).await? {
        return Ok(());
    }
    let policy = policies::find(ctx, session.policy_id).await?;
    let store = policies::store(ctx, &policy).await?;
    if let Err(err) = store.abort_upload(&staged(session)?).await {
        tracing::warn!(session = %session.id, error = %err, "could not drop staged bytes; the collector will");
    }
    if session.status == Finishing {
        // A finisher that died may have completed the blob already; no row references it.
        let key = StorageKey::parse(&session.storage_key)?;
        if let Err(err) = store.delete(&key).await {
            tracing::warn!(session = %session.id, error = %err, "could not drop a completed blob; the collector will");
        }
    }
    Ok(())
}

/// Expires sessions whose time ran out before `now`: reservations and staged bytes are
/// released. A session claimed by a live request is left to it. Answers how many were reaped.
pub async fn reap_expired(ctx: &Context, now: i64) -> ServiceResult<usize> {
    let stale_before = now - claim_lease(ctx).as_millis() as i64;
    let mut reaped = 0;
    loop {
        let sessions = db::uploads::expired(ctx.db(), now, stale_before, 100).await?;
        if sessions.is_empty() {
            return Ok(reaped);
        }
        for session in &sessions {
            // Claim it first: a chunk arriving at the same moment must not race the reaper.
            if let Some(claim) = take_claim(ctx, session, Aborting, now).await? {
                drop_session(ctx, session, &claim).await?;
                reaped += 1;
            }
        }
    }
}

/// Recovers sessions whose claim went stale as of `now` (its master died finishing or
/// aborting): an abort is carried out; a finish of chunks the master received is taken over
/// and completed, so the file appears and its reservation becomes its usage; a storage node's
/// session goes back to `uploading`, so the node's next report records it. Runs at start-up
/// and with the reaper. Answers how many sessions were recovered.
pub async fn recover_stale_claims(ctx: &Context, now: i64) -> ServiceResult<usize> {
    const BATCH: usize = 100;
    let stale_before = now - claim_lease(ctx).as_millis() as i64;
    let mut recovered = 0;
    loop {
        let sessions = db::uploads::stale_claims(ctx.db(), stale_before, BATCH as i64).await?;
        for session in &sessions {
            let to = if session.status == Aborting { Aborting } else { Finishing };
            let Some(claim) = take_claim(ctx, session, to, now).await? else { continue };
            if to == Aborting {
                drop_session(ctx, session, &claim).await?;
            } else if session.node_id.is_some() {
                db::uploads::release_claim(ctx.db(), session.id, &claim.token).await?;
            } else if let Err(err) = finish_claimed(ctx, session, &claim).await {
                // The claim was given up: the client's retry (or the expiry) settles it.
                tracing::warn!(session = %session.id, error = %err, "could not finish an upload a dead master left");
                continue;
            }
            recovered += 1;
        }
        // Every session seen left the stale set (finished, dropped, released or claimed anew).
        if sessions.len() < BATCH {
            return Ok(recovered);
        }
    }
}
