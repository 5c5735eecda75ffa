//! SQL of the object tree (`objects`), source links and object metadata. An object's path is
//! derived from its parent chain with a recursive query, so moving a folder updates one row.

use std::collections::HashMap;

use super::{Arg, Conn, Db, DbError, Values, Where};
use crate::domain::ids::{ObjectId, PolicyId, UserId};
use crate::domain::object::{ListOrder, ObjectKind, search_key};
use crate::domain::time::Millis;

pub const COLUMNS: &str = "id, owner_id, parent_id, name, kind, policy_id, physical_file_id, size, trashed_at, trash_root_id, created_at, updated_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ObjectRow {
    pub id: ObjectId,
    pub owner_id: UserId,
    pub parent_id: Option<ObjectId>,
    pub name: String,
    pub kind: ObjectKind,
    pub policy_id: Option<PolicyId>,
    pub physical_file_id: Option<String>,
    pub size: i64,
    pub trashed_at: Option<Millis>,
    pub trash_root_id: Option<ObjectId>,
    pub created_at: Millis,
    pub updated_at: Millis,
}

impl ObjectRow {
    pub fn is_folder(&self) -> bool {
        self.kind == ObjectKind::Folder
    }
}

#[derive(Clone, Copy)]
pub struct NewObject<'a> {
    pub id: ObjectId,
    pub owner_id: UserId,
    pub parent_id: Option<ObjectId>,
    pub name: &'a str,
    pub kind: ObjectKind,
    pub policy_id: Option<PolicyId>,
    pub physical_file_id: Option<&'a str>,
    pub size: i64,
}

/// `$1`..`$10`: id, owner, parent, name, kind, policy, blob, size, now, the name's search key.
pub(super) const INSERT: &str = "INSERT INTO objects (id, owner_id, parent_id, name, kind, policy_id, physical_file_id, size, created_at, updated_at, name_key)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10)";

pub async fn insert(conn: &mut Conn, object: &NewObject<'_>, now: Millis) -> Result<(), DbError> {
    sqlx::query(INSERT)
        .bind(object.id)
        .bind(object.owner_id)
        .bind(object.parent_id)
        .bind(object.name)
        .bind(object.kind)
        .bind(object.policy_id)
        .bind(object.physical_file_id)
        .bind(object.size)
        .bind(now)
        .bind(search_key(object.name))
        .execute(conn)
        .await?;
    Ok(())
}

/// The user's root folder (the one object without a parent).
pub async fn root_of(db: &Db, owner_id: UserId) -> Result<Option<ObjectRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM objects WHERE owner_id = $1 AND parent_id IS NULL"))
        .bind(owner_id)
        .fetch_optional(db.reader())
        .await?)
}

/// Any object by id, whoever owns it: `service::tree::access` decides whether the caller may have it.
pub async fn find_by_id(db: &Db, id: ObjectId) -> Result<Option<ObjectRow>, DbError> {
    // Every access check reads this: on SQLite on the calling thread ([`Db::read_row`]).
    db.read_row(&format!("SELECT {COLUMNS} FROM objects WHERE id = $1"), &[Arg::Text(&id.to_string())], decode_object)
        .await
}

/// An [`ObjectRow`] from the columns of [`COLUMNS`], by position.
fn decode_object(row: &dyn Values) -> Result<ObjectRow, DbError> {
    Ok(ObjectRow {
        id: row.parsed_at(0)?,
        owner_id: row.parsed_at(1)?,
        parent_id: row.opt_parsed_at(2)?,
        name: row.text_at(3)?,
        kind: row.parsed_at(4)?,
        policy_id: row.opt_parsed_at(5)?,
        physical_file_id: row.opt_text_at(6)?,
        size: row.int_at(7)?,
        trashed_at: row.opt_int_at(8)?,
        trash_root_id: row.opt_parsed_at(9)?,
        created_at: row.int_at(10)?,
        updated_at: row.int_at(11)?,
    })
}

/// As [`find_by_id`], inside the caller's transaction.
pub async fn find_by_id_in(conn: &mut Conn, id: ObjectId) -> Result<Option<ObjectRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM objects WHERE id = $1")).bind(id).fetch_optional(conn).await?)
}

/// An object of `owner_id` by id, trashed or not.
pub async fn find_owned(db: &Db, owner_id: UserId, id: ObjectId) -> Result<Option<ObjectRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM objects WHERE id = $1 AND owner_id = $2"))
        .bind(id)
        .bind(owner_id)
        .fetch_optional(db.reader())
        .await?)
}

/// A live child of `parent_id` by name.
pub async fn child_by_name(db: &Db, parent_id: ObjectId, name: &str) -> Result<Option<ObjectRow>, DbError> {
    // Path walks and every new file's name check read this: on SQLite on the calling thread.
    let sql = format!("SELECT {COLUMNS} FROM objects WHERE parent_id = $1 AND name = $2 AND trashed_at IS NULL");
    db.read_row(&sql, &[Arg::Text(&parent_id.to_string()), Arg::Text(name)], decode_object).await
}

/// As [`child_by_name`], inside the caller's transaction.
pub async fn child_by_name_in(conn: &mut Conn, parent_id: ObjectId, name: &str) -> Result<Option<ObjectRow>, DbError> {
    let sql = format!("SELECT {COLUMNS} FROM objects WHERE parent_id = $1 AND name = $2 AND trashed_at IS NULL");
    Ok(sqlx::query_as(&sql).bind(parent_id).bind(name).fetch_optional(conn).await?)
}

/// Every live child of `parent_id`, folders first, then by name (byte order) and id: a whole
/// folder as one row (a JSON array built by the database), because a listing of many thousand
/// entries costs far more as rows handed over one by one than as one value. Sorted here: an
/// `ORDER BY` inside the aggregate makes SQLite sort in a temporary b-tree.
pub async fn all_live_children(db: &Db, parent_id: ObjectId) -> Result<Vec<ListingRow>, DbError> {
    let sql = match db.backend() {
        super::Backend::Sqlite => {
            "SELECT json_group_array(json_array(id, name, kind, policy_id, size, created_at, updated_at))
             FROM objects WHERE parent_id = $1 AND trashed_at IS NULL"
        }
        super::Backend::Postgres => {
            "SELECT COALESCE(json_agg(json_build_array(id, name, kind, policy_id, size, created_at, updated_at)), '[]')::text
             FROM objects WHERE parent_id = $1 AND trashed_at IS NULL"
        }
    };
    let (listing,): (String,) = sqlx::query_as(sql).bind(parent_id).fetch_one(db.reader()).await?;
    // Ids and kinds deserialize from the borrowed JSON text: no allocation beyond the name.
    type Listed = (ObjectId, String, ObjectKind, Option<PolicyId>, i64, Millis, Millis);
    let mut rows: Vec<Listed> =
        serde_json::from_str(&listing).map_err(|e| DbError::Sqlx(sqlx::Error::Decode(e.into())))?;
    // `kind` descending puts folders ('folder' > 'file') first, as in every listing; ids
    // compare as their stored text does (UUIDs order as their hexadecimal text).
    rows.sort_unstable_by(|a, b| {
        b.2.as_str().cmp(a.2.as_str()).then_with(|| a.1.cmp(&b.1)).then_with(|| a.0.cmp(&b.0))
    });
    Ok(rows
        .into_iter()
        .map(|(id, name, kind, policy_id, size, created_at, updated_at)| ListingRow {
            id,
            name,
            kind,
            policy_id,
            size,
            created_at,
            updated_at,
        })
        .collect())
}

/// A live file's name and change time with its blob and the blob's policy: what serving its
/// content needs.
pub struct FileContentRow {
    pub name: String,
    pub updated_at: Millis,
    pub blob: super::blobs::BlobRow,
    pub policy: super::policies::PolicyRow,
}

/// The live file `id` with its content ([`FileContentRow`]), in one statement; `None` when there
/// is no such file (in the trash, a folder, or none at all). Whose it is was decided before.
pub async fn live_file_content(db: &Db, id: ObjectId) -> Result<Option<FileContentRow>, DbError> {
    let sql = format!(
        "SELECT o.name AS object_name, o.updated_at AS object_updated_at, {}
         FROM objects o JOIN physical_files b ON b.id = o.physical_file_id JOIN policies p ON p.id = b.policy_id
         WHERE o.id = $1 AND o.trashed_at IS NULL",
        super::blobs::with_policy_columns()
    );
    db.read_row(&sql, &[Arg::Text(&id.to_string())], decode_file_content).await
}

/// Levels resolved per statement by [`walk`]; deeper paths take one statement per this many.
const WALK_STEP: usize = 16;
/// Columns [`walk`] selects per level, in the order [`ListingRow::at_level`] reads them.
const WALK_COLUMNS: usize = 7;

/// Where a [`walk`] starts.
#[derive(Debug, Clone, Copy)]
pub enum WalkStart {
    /// Below the folder with this id: the first name is one of its children.
    Below(ObjectId),
    /// At the root folder of the owner with this id: the root is the first object answered.
    RootOf(UserId),
}

/// The live objects along a path, as far as they exist (a missing name, or a file where a
/// folder was needed, ends the walk early): from [`WalkStart::RootOf`] the owner's root and
/// then one object per name, from [`WalkStart::Below`] one per name. One statement per
/// [`WALK_STEP`] levels: each level is a join on the `(parent_id, name)` index.
pub async fn walk(db: &Db, start: WalkStart, names: &[&str]) -> Result<Vec<ListingRow>, DbError> {
    let mut found: Vec<ListingRow> = Vec::with_capacity(names.len() + 1);
    let mut anchor = match start {
        WalkStart::Below(folder) => folder.to_string(),
        WalkStart::RootOf(owner) => owner.to_string(),
    };
    let mut rest = names;
    let mut from_root = matches!(start, WalkStart::RootOf(_));
    while from_root || !rest.is_empty() {
        // From the root, level 0 is the root itself and takes no name.
        let first_named = usize::from(from_root);
        let (step, later) = rest.split_at(rest.len().min(WALK_STEP - first_named));
        let levels = first_named + step.len();
        let mut select = Vec::with_capacity(levels);
        let mut from = String::from("objects c0");
        for level in 0..levels {
            // [`WALK_COLUMNS`] columns, read by position in [`ListingRow::at_level`].
            select.push(format!(
                "c{level}.id, c{level}.name, c{level}.kind, c{level}.policy_id, c{level}.size, \
                 c{level}.created_at, c{level}.updated_at"
            ));
            if level > 0 {
                from.push_str(&format!(
                    " LEFT JOIN objects c{level} ON c{level}.parent_id = c{prev}.id AND c{level}.name = ${param} \
                     AND c{level}.trashed_at IS NULL",
                    prev = level - 1,
                    param = level - first_named + 2,
                ));
            }
        }
        let anchored = if from_root {
            "c0.owner_id = $1 AND c0.parent_id IS NULL"
        } else {
            "c0.parent_id = $1 AND c0.name = $2 AND c0.trashed_at IS NULL"
        };
        let sql = format!("SELECT {} FROM {from} WHERE {anchored}", select.join(", "));
        let args: Vec<Arg<'_>> = std::iter::once(anchor.as_str()).chain(step.iter().copied()).map(Arg::Text).collect();
        let decode =
            |row: &dyn Values| (0..levels).map_while(|level| ListingRow::at_level(row, level).transpose()).collect();
        let Some(rows) = db.read_row(&sql, &args, decode).await? else { return Ok(found) };
        let rows: Vec<ListingRow> = rows;
        let complete = rows.len() == levels;
        found.extend(rows);
        if !complete {
            return Ok(found);
        }
        anchor = found.last().map(|row| row.id.to_string()).unwrap_or_default();
        rest = later;
        from_root = false;
    }
    Ok(found)
}

/// Names from the root down to `id` (the root's own name, empty, first).
pub async fn path_names(db: &Db, id: ObjectId) -> Result<Vec<String>, DbError> {
    // One row, the names joined by `/` (which no name contains), so it runs where single-row
    // reads do: on SQLite on the calling thread (every created or changed object's answer
    // carries its path).
    let joined = match db.backend() {
        super::Backend::Sqlite => "group_concat(name, '/' ORDER BY depth DESC)",
        super::Backend::Postgres => "string_agg(name, '/' ORDER BY depth DESC)",
    };
    let sql = format!(
        "WITH RECURSIVE chain(id, parent_id, name, depth) AS (
             SELECT id, parent_id, name, 0 FROM objects WHERE id = $1
             UNION ALL
             SELECT o.id, o.parent_id, o.name, c.depth + 1 FROM objects o JOIN chain c ON o.id = c.parent_id
         )
         SELECT {joined} AS names FROM chain"
    );
    let names = db.read_row(&sql, &[Arg::Text(&id.to_string())], |row| row.opt_text("names")).await?.flatten();
    Ok(names.map(|names| names.split('/').map(str::to_owned).collect()).unwrap_or_default())
}

/// The names of the chains of each of `ids`, root (empty) first, in one statement (a list of
/// objects from many folders, such as the administrators' list of files).
pub async fn path_names_of(db: &Db, ids: &[ObjectId]) -> Result<HashMap<ObjectId, Vec<String>>, DbError> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let sql = format!(
        "WITH RECURSIVE chain(start, id, parent_id, name, depth) AS (
             SELECT id, id, parent_id, name, 0 FROM objects WHERE id IN ({})
             UNION ALL
             SELECT c.start, o.id, o.parent_id, o.name, c.depth + 1 FROM objects o JOIN chain c ON o.id = c.parent_id
         )
         SELECT start, name FROM chain ORDER BY start, depth DESC",
        super::placeholders(ids.len())
    );
    let mut query = sqlx::query_as::<_, (ObjectId, String)>(&sql);
    for id in ids {
        query = query.bind(*id);
    }
    let mut paths: HashMap<ObjectId, Vec<String>> = HashMap::new();
    for (start, name) in query.fetch_all(db.reader()).await? {
        paths.entry(start).or_default().push(name);
    }
    Ok(paths)
}

/// Ids of `id` and all its ancestors.
pub async fn ancestor_ids(conn: &mut Conn, id: ObjectId) -> Result<Vec<ObjectId>, DbError> {
    let rows: Vec<(ObjectId,)> = sqlx::query_as(
        "WITH RECURSIVE chain(id, parent_id) AS (
             SELECT id, parent_id FROM objects WHERE id = $1
             UNION ALL
             SELECT o.id, o.parent_id FROM objects o JOIN chain c ON o.id = c.parent_id
         )
         SELECT id FROM chain",
    )
    .bind(id)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|(i,)| i).collect())
}

/// `id` and everything below it, parents before children.
pub async fn subtree(conn: &mut Conn, id: ObjectId) -> Result<Vec<ObjectRow>, DbError> {
    let columns = COLUMNS.split(", ").map(|c| format!("o.{c}")).collect::<Vec<_>>().join(", ");
    let rows = sqlx::query_as(&format!(
        "WITH RECURSIVE tree(id, depth) AS (
             SELECT id, 0 FROM objects WHERE id = $1
             UNION ALL
             SELECT o.id, t.depth + 1 FROM objects o JOIN tree t ON o.parent_id = t.id
         )
         SELECT {columns} FROM objects o JOIN tree t ON o.id = t.id ORDER BY t.depth, o.name"
    ))
    .bind(id)
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// The columns a folder listing shows (fewer than [`ObjectRow`]: listings are the hottest query
/// and every column costs per row).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ListingRow {
    pub id: ObjectId,
    pub name: String,
    pub kind: ObjectKind,
    pub policy_id: Option<PolicyId>,
    pub size: i64,
    pub created_at: Millis,
    pub updated_at: Millis,
}

impl ListingRow {
    /// The object at `level` of a [`walk`] row (its [`WALK_COLUMNS`] columns from
    /// `level * WALK_COLUMNS`, in the order the walk selects them); `None` where the path ended
    /// before it.
    fn at_level(row: &dyn Values, level: usize) -> Result<Option<Self>, DbError> {
        let at = |column: usize| level * WALK_COLUMNS + column;
        let Some(id) = row.opt_parsed_at(at(0))? else { return Ok(None) };
        Ok(Some(Self {
            id,
            name: row.text_at(at(1))?,
            kind: row.parsed_at(at(2))?,
            policy_id: row.opt_parsed_at(at(3))?,
            size: row.int_at(at(4))?,
            created_at: row.int_at(at(5))?,
            updated_at: row.int_at(at(6))?,
        }))
    }
}

/// One page of the live children of `parent_id`, folders first, and their total count.
pub async fn children(
    db: &Db,
    parent_id: ObjectId,
    order: ListOrder,
    descending: bool,
    offset: i64,
    limit: i64,
) -> Result<(i64, Vec<ListingRow>), DbError> {
    let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM objects WHERE parent_id = $1 AND trashed_at IS NULL")
        .bind(parent_id)
        .fetch_one(db.reader())
        .await?;
    // `kind DESC` puts folders ('folder' > 'file') first and matches the listing index.
    let column = match order {
        ListOrder::Name => "name",
        ListOrder::Size => "size",
        ListOrder::CreatedAt => "created_at",
        ListOrder::UpdatedAt => "updated_at",
    };
    let direction = if descending { "DESC" } else { "ASC" };
    // Name it once: a repeated sort key makes SQLite sort in a temporary b-tree instead of
    // walking the listing index.
    let tie_break = if order == ListOrder::Name { "id" } else { "name, id" };
    let sql = format!(
        "SELECT id, name, kind, policy_id, size, created_at, updated_at FROM objects WHERE parent_id = $1 AND trashed_at IS NULL
         ORDER BY kind DESC, {column} {direction}, {tie_break} LIMIT $2 OFFSET $3"
    );
    let rows = sqlx::query_as(&sql).bind(parent_id).bind(limit).bind(offset).fetch_all(db.reader()).await?;
    Ok((count, rows))
}

pub async fn rename(conn: &mut Conn, id: ObjectId, name: &str, now: Millis) -> Result<(), DbError> {
    sqlx::query("UPDATE objects SET name = $2, updated_at = $3, name_key = $4 WHERE id = $1")
        .bind(id)
        .bind(name)
        .bind(now)
        .bind(search_key(name))
        .execute(conn)
        .await?;
    Ok(())
}

pub async fn set_parent(conn: &mut Conn, id: ObjectId, parent_id: ObjectId, now: Millis) -> Result<(), DbError> {
    sqlx::query("UPDATE objects SET parent_id = $2, updated_at = $3 WHERE id = $1")
        .bind(id)
        .bind(parent_id)
        .bind(now)
        .execute(conn)
        .await?;
    Ok(())
}

/// Moves and renames in one statement.
pub async fn relocate(
    conn: &mut Conn,
    id: ObjectId,
    parent_id: ObjectId,
    name: &str,
    now: Millis,
) -> Result<(), DbError> {
    sqlx::query("UPDATE objects SET parent_id = $2, name = $3, updated_at = $4, name_key = $5 WHERE id = $1")
        .bind(id)
        .bind(parent_id)
        .bind(name)
        .bind(now)
        .bind(search_key(name))
        .execute(conn)
        .await?;
    Ok(())
}

/// `$1` the file, `$2` its new blob, `$3` size, `$4` now.
pub(super) const SET_CONTENT: &str =
    "UPDATE objects SET physical_file_id = $2, size = $3, updated_at = $4 WHERE id = $1";

/// Points a file at new content.
pub async fn set_content(
    conn: &mut Conn,
    id: ObjectId,
    physical_file_id: &str,
    size: i64,
    now: Millis,
) -> Result<(), DbError> {
    sqlx::query(SET_CONTENT).bind(id).bind(physical_file_id).bind(size).bind(now).execute(conn).await?;
    Ok(())
}

/// Points a file at another blob (and policy) only if it still points at `old_blob`; answers
/// whether it did.
pub async fn switch_blob(
    conn: &mut Conn,
    id: ObjectId,
    old_blob: &str,
    new_blob: &str,
    policy_id: PolicyId,
) -> Result<bool, DbError> {
    let done =
        sqlx::query("UPDATE objects SET physical_file_id = $3, policy_id = $4 WHERE id = $1 AND physical_file_id = $2")
            .bind(id)
            .bind(old_blob)
            .bind(new_blob)
            .bind(policy_id)
            .execute(conn)
            .await?;
    Ok(done.rows_affected() > 0)
}

/// Puts `root_id` and its live descendants in the trash, remembering `root_id` as the cause.
pub async fn trash_subtree(conn: &mut Conn, root_id: ObjectId, now: Millis) -> Result<(), DbError> {
    sqlx::query(
        "WITH RECURSIVE tree(id) AS (
             SELECT id FROM objects WHERE id = $1
             UNION ALL
             SELECT o.id FROM objects o JOIN tree t ON o.parent_id = t.id WHERE o.trashed_at IS NULL
         )
         UPDATE objects SET trashed_at = $2, trash_root_id = $1 WHERE id IN (SELECT id FROM tree)",
    )
    .bind(root_id)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

/// How many change events `root_id` and everything below it (live or trashed) had after the
/// cursor `since`: 0 when nothing there changed since (a precondition of sync clients' trash).
pub async fn changes_below_since(conn: &mut Conn, root_id: ObjectId, since: i64) -> Result<i64, DbError> {
    let (count,): (i64,) = sqlx::query_as(
        "WITH RECURSIVE tree(id) AS (
             SELECT id FROM objects WHERE id = $1
             UNION ALL
             SELECT o.id FROM objects o JOIN tree t ON o.parent_id = t.id
         )
         SELECT COUNT(*) FROM change_events WHERE seq > $2 AND object_id IN (SELECT id FROM tree)",
    )
    .bind(root_id)
    .bind(since)
    .fetch_one(conn)
    .await?;
    Ok(count)
}

/// The blake3 of a file's content (`None` for a folder or content never hashed).
pub async fn content_blake3(conn: &mut Conn, id: ObjectId) -> Result<Option<String>, DbError> {
    let row: Option<(Option<String>,)> = sqlx::query_as(
        "SELECT b.blake3 FROM objects o JOIN physical_files b ON b.id = o.physical_file_id WHERE o.id = $1",
    )
    .bind(id)
    .fetch_optional(conn)
    .await?;
    Ok(row.and_then(|(blake3,)| blake3))
}

/// Takes everything trashed together with `root_id` out of the trash.
pub async fn restore_subtree(conn: &mut Conn, root_id: ObjectId) -> Result<(), DbError> {
    sqlx::query("UPDATE objects SET trashed_at = NULL, trash_root_id = NULL WHERE trash_root_id = $1")
        .bind(root_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// The user's trash: the objects whose deletion put something in the trash.
pub async fn trash_roots(db: &Db, owner_id: UserId, offset: i64, limit: i64) -> Result<(i64, Vec<ObjectRow>), DbError> {
    let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM objects WHERE owner_id = $1 AND trash_root_id = id")
        .bind(owner_id)
        .fetch_one(db.reader())
        .await?;
    let rows = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM objects WHERE owner_id = $1 AND trash_root_id = id
         ORDER BY trashed_at DESC, id LIMIT $2 OFFSET $3"
    ))
    .bind(owner_id)
    .bind(limit)
    .bind(offset)
    .fetch_all(db.reader())
    .await?;
    Ok((count, rows))
}

/// Trash roots older than their owner's group retention at `now`: `(owner_id, object_id)`.
pub async fn expired_trash(db: &Db, now: Millis, limit: i64) -> Result<Vec<(UserId, ObjectId)>, DbError> {
    Ok(sqlx::query_as(
        "SELECT o.owner_id, o.id FROM objects o JOIN users u ON u.id = o.owner_id JOIN groups g ON g.id = u.group_id
         WHERE o.trash_root_id = o.id AND o.trashed_at < $1 - CAST(g.trash_retention_days AS BIGINT) * 86400000
         ORDER BY o.trashed_at LIMIT $2",
    )
    .bind(now)
    .bind(limit)
    .fetch_all(db.reader())
    .await?)
}

/// Deletes one object row (its descendants go with it through the foreign key).
pub async fn delete(conn: &mut Conn, id: ObjectId) -> Result<(), DbError> {
    sqlx::query("DELETE FROM objects WHERE id = $1").bind(id).execute(conn).await?;
    Ok(())
}

/// Sum of file sizes and counts of files and folders below (and including) `id`.
pub async fn subtree_totals(db: &Db, id: ObjectId) -> Result<(i64, i64, i64), DbError> {
    let row: (Option<i64>, i64, i64) = sqlx::query_as(
        "WITH RECURSIVE tree(id) AS (
             SELECT id FROM objects WHERE id = $1
             UNION ALL
             SELECT o.id FROM objects o JOIN tree t ON o.parent_id = t.id WHERE o.trashed_at IS NULL
         )
         SELECT CAST(SUM(CASE WHEN kind = 'file' THEN size ELSE 0 END) AS BIGINT),
                CAST(SUM(CASE WHEN kind = 'file' THEN 1 ELSE 0 END) AS BIGINT),
                CAST(SUM(CASE WHEN kind = 'folder' THEN 1 ELSE 0 END) AS BIGINT)
         FROM objects WHERE id IN (SELECT id FROM tree)",
    )
    .bind(id)
    .fetch_one(db.reader())
    .await?;
    Ok((row.0.unwrap_or(0), row.1, row.2))
}

/// Logical bytes a user's files take (for calibration).
pub async fn owned_bytes(db: &Db, owner_id: UserId) -> Result<i64, DbError> {
    let (n,): (Option<i64>,) =
        sqlx::query_as("SELECT CAST(SUM(size) AS BIGINT) FROM objects WHERE owner_id = $1 AND kind = 'file'")
            .bind(owner_id)
            .fetch_one(db.reader())
            .await?;
    Ok(n.unwrap_or(0))
}

// ---- source links ----

pub async fn source_link_of(db: &Db, object_id: ObjectId) -> Result<Option<(String, i64)>, DbError> {
    Ok(sqlx::query_as("SELECT id, downloads FROM source_links WHERE object_id = $1")
        .bind(object_id)
        .fetch_optional(db.reader())
        .await?)
}

/// Creates the object's source link unless it has one; answers whether it was created.
pub async fn insert_source_link(
    db: &Db,
    id: &str,
    object_id: ObjectId,
    name: &str,
    now: Millis,
) -> Result<bool, DbError> {
    let done = sqlx::query(
        "INSERT INTO source_links (id, object_id, name, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (object_id) DO NOTHING",
    )
    .bind(id)
    .bind(object_id)
    .bind(name)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}

pub async fn count_source_downloads(db: &Db, counts: &[(ObjectId, i64)]) -> Result<(), DbError> {
    let mut tx = db.begin().await?;
    for (object_id, count) in counts {
        sqlx::query("UPDATE source_links SET downloads = downloads + $2 WHERE object_id = $1")
            .bind(*object_id)
            .bind(*count)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// The file behind the source link of `id` named `name`, with its content ([`FileContentRow`]),
/// in one statement; `None` unless the link exists, the file is live and so named, and its owner
/// is active.
pub async fn source_file_content(db: &Db, id: ObjectId, name: &str) -> Result<Option<FileContentRow>, DbError> {
    let sql = format!(
        "SELECT o.name AS object_name, o.updated_at AS object_updated_at, {}
         FROM source_links s JOIN objects o ON o.id = s.object_id JOIN users u ON u.id = o.owner_id
         JOIN physical_files b ON b.id = o.physical_file_id JOIN policies p ON p.id = b.policy_id
         WHERE s.object_id = $1 AND o.name = $2 AND o.trashed_at IS NULL AND o.kind = 'file' AND u.status = 'ACTIVE'",
        super::blobs::with_policy_columns()
    );
    db.read_row(&sql, &[Arg::Text(&id.to_string()), Arg::Text(name)], decode_file_content).await
}

fn decode_file_content(row: &dyn Values) -> Result<FileContentRow, DbError> {
    let (blob, policy) = super::blobs::with_policy_of(row)?;
    Ok(FileContentRow { name: row.text("object_name")?, updated_at: row.int("object_updated_at")?, blob, policy })
}

// ---- metadata ----

pub async fn metadata(db: &Db, object_id: ObjectId) -> Result<Vec<(String, String, String)>, DbError> {
    Ok(sqlx::query_as(
        "SELECT namespace, name, value FROM object_metadata WHERE object_id = $1 ORDER BY namespace, name",
    )
    .bind(object_id)
    .fetch_all(db.reader())
    .await?)
}

/// The SQL of [`metadata_of_children`] (`$1` the folder, `$2` the namespace).
///
/// The order is the listing index's, so SQLite finds the children's ids in that index alone.
/// Without it, SQLite chose the name index, which holds no ids, and read every child's row for
/// its id: for 10,000 children as many page reads as the listing itself (~1,600), against ~590
/// through the listing index (measured with SQLite 3.51; a test asserts the plan).
const METADATA_OF_CHILDREN: &str = "SELECT m.object_id, m.name, m.value FROM objects o
     JOIN object_metadata m ON m.object_id = o.id AND m.namespace = $2
     WHERE o.parent_id = $1 AND o.trashed_at IS NULL ORDER BY o.kind DESC, o.name";

/// `(object_id, name, value)` of one namespace for every live child of `parent_id`.
pub async fn metadata_of_children(
    db: &Db,
    parent_id: ObjectId,
    namespace: &str,
) -> Result<Vec<(ObjectId, String, String)>, DbError> {
    Ok(sqlx::query_as(METADATA_OF_CHILDREN).bind(parent_id).bind(namespace).fetch_all(db.reader()).await?)
}

pub async fn set_metadata(
    conn: &mut Conn,
    object_id: ObjectId,
    namespace: &str,
    name: &str,
    value: Option<&str>,
) -> Result<(), DbError> {
    match value {
        Some(value) => {
            sqlx::query(
                "INSERT INTO object_metadata (object_id, namespace, name, value) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (object_id, namespace, name) DO UPDATE SET value = excluded.value",
            )
            .bind(object_id)
            .bind(namespace)
            .bind(name)
            .bind(value)
            .execute(conn)
            .await?;
        }
        None => {
            sqlx::query("DELETE FROM object_metadata WHERE object_id = $1 AND namespace = $2 AND name = $3")
                .bind(object_id)
                .bind(namespace)
                .bind(name)
                .execute(conn)
                .await?;
        }
    }
    Ok(())
}

/// Which files an administrator lists: every field set must match.
#[derive(Debug, Default)]
pub struct FileFilter<'a> {
    pub owner_id: Option<UserId>,
    /// Case-insensitive (ASCII) substring of the name.
    pub name_contains: Option<&'a str>,
    pub policy_id: Option<PolicyId>,
    pub min_size: Option<i64>,
    pub max_size: Option<i64>,
}

/// One page of every user's files not in the trash matching `filter`, newest first, and how
/// many match.
pub async fn files_page(
    db: &Db,
    filter: &FileFilter<'_>,
    offset: i64,
    limit: i64,
) -> Result<(Vec<ObjectRow>, i64), DbError> {
    let mut clause = super::Where::new();
    clause.and("owner_id = {}", filter.owner_id.map(|id| id.to_string()));
    clause.and(
        "LOWER(name) LIKE {} ESCAPE '\\'",
        filter.name_contains.map(|text| super::like_pattern(&text.to_lowercase())),
    );
    clause.and("policy_id = {}", filter.policy_id.map(|id| id.to_string()));
    clause.and("size >= CAST({} AS BIGINT)", filter.min_size.map(|n| n.to_string()));
    clause.and("size <= CAST({} AS BIGINT)", filter.max_size.map(|n| n.to_string()));
    let extra = " AND kind = 'file' AND trashed_at IS NULL";
    clause.page(db, (COLUMNS, "objects", extra), "created_at DESC, id", (offset, limit)).await
}

/// Whether `object_id` is `ancestor_id` or lies below it.
pub async fn is_within(db: &Db, object_id: ObjectId, ancestor_id: ObjectId) -> Result<bool, DbError> {
    let (found,): (i64,) = sqlx::query_as(
        "WITH RECURSIVE chain(id, parent_id) AS (
             SELECT id, parent_id FROM objects WHERE id = $1
             UNION ALL
             SELECT o.id, o.parent_id FROM objects o JOIN chain c ON o.id = c.parent_id
         )
         SELECT COUNT(*) FROM chain WHERE id = $2",
    )
    .bind(object_id)
    .bind(ancestor_id)
    .fetch_one(db.reader())
    .await?;
    Ok(found > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan SQLite makes for `sql` on the schema of a new master database.
    async fn sqlite_plan(sql: &str) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nubo.db");
        let db = Db::connect(&format!("sqlite://{}?mode=rwc", path.display()), 2).await.unwrap();
        db.migrate().await.unwrap();
        db.close().await;
        let conn = rusqlite::Connection::open(&path).unwrap();
        let mut plan = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        // Two arguments: their values do not change the plan.
        let steps = plan.query_map(["parent", "dav"], |row| row.get::<_, String>(3)).unwrap();
        steps.map(Result::unwrap).collect()
    }

    #[tokio::test]
    async fn the_children_s_properties_are_found_through_the_listing_index_not_the_children_s_rows() {
        let plan = sqlite_plan(METADATA_OF_CHILDREN).await;
        assert!(plan.iter().any(|step| step.contains("USING INDEX objects_listing")), "{plan:?}");
        assert!(!plan.iter().any(|step| step.contains("objects_live_name")), "{plan:?}");
        assert!(!plan.iter().any(|step| step.contains("TEMP B-TREE")), "no sort: {plan:?}");
    }
}

/// Up to `limit` objects whose search key was never written (rows from before keys existed).
pub async fn without_search_key(db: &Db, limit: i64) -> Result<Vec<(ObjectId, String)>, DbError> {
    Ok(sqlx::query_as("SELECT id, name FROM objects WHERE name_key IS NULL LIMIT $1")
        .bind(limit)
        .fetch_all(db.reader())
        .await?)
}

/// Writes the search keys of objects, in one transaction.
pub async fn set_search_keys(db: &Db, keys: &[(ObjectId, String)]) -> Result<(), DbError> {
    let mut tx = db.begin().await?;
    for (id, key) in keys {
        sqlx::query("UPDATE objects SET name_key = $2 WHERE id = $1")
            .bind(*id)
            .bind(key.as_str())
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// What a search looks for among one owner's live objects (the root excepted). Patterns are
/// lower-case `LIKE` patterns over search keys (`domain::object::search_key`), `\` escaping.
#[derive(Debug, Default)]
pub struct SearchFilter {
    /// The key contains this (already a `%...%` pattern).
    pub pattern: Option<String>,
    pub kind: Option<ObjectKind>,
    /// Linked to this manual tag.
    pub manual_tag: Option<uuid::Uuid>,
    /// A file whose key matches any of these (an automatic tag's rule).
    pub any_of: Option<Vec<String>>,
    /// Somewhere below this folder.
    pub under: Option<ObjectId>,
}

/// One page of `owner_id`'s live objects matching `filter`, by search key, and how many match
/// in all. The page's ids are read off the `objects_search` index alone (in its order, testing
/// the key on each entry, stopping at the page's end: no table row is read for an entry that
/// does not match), then their rows by id. On PostgreSQL a trigram index, where the `pg_trgm`
/// extension could be enabled, finds the matches of a text of three or more characters.
pub async fn search(
    db: &Db,
    owner_id: UserId,
    filter: &SearchFilter,
    (offset, limit): (i64, i64),
) -> Result<(Vec<ObjectRow>, i64), DbError> {
    let mut clause = Where::new();
    clause.and("owner_id = {}", Some(owner_id.to_string()));
    clause.and("name_key LIKE {} ESCAPE '\\'", filter.pattern.clone());
    clause.and("kind = {}", filter.kind.map(|kind| kind.as_str().to_owned()));
    clause.and("id IN (SELECT object_id FROM object_tags WHERE tag_id = {})", filter.manual_tag.map(|t| t.to_string()));
    if let Some(patterns) = &filter.any_of {
        clause.and("kind = {}", Some(ObjectKind::File.as_str().to_owned()));
        clause.and_any("name_key LIKE {} ESCAPE '\\'", patterns);
    }
    // The folders of the subtree, walked down the listing index, one folder's subfolders at a
    // time (SQLite keeps a CROSS JOIN's order); their children are the matches.
    clause.and(
        "parent_id IN (WITH RECURSIVE below(id) AS (
             SELECT CAST({} AS TEXT)
             UNION ALL
             SELECT o.id FROM below b CROSS JOIN objects o
             WHERE o.parent_id = b.id AND o.kind = 'folder' AND o.trashed_at IS NULL
         ) SELECT id FROM below)",
        filter.under.map(|folder| folder.to_string()),
    );
    // The root is the one object with an empty name: excluded on the index's own column.
    let extra = " AND trashed_at IS NULL AND name_key <> ''";
    let (ids, count): (Vec<(ObjectId,)>, i64) =
        clause.page(db, ("id", "objects", extra), "name_key, kind, id", (offset, limit)).await?;
    let ids: Vec<ObjectId> = ids.into_iter().map(|(id,)| id).collect();
    let order: std::collections::HashMap<ObjectId, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut rows = rows_by_ids(db, &ids).await?;
    rows.sort_by_key(|row| order.get(&row.id).copied());
    Ok((rows, count))
}

/// The rows of `ids` (those that exist), in no particular order.
pub async fn rows_by_ids(db: &Db, ids: &[ObjectId]) -> Result<Vec<ObjectRow>, DbError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let placeholders = super::placeholders(ids.len());
    let sql = format!("SELECT {COLUMNS} FROM objects WHERE id IN ({placeholders})");
    let mut query = sqlx::query_as::<_, ObjectRow>(&sql);
    for id in ids {
        query = query.bind(*id);
    }
    Ok(query.fetch_all(db.reader()).await?)
}

/// The names from the root down to each of `ids` (the root's own, empty, first), by id; an id
/// that names no object is left out.
pub async fn paths_names(db: &Db, ids: &[ObjectId]) -> Result<Vec<(ObjectId, Vec<String>)>, DbError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let placeholders = super::placeholders(ids.len());
    let sql = format!(
        "WITH RECURSIVE chain(start, parent_id, name, depth) AS (
             SELECT id, parent_id, name, 0 FROM objects WHERE id IN ({placeholders})
             UNION ALL
             SELECT c.start, o.parent_id, o.name, c.depth + 1 FROM objects o JOIN chain c ON o.id = c.parent_id
         )
         SELECT start, name FROM chain ORDER BY start, depth DESC"
    );
    let mut query = sqlx::query_as::<_, (ObjectId, String)>(&sql);
    for id in ids {
        query = query.bind(*id);
    }
    let mut paths: Vec<(ObjectId, Vec<String>)> = Vec::with_capacity(ids.len());
    for (start, name) in query.fetch_all(db.reader()).await? {
        match paths.last_mut() {
            Some((id, names)) if *id == start => names.push(name),
            _ => paths.push((start, vec![name])),
        }
    }
    Ok(paths)
}
