//! Task workers: claim a due task with a lease, keep the lease alive while it runs, and record
//! the outcome (completed, failed for good, retried with backoff, or canceled). On shutdown a
//! worker stops claiming, lets its task reach a checkpoint and hands it back to the queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nubo_model::db::tasks::TaskRow;
use nubo_model::db::{self};
use nubo_model::domain::task::{TaskProgress, TaskStatus, TaskType};
use nubo_model::domain::time::now_ms;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::content::migration;
use crate::context::Context;
use crate::tasks::run::{Checkpoint, TaskFailure};
use crate::{content::external, content::import, content::thumbnails};

/// Timing of the queue.
#[derive(Debug, Clone, Copy)]
pub struct WorkerTiming {
    /// How long a claim lasts without a heartbeat; a dead worker's task is taken over after it.
    pub lease: Duration,
    /// Pause between polls of an empty queue.
    pub poll: Duration,
}

/// Shared between a running task and its heartbeat.
struct Shared {
    progress: Mutex<TaskProgress>,
    cancel: AtomicBool,
    lost: AtomicBool,
}

struct Control {
    state: Context,
    task_id: String,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
}

#[async_trait::async_trait]
impl Checkpoint for Control {
    async fn checkpoint(&mut self, progress: &TaskProgress) -> Result<(), TaskFailure> {
        *self.shared.progress.lock().await = progress.clone();
        // A cancel request is read at every checkpoint (one primary-key read), not only with
        // the heartbeat, so a task stops at the next file.
        if let Ok(Some(task)) = db::tasks::find(self.state.db(), &self.task_id).await
            && task.cancel_requested
        {
            self.shared.cancel.store(true, Ordering::Relaxed);
        }
        let stop = self.shared.cancel.load(Ordering::Relaxed)
            || self.shared.lost.load(Ordering::Relaxed)
            || self.shutdown.is_cancelled();
        if stop { Err(TaskFailure::Stopped) } else { Ok(()) }
    }
}

/// Runs one worker until `shutdown`.
pub async fn run_worker(state: Context, name: String, timing: WorkerTiming, shutdown: CancellationToken) {
    while !shutdown.is_cancelled() {
        let now = now_ms();
        let claimed = db::tasks::claim(state.db(), &name, now, now + timing.lease.as_millis() as i64).await;
        match claimed {
            Ok(Some(task)) => run_task(&state, &name, timing, task, &shutdown).await,
            Ok(None) => {
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    _ = tokio::time::sleep(timing.poll) => {}
                }
            }
            Err(err) => {
                tracing::warn!(worker = %name, error = %err, "cannot claim tasks");
                tokio::time::sleep(timing.poll).await;
            }
        }
    }
}

fn backoff(attempts: i32) -> Duration {
    Duration::from_secs(2_u64.saturating_pow(attempts.clamp(0, 8) as u32).min(300))
}

async fn run_task(state: &Context, worker: &str, timing: WorkerTiming, task: TaskRow, shutdown: &CancellationToken) {
    tracing::info!(task = %task.id, kind = task.kind.as_str(), attempt = task.attempts, "task started");
    let shared = Arc::new(Shared {
        progress: Mutex::new(task.progress.clone()),
        cancel: AtomicBool::new(task.cancel_requested),
        lost: AtomicBool::new(false),
    });
    let beating = CancellationToken::new();
    let heartbeat = tokio::spawn(heartbeat(
        state.clone(),
        task.id.clone(),
        worker.to_owned(),
        timing,
        shared.clone(),
        beating.clone(),
    ));
    let mut control =
        Control { state: state.clone(), task_id: task.id.clone(), shared: shared.clone(), shutdown: shutdown.clone() };
    let outcome = execute(state, &task, &mut control).await;
    beating.cancel();
    let _ = heartbeat.await;

    let now = now_ms();
    let progress = shared.progress.lock().await.clone();
    let db = state.db();
    let recorded = match outcome {
        Ok(final_progress) => {
            db::tasks::finish(db, &task.id, worker, TaskStatus::Completed, None, &final_progress, now).await
        }
        Err(TaskFailure::Permanent(reason)) => {
            db::tasks::finish(db, &task.id, worker, TaskStatus::Error, Some(&reason), &progress, now).await
        }
        Err(TaskFailure::Transient(reason)) if task.attempts >= task.max_attempts => {
            let reason = format!("gave up after {} attempts: {reason}", task.attempts);
            db::tasks::finish(db, &task.id, worker, TaskStatus::Error, Some(&reason), &progress, now).await
        }
        Err(TaskFailure::Transient(reason)) => {
            let run_after = now + backoff(task.attempts).as_millis() as i64;
            db::tasks::requeue(db, &task.id, worker, &reason, run_after, now).await
        }
        Err(TaskFailure::Stopped) if shared.lost.load(Ordering::Relaxed) => Ok(false),
        Err(TaskFailure::Stopped) if shared.cancel.load(Ordering::Relaxed) => {
            db::tasks::finish(db, &task.id, worker, TaskStatus::Canceled, None, &progress, now).await
        }
        // Shutting down: hand the task back so the next worker starts it at once.
        Err(TaskFailure::Stopped) => {
            db::tasks::requeue(db, &task.id, worker, "interrupted by shutdown", now, now).await
        }
    };
    match recorded {
        Ok(true) => tracing::info!(task = %task.id, "task ended"),
        Ok(false) => tracing::warn!(task = %task.id, "task lease was lost; another worker owns it now"),
        Err(err) => {
            tracing::error!(task = %task.id, error = %err, "cannot record the task's outcome; its lease will expire")
        }
    }
}

async fn execute(state: &Context, task: &TaskRow, control: &mut Control) -> Result<TaskProgress, TaskFailure> {
    let owner = task.owner_id;
    match task.kind {
        TaskType::PolicyMigrate => migration::run(state, owner, &task.props, control).await,
        TaskType::ExternalDownload => external::run(state, &task.id, owner, &task.props, control).await,
        TaskType::Thumbnail => thumbnails::run(state, &task.props, task.attempts >= task.max_attempts).await,
        TaskType::Import => import::run(state, owner, &task.props, control).await,
    }
}

/// Extends the lease every third of its length, saves progress, and notices a cancel request
/// or a lost lease, until `done`.
async fn heartbeat(
    state: Context,
    id: String,
    worker: String,
    timing: WorkerTiming,
    shared: Arc<Shared>,
    done: CancellationToken,
) {
    let every = timing.lease / 3;
    loop {
        tokio::select! {
            _ = done.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let now = now_ms();
        let progress = shared.progress.lock().await.clone();
        match db::tasks::heartbeat(state.db(), &id, &worker, now + timing.lease.as_millis() as i64, &progress, now)
            .await
        {
            Ok(Some(cancel)) => shared.cancel.store(cancel, Ordering::Relaxed),
            Ok(None) => {
                shared.lost.store(true, Ordering::Relaxed);
                return;
            }
            Err(err) => tracing::warn!(task = %id, error = %err, "heartbeat failed"),
        }
    }
}
