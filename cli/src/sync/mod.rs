//! `nubo sync LOCAL REMOTE`: keeps a local folder and a remote folder in step, both ways (or one
//! way with `--push`/`--pull`), without ever losing a byte. A run scans both sides, reconciles
//! them against the last agreed state (`plan`), carries out the plan (`apply`) and exits with a
//! status saying whether everything converged; `--watch` keeps going (`watch`).

mod apply;
mod guard;
mod plan;
mod scan;
mod state;
mod watch;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

pub use plan::Direction;

use crate::client::Api;
use crate::error::{CliError, CliResult, ExitKind};
use crate::output::Output;
use crate::remote::{FolderCache, Object, RemotePath};

pub struct SyncOptions {
    pub direction: Direction,
    pub dry_run: bool,
    pub watch: bool,
    /// Transfers (and hashes) at once.
    pub parallel: usize,
    /// Runs even when the local folder looks unmounted or the plan deletes most of what was
    /// synced (see `guard`).
    pub allow_mass_delete: bool,
}

/// How a run finds the local side.
enum LocalScan {
    /// Every file and folder walked and looked at.
    Full,
    /// The paths (relative) the file-system watcher saw change since the run before.
    Journal(std::collections::BTreeSet<String>),
}

/// One sync pair, resolved: the local root, the remote folder and the state.
pub struct Pair<'a> {
    api: &'a Api,
    root: PathBuf,
    remote: Object,
    remote_path: RemotePath,
    state: state::State,
    options: &'a SyncOptions,
    output: Output,
    case_insensitive: bool,
    device: String,
    /// The CLI's own folders inside the local one, relative (never synced; see `scan::own_folders`).
    own: Vec<String>,
}

/// The name of this device in conflict copies: `NUBO_DEVICE`, else the host name.
fn device_name() -> String {
    let from_env = std::env::var("NUBO_DEVICE").ok();
    let host = || ["/proc/sys/kernel/hostname", "/etc/hostname"].iter().find_map(|f| std::fs::read_to_string(f).ok());
    let name = from_env.or_else(host).or_else(|| std::env::var("COMPUTERNAME").ok()).unwrap_or_default();
    let clean: String = name.trim().chars().filter(|c| !c.is_control() && !matches!(c, '/' | '\\')).collect();
    if clean.is_empty() { "this device".into() } else { clean }
}

pub async fn sync(api: &Api, local: &Path, remote: &str, options: &SyncOptions, output: Output) -> CliResult<Value> {
    if options.dry_run && options.watch {
        return Err(CliError::usage("--dry-run and --watch do not go together"));
    }
    let was_there = local.exists();
    std::fs::create_dir_all(local).map_err(|err| CliError::local("cannot create", local, err))?;
    let root = std::fs::canonicalize(local).map_err(|err| CliError::local("cannot resolve", local, err))?;
    let remote_path = RemotePath::parse(remote);
    let credentials = api.credentials().await.ok_or_else(|| CliError::auth_needed("not signed in"))?;
    let found = crate::remote::lookup(api, &remote_path).await?;
    let pairs: Vec<state::KnownPair> = state::known_pairs()
        .into_iter()
        .filter(|pair| pair.server == api.server && pair.user_id == credentials.user_id && pair.has_bases)
        .collect();
    let root_shown = root.display().to_string();
    let synced_here: Vec<&state::KnownPair> = pairs.iter().filter(|pair| pair.root == root_shown).collect();
    check_not_moved_away(api, &synced_here, local, &remote_path, found.as_ref()).await?;
    let folder = match found {
        Some(folder) if folder.is_folder() => folder,
        Some(_) => return Err(CliError::conflict(format!("{} is a file, not a folder", remote_path.display()))),
        None if options.dry_run => {
            return Err(CliError::not_found(format!("{} does not exist yet", remote_path.display()))
                .with_hint("a run without --dry-run makes it"));
        }
        None => FolderCache::default().ensure(api, &remote_path).await?,
    };
    let key = state::pair_key(&api.server, &credentials.user_id, &root_shown, &folder.id);
    let state = state::State::open(&key)?;
    state.set_remote_path(&remote_path.display())?;
    // A synced folder gone altogether is an unmounted disk or a mistake, not a deletion of
    // everything in it: refuse rather than empty the server's folder.
    if !was_there && !state.bases()?.is_empty() {
        let _ = std::fs::remove_dir(&root);
        return Err(CliError::not_found(format!("{} is gone, but was synced with {}", local.display(), remote))
            .with_hint("mount or restore it; to start afresh, sync into a new empty folder"));
    }
    // A local folder that moved has no agreements at its new path: nothing here says what was
    // deleted since, so nothing is deleted (a first run's union), and the run says why.
    if state.bases()?.is_empty()
        && let Some(before) = pairs.iter().find(|pair| pair.folder_id == folder.id && pair.root != root_shown)
    {
        note(
            output,
            &format!(
                "{root_shown} was never synced with {} before ({} was): this first run merges both sides, a union \
                 where nothing is deleted; what was deleted on either side since the last run there comes back",
                remote_path.display(),
                before.root,
            ),
        );
    }
    let pair = Pair {
        api,
        case_insensitive: scan::is_case_insensitive(&root),
        own: scan::own_folders(&root),
        root,
        remote: folder,
        remote_path,
        state,
        options,
        output,
        device: device_name(),
    };
    if options.watch {
        return watch::watch(&pair).await;
    }
    let mut report = pair.run_once().await?;
    if !report.replan.is_empty() {
        // The server refused deletions of what changed after the plan: plan again, from now.
        report = report.then(pair.run_once().await?);
    }
    finish(&report, output)
}

/// Refuses to go on when a pair of this local folder (`synced_here`) knew its remote folder at
/// `remote_path` and that folder is now live elsewhere on the server (renamed or moved): going
/// on would make a new folder at the old path (or merge into another one there) and upload
/// everything again.
async fn check_not_moved_away(
    api: &Api,
    synced_here: &[&state::KnownPair],
    local: &Path,
    remote_path: &RemotePath,
    found: Option<&Object>,
) -> CliResult<()> {
    let found_id = found.map(|object| object.id.as_str());
    if synced_here.iter().any(|pair| Some(pair.folder_id.as_str()) == found_id) {
        return Ok(());
    }
    let shown = remote_path.display();
    for pair in synced_here.iter().filter(|pair| pair.remote_path.as_deref() == Some(shown.as_str())) {
        let Some(now) = live_folder_path(api, &pair.folder_id).await? else { continue };
        let follow = format!("sync with its new path: `nubo sync {} {now}`", local.display());
        let mut moved = match found {
            None => CliError::new(
                ExitKind::NotFound,
                format!("{shown} is gone: the folder {} was synced with is now at {now}", local.display()),
            )
            .with_hint(format!("it was renamed or moved on the server; {follow}, or move it back to {shown}")),
            Some(_) => CliError::new(
                ExitKind::Conflict,
                format!("{shown} is not the folder {} was synced with: that one is now at {now}", local.display()),
            )
            .with_hint(format!("{follow}; once that has run, {shown} can be synced with it as a new pair")),
        };
        moved.code = Some("sync.remote_moved".to_owned());
        return Err(moved);
    }
    Ok(())
}

/// Where the folder `id` is now when it is live (neither in the trash nor below a trashed folder).
async fn live_folder_path(api: &Api, id: &str) -> CliResult<Option<String>> {
    let object: Object = match api.get(&format!("/object/{id}")).await {
        Ok(object) => object,
        Err(err) if err.kind == ExitKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    if !object.is_folder() || object.rest.get("trashed_at").is_some_and(|at| !at.is_null()) {
        return Ok(None);
    }
    let at = RemotePath::parse(&object.path);
    let live = crate::remote::lookup(api, &at).await?.is_some_and(|there| there.id == object.id);
    Ok(live.then(|| at.display()))
}

/// A line for people (an event for scripts) about the run as a whole.
fn note(output: Output, message: &str) {
    if output.json {
        println!("{}", json!({"event": "note", "message": message}));
    } else if !output.quiet {
        eprintln!("{message}");
    }
}

/// The summary line, and the exit status: 0 when in step, else that of [`not_in_step`].
fn finish(report: &apply::Report, output: Output) -> CliResult<Value> {
    let summary = json!({
        "event": "summary",
        "converged": report.converged(),
        "done": report.done,
        "conflicts": report.conflicts,
        "skipped": report.skipped.iter().map(|(path, reason)| json!({"path": path, "reason": reason})).collect::<Vec<_>>(),
        "bytes_up": report.bytes_up,
        "bytes_down": report.bytes_down,
        "listed_remote": report.listed_remote,
        "local_scan": report.local_scan,
        "merged_as_first_run": report.merged_as_first_run,
    });
    if output.json {
        println!("{summary}");
    } else if !output.quiet {
        let done: Vec<String> = report.done.iter().map(|(what, n)| format!("{n} {what}")).collect();
        let done = if done.is_empty() { "nothing to do".to_owned() } else { done.join(", ") };
        println!("{}: {done}", if report.converged() { "in step" } else { "not in step" });
    }
    match not_in_step(report) {
        None => Ok(Value::Null),
        Some(err) => Err(err),
    }
}

/// Why a run is not in step, as the error it exits with: over quota (7) when the server's lack
/// of space is all that is left, else not converged (8); `None` when in step.
fn not_in_step(report: &apply::Report) -> Option<CliError> {
    if report.converged() {
        return None;
    }
    if report.conflicts.is_empty() && report.replan.is_empty() && report.over_quota == report.skipped.len() {
        let mut over_quota = CliError::new(
            ExitKind::Refused,
            format!("not everything is in step: {} path(s) refused as over quota", report.over_quota),
        )
        .with_hint("over quota: free space (`nubo rm --purge`) or ask an administrator for more, and run again");
        over_quota.code = Some("storage.quota_exceeded".to_owned());
        return Some(over_quota);
    }
    let mut problems = Vec::new();
    if !report.conflicts.is_empty() {
        problems.push(format!("{} conflict(s) kept on both sides", report.conflicts.len()));
    }
    if !report.replan.is_empty() {
        problems.push(format!("{} deletion(s) refused by the server (changed there meanwhile)", report.replan.len()));
    }
    if !report.skipped.is_empty() {
        let shown: Vec<String> = report.skipped.iter().take(5).map(|(p, why)| format!("{p}: {why}")).collect();
        problems.push(format!("{} path(s) skipped ({})", report.skipped.len(), shown.join("; ")));
    }
    Some(CliError::new(ExitKind::NotConverged, format!("not everything is in step: {}", problems.join(", "))).with_hint(
        "keep one of each conflict pair (the copy has `(conflict DEVICE TIME)` in its name), rename or remove what was skipped, and run again",
    ))
}

impl Pair<'_> {
    /// One full reconcile: scan, list, plan, apply (or print the plan with `--dry-run`).
    async fn run_once(&self) -> CliResult<apply::Report> {
        self.run_scanning(LocalScan::Full).await
    }

    /// One reconcile, the local side found by `scan`: a walk of the whole folder, or (after a
    /// run that ended in step) the agreed state with the paths the watcher saw change looked at
    /// again.
    async fn run_scanning(&self, scan: LocalScan) -> CliResult<apply::Report> {
        guard::check_device(&self.state, &self.root, self.options.allow_mass_delete)?;
        let bases = self.state.bases()?;
        let root = self.root.clone();
        let scan = match scan {
            LocalScan::Journal(changed) if self.state.in_step()? => LocalScan::Journal(changed),
            _ => LocalScan::Full,
        };
        let local_scan = match &scan {
            LocalScan::Full => json!("full"),
            LocalScan::Journal(changed) => json!({"journal": changed.len()}),
        };
        let agreed = bases.clone();
        let (mut locals, mut skipped) = tokio::task::spawn_blocking(move || match scan {
            LocalScan::Full => scan::scan_local(&root),
            LocalScan::Journal(changed) => {
                let mut locals = scan::local_as_agreed(&agreed);
                let skipped = scan::rescan(&root, &mut locals, &changed)?;
                Ok((locals, skipped))
            }
        })
        .await
        .map_err(|e| CliError::new(ExitKind::Failed, e.to_string()))?
        .map_err(|err| CliError::local("cannot read", &self.root, err))?;
        scan::without_own(&mut locals, &self.own);
        skipped.extend(scan::hash_changed(&self.root, &mut locals, &bases, self.options.parallel).await);
        let stored = self.state.cursor()?.filter(|cursor| *cursor > 0);
        let server = scan::server_since(self.api, stored).await;
        // A server restored from a backup (the cursor is beyond its newest) or another database
        // (another epoch) knows nothing of what was agreed: every agreement is distrusted and
        // the sides are merged as on a first run, a union where nothing is deleted.
        let forgot = match &server {
            scan::ServerSince::Ahead => stored.is_some(),
            scan::ServerSince::Ready { epoch: Some(epoch), .. } => {
                !bases.is_empty() && self.state.server_epoch()?.is_some_and(|known| known != *epoch)
            }
            _ => false,
        };
        // Nothing of the account changed on the server since a run that left both sides in
        // step: the server side is as agreed, and no listing is needed. Otherwise it is listed.
        let unchanged = match (stored, &server) {
            (Some(stored), scan::ServerSince::Ready { cursor, head, .. })
                if !forgot && *cursor == stored && *head == stored && self.state.in_step()? =>
            {
                Some(stored)
            }
            _ => None,
        };
        let (cursor, mut remotes) = match unchanged {
            Some(cursor) => (cursor, scan::remote_as_agreed(&bases)),
            None => scan::list_remote(self.api, &self.remote.id, &self.remote_path).await?,
        };
        let mut bases = if forgot {
            note(
                self.output,
                "the server does not know what this folder agreed with it (restored from a backup?): \
                 both sides are merged as on a first run, nothing is deleted",
            );
            BTreeMap::new()
        } else {
            bases
        };
        // The CLI's own files inside the folder are nobody's to sync: neither side is touched.
        scan::without_own(&mut remotes, &self.own);
        scan::without_own(&mut bases, &self.own);
        skipped.extend(scan::drop_unholdable(&mut remotes, &bases, self.case_insensitive));
        let sides = plan::Sides { locals, remotes, bases };
        let (actions, sides) = plan::plan(sides, self.options.direction, &skipped);
        guard::check_plan(&actions, &sides, self.options.allow_mass_delete)?;
        if self.options.dry_run {
            return Ok(self.print_plan(&actions));
        }
        let apply = apply::Apply::new(self, &sides.remotes, cursor);
        // Until this run ends in step, the next one lists the server again.
        self.state.set_in_step(false)?;
        if forgot {
            self.state.forget_all()?;
        }
        apply.run(actions).await?;
        apply.remove_stale_parts();
        let mut report = apply.report.into_inner().expect("report");
        report.listed_remote = unchanged.is_none();
        report.local_scan = local_scan;
        report.merged_as_first_run = forgot;
        self.state.set_cursor(cursor)?;
        if let scan::ServerSince::Ready { epoch: Some(epoch), .. } = &server {
            self.state.set_server_epoch(epoch)?;
        }
        self.state.set_in_step(report.converged() && self.options.direction == Direction::Both)?;
        Ok(report)
    }

    /// `--dry-run`: the plan, one step a line (JSON with `--json`).
    fn print_plan(&self, actions: &[plan::Action]) -> apply::Report {
        let mut report = apply::Report::default();
        for action in actions {
            match action {
                plan::Action::Agree { .. } | plan::Action::Forget { .. } => continue,
                plan::Action::Skip { path, reason } => report.skipped.push((path.clone(), reason.clone())),
                plan::Action::Conflict { path, .. } => report.conflicts.push(path.clone()),
                _ => *report.done.entry(action.name()).or_default() += 1,
            }
            if self.output.json {
                let mut line = serde_json::to_value(action).unwrap_or_default();
                line["event"] = json!("plan");
                println!("{line}");
            } else {
                let detail = match action {
                    plan::Action::MoveLocal { from, .. } | plan::Action::MoveRemote { from, .. } => {
                        format!("  (from {from})")
                    }
                    plan::Action::Skip { reason, .. } => format!("  ({reason})"),
                    _ => String::new(),
                };
                println!("{:>18}  {}{detail}", action.name(), action.path());
            }
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skipped(paths: &[&str]) -> Vec<(String, String)> {
        paths.iter().map(|p| (p.to_string(), "not enough storage space left".to_owned())).collect()
    }

    #[test]
    fn a_run_left_out_of_step_only_by_the_quota_exits_with_the_quota_status() {
        let report = apply::Report { skipped: skipped(&["a.bin", "b.bin"]), over_quota: 2, ..Default::default() };
        let err = not_in_step(&report).expect("not in step");
        assert_eq!((err.exit_code(), err.code.as_deref()), (7, Some("storage.quota_exceeded")));
    }

    #[test]
    fn quota_mixed_with_other_skips_or_conflicts_exits_not_converged() {
        let mixed = apply::Report { skipped: skipped(&["a.bin", "bad:name"]), over_quota: 1, ..Default::default() };
        assert_eq!(not_in_step(&mixed).expect("not in step").exit_code(), 8);
        let conflict = apply::Report {
            skipped: skipped(&["a.bin"]),
            over_quota: 1,
            conflicts: vec!["c.txt".to_owned()],
            ..Default::default()
        };
        assert_eq!(not_in_step(&conflict).expect("not in step").exit_code(), 8);
        assert!(not_in_step(&apply::Report::default()).is_none());
    }
}
