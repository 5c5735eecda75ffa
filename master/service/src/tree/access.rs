//! Who may reach which object: the one decision (`grant`) and the handles that carry it.
//! Service functions that read or change one object take a [`Readable`] or [`Writable`] made
//! here, so a function that forgot to ask does not compile. An object the caller may not reach
//! is answered as if it did not exist (404): a stranger learns nothing about it. This module
//! reads objects but never changes them.

use crate::context::Context;
use nubo_model::db::objects::ObjectRow;
use nubo_model::db::{self, Conn, Db};
use nubo_model::domain::ids::{ObjectId, UserId};
use uuid::Uuid;

use crate::error::{ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::tree::files::PathEntry;

/// Why the caller may reach an object. WOPI tokens and WebDAV accounts limited to a folder are
/// to become variants of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// The caller (this user) owns the object.
    Owner(UserId),
    /// A visitor reaches the object through this share (reading only): the shared object or
    /// something below it. The share's own state (expiry, password, limits) is
    /// `service::sharing::shares`' to check before asking.
    Share(Uuid),
}

/// What the caller means to do with the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Read,
    Write,
}

/// The state an operation needs the object in; any other answers as [`not_found`] (or a
/// conflict for a file where a folder is needed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// In the trash or not.
    Any,
    /// Not in the trash.
    Live,
    /// A folder not in the trash.
    Folder,
    /// An object whose deletion put things in the trash (restore, purge).
    TrashRoot,
}

/// An object the caller may read, in the state it was asked for when it was read.
#[derive(Debug, Clone)]
pub struct Readable {
    row: ObjectRow,
    grant: Grant,
}

impl Readable {
    pub fn row(&self) -> &ObjectRow {
        &self.row
    }

    pub fn grant(&self) -> Grant {
        self.grant
    }

    pub fn id(&self) -> ObjectId {
        self.row.id
    }
}

/// An object the caller may change (and so read).
#[derive(Debug, Clone)]
pub struct Writable(Readable);

impl Writable {
    pub fn row(&self) -> &ObjectRow {
        &self.0.row
    }

    pub fn into_row(self) -> ObjectRow {
        self.0.row
    }

    pub fn as_readable(&self) -> &Readable {
        &self.0
    }
}

pub fn not_found() -> ServiceError {
    ServiceError::not_found(codes::OBJECT_NOT_FOUND, "no such file or folder")
}

/// The one place that decides whether `caller` may `need` an object of `owner`, and through
/// which grant; `None` refuses.
fn grant(caller: UserId, owner: UserId, need: Need) -> Option<Grant> {
    match need {
        Need::Read | Need::Write => (owner == caller).then_some(Grant::Owner(caller)),
    }
}

/// `row` (as read by id) for `caller`, if the grant and the state allow `need`.
fn admit(caller: UserId, row: Option<ObjectRow>, need: Need, reach: Reach) -> ServiceResult<Readable> {
    let row = row.ok_or_else(not_found)?;
    let grant = grant(caller, row.owner_id, need).ok_or_else(not_found)?;
    match reach {
        Reach::Any => {}
        Reach::Live | Reach::Folder if row.trashed_at.is_some() => return Err(not_found()),
        Reach::Live => {}
        Reach::Folder if !row.is_folder() => {
            return Err(ServiceError::conflict(codes::OBJECT_NOT_A_FOLDER, "the object is a file, not a folder"));
        }
        Reach::Folder => {}
        Reach::TrashRoot if row.trash_root_id != Some(row.id) => {
            return Err(ServiceError::not_found(codes::TRASH_NOT_FOUND, "the object is not in the trash"));
        }
        Reach::TrashRoot => {}
    }
    Ok(Readable { row, grant })
}

/// Object `id` for reading by `caller`, in the state `reach` asks for.
pub async fn readable(ctx: &Context, caller: UserId, id: ObjectId, reach: Reach) -> ServiceResult<Readable> {
    let db = ctx.db();
    admit(caller, db::objects::find_by_id(db, id).await?, Need::Read, reach)
}

/// Object `id` for changing by `caller`, in the state `reach` asks for.
pub async fn writable(ctx: &Context, caller: UserId, id: ObjectId, reach: Reach) -> ServiceResult<Writable> {
    let db = ctx.db();
    admit(caller, db::objects::find_by_id(db, id).await?, Need::Write, reach).map(Writable)
}

/// Object `id` for reading through share `share_id`, which opens `root` of `owner`: only `root`
/// itself or what lies below it, not in the trash. Anything else is missing.
pub async fn readable_in_share(
    db: &Db,
    share_id: Uuid,
    (owner, root): (UserId, ObjectId),
    id: ObjectId,
) -> ServiceResult<Readable> {
    let row = shared_row(db::objects::find_by_id(db, id).await?, owner)?;
    if row.id != root && !db::objects::is_within(db, row.id, root).await? {
        return Err(not_found());
    }
    Ok(Readable { row, grant: Grant::Share(share_id) })
}

/// As [`readable_in_share`], read inside the caller's transaction.
pub async fn readable_in_share_in(
    conn: &mut Conn,
    share_id: Uuid,
    (owner, root): (UserId, ObjectId),
    id: ObjectId,
) -> ServiceResult<Readable> {
    let row = shared_row(db::objects::find_by_id_in(conn, id).await?, owner)?;
    if row.id != root && !db::objects::ancestor_ids(conn, row.id).await?.contains(&root) {
        return Err(not_found());
    }
    Ok(Readable { row, grant: Grant::Share(share_id) })
}

/// `row` when it is `owner`'s and not in the trash: what a share of theirs may show.
fn shared_row(row: Option<ObjectRow>, owner: UserId) -> ServiceResult<ObjectRow> {
    row.filter(|row| row.owner_id == owner && row.trashed_at.is_none()).ok_or_else(not_found)
}

/// As [`writable`], read inside the caller's transaction so the answer holds until it commits.
pub async fn writable_in(conn: &mut Conn, caller: UserId, id: ObjectId, reach: Reach) -> ServiceResult<Writable> {
    admit(caller, db::objects::find_by_id_in(conn, id).await?, Need::Write, reach).map(Writable)
}

/// The id of `entry` (found by a path walk) when `caller` may read it and it is a folder: the
/// walk continues from it without reading it again.
pub(crate) fn entry_folder(caller: UserId, entry: &PathEntry) -> ServiceResult<ObjectId> {
    entry_readable(caller, entry)?;
    if !entry.is_folder {
        return Err(ServiceError::conflict(codes::OBJECT_NOT_A_FOLDER, "the object is a file, not a folder"));
    }
    Ok(entry.id.into())
}

/// Checks that `caller` may read `entry` (found by a path walk), without reading it again.
pub(crate) fn entry_readable(caller: UserId, entry: &PathEntry) -> ServiceResult<()> {
    match entry.grant() {
        Grant::Owner(owner) => grant(caller, owner, Need::Read).map(|_| ()).ok_or_else(not_found),
        Grant::Share(_) => Err(not_found()),
    }
}

#[cfg(test)]
mod tests {
    use nubo_model::domain::object::ObjectKind;

    use super::*;

    fn row_of(owner: UserId) -> ObjectRow {
        ObjectRow {
            id: ObjectId::random(),
            owner_id: owner,
            parent_id: None,
            name: "a".to_owned(),
            kind: ObjectKind::File,
            policy_id: None,
            physical_file_id: None,
            size: 0,
            trashed_at: None,
            trash_root_id: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn the_owner_gets_a_handle_through_the_owner_grant() {
        let owner = UserId::random();
        let handle = admit(owner, Some(row_of(owner)), Need::Write, Reach::Live).unwrap();
        assert_eq!(handle.grant(), Grant::Owner(owner));
    }

    #[test]
    fn a_stranger_s_object_is_answered_as_missing() {
        let stranger = UserId::random();
        let refusal = admit(stranger, Some(row_of(UserId::random())), Need::Read, Reach::Any).unwrap_err();
        let missing = admit(stranger, None, Need::Read, Reach::Any).unwrap_err();
        assert_eq!((refusal.kind, refusal.code), (missing.kind, missing.code));
    }

    #[test]
    fn a_trashed_object_is_missing_unless_any_state_will_do() {
        let owner = UserId::random();
        let trashed = ObjectRow { trashed_at: Some(1), ..row_of(owner) };
        assert!(admit(owner, Some(trashed.clone()), Need::Read, Reach::Any).is_ok());
        let refusal = admit(owner, Some(trashed), Need::Read, Reach::Live).unwrap_err();
        assert_eq!(refusal.code, codes::OBJECT_NOT_FOUND);
    }
}
