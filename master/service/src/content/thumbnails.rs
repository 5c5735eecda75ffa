//! Image thumbnails: what `GET /object/{id}/thumbnail` answers (the JPEG, 304, "being made",
//! or why there is none), and the `THUMBNAIL` task that makes one, on the storage node that
//! holds the bytes when the policy is node-backed, else here. Thumbnails are keyed by content
//! hash and side, so identical files share one (see `db::thumbnails`).

use base64::Engine as _;
use futures_util::TryStreamExt;
use nubo_common::storage::StorageKey;
use nubo_common::thumbnail::{self, Refusal, RenderError};
use nubo_model::db::blobs::BlobRow;
use nubo_model::db::policies::PolicyRow;
use nubo_model::db::{self, thumbnails as rows};
use nubo_model::domain::task::{TaskProgress, TaskProps, TaskType};
use nubo_model::domain::time::{Millis, now_ms};
use nubo_model::storage::node::NodeBlobStore;
use nubo_protocol::client::CallError;
use nubo_protocol::methods::ThumbnailRenderParams;
use nubo_protocol::rpc::ErrorCode;

use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::identity::avatars::matches_etag;
use crate::tasks::run::TaskFailure;
use crate::tree::access::Readable;
use crate::{storage::policies, tasks::queue};

/// Thumbnails never change for a given URL's ETag; the content behind an object may, so the
/// web app adds the object's version to the URL (see the API description).
pub const CACHE_CONTROL: &str = "private, max-age=31536000, immutable";
/// Seconds a client is asked to wait before asking again for a thumbnail being made.
pub const RETRY_AFTER_SECS: u64 = 1;
/// A pending thumbnail older than this lost its task (the sweep forgets it; the next request
/// starts again).
pub const STALE_PENDING: Millis = 3600 * 1000;
/// Bumped when thumbnails are drawn differently, so caches holding old ones miss.
const GENERATION: &str = "t1";

/// What `GET /object/{id}/thumbnail` answers.
#[derive(Debug)]
pub enum ThumbnailAnswer {
    /// The JPEG and its quoted, strong ETag.
    Image { jpeg: Vec<u8>, etag: String },
    /// The client's copy (named by `If-None-Match`) is current.
    NotModified { etag: String },
    /// A task is making it: ask again after `retry_after` seconds.
    Pending { retry_after: u64 },
}

/// The refusal with the stable code a client sees (422).
pub fn refusal_error(refusal: Refusal) -> ServiceError {
    let code = refusal_code(refusal);
    ServiceError::new(ErrorKind::Validation, code, refusal.to_string())
}

fn refusal_code(refusal: Refusal) -> &'static str {
    match refusal {
        Refusal::NotImage => codes::THUMBNAIL_NOT_IMAGE,
        Refusal::TooManyPixels => codes::THUMBNAIL_TOO_MANY_PIXELS,
        Refusal::TooLarge => codes::THUMBNAIL_TOO_LARGE,
        Refusal::Timeout => codes::THUMBNAIL_TIMEOUT,
        Refusal::Other => codes::THUMBNAIL_FAILED,
    }
}

fn refusal_of_code(code: &str) -> Refusal {
    match code {
        codes::THUMBNAIL_NOT_IMAGE => Refusal::NotImage,
        codes::THUMBNAIL_TOO_MANY_PIXELS => Refusal::TooManyPixels,
        codes::THUMBNAIL_TOO_LARGE => Refusal::TooLarge,
        codes::THUMBNAIL_TIMEOUT => Refusal::Timeout,
        _ => Refusal::Other,
    }
}

/// The side a `size` parameter names: one of [`thumbnail::SIDES`], else 422.
pub fn parse_side(size: u32) -> ServiceResult<u32> {
    if thumbnail::is_supported_side(size) {
        Ok(size)
    } else {
        Err(ServiceError::new(
            ErrorKind::Validation,
            codes::THUMBNAIL_SIZE_UNSUPPORTED,
            format!("size must be one of {:?}", thumbnail::SIDES),
        ))
    }
}

/// The ETag of a content's thumbnail: a function of the content hash and the side alone, so
/// it is known (and a 304 answered) without reading the thumbnail.
fn etag_of(blake3: &str, side: u32) -> String {
    format!("\"{GENERATION}-{}-{side}\"", &blake3[..blake3.len().min(32)])
}

/// `GET /object/{id}/thumbnail?size=`: the thumbnail of a file the caller may read. The
/// first request for a content queues its `THUMBNAIL` task and answers pending; a file that
/// cannot have one answers 422 with the reason, also when it was found out earlier.
pub async fn serve(
    ctx: &Context,
    file: &Readable,
    side: u32,
    if_none_match: Option<&str>,
) -> ServiceResult<ThumbnailAnswer> {
    let side = parse_side(side)?;
    let row = file.row();
    if row.is_folder() || !thumbnail::has_image_extension(&row.name) {
        return Err(refusal_error(Refusal::NotImage));
    }
    let blob_id =
        row.physical_file_id.as_deref().ok_or_else(|| ServiceError::internal(anyhow::anyhow!("file without blob")))?;
    let blob = db::blobs::find(ctx.db(), blob_id)
        .await?
        .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("blob row {blob_id} missing")))?;
    let blake3 = blob.blake3.clone().ok_or_else(|| ServiceError::internal(anyhow::anyhow!("blob without hash")))?;
    if blob.size as u64 > thumbnail::MAX_SOURCE_BYTES {
        return Err(refusal_error(Refusal::TooLarge));
    }
    let etag = etag_of(&blake3, side);
    if if_none_match.is_some_and(|header| matches_etag(header, &etag)) {
        return Ok(ThumbnailAnswer::NotModified { etag });
    }
    match rows::find(ctx.db(), &blake3, i64::from(side)).await? {
        Some(found) if found.state == rows::READY => {
            let jpeg = found.image.ok_or_else(|| ServiceError::internal(anyhow::anyhow!("ready without image")))?;
            Ok(ThumbnailAnswer::Image { jpeg, etag })
        }
        Some(found) if found.state == rows::FAILED => {
            Err(refusal_error(refusal_of_code(found.error_code.as_deref().unwrap_or_default())))
        }
        Some(_) => Ok(ThumbnailAnswer::Pending { retry_after: RETRY_AFTER_SECS }),
        None => {
            start(ctx, &blob, &blake3, side).await?;
            Ok(ThumbnailAnswer::Pending { retry_after: RETRY_AFTER_SECS })
        }
    }
}

/// Queues the task making the thumbnail, unless another request just did.
async fn start(ctx: &Context, blob: &BlobRow, blake3: &str, side: u32) -> ServiceResult<()> {
    let now = now_ms();
    let props = TaskProps {
        blob_id: Some(blob.id.clone()),
        blake3: Some(blake3.to_owned()),
        side: Some(side),
        ..TaskProps::default()
    };
    let task = queue::new_row(TaskType::Thumbnail, None, props, now);
    if rows::start(ctx.db(), blake3, i64::from(side), &task, now).await? {
        tracing::debug!(task = %task.id, %blake3, side, "thumbnail queued");
    }
    Ok(())
}

fn transient(error: impl std::fmt::Display) -> TaskFailure {
    TaskFailure::Transient(error.to_string())
}

/// Runs one attempt of a `THUMBNAIL` task. A refusal is recorded and ends the task well (the
/// answer is known); a transient failure is retried, and on the `last_attempt` the pending row
/// is forgotten so a later request starts again.
pub async fn run(ctx: &Context, props: &TaskProps, last_attempt: bool) -> Result<TaskProgress, TaskFailure> {
    let permanent = |why: &str| TaskFailure::Permanent(why.to_owned());
    let blake3 = props.blake3.clone().ok_or_else(|| permanent("the task names no content"))?;
    let side = props.side.ok_or_else(|| permanent("the task names no side"))?;
    let blob_id = props.blob_id.clone().ok_or_else(|| permanent("the task names no blob"))?;
    let mut read_here = 0;
    let outcome = make(ctx, &blob_id, side, &mut read_here).await;
    let db = ctx.db();
    let side_key = i64::from(side);
    // `bytes_done` counts the image bytes this master read: none when a node drew it.
    let progress = TaskProgress { files_total: 1, files_done: 1, bytes_done: read_here, ..TaskProgress::default() };
    match outcome {
        Ok(Ok(jpeg)) => {
            rows::store_ready(db, &blake3, side_key, &jpeg, now_ms()).await.map_err(transient)?;
            tracing::info!(%blake3, side, bytes = jpeg.len(), "thumbnail made");
            Ok(progress)
        }
        Ok(Err(refusal)) => {
            rows::store_failed(db, &blake3, side_key, refusal_code(refusal), now_ms()).await.map_err(transient)?;
            tracing::info!(%blake3, side, %refusal, "no thumbnail for this content");
            Ok(progress)
        }
        Err(failure) => {
            if last_attempt || matches!(failure, TaskFailure::Permanent(_)) {
                rows::forget_pending(db, &blake3, side_key).await.map_err(transient)?;
            }
            Err(failure)
        }
    }
}

/// The thumbnail of the blob's content, or why there is none; `Err` when it could not be
/// tried now. `read_here` counts the bytes of the image read by this master.
async fn make(
    ctx: &Context,
    blob_id: &str,
    side: u32,
    read_here: &mut u64,
) -> Result<Result<Vec<u8>, Refusal>, TaskFailure> {
    let (blob, policy) = db::blobs::find_with_policy(ctx.db(), blob_id)
        .await
        .map_err(transient)?
        .filter(|(blob, _)| blob.ref_count > 0)
        .ok_or_else(|| TaskFailure::Permanent("the file was deleted meanwhile".into()))?;
    if blob.size as u64 > thumbnail::MAX_SOURCE_BYTES {
        return Ok(Err(Refusal::TooLarge));
    }
    let key = StorageKey::parse(&blob.storage_key).map_err(|e| TaskFailure::Permanent(e.to_string()))?;
    if policy.node_id.is_some() {
        match on_node(ctx, &policy, &key, side).await? {
            Some(outcome) => return Ok(outcome),
            // A node of an older version: draw it here instead.
            None => tracing::info!(policy = %policy.id, "the storage node cannot make thumbnails; making it here"),
        }
    }
    let store = policies::store(ctx, &policy).await.map_err(transient)?;
    let stream = store.get(&key, None).await.map_err(transient)?;
    let source: Vec<u8> = stream
        .try_fold(Vec::with_capacity(blob.size as usize), |mut all, piece| async move {
            all.extend_from_slice(&piece);
            Ok(all)
        })
        .await
        .map_err(transient)?;
    *read_here = source.len() as u64;
    Ok(match thumbnail::render_bounded(source, side).await {
        Ok(jpeg) => Ok(jpeg),
        Err(RenderError::Refused(refusal)) => Err(refusal),
        Err(RenderError::Crashed(detail)) => {
            tracing::error!(%detail, "the thumbnail decoder crashed");
            Err(Refusal::Other)
        }
    })
}

/// Asks the node holding the blob to draw it; `None` when the node does not know the method.
async fn on_node(
    ctx: &Context,
    policy: &PolicyRow,
    key: &StorageKey,
    side: u32,
) -> Result<Option<Result<Vec<u8>, Refusal>>, TaskFailure> {
    let node_id = policy.node_id.ok_or_else(|| TaskFailure::Permanent("the policy has no node".into()))?;
    let node = db::nodes::find(ctx.db(), node_id)
        .await
        .map_err(transient)?
        .ok_or_else(|| TaskFailure::Permanent("the storage node was deleted".into()))?;
    if !node.enabled {
        return Err(transient(format!("storage node {} is disabled", node.name)));
    }
    let store = NodeBlobStore::new(&node).map_err(TaskFailure::Permanent)?;
    let params = ThumbnailRenderParams { storage_key: key.to_string(), side };
    let answer = match store.rpc().call(params).await {
        Ok(answer) => answer,
        Err(CallError::Refused(error)) if error.code == ErrorCode::UnknownMethod => return Ok(None),
        Err(CallError::Refused(error)) if error.code == ErrorCode::NotFound => {
            return Err(TaskFailure::Permanent(format!("storage node {} lost the blob", node.name)));
        }
        Err(error) => return Err(transient(format!("storage node {}: {error}", node.name))),
    };
    if let Some(refusal) = answer.refusal {
        return Ok(Some(Err(refusal)));
    }
    let encoded = answer.jpeg_base64.ok_or_else(|| transient("the storage node answered neither image nor refusal"))?;
    let jpeg = base64::engine::general_purpose::STANDARD.decode(encoded).map_err(transient)?;
    Ok(Some(Ok(jpeg)))
}

/// Forgets thumbnails no file needs any more and pending ones whose task was lost.
pub async fn sweep(ctx: &Context, now: Millis) -> ServiceResult<usize> {
    Ok(rows::sweep(ctx.db(), now - STALE_PENDING).await? as usize)
}
