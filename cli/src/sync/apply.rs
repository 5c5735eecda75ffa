//! Carrying out a plan: moves first, then folders, then the transfer queue (uploads through
//! resumable sessions, downloads into `.nubo-part-*` files renamed into place once verified),
//! then deletions (remote ones into the trash). Each finished step writes its agreement to the
//! state at once. Before a local file is replaced or removed it is checked to still be what the
//! plan saw; if it changed meanwhile the step is skipped (the next run sees a conflict).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use futures_util::{StreamExt, TryStreamExt, stream};
use reqwest::Method;
use serde_json::{Value, json};

use super::Pair;
use super::plan::Action;
use super::scan::{Local, PART_PREFIX, Remote, mtime_ns};
use super::state::{Base, Kind, State};
use crate::client::Api;
use crate::error::{CliError, CliResult, ExitKind};
use crate::output::{Output, Progress};
use crate::remote::{Object, RemotePath};
use crate::upload::{Planned, Put, PutOptions};

/// What one run did, for the summary and the exit status.
#[derive(Debug, Default)]
pub struct Report {
    pub done: BTreeMap<&'static str, u64>,
    /// Paths left out of step (skipped, refused, changed meanwhile), with why.
    pub skipped: Vec<(String, String)>,
    /// How many of `skipped` the server refused as over quota: a run left out of step by
    /// nothing else exits with the quota status (7), which tells a script what to do.
    pub over_quota: usize,
    /// Conflicts kept (both versions are on both sides).
    pub conflicts: Vec<String>,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Whether the server side was listed (else nothing had changed there since the last run).
    pub listed_remote: bool,
    /// How the local side was found: `"full"` (walked) or `{"journal": N}` (the N paths the
    /// watcher saw change, looked at again).
    pub local_scan: serde_json::Value,
    /// Remote deletions the server refused because the object changed after the plan was made:
    /// the run is planned again.
    pub replan: Vec<String>,
    /// Whether every agreement was distrusted (the server was restored or replaced) and the
    /// sides merged as on a first run.
    pub merged_as_first_run: bool,
}

impl Report {
    pub fn converged(&self) -> bool {
        self.skipped.is_empty() && self.conflicts.is_empty() && self.replan.is_empty()
    }

    /// This run followed by `later`, planned again after it: what both did, and what is left
    /// after the later one.
    pub fn then(self, later: Report) -> Report {
        let mut done = self.done;
        for (what, n) in later.done {
            *done.entry(what).or_default() += n;
        }
        let mut conflicts = self.conflicts;
        conflicts.extend(later.conflicts);
        Report {
            done,
            skipped: later.skipped,
            over_quota: later.over_quota,
            conflicts,
            bytes_up: self.bytes_up + later.bytes_up,
            bytes_down: self.bytes_down + later.bytes_down,
            listed_remote: self.listed_remote || later.listed_remote,
            local_scan: self.local_scan,
            replan: later.replan,
            merged_as_first_run: self.merged_as_first_run || later.merged_as_first_run,
        }
    }
}

/// Everything a run needs while it applies its plan.
pub struct Apply<'a> {
    pub api: &'a Api,
    pub root: PathBuf,
    /// The synced remote folder's path from the user's root.
    pub remote_root_path: RemotePath,
    pub state: &'a State,
    pub output: Output,
    pub parallel: usize,
    /// Names the device in conflict copies.
    pub device: String,
    /// Remote folders by relative path (`""` is the synced folder).
    pub folders: Mutex<HashMap<String, Object>>,
    /// Content hashes the server has in this folder: their uploads go by hash alone.
    pub known_hashes: Mutex<HashSet<String>>,
    pub report: Mutex<Report>,
    /// Paths whose move failed: nothing at or below them is touched in this run.
    blocked: Mutex<Vec<String>>,
    /// The change-event cursor the plan's view of the server dates from (0: unknown).
    pub planned_at: i64,
}

fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}

fn name_of(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, name)| name)
}

fn folder_object(remote: &Remote, path: &RemotePath) -> Object {
    Object {
        id: remote.id.clone(),
        name: remote.name.clone(),
        kind: "folder".into(),
        size: 0,
        path: path.display(),
        updated_at: remote.updated_at.clone(),
        rest: serde_json::Map::new(),
    }
}

/// Whether an error ends the run (the server or the session is gone) rather than one step.
fn ends_the_run(err: &CliError) -> bool {
    err.is_transient() || matches!(err.kind, ExitKind::Network | ExitKind::AuthNeeded)
}

/// `report (conflict laptop 2026-05-01 123456).txt` for `report.txt`.
pub fn conflict_name(name: &str, device: &str, now: time::OffsetDateTime) -> String {
    let stamp = format!(
        "{:04}-{:02}-{:02} {:02}{:02}{:02}",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    );
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => format!("{stem} (conflict {device} {stamp}).{ext}"),
        _ => format!("{name} (conflict {device} {stamp})"),
    }
}

impl<'a> Apply<'a> {
    /// The application of one run's plan to `pair`, whose server side is `remotes` as of the
    /// change-event cursor `planned_at`.
    pub fn new(pair: &'a Pair<'a>, remotes: &BTreeMap<String, Remote>, planned_at: i64) -> Apply<'a> {
        let remote_root_path = pair.remote_path.clone();
        let mut folders = HashMap::new();
        folders.insert(String::new(), pair.remote.clone());
        for (path, remote) in remotes.iter().filter(|(_, r)| r.kind == Kind::Folder) {
            folders.insert(path.clone(), folder_object(remote, &remote_root_path.join_relative(path)));
        }
        let known_hashes = remotes.values().filter_map(|r| r.blake3.clone()).collect();
        Apply {
            api: pair.api,
            root: pair.root.clone(),
            remote_root_path,
            state: &pair.state,
            output: pair.output,
            parallel: pair.options.parallel,
            device: pair.device.clone(),
            folders: Mutex::new(folders),
            known_hashes: Mutex::new(known_hashes),
            report: Mutex::new(Report::default()),
            blocked: Mutex::new(Vec::new()),
            planned_at,
        }
    }

    fn local(&self, path: &str) -> PathBuf {
        self.root.join(path)
    }

    /// One line per step: JSON for scripts, text for people.
    fn emit(&self, event: &str, path: &str, extra: Value) {
        if self.output.json {
            let mut line = json!({"event": event, "path": path});
            if let (Some(line), Value::Object(extra)) = (line.as_object_mut(), extra) {
                line.extend(extra);
            }
            println!("{line}");
        } else if !self.output.quiet {
            println!("{event:>18}  {path}");
        }
    }

    fn done(&self, action: &'static str, path: &str, extra: Value) {
        *self.report.lock().expect("report").done.entry(action).or_default() += 1;
        self.emit(action, path, extra);
    }

    fn skip(&self, path: &str, reason: String) {
        self.emit("skip", path, json!({"reason": reason}));
        self.report.lock().expect("report").skipped.push((path.to_owned(), reason));
    }

    /// A step failed: the run ends on a lost server or session, else only the step is skipped.
    fn failed(&self, path: &str, err: CliError) -> CliResult<()> {
        if ends_the_run(&err) {
            return Err(err);
        }
        if err.is_over_quota() {
            self.report.lock().expect("report").over_quota += 1;
        }
        self.skip(path, err.message);
        Ok(())
    }

    fn is_blocked(&self, path: &str) -> bool {
        self.blocked.lock().expect("blocked").iter().any(|b| path == b || path.starts_with(&format!("{b}/")))
    }

    /// The remote folder at `path`, made (with its missing parents) when the plan has not.
    async fn remote_folder(&self, path: &str) -> CliResult<Object> {
        if let Some(folder) = self.folders.lock().expect("folders").get(path).cloned() {
            return Ok(folder);
        }
        let parent = Box::pin(self.remote_folder(parent_of(path))).await?;
        let folder = match crate::remote::create_folder(self.api, &parent.id, name_of(path)).await {
            Ok(folder) => folder,
            Err(err) if err.code.as_deref() == Some("object.name_taken") => {
                crate::remote::lookup(self.api, &self.remote_root_path.join_relative(path))
                    .await?
                    .filter(Object::is_folder)
                    .ok_or(err)?
            }
            Err(err) => return Err(err),
        };
        self.folders.lock().expect("folders").insert(path.to_owned(), folder.clone());
        Ok(folder)
    }

    /// Carries out `actions`; an error ends the run only when the server or session is lost.
    pub async fn run(&self, actions: Vec<Action>) -> CliResult<()> {
        let mut uploads = Vec::new();
        let mut downloads = Vec::new();
        let mut trash = Vec::new();
        let mut deletions = Vec::new();
        let mut conflicts = Vec::new();
        let mut rest = Vec::new();
        for action in actions {
            match action {
                Action::MoveLocal { from, to } => self.move_local(&from, &to)?,
                Action::MoveRemote { from, to, id, server_at } => self.move_remote(&from, &to, &id, &server_at).await?,
                // Before anything else: what is made in place of the replaced one needs its path.
                Action::ReplaceRemote { path, id, blake3, local } => {
                    if self.is_blocked(&path) || !self.replace_remote(&path, &id, blake3).await? {
                        continue;
                    }
                    match local.kind {
                        Kind::Folder => rest.push(Action::MakeRemoteFolder { path }),
                        Kind::File => uploads.push((path, local, None)),
                    }
                }
                Action::ReplaceLocal { path, expect, below, remote } => {
                    if self.is_blocked(&path) || !self.replace_local(&path, &expect, &below)? {
                        continue;
                    }
                    match remote.kind {
                        Kind::Folder => rest.push(Action::MakeLocalFolder { path, remote }),
                        Kind::File => downloads.push((path, remote, None)),
                    }
                }
                Action::Upload { path, local, replaces, .. } => uploads.push((path, local, replaces)),
                Action::Download { path, remote, expect, .. } => downloads.push((path, remote, expect)),
                Action::TrashRemote { path, id, blake3 } => trash.push((path, id, blake3)),
                Action::DeleteLocal { path, expect } => deletions.push((path, expect)),
                Action::Conflict { path, local, remote, local_below, remote_below } => {
                    conflicts.push((path, local, remote, local_below, remote_below));
                }
                Action::Skip { path, reason } => self.skip(&path, reason),
                other => rest.push(other),
            }
        }
        for action in rest {
            if self.is_blocked(action.path()) {
                continue;
            }
            let path = action.path().to_owned();
            let outcome = self.simple(action).await;
            if let Err(err) = outcome {
                self.failed(&path, err)?;
            }
        }
        for (path, local, remote, local_below, remote_below) in conflicts {
            if self.is_blocked(&path) {
                continue;
            }
            match self.set_conflict_aside(&path, &local) {
                Ok(Some(aside)) => {
                    self.report.lock().expect("report").conflicts.push(path.clone());
                    let sides = Conflicted { path: &path, aside: &aside, local, remote, local_below, remote_below };
                    if let Err(err) = self.keep_both(sides, &mut uploads, &mut downloads).await {
                        self.failed(&path, err)?;
                    }
                }
                Ok(None) => {}
                Err(err) => self.failed(&path, err)?,
            }
        }
        uploads.retain(|(path, ..)| !self.is_blocked(path));
        downloads.retain(|(path, ..)| !self.is_blocked(path));
        self.transfer(uploads, downloads).await?;
        self.trash(trash).await?;
        self.delete_local(deletions)?;
        Ok(())
    }

    /// Folders, agreements and forgotten paths.
    async fn simple(&self, action: Action) -> CliResult<()> {
        match action {
            Action::MakeRemoteFolder { path } => {
                let folder = self.remote_folder(&path).await?;
                self.state.agree(&path, &folder_base(&folder.id, &folder.updated_at))?;
                self.done("make_remote_folder", &path, json!({"id": folder.id}));
            }
            Action::MakeLocalFolder { path, remote } => {
                let local = self.local(&path);
                std::fs::create_dir_all(&local).map_err(|err| CliError::local("cannot create", &local, err))?;
                self.state.agree(&path, &folder_base(&remote.id, &remote.updated_at))?;
                self.done("make_local_folder", &path, json!({"id": remote.id}));
            }
            Action::Agree { path, local, remote } => {
                self.state.agree(&path, &agreed(&local, &remote))?;
            }
            Action::Forget { path } => self.state.forget(&path)?,
            _ => {}
        }
        Ok(())
    }

    /// The remote object moved: the local file or folder follows.
    fn move_local(&self, from: &str, to: &str) -> CliResult<()> {
        let (source, target) = (self.local(from), self.local(to));
        let case_only = from.to_lowercase() == to.to_lowercase();
        let moved = (|| {
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            if case_only {
                // Through a third name: on a case-insensitive file system the target "exists".
                let between = source.with_file_name(format!("{PART_PREFIX}rename-{}", std::process::id()));
                std::fs::rename(&source, &between)?;
                std::fs::rename(&between, &target)
            } else if target.symlink_metadata().is_ok() {
                Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists, "the new path is taken here"))
            } else {
                std::fs::rename(&source, &target)
            }
        })();
        match moved {
            Ok(()) => {
                self.state.rename(from, to)?;
                self.done("move_local", to, json!({"from": from}));
            }
            Err(err) => {
                self.blocked.lock().expect("blocked").extend([from.to_owned(), to.to_owned()]);
                self.skip(to, format!("cannot move {} here: {err}", source.display()));
            }
        }
        Ok(())
    }

    /// The local file or folder moved: the remote object follows (one request however much a
    /// folder holds, and a rename), from `server_at`, where the server has it now.
    async fn move_remote(&self, from: &str, to: &str, id: &str, server_at: &str) -> CliResult<()> {
        let rename = || async {
            let body = json!({"name": name_of(to)});
            self.api.json::<Value>(Method::PATCH, &format!("/object/{id}"), Some(&body)).await?;
            crate::testing::move_step_done();
            Ok::<(), CliError>(())
        };
        let outcome = async {
            let mut renamed = name_of(server_at) == name_of(to);
            if parent_of(server_at) != parent_of(to) {
                let parent = self.remote_folder(parent_of(to)).await?;
                let body = json!({"src_ids": [id], "dst_id": parent.id});
                match self.api.json::<Value>(Method::PATCH, "/object", Some(&body)).await {
                    Ok(_) => {}
                    // The old name is taken where it goes: renamed where it is first, then moved
                    // (a run cut off between the two finds it by id, see `server_at`).
                    Err(err) if !renamed && err.code.as_deref() == Some("object.name_taken") => {
                        rename().await?;
                        renamed = true;
                        self.api.json::<Value>(Method::PATCH, "/object", Some(&body)).await?;
                    }
                    Err(err) => return Err(err),
                }
                crate::testing::move_step_done();
            }
            if !renamed {
                rename().await?;
            }
            Ok::<(), CliError>(())
        }
        .await;
        match outcome {
            Ok(()) => {
                self.state.rename(from, to)?;
                self.done("move_remote", to, json!({"from": from, "id": id}));
                Ok(())
            }
            Err(err) => {
                self.blocked.lock().expect("blocked").extend([from.to_owned(), to.to_owned()]);
                self.failed(to, err)
            }
        }
    }

    /// The first half of a replacement on the server: the object at `path` into the trash, only
    /// if still as planned (as [`Self::trash`] does). Whether the path is free now.
    async fn replace_remote(&self, path: &str, id: &str, blake3: Option<String>) -> CliResult<bool> {
        let item = (path.to_owned(), id.to_owned(), blake3);
        let outcome = self.api.json::<Value>(Method::DELETE, "/object", Some(&self.trash_request(&[&item]))).await;
        match outcome {
            Ok(_) => {
                self.state.forget(path)?;
                self.done("trash_remote", path, json!({"id": id}));
            }
            Err(err) if err.status == Some(404) => self.state.forget(path)?,
            Err(err) => {
                // Nothing is made in its place (nor below it) in this run.
                self.blocked.lock().expect("blocked").push(path.to_owned());
                if err.code.as_deref() == Some("object.changed") {
                    let reason = "changed on the server after this run looked: kept, and planned again";
                    self.emit("replan", path, json!({"reason": reason}));
                    self.report.lock().expect("report").replan.push(path.to_owned());
                    return Ok(false);
                }
                self.failed(path, err)?;
                return Ok(false);
            }
        }
        let below = format!("{path}/");
        self.folders.lock().expect("folders").retain(|known, _| known != path && !known.starts_with(&below));
        Ok(true)
    }

    /// The first half of a replacement here: the local file or folder at `path` (a folder with
    /// `below`, deepest first) removed, only while all of it is still as the plan saw it.
    /// Whether the path is free now.
    fn replace_local(&self, path: &str, expect: &Local, below: &[(String, Local)]) -> CliResult<bool> {
        let target = self.local(path);
        let unchanged =
            still(&target, Some(expect)) && below.iter().all(|(inner, local)| still(&self.local(inner), Some(local)));
        let removed = if unchanged {
            let remove = |at: &Path, kind: Kind| match kind {
                Kind::Folder => std::fs::remove_dir(at),
                Kind::File => std::fs::remove_file(at),
            };
            // In path order a folder comes before what it holds: backwards, it comes after.
            below
                .iter()
                .rev()
                .try_for_each(|(inner, local)| remove(&self.local(inner), local.kind))
                .and_then(|()| remove(&target, expect.kind))
        } else {
            Err(std::io::Error::other("changed here meanwhile"))
        };
        match removed {
            Ok(()) => {
                self.state.forget(path)?;
                self.done("delete_local", path, json!({}));
                Ok(true)
            }
            Err(err) => {
                self.blocked.lock().expect("blocked").push(path.to_owned());
                self.skip(path, format!("kept: {err}; the next run keeps both"));
                Ok(false)
            }
        }
    }

    /// Queues both sides of a conflict whose local side is set aside: the local one (a folder
    /// with all it holds) to be uploaded under its conflict name, the remote one (likewise) to be
    /// brought to the path. What was agreed at the path belongs to neither now.
    async fn keep_both(
        &self,
        sides: Conflicted<'_>,
        uploads: &mut Vec<(String, Local, Option<String>)>,
        downloads: &mut Vec<(String, Remote, Option<Local>)>,
    ) -> CliResult<()> {
        let Conflicted { path, aside, local, remote, local_below, remote_below } = sides;
        self.state.forget(path)?;
        for (inner, local) in std::iter::once((path.to_owned(), local)).chain(local_below) {
            let moved = format!("{aside}{}", &inner[path.len()..]);
            match local.kind {
                Kind::File => uploads.push((moved, local, None)),
                Kind::Folder => {
                    let folder = self.remote_folder(&moved).await?;
                    self.state.agree(&moved, &folder_base(&folder.id, &folder.updated_at))?;
                    self.done("make_remote_folder", &moved, json!({"id": folder.id}));
                }
            }
        }
        for remote in std::iter::once(remote).chain(remote_below) {
            match remote.kind {
                Kind::File => downloads.push((remote.path.clone(), remote, None)),
                Kind::Folder => {
                    let here = self.local(&remote.path);
                    std::fs::create_dir_all(&here).map_err(|err| CliError::local("cannot create", &here, err))?;
                    self.state.agree(&remote.path, &folder_base(&remote.id, &remote.updated_at))?;
                    self.done("make_local_folder", &remote.path, json!({"id": remote.id}));
                }
            }
        }
        Ok(())
    }

    /// Renames the local side of a conflict to its conflict name; answers that name, or `None`
    /// when the file changed again meanwhile (left for the next run).
    fn set_conflict_aside(&self, path: &str, local: &Local) -> CliResult<Option<String>> {
        let source = self.local(path);
        if !still(&source, Some(local)) {
            self.skip(path, "changed again while this run looked at it; the next run decides".into());
            return Ok(None);
        }
        let name = conflict_name(name_of(path), &self.device, time::OffsetDateTime::now_utc());
        let aside = if parent_of(path).is_empty() { name } else { format!("{}/{name}", parent_of(path)) };
        let target = self.local(&aside);
        if target.symlink_metadata().is_ok() {
            self.skip(path, format!("the conflict name {aside} is taken"));
            return Ok(None);
        }
        std::fs::rename(&source, &target).map_err(|err| CliError::local("cannot rename", &source, err))?;
        self.emit("conflict", path, json!({"kept_as": aside}));
        Ok(Some(aside))
    }

    /// The transfer queue: uploads (with the content they replace, if any) and downloads
    /// `parallel` at a time; a second upload of the same content waits for the first and then
    /// goes by hash alone.
    async fn transfer(
        &self,
        uploads: Vec<(String, Local, Option<String>)>,
        downloads: Vec<(String, Remote, Option<Local>)>,
    ) -> CliResult<()> {
        let total: u64 =
            uploads.iter().map(|u| u.1.size).sum::<u64>() + downloads.iter().map(|d| d.1.size).sum::<u64>();
        let progress = Progress::new(self.output, "sync", total, uploads.len() + downloads.len());
        let options = PutOptions { overwrite: false, parallel: self.parallel };
        let put = if uploads.is_empty() { None } else { Some(Put::new(self.api, &options, progress.clone()).await?) };
        let mut first = Vec::new();
        let mut later = Vec::new();
        let mut seen = HashSet::new();
        for upload in uploads {
            match &upload.1.blake3 {
                Some(hash) if !seen.insert(hash.clone()) => later.push(upload),
                _ => first.push(upload),
            }
        }
        enum Job {
            Up(String, Local, Option<String>),
            Down(String, Remote, Option<Local>),
        }
        let jobs: Vec<Job> = first
            .into_iter()
            .map(|(p, l, r)| Job::Up(p, l, r))
            .chain(downloads.into_iter().map(|(p, r, e)| Job::Down(p, r, e)))
            .collect();
        let run = |job: Job| {
            let (put, progress) = (put.as_ref(), &progress);
            async move {
                match job {
                    Job::Up(path, local, replace) => {
                        let put = put.expect("a Put for uploads");
                        let outcome = self.upload(put, &path, &local, replace).await;
                        outcome.or_else(|err| self.failed(&path, err))
                    }
                    Job::Down(path, remote, expect) => {
                        let outcome = self.download(progress, &path, &remote, expect.as_ref()).await;
                        outcome.or_else(|err| self.failed(&path, err))
                    }
                }
            }
        };
        let outcome = stream::iter(jobs).map(run).buffer_unordered(self.parallel.max(1)).try_collect::<Vec<()>>().await;
        let outcome = match outcome {
            Ok(_) => {
                let later = later.into_iter().map(|(p, l, r)| Job::Up(p, l, r));
                stream::iter(later).map(run).buffer_unordered(self.parallel.max(1)).try_collect::<Vec<()>>().await
            }
            Err(err) => Err(err),
        };
        progress.finish();
        outcome.map(|_| ())
    }

    async fn upload(&self, put: &Put<'_>, path: &str, local: &Local, replaces: Option<String>) -> CliResult<()> {
        let parent = self.remote_folder(parent_of(path)).await?;
        let known = local.blake3.as_ref().filter(|h| self.known_hashes.lock().expect("hashes").contains(*h)).cloned();
        let file = Planned {
            local: self.local(path),
            parent: self.remote_root_path.join_relative(parent_of(path)),
            name: name_of(path).to_owned(),
            size: local.size,
            modified_ms: local.mtime_ns.div_euclid(1_000_000),
            overwrite: replaces.is_some(),
            blake3: known,
            replaces_blake3: replaces,
        };
        crate::testing::pause_in_upload("read").await;
        let (object, method) = match put.upload_into(&file, &parent).await {
            // A server that does not take `blake3` yet: the bytes go up after all.
            Err(err) if err.status == Some(422) && file.blake3.is_some() => {
                let file = Planned { blake3: None, ..file };
                put.upload_into(&file, &parent).await?
            }
            Err(err) if err.code.as_deref() == Some("object.changed") => {
                self.skip(path, "changed on the server during this run; the next run keeps both".into());
                return Ok(());
            }
            // A retry after a lost answer finds the file the first attempt stored.
            Err(err) if err.code.as_deref() == Some("object.name_taken") && file.replaces_blake3.is_none() => {
                match self.stored_already(path, local).await? {
                    Some(object) => (object, "found"),
                    None => return Err(err),
                }
            }
            other => other?,
        };
        crate::testing::pause_in_upload("sent").await;
        // The file may have been written to while it was read: the server then holds bytes
        // other than those hashed before. The base is what the server really has, so the next
        // run sends the file again over it instead of taking the two for a conflict.
        let stored = match method {
            "known" | "found" => None,
            _ => crate::remote::stored_blake3(self.api, &object.id).await?,
        };
        let in_step = stored.as_ref().is_none_or(|hash| local.blake3.as_ref() == Some(hash))
            && still(&self.local(path), Some(local));
        // A server that names no hash (content stored before hashes were kept): as read here.
        let stored = stored.or_else(|| local.blake3.clone());
        if let Some(hash) = &stored {
            self.known_hashes.lock().expect("hashes").insert(hash.clone());
        }
        let base = Base {
            kind: Kind::File,
            blake3: stored,
            size: local.size,
            // A time no file has: the next run reads the file again rather than trust the base.
            mtime_ns: if in_step { local.mtime_ns } else { 0 },
            remote_id: object.id.clone(),
            remote_updated_at: object.updated_at.clone(),
        };
        self.state.agree(path, &base)?;
        if method != "known" {
            self.report.lock().expect("report").bytes_up += local.size;
        }
        self.done("upload", path, json!({"id": object.id, "size": local.size, "method": method}));
        if !in_step {
            self.skip(path, "changed here while it was uploaded; the next run sends it again".into());
        }
        Ok(())
    }

    /// The remote file at `path` when it already holds `local`'s content (its blake3): an
    /// earlier attempt of this upload that the server stored though its answer never arrived.
    async fn stored_already(&self, path: &str, local: &Local) -> CliResult<Option<Object>> {
        let Some(hash) = &local.blake3 else { return Ok(None) };
        let at = self.remote_root_path.join_relative(path);
        let Some(object) = crate::remote::lookup(self.api, &at).await?.filter(|o| !o.is_folder()) else {
            return Ok(None);
        };
        let stored = crate::remote::stored_blake3(self.api, &object.id).await?;
        Ok((stored.as_ref() == Some(hash)).then_some(object))
    }

    async fn download(
        &self,
        progress: &Progress,
        path: &str,
        remote: &Remote,
        expect: Option<&Local>,
    ) -> CliResult<()> {
        let target = self.local(path);
        let dir = target.parent().unwrap_or(&self.root).to_owned();
        std::fs::create_dir_all(&dir).map_err(|err| CliError::local("cannot create", &dir, err))?;
        let digest = blake3::hash(remote.id.as_bytes()).to_hex();
        let part = dir.join(format!("{PART_PREFIX}{}", &digest[..24]));
        let object = Object {
            id: remote.id.clone(),
            name: remote.name.clone(),
            kind: "file".into(),
            size: remote.size,
            path: self.remote_root_path.join_relative(path).display(),
            updated_at: remote.updated_at.clone(),
            rest: serde_json::Map::new(),
        };
        crate::download::fetch_verified(self.api, &object, &part, progress).await?;
        if let Some(expected) = &remote.blake3 {
            let got = crate::upload::hash_file(&part).await?;
            if &got != expected {
                let _ = std::fs::remove_file(&part);
                self.skip(path, "the server's content changed during the download; the next run fetches it".into());
                return Ok(());
            }
        }
        // Checked right before the rename: a local change meanwhile is never overwritten.
        if !still(&target, expect) {
            let _ = std::fs::remove_file(&part);
            self.skip(path, "changed here during the download; the next run keeps both".into());
            return Ok(());
        }
        std::fs::rename(&part, &target).map_err(|err| CliError::local("cannot rename", &part, err))?;
        let meta = std::fs::metadata(&target).map_err(|err| CliError::local("cannot read", &target, err))?;
        let base = Base {
            kind: Kind::File,
            blake3: remote.blake3.clone(),
            size: meta.len(),
            mtime_ns: mtime_ns(&meta),
            remote_id: remote.id.clone(),
            remote_updated_at: remote.updated_at.clone(),
        };
        self.state.agree(path, &base)?;
        self.report.lock().expect("report").bytes_down += remote.size;
        self.done("download", path, json!({"id": remote.id, "size": remote.size}));
        Ok(())
    }

    /// Remote deletions go to the trash (restorable), one request for all, each only if the
    /// server still has it as planned: nothing at or below it changed after the plan's cursor,
    /// a file still has the planned content. What the server refuses is planned again.
    async fn trash(&self, trash: Vec<(String, String, Option<String>)>) -> CliResult<()> {
        let trash: Vec<_> = trash.into_iter().filter(|(path, ..)| !self.is_blocked(path)).collect();
        if trash.is_empty() {
            return Ok(());
        }
        crate::testing::pause_before_trash().await;
        let all: Vec<&(String, String, Option<String>)> = trash.iter().collect();
        let together = self.api.json::<Value>(Method::DELETE, "/object", Some(&self.trash_request(&all))).await;
        for item in &trash {
            let (path, id, _) = item;
            let outcome = match &together {
                Ok(_) => Ok(Value::Null),
                // One of them could not go (gone already, changed meanwhile): each on its own.
                Err(_) => self.api.json::<Value>(Method::DELETE, "/object", Some(&self.trash_request(&[item]))).await,
            };
            match outcome {
                Ok(_) => {
                    self.state.forget(path)?;
                    self.done("trash_remote", path, json!({"id": id}));
                }
                Err(err) if err.status == Some(404) => self.state.forget(path)?,
                Err(err) if err.code.as_deref() == Some("object.changed") => {
                    let reason = "changed on the server after this run looked: kept, and planned again";
                    self.emit("replan", path, json!({"reason": reason}));
                    self.report.lock().expect("report").replan.push(path.clone());
                }
                Err(err) => self.failed(path, err)?,
            }
        }
        Ok(())
    }

    /// The body of `DELETE /object` for `items` (path, id, a file's blake3): each only if nothing
    /// at or below it changed since the plan's cursor and a file still has that content.
    fn trash_request(&self, items: &[&(String, String, Option<String>)]) -> Value {
        let mut body = json!({
            "ids": items.iter().map(|(_, id, _)| id).collect::<Vec<_>>(),
            "expect": items
                .iter()
                .filter_map(|(_, id, blake3)| blake3.as_ref().map(|b| json!({"id": id, "blake3": b})))
                .collect::<Vec<_>>(),
        });
        // 0: a server without the tree listing gave no cursor to hold it to.
        if self.planned_at > 0 {
            body["unchanged_since"] = json!(self.planned_at);
        }
        body
    }

    /// Local deletions: files still as the base left them, then folders left empty (deepest first).
    fn delete_local(&self, deletions: Vec<(String, Local)>) -> CliResult<()> {
        let (folders, files): (Vec<_>, Vec<_>) = deletions.into_iter().partition(|(_, l)| l.kind == Kind::Folder);
        for (path, expect) in files {
            if self.is_blocked(&path) {
                continue;
            }
            let target = self.local(&path);
            if !still(&target, Some(&expect)) {
                self.skip(&path, "changed here meanwhile; kept (the next run uploads it)".into());
                continue;
            }
            match std::fs::remove_file(&target) {
                Ok(()) => {
                    self.state.forget(&path)?;
                    self.done("delete_local", &path, json!({}));
                }
                Err(err) => self.failed(&path, CliError::local("cannot remove", &target, err))?,
            }
        }
        for (path, _) in folders.into_iter().rev() {
            if self.is_blocked(&path) {
                continue;
            }
            let target = self.local(&path);
            match std::fs::remove_dir(&target) {
                Ok(()) => {
                    self.state.forget(&path)?;
                    self.done("delete_local", &path, json!({}));
                }
                Err(err) => self.skip(&path, format!("kept: {err} (something new is in it?)")),
            }
        }
        Ok(())
    }

    /// Removes the temporary files of downloads no longer under way (exactly the names this CLI
    /// makes, nothing else), and leaves the CLI's own folders alone.
    pub fn remove_stale_parts(&self) {
        let mut pending = vec![self.root.clone()];
        while let Some(dir) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let is_file = entry.file_type().is_ok_and(|t| t.is_file());
                if is_file && name.to_str().is_some_and(super::scan::is_temporary_name) {
                    let _ = std::fs::remove_file(entry.path());
                } else if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    pending.push(entry.path());
                }
            }
        }
    }
}

/// A conflict whose local side was set aside at `aside` (see [`Apply::keep_both`]).
struct Conflicted<'p> {
    path: &'p str,
    aside: &'p str,
    local: Local,
    remote: Remote,
    local_below: Vec<(String, Local)>,
    remote_below: Vec<Remote>,
}

fn folder_base(id: &str, updated_at: &str) -> Base {
    Base {
        kind: Kind::Folder,
        blake3: None,
        size: 0,
        mtime_ns: 0,
        remote_id: id.to_owned(),
        remote_updated_at: updated_at.to_owned(),
    }
}

fn agreed(local: &Local, remote: &Remote) -> Base {
    Base {
        kind: local.kind,
        blake3: remote.blake3.clone(),
        size: local.size,
        mtime_ns: local.mtime_ns,
        remote_id: remote.id.clone(),
        remote_updated_at: remote.updated_at.clone(),
    }
}

/// Whether `path` is still as the plan saw it: absent, or a file of the same size and time.
fn still(path: &Path, expect: Option<&Local>) -> bool {
    match (std::fs::symlink_metadata(path), expect) {
        (Err(err), None) => err.kind() == std::io::ErrorKind::NotFound,
        (Ok(meta), Some(local)) if local.kind == Kind::File => {
            meta.is_file() && meta.len() == local.size && mtime_ns(&meta) == local.mtime_ns
        }
        (Ok(meta), Some(_)) => meta.is_dir(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_copies_name_the_device_and_the_time_before_the_extension() {
        let at = time::macros::datetime!(2026-05-01 12:34:56 UTC);
        assert_eq!(conflict_name("report.txt", "laptop", at), "report (conflict laptop 2026-05-01 123456).txt");
        assert_eq!(conflict_name("Makefile", "pc", at), "Makefile (conflict pc 2026-05-01 123456)");
        assert_eq!(conflict_name(".bashrc", "pc", at), ".bashrc (conflict pc 2026-05-01 123456)");
    }
}
