//! The object tree: each user's root, folders and files; listing, rename, move, copy, trash,
//! restore and permanent deletion with reference counting of blobs. Who may reach an object is
//! decided in [`access`]: functions on one object take its handle, and those working inside a
//! transaction resolve their objects there through it.

/// The administrators' file list query, as the front end builds it.
pub use nubo_model::db::objects::FileFilter;
use std::collections::{HashMap, HashSet};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use nubo_model::db::objects::{ListingRow, NewObject, ObjectRow};
use nubo_model::db::{self, Conn, Db, DbError};
use nubo_model::domain::activity::{Action, TargetKind};
use nubo_model::domain::ids::{ObjectId, UserId};
use nubo_model::domain::object::ListOrder;
use nubo_model::domain::object::{ObjectKind, ObjectName, new_id, parse_path};
use nubo_model::domain::time::{Millis, now_ms, to_rfc3339};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::audit::activity::{self, Activity};
use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::tree::access::{self, Grant, Reach, Readable, Writable};
use crate::tree::tags::{self, TagBrief};
use crate::{Page, PageRequest, storage::policies};

/// A file or folder as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ObjectView {
    pub id: Uuid,
    pub name: String,
    pub kind: ObjectKind,
    /// Bytes; 0 for folders.
    pub size: i64,
    /// Slash-separated path from the owner's root, e.g. `/photos/2026/a.jpg`; the root is `/`.
    pub path: String,
    pub parent_id: Option<Uuid>,
    pub policy_id: Option<Uuid>,
    /// When it was put in the trash, if it is there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trashed_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// The owner's tags on it, by name: manual ones linked to it and automatic ones whose rule
    /// its name matches. Shown by `GET /object/{id}`, folder listings and searches; absent from
    /// the answers of changes (create, rename, move, copy, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<TagBrief>>,
    /// Whether its owner has made a share link of it (see `GET /share?object_id=`). Shown
    /// where `tags` are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
}

pub use access::not_found;

pub(crate) fn name_taken() -> ServiceError {
    ServiceError::conflict(codes::OBJECT_NAME_TAKEN, "an object with that name exists in the folder").with_field("name")
}

/// Maps a unique-constraint violation to "name taken"; other errors pass through.
pub fn on_name_clash(err: DbError) -> ServiceError {
    match err {
        ref e if e.is_unique_violation() => name_taken(),
        other => other.into(),
    }
}

/// `wanted`, or `stem (n).ext` for the first `n` free in `folder` ([`ObjectName::candidates`]):
/// a copy into the folder it is in. Read inside the caller's transaction, so the name is
/// checked where it will be inserted (a concurrent insert still meets the unique index).
pub(crate) async fn free_name_in(conn: &mut Conn, folder: ObjectId, wanted: &ObjectName) -> ServiceResult<ObjectName> {
    for candidate in wanted.candidates() {
        if db::objects::child_by_name_in(conn, folder, candidate.as_str()).await?.is_none() {
            return Ok(candidate);
        }
    }
    Err(name_taken())
}

/// As [`free_name_in`], outside a transaction: a fetched download, a WOPI "save as".
pub async fn free_name(db: &Db, folder: ObjectId, wanted: &ObjectName) -> ServiceResult<ObjectName> {
    for candidate in wanted.candidates() {
        if db::objects::child_by_name(db, folder, candidate.as_str()).await?.is_none() {
            return Ok(candidate);
        }
    }
    Err(name_taken())
}

fn parse_name(raw: &str) -> ServiceResult<ObjectName> {
    ObjectName::parse(raw).map_err(|why| ServiceError::validation("name", why))
}

/// The API view of a row whose path is known.
pub fn view(row: &ObjectRow, path: String) -> ObjectView {
    ObjectView {
        id: row.id.into(),
        name: row.name.clone(),
        kind: row.kind,
        size: row.size,
        path,
        parent_id: row.parent_id.map(Uuid::from),
        policy_id: row.policy_id.map(Uuid::from),
        trashed_at: row.trashed_at.map(to_rfc3339),
        created_at: to_rfc3339(row.created_at),
        updated_at: to_rfc3339(row.updated_at),
        tags: None,
        shared: None,
    }
}

fn join_path(parent: &str, name: &str) -> String {
    if parent == "/" { format!("/{name}") } else { format!("{parent}/{name}") }
}

/// The path of an object from its parent chain.
pub async fn path_of(db: &Db, id: ObjectId) -> ServiceResult<String> {
    Ok(path_from_names(&db::objects::path_names(db, id).await?))
}

/// A path from the names of an object's chain, the root's (empty) first.
pub fn path_from_names(names: &[String]) -> String {
    format!("/{}", names.get(1..).unwrap_or_default().join("/"))
}

pub async fn view_of(db: &Db, row: &ObjectRow) -> ServiceResult<ObjectView> {
    Ok(view(row, path_of(db, row.id).await?))
}

/// The owner's root folder, created on first use.
pub async fn ensure_root(db: &Db, owner: UserId) -> ServiceResult<ObjectRow> {
    if let Some(root) = db::objects::root_of(db, owner).await? {
        return Ok(root);
    }
    let root = NewObject {
        id: new_id().into(),
        owner_id: owner,
        parent_id: None,
        name: "",
        kind: ObjectKind::Folder,
        policy_id: None,
        physical_file_id: None,
        size: 0,
    };
    let mut conn = db.writer().acquire().await.map_err(DbError::from)?;
    match db::objects::insert(&mut conn, &root, now_ms()).await {
        Ok(()) => {}
        // Created concurrently by another request.
        Err(e) if e.is_unique_violation() => {}
        Err(e) => return Err(e.into()),
    }
    drop(conn);
    db::objects::root_of(db, owner).await?.ok_or_else(|| ServiceError::internal(anyhow::anyhow!("root vanished")))
}

/// The object at `path` below the owner's root.
pub async fn resolve_path(db: &Db, owner: UserId, path: &str) -> ServiceResult<ObjectRow> {
    let names = parse_path(path).map_err(|why| ServiceError::validation("path", why))?;
    let mut current = ensure_root(db, owner).await?;
    for name in names {
        if !current.is_folder() {
            return Err(not_found());
        }
        current = db::objects::child_by_name(db, current.id, name.as_str()).await?.ok_or_else(not_found)?;
    }
    Ok(current)
}

/// A folder and one page of its children.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DirectoryView {
    pub folder: ObjectView,
    pub count: i64,
    pub items: Vec<ObjectView>,
}

pub async fn list_directory(
    ctx: &Context,
    owner: UserId,
    path: &str,
    order: ListOrder,
    descending: bool,
    page: PageRequest,
) -> ServiceResult<DirectoryView> {
    let db = ctx.db();
    let folder = resolve_path(db, owner, path).await?;
    if !folder.is_folder() {
        return Err(ServiceError::conflict(codes::OBJECT_NOT_A_FOLDER, "the path names a file, not a folder"));
    }
    let folder_path = path_of(db, folder.id).await?;
    let (count, rows) = db::objects::children(db, folder.id, order, descending, page.offset, page.limit).await?;
    let parent_id = Some(folder.id.into());
    let mut items = rows
        .iter()
        .map(|row| ObjectView {
            id: row.id.into(),
            name: row.name.clone(),
            kind: row.kind,
            size: row.size,
            path: join_path(&folder_path, &row.name),
            parent_id,
            policy_id: row.policy_id.map(Uuid::from),
            trashed_at: None,
            created_at: to_rfc3339(row.created_at),
            updated_at: to_rfc3339(row.updated_at),
            tags: None,
            shared: None,
        })
        .collect::<Vec<_>>();
    let mut folder = view(&folder, folder_path);
    decorate(db, owner, std::slice::from_mut(&mut folder)).await?;
    decorate(db, owner, &mut items).await?;
    Ok(DirectoryView { folder, count, items })
}

/// Creates a folder in `parent` (a live folder: [`Reach::Folder`]), owned by the parent's owner.
pub async fn create_folder(ctx: &Context, parent: &Writable, name: &str) -> ServiceResult<ObjectView> {
    let db = ctx.db();
    let parent = parent.row();
    let name = parse_name(name)?;
    let id = ObjectId::from(new_id());
    let folder = NewObject {
        id,
        owner_id: parent.owner_id,
        parent_id: Some(parent.id),
        name: name.as_str(),
        kind: ObjectKind::Folder,
        policy_id: None,
        physical_file_id: None,
        size: 0,
    };
    let created = Activity::by(parent.owner_id, Action::FolderCreate).on(TargetKind::Object, id, Some(name.as_str()));
    let mut tx = db.begin().await?;
    db::objects::insert(&mut tx, &folder, now_ms()).await.map_err(on_name_clash)?;
    activity::record_in(&mut tx, created).await;
    tx.commit().await.map_err(DbError::from)?;
    let row = db::objects::find_by_id(db, id).await?.ok_or_else(not_found)?;
    view_of(db, &row).await
}

/// Fills what listings show beside the object itself: `owner`'s tags and whether it is shared.
pub(crate) async fn decorate(db: &Db, owner: UserId, views: &mut [ObjectView]) -> ServiceResult<()> {
    tags::fill_tags(db, owner, views).await?;
    let ids: Vec<ObjectId> = views.iter().map(|view| view.id.into()).collect();
    let shared: HashSet<ObjectId> = db::shares::shared_among(db, &ids).await?.into_iter().collect();
    for view in views {
        view.shared = Some(shared.contains(&ObjectId::from(view.id)));
    }
    Ok(())
}

/// The object as it was read for the handle, with its tags.
pub async fn get(ctx: &Context, object: &Readable) -> ServiceResult<ObjectView> {
    let db = ctx.db();
    let mut view = view_of(db, object.row()).await?;
    decorate(db, object.row().owner_id, std::slice::from_mut(&mut view)).await?;
    Ok(view)
}

/// The object as it is now, read again (after a change made through the handle).
pub async fn view_now(db: &Db, object: &Readable) -> ServiceResult<ObjectView> {
    let row = db::objects::find_by_id(db, object.row().id).await?.ok_or_else(not_found)?;
    view_of(db, &row).await
}

/// Facts about an object beyond its listing entry.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ObjectDetail {
    pub object: ObjectView,
    /// Total bytes of the files inside (the file's own size for a file).
    pub total_size: i64,
    pub file_count: i64,
    /// Folders inside, the folder itself included.
    pub folder_count: i64,
    pub policy: Option<crate::storage::policies::PolicySummary>,
    /// blake3 of the content (files only).
    pub blake3: Option<String>,
}

pub async fn detail(ctx: &Context, object: &Readable) -> ServiceResult<ObjectDetail> {
    let db = ctx.db();
    let row = object.row();
    let (total_size, file_count, folder_count) = db::objects::subtree_totals(db, row.id).await?;
    let policy = match row.policy_id {
        Some(policy_id) => {
            db::policies::find(db, policy_id).await?.as_ref().map(crate::storage::policies::summary).transpose()?
        }
        None => None,
    };
    let blake3 = match &row.physical_file_id {
        Some(blob) => db::blobs::find(db, blob).await?.and_then(|b| b.blake3),
        None => None,
    };
    Ok(ObjectDetail { object: view_of(db, row).await?, total_size, file_count, folder_count, policy, blake3 })
}

/// One file or folder below a folder, for a client that keeps a copy of the whole tree.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TreeEntry {
    pub id: Uuid,
    pub parent_id: Option<Uuid>,
    pub kind: ObjectKind,
    pub name: String,
    /// Slash-separated from the folder listed, without a leading slash: `a/b.txt`.
    pub path: String,
    /// Bytes; 0 for folders.
    pub size: i64,
    /// blake3 of the content, hexadecimal (files only).
    pub blake3: Option<String>,
    pub updated_at: String,
}

/// One page of a folder's whole tree.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TreePage {
    /// The change-event cursor taken before this page was read: `GET /events?since=` this value
    /// shows every change made after the listing (some of them possibly already in it). A client
    /// follows from the first page's.
    pub cursor: i64,
    pub items: Vec<TreeEntry>,
    /// Pass as `after` for the next page; absent on the last.
    pub next: Option<String>,
}

/// Entries of a tree page: at most this many.
pub const TREE_PAGE_MAX: i64 = 5000;

/// A page of the live descendants of `folder` with their paths below it and their content
/// hashes: a folder's entries by name, then each subfolder's tree (a folder before what it holds),
/// resumed after the entry the page token `after` names.
pub async fn tree(
    ctx: &Context,
    folder: &Readable,
    after: Option<&str>,
    limit: Option<i64>,
) -> ServiceResult<TreePage> {
    if folder.row().kind != ObjectKind::Folder {
        return Err(ServiceError::validation("id", "only a folder has a tree"));
    }
    let limit = limit.unwrap_or(1000);
    if !(1..=TREE_PAGE_MAX).contains(&limit) {
        return Err(ServiceError::validation("limit", format!("limit is 1 to {TREE_PAGE_MAX}")));
    }
    let after = match after {
        Some(token) => tree_token_path(token).ok_or_else(|| ServiceError::validation("after", "not a page token"))?,
        None => Vec::new(),
    };
    let cursor = ctx.events().delivered();
    let page = db::tree_pages::page(ctx.db(), folder.row().id, &after, limit).await?;
    let next = match page.rows.last() {
        Some(last) if page.more => Some(URL_SAFE_NO_PAD.encode(&last.path)),
        _ => None,
    };
    let items = page
        .rows
        .into_iter()
        .map(|row| TreeEntry {
            id: row.id.into(),
            parent_id: row.parent_id.map(Uuid::from),
            kind: row.kind,
            name: row.name,
            path: row.path,
            size: row.size,
            blake3: row.blake3,
            updated_at: to_rfc3339(row.updated_at),
        })
        .collect();
    Ok(TreePage { cursor, items, next })
}

/// The path a tree page token names (the last entry of the page before), by name from the
/// folder; `None` for anything that is not one.
fn tree_token_path(token: &str) -> Option<Vec<String>> {
    let path = String::from_utf8(URL_SAFE_NO_PAD.decode(token).ok()?).ok()?;
    let names: Vec<String> = path.split('/').map(str::to_owned).collect();
    names.iter().all(|name| !name.is_empty()).then_some(names)
}

/// Renames a live object ([`Reach::Live`]); the root keeps its (empty) name.
pub async fn rename(ctx: &Context, object: &Writable, name: &str) -> ServiceResult<ObjectView> {
    let db = ctx.db();
    if object.row().parent_id.is_none() {
        return Err(ServiceError::new(ErrorKind::Forbidden, codes::OBJECT_ROOT, "the root folder cannot be renamed"));
    }
    let name = parse_name(name)?;
    let row = object.row();
    let renamed = Activity::by(row.owner_id, Action::ObjectRename)
        .on(TargetKind::Object, row.id, Some(name.as_str()))
        .with("from", &row.name);
    let mut tx = db.begin().await?;
    db::objects::rename(&mut tx, row.id, name.as_str(), now_ms()).await.map_err(on_name_clash)?;
    activity::record_in(&mut tx, renamed).await;
    tx.commit().await.map_err(DbError::from)?;
    view_now(db, object.as_readable()).await
}

fn unique(ids: &[Uuid]) -> ServiceResult<Vec<ObjectId>> {
    if ids.is_empty() {
        return Err(ServiceError::validation("src_ids", "give at least one object"));
    }
    let mut seen = HashSet::new();
    Ok(ids.iter().filter(|id| seen.insert(**id)).map(|id| ObjectId::from(*id)).collect())
}

/// A live, non-root object `caller` may change, read inside a transaction.
async fn detachable_in(conn: &mut Conn, caller: UserId, id: ObjectId) -> ServiceResult<ObjectRow> {
    let row = access::writable_in(conn, caller, id, Reach::Live).await?.into_row();
    if row.parent_id.is_none() {
        return Err(ServiceError::new(
            ErrorKind::Forbidden,
            codes::OBJECT_ROOT,
            "the root folder cannot be moved, copied or deleted",
        ));
    }
    Ok(row)
}

/// A live folder `caller` may put objects in, read inside a transaction.
async fn destination_in(conn: &mut Conn, caller: UserId, dst: ObjectId) -> ServiceResult<ObjectRow> {
    let row = access::writable_in(conn, caller, dst, Reach::Live).await?.into_row();
    if !row.is_folder() {
        return Err(ServiceError::conflict(codes::OBJECT_NOT_A_FOLDER, "the destination is a file, not a folder"));
    }
    Ok(row)
}

/// Moves objects into `dst`: all of them or none. Moving a folder into itself or below itself
/// is refused, and so is a name that is taken in the destination.
pub async fn move_objects(ctx: &Context, caller: UserId, src_ids: &[Uuid], dst: ObjectId) -> ServiceResult<()> {
    let db = ctx.db();
    let sources = unique(src_ids)?;
    let mut tx = db.begin().await?;
    let destination = destination_in(&mut tx, caller, dst).await?;
    let ancestors: HashSet<ObjectId> = db::objects::ancestor_ids(&mut tx, destination.id).await?.into_iter().collect();
    let now = now_ms();
    let mut moved = Vec::with_capacity(sources.len());
    for &id in &sources {
        let row = detachable_in(&mut tx, caller, id).await?;
        if ancestors.contains(&row.id) {
            return Err(ServiceError::conflict(
                codes::OBJECT_MOVE_CYCLE,
                "a folder cannot move into itself or its descendants",
            ));
        }
        if row.parent_id == Some(destination.id) {
            continue;
        }
        db::objects::set_parent(&mut tx, row.id, destination.id, now).await.map_err(on_name_clash)?;
        moved.push(row);
    }
    if !moved.is_empty() {
        activity::record_in(&mut tx, relocation(Action::ObjectMove, caller, &moved, &destination)).await;
    }
    tx.commit().await.map_err(DbError::from)?;
    Ok(())
}

/// Copies objects (folders with everything inside) into `dst`. Copies share the blobs of their
/// originals (reference counts go up, no bytes are copied) but count against the quota with
/// their logical size.
pub async fn copy_objects(
    ctx: &Context,
    caller: UserId,
    src_ids: &[Uuid],
    dst: ObjectId,
) -> ServiceResult<Vec<ObjectView>> {
    let db = ctx.db();
    let sources = unique(src_ids)?;
    let sources: Vec<(ObjectId, Option<ObjectName>)> = sources.into_iter().map(|id| (id, None)).collect();
    copy_trees(db, caller, &sources, dst, CopySource::Own).await
}

/// Where copied objects come from.
#[derive(Debug, Clone, Copy)]
pub enum CopySource {
    /// The caller's own tree.
    Own,
    /// A share the caller visits: the share, its owner and its shared object. Each source must
    /// be reachable through it ([`access::readable_in_share_in`]).
    Share { share_id: Uuid, owner: UserId, root: ObjectId },
}

/// Copies objects of a share into the caller's folder `dst` ("save to my drive"): as
/// [`copy_objects`], the copies the caller's, sharing the stored blobs and charged to the
/// caller's quota in one transaction (507 and nothing copied when they do not fit). The copies
/// keep the storage policy their blobs are in.
pub async fn copy_from_share(
    db: &Db,
    caller: UserId,
    from: CopySource,
    src_ids: &[Uuid],
    dst: ObjectId,
) -> ServiceResult<Vec<ObjectView>> {
    let sources: Vec<(ObjectId, Option<ObjectName>)> =
        unique(src_ids).map_err(|e| e.with_field("object_ids"))?.into_iter().map(|id| (id, None)).collect();
    copy_trees(db, caller, &sources, dst, from).await
}

/// Copies one object into `dst` under a new name (a WebDAV `COPY`); otherwise as
/// [`copy_objects`].
pub async fn copy_as(
    ctx: &Context,
    caller: UserId,
    id: ObjectId,
    dst: ObjectId,
    name: &str,
) -> ServiceResult<ObjectView> {
    let db = ctx.db();
    let name = parse_name(name)?;
    let mut views = copy_trees(db, caller, &[(id, Some(name))], dst, CopySource::Own).await?;
    views.pop().ok_or_else(not_found)
}

/// The copies belong to the caller, and count against the caller's quota.
async fn copy_trees(
    db: &Db,
    caller: UserId,
    sources: &[(ObjectId, Option<ObjectName>)],
    dst: ObjectId,
    from: CopySource,
) -> ServiceResult<Vec<ObjectView>> {
    let capacity = db::users::capacity(db, caller, now_ms()).await?;
    let mut tx = db.begin().await?;
    let destination = destination_in(&mut tx, caller, dst).await?;
    let ancestors: HashSet<ObjectId> = db::objects::ancestor_ids(&mut tx, destination.id).await?.into_iter().collect();
    let now = now_ms();
    let mut bytes = 0_i64;
    let mut refs: HashMap<String, i64> = HashMap::new();
    let mut new_roots = Vec::new();
    let mut originals = Vec::with_capacity(sources.len());
    for (id, new_name) in sources {
        let root = match from {
            CopySource::Own => detachable_in(&mut tx, caller, *id).await?,
            CopySource::Share { share_id, owner, root } => {
                access::readable_in_share_in(&mut tx, share_id, (owner, root), *id).await?.row().clone()
            }
        };
        if ancestors.contains(&root.id) {
            return Err(ServiceError::conflict(
                codes::OBJECT_COPY_CYCLE,
                "a folder cannot be copied into itself or its descendants",
            ));
        }
        // A copy into the folder it is in takes the next free "name (n)" instead of failing;
        // elsewhere, or under an asked-for name, a taken name is refused.
        let root_name = match new_name {
            Some(name) => name.as_str().to_owned(),
            None if root.parent_id == Some(destination.id) && matches!(from, CopySource::Own) => {
                let own = ObjectName::parse(&root.name).map_err(|why| ServiceError::validation("name", why))?;
                free_name_in(&mut tx, destination.id, &own).await?.as_str().to_owned()
            }
            None => root.name.clone(),
        };
        let tree = db::objects::subtree(&mut tx, root.id).await?;
        let mut new_ids: HashMap<ObjectId, ObjectId> = HashMap::new();
        for row in tree.iter().filter(|r| r.trashed_at.is_none()) {
            let (parent, name) = if row.id == root.id {
                (destination.id, root_name.as_str())
            } else {
                match row.parent_id.and_then(|p| new_ids.get(&p)) {
                    Some(parent) => (*parent, row.name.as_str()),
                    None => continue, // below a trashed folder
                }
            };
            let copy_id = ObjectId::from(new_id());
            let copy = NewObject {
                id: copy_id,
                owner_id: caller,
                parent_id: Some(parent),
                name,
                kind: row.kind,
                policy_id: row.policy_id,
                physical_file_id: row.physical_file_id.as_deref(),
                size: row.size,
            };
            db::objects::insert(&mut tx, &copy, now).await.map_err(on_name_clash)?;
            if let Some(blob) = &row.physical_file_id {
                *refs.entry(blob.clone()).or_default() += 1;
                bytes += row.size;
            }
            if row.id == root.id {
                new_roots.push(copy_id);
            }
            new_ids.insert(row.id, copy_id);
        }
        originals.push(root);
    }
    for (blob, count) in &refs {
        db::blobs::add_refs(&mut tx, blob, *count).await?;
    }
    if bytes > 0 && !db::users::reserve_storage(&mut tx, caller, bytes, capacity).await? {
        return Err(quota_exceeded());
    }
    activity::record_in(&mut tx, relocation(Action::ObjectCopy, caller, &originals, &destination)).await;
    tx.commit().await.map_err(DbError::from)?;
    let mut views = Vec::new();
    for id in new_roots {
        let row = db::objects::find_by_id(db, id).await?.ok_or_else(not_found)?;
        views.push(view_of(db, &row).await?);
    }
    Ok(views)
}

/// Moves one object into `dst` under a new name in one step (a WebDAV `MOVE`); a folder cannot
/// move below itself, and the name must be free there.
pub async fn relocate(ctx: &Context, caller: UserId, id: ObjectId, dst: ObjectId, name: &str) -> ServiceResult<()> {
    let db = ctx.db();
    let name = parse_name(name)?;
    let mut tx = db.begin().await?;
    let destination = destination_in(&mut tx, caller, dst).await?;
    let row = detachable_in(&mut tx, caller, id).await?;
    let ancestors = db::objects::ancestor_ids(&mut tx, destination.id).await?;
    if ancestors.contains(&row.id) {
        return Err(ServiceError::conflict(
            codes::OBJECT_MOVE_CYCLE,
            "a folder cannot move into itself or its descendants",
        ));
    }
    db::objects::relocate(&mut tx, row.id, destination.id, name.as_str(), now_ms()).await.map_err(on_name_clash)?;
    let action = if row.parent_id == Some(destination.id) { Action::ObjectRename } else { Action::ObjectMove };
    let moved = relocation(action, caller, std::slice::from_ref(&row), &destination).with("name", name.as_str());
    activity::record_in(&mut tx, moved).await;
    tx.commit().await.map_err(DbError::from)?;
    Ok(())
}

/// An object as a client addressing paths (WebDAV) sees it. Only this module makes one, from a
/// row found by walking the caller's own tree, so it carries the grant the walk stood on
/// ([`Grant::Owner`]): `access::entry_folder` and `access::entry_readable` check it against
/// the caller, and [`walk_below`] continues from it without reading it again.
#[derive(Debug, Clone)]
pub struct PathEntry {
    pub id: Uuid,
    pub name: String,
    pub is_folder: bool,
    pub size: i64,
    pub created_at: Millis,
    pub updated_at: Millis,
    grant: Grant,
}

impl PathEntry {
    fn of(owner: UserId, row: &ObjectRow) -> Self {
        Self::listed(owner, row.id, &row.name, row.kind, row.size, row.created_at, row.updated_at)
    }

    fn of_listing(owner: UserId, row: &ListingRow) -> Self {
        Self::listed(owner, row.id, &row.name, row.kind, row.size, row.created_at, row.updated_at)
    }

    fn listed(
        owner: UserId,
        id: ObjectId,
        name: &str,
        kind: ObjectKind,
        size: i64,
        created_at: Millis,
        updated_at: Millis,
    ) -> Self {
        let is_folder = kind == ObjectKind::Folder;
        let grant = Grant::Owner(owner);
        Self { id: id.into(), name: name.to_owned(), is_folder, size, created_at, updated_at, grant }
    }

    /// The entry with new content written by this service: new size and times.
    pub(crate) fn with_content(
        owner: UserId,
        id: Uuid,
        name: &str,
        size: i64,
        created_at: Millis,
        updated_at: Millis,
    ) -> Self {
        let grant = Grant::Owner(owner);
        Self { id, name: name.to_owned(), is_folder: false, size, created_at, updated_at, grant }
    }

    /// The grant the entry was found through.
    pub(crate) fn grant(&self) -> Grant {
        self.grant
    }
}

/// The live folder at `path` below the owner's root (the root when `path` is `/`).
pub async fn folder_entry(ctx: &Context, owner: UserId, path: &str) -> ServiceResult<PathEntry> {
    let db = ctx.db();
    let row = resolve_path(db, owner, path).await?;
    if row.trashed_at.is_some() || !row.is_folder() {
        return Err(not_found());
    }
    Ok(PathEntry::of(owner, &row))
}

/// The live objects at `names` below `base`, one per name, in order, as far as they exist: a
/// shorter answer than `names` means the next name is missing (or its parent is a file). `base`
/// must be the owner's and live when it was read: its children are the owner's too.
pub async fn walk_below(
    ctx: &Context,
    owner: UserId,
    base: &PathEntry,
    names: &[&str],
) -> ServiceResult<Vec<PathEntry>> {
    let db = ctx.db();
    let base = access::entry_folder(owner, base)?;
    let rows = db::objects::walk(db, db::objects::WalkStart::Below(base), names).await?;
    Ok(rows.iter().map(|row| PathEntry::of_listing(owner, row)).collect())
}

/// The owner's root folder and then the live objects at `names` below it, as far as they exist
/// (as [`walk_below`]), in one statement for paths of ordinary depth. Empty when the owner has
/// no root folder yet ([`folder_entry`] creates it).
pub async fn walk_from_root(ctx: &Context, owner: UserId, names: &[&str]) -> ServiceResult<Vec<PathEntry>> {
    let db = ctx.db();
    let rows = db::objects::walk(db, db::objects::WalkStart::RootOf(owner), names).await?;
    Ok(rows.iter().map(|row| PathEntry::of_listing(owner, row)).collect())
}

/// Every live child of the owner's folder `folder`, folders first, by name: one query, for
/// clients that list whole folders (WebDAV `PROPFIND`).
pub async fn live_children(ctx: &Context, owner: UserId, folder: &PathEntry) -> ServiceResult<Vec<PathEntry>> {
    let db = ctx.db();
    let folder = access::entry_folder(owner, folder)?;
    let rows = db::objects::all_live_children(db, folder).await?;
    Ok(rows.iter().map(|row| PathEntry::of_listing(owner, row)).collect())
}

/// The owner's used bytes (trash included) and capacity (group quota plus active packs).
pub async fn storage_usage(ctx: &Context, owner: UserId) -> ServiceResult<(i64, i64)> {
    let db = ctx.db();
    Ok(db::users::usage_and_capacity(db, owner, now_ms()).await?)
}

pub fn quota_exceeded() -> ServiceError {
    ServiceError::new(ErrorKind::QuotaExceeded, codes::STORAGE_QUOTA_EXCEEDED, "not enough storage space left")
}

/// Puts objects (and what is inside folders) in the trash; they keep counting against the quota
/// until deleted for good.
pub async fn trash(ctx: &Context, caller: UserId, ids: &[Uuid]) -> ServiceResult<()> {
    let db = ctx.db();
    trash_as(db, caller, ids, &TrashPrecondition::default(), Some(caller)).await
}

/// What must still hold for a trash to go ahead: a sync client deletes from a plan made minutes
/// earlier, and what changed since must not go with it.
#[derive(Debug, Default)]
pub struct TrashPrecondition {
    /// Nothing at or below any of the objects changed after this change-event cursor.
    pub unchanged_since: Option<i64>,
    /// Each named file still has this content (blake3, hex).
    pub blake3: HashMap<Uuid, String>,
}

/// [`trash`], only when `precondition` holds for every object; else 409 `object.changed` and
/// nothing is trashed.
pub async fn trash_if(
    ctx: &Context,
    caller: UserId,
    ids: &[Uuid],
    precondition: &TrashPrecondition,
) -> ServiceResult<()> {
    let db = ctx.db();
    if precondition.unchanged_since.is_some_and(|since| since < 0) {
        return Err(ServiceError::validation("unchanged_since", "a cursor is 0 or more"));
    }
    trash_as(db, caller, ids, precondition, Some(caller)).await
}

fn changed_since_planned(id: ObjectId, what: &str) -> ServiceError {
    ServiceError::new(
        ErrorKind::Conflict,
        codes::OBJECT_CHANGED,
        format!("{id} {what}: nothing was trashed; look again and decide"),
    )
}

/// [`trash`] of `caller`'s objects by `actor` (an administrator), as the activity log records it.
async fn trash_as(
    db: &Db,
    caller: UserId,
    ids: &[Uuid],
    precondition: &TrashPrecondition,
    actor: Option<UserId>,
) -> ServiceResult<()> {
    let ids = unique(ids).map_err(|e| e.with_field("ids"))?;
    let mut tx = db.begin().await?;
    let now = now_ms();
    let mut roots = Vec::with_capacity(ids.len());
    // Every precondition is checked before anything is trashed (trashing is a change itself).
    for &id in &ids {
        let row = detachable_in(&mut tx, caller, id).await?;
        if let Some(expected) = precondition.blake3.get(&Uuid::from(id))
            && db::objects::content_blake3(&mut tx, row.id).await?.as_deref() != Some(expected.as_str())
        {
            return Err(changed_since_planned(row.id, "has other content than expected"));
        }
        if let Some(since) = precondition.unchanged_since
            && db::objects::changes_below_since(&mut tx, row.id, since).await? > 0
        {
            return Err(changed_since_planned(row.id, &format!("or something below it changed after cursor {since}")));
        }
        roots.push(row);
    }
    for row in &roots {
        db::objects::trash_subtree(&mut tx, row.id, now).await?;
    }
    activity::record_in(&mut tx, acted_on(Action::ObjectTrash, caller, actor, &roots)).await;
    tx.commit().await.map_err(DbError::from)?;
    Ok(())
}

pub async fn list_trash(ctx: &Context, owner: UserId, page: PageRequest) -> ServiceResult<Page<ObjectView>> {
    let db = ctx.db();
    let (count, rows) = db::objects::trash_roots(db, owner, page.offset, page.limit).await?;
    let mut items = Vec::with_capacity(rows.len());
    for row in &rows {
        items.push(view_of(db, row).await?);
    }
    Ok(Page { count, items })
}

/// Takes objects out of the trash, back where they were. Refused when the name is taken there
/// by now, or the folder they were in is itself in the trash.
pub async fn restore(ctx: &Context, caller: UserId, ids: &[Uuid]) -> ServiceResult<()> {
    let db = ctx.db();
    let ids = unique(ids).map_err(|e| e.with_field("ids"))?;
    let mut tx = db.begin().await?;
    let mut restored = Vec::with_capacity(ids.len());
    for &id in &ids {
        let row = access::writable_in(&mut tx, caller, id, Reach::TrashRoot).await?.into_row();
        if let Some(parent) = row.parent_id {
            // Only whether it is in the trash is read: the object's handle covers its place.
            let parent = db::objects::find_by_id_in(&mut tx, parent).await?.ok_or_else(not_found)?;
            if parent.trashed_at.is_some() {
                return Err(ServiceError::conflict(codes::TRASH_PARENT_TRASHED, "restore the folder it was in first"));
            }
        }
        db::objects::restore_subtree(&mut tx, row.id).await.map_err(on_name_clash)?;
        restored.push(row);
    }
    activity::record_in(&mut tx, acted_on(Action::ObjectRestore, caller, Some(caller), &restored)).await;
    tx.commit().await.map_err(DbError::from)?;
    Ok(())
}

/// Deletes trashed objects for good: their quota is released and each blob whose last
/// reference goes is deleted from storage after the change commits.
pub async fn purge(ctx: &Context, caller: UserId, ids: &[Uuid]) -> ServiceResult<()> {
    purge_as(ctx, caller, ids, Some(caller)).await
}

/// [`purge`] of `caller`'s objects by `actor` (an administrator; `None`: the trash's expiry).
pub async fn purge_as(ctx: &Context, caller: UserId, ids: &[Uuid], actor: Option<UserId>) -> ServiceResult<()> {
    let ids = unique(ids).map_err(|e| e.with_field("ids"))?;
    let mut tx = ctx.db().begin().await?;
    let mut roots = Vec::new();
    for &id in &ids {
        roots.push(access::writable_in(&mut tx, caller, id, Reach::TrashRoot).await?.into_row());
    }
    // The space goes back to the caller: today every object a caller may delete is the caller's.
    let orphans = delete_trees(&mut tx, caller, &roots).await?;
    activity::record_in(&mut tx, acted_on(Action::ObjectDelete, caller, actor, &roots)).await;
    tx.commit().await.map_err(DbError::from)?;
    release_blobs(ctx, &orphans).await;
    Ok(())
}

/// The activity of `action` on `owner`'s objects `roots` by `actor`.
/// The activity of objects moved or copied by their owner `caller` into `destination`.
fn relocation(action: Action, caller: UserId, roots: &[ObjectRow], destination: &ObjectRow) -> Activity {
    acted_on(action, caller, Some(caller), roots).with("to", destination.id)
}

fn acted_on(action: Action, owner: UserId, actor: Option<UserId>, roots: &[ObjectRow]) -> Activity {
    Activity::new(action, actor).on_objects(owner, roots.iter().map(|row| (row.id.as_uuid(), row.name.as_str())))
}

/// A file as an administrator sees it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AdminFileView {
    pub id: Uuid,
    pub name: String,
    pub owner_id: Uuid,
    /// The owner's e-mail address and nickname (absent if the owner is gone).
    pub owner_email: Option<String>,
    pub owner_nickname: Option<String>,
    /// Where it lives in its owner's tree, e.g. `/photos/2026/a.jpg`.
    pub path: String,
    pub parent_id: Option<Uuid>,
    pub size: i64,
    pub policy_id: Option<Uuid>,
    pub created_at: String,
    pub updated_at: String,
}

/// One page of every user's files (not in the trash) matching `filter`, newest first
/// (`admin_required`).
pub async fn admin_files(
    ctx: &Context,
    filter: &db::objects::FileFilter<'_>,
    page: PageRequest,
) -> ServiceResult<Page<AdminFileView>> {
    let db = ctx.db();
    for (field, size) in [("min_size", filter.min_size), ("max_size", filter.max_size)] {
        if size.is_some_and(|size| size < 0) {
            return Err(ServiceError::validation(field, "must be 0 or more bytes"));
        }
    }
    let (rows, count) = db::objects::files_page(db, filter, page.offset, page.limit).await?;
    let owners: Vec<UserId> = rows.iter().map(|row| row.owner_id).collect::<HashSet<_>>().into_iter().collect();
    let names: HashMap<UserId, (String, String)> = db::users::names_of(db, &owners)
        .await?
        .into_iter()
        .map(|(id, email, nickname)| (id, (email, nickname)))
        .collect();
    let ids: Vec<ObjectId> = rows.iter().map(|row| row.id).collect();
    let mut paths = db::objects::path_names_of(db, &ids).await?;
    let items = rows
        .into_iter()
        .map(|row| AdminFileView {
            id: row.id.into(),
            owner_email: names.get(&row.owner_id).map(|(email, _)| email.clone()),
            owner_nickname: names.get(&row.owner_id).map(|(_, nickname)| nickname.clone()),
            path: path_from_names(&paths.remove(&row.id).unwrap_or_default()),
            name: row.name,
            owner_id: row.owner_id.into(),
            parent_id: row.parent_id.map(Into::into),
            size: row.size,
            policy_id: row.policy_id.map(Into::into),
            created_at: to_rfc3339(row.created_at),
            updated_at: to_rfc3339(row.updated_at),
        })
        .collect();
    Ok(Page { count, items })
}

/// Puts any users' objects in their owners' trash, or with `purge` deletes them for good
/// (`admin_required`). Every id must name an object not in the trash and not a root, checked
/// before anything changes.
pub async fn admin_delete(ctx: &Context, actor: UserId, ids: &[Uuid], purge: bool) -> ServiceResult<()> {
    let ids = unique(ids).map_err(|e| e.with_field("ids"))?;
    let mut by_owner: std::collections::BTreeMap<UserId, Vec<Uuid>> = std::collections::BTreeMap::new();
    for &id in &ids {
        let row = db::objects::find_by_id(ctx.db(), id).await?.filter(|row| row.trashed_at.is_none());
        let row = row.ok_or_else(not_found)?;
        if row.parent_id.is_none() {
            return Err(ServiceError::new(
                ErrorKind::Forbidden,
                codes::OBJECT_ROOT,
                "the root folder cannot be moved, copied or deleted",
            ));
        }
        by_owner.entry(row.owner_id).or_default().push(id.into());
    }
    for (owner, ids) in by_owner {
        trash_as(ctx.db(), owner, &ids, &TrashPrecondition::default(), Some(actor)).await?;
        if purge {
            purge_as(ctx, owner, &ids, Some(actor)).await?;
        }
    }
    Ok(())
}

/// Deletes everything a user owns (before the user is deleted), releasing blobs.
pub async fn delete_everything_of(ctx: &Context, owner: UserId) -> ServiceResult<()> {
    let Some(root) = db::objects::root_of(ctx.db(), owner).await? else { return Ok(()) };
    let mut tx = ctx.db().begin().await?;
    let orphans = delete_trees(&mut tx, owner, &[root]).await?;
    tx.commit().await.map_err(DbError::from)?;
    release_blobs(ctx, &orphans).await;
    Ok(())
}

/// Deletes the trees under `roots` inside `tx`, drops their blob references and quota, and
/// answers the blobs left without references.
async fn delete_trees(tx: &mut Conn, owner_id: UserId, roots: &[ObjectRow]) -> ServiceResult<Vec<String>> {
    let mut refs: HashMap<String, i64> = HashMap::new();
    let mut bytes = 0_i64;
    for root in roots {
        for row in db::objects::subtree(tx, root.id).await? {
            if let Some(blob) = &row.physical_file_id {
                *refs.entry(blob.clone()).or_default() += 1;
                bytes += row.size;
            }
        }
        // The files' versions go with them.
        for (blob, size) in db::versions::delete_in_subtree(tx, root.id).await? {
            *refs.entry(blob).or_default() += 1;
            bytes += size;
        }
        db::objects::delete(tx, root.id).await.map_err(|e| match e {
            DbError::Sqlx(sqlx::Error::Database(ref d)) if d.is_foreign_key_violation() => ServiceError::conflict(
                codes::OBJECT_UPLOAD_IN_PROGRESS,
                "an upload into this folder is in progress: finish or cancel it first",
            ),
            other => other.into(),
        })?;
    }
    let mut orphans = Vec::new();
    for (blob, count) in refs {
        if db::blobs::add_refs(tx, &blob, -count).await? == 0 {
            orphans.push(blob);
        }
    }
    db::users::release_storage(tx, owner_id, bytes).await?;
    Ok(orphans)
}

/// Deletes unreferenced blobs from storage and then their rows. Failures are logged and left
/// for the orphan collector: the metadata change has already committed.
pub async fn release_blobs(ctx: &Context, blob_ids: &[String]) {
    for id in blob_ids {
        if let Err(err) = release_blob(ctx, id).await {
            tracing::warn!(blob = %id, error = %err, "could not delete an unreferenced blob; the collector will retry");
        }
    }
}

async fn release_blob(ctx: &Context, id: &str) -> ServiceResult<()> {
    let Some(blob) = db::blobs::find(ctx.db(), id).await? else { return Ok(()) };
    if blob.ref_count > 0 {
        return Ok(());
    }
    let policy = db::policies::find(ctx.db(), blob.policy_id)
        .await?
        .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("policy gone")))?;
    let store = policies::store(ctx, &policy).await?;
    let key = nubo_common::storage::StorageKey::parse(&blob.storage_key)?;
    store.delete(&key).await?;
    let mut conn = ctx.db().writer().acquire().await.map_err(DbError::from)?;
    db::blobs::delete_unreferenced(&mut conn, id).await?;
    Ok(())
}
