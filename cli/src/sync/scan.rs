//! Both sides as they are now: the local folder walked (size and modification time of each
//! file, hashed only when it differs from the base), the remote folder listed in one paged
//! request (`GET /object/{id}/tree`), and the names one side cannot hold.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use eventsource_stream::Eventsource;
use futures_util::{StreamExt, stream};
use serde::Deserialize;

use super::state::{Base, Kind};
use crate::client::Api;
use crate::error::{CliResult, ExitKind};
use crate::remote::RemotePath;
use crate::upload::hash_file;

/// The prefix of the temporary names this CLI makes (see [`is_temporary_name`]).
pub const PART_PREFIX: &str = ".nubo-part-";

/// Whether `name` is exactly one of the temporary names this CLI makes: a download in flight
/// (`.nubo-part-` and 24 hex digits), a step of a case-only rename (`.nubo-part-rename-PID`) or
/// the case probe (`.nubo-part-case-probe-PID`, and its upper-case twin). Only these are never
/// synced and removed when left behind; a user's own `.nubo-part-notes.txt` is an ordinary file.
pub fn is_temporary_name(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = name.strip_prefix(PART_PREFIX) {
        if rest.len() == 24 && rest.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return true;
        }
        if let Some(pid) = rest.strip_prefix("rename-").or_else(|| rest.strip_prefix("case-probe-")) {
            return digits(pid);
        }
    }
    name.strip_prefix(".NUBO-PART-CASE-PROBE-").is_some_and(digits)
}

/// A local file or folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Local {
    pub kind: Kind,
    pub size: u64,
    pub mtime_ns: i64,
    /// Filled for files by [`hash_changed`].
    pub blake3: Option<String>,
}

/// A remote file or folder.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Remote {
    pub id: String,
    pub parent_id: Option<String>,
    #[serde(deserialize_with = "kind_of")]
    pub kind: Kind,
    pub name: String,
    /// Relative to the synced folder, `a/b.txt`.
    pub path: String,
    pub size: u64,
    pub blake3: Option<String>,
    pub updated_at: String,
}

fn kind_of<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Kind, D::Error> {
    Ok(Kind::parse(&String::deserialize(deserializer)?))
}

/// A path left alone, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Skipped {
    pub path: String,
    pub reason: String,
}

pub fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    crate::mtime::of_metadata(meta)
}

/// Why the local file system cannot hold a remote `name` (we refuse rather than mangle it).
pub fn local_name_problem(name: &str) -> Option<&'static str> {
    if name.contains('\\') {
        return Some("its name contains `\\`, a path separator on some systems");
    }
    if is_temporary_name(name) {
        return Some("its name is kept for downloads in progress");
    }
    if name.len() > 255 {
        return Some("its name is longer than local file names may be");
    }
    if cfg!(windows) {
        let stem = name.split('.').next().unwrap_or_default().to_ascii_uppercase();
        let reserved = ["CON", "PRN", "AUX", "NUL"].contains(&stem.as_str())
            || ((stem.starts_with("COM") || stem.starts_with("LPT"))
                && stem.len() == 4
                && stem.as_bytes()[3].is_ascii_digit());
        if reserved || name.ends_with('.') || name.ends_with(' ') || name.contains(['<', '>', ':', '"', '|', '?', '*'])
        {
            return Some("its name is reserved or has characters Windows refuses");
        }
    }
    None
}

/// Why the server cannot hold a local `name` (its rules: 1..=255 bytes, no control characters,
/// no `\`, no trailing space, no Unicode noncharacter).
fn remote_name_problem(name: &str) -> Option<&'static str> {
    if name.len() > 255 {
        return Some("its name is longer than 255 bytes");
    }
    if name.chars().any(char::is_control) {
        return Some("its name has control characters");
    }
    if name.trim().is_empty() {
        return Some("its name is only whitespace");
    }
    if name.contains('\\') {
        return Some("its name contains `\\`, a path separator on Windows");
    }
    if name.ends_with(' ') {
        return Some("its name ends with a space");
    }
    if name.chars().any(|c| matches!(c, '\u{FDD0}'..='\u{FDEF}') || (c as u32 & 0xFFFE) == 0xFFFE) {
        return Some("its name has a Unicode noncharacter");
    }
    None
}

/// Every file and folder below `root` by relative path (`a/b.txt`); what cannot be synced
/// (symbolic links, special files, names that are not UTF-8 or that the server refuses) is
/// listed as skipped.
pub fn scan_local(root: &Path) -> std::io::Result<(BTreeMap<String, Local>, Vec<Skipped>)> {
    let mut found = BTreeMap::new();
    let mut skipped = Vec::new();
    walk_below(root, String::new(), &mut found, &mut skipped)?;
    Ok((found, skipped))
}

/// Adds everything below `dir` (at `prefix`, empty or ending in `/`) to `found`.
fn walk_below(
    dir: &Path,
    prefix: String,
    found: &mut BTreeMap<String, Local>,
    skipped: &mut Vec<Skipped>,
) -> std::io::Result<()> {
    let mut pending = vec![(dir.to_owned(), prefix)];
    while let Some((dir, prefix)) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            // A folder below the root that cannot be read is left alone, with all it holds.
            Err(err) if !prefix.is_empty() => {
                let path = prefix.trim_end_matches('/').to_owned();
                skipped.push(Skipped { path, reason: format!("cannot be read: {err}") });
                continue;
            }
            Err(err) => return Err(err),
        };
        for entry in entries {
            let entry = entry?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                let shown = format!("{prefix}{}", entry.file_name().to_string_lossy());
                skipped.push(Skipped { path: shown, reason: "its name is not UTF-8".into() });
                continue;
            };
            let path = format!("{prefix}{name}");
            let meta = match entry.metadata() {
                Ok(meta) => meta,
                // Removed while we looked: it is simply not there.
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                Err(err) => return Err(err),
            };
            if let Some(folder) = found_entry(path, &name, &meta, found, skipped) {
                pending.push((entry.path(), format!("{folder}/")));
            }
        }
    }
    Ok(())
}

/// Records the entry `name` at `path` (its metadata, links not followed) in `found`, or as
/// skipped; the path when it is a folder to walk.
fn found_entry(
    path: String,
    name: &str,
    meta: &std::fs::Metadata,
    found: &mut BTreeMap<String, Local>,
    skipped: &mut Vec<Skipped>,
) -> Option<String> {
    if is_temporary_name(name) {
        return None;
    }
    if let Some(reason) = remote_name_problem(name) {
        skipped.push(Skipped { path, reason: reason.into() });
        return None;
    }
    if meta.is_dir() {
        found.insert(path.clone(), Local { kind: Kind::Folder, size: 0, mtime_ns: 0, blake3: None });
        Some(path)
    } else if meta.is_file() {
        found.insert(path, Local { kind: Kind::File, size: meta.len(), mtime_ns: mtime_ns(meta), blake3: None });
        None
    } else {
        skipped.push(Skipped { path, reason: "not a regular file or folder (a link?)".into() });
        None
    }
}

/// The local side as the last agreement left it: what a watched run starts from when the run
/// before it ended in step, before it looks again at what the watcher saw change ([`rescan`]).
pub fn local_as_agreed(bases: &BTreeMap<String, Base>) -> BTreeMap<String, Local> {
    bases
        .iter()
        .map(|(path, base)| {
            let local = match base.kind {
                Kind::Folder => Local { kind: Kind::Folder, size: 0, mtime_ns: 0, blake3: None },
                Kind::File => Local { kind: Kind::File, size: base.size, mtime_ns: base.mtime_ns, blake3: None },
            };
            (path.clone(), local)
        })
        .collect()
}

/// Looks again at the `changed` paths (relative, from the watcher's journal) and what is below
/// them, and puts what is there now in `locals` in place of what was. A path whose folder is
/// not known yet is looked at from the highest such folder, so a folder made (or moved in)
/// with its contents is walked whole.
pub fn rescan(
    root: &Path,
    locals: &mut BTreeMap<String, Local>,
    changed: &std::collections::BTreeSet<String>,
) -> std::io::Result<Vec<Skipped>> {
    let mut targets = std::collections::BTreeSet::new();
    for path in changed.iter().filter(|path| !path.is_empty()) {
        let mut target = path.as_str();
        for (at, _) in path.match_indices('/') {
            let ancestor = &path[..at];
            if locals.get(ancestor).is_none_or(|local| local.kind != Kind::Folder) {
                target = ancestor;
                break;
            }
        }
        targets.insert(target.to_owned());
    }
    // A target below another is looked at with it.
    let below_another = |target: &String| target.match_indices('/').any(|(at, _)| targets.contains(&target[..at]));
    let targets: Vec<String> = targets.iter().filter(|target| !below_another(target)).cloned().collect();
    for target in &targets {
        locals.remove(target);
        let prefix = format!("{target}/");
        let below: Vec<String> = locals
            .range(prefix.clone()..)
            .take_while(|(path, _)| path.starts_with(&prefix))
            .map(|(path, _)| path.clone())
            .collect();
        for path in below {
            locals.remove(&path);
        }
    }
    let mut skipped = Vec::new();
    for target in targets {
        let name = target.rsplit('/').next().unwrap_or(&target).to_owned();
        let full = root.join(&target);
        let meta = match std::fs::symlink_metadata(&full) {
            Ok(meta) => meta,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(err),
        };
        if let Some(folder) = found_entry(target, &name, &meta, locals, &mut skipped) {
            walk_below(&full, format!("{folder}/"), locals, &mut skipped)?;
        }
    }
    Ok(skipped)
}

/// The CLI's own configuration and state folders (credentials, resume records, sync states)
/// when they are inside `root`, as relative paths: never synced either way, wherever they are.
pub fn own_folders(root: &Path) -> Vec<String> {
    let mine = [crate::config::config_dir().ok(), super::state::state_dir().ok()];
    mine.into_iter()
        .flatten()
        .filter_map(|dir| std::fs::canonicalize(dir).ok())
        .filter_map(|dir| {
            let relative = dir.strip_prefix(root).ok()?.to_str()?.replace(std::path::MAIN_SEPARATOR, "/");
            (!relative.is_empty()).then_some(relative)
        })
        .collect()
}

/// Drops `own` (see [`own_folders`]) and what is below from a side or the base.
pub fn without_own<T>(map: &mut BTreeMap<String, T>, own: &[String]) {
    if !own.is_empty() {
        map.retain(|path, _| !own.iter().any(|o| path == o || path.starts_with(&format!("{o}/"))));
    }
}

/// Whether a local file still has the base's content: the same size and modification time.
pub fn unchanged_since(local: &Local, base: &Base) -> bool {
    local.kind == base.kind
        && (local.kind == Kind::Folder || (local.size == base.size && local.mtime_ns == base.mtime_ns))
}

/// Fills `blake3` of every local file: the base's when its size and time say it is unchanged,
/// else read from the disk (`parallel` at a time). Files that vanish meanwhile drop out; files
/// that cannot be read are answered as skipped (left alone on both sides, never taken as deleted).
pub async fn hash_changed(
    root: &Path,
    locals: &mut BTreeMap<String, Local>,
    bases: &BTreeMap<String, Base>,
    parallel: usize,
) -> Vec<Skipped> {
    let mut to_read = Vec::new();
    for (path, local) in locals.iter_mut() {
        if local.kind != Kind::File {
            continue;
        }
        match bases.get(path) {
            Some(base) if unchanged_since(local, base) => local.blake3 = base.blake3.clone(),
            _ => to_read.push(path.clone()),
        }
    }
    let hashes: Vec<(String, CliResult<String>)> = stream::iter(to_read)
        .map(|path| async move {
            let hash = hash_file(&root.join(&path)).await;
            (path, hash)
        })
        .buffer_unordered(parallel.max(1))
        .collect()
        .await;
    let mut skipped = Vec::new();
    for (path, hash) in hashes {
        match hash {
            Ok(hash) => {
                if let Some(local) = locals.get_mut(&path) {
                    local.blake3 = Some(hash);
                }
            }
            Err(err) => {
                locals.remove(&path);
                if err.kind != ExitKind::NotFound {
                    skipped.push(Skipped { path, reason: format!("cannot be read: {}", err.message) });
                }
            }
        }
    }
    skipped
}

#[derive(Deserialize)]
struct TreePage {
    cursor: i64,
    items: Vec<Remote>,
    next: Option<String>,
}

/// What the server's change-event stream says about it since the pair's cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerSince {
    /// Its `ready` event: the cursor the stream starts from, the account's newest change, and the
    /// server's epoch (`None` from a server without one).
    Ready { cursor: i64, head: i64, epoch: Option<String> },
    /// The cursor is beyond the newest the server handed out (409 `events.cursor_ahead`): it was
    /// restored from a backup and knows nothing of what was agreed since.
    Ahead,
    /// Nothing to go by (a cursor too old, an older server, a broken stream).
    Unknown,
}

/// Asks the change-event stream (`GET /events?since=CURSOR`, or from now without a cursor) for
/// its `ready` event, and closes it.
pub async fn server_since(api: &Api, cursor: Option<i64>) -> ServerSince {
    let url = match cursor {
        Some(cursor) => api.url(&format!("/events?since={cursor}")),
        None => api.url("/events"),
    };
    let response = match api.send(|http| http.get(&url)).await {
        Ok(response) => response,
        Err(err) if err.code.as_deref() == Some("events.cursor_ahead") => return ServerSince::Ahead,
        Err(_) => return ServerSince::Unknown,
    };
    let Some(Ok(first)) = response.bytes_stream().eventsource().next().await else { return ServerSince::Unknown };
    let ready: serde_json::Value = serde_json::from_str(&first.data).unwrap_or_default();
    match (first.event.as_str(), ready["cursor"].as_i64(), ready["head"].as_i64()) {
        ("ready", Some(cursor), Some(head)) => {
            ServerSince::Ready { cursor, head, epoch: ready["epoch"].as_str().map(str::to_owned) }
        }
        _ => ServerSince::Unknown,
    }
}

/// The remote side as the last agreement left it, for a run whose server side did not change
/// since (see [`server_since`]) after a two-way run that left both sides in step.
pub fn remote_as_agreed(bases: &BTreeMap<String, Base>) -> BTreeMap<String, Remote> {
    bases
        .iter()
        .map(|(path, base)| {
            let remote = Remote {
                id: base.remote_id.clone(),
                parent_id: None,
                kind: base.kind,
                name: path.rsplit('/').next().unwrap_or(path).to_owned(),
                path: path.clone(),
                size: if base.kind == Kind::Folder { 0 } else { base.size },
                blake3: base.blake3.clone(),
                updated_at: base.remote_updated_at.clone(),
            };
            (path.clone(), remote)
        })
        .collect()
}

/// Everything below the remote folder `folder_id` (at `folder_path`) by relative path, and the
/// change-event cursor taken before the listing (0 from a server without the tree listing).
pub async fn list_remote(
    api: &Api,
    folder_id: &str,
    folder_path: &RemotePath,
) -> CliResult<(i64, BTreeMap<String, Remote>)> {
    match list_tree(api, folder_id).await {
        // A server older than the tree listing: folder by folder, each file's hash asked for.
        Err(err) if err.code.as_deref().is_some_and(|code| code.starts_with("route.")) => {
            Ok((0, walk_remote(api, folder_path).await?))
        }
        other => other,
    }
}

async fn walk_remote(api: &Api, folder_path: &RemotePath) -> CliResult<BTreeMap<String, Remote>> {
    let mut items = BTreeMap::new();
    let mut pending = vec![(folder_path.clone(), String::new())];
    while let Some((path, prefix)) = pending.pop() {
        let Some((_, children)) = crate::remote::list_folder(api, &path).await? else { continue };
        for child in children {
            let relative = format!("{prefix}{}", child.name);
            let blake3 = if child.is_folder() {
                pending.push((path.join(&child.name), format!("{relative}/")));
                None
            } else {
                crate::remote::stored_blake3(api, &child.id).await?
            };
            let remote = Remote {
                id: child.id.clone(),
                parent_id: child.rest.get("parent_id").and_then(|v| v.as_str()).map(str::to_owned),
                kind: Kind::parse(&child.kind),
                name: child.name.clone(),
                path: relative.clone(),
                size: child.size,
                blake3,
                updated_at: child.updated_at.clone(),
            };
            items.insert(relative, remote);
        }
    }
    Ok(items)
}

async fn list_tree(api: &Api, folder_id: &str) -> CliResult<(i64, BTreeMap<String, Remote>)> {
    let mut items = BTreeMap::new();
    let mut after: Option<String> = None;
    let mut first_cursor = None;
    loop {
        let mut url = format!("/object/{folder_id}/tree?limit=5000");
        if let Some(token) = &after {
            url.push_str(&format!("&after={}", crate::remote::query_value(token)));
        }
        let page: TreePage = api.get(&url).await?;
        first_cursor.get_or_insert(page.cursor);
        for item in page.items {
            items.insert(item.path.clone(), item);
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    Ok((first_cursor.unwrap_or(0), items))
}

/// Drops the remote items the local side cannot hold (and what is below them), reported as
/// skipped: illegal names, and on a case-insensitive file system every name but one of those
/// differing only in case in one folder (the one already synced, else the first by name).
pub fn drop_unholdable(
    remotes: &mut BTreeMap<String, Remote>,
    bases: &BTreeMap<String, Base>,
    case_insensitive: bool,
) -> Vec<Skipped> {
    let mut skipped = Vec::new();
    let mut refused: Vec<String> = Vec::new();
    for (path, remote) in remotes.iter() {
        if refused.iter().any(|r| path.starts_with(&format!("{r}/"))) {
            continue;
        }
        if let Some(reason) = local_name_problem(&remote.name) {
            skipped.push(Skipped { path: path.clone(), reason: format!("not synced here: {reason}") });
            refused.push(path.clone());
        }
    }
    if case_insensitive {
        let mut by_folded: HashMap<String, Vec<&String>> = HashMap::new();
        for path in remotes.keys() {
            by_folded.entry(path.to_lowercase()).or_default().push(path);
        }
        for mut same in by_folded.into_values().filter(|same| same.len() > 1) {
            same.sort_by_key(|path| (!bases.contains_key(*path), (*path).clone()));
            for path in &same[1..] {
                skipped.push(Skipped {
                    path: (*path).clone(),
                    reason: format!(
                        "this file system cannot hold it beside {} (the names differ only in case)",
                        same[0]
                    ),
                });
                refused.push((*path).clone());
            }
        }
    }
    remotes.retain(|path, _| !refused.iter().any(|r| path == r || path.starts_with(&format!("{r}/"))));
    skipped
}

/// Whether the file system of `dir` treats names differing only in case as one.
pub fn is_case_insensitive(dir: &Path) -> bool {
    let probe = dir.join(format!("{PART_PREFIX}case-probe-{}", std::process::id()));
    if std::fs::write(&probe, b"").is_err() {
        return false;
    }
    let upper = dir.join(format!("{}CASE-PROBE-{}", PART_PREFIX.to_uppercase(), std::process::id()));
    let insensitive = upper.exists();
    let _ = std::fs::remove_file(&probe);
    insensitive
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(path: &str) -> Remote {
        Remote {
            id: path.into(),
            parent_id: None,
            kind: Kind::File,
            name: path.rsplit('/').next().unwrap().into(),
            path: path.into(),
            size: 0,
            blake3: None,
            updated_at: String::new(),
        }
    }

    #[test]
    fn only_the_exact_temporary_names_of_the_cli_are_its_own() {
        for ours in [
            ".nubo-part-0123456789abcdef01234567",
            ".nubo-part-rename-42",
            ".nubo-part-case-probe-7",
            ".NUBO-PART-CASE-PROBE-7",
        ] {
            assert!(is_temporary_name(ours), "{ours}");
        }
        for theirs in [
            ".nubo-part-notes.txt",
            ".nubo-part-",
            ".nubo-part-0123456789ABCDEF01234567",
            ".nubo-part-rename-x",
            "a.nubo-part-rename-1",
        ] {
            assert!(!is_temporary_name(theirs), "{theirs}");
        }
    }

    #[test]
    fn names_the_local_side_cannot_hold_are_skipped_with_what_is_below() {
        assert!(local_name_problem("a\\b").is_some());
        assert!(local_name_problem(".nubo-part-0123456789abcdef01234567").is_some());
        assert!(local_name_problem(".nubo-part-x").is_none(), "a user's own name");
        assert!(local_name_problem("plain name.txt").is_none());
        let mut remotes: BTreeMap<String, Remote> = ["a\\b", "a\\b/inner.txt", "ok.txt", "Case.txt", "case.txt"]
            .iter()
            .map(|p| (p.to_string(), remote(p)))
            .collect();
        let skipped = drop_unholdable(&mut remotes, &BTreeMap::new(), false);
        assert_eq!(skipped.len(), 1);
        assert_eq!(remotes.len(), 3, "both case variants stay on a case-sensitive file system");
        let skipped = drop_unholdable(&mut remotes, &BTreeMap::new(), true);
        assert_eq!(skipped.iter().map(|s| s.path.as_str()).collect::<Vec<_>>(), ["case.txt"]);
        assert!(remotes.contains_key("Case.txt") && remotes.contains_key("ok.txt"));
    }

    #[test]
    fn local_names_the_server_refuses_are_known_before_they_are_sent() {
        for refused in ["a\\b", "trailing ", "non\u{FFFE}char", "\u{FDD0}", "tab\t", " "] {
            assert!(remote_name_problem(refused).is_some(), "{refused:?}");
        }
        for kept in [" leading", "dot.", "name.txt", "\u{FFFD}"] {
            assert!(remote_name_problem(kept).is_none(), "{kept:?}");
        }
    }
}
