//! The three-way reconcile: from the local side (L), the remote side (R) and the last agreed
//! version (B) of every path, the actions that bring both sides into step without losing a
//! byte. Pure: no I/O, so `--dry-run` prints exactly what a run would do, and every rule has a
//! unit test.
//!
//! The rules: a side whose path still matches B is unchanged; the changed side wins; both
//! changed to the same content agree; both changed differently is a conflict (both kept).
//! A deletion propagates only when the other side still has exactly B; against a change, the
//! changed one survives. A path with no B is new and is never deleted. A file replaced by a
//! folder (or the other way round) on one side is a deletion and a creation, carried over on
//! the same terms: only onto the agreed version, a folder only whole. Moves are found first
//! (remote ones by object id, local ones by a vanished B path whose content reappears under a
//! new path; a whole folder by all of its B entries reappearing below a new folder), so that a
//! renamed folder is one request, not a transfer of everything in it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use super::scan::{Local, Remote, Skipped, unchanged_since};
use super::state::{Base, Kind};

/// Which way changes may flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Both,
    /// Local changes to the server only.
    Push,
    /// Remote changes to the local folder only.
    Pull,
}

/// One step of a run. Paths are relative to the synced folders (`a/b.txt`).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// The remote object moved: move the local file or folder the same way.
    MoveLocal {
        from: String,
        to: String,
    },
    /// The local file or folder moved: move (and rename) the remote object, one request for a
    /// whole folder. `server_at` is where the server has it now: `from`, or the half-way point
    /// (moved but not renamed, or renamed but not moved) a run cut off mid-move left.
    MoveRemote {
        from: String,
        to: String,
        id: String,
        #[serde(skip)]
        server_at: String,
    },
    MakeRemoteFolder {
        path: String,
    },
    MakeLocalFolder {
        path: String,
        #[serde(skip)]
        remote: Remote,
    },
    /// Sends the local file; `replace` is the remote file whose content (`replaces`, its
    /// blake3) it replaces.
    Upload {
        path: String,
        size: u64,
        replace: Option<String>,
        #[serde(skip)]
        replaces: Option<String>,
        #[serde(skip)]
        local: Local,
    },
    /// Fetches the remote file; `expect` is what the local path must still be (nothing, or the
    /// base's size and time) when it is replaced.
    Download {
        path: String,
        size: u64,
        #[serde(skip)]
        remote: Remote,
        #[serde(skip)]
        expect: Option<Local>,
    },
    /// Both sides hold the same thing: only the base is written.
    Agree {
        path: String,
        #[serde(skip)]
        local: Local,
        #[serde(skip)]
        remote: Remote,
    },
    /// Changed on both sides: the local one is kept under a conflict name (and uploaded), the
    /// remote one is downloaded to the path.
    Conflict {
        path: String,
        #[serde(skip)]
        local: Local,
        #[serde(skip)]
        remote: Remote,
        /// A file on one side and a folder on the other: what is below the local folder (set
        /// aside with it, and uploaded there) or below the remote one (brought here).
        #[serde(skip)]
        local_below: Vec<(String, Local)>,
        #[serde(skip)]
        remote_below: Vec<Remote>,
    },
    /// Deleted here, unchanged there: into the server's trash, only if it is still as planned
    /// (`blake3`, a file's content then; the server checks it).
    TrashRemote {
        path: String,
        id: String,
        #[serde(skip)]
        blake3: Option<String>,
    },
    /// A folder here where the server still has the agreed file (or a file here where it has
    /// the agreed folder, with everything below it as agreed): the server's goes to the trash,
    /// only if still as planned (as `TrashRemote`), then the local one is made there.
    ReplaceRemote {
        path: String,
        id: String,
        #[serde(skip)]
        blake3: Option<String>,
        #[serde(skip)]
        local: Local,
    },
    /// The mirror of `ReplaceRemote`: the server replaced the agreed file or folder by the other
    /// kind. The local one (with `below`, each as agreed) is removed if it still has `expect`,
    /// then the server's is made here.
    ReplaceLocal {
        path: String,
        #[serde(skip)]
        expect: Local,
        #[serde(skip)]
        below: Vec<(String, Local)>,
        #[serde(skip)]
        remote: Remote,
    },
    /// Deleted on the server, unchanged here: removed when it still has `expect`.
    DeleteLocal {
        path: String,
        #[serde(skip)]
        expect: Local,
    },
    /// Gone on both sides: the base is dropped.
    Forget {
        path: String,
    },
    Skip {
        path: String,
        reason: String,
    },
}

impl Action {
    pub fn path(&self) -> &str {
        match self {
            Action::MoveLocal { to, .. } | Action::MoveRemote { to, .. } => to,
            Action::MakeRemoteFolder { path }
            | Action::MakeLocalFolder { path, .. }
            | Action::Upload { path, .. }
            | Action::Download { path, .. }
            | Action::Agree { path, .. }
            | Action::Conflict { path, .. }
            | Action::TrashRemote { path, .. }
            | Action::ReplaceRemote { path, .. }
            | Action::ReplaceLocal { path, .. }
            | Action::DeleteLocal { path, .. }
            | Action::Forget { path }
            | Action::Skip { path, .. } => path,
        }
    }

    /// The name scripts read in `--json` (`move_local`, `upload`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Action::MoveLocal { .. } => "move_local",
            Action::MoveRemote { .. } => "move_remote",
            Action::MakeRemoteFolder { .. } => "make_remote_folder",
            Action::MakeLocalFolder { .. } => "make_local_folder",
            Action::Upload { .. } => "upload",
            Action::Download { .. } => "download",
            Action::Agree { .. } => "agree",
            Action::Conflict { .. } => "conflict",
            Action::TrashRemote { .. } => "trash_remote",
            Action::ReplaceRemote { .. } => "replace_remote",
            Action::ReplaceLocal { .. } => "replace_local",
            Action::DeleteLocal { .. } => "delete_local",
            Action::Forget { .. } => "forget",
            Action::Skip { .. } => "skip",
        }
    }
}

/// Both sides and the base, keyed by relative path.
#[derive(Debug, Clone, Default)]
pub struct Sides {
    pub locals: BTreeMap<String, Local>,
    pub remotes: BTreeMap<String, Remote>,
    pub bases: BTreeMap<String, Base>,
}

fn is_below(path: &str, folder: &str) -> bool {
    path.len() > folder.len() && path.starts_with(folder) && path.as_bytes()[folder.len()] == b'/'
}

fn at_or_below(path: &str, folder: &str) -> bool {
    path == folder || is_below(path, folder)
}

/// Moves the entries at and below `from` to `to`.
fn rekey<T>(map: &mut BTreeMap<String, T>, from: &str, to: &str, mut fix: impl FnMut(&str, &mut T)) {
    let moved: Vec<String> = map.keys().filter(|k| at_or_below(k, from)).cloned().collect();
    let mut entries = Vec::new();
    for key in moved {
        if let Some(value) = map.remove(&key) {
            entries.push((format!("{to}{}", &key[from.len()..]), value));
        }
    }
    for (key, mut value) in entries {
        fix(&key, &mut value);
        map.insert(key, value);
    }
}

fn rekey_remotes(remotes: &mut BTreeMap<String, Remote>, from: &str, to: &str) {
    rekey(remotes, from, to, |path, remote| {
        remote.path = path.to_owned();
        remote.name = path.rsplit('/').next().unwrap_or(path).to_owned();
    });
}

fn same_content(kind: Kind, blake3: Option<&String>, base: &Base) -> bool {
    kind == base.kind && (kind == Kind::Folder || blake3 == base.blake3.as_ref())
}

/// Remote objects that moved (found by id) whose local copy is still where and as B left it.
fn remote_moves(sides: &mut Sides, actions: &mut Vec<Action>) {
    let by_id: HashMap<String, String> = sides.remotes.values().map(|r| (r.id.clone(), r.path.clone())).collect();
    let mut moved: Vec<String> = Vec::new();
    let candidates: Vec<(String, Base)> = sides.bases.iter().map(|(p, b)| (p.clone(), b.clone())).collect();
    for (from, base) in candidates {
        if moved.iter().any(|m| is_below(&from, m)) {
            continue;
        }
        let Some(to) = by_id.get(&base.remote_id) else { continue };
        if *to == from || sides.remotes.contains_key(&from) || sides.bases.contains_key(to) {
            continue;
        }
        let still_here = sides.locals.get(&from).is_some_and(|local| unchanged_since(local, &base));
        let target_free = !sides.locals.keys().any(|p| at_or_below(p, to));
        if !still_here || !target_free || is_below(to, &from) {
            continue;
        }
        rekey(&mut sides.bases, &from, to, |_, _| {});
        rekey(&mut sides.locals, &from, to, |_, _| {});
        actions.push(Action::MoveLocal { from: from.clone(), to: to.clone() });
        moved.push(from);
    }
}

/// The entries strictly below `folder`, from a map ordered by path.
fn below<'m, T>(map: &'m BTreeMap<String, T>, folder: &str) -> impl Iterator<Item = (&'m String, &'m T)> {
    let prefix = format!("{folder}/");
    map.range(prefix.clone()..).take_while(move |(path, _)| path.starts_with(&prefix))
}

/// Where the server has the object of `base` (agreed at `path`) when it is unchanged: at `path`,
/// or (found by id) at a path no agreement names, which a half-done move may have left it at.
fn unchanged_on_server(sides: &Sides, by_id: &HashMap<&str, &Remote>, path: &str, base: &Base) -> Option<String> {
    let unchanged = |r: &Remote| r.id == base.remote_id && same_content(r.kind, r.blake3.as_ref(), base);
    if let Some(remote) = sides.remotes.get(path) {
        return unchanged(remote).then(|| path.to_owned());
    }
    let remote = by_id.get(base.remote_id.as_str())?;
    (unchanged(remote) && !sides.bases.contains_key(&remote.path)).then(|| remote.path.clone())
}

/// Whether the server's `at` is `from` or one of the two half-way points of a move from `from`
/// to `to` (moved into the new folder under the old name, or renamed in the old folder).
fn on_the_way(at: &str, from: &str, to: &str) -> bool {
    fn split(path: &str) -> (&str, &str) {
        path.rsplit_once('/').unwrap_or(("", path))
    }
    let join = |parent: &str, name: &str| if parent.is_empty() { name.to_owned() } else { format!("{parent}/{name}") };
    let ((from_parent, from_name), (to_parent, to_name)) = (split(from), split(to));
    at == from || at == join(to_parent, from_name) || at == join(from_parent, to_name)
}

/// Local files and folders that moved: a B path gone here (still unchanged on the server)
/// whose content reappears under a new local path. A move an earlier run left half-done (the
/// object already in the new folder, or already renamed) is recognised by the object's id and
/// finished, never taken as a new object there to bring back here.
fn local_moves(sides: &mut Sides, actions: &mut Vec<Action>) {
    let by_id: HashMap<&str, &Remote> = sides.remotes.values().map(|r| (r.id.as_str(), r)).collect();
    let vanished: Vec<(String, Base, String)> = sides
        .bases
        .iter()
        .filter(|(path, _)| !sides.locals.contains_key(*path))
        .filter_map(|(path, base)| {
            unchanged_on_server(sides, &by_id, path, base).map(|at| (path.clone(), base.clone(), at))
        })
        .collect();
    drop(by_id);
    if vanished.is_empty() {
        return;
    }
    // New local paths: files by content, and folders.
    let mut new_files: HashMap<String, Vec<String>> = HashMap::new();
    let mut new_folders: Vec<String> = Vec::new();
    for (path, local) in &sides.locals {
        if sides.bases.contains_key(path) || sides.remotes.contains_key(path) {
            continue;
        }
        match (&local.kind, &local.blake3) {
            (Kind::File, Some(hash)) => new_files.entry(hash.clone()).or_default().push(path.clone()),
            (Kind::Folder, _) => new_folders.push(path.clone()),
            _ => {}
        }
    }
    let mut claimed: Vec<String> = Vec::new();
    let mut moved: Vec<String> = Vec::new();
    for (from, base, server_at) in vanished {
        if moved.iter().any(|m| is_below(&from, m) || is_below(&server_at, m)) {
            continue;
        }
        let name = from.rsplit('/').next().unwrap_or(&from).to_owned();
        let free = |path: &String| !claimed.iter().any(|c| at_or_below(path, c) || is_below(c, path));
        let mut candidates: Vec<&String> = match base.kind {
            Kind::File => {
                base.blake3.as_ref().and_then(|h| new_files.get(h)).map_or(Vec::new(), |paths| paths.iter().collect())
            }
            Kind::Folder => new_folders.iter().collect(),
        };
        candidates.retain(|path| free(path) && on_the_way(&server_at, &from, path));
        // The same name first (a move to another folder), then any (a rename).
        candidates.sort_by_key(|p| p.rsplit('/').next() != Some(name.as_str()));
        let found = candidates.into_iter().find(|to| match base.kind {
            Kind::File => true,
            Kind::Folder => {
                let mut agreed_below = below(&sides.bases, &from).peekable();
                agreed_below.peek().is_some()
                    && agreed_below.all(|(p, b)| {
                        let moved_path = format!("{to}{}", &p[from.len()..]);
                        sides.locals.get(&moved_path).is_some_and(|l| same_content(l.kind, l.blake3.as_ref(), b))
                    })
            }
        });
        let Some(to) = found.cloned() else { continue };
        let id = base.remote_id.clone();
        rekey(&mut sides.bases, &from, &to, |_, _| {});
        rekey_remotes(&mut sides.remotes, &server_at, &to);
        claimed.push(to.clone());
        actions.push(Action::MoveRemote { from: from.clone(), to, id, server_at });
        moved.push(from);
    }
}

/// What to do with one path.
fn decide(path: &str, local: Option<&Local>, remote: Option<&Remote>, base: Option<&Base>) -> Option<Action> {
    let path = path.to_owned();
    let local_same = match (local, base) {
        (Some(l), Some(b)) => same_content(l.kind, l.blake3.as_ref(), b),
        (None, None) => true,
        _ => false,
    };
    let remote_same = match (remote, base) {
        (Some(r), Some(b)) => same_content(r.kind, r.blake3.as_ref(), b),
        (None, None) => true,
        _ => false,
    };
    match (local_same, remote_same) {
        (true, true) => match (local, remote, base) {
            // Unchanged; the base is refreshed when the remote object or the local time moved on.
            (Some(l), Some(r), Some(b))
                if r.id != b.remote_id || r.updated_at != b.remote_updated_at || l.mtime_ns != b.mtime_ns =>
            {
                Some(Action::Agree { path, local: l.clone(), remote: r.clone() })
            }
            _ => None,
        },
        (false, true) => match (local, remote) {
            (Some(l), Some(r)) if l.kind != r.kind => {
                Some(Action::ReplaceRemote { path, id: r.id.clone(), blake3: r.blake3.clone(), local: l.clone() })
            }
            (Some(l), Some(r)) if l.kind == Kind::File => Some(Action::Upload {
                path,
                size: l.size,
                replace: Some(r.id.clone()),
                replaces: r.blake3.clone(),
                local: l.clone(),
            }),
            (Some(l), Some(r)) => Some(Action::Agree { path, local: l.clone(), remote: r.clone() }),
            (Some(l), None) if l.kind == Kind::Folder => Some(Action::MakeRemoteFolder { path }),
            (Some(l), None) => {
                Some(Action::Upload { path, size: l.size, replace: None, replaces: None, local: l.clone() })
            }
            (None, Some(r)) => Some(Action::TrashRemote { path, id: r.id.clone(), blake3: r.blake3.clone() }),
            (None, None) => Some(Action::Forget { path }),
        },
        (true, false) => match (local, remote) {
            (Some(l), Some(r)) if l.kind != r.kind => {
                Some(Action::ReplaceLocal { path, expect: l.clone(), below: Vec::new(), remote: r.clone() })
            }
            (Some(l), Some(r)) if r.kind == Kind::File => {
                Some(Action::Download { path, size: r.size, remote: r.clone(), expect: Some(l.clone()) })
            }
            (Some(l), Some(r)) => Some(Action::Agree { path, local: l.clone(), remote: r.clone() }),
            (None, Some(r)) if r.kind == Kind::Folder => Some(Action::MakeLocalFolder { path, remote: r.clone() }),
            (None, Some(r)) => Some(Action::Download { path, size: r.size, remote: r.clone(), expect: None }),
            (Some(l), None) => Some(Action::DeleteLocal { path, expect: l.clone() }),
            (None, None) => Some(Action::Forget { path }),
        },
        (false, false) => match (local, remote) {
            (Some(l), Some(r)) if l.kind == r.kind && (l.kind == Kind::Folder || l.blake3 == r.blake3) => {
                Some(Action::Agree { path, local: l.clone(), remote: r.clone() })
            }
            (Some(l), Some(r)) => Some(conflict(path, l, r)),
            // Changed here, deleted there: the changed one survives.
            (Some(l), None) if l.kind == Kind::Folder => Some(Action::MakeRemoteFolder { path }),
            (Some(l), None) => {
                Some(Action::Upload { path, size: l.size, replace: None, replaces: None, local: l.clone() })
            }
            (None, Some(r)) if r.kind == Kind::Folder => Some(Action::MakeLocalFolder { path, remote: r.clone() }),
            (None, Some(r)) => Some(Action::Download { path, size: r.size, remote: r.clone(), expect: None }),
            (None, None) => Some(Action::Forget { path }),
        },
    }
}

/// Both changed differently: both kept (see [`Action::Conflict`]).
fn conflict(path: String, local: &Local, remote: &Remote) -> Action {
    Action::Conflict {
        path,
        local: local.clone(),
        remote: remote.clone(),
        local_below: Vec::new(),
        remote_below: Vec::new(),
    }
}

/// A file on one side and a folder on the other, both changed: a conflict of the whole folder.
/// The local side is set aside with all it holds and the remote one brought here with all it
/// holds, so nothing below is decided (nor deleted) on its own.
fn whole_kind_conflicts(sides: &Sides, by_path: &mut BTreeMap<String, Action>) {
    let paths: Vec<String> = by_path
        .iter()
        .filter(|(_, action)| matches!(action, Action::Conflict { local, remote, .. } if local.kind != remote.kind))
        .map(|(path, _)| path.clone())
        .collect();
    for path in paths {
        by_path.retain(|inner, _| !is_below(inner, &path));
        if let Some(Action::Conflict { local_below, remote_below, .. }) = by_path.get_mut(&path) {
            *local_below = below(&sides.locals, &path).map(|(p, l)| (p.clone(), l.clone())).collect();
            *remote_below = below(&sides.remotes, &path).map(|(_, r)| r.clone()).collect();
        }
    }
}

/// A folder gives way to a file only when everything below it goes too (as agreed, nothing new
/// or skipped in it): then it goes whole, the deletions below are part of the replacement.
/// Otherwise both changed: a conflict, both kept (see [`whole_kind_conflicts`]).
fn replace_whole_folders(sides: &Sides, skipped: &[&str], by_path: &mut BTreeMap<String, Action>) {
    let folders: Vec<String> = by_path
        .iter()
        .filter(|(_, action)| match action {
            Action::ReplaceRemote { local, .. } => local.kind == Kind::File,
            Action::ReplaceLocal { expect, .. } => expect.kind == Kind::Folder,
            _ => false,
        })
        .map(|(path, _)| path.clone())
        .collect();
    for folder in folders {
        let remote_side = matches!(by_path.get(&folder), Some(Action::ReplaceRemote { .. }));
        let inside: Vec<String> = if remote_side {
            below(&sides.remotes, &folder).map(|(p, _)| p.clone()).collect()
        } else {
            below(&sides.locals, &folder).map(|(p, _)| p.clone()).collect()
        };
        let goes = |path: &String| match by_path.get(path) {
            Some(Action::TrashRemote { .. }) => remote_side,
            Some(Action::DeleteLocal { .. }) => !remote_side,
            _ => false,
        };
        let everything_goes = !skipped.iter().any(|s| is_below(s, &folder)) && inside.iter().all(goes);
        let mut removed = Vec::new();
        by_path.retain(|path, action| {
            if !is_below(path, &folder) {
                return true;
            }
            if let Action::DeleteLocal { expect, .. } = action {
                removed.push((path.clone(), expect.clone()));
            }
            false
        });
        match by_path.get_mut(&folder) {
            Some(Action::ReplaceLocal { below, .. }) if everything_goes => *below = removed,
            Some(_) if everything_goes => {}
            _ => {
                let both = conflict(folder.clone(), &sides.locals[&folder], &sides.remotes[&folder]);
                by_path.insert(folder, both);
            }
        }
    }
}

/// A folder is deleted on one side only when everything below it goes too; otherwise it is
/// made again there (what changed below it survives, and needs it). What was skipped below it
/// (a remote name this side cannot hold, a local file that cannot be read) survives too: this
/// side never saw it, so it never chose to delete it.
fn keep_folders_with_survivors(sides: &Sides, skipped: &[&str], by_path: &mut BTreeMap<String, Action>) {
    let folders: Vec<String> = by_path
        .iter()
        .rev()
        .filter(|(path, action)| match action {
            Action::TrashRemote { .. } => sides.remotes.get(*path).is_some_and(|r| r.kind == Kind::Folder),
            Action::DeleteLocal { expect, .. } => expect.kind == Kind::Folder,
            _ => false,
        })
        .map(|(path, _)| path.clone())
        .collect();
    for folder in folders {
        let trashing = matches!(by_path.get(&folder), Some(Action::TrashRemote { .. }));
        let everything_goes = if skipped.iter().any(|s| is_below(s, &folder)) {
            false
        } else if trashing {
            sides
                .remotes
                .keys()
                .filter(|p| is_below(p, &folder))
                .all(|p| matches!(by_path.get(p), Some(Action::TrashRemote { .. })))
        } else {
            sides
                .locals
                .keys()
                .filter(|p| is_below(p, &folder))
                .all(|p| matches!(by_path.get(p), Some(Action::DeleteLocal { .. })))
        };
        if everything_goes {
            continue;
        }
        let again = if trashing {
            Action::MakeLocalFolder { path: folder.clone(), remote: sides.remotes[&folder].clone() }
        } else {
            Action::MakeRemoteFolder { path: folder.clone() }
        };
        by_path.insert(folder, again);
    }
    // One trash request per folder: what is below a trashed folder goes with it.
    let trashed: Vec<String> = by_path
        .iter()
        .filter(|(path, action)| {
            matches!(action, Action::TrashRemote { .. })
                && sides.remotes.get(*path).is_some_and(|r| r.kind == Kind::Folder)
        })
        .map(|(p, _)| p.clone())
        .collect();
    by_path.retain(|path, action| {
        !(matches!(action, Action::TrashRemote { .. }) && trashed.iter().any(|folder| is_below(path, folder)))
    });
}

/// The plan of one run: moves first (already reflected in `sides`), then one action per path
/// that needs one, parents before children. `skipped` are paths one side cannot hold.
pub fn plan(mut sides: Sides, direction: Direction, skipped: &[Skipped]) -> (Vec<Action>, Sides) {
    let mut moves = Vec::new();
    if direction != Direction::Push {
        remote_moves(&mut sides, &mut moves);
    }
    if direction != Direction::Pull {
        local_moves(&mut sides, &mut moves);
    }
    let skipped_paths: Vec<&str> = skipped.iter().map(|s| s.path.as_str()).collect();
    let paths: BTreeSet<&String> = sides.locals.keys().chain(sides.remotes.keys()).chain(sides.bases.keys()).collect();
    let mut by_path = BTreeMap::new();
    for path in paths {
        // A path one side cannot hold is left alone on both (never deleted for being absent).
        if skipped_paths.iter().any(|s| at_or_below(path, s)) {
            continue;
        }
        if let Some(action) = decide(path, sides.locals.get(path), sides.remotes.get(path), sides.bases.get(path)) {
            by_path.insert(path.clone(), action);
        }
    }
    replace_whole_folders(&sides, &skipped_paths, &mut by_path);
    whole_kind_conflicts(&sides, &mut by_path);
    keep_folders_with_survivors(&sides, &skipped_paths, &mut by_path);
    let mut actions = moves;
    for skip in skipped {
        actions.push(Action::Skip { path: skip.path.clone(), reason: skip.reason.clone() });
    }
    for (_, action) in by_path {
        let one_way = "changed on both sides; a one-way run leaves it (run a two-way sync to keep both)";
        let action = match (direction, action) {
            (Direction::Both, action) => action,
            (_, Action::Conflict { path, .. }) => Action::Skip { path, reason: one_way.into() },
            (
                Direction::Push,
                Action::MoveLocal { .. }
                | Action::MakeLocalFolder { .. }
                | Action::Download { .. }
                | Action::ReplaceLocal { .. }
                | Action::DeleteLocal { .. },
            )
            | (
                Direction::Pull,
                Action::MoveRemote { .. }
                | Action::MakeRemoteFolder { .. }
                | Action::Upload { .. }
                | Action::ReplaceRemote { .. }
                | Action::TrashRemote { .. },
            ) => continue,
            (_, action) => action,
        };
        actions.push(action);
    }
    (actions, sides)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(hash: &str, mtime: i64) -> Local {
        Local { kind: Kind::File, size: hash.len() as u64, mtime_ns: mtime, blake3: Some(hash.into()) }
    }

    fn folder() -> Local {
        Local { kind: Kind::Folder, size: 0, mtime_ns: 0, blake3: None }
    }

    fn remote(path: &str, id: &str, hash: Option<&str>) -> Remote {
        Remote {
            id: id.into(),
            parent_id: None,
            kind: if hash.is_some() { Kind::File } else { Kind::Folder },
            name: path.rsplit('/').next().unwrap().into(),
            path: path.into(),
            size: hash.map_or(0, |h| h.len() as u64),
            blake3: hash.map(str::to_owned),
            updated_at: "t".into(),
        }
    }

    fn base(id: &str, hash: Option<&str>, mtime: i64) -> Base {
        Base {
            kind: if hash.is_some() { Kind::File } else { Kind::Folder },
            blake3: hash.map(str::to_owned),
            size: hash.map_or(0, |h| h.len() as u64),
            mtime_ns: if hash.is_some() { mtime } else { 0 },
            remote_id: id.into(),
            remote_updated_at: "t".into(),
        }
    }

    /// The plan as `action path` lines.
    fn plan_of(sides: Sides) -> Vec<String> {
        plan(sides, Direction::Both, &[]).0.iter().map(|a| format!("{} {}", a.name(), a.path())).collect()
    }

    fn sides(locals: &[(&str, Local)], remotes: &[Remote], bases: &[(&str, Base)]) -> Sides {
        Sides {
            locals: locals.iter().map(|(p, l)| (p.to_string(), l.clone())).collect(),
            remotes: remotes.iter().map(|r| (r.path.clone(), r.clone())).collect(),
            bases: bases.iter().map(|(p, b)| (p.to_string(), b.clone())).collect(),
        }
    }

    #[test]
    fn the_changed_side_wins_and_unchanged_paths_need_nothing() {
        let b = [
            ("same", base("1", Some("aa"), 5)),
            ("here", base("2", Some("aa"), 5)),
            ("there", base("3", Some("aa"), 5)),
        ];
        let s = sides(
            &[("same", file("aa", 5)), ("here", file("bbb", 6)), ("there", file("aa", 5))],
            &[remote("same", "1", Some("aa")), remote("here", "2", Some("aa")), remote("there", "3", Some("cc"))],
            &b,
        );
        assert_eq!(plan_of(s), ["upload here", "download there"]);
    }

    #[test]
    fn both_changed_differently_is_a_conflict_and_the_same_change_agrees() {
        let b = [("x", base("1", Some("aa"), 5)), ("y", base("2", Some("aa"), 5))];
        let s = sides(
            &[("x", file("bb", 6)), ("y", file("cc", 6)), ("new", file("dd", 1))],
            &[remote("x", "1", Some("zz")), remote("y", "2", Some("cc")), remote("new", "9", Some("ee"))],
            &b,
        );
        assert_eq!(
            plan_of(s),
            ["conflict new", "conflict x", "agree y"],
            "no base and other content is a conflict too"
        );
    }

    #[test]
    fn a_deletion_propagates_only_onto_the_unchanged_version() {
        let b = [
            ("gone-here", base("1", Some("aa"), 5)),
            ("gone-there", base("2", Some("aa"), 5)),
            ("gone-here-changed-there", base("3", Some("aa"), 5)),
            ("gone-there-changed-here", base("4", Some("aa"), 5)),
            ("gone-both", base("5", Some("aa"), 5)),
        ];
        let s = sides(
            &[("gone-there", file("aa", 5)), ("gone-there-changed-here", file("bb", 7))],
            &[remote("gone-here", "1", Some("aa")), remote("gone-here-changed-there", "3", Some("cc"))],
            &b,
        );
        assert_eq!(
            plan_of(s),
            [
                "forget gone-both",
                "trash_remote gone-here",
                "download gone-here-changed-there",
                "delete_local gone-there",
                "upload gone-there-changed-here",
            ]
        );
    }

    #[test]
    fn new_on_one_side_is_created_on_the_other_never_deleted() {
        let s = sides(&[("offline.txt", file("aa", 5)), ("empty", folder())], &[remote("remote-only", "7", None)], &[]);
        assert_eq!(plan_of(s), ["make_remote_folder empty", "upload offline.txt", "make_local_folder remote-only"]);
    }

    #[test]
    fn a_move_left_half_way_is_finished_and_an_unrelated_one_is_not_taken_for_it() {
        let locals = [("a", folder()), ("b", folder()), ("b/new", folder()), ("b/new/x.txt", file("xx", 1))];
        let bases = [("a", base("a", None, 0)), ("b", base("b", None, 0)), ("a/old", base("f", None, 0))];
        let bases = [bases.as_slice(), &[("a/old/x.txt", base("x", Some("xx"), 1))]].concat();
        // The server has the folder in `b` under its old name: moved, not yet renamed.
        let half = [remote("a", "a", None), remote("b", "b", None), remote("b/old", "f", None)];
        let half = [half.as_slice(), &[remote("b/old/x.txt", "x", Some("xx"))]].concat();
        let (actions, _) = plan(sides(&locals, &half, &bases), Direction::Both, &[]);
        let moves: Vec<(String, String)> = actions
            .iter()
            .filter_map(|a| match a {
                Action::MoveRemote { to, server_at, .. } => Some((to.clone(), server_at.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(moves, [("b/new".to_string(), "b/old".to_string())], "{actions:?}");
        assert_eq!(plan_of(sides(&locals, &half, &bases)).len(), 1, "nothing else: the move alone");
        // Elsewhere on the server (another device moved it): not a half-way point of this move.
        let elsewhere = [remote("a", "a", None), remote("b", "b", None), remote("a/other", "f", None)];
        let elsewhere = [elsewhere.as_slice(), &[remote("a/other/x.txt", "x", Some("xx"))]].concat();
        let planned = plan_of(sides(&locals, &elsewhere, &bases));
        assert!(!planned.iter().any(|p| p.starts_with("move_remote")), "{planned:?}");
    }

    #[test]
    fn a_renamed_folder_is_one_remote_move() {
        let mut locals = vec![("new".to_string(), folder())];
        let mut remotes = vec![remote("old", "f", None)];
        let mut bases = vec![("old".to_string(), base("f", None, 0))];
        for i in 0..50 {
            let hash = format!("h{i}");
            locals.push((format!("new/{i}.txt"), file(&hash, i)));
            remotes.push(remote(&format!("old/{i}.txt"), &format!("id{i}"), Some(&hash)));
            bases.push((format!("old/{i}.txt"), base(&format!("id{i}"), Some(&hash), i)));
        }
        locals.push(("new/added.txt".to_string(), file("zz", 1)));
        let s = Sides {
            locals: locals.into_iter().collect(),
            remotes: remotes.into_iter().map(|r| (r.path.clone(), r)).collect(),
            bases: bases.into_iter().collect(),
        };
        assert_eq!(plan_of(s), ["move_remote new", "upload new/added.txt"]);
    }

    #[test]
    fn a_remote_move_moves_the_local_copy_and_a_local_file_rename_renames_the_remote_one() {
        let s = sides(
            &[("a.txt", file("aa", 5)), ("B.txt", file("bb", 6))],
            &[remote("moved/a.txt", "1", Some("aa")), remote("moved", "m", None), remote("b.txt", "2", Some("bb"))],
            &[("a.txt", base("1", Some("aa"), 5)), ("b.txt", base("2", Some("bb"), 6))],
        );
        assert_eq!(plan_of(s), ["move_local moved/a.txt", "move_remote B.txt", "make_local_folder moved"]);
    }

    #[test]
    fn a_folder_deleted_here_goes_to_the_trash_unless_something_below_changed_there() {
        let bases = [
            ("keep", base("k", None, 0)),
            ("keep/changed.txt", base("1", Some("aa"), 5)),
            ("keep/same.txt", base("2", Some("aa"), 5)),
            ("drop", base("d", None, 0)),
            ("drop/same.txt", base("3", Some("aa"), 5)),
        ];
        let s = sides(
            &[],
            &[
                remote("keep", "k", None),
                remote("keep/changed.txt", "1", Some("bb")),
                remote("keep/same.txt", "2", Some("aa")),
                remote("drop", "d", None),
                remote("drop/same.txt", "3", Some("aa")),
            ],
            &bases,
        );
        assert_eq!(
            plan_of(s),
            ["trash_remote drop", "make_local_folder keep", "download keep/changed.txt", "trash_remote keep/same.txt"]
        );
    }

    #[test]
    fn a_folder_deleted_here_keeps_on_the_server_what_this_side_could_not_hold() {
        let bases = [("f", base("f", None, 0)), ("f/ok.txt", base("1", Some("aa"), 5))];
        let s = sides(&[], &[remote("f", "f", None), remote("f/ok.txt", "1", Some("aa"))], &bases);
        let skipped = [Skipped { path: "f/back\\slash.txt".into(), reason: "not synced here".into() }];
        let planned: Vec<String> =
            plan(s, Direction::Both, &skipped).0.iter().map(|a| format!("{} {}", a.name(), a.path())).collect();
        assert_eq!(planned, ["skip f/back\\slash.txt", "make_local_folder f", "trash_remote f/ok.txt"]);
    }

    #[test]
    fn a_file_replaced_by_a_folder_on_one_side_replaces_the_unchanged_one_on_the_other() {
        let bases = [("here", base("1", Some("aa"), 5)), ("there", base("2", Some("bb"), 5))];
        let s = sides(
            &[("here", folder()), ("here/x.txt", file("xx", 1)), ("there", file("bb", 5))],
            &[remote("here", "1", Some("aa")), remote("there", "9", None), remote("there/y.txt", "8", Some("yy"))],
            &bases,
        );
        assert_eq!(
            plan_of(s),
            ["replace_remote here", "upload here/x.txt", "replace_local there", "download there/y.txt"]
        );
    }

    #[test]
    fn a_folder_gives_way_to_a_file_whole_or_not_at_all() {
        let bases = [
            ("d", base("d", None, 0)),
            ("d/same.txt", base("1", Some("aa"), 5)),
            ("d/sub", base("s", None, 0)),
            ("d/sub/same.txt", base("2", Some("bb"), 5)),
        ];
        let locals = [("d", file("new", 9))];
        let remotes = [
            remote("d", "d", None),
            remote("d/same.txt", "1", Some("aa")),
            remote("d/sub", "s", None),
            remote("d/sub/same.txt", "2", Some("bb")),
        ];
        assert_eq!(plan_of(sides(&locals, &remotes, &bases)), ["replace_remote d"], "one trash request for all");
        // Something below changed on the server: both changed, nothing below is touched.
        let changed = [&remotes[..3], &[remote("d/sub/same.txt", "2", Some("cc"))]].concat();
        assert_eq!(plan_of(sides(&locals, &changed, &bases)), ["conflict d"]);
        let (actions, _) = plan(sides(&locals, &changed, &bases), Direction::Both, &[]);
        let Some(Action::Conflict { remote_below, .. }) = actions.first() else { panic!("{actions:?}") };
        assert_eq!(remote_below.len(), 3, "the server's folder is brought here whole");

        // Here, the mirror: the local folder goes with what it holds, each as agreed.
        let locals = [("d", folder()), ("d/same.txt", file("aa", 5)), ("d/sub", folder())];
        let locals = [&locals[..], &[("d/sub/same.txt", file("bb", 5))]].concat();
        let (actions, _) = plan(sides(&locals, &[remote("d", "9", Some("zz"))], &bases), Direction::Both, &[]);
        let Some(Action::ReplaceLocal { below, .. }) = actions.first() else { panic!("{actions:?}") };
        let below: Vec<&str> = below.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!((actions.len(), below), (1, vec!["d/same.txt", "d/sub", "d/sub/same.txt"]));
        let added = [&locals[..], &[("d/new.txt", file("nn", 1))]].concat();
        assert_eq!(plan_of(sides(&added, &[remote("d", "9", Some("zz"))], &bases)), ["conflict d"], "a new file in it");
    }

    #[test]
    fn one_way_runs_leave_the_other_direction_alone() {
        let s = sides(&[("up.txt", file("aa", 1))], &[remote("down.txt", "1", Some("bb"))], &[]);
        let push: Vec<String> = plan(s.clone(), Direction::Push, &[]).0.iter().map(|a| a.name().to_owned()).collect();
        assert_eq!(push, ["upload"]);
        let pull: Vec<String> = plan(s, Direction::Pull, &[]).0.iter().map(|a| a.name().to_owned()).collect();
        assert_eq!(pull, ["download"]);
    }
}
