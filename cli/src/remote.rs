//! The remote tree as the commands see it: slash-separated paths from the user's root (split on
//! `/` alone: `\` is a character of a name like any other), the objects they name, folder
//! listings page by page, and folders made on the way (`mkdir -p`).

use std::collections::HashMap;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::client::Api;
use crate::error::{CliError, CliResult};

/// Characters escaped in one path segment of a URL; `\` too, which URL parsers read as `/` in an
/// http(s) path.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b'\\')
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}');

/// Characters escaped in a query value.
const QUERY: &AsciiSet = &SEGMENT.add(b'&').add(b'+').add(b'=').add(b';');

pub fn query_value(value: &str) -> String {
    utf8_percent_encode(value, QUERY).to_string()
}

/// Largest page a listing answers.
const PAGE: usize = 1000;

/// A remote path: its names from the root. `/`, `` and `.` are the root; `..` goes up.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RemotePath {
    pub names: Vec<String>,
    /// Written with a trailing `/`: it must be (or become) a folder.
    pub folder_hint: bool,
}

impl RemotePath {
    pub fn parse(raw: &str) -> RemotePath {
        let mut names: Vec<String> = Vec::new();
        for name in raw.split('/') {
            match name {
                "" | "." => {}
                ".." => {
                    names.pop();
                }
                name => names.push(name.to_owned()),
            }
        }
        RemotePath { names, folder_hint: raw.ends_with('/') || raw.is_empty() }
    }

    pub fn is_root(&self) -> bool {
        self.names.is_empty()
    }

    pub fn join(&self, name: &str) -> RemotePath {
        let mut names = self.names.clone();
        names.push(name.to_owned());
        RemotePath { names, folder_hint: false }
    }

    /// This folder's path joined with a slash-separated relative path (`a/b.txt`; `` is itself).
    pub fn join_relative(&self, relative: &str) -> RemotePath {
        let mut names = self.names.clone();
        names.extend(relative.split('/').filter(|n| !n.is_empty()).map(str::to_owned));
        RemotePath { names, folder_hint: false }
    }

    pub fn parent(&self) -> RemotePath {
        let mut names = self.names.clone();
        names.pop();
        RemotePath { names, folder_hint: true }
    }

    pub fn name(&self) -> Option<&str> {
        self.names.last().map(String::as_str)
    }

    /// `/a/b`; the root is `/`.
    pub fn display(&self) -> String {
        format!("/{}", self.names.join("/"))
    }

    /// The listing URL path of this folder (`/directory/a/b`).
    fn listing(&self) -> String {
        let encoded: Vec<String> = self.names.iter().map(|n| utf8_percent_encode(n, SEGMENT).to_string()).collect();
        format!("/directory/{}", encoded.join("/"))
    }
}

/// A file or folder as the server describes it; every field it sent is kept for `--json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Object {
    pub id: String,
    pub name: String,
    pub kind: String,
    pub size: u64,
    pub path: String,
    pub updated_at: String,
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

impl Object {
    pub fn is_folder(&self) -> bool {
        self.kind == "folder"
    }
}

#[derive(Debug, Deserialize)]
struct Listing {
    folder: Object,
    count: u64,
    items: Vec<Object>,
}

/// The folder at `path` and one page of its children; `None` when there is no such folder,
/// `Err` with 409 `object.not_a_folder` when it is a file.
async fn listing_page(api: &Api, path: &RemotePath, offset: usize) -> CliResult<Option<Listing>> {
    let url = format!("{}?limit={PAGE}&offset={offset}", path.listing());
    match api.get::<Listing>(&url).await {
        Ok(listing) => Ok(Some(listing)),
        Err(err) if err.status == Some(404) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Whether the server refused a listing's path itself (422): a name on it breaks the server's
/// present name rules (a `\` kept from before they refused it, say), so it cannot be named in a
/// path and is found among its folder's children instead.
fn path_refused(err: &CliError) -> bool {
    err.status == Some(422)
}

/// The folder at `path` with all its children (folders first, by name).
pub async fn list_folder(api: &Api, path: &RemotePath) -> CliResult<Option<(Object, Vec<Object>)>> {
    let first = match listing_page(api, path, 0).await {
        Err(err) if path_refused(&err) => return list_by_tree(api, path).await,
        other => other?,
    };
    let Some(first) = first else { return Ok(None) };
    let folder = first.folder;
    let count = first.count as usize;
    let mut items = first.items;
    while items.len() < count {
        let Some(page) = listing_page(api, path, items.len()).await? else { break };
        if page.items.is_empty() {
            break;
        }
        items.extend(page.items);
    }
    Ok(Some((folder, items)))
}

/// One entry of a folder's tree page (`GET /object/{id}/tree`).
#[derive(Debug, Deserialize)]
struct TreeEntry {
    id: String,
    parent_id: Option<String>,
    kind: String,
    name: String,
    size: u64,
    updated_at: String,
}

#[derive(Debug, Deserialize)]
struct TreePage {
    items: Vec<TreeEntry>,
    next: Option<String>,
}

/// A folder whose path the server refuses ([`path_refused`]): found by [`lookup`], its children
/// read from the first pages of its tree (which lists a folder's own entries first).
async fn list_by_tree(api: &Api, path: &RemotePath) -> CliResult<Option<(Object, Vec<Object>)>> {
    let Some(folder) = Box::pin(lookup(api, path)).await? else { return Ok(None) };
    if !folder.is_folder() {
        let mut error = CliError::conflict(format!("{} is a file, not a folder", path.display()));
        error.code = Some("object.not_a_folder".to_owned());
        return Err(error);
    }
    let mut items = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut url = format!("/object/{}/tree?limit=5000", folder.id);
        if let Some(token) = &after {
            url.push_str(&format!("&after={}", query_value(token)));
        }
        let page: TreePage = api.get(&url).await?;
        // A tree lists a folder's own entries before anything below them: the first deeper
        // entry ends the children.
        let mut deeper = false;
        for entry in page.items {
            if entry.parent_id.as_deref() != Some(folder.id.as_str()) {
                deeper = true;
                break;
            }
            let mut rest = serde_json::Map::new();
            rest.insert("parent_id".to_owned(), json!(folder.id));
            items.push(Object {
                path: format!("{}/{}", folder.path.trim_end_matches('/'), entry.name),
                id: entry.id,
                name: entry.name,
                kind: entry.kind,
                size: entry.size,
                updated_at: entry.updated_at,
                rest,
            });
        }
        match page.next {
            Some(next) if !deeper => after = Some(next),
            _ => break,
        }
    }
    items.sort_by(|a, b| (!a.is_folder(), &a.name).cmp(&(!b.is_folder(), &b.name)));
    Ok(Some((folder, items)))
}

/// The blake3 of the content the server holds for the file `id` (`None` when it keeps none).
pub async fn stored_blake3(api: &Api, id: &str) -> CliResult<Option<String>> {
    let detail: serde_json::Value = api.get(&format!("/object/{id}/detail")).await?;
    Ok(detail["blake3"].as_str().map(str::to_owned))
}

/// The object at `path`; `None` when nothing is there.
pub async fn lookup(api: &Api, path: &RemotePath) -> CliResult<Option<Object>> {
    let url = format!("{}?limit=1", path.listing());
    match api.get::<Listing>(&url).await {
        Ok(listing) => Ok(Some(listing.folder)),
        Err(err) if err.status == Some(404) => Ok(None),
        // A file, a path through a file, or a name the server refuses in a path: look for the
        // last name in its folder.
        Err(err) if (err.code.as_deref() == Some("object.not_a_folder") || path_refused(&err)) && !path.is_root() => {
            let name = path.name().unwrap_or_default();
            match Box::pin(list_folder(api, &path.parent())).await {
                Ok(Some((_, items))) => Ok(items.into_iter().find(|item| item.name == name)),
                Ok(None) => Ok(None),
                Err(err) if err.code.as_deref() == Some("object.not_a_folder") => Ok(None),
                Err(err) => Err(err),
            }
        }
        Err(err) => Err(err),
    }
}

/// The object at `path`, or 4 (not found).
pub async fn require(api: &Api, path: &RemotePath) -> CliResult<Object> {
    lookup(api, path).await?.ok_or_else(|| CliError::not_found(format!("nothing at {}", path.display())))
}

/// Creates the folder `name` in `parent_id`.
pub async fn create_folder(api: &Api, parent_id: &str, name: &str) -> CliResult<Object> {
    api.json(Method::POST, "/directory", Some(&json!({"parent_id": parent_id, "name": name}))).await
}

/// Folders known by path during one command, so a tree of many files asks for each once.
#[derive(Default)]
pub struct FolderCache {
    known: Mutex<HashMap<RemotePath, Object>>,
}

impl FolderCache {
    pub async fn remember(&self, path: &RemotePath, folder: &Object) {
        let mut key = path.clone();
        key.folder_hint = false;
        self.known.lock().await.insert(key, folder.clone());
    }

    async fn known(&self, path: &RemotePath) -> Option<Object> {
        let mut key = path.clone();
        key.folder_hint = false;
        self.known.lock().await.get(&key).cloned()
    }

    /// The folder at `path`, made with its missing parents (`mkdir -p`); 5 (conflict) when a
    /// file is in the way.
    pub async fn ensure(&self, api: &Api, path: &RemotePath) -> CliResult<Object> {
        if let Some(folder) = self.known(path).await {
            return Ok(folder);
        }
        // From the deepest existing folder down.
        let mut depth = path.names.len();
        let mut base = loop {
            let prefix = RemotePath { names: path.names[..depth].to_vec(), folder_hint: true };
            if let Some(folder) = self.known(&prefix).await {
                break folder;
            }
            match lookup(api, &prefix).await? {
                Some(object) if object.is_folder() => {
                    self.remember(&prefix, &object).await;
                    break object;
                }
                Some(_) => return Err(CliError::conflict(format!("{} is a file, not a folder", prefix.display()))),
                None => depth -= 1,
            }
        };
        for end in depth + 1..=path.names.len() {
            let prefix = RemotePath { names: path.names[..end].to_vec(), folder_hint: true };
            let name = &path.names[end - 1];
            base = match create_folder(api, &base.id, name).await {
                Ok(folder) => folder,
                // Made meanwhile (a parallel upload into the same new folder).
                Err(err) if err.code.as_deref() == Some("object.name_taken") => match lookup(api, &prefix).await? {
                    Some(object) if object.is_folder() => object,
                    _ => return Err(err),
                },
                Err(err) => return Err(err),
            };
            self.remember(&prefix, &base).await;
        }
        Ok(base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_names_from_the_root() {
        let path = RemotePath::parse("photos//2026/./a b.jpg");
        assert_eq!(path.names, ["photos", "2026", "a b.jpg"]);
        assert_eq!(path.display(), "/photos/2026/a b.jpg");
        assert!(!path.folder_hint);
        assert_eq!(path.parent().display(), "/photos/2026");
        assert_eq!(RemotePath::parse("/a/b/../c/").names, ["a", "c"]);
        assert!(RemotePath::parse("/a/").folder_hint, "a trailing slash names a folder");
        assert!(RemotePath::parse("/").is_root() && RemotePath::parse("..").is_root());
    }

    #[test]
    fn listing_urls_escape_each_name() {
        let path = RemotePath::parse("/a b/50%/x?y#z");
        assert_eq!(path.listing(), "/directory/a%20b/50%25/x%3Fy%23z");
        let old = RemotePath::parse("/old\\dir/a\\b.txt");
        assert_eq!(old.names, ["old\\dir", "a\\b.txt"], "only `/` separates names");
        assert_eq!(old.listing(), "/directory/old%5Cdir/a%5Cb.txt");
        assert_eq!(RemotePath::parse("/").listing(), "/directory/");
        assert_eq!(query_value("a&b=c d+e"), "a%26b%3Dc%20d%2Be");
    }
}
