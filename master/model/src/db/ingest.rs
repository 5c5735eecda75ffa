//! The one transaction in which content becomes a file: the owner is charged, the content takes
//! a reference to the policy's blob of the same content (or its new blob is added), the file row
//! is inserted or pointed at the new content, and the caller's bookkeeping (an upload session
//! ended, a node's report or a fetch settled) is recorded, all or nothing. One sequence of
//! steps ([`sequence`]) runs on either executor: on SQLite on the calling thread
//! ([`super::inline`]), on PostgreSQL statement by statement.

use super::objects::{INSERT, SET_CONTENT};
use super::{Arg, Conn, Db, DbError, Values, bound};
use crate::domain::ids::{ObjectId, PolicyId, UserId};
use crate::domain::object::{ObjectKind, search_key};
use crate::domain::time::Millis;

/// Where the content goes.
#[derive(Debug, Clone)]
pub enum Destination {
    /// A new file `name` in folder `parent_id`, with id `object_id`. A name taken in the folder
    /// fails the commit with a unique violation.
    NewFile { object_id: ObjectId, parent_id: ObjectId, name: String },
    /// New content for an existing file, replaced only while the file still has the blob and
    /// size the writer planned against: of two overlapping writes the second to finish is
    /// refused ([`Refusal::Changed`]) rather than releasing a reference it does not hold. With
    /// `keep_version` the old content becomes a version of the file (keeping its reference).
    Replace { object_id: ObjectId, old_blob_id: Option<String>, old_size: i64, keep_version: bool },
}

impl Destination {
    /// The file's id, new or replaced.
    pub fn object_id(&self) -> ObjectId {
        match self {
            Destination::NewFile { object_id, .. } | Destination::Replace { object_id, .. } => *object_id,
        }
    }
}

/// The content arriving: stored as blob `blob_id` at `storage_key`, or (`None`) not stored, so
/// it is committed only if the policy already holds a blob of the same content.
#[derive(Debug, Clone)]
pub struct Content {
    pub blob_id: String,
    pub policy_id: PolicyId,
    pub storage_key: Option<String>,
    pub size: i64,
    pub blake3: String,
    /// The server computed `blake3` over the stored bytes whole (not merged from chunk values):
    /// only such a blob receives other owners' content by de-duplication.
    pub hashed_whole: bool,
}

/// One statement of the caller's bookkeeping, committed with the file. `required`: when it
/// changes no row (someone else settled the same thing first), nothing is committed
/// ([`Refusal::Superseded`]).
#[derive(Debug, Clone)]
pub struct Step {
    pub sql: &'static str,
    pub args: Vec<StepArg>,
    pub required: bool,
}

/// An argument of a [`Step`]: a value, or whether the file keeps the new blob (1) or refers to
/// an older one of the same content (0), known only inside the transaction.
#[derive(Debug, Clone)]
pub enum StepArg {
    Text(String),
    OptText(Option<String>),
    Int(i64),
    KeepsNewBlob,
}

/// Everything one commit needs, owned: a commit may run in a task of its own.
#[derive(Debug, Clone)]
pub struct FileCommit {
    pub owner_id: UserId,
    pub destination: Destination,
    pub content: Content,
    /// Bytes added to the owner's used storage: the size (or growth) less what was reserved
    /// before the bytes arrived (negative gives the excess of a reservation back).
    pub charge: i64,
    /// The owner's capacity: a positive charge must fit below it.
    pub capacity: i64,
    /// Bookkeeping run first, before the content's blob row is added (see [`Step`]; `required`
    /// is not consulted, and [`StepArg::KeepsNewBlob`] is not known yet and reads as 0).
    pub first_steps: Vec<Step>,
    pub steps: Vec<Step>,
}

/// A commit that happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The blob the file refers to: the new one, or (`duplicate`) an older one of the same
    /// content, whose new bytes are then not needed.
    pub blob_id: String,
    pub duplicate: bool,
    /// The replaced content's blob, when the file held its last reference.
    pub released: Option<String>,
}

/// Why nothing was committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The charge does not fit the owner's capacity.
    QuotaExceeded,
    /// The replaced file is gone, in the trash, or another write changed its content first.
    Changed,
    /// Nothing was stored and the policy holds no live blob of the same content.
    NotReferenced,
    /// A required bookkeeping step changed no row.
    Superseded,
}

/// Runs `commit` in one transaction: [`sequence`] on either executor, committed when it goes
/// ahead and rolled back when it refuses.
pub async fn commit(db: &Db, commit: &FileCommit, now: Millis) -> Result<Result<Committed, Refusal>, DbError> {
    if let Some(inline) = db.inline() {
        return inline.write_or_refuse(|conn| at_once(sequence(&mut Inline(conn), commit, now))).await;
    }
    let mut tx = db.begin().await?;
    let outcome = sequence(&mut Statements(&mut tx), commit, now).await?;
    if outcome.is_ok() {
        tx.commit().await?;
    }
    // A refusal drops (rolls back) the transaction.
    Ok(outcome)
}

/// The replaced file's blob, size and content time, read inside the transaction (`$1` the
/// file); no row when the file is gone or in the trash.
const REPLACED_STATE: &str =
    "SELECT physical_file_id, size, updated_at FROM objects WHERE id = $1 AND trashed_at IS NULL";

/// Whether a replacement may go ahead on the state read under the transaction's lock.
fn still_planned(destination: &Destination, state: Option<&(Option<String>, i64, Millis)>) -> bool {
    let Destination::Replace { old_blob_id, old_size, .. } = destination else { return true };
    state.is_some_and(|(blob, size, _)| blob == old_blob_id && size == old_size)
}

/// The version a replacement keeps: the old blob (which keeps its reference), its size and the
/// time it was written; `None` when the old content is released instead.
fn kept_version(
    destination: &Destination,
    state: Option<&(Option<String>, i64, Millis)>,
) -> Option<(String, i64, Millis)> {
    let Destination::Replace { keep_version: true, old_blob_id: Some(blob), old_size, .. } = destination else {
        return None;
    };
    Some((blob.clone(), *old_size, state.map_or(0, |(_, _, at)| *at)))
}

impl Step {
    fn args(&self, keeps_new_blob: bool) -> Vec<Arg<'_>> {
        self.args
            .iter()
            .map(|arg| match arg {
                StepArg::Text(text) => Arg::Text(text),
                StepArg::OptText(text) => Arg::OptText(text.as_deref()),
                StepArg::Int(number) => Arg::Int(*number),
                StepArg::KeepsNewBlob => Arg::Int(i64::from(keeps_new_blob)),
            })
            .collect()
    }
}

/// What [`sequence`] needs of a transaction: run a statement, read a row. SQLite's runs on the
/// calling thread inside `BEGIN IMMEDIATE` ([`super::inline`]), PostgreSQL's over the pool's
/// connection; each is the other's twin, statement for statement.
trait Executor {
    /// Appended to the read of the replaced file's row: PostgreSQL locks that row until the
    /// commit; SQLite's `BEGIN IMMEDIATE` already holds the whole database.
    const LOCK_ROW: &'static str;

    /// Runs a statement; answers how many rows it changed.
    async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64, DbError>;

    /// Runs `sql` and decodes its first row, if any.
    async fn query_row<T>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        decode: impl FnOnce(&dyn Values) -> Result<T, DbError>,
    ) -> Result<Option<T>, DbError>;
}

/// SQLite, on the calling thread: its futures are ready when first polled ([`at_once`]).
struct Inline<'c>(&'c rusqlite::Connection);

impl Executor for Inline<'_> {
    const LOCK_ROW: &'static str = "";

    async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64, DbError> {
        Ok(super::inline::execute(self.0, sql, args)? as u64)
    }

    async fn query_row<T>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        decode: impl FnOnce(&dyn Values) -> Result<T, DbError>,
    ) -> Result<Option<T>, DbError> {
        super::inline::query_row(self.0, sql, args, decode)
    }
}

/// PostgreSQL, one statement at a time in the caller's transaction.
struct Statements<'t>(&'t mut Conn);

impl Executor for Statements<'_> {
    const LOCK_ROW: &'static str = " FOR UPDATE";

    async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64, DbError> {
        Ok(bound(sqlx::query(sql), args).execute(&mut *self.0).await?.rows_affected())
    }

    async fn query_row<T>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        decode: impl FnOnce(&dyn Values) -> Result<T, DbError>,
    ) -> Result<Option<T>, DbError> {
        let row = bound(sqlx::query(sql), args).fetch_optional(&mut *self.0).await?;
        row.map(|row| decode(&row)).transpose()
    }
}

/// Runs a future that never waits (the [`Inline`] executor's) to its end on this thread.
fn at_once<F: Future>(work: F) -> F::Output {
    let mut work = std::pin::pin!(work);
    match work.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => unreachable!("inline statements run to their end when called"),
    }
}

/// The blob new content is to refer to, found before anything of the content is written.
enum Referent<'a> {
    /// The policy's oldest live blob of the same content (its id): the new bytes are not needed.
    Older(String),
    /// The new blob, stored at this key.
    Stored(&'a str),
}

/// The ingest transaction, step by step, on either executor: what it reads stays true until it
/// commits (SQLite's write lock, PostgreSQL's row lock on the replaced file); a refusal leaves
/// the caller to roll back whatever was written before it.
async fn sequence<E: Executor>(
    tx: &mut E,
    commit: &FileCommit,
    now: Millis,
) -> Result<Result<Committed, Refusal>, DbError> {
    let content = &commit.content;
    // The ids as the text they are stored as, for the statements' arguments.
    let (object_id, policy_id) = (commit.destination.object_id().to_string(), content.policy_id.to_string());
    let owner_id = commit.owner_id.to_string();
    let mut kept = None;
    if let Destination::Replace { .. } = &commit.destination {
        let read = format!("{REPLACED_STATE}{}", E::LOCK_ROW);
        let state = tx
            .query_row(&read, &[Arg::Text(&object_id)], |row| {
                Ok((row.opt_text("physical_file_id")?, row.int("size")?, row.int("updated_at")?))
            })
            .await?;
        if !still_planned(&commit.destination, state.as_ref()) {
            return Ok(Err(Refusal::Changed));
        }
        kept = kept_version(&commit.destination, state.as_ref());
    }
    for step in &commit.first_steps {
        tx.execute(step.sql, &step.args(false)).await?;
    }
    let same = [Arg::Text(&policy_id), Arg::Text(&content.blake3), Arg::Int(content.size), Arg::Text(&owner_id)];
    let older = tx.query_row(super::blobs::SAME_CONTENT_ID, &same, |row| row.text("id")).await?;
    let referent = match (older, content.storage_key.as_deref()) {
        (Some(id), _) => Referent::Older(id),
        (None, Some(key)) => Referent::Stored(key),
        (None, None) => return Ok(Err(Refusal::NotReferenced)),
    };
    if let Some((sql, args, must_change)) = super::users::charge_statement(&owner_id, commit.charge, commit.capacity)
        && tx.execute(sql, &args).await? == 0
        && must_change
    {
        return Ok(Err(Refusal::QuotaExceeded));
    }
    let blob_id = match referent {
        Referent::Older(id) => {
            tx.query_row(super::blobs::ADD_REFS, &[Arg::Text(&id), Arg::Int(1)], |row| row.int("ref_count")).await?;
            id
        }
        Referent::Stored(key) => {
            let args = [
                Arg::Text(&content.blob_id),
                Arg::Text(&policy_id),
                Arg::Text(key),
                Arg::Int(content.size),
                Arg::Text(&content.blake3),
                Arg::Int(1),
                Arg::Int(now),
                Arg::Int(i64::from(content.hashed_whole)),
            ];
            tx.execute(super::blobs::INSERT, &args).await?;
            content.blob_id.clone()
        }
    };
    let old_refs = match &commit.destination {
        Destination::NewFile { parent_id, name, .. } => {
            let parent_id = parent_id.to_string();
            let name_key = search_key(name);
            let args = [
                Arg::Text(&object_id),
                Arg::Text(&owner_id),
                Arg::OptText(Some(&parent_id)),
                Arg::Text(name),
                Arg::Text(ObjectKind::File.as_str()),
                Arg::OptText(Some(&policy_id)),
                Arg::Text(&blob_id),
                Arg::Int(content.size),
                Arg::Int(now),
                Arg::Text(&name_key),
            ];
            tx.execute(INSERT, &args).await?;
            None
        }
        Destination::Replace { old_blob_id, .. } => {
            let args = [Arg::Text(&object_id), Arg::Text(&blob_id), Arg::Int(content.size), Arg::Int(now)];
            tx.execute(SET_CONTENT, &args).await?;
            match (kept, old_blob_id.as_deref()) {
                (Some((old, size, written)), _) => {
                    let id = crate::domain::object::new_id().to_string();
                    let args = [
                        Arg::Text(&id),
                        Arg::Text(&object_id),
                        Arg::Text(&old),
                        Arg::Int(size),
                        Arg::Int(written),
                        Arg::Int(now),
                    ];
                    tx.execute(super::versions::INSERT, &args).await?;
                    None
                }
                (None, Some(old)) => {
                    let args = [Arg::Text(old), Arg::Int(-1)];
                    tx.query_row(super::blobs::ADD_REFS, &args, |row| row.int("ref_count")).await?
                }
                (None, None) => None,
            }
        }
    };
    let keeps_new_blob = blob_id == content.blob_id;
    for step in &commit.steps {
        if tx.execute(step.sql, &step.args(keeps_new_blob)).await? == 0 && step.required {
            return Ok(Err(Refusal::Superseded));
        }
    }
    Ok(Ok(committed(commit, blob_id, old_refs)))
}

/// What a commit that went ahead answers: the blob the file refers to, and the replaced blob
/// when its last reference went (`old_refs` its count now).
fn committed(commit: &FileCommit, blob_id: String, old_refs: Option<i64>) -> Committed {
    let released = match &commit.destination {
        Destination::Replace { old_blob_id: Some(old), .. } if old_refs == Some(0) => Some(old.clone()),
        _ => None,
    };
    Committed { duplicate: blob_id != commit.content.blob_id, blob_id, released }
}
