//! Finished uploads reported to the master (`upload_complete`) until it answers, and the sweep
//! that resumes pending reports after a restart and forgets expired sessions. The report is
//! idempotent on the master, so sending it again after a lost answer creates nothing twice.

use std::time::Duration;

use nubo_common::hash;
use nubo_common::storage::{BlobStore, StorageKey};
use nubo_protocol::methods::{Blake3Hex, UploadCompleteParams};
use nubo_protocol::rpc::{ErrorCode, RpcError};
use nubo_protocol::unix_now;
use serde_json::json;

use crate::sessions::{ReportOutcome, SessionRecord};
use crate::state::Shared;

/// How often the sweep runs.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(60);
/// How long after its expiry a session's files stay (for a client asking about the outcome).
const EXPIRED_GRACE_SECS: u64 = 3600;

/// Starts reporting `session_id` in the background unless a report of it is already running.
pub fn spawn(node: &Shared, session_id: &str) {
    {
        let mut reporting = node.reporting.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !reporting.insert(session_id.to_owned()) {
            return;
        }
    }
    let node = node.clone();
    let session_id = session_id.to_owned();
    tokio::spawn(async move {
        tokio::select! {
            reported = report(&node, &session_id) => {
                if let Err(error) = reported {
                    tracing::warn!(session = %session_id, %error, "completion report not settled; the sweep retries it");
                }
            }
            // The node is stopping: the report resumes from the session file at the next start.
            () = node.shutdown.cancelled() => {}
        }
        node.reporting.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(&session_id);
        node.reported.notify_waiters();
    });
}

/// Waits up to `wait` for the master's answer about `session_id`; `None` when still pending.
pub async fn await_outcome(node: &Shared, session_id: &str, wait: Duration) -> Option<ReportOutcome> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        // Register for the wake-up before looking, so an answer landing in between is not missed.
        let notified = node.reported.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Ok(Some(record)) = node.sessions.load(session_id).await
            && record.outcome.is_some()
        {
            return record.outcome;
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return None;
        }
    }
}

async fn report(node: &Shared, session_id: &str) -> Result<(), String> {
    let master = node.master.as_ref().ok_or("no master_url is configured")?;
    let mut record = node.sessions.load(session_id).await.map_err(|e| e.to_string())?.ok_or("session is gone")?;
    if !record.completed || record.outcome.is_some() {
        return Ok(());
    }
    let receipts = node.sessions.receipts(session_id).await.map_err(|e| e.to_string())?;
    let chaining_values: Vec<String> = receipts.into_iter().map(|receipt| receipt.chaining_value).collect();
    let content_hash = hash::combine(&chaining_values, record.staged.chunk_size, record.staged.size)
        .map_err(|e| format!("combining chunk hashes: {e}"))?;
    let params = UploadCompleteParams {
        session_id: session_id.to_owned(),
        size: record.staged.size,
        blake3: Blake3Hex::parse(&content_hash).map_err(|e| e.to_string())?,
        storage_key: record.staged.key.clone(),
    };
    let retry_max = Duration::from_secs(node.config.report_retry_max_seconds.max(1));
    let answer = master.call_until_answered(params, Duration::from_millis(500), retry_max).await;
    let outcome = match answer {
        Ok(result) => {
            if !result.keep_blob {
                tracing::info!(session = %session_id, "the master had this content already; dropping the copy");
                delete_blob(node, &record).await;
            }
            ReportOutcome { status: 200, body: result.client_body }
        }
        // A key mismatch is a configuration fault an operator will fix: keep the bytes and
        // report again at the next sweep rather than throw an upload away.
        Err(error) if error.code == ErrorCode::Unauthorized => {
            tracing::error!(session = %session_id, %error, "the master refuses this node's signature");
            return Err(error.to_string());
        }
        Err(error) => {
            tracing::warn!(session = %session_id, %error, "the master refused the upload; dropping its bytes");
            delete_blob(node, &record).await;
            refusal(&error)
        }
    };
    record.outcome = Some(outcome);
    node.sessions.save(&record).await.map_err(|e| e.to_string())?;
    tracing::info!(session = %session_id, "completion reported");
    Ok(())
}

/// The client-facing error for a refused report: the master's own body and status when it sent
/// them (a quota refusal stays 507, a size refusal 413), else a status derived from the
/// protocol code (a master that does not send one).
fn refusal(error: &RpcError) -> ReportOutcome {
    let relayed = error.status.filter(|status| (400..=599).contains(status));
    let status = match (relayed, error.code) {
        (Some(status), _) if error.data.is_some() => status,
        (_, ErrorCode::NotFound) => 404,
        (_, ErrorCode::Conflict) => 409,
        (_, ErrorCode::InvalidParams) => 422,
        _ => 502,
    };
    let body = error.data.clone().unwrap_or_else(
        || json!({"code": "upload.refused", "message": format!("the master refused the upload: {}", error.message)}),
    );
    ReportOutcome { status, body }
}

async fn delete_blob(node: &Shared, record: &SessionRecord) {
    if let Ok(key) = StorageKey::parse(&record.staged.key)
        && let Err(error) = node.store.delete(&key).await
    {
        tracing::warn!(key = %key, %error, "could not delete a blob the master does not want");
    }
}

/// One pass: resumes pending reports, drops sessions long expired (staged bytes included).
pub async fn sweep(node: &Shared) {
    let records = match node.sessions.list().await {
        Ok(records) => records,
        Err(error) => {
            tracing::warn!(%error, "cannot list upload sessions");
            return;
        }
    };
    let now = unix_now();
    for record in records {
        if record.expires_at.saturating_add(EXPIRED_GRACE_SECS) < now {
            if !record.completed
                && let Err(error) = node.store.abort_upload(&record.staged).await
            {
                tracing::warn!(session = %record.session_id, %error, "cannot drop the staged bytes of an expired session");
            }
            if let Err(error) = node.sessions.remove(&record.session_id).await {
                tracing::warn!(session = %record.session_id, %error, "cannot remove an expired session");
            }
        } else if record.completed && record.outcome.is_none() {
            spawn(node, &record.session_id);
        }
    }
}

/// Sweeps now and then every [`SWEEP_INTERVAL`] until the node stops.
pub async fn run_sweeper(node: Shared) {
    loop {
        sweep(&node).await;
        tokio::select! {
            () = node.shutdown.cancelled() => return,
            () = tokio::time::sleep(SWEEP_INTERVAL) => {}
        }
    }
}
