//! Background work of the master: task workers over the persistent queue (`worker`), and
//! periodic jobs, each with a name, a unit of work and a shutdown path.

pub mod worker;

use std::future::Future;
use std::time::{Duration, Instant};

use nubo_model::domain::time::now_ms;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::{capacity::redeem, capacity::storage_packs, content::downloads, content::uploads, ops::maintenance};

/// How often packs are marked expired and temporary groups ended: a user returns to their
/// group within a minute of the end.
const GRANTS_EVERY: Duration = Duration::from_secs(60);

/// How often the source-link downloads counted in memory are written down.
const SOURCE_COUNTS_EVERY: Duration = Duration::from_secs(5);

/// Runs `work` every `every` until `shutdown` is cancelled; a unit of work in progress is
/// allowed to finish. Failures are logged and the job carries on at the next tick.
pub fn spawn_periodic<F, Fut>(
    name: &'static str,
    every: Duration,
    shutdown: CancellationToken,
    mut work: F,
) -> JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = anyhow::Result<usize>> + Send,
{
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = ticks.tick() => {}
            }
            match work().await {
                Ok(0) => {}
                Ok(done) => tracing::info!(job = name, done, "periodic job did work"),
                Err(err) => tracing::warn!(job = name, error = %err, "periodic job failed; retrying next time"),
            }
        }
        tracing::debug!(job = name, "periodic job stopped");
    })
}

/// Starts the task workers and the periodic jobs.
pub fn start(state: &Context, shutdown: &CancellationToken) -> Vec<JoinHandle<()>> {
    let config = state.config();
    let timing = worker::WorkerTiming {
        lease: Duration::from_secs(config.task_lease_seconds.max(1)),
        poll: Duration::from_millis(config.task_poll_millis.max(10)),
    };
    let host = uuid::Uuid::new_v4().simple().to_string();
    let mut handles: Vec<JoinHandle<()>> = (0..config.task_workers)
        .map(|n| {
            tokio::spawn(worker::run_worker(state.clone(), format!("{}-{n}", &host[..8]), timing, shutdown.clone()))
        })
        .collect();
    let hourly = Duration::from_secs(3600);
    let every = |name: &'static str, period: Duration, job: fn(Context) -> BoxedJob| {
        let state = state.clone();
        spawn_periodic(name, period, shutdown.clone(), move || job(state.clone()))
    };
    if state.db().backend() == nubo_model::db::Backend::Sqlite {
        let state = state.clone();
        let watch = std::sync::Arc::new(std::sync::Mutex::new(nubo_model::db::LogWatch::default()));
        let checkpoint = move || {
            let (state, watch) = (state.clone(), std::sync::Arc::clone(&watch));
            async move {
                let seen = state.db().checkpoint().await?;
                let idle =
                    watch.lock().unwrap_or_else(std::sync::PoisonError::into_inner).observe(seen, Instant::now());
                if idle && state.db().empty_log()? {
                    tracing::debug!("emptied SQLite's write-ahead log after an idle spell");
                }
                Ok(0)
            }
        };
        handles.push(spawn_periodic(
            "sqlite-checkpoint",
            nubo_model::db::SQLITE_CHECKPOINT_EVERY,
            shutdown.clone(),
            checkpoint,
        ));
    }
    // Runs at start-up (the first tick is immediate) and at least once per claim lease, so a
    // claim a dead master left is recovered soon after its lease runs out.
    let reaper_every = Duration::from_secs(config.upload_claim_lease_seconds.clamp(1, 60));
    handles.push(every("upload-session-reaper", reaper_every, |s| {
        Box::pin(async move {
            let recovered = uploads::recover_stale_claims(&s, now_ms()).await?;
            Ok(recovered + uploads::reap_expired(&s, now_ms()).await?)
        })
    }));
    handles.push(every("blob-collector", hourly, |s| {
        Box::pin(async move { Ok(maintenance::collect_blobs(&s, now_ms(), maintenance::BLOB_GRACE).await?) })
    }));
    handles.push(every("thumbnail-sweep", hourly, |s| {
        Box::pin(async move { Ok(crate::content::thumbnails::sweep(&s, now_ms()).await?) })
    }));
    handles.push(every("trash-purge", hourly, |s| {
        Box::pin(async move { Ok(maintenance::purge_expired_trash(&s, now_ms()).await?) })
    }));
    let node_check_every = Duration::from_secs(config.node_check_seconds.max(1));
    handles.push(every("node-health-check", node_check_every, |s| {
        // Status changes are logged by the check itself; a healthy fleet stays quiet.
        Box::pin(async move {
            crate::storage::nodes::check_all(&s).await?;
            Ok(0)
        })
    }));
    handles.push(every("source-download-counts", SOURCE_COUNTS_EVERY, |s| {
        // Routine: written quietly (the job's log line is for work worth an operator's look).
        Box::pin(async move {
            downloads::flush_source_downloads(&s).await?;
            Ok(0)
        })
    }));
    handles.push(every("storage-pack-expiry", GRANTS_EVERY, |s| {
        Box::pin(async move { Ok(storage_packs::mark_expired(&s, now_ms()).await?) })
    }));
    handles.push(every("temporary-group-end", GRANTS_EVERY, |s| {
        Box::pin(async move { Ok(redeem::end_temporary_groups(&s, now_ms()).await?) })
    }));
    handles.push(every("summary-fold", Duration::from_secs(60), |s| {
        // Routine and quiet, like the download counts: folding keeps the summary's reads short.
        Box::pin(async move {
            crate::ops::summary::fold(&s).await?;
            Ok(0)
        })
    }));
    handles.push(every("wopi-discovery-refresh", hourly, |s| {
        // Each application is fetched again once its discovery is older than REFRESH_EVERY (a
        // failure is recorded on the application, for the administrator to read).
        Box::pin(async move { Ok(crate::office::wopi_apps::refresh_due(&s).await?) })
    }));
    handles.push(every("events-prune", hourly, |s| {
        Box::pin(async move { Ok(crate::tree::events::prune_now(&s).await?) })
    }));
    handles.push(every("version-prune", hourly, |s| {
        // Versions beyond their group's count or age; their bytes go back to their owners.
        Box::pin(async move { Ok(crate::content::versions::prune(&s, now_ms()).await?) })
    }));
    handles.push(every("activity-prune", hourly, |s| {
        // Deletes in batches, so a long backlog never holds the write lock for long.
        Box::pin(async move { prune_activity(&s, now_ms()).await })
    }));
    handles.push(every("refresh-token-cleanup", hourly, |s| {
        Box::pin(async move { Ok(maintenance::clean_refresh_tokens(&s, now_ms()).await? as usize) })
    }));
    handles
}

type BoxedJob = std::pin::Pin<Box<dyn Future<Output = anyhow::Result<usize>> + Send>>;

/// Deletes the activity rows older than the `activity_retention_days` setting (90 while unset
/// or unreadable) as of `now`; answers how many.
pub async fn prune_activity(ctx: &Context, now: nubo_model::domain::time::Millis) -> anyhow::Result<usize> {
    let days = crate::settings::site::current(ctx).await?.activity_retention_days;
    Ok(crate::audit::activity::prune(ctx, now, days.into()).await?)
}
