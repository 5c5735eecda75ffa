//! External downloads: a user asks for a URL to be fetched into a folder; the task queue runs
//! an `EXTERNAL_DOWNLOAD` task that hands the fetch to a storage node (which applies its own
//! address guard, the size limit and the timeout) and waits for the node's reports; the node's
//! `external_download_complete` creates the file, settles the quota and de-duplicates in one
//! transaction. Nothing is created, and no quota used, by a fetch that fails or is cancelled.

use std::time::Duration;

use nubo_common::storage::StorageKey;
use nubo_model::db;
use nubo_model::db::node_reports::{self as reports, COMPLETED, ExternalDownloadRow, FAILED, RUNNING};
use nubo_model::db::policies::PolicyRow;
use nubo_model::domain::ids::{GroupId, NodeId, UserId};
use nubo_model::domain::naming::{self, NamingContext};
use nubo_model::domain::object::ObjectName;
use nubo_model::domain::task::{TaskProgress, TaskProps, TaskType};
use nubo_model::domain::time::now_ms;
use nubo_model::storage::node::NodeBlobStore;
use nubo_protocol::client::CallError;
use nubo_protocol::methods::{
    ExternalDownloadCancelParams, ExternalDownloadCompleteParams, ExternalDownloadCreateParams,
    ExternalDownloadFailedParams, ExternalDownloadProgressParams,
};
use nubo_protocol::rpc::ErrorCode;
use uuid::Uuid;

use crate::content::ingest::{self, Charge, Hold, Plan, StagedBlob};
use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::tasks::queue::{self, TaskView};
use crate::tasks::run::{Checkpoint, TaskFailure};
use crate::tree::access::{self, Reach};
use crate::tree::files;
use crate::{identity::groups, storage::policies};

/// Longest URL accepted.
const MAX_URL_LEN: usize = 2048;
/// How often the worker looks at the fetch's state.
const POLL: Duration = Duration::from_millis(500);
/// A node silent for this long is presumed to have lost the fetch (restart): the attempt is
/// retried from the start.
const STALL_LIMIT: Duration = Duration::from_secs(120);

/// What the caller asked for.
pub struct NewExternalDownload {
    pub url: String,
    pub parent_id: Uuid,
    pub node_id: Option<Uuid>,
}

fn check_url(raw: &str) -> ServiceResult<String> {
    let invalid = |why: &str| ServiceError::validation("url", why.to_owned());
    if raw.len() > MAX_URL_LEN {
        return Err(invalid("the URL is longer than 2048 characters"));
    }
    let url = reqwest::Url::parse(raw.trim()).map_err(|_| invalid("not an absolute URL"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(invalid("only http and https URLs can be fetched"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("URLs with credentials are not accepted"));
    }
    Ok(url.to_string())
}

/// The caller's policy the fetched file lands in: one bound to `node` when given, else the
/// first of the group's policies that lives on a storage node.
async fn choose_policy(ctx: &Context, group_id: GroupId, node: Option<Uuid>) -> ServiceResult<PolicyRow> {
    let on_nodes = db::policies::of_group(ctx.db(), group_id).await?.into_iter().filter(|p| p.node_id.is_some());
    let mut candidates = on_nodes.filter(|p| node.is_none_or(|n| p.node_id == Some(n.into())));
    candidates.next().ok_or_else(|| match node {
        Some(_) => ServiceError::validation("node_id", "none of your storage policies keeps files on that node"),
        None => ServiceError::validation(
            "url",
            "external downloads run on storage nodes, and none of your storage policies uses one",
        ),
    })
}

/// Queues the fetch as a task after checking the URL's form, the folder and the policy.
pub async fn create(
    ctx: &Context,
    owner: UserId,
    group_id: GroupId,
    request: NewExternalDownload,
) -> ServiceResult<TaskView> {
    if !groups::permissions(ctx.db(), group_id).await?.external_download {
        return Err(ServiceError::new(
            ErrorKind::Forbidden,
            codes::FETCH_NOT_ALLOWED,
            "your group may not submit external downloads: ask an administrator for the permission",
        ));
    }
    let url = check_url(&request.url)?;
    access::writable(ctx, owner, request.parent_id.into(), Reach::Folder).await?;
    let policy = choose_policy(ctx, group_id, request.node_id).await?;
    let props = TaskProps {
        url: Some(url),
        parent_id: Some(request.parent_id),
        target_policy_id: Some(policy.id.into()),
        node_id: policy.node_id.map(Uuid::from),
        ..TaskProps::default()
    };
    queue::enqueue(ctx.db(), TaskType::ExternalDownload, Some(owner), &props).await
}

/// A file name from the URL's last path segment, else `download`.
fn name_from_url(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.path_segments().and_then(|mut s| s.next_back().map(str::to_owned)))
        .map(|segment| percent_encoding::percent_decode_str(&segment).decode_utf8_lossy().into_owned())
        .filter(|name| ObjectName::parse(name).is_ok())
        .unwrap_or_else(|| "download".to_owned())
}

fn transient(err: impl std::fmt::Display) -> TaskFailure {
    TaskFailure::Transient(err.to_string())
}

/// Runs one attempt of an `EXTERNAL_DOWNLOAD` task: starts the fetch on the node, then follows
/// the node's reports until the file exists, the fetch failed, or the task is stopped.
pub async fn run(
    ctx: &Context,
    task_id: &str,
    owner: Option<UserId>,
    props: &TaskProps,
    control: &mut dyn Checkpoint,
) -> Result<TaskProgress, TaskFailure> {
    let permanent = |why: &str| TaskFailure::Permanent(why.to_owned());
    let owner = owner.ok_or_else(|| permanent("the task has no owner"))?;
    let url = props.url.clone().ok_or_else(|| permanent("the task names no URL"))?;
    let policy_id = props.target_policy_id.ok_or_else(|| permanent("the task names no policy"))?;
    let policy = db::policies::find(ctx.db(), policy_id.into())
        .await
        .map_err(transient)?
        .ok_or_else(|| permanent("the storage policy was deleted"))?;
    let node_id = policy.node_id.ok_or_else(|| permanent("the policy is no longer on a storage node"))?;
    let node = db::nodes::find(ctx.db(), node_id)
        .await
        .map_err(transient)?
        .ok_or_else(|| permanent("the storage node was deleted"))?;
    if !node.enabled {
        return Err(transient(format!("storage node {} is disabled", node.name)));
    }
    let store = NodeBlobStore::new(&node).map_err(|e| TaskFailure::Permanent(e.to_string()))?;

    // The most the file may be: the policy's limit and what is left of the owner's quota now
    // (the quota is settled again, atomically, when the file is created).
    let user =
        db::users::find(ctx.db(), owner).await.map_err(transient)?.ok_or_else(|| permanent("the owner was deleted"))?;
    let capacity = db::users::capacity(ctx.db(), user.id, now_ms()).await.map_err(transient)?;
    let free = capacity.saturating_sub(user.storage).max(0) as u64;
    let max_size = if policy.max_size > 0 { free.min(policy.max_size as u64) } else { free };
    if max_size == 0 {
        return Err(permanent("your storage quota is used up"));
    }

    let context = NamingContext {
        user_id: owner.as_uuid(),
        original_name: &name_from_url(&url),
        now: time::OffsetDateTime::now_utc(),
    };
    let key = StorageKey::parse(&naming::storage_key(&policy.dir_name_rule, &policy.file_name_rule, &context))
        .map_err(|e| TaskFailure::Permanent(e.to_string()))?;
    let row = ExternalDownloadRow {
        task_id: task_id.to_owned(),
        node_id: node.id,
        policy_id: policy.id,
        storage_key: key.to_string(),
        state: RUNNING.to_owned(),
        downloaded: 0,
        total: None,
        object_id: None,
        keep_blob: None,
        error: None,
        updated_at: now_ms(),
    };
    reports::start_external_download(ctx.db(), &row).await.map_err(transient)?;
    let params = ExternalDownloadCreateParams {
        task_id: task_id.to_owned(),
        url,
        storage_key: key.to_string(),
        max_size,
        timeout_secs: None,
    };
    match store.rpc().call(params).await {
        Ok(_) => {}
        // The node's address guard or its checks refused the URL: retrying cannot help.
        Err(CallError::Refused(error)) if error.code == ErrorCode::InvalidParams => {
            if let Err(err) = reports::fail_external_download(ctx.db(), task_id, &error.message, now_ms()).await {
                tracing::warn!(task = %task_id, error = %err, "could not record the refused external download");
            }
            return Err(TaskFailure::Permanent(format!("the storage node refused the URL: {}", error.message)));
        }
        Err(error) => return Err(transient(format!("storage node {}: {error}", node.name))),
    }

    let mut progress = TaskProgress { files_total: 1, ..TaskProgress::default() };
    loop {
        if let Err(stop) = control.checkpoint(&progress).await {
            // Cancelled or shutting down: a cancel stops the node too (a shutdown lets it run;
            // the next attempt starts over).
            let cancelled = matches!(stop, TaskFailure::Stopped)
                && db::tasks::find(ctx.db(), task_id).await.ok().flatten().is_some_and(|t| t.cancel_requested);
            if cancelled {
                if let Err(err) = reports::fail_external_download(ctx.db(), task_id, "cancelled", now_ms()).await {
                    tracing::warn!(task = %task_id, error = %err, "could not record the cancelled external download");
                }
                cancel_on_node(&store, task_id).await;
            }
            return Err(stop);
        }
        tokio::time::sleep(POLL).await;
        let Some(state) = reports::external_download(ctx.db(), task_id).await.map_err(transient)? else {
            return Err(transient("the fetch record disappeared"));
        };
        progress.bytes_done = state.downloaded.max(0) as u64;
        progress.bytes_total = state.total.unwrap_or(0).max(0) as u64;
        match state.state.as_str() {
            COMPLETED => {
                progress.files_done = 1;
                progress.bytes_total = progress.bytes_done;
                progress.object_id = state.object_id.map(Uuid::from);
                return Ok(progress);
            }
            FAILED => return Err(TaskFailure::Permanent(state.error.unwrap_or_else(|| "the fetch failed".into()))),
            _ if now_ms() - state.updated_at > STALL_LIMIT.as_millis() as i64 => {
                cancel_on_node(&store, task_id).await;
                return Err(transient(format!("storage node {} stopped reporting on the fetch", node.name)));
            }
            _ => {}
        }
    }
}

/// Tells the node to stop a fetch; a node that does not hear it finds the task gone at its next
/// progress report, so a failure is only logged.
async fn cancel_on_node(store: &NodeBlobStore, task_id: &str) {
    if let Err(err) = store.rpc().call(ExternalDownloadCancelParams { task_id: task_id.to_owned() }).await {
        tracing::warn!(task = %task_id, error = %err, "could not tell the node to cancel an external download");
    }
}

/// A fetch the reporting node runs, or `not_found`.
async fn running_fetch(ctx: &Context, node_id: NodeId, task_id: &str) -> ServiceResult<ExternalDownloadRow> {
    reports::external_download(ctx.db(), task_id)
        .await?
        .filter(|row| row.node_id == node_id)
        .ok_or_else(|| ServiceError::not_found(codes::TASK_NOT_FOUND, "no such fetch on this node"))
}

/// A node's progress report; answers whether the node should stop (cancelled or ended).
pub async fn progress(ctx: &Context, node_id: NodeId, report: &ExternalDownloadProgressParams) -> ServiceResult<bool> {
    let total = report.total.map(|t| t.min(i64::MAX as u64) as i64);
    let downloaded = report.downloaded.min(i64::MAX as u64) as i64;
    let running =
        reports::external_download_progress(ctx.db(), &report.task_id, node_id, downloaded, total, now_ms()).await?;
    let cancel_requested = db::tasks::find(ctx.db(), &report.task_id).await?.is_none_or(|task| task.cancel_requested);
    Ok(!running || cancel_requested)
}

/// A node's failure report.
pub async fn failed(ctx: &Context, node_id: NodeId, report: &ExternalDownloadFailedParams) -> ServiceResult<()> {
    running_fetch(ctx, node_id, &report.task_id).await?;
    let reason = serde_json::to_value(report.reason).ok().and_then(|v| v.as_str().map(str::to_owned));
    let message = format!("{} ({})", report.message, reason.unwrap_or_default());
    reports::fail_external_download(ctx.db(), &report.task_id, &message, now_ms()).await?;
    Ok(())
}

/// A node's completion report: creates the file (a free name in the folder), settles the quota
/// and de-duplicates, all in one transaction. Answers whether the node keeps its blob. The
/// same report again gets the same answer; a report the quota or the folder cannot take ends
/// the fetch as failed and tells the node to drop the bytes.
pub async fn complete(ctx: &Context, node_id: NodeId, report: &ExternalDownloadCompleteParams) -> ServiceResult<bool> {
    let fetch = running_fetch(ctx, node_id, &report.task_id).await?;
    match fetch.state.as_str() {
        COMPLETED => return Ok(fetch.keep_blob.unwrap_or(true)),
        FAILED => return Ok(false),
        _ => {}
    }
    if report.storage_key != fetch.storage_key {
        return Err(ServiceError::conflict(codes::FETCH_WRONG_KEY, "the report names another blob"));
    }
    let task = db::tasks::find(ctx.db(), &report.task_id)
        .await?
        .ok_or_else(|| ServiceError::not_found(codes::TASK_NOT_FOUND, "no such task"))?;
    let props = &task.props;
    let owner = task.owner_id.ok_or_else(|| ServiceError::internal(anyhow::anyhow!("task without owner")))?;
    let parent = props.parent_id.ok_or_else(|| ServiceError::internal(anyhow::anyhow!("task without folder")))?;
    let refuse = |why: String| async move {
        reports::fail_external_download(ctx.db(), &report.task_id, &why, now_ms()).await?;
        Ok::<bool, ServiceError>(false)
    };
    if task.cancel_requested {
        return refuse("cancelled".to_owned()).await;
    }
    let Ok(folder) = access::writable(ctx, owner, parent.into(), Reach::Folder).await else {
        return refuse("the destination folder is gone".to_owned()).await;
    };
    let wanted = report
        .file_name
        .as_deref()
        .and_then(|n| ObjectName::parse(n).ok())
        .or_else(|| ObjectName::parse(&props.url.as_deref().map_or_else(|| "download".to_owned(), name_from_url)).ok())
        .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("no name for the fetched file")))?;
    let name = files::free_name(ctx.db(), folder.row().id, &wanted).await?;
    let name = name.as_str();
    let size = report.size.min(i64::MAX as u64) as i64;
    let capacity = db::users::capacity(ctx.db(), owner, now_ms()).await?;
    let store = policies::store(ctx, &policies::find(ctx, fetch.policy_id).await?).await?;
    let key = StorageKey::parse(&fetch.storage_key)?;
    let hold = Hold::Fetch { task_id: report.task_id.clone() };
    // The node hashed the fetched bytes whole as it stored them (one stream, `put_stream`).
    let staged =
        StagedBlob::new(ctx, store, key, fetch.policy_id, hold).holding(size, report.blake3.as_str()).hashed_whole();
    let (task_id, now) = (report.task_id.as_str(), now_ms());
    let plan = Plan::new_file(owner, folder.row().id, name, Charge { amount: size, capacity })
        .with_step(|object_id| reports::complete_external_download_step(task_id, object_id, size, now));
    match ingest::commit(ctx, staged, plan).await {
        Ok(Some(file)) => Ok(!file.duplicate),
        // Another report settled it meanwhile: answer as it did.
        Ok(None) => {
            let settled = reports::external_download(ctx.db(), task_id).await?;
            Ok(settled.and_then(|row| row.keep_blob).unwrap_or(false))
        }
        // The fetch ended as failed with the reason (see `Hold::Fetch`): the node drops the bytes.
        Err(refused) if refused.kind != ErrorKind::Internal => Ok(false),
        Err(failed) => Err(failed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_must_be_http_without_credentials() {
        assert!(check_url("https://example.com/a.iso").is_ok());
        for bad in ["ftp://example.com/a", "file:///etc/passwd", "https://u:p@example.com/", "not a url"] {
            assert!(check_url(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn names_come_from_the_last_path_segment() {
        assert_eq!(name_from_url("https://example.com/dir/r%C3%A9sum%C3%A9.pdf?x=1"), "résumé.pdf");
        assert_eq!(name_from_url("https://example.com/"), "download");
    }
}
