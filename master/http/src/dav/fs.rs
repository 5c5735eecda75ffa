//! Nubo's tree as a dav-server filesystem, seen from a WebDAV account's root. Every call goes
//! through the service layer with the account's user, so ownership, names, quota, `max_size`,
//! de-duplication and the trash hold as in the REST API. One instance serves one request and
//! remembers what listings already loaded (entries and dead properties), so a `PROPFIND` of a
//! large folder costs a few queries, not one per entry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::http::StatusCode;
use dav_server::davpath::DavPath;
use dav_server::fs::{
    DavDirEntry, DavFile, DavFileSystem, DavMetaData, DavProp, FsError, FsFuture, FsResult, FsStream, OpenOptions,
    ReadDirMeta,
};
use futures_util::FutureExt;
use nubo_model::domain::ids::UserId;
use nubo_model::domain::time::Millis;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::file::{ReadFile, WriteFile};
use super::segments;
use nubo_service::content::writes;
use nubo_service::context::Context;
use nubo_service::error::{ErrorKind, ServiceError};
use nubo_service::error_codes as codes;
use nubo_service::identity::dav_accounts::DavPrincipal;
use nubo_service::tree::access::{self, Reach};
use nubo_service::tree::files::{self, PathEntry};
use nubo_service::tree::metadata::{self, DavProperty};

/// Maps a service refusal to the filesystem vocabulary dav-server turns into status codes.
pub fn fs_error(error: ServiceError) -> FsError {
    match error.kind {
        ErrorKind::NotFound => FsError::NotFound,
        ErrorKind::Forbidden | ErrorKind::Validation | ErrorKind::BadRequest => FsError::Forbidden,
        ErrorKind::Conflict if error.code == codes::OBJECT_NAME_TAKEN => FsError::Exists,
        ErrorKind::Conflict => FsError::Forbidden,
        ErrorKind::PayloadTooLarge => FsError::TooLarge,
        ErrorKind::QuotaExceeded => FsError::InsufficientStorage,
        ErrorKind::Unavailable | ErrorKind::BadGateway => {
            tracing::warn!(error = %error, "WebDAV request failed on a dependency");
            FsError::IsRemote
        }
        // Only our own faults are errors; anything else is a refusal dav-server has no word for.
        ErrorKind::Internal => {
            tracing::error!(error = %error, "WebDAV request failed");
            FsError::GeneralFailure
        }
        _ => {
            tracing::info!(error = %error, "WebDAV request refused");
            FsError::GeneralFailure
        }
    }
}

/// The key of `path` in a request's entry cache: its names joined by `/`, no outer slashes.
fn path_key(path: &DavPath) -> &[u8] {
    let bytes = path.as_bytes();
    let start = bytes.iter().position(|&b| b != b'/').unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|&b| b != b'/').map_or(start, |last| last + 1);
    &bytes[start..end]
}

/// The cache key of the path made of `names`.
fn joined(names: &[&str]) -> Vec<u8> {
    names.join("/").into_bytes()
}

fn time_of(millis: Millis) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(millis.max(0) as u64)
}

/// Size, times and kind of an object.
#[derive(Debug, Clone)]
pub struct Meta {
    pub size: u64,
    pub is_dir: bool,
    pub created: Millis,
    pub modified: Millis,
}

impl Meta {
    pub fn of(entry: &PathEntry) -> Self {
        Self {
            size: entry.size.max(0) as u64,
            is_dir: entry.is_folder,
            created: entry.created_at,
            modified: entry.updated_at,
        }
    }
}

impl DavMetaData for Meta {
    fn len(&self) -> u64 {
        self.size
    }
    fn modified(&self) -> FsResult<SystemTime> {
        Ok(time_of(self.modified))
    }
    fn created(&self) -> FsResult<SystemTime> {
        Ok(time_of(self.created))
    }
    fn is_dir(&self) -> bool {
        self.is_dir
    }
}

struct DirEntry {
    name: String,
    meta: Meta,
}

impl DavDirEntry for DirEntry {
    fn name(&self) -> Vec<u8> {
        self.name.as_bytes().to_vec()
    }
    fn metadata(&'_ self) -> FsFuture<'_, Box<dyn DavMetaData>> {
        let meta: Box<dyn DavMetaData> = Box::new(self.meta.clone());
        async move { Ok(meta) }.boxed()
    }
}

/// A dead property as stored: dav-server's [`DavProp`] fields.
#[derive(Serialize, Deserialize)]
struct StoredProp {
    name: String,
    prefix: Option<String>,
    namespace: Option<String>,
    xml: Option<String>,
}

fn prop_key(prop: &DavProp) -> String {
    format!("{{{}}}{}", prop.namespace.as_deref().unwrap_or(""), prop.name)
}

fn decode_prop((_, value): &DavProperty) -> Option<DavProp> {
    let stored: StoredProp = serde_json::from_str(value).ok()?;
    Some(DavProp {
        name: stored.name,
        prefix: stored.prefix,
        namespace: stored.namespace,
        xml: stored.xml.map(String::into_bytes),
    })
}

#[derive(Default)]
struct Remembered {
    /// Entries by their path below the account root (names joined by `/`, see [`path_key`]).
    entries: HashMap<Vec<u8>, Arc<PathEntry>>,
    /// Paths found missing (dav-server asks about a new name several times per request).
    missing: std::collections::HashSet<Vec<u8>>,
    /// Dead properties of the objects whose folder listing loaded them (an empty list: none).
    props: HashMap<Uuid, Vec<DavProperty>>,
    /// What a new file at the request's path needs, read while the path was walked (`PUT`).
    new_file_facts: Option<writes::NewFileFacts>,
}

/// The filesystem of one `/dav` request.
#[derive(Clone)]
pub struct NuboFs {
    ctx: Context,
    principal: Arc<DavPrincipal>,
    /// The account's root folder.
    root: Arc<PathEntry>,
    remembered: Arc<Mutex<Remembered>>,
}

impl NuboFs {
    pub fn new(ctx: Context, principal: DavPrincipal, root: PathEntry) -> Self {
        Self { ctx, principal: Arc::new(principal), root: Arc::new(root), remembered: Arc::default() }
    }

    fn user(&self) -> UserId {
        self.principal.user_id
    }

    fn writable(&self) -> FsResult<()> {
        if self.principal.read_only { Err(FsError::Forbidden) } else { Ok(()) }
    }

    fn remembered(&self) -> std::sync::MutexGuard<'_, Remembered> {
        self.remembered.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The entry at `names`, continuing from the deepest folder on the way this request already
    /// knows; every entry met on the way (and a missing path) is remembered.
    async fn entry_at(&self, names: &[&str]) -> FsResult<Arc<PathEntry>> {
        let (known, base) = {
            let remembered = self.remembered();
            if remembered.missing.contains(joined(names).as_slice()) {
                return Err(FsError::NotFound);
            }
            (1..=names.len())
                .rev()
                .find_map(|depth| {
                    remembered.entries.get(joined(&names[..depth]).as_slice()).map(|e| (depth, Arc::clone(e)))
                })
                .unwrap_or_else(|| (0, Arc::clone(&self.root)))
        };
        if known == names.len() {
            return Ok(base);
        }
        if !base.is_folder {
            return Err(FsError::NotFound);
        }
        let found = files::walk_below(&self.ctx, self.user(), &base, &names[known..]).await.map_err(fs_error)?;
        self.remember_walk(names, known, found).ok_or(FsError::NotFound)
    }

    /// Remembers the entries a walk found along `names` after the first `known` of them (one per
    /// name, as far as they exist) and, when the walk came up short, that `names` is missing.
    /// Answers the entry at `names` when it exists.
    pub(super) fn remember_walk(
        &self,
        names: &[&str],
        known: usize,
        found: impl IntoIterator<Item = PathEntry>,
    ) -> Option<Arc<PathEntry>> {
        let mut remembered = self.remembered();
        let mut last = None;
        for (depth, entry) in (known + 1..=names.len()).zip(found) {
            let entry = Arc::new(entry);
            remembered.entries.insert(joined(&names[..depth]), Arc::clone(&entry));
            last = Some((depth, entry));
        }
        match last {
            Some((depth, entry)) if depth == names.len() => Some(entry),
            _ if known == names.len() => None,
            _ => {
                remembered.missing.insert(joined(names));
                None
            }
        }
    }

    /// The entry at `path`; one map look-up when this request met it before.
    async fn entry(&self, path: &DavPath) -> FsResult<Arc<PathEntry>> {
        if let Some(entry) = self.remembered().entries.get(path_key(path)) {
            return Ok(Arc::clone(entry));
        }
        self.entry_at(&segments(path)).await
    }

    /// The folder a new name at `path` goes into, and that name.
    async fn parent_and_name(&self, path: &DavPath) -> FsResult<(Arc<PathEntry>, String)> {
        let names = segments(path);
        let (name, parent) = names.split_last().ok_or(FsError::Forbidden)?;
        let parent = self.entry_at(parent).await?;
        if !parent.is_folder {
            return Err(FsError::NotFound);
        }
        Ok((parent, (*name).to_owned()))
    }

    /// Whether `path` names a live object (one look-up at most: the request's path is known).
    pub(super) async fn exists(&self, path: &DavPath) -> bool {
        self.entry(path).await.is_ok()
    }

    /// Whether `path` names a live folder.
    pub(super) async fn is_folder(&self, path: &DavPath) -> bool {
        self.entry(path).await.is_ok_and(|entry| entry.is_folder)
    }

    /// Keeps `facts` for the write of a new file this request is about to plan.
    pub(super) fn remember_new_file_facts(&self, facts: writes::NewFileFacts) {
        self.remembered().new_file_facts = Some(facts);
    }

    fn forget(&self) {
        *self.remembered() = Remembered::default();
    }

    /// The entry at `path` and, with `depth_one` and a folder, its children, when none of them
    /// has dead properties (a `PROPFIND` of them then needs nothing but the entries); `None`
    /// when some do.
    pub async fn plain_listing(
        &self,
        path: &DavPath,
        depth_one: bool,
    ) -> FsResult<Option<(Arc<PathEntry>, Vec<PathEntry>)>> {
        let entry = self.entry(path).await?;
        if !self.props_of(&entry).await?.is_empty() {
            return Ok(None);
        }
        if !depth_one || !entry.is_folder {
            return Ok(Some((entry, Vec::new())));
        }
        // Not remembered: the answer is written from this list and nothing else in the request
        // asks about a child (remembering 10,000 of them cost more memory than the answer).
        let (children, props) = self.listing(&entry).await?;
        Ok(props.is_empty().then_some((entry, children)))
    }

    /// The live children of `folder` and the dead properties of those that have some.
    async fn listing(&self, folder: &PathEntry) -> FsResult<(Vec<PathEntry>, HashMap<Uuid, Vec<DavProperty>>)> {
        let ctx = &self.ctx;
        // Both at once, on two of the read pool's connections (two snapshots, as one after the
        // other would be).
        tokio::try_join!(
            files::live_children(ctx, self.user(), folder),
            metadata::dav_properties_of_children(ctx, self.user(), folder),
        )
        .map_err(fs_error)
    }

    /// The live children of `folder` (at `path`), remembered with their dead properties; and
    /// whether any of them has some.
    async fn children(&self, path: &DavPath, folder: &PathEntry) -> FsResult<(Vec<Arc<PathEntry>>, bool)> {
        let (children, mut props) = self.listing(folder).await?;
        let with_props = !props.is_empty();
        let base = path_key(path);
        let mut remembered = self.remembered();
        let children = children
            .into_iter()
            .map(|child| {
                let mut key = base.to_vec();
                if !key.is_empty() {
                    key.push(b'/');
                }
                key.extend_from_slice(child.name.as_bytes());
                remembered.props.insert(child.id, props.remove(&child.id).unwrap_or_default());
                let child = Arc::new(child);
                remembered.entries.insert(key, Arc::clone(&child));
                child
            })
            .collect();
        Ok((children, with_props))
    }

    async fn props_of(&self, entry: &PathEntry) -> FsResult<Vec<DavProperty>> {
        if let Some(props) = self.remembered().props.get(&entry.id) {
            return Ok(props.clone());
        }
        metadata::dav_properties(&self.ctx, self.user(), entry).await.map_err(fs_error)
    }
}

impl DavFileSystem for NuboFs {
    fn open<'a>(&'a self, path: &'a DavPath, options: OpenOptions) -> FsFuture<'a, Box<dyn DavFile>> {
        async move {
            if !options.write {
                let entry = self.entry(path).await?;
                if entry.is_folder {
                    return Err(FsError::Forbidden);
                }
                let file = ReadFile::open(&self.ctx, self.user(), &entry).await?;
                return Ok(Box::new(file) as Box<dyn DavFile>);
            }
            self.writable()?;
            if options.append || (!options.truncate && options.size.is_none() && !options.create) {
                // Partial updates (Content-Range, PATCH) would need the old content rewritten.
                return Err(FsError::NotImplemented);
            }
            let (parent, name) = self.parent_and_name(path).await?;
            let presence = {
                let mut remembered = self.remembered();
                let facts = remembered.new_file_facts.take();
                if remembered.missing.contains(path_key(path)) {
                    writes::Presence::KnownAbsent(facts)
                } else {
                    writes::Presence::Unknown(facts)
                }
            };
            let overwrite = match (options.create_new, options.create) {
                (true, _) => writes::Overwrite::Refuse,
                (false, true) => writes::Overwrite::Allow,
                (false, false) => writes::Overwrite::Require,
            };
            let target = writes::Target {
                owner: self.user(),
                group_id: self.principal.group_id,
                folder: &parent,
                name: &name,
                presence,
            };
            let write = writes::Write::begin(&self.ctx, target, options.size, overwrite).await.map_err(fs_error)?;
            self.forget();
            Ok(Box::new(WriteFile::new(write)) as Box<dyn DavFile>)
        }
        .boxed()
    }

    fn read_dir<'a>(&'a self, path: &'a DavPath, _meta: ReadDirMeta) -> FsFuture<'a, FsStream<Box<dyn DavDirEntry>>> {
        async move {
            let folder = self.entry(path).await?;
            if !folder.is_folder {
                return Err(FsError::Forbidden);
            }
            let (children, _) = self.children(path, &folder).await?;
            let entries: Vec<FsResult<Box<dyn DavDirEntry>>> = children
                .iter()
                .map(|child| {
                    Ok(Box::new(DirEntry { name: child.name.clone(), meta: Meta::of(child) }) as Box<dyn DavDirEntry>)
                })
                .collect();
            let stream: FsStream<Box<dyn DavDirEntry>> = Box::pin(futures_util::stream::iter(entries));
            Ok(stream)
        }
        .boxed()
    }

    fn metadata<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, Box<dyn DavMetaData>> {
        async move { Ok(Box::new(Meta::of(&*self.entry(path).await?)) as Box<dyn DavMetaData>) }.boxed()
    }

    fn create_dir<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, ()> {
        async move {
            self.writable()?;
            let (parent, name) = self.parent_and_name(path).await?;
            let parent =
                access::writable(&self.ctx, self.user(), parent.id.into(), Reach::Folder).await.map_err(fs_error)?;
            files::create_folder(&self.ctx, &parent, &name).await.map_err(fs_error)?;
            self.forget();
            Ok(())
        }
        .boxed()
    }

    fn remove_dir<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, ()> {
        self.remove_file(path)
    }

    /// Deleting puts the object in the trash, as the REST API does: it can be restored there.
    fn remove_file<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, ()> {
        async move {
            self.writable()?;
            let entry = self.entry(path).await?;
            if entry.id == self.root.id {
                return Err(FsError::Forbidden);
            }
            files::trash(&self.ctx, self.user(), &[entry.id]).await.map_err(fs_error)?;
            self.forget();
            Ok(())
        }
        .boxed()
    }

    fn rename<'a>(&'a self, from: &'a DavPath, to: &'a DavPath) -> FsFuture<'a, ()> {
        async move {
            self.writable()?;
            let source = self.entry(from).await?;
            if source.id == self.root.id {
                return Err(FsError::Forbidden);
            }
            let (parent, name) = self.parent_and_name(to).await?;
            files::relocate(&self.ctx, self.user(), source.id.into(), parent.id.into(), &name)
                .await
                .map_err(fs_error)?;
            self.forget();
            Ok(())
        }
        .boxed()
    }

    fn copy<'a>(&'a self, from: &'a DavPath, to: &'a DavPath) -> FsFuture<'a, ()> {
        async move {
            self.writable()?;
            let source = self.entry(from).await?;
            let (parent, name) = self.parent_and_name(to).await?;
            files::copy_as(&self.ctx, self.user(), source.id.into(), parent.id.into(), &name)
                .await
                .map_err(fs_error)?;
            self.forget();
            Ok(())
        }
        .boxed()
    }

    fn have_props<'a>(&'a self, _path: &'a DavPath) -> std::pin::Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        async { true }.boxed()
    }

    fn patch_props<'a>(
        &'a self,
        path: &'a DavPath,
        patch: Vec<(bool, DavProp)>,
    ) -> FsFuture<'a, Vec<(StatusCode, DavProp)>> {
        async move {
            self.writable()?;
            let entry = self.entry(path).await?;
            let mut changes = Vec::with_capacity(patch.len());
            let mut answer = Vec::with_capacity(patch.len());
            for (set, prop) in patch {
                let value = if set {
                    let stored = StoredProp {
                        name: prop.name.clone(),
                        prefix: prop.prefix.clone(),
                        namespace: prop.namespace.clone(),
                        xml: prop.xml.as_ref().map(|x| String::from_utf8_lossy(x).into_owned()),
                    };
                    Some(serde_json::to_string(&stored).map_err(|_| FsError::GeneralFailure)?)
                } else {
                    None
                };
                changes.push((prop_key(&prop), value));
                answer.push((StatusCode::OK, DavProp { xml: None, ..prop }));
            }
            let object =
                access::writable(&self.ctx, self.user(), entry.id.into(), Reach::Live).await.map_err(fs_error)?;
            metadata::patch_dav_properties(&self.ctx, &object, &changes).await.map_err(fs_error)?;
            self.forget();
            Ok(answer)
        }
        .boxed()
    }

    fn get_props<'a>(&'a self, path: &'a DavPath, do_content: bool) -> FsFuture<'a, Vec<DavProp>> {
        async move {
            let entry = self.entry(path).await?;
            let props = self.props_of(&entry).await?;
            Ok(props
                .iter()
                .filter_map(decode_prop)
                .map(|prop| if do_content { prop } else { DavProp { xml: None, ..prop } })
                .collect())
        }
        .boxed()
    }

    fn get_prop<'a>(&'a self, path: &'a DavPath, prop: DavProp) -> FsFuture<'a, Vec<u8>> {
        async move {
            let entry = self.entry(path).await?;
            let wanted = prop_key(&prop);
            let props = self.props_of(&entry).await?;
            props
                .iter()
                .find(|(name, _)| *name == wanted)
                .and_then(decode_prop)
                .and_then(|prop| prop.xml)
                .ok_or(FsError::NotFound)
        }
        .boxed()
    }

    /// RFC 4331: the user's usage (trash included) and capacity, whatever the account's root.
    fn get_quota(&'_ self) -> FsFuture<'_, (u64, Option<u64>)> {
        async move {
            let (used, capacity) = files::storage_usage(&self.ctx, self.user()).await.map_err(fs_error)?;
            Ok((used.max(0) as u64, Some(capacity.max(0) as u64)))
        }
        .boxed()
    }
}
