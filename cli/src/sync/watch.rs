//! `nubo sync --watch`: a first run, then another whenever something changes, on either
//! side: local changes come from the file-system watcher (`notify`), remote ones from the
//! change-event stream (`GET /events?since=<cursor>`, reconnected from the last cursor seen; a
//! cursor too old, 410, just means the next run's full listing is the truth). Changes are
//! debounced: a run starts once nothing new arrived for a moment. The watcher's journal (the
//! paths it saw change) is the local change list: after a run that ended in step, the next one
//! starts from the agreed state and looks again only at those paths, so a steady state does not
//! walk the tree. The first run, a run after one that did not end in step, a journal the watcher
//! could not keep (its queue overflowed, a name that is not UTF-8) and one run every
//! [`FULL_CHECK`] walk everything.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use notify::{RecursiveMode, Watcher};
use serde_json::Value;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use super::scan::is_temporary_name;
use super::{LocalScan, Pair};
use crate::client::Api;
use crate::error::{CliError, CliResult, ExitKind};

/// Quiet time after the last change before a run starts.
const DEBOUNCE: Duration = Duration::from_millis(250);

/// How often a watched run walks the whole folder even when the journal is whole: a change
/// the watcher never reported (a file system that does not report everything, a lost event)
/// is found within this time.
const FULL_CHECK: Duration = Duration::from_secs(600);

/// The local paths the watcher saw change since the last run took them.
#[derive(Default)]
struct Journal {
    changed: BTreeSet<String>,
    /// The journal cannot be trusted to be whole: the next run walks everything.
    incomplete: bool,
}

impl Journal {
    fn record(&mut self, root: &Path, event: &notify::Event) {
        if event.need_rescan() {
            self.incomplete = true;
        }
        for path in &event.paths {
            let relative = path.strip_prefix(root).ok().and_then(Path::to_str);
            match relative {
                Some(relative) => {
                    self.changed.insert(relative.replace(std::path::MAIN_SEPARATOR, "/"));
                }
                None => self.incomplete = true,
            }
        }
    }
}

/// Whether a change is this CLI's own: a temporary file, or its configuration and state.
fn is_ours(path: &Path, own: &[std::path::PathBuf]) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(is_temporary_name) || own.iter().any(|o| path.starts_with(o))
}

fn is_only_a_read(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode};
    matches!(kind, notify::EventKind::Access(access) if *access != AccessKind::Close(AccessMode::Write))
}

pub async fn watch(pair: &Pair<'_>) -> CliResult<Value> {
    let (wake, mut woken) = unbounded_channel::<()>();
    let local_wake = wake.clone();
    let own: Vec<std::path::PathBuf> = pair.own.iter().map(|relative| pair.root.join(relative)).collect();
    let journal = Arc::new(Mutex::new(Journal::default()));
    let (recorder, root) = (journal.clone(), pair.root.clone());
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
        // Reading a file changes nothing (and this CLI reads every file it hashes).
        Ok(event) if is_only_a_read(&event.kind) => {}
        Ok(mut event) => {
            event.paths.retain(|p| !is_ours(p, &own));
            if !event.paths.is_empty() || event.need_rescan() {
                recorder.lock().expect("journal").record(&root, &event);
                let _ = local_wake.send(());
            }
        }
        // The watcher lost track (its queue overflowed, say): only a walk knows now.
        Err(_) => {
            recorder.lock().expect("journal").incomplete = true;
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
    // No walk yet: the first run walks.
    let mut walked: Option<Instant> = None;
    let outcome = loop {
        if woken.recv().await.is_none() {
            break Ok(Value::Null);
        }
        while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, woken.recv()).await {}
        let taken = std::mem::take(&mut *journal.lock().expect("journal"));
        let scan = match walked {
            Some(at) if !taken.incomplete && at.elapsed() < FULL_CHECK => LocalScan::Journal(taken.changed),
            _ => LocalScan::Full,
        };
        let walks = matches!(scan, LocalScan::Full);
        match pair.run_scanning(scan).await {
            Ok(report) => {
                attempt = 0;
                if walks {
                    walked = Some(Instant::now());
                }
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
                // What the failed run took from the journal is looked at again by a walk.
                journal.lock().expect("journal").incomplete = true;
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
