//! Background work of the master. For now: periodic jobs, each with a name, a unit of work and
//! a shutdown path (the persistent task queue arrives with the tasks feature).

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::app::AppState;
use crate::domain::time::now_ms;
use crate::service::uploads;

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

/// Starts the master's periodic jobs.
pub fn start(state: &AppState, shutdown: &CancellationToken) -> Vec<JoinHandle<()>> {
    let reaper_state = state.clone();
    vec![spawn_periodic("upload-session-reaper", Duration::from_secs(60), shutdown.clone(), move || {
        let state = reaper_state.clone();
        async move { Ok(uploads::reap_expired(&state, now_ms()).await?) }
    })]
}
