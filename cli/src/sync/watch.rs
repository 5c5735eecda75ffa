//! `nubo sync --watch`: a first run, then another whenever something changes, on either
//! side: local changes come from the file-system watcher (`notify`), remote ones from the
//! change-event stream (`GET /events?since=<cursor>`, reconnected from the last cursor seen; a
//! cursor too old, 410, just means the next run's full listing is the truth). Changes are
//! debounced: a run starts once nothing new arrived for a moment. Each run is a full
//! reconcile, so a missed event can delay a change but never lose one.

use std::path::Path;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use notify::{RecursiveMode, Watcher};
use serde_json::Value;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use super::Pair;
use super::scan::is_temporary_name;
use crate::client::Api;
use crate::error::{CliError, CliResult, ExitKind};

/// Quiet time after the last change before a run starts.
const DEBOUNCE: Duration = Duration::from_millis(250);

/// Whether a change is this CLI's own: a temporary file, or its configuration and state.
fn is_ours(path: &Path, own: &[std::path::PathBuf]) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(is_temporary_name) || own.iter().any(|o| path.starts_with(o))
}

pub async fn watch(pair: &Pair<'_>) -> CliResult<Value> {
    let (wake, mut woken) = unbounded_channel::<()>();
    let local_wake = wake.clone();
    let own: Vec<std::path::PathBuf> = pair.own.iter().map(|relative| pair.root.join(relative)).collect();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && event.paths.iter().any(|p| !is_ours(p, &own))
        {
            let _ = local_wake.send(());
        }
    })
    .map_err(|e| CliError::new(ExitKind::Failed, format!("cannot watch {}: {e}", pair.root.display())))?;
    watcher
        .watch(&pair.root, RecursiveMode::Recursive)
        .map_err(|e| CliError::new(ExitKind::Failed, format!("cannot watch {}: {e}", pair.root.display())))?;
    let since = pair.state.cursor()?;
    let events = tokio::spawn(follow_events(pair.api.clone(), since, wake.clone()));
    // The first run, with the watcher already on: a change made during it starts another.
    let _ = wake.send(());
    let mut attempt = 0;
    let outcome = loop {
        if woken.recv().await.is_none() {
            break Ok(Value::Null);
        }
        while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, woken.recv()).await {}
        match pair.run_once().await {
            Ok(report) => {
                attempt = 0;
                if !report.replan.is_empty() {
                    let _ = wake.send(());
                }
                // Scripts get a summary after every run (a sign the side is in step again).
                if pair.output.json || !report.done.is_empty() || !report.converged() {
                    let _ = super::finish(&report, pair.output).map_err(|err| eprintln!("{err}"));
                }
            }
            // The server is away: try again later (local changes stay where they are).
            Err(err) if err.is_transient() => {
                attempt = (attempt + 1).min(6);
                eprintln!("{err}");
                tokio::time::sleep(crate::client::backoff(attempt)).await;
                let _ = wake.send(());
            }
            Err(err) => break Err(err),
        }
    };
    events.abort();
    outcome
}

/// Wakes the loop on every remote change, reconnecting after a lost connection.
async fn follow_events(api: Api, mut since: Option<i64>, wake: UnboundedSender<()>) {
    let mut attempt = 0;
    loop {
        let url = match since {
            Some(cursor) => api.url(&format!("/events?since={cursor}")),
            None => api.url("/events"),
        };
        match api.send(|http| http.get(&url)).await {
            Ok(response) => {
                attempt = 0;
                let mut events = response.bytes_stream().eventsource();
                while let Some(Ok(event)) = events.next().await {
                    if event.event == "change" {
                        since = event.id.parse().ok().or(since);
                        if wake.send(()).is_err() {
                            return;
                        }
                    }
                }
            }
            // Too old, or beyond the server's newest (a restored server): the next run lists
            // everything anyway (and distrusts what was agreed); follow from now on.
            Err(err) if err.status == Some(410) || err.code.as_deref() == Some("events.cursor_ahead") => {
                since = None;
                let _ = wake.send(());
            }
            Err(_) => attempt += 1,
        }
        tokio::time::sleep(crate::client::backoff(attempt.clamp(1, 6))).await;
    }
}
