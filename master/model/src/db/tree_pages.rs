//! A folder's whole tree in pages that cost what they return (`GET /object/{id}/tree`): a walk
//! that resumes from the path of the last entry handed out, reading each folder's children by a
//! keyset over the live-name index, instead of a recursive walk of the whole subtree per page.
//!
//! The order: a folder's entries by name, then each of its subfolders' trees, subfolders by name.
//! A folder is always listed before what it holds. A page resumes from a path, not an id, so an
//! entry trashed or moved away meanwhile does not derail the pages after it.

use super::{Db, DbError};
use crate::domain::ids::ObjectId;
use crate::domain::object::ObjectKind;
use crate::domain::time::Millis;

/// One entry of a [`page`]: a live descendant of the folder with its path below it and the
/// content hash of a file.
#[derive(Debug, Clone)]
pub struct TreeRow {
    pub id: ObjectId,
    pub parent_id: Option<ObjectId>,
    pub name: String,
    pub kind: ObjectKind,
    pub size: i64,
    pub updated_at: Millis,
    /// Slash-separated from the folder, e.g. `a/b.txt`.
    pub path: String,
    pub blake3: Option<String>,
}

/// A page of entries, and whether the walk has more to read after it.
pub struct Page {
    pub rows: Vec<TreeRow>,
    pub more: bool,
}

#[derive(sqlx::FromRow)]
struct ChildRow {
    id: ObjectId,
    parent_id: Option<ObjectId>,
    name: String,
    kind: ObjectKind,
    size: i64,
    updated_at: Millis,
    blake3: Option<String>,
}

/// Where the walk stands in one folder: still handing out its entries (after a name), or
/// descending into its subfolders (the next one after a name).
enum Phase {
    Entries { after: String },
    Subfolders { after: String },
}

struct Frame {
    folder: ObjectId,
    /// The folder's path below the listed one, with a trailing `/` (empty for the listed one).
    prefix: String,
    phase: Phase,
}

/// Up to `limit` live descendants of `folder_id` (not the folder itself) in the walk's order,
/// after the entry at `after` (its path below the folder, by name; empty for the first page).
pub async fn page(db: &Db, folder_id: ObjectId, after: &[String], limit: i64) -> Result<Page, DbError> {
    let mut conn = db.reader().acquire().await?;
    let mut frames = resume(&mut conn, folder_id, after).await?;
    let mut rows = Vec::new();
    while (rows.len() as i64) < limit
        && let Some(top) = frames.last_mut()
    {
        match &top.phase {
            Phase::Entries { after } => {
                let wanted = limit - rows.len() as i64;
                let children = entries_after(&mut conn, top.folder, after, wanted).await?;
                top.phase = match children.last() {
                    Some(last) if children.len() as i64 == wanted => Phase::Entries { after: last.name.clone() },
                    _ => Phase::Subfolders { after: String::new() },
                };
                rows.extend(children.into_iter().map(|child| TreeRow {
                    path: format!("{}{}", top.prefix, child.name),
                    id: child.id,
                    parent_id: child.parent_id,
                    name: child.name,
                    kind: child.kind,
                    size: child.size,
                    updated_at: child.updated_at,
                    blake3: child.blake3,
                }));
            }
            Phase::Subfolders { after } => match next_subfolder(&mut conn, top.folder, after).await? {
                Some((id, name)) => {
                    let prefix = format!("{}{name}/", top.prefix);
                    top.phase = Phase::Subfolders { after: name };
                    frames.push(Frame { folder: id, prefix, phase: Phase::Entries { after: String::new() } });
                }
                None => {
                    frames.pop();
                }
            },
        }
    }
    Ok(Page { rows, more: !frames.is_empty() })
}

/// The walk's stack for resuming after the entry at `after`: every folder on its path is past
/// the subfolders before it, and its own folder is past the entries before it. Where a folder on
/// the path is gone, the walk goes on after its name one level up.
async fn resume(conn: &mut sqlx::AnyConnection, folder_id: ObjectId, after: &[String]) -> Result<Vec<Frame>, DbError> {
    let Some((last, folders)) = after.split_last() else {
        return Ok(vec![Frame {
            folder: folder_id,
            prefix: String::new(),
            phase: Phase::Entries { after: String::new() },
        }]);
    };
    let mut frames = Vec::new();
    let (mut folder, mut prefix) = (folder_id, String::new());
    for name in folders {
        frames.push(Frame { folder, prefix: prefix.clone(), phase: Phase::Subfolders { after: name.clone() } });
        match live_subfolder(conn, folder, name).await? {
            Some(id) => {
                folder = id;
                prefix = format!("{prefix}{name}/");
            }
            None => return Ok(frames),
        }
    }
    frames.push(Frame { folder, prefix, phase: Phase::Entries { after: last.clone() } });
    Ok(frames)
}

async fn entries_after(
    conn: &mut sqlx::AnyConnection,
    folder: ObjectId,
    after: &str,
    limit: i64,
) -> Result<Vec<ChildRow>, DbError> {
    let rows = sqlx::query_as(
        "SELECT o.id, o.parent_id, o.name, o.kind, o.size, o.updated_at, b.blake3
         FROM objects o LEFT JOIN physical_files b ON b.id = o.physical_file_id
         WHERE o.parent_id = $1 AND o.trashed_at IS NULL AND o.name > $2 ORDER BY o.name LIMIT $3",
    )
    .bind(folder)
    .bind(after)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows)
}

/// The first live subfolder of `folder` named after `after` (the listing index's order).
async fn next_subfolder(
    conn: &mut sqlx::AnyConnection,
    folder: ObjectId,
    after: &str,
) -> Result<Option<(ObjectId, String)>, DbError> {
    let row = sqlx::query_as(
        "SELECT id, name FROM objects WHERE parent_id = $1 AND trashed_at IS NULL AND kind = 'folder' AND name > $2
         ORDER BY kind DESC, name LIMIT 1",
    )
    .bind(folder)
    .bind(after)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row)
}

async fn live_subfolder(
    conn: &mut sqlx::AnyConnection,
    folder: ObjectId,
    name: &str,
) -> Result<Option<ObjectId>, DbError> {
    let row: Option<(ObjectId,)> = sqlx::query_as(
        "SELECT id FROM objects WHERE parent_id = $1 AND name = $2 AND trashed_at IS NULL AND kind = 'folder'",
    )
    .bind(folder)
    .bind(name)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.map(|(id,)| id))
}
