//! Bytes in outside upload sessions: a streamed body becomes a new file or a file's new
//! content (WebDAV `PUT` through a [`Write`], `PATCH /file/content` through
//! [`replace_content`]), with the policy's limits and the quota enforced before and while the
//! bytes arrive, and the file committed by [`ingest`].

use bytes::Bytes;
use nubo_common::hash::StreamHasher;
use nubo_common::storage::{ByteStream, StorageError, StorageKey};
use nubo_model::db::objects::ObjectRow;
use nubo_model::db::policies::PolicyRow;
use nubo_model::db::{self, DbError};
use nubo_model::domain::activity::{Action, TargetKind};
use nubo_model::domain::ids::{GroupId, ObjectId, UserId};
use nubo_model::domain::naming::{self, NamingContext};
use nubo_model::domain::object::ObjectName;
use nubo_model::domain::time::{Millis, now_ms};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::audit::activity::{self, Activity};
use crate::content::downloads::expect_file;
use crate::content::ingest::{self, Charge, Hold, Ingested, Plan, StagedBlob};
use crate::content::uploads::check_max_size;
use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::storage::policies;
use crate::tree::access::{self, Reach};
use crate::tree::files::{self, ObjectView, quota_exceeded};

/// Declared lengths up to this are not reserved against the quota before the bytes arrive.
const RESERVE_ABOVE: u64 = 1024 * 1024;

/// Replaces a file's content with a streamed body. The policy's `max_size` is enforced before
/// (declared length) and while bytes arrive; the quota is settled by the difference in size;
/// the old blob loses a reference (and is deleted when it was the last). Until the new content
/// is complete the old one stays in place and readable.
pub async fn replace_content(
    ctx: &Context,
    owner: UserId,
    object_id: ObjectId,
    content_length: Option<u64>,
    body: ByteStream,
) -> ServiceResult<ObjectView> {
    let db = ctx.db();
    let file = access::writable(ctx, owner, object_id, Reach::Live).await?;
    let row = file.row().clone();
    expect_file(&row)?;
    let policy = policy_of(ctx, &row).await?;
    let usage = Usage::of(db, owner).await?;
    replace_row(ctx, owner, &row, &policy, usage, content_length, body).await?;
    files::view_now(db, file.as_readable()).await
}

/// Creates the file `name` in the caller's folder `folder_id` from a streamed body, in one
/// request and one commit (`POST /file/content`): the cheapest way to create a small file. It
/// goes to the policy of the caller's group for new files; a name taken answers 409 before a
/// byte is stored; the policy's `max_size` (413) and the quota (507) are checked before
/// (declared length) and while the bytes arrive. Not resumable: large files go through upload
/// sessions.
pub async fn create_file(
    ctx: &Context,
    owner: UserId,
    group_id: GroupId,
    (folder_id, name): (ObjectId, &str),
    declared: Option<u64>,
    body: ByteStream,
) -> ServiceResult<ObjectView> {
    let db = ctx.db();
    let folder = access::writable(ctx, owner, folder_id, Reach::Folder).await?;
    let name = ObjectName::parse(name).map_err(|why| ServiceError::validation("name", why))?;
    let (existing, facts) = tokio::try_join!(
        async { Ok(db::objects::child_by_name(db, folder.row().id, name.as_str()).await?) },
        new_file_facts(ctx, owner, group_id)
    )?;
    if existing.is_some() {
        return Err(files::name_taken());
    }
    let plan = PlannedWrite {
        owner,
        parent: folder.row().id,
        name,
        existing: None,
        policy: *facts.policy,
        usage: facts.usage,
        declared,
    };
    plan.admit()?;
    let written = plan.write(ctx, body).await?;
    let row = db::objects::find_by_id(db, written.id.into()).await?.ok_or_else(files::not_found)?;
    files::view_of(db, &row).await
}

/// Creates the file `name` in the folder `parent`, or gives `replaced` new content, from content
/// the owner already holds on `policy` (a file of theirs with this `blake3` and `size`): no byte
/// moves, the quota is charged as for an upload. `None` when the owner holds no such content, it
/// went meanwhile, or the charge does not fit: the caller then has the bytes sent.
pub async fn claim_held_content(
    ctx: &Context,
    owner: UserId,
    (parent, name): (ObjectId, &ObjectName),
    replaced: Option<&ObjectRow>,
    policy: &PolicyRow,
    (size, blake3): (i64, &str),
) -> ServiceResult<Option<ObjectView>> {
    let db = ctx.db();
    if !db::blobs::owner_holds_content(db, owner, policy.id, blake3, size).await? {
        return Ok(None);
    }
    let usage = Usage::of(db, owner).await?;
    let growth = size - replaced.map_or(0, |row| usage.freed_by_replacing(row.size));
    let charge = Charge { amount: growth, capacity: usage.capacity };
    let plan = match replaced {
        Some(row) => recorded(Plan::replace(owner, row, charge, usage.keeps_versions), owner, &row.name, true),
        None => recorded(Plan::new_file(owner, parent, name.as_str(), charge), owner, name.as_str(), false),
    };
    let Some(file) = ingest::commit_held(ctx, policy.id, (size, blake3), plan).await? else {
        return Ok(None);
    };
    let row = db::objects::find_by_id(db, file.object_id).await?.ok_or_else(files::not_found)?;
    Ok(Some(files::view_of(db, &row).await?))
}

/// The policy a file's content is stored under.
async fn policy_of(ctx: &Context, row: &ObjectRow) -> ServiceResult<PolicyRow> {
    let policy_id = row.policy_id.ok_or_else(|| ServiceError::internal(anyhow::anyhow!("file without policy")))?;
    policies::find(ctx, policy_id).await
}

/// A user's used bytes and capacity, and whether the group keeps replaced content as versions,
/// read once per write.
#[derive(Debug, Clone, Copy)]
struct Usage {
    used: i64,
    capacity: i64,
    keeps_versions: bool,
}

impl Usage {
    async fn of(db: &db::Db, owner: UserId) -> ServiceResult<Self> {
        let (used, capacity, keeps_versions) = db::users::write_usage(db, owner, now_ms()).await?;
        Ok(Self { used, capacity, keeps_versions })
    }

    /// The bytes of a replaced content of `size` that come back to the owner: none when it is
    /// kept as a version (versions count against the quota).
    fn freed_by_replacing(&self, size: i64) -> i64 {
        if self.keeps_versions { 0 } else { size }
    }
}

/// What writing a new file needs to know besides its folder: the owner's usage and the policy
/// of the owner's group that new files go to. An overwrite needs the usage too, and the policy
/// when its file is stored under it.
pub struct NewFileFacts {
    usage: Usage,
    /// Boxed: a plan's caller holds the facts in an enum beside variants without them.
    policy: Box<PolicyRow>,
}

/// Reads the [`NewFileFacts`] of `owner` in group `group_id`, in one query. A caller that will
/// plan a write can read them while it looks up the folder (see [`Presence::KnownAbsent`]).
pub async fn new_file_facts(ctx: &Context, owner: UserId, group_id: GroupId) -> ServiceResult<NewFileFacts> {
    let (used, capacity, keeps_versions, policy) =
        db::users::usage_capacity_and_policy(ctx.db(), owner, group_id, now_ms()).await?;
    let policy = Box::new(policy.ok_or_else(policies::not_allowed)?);
    Ok(NewFileFacts { usage: Usage { used, capacity, keeps_versions }, policy })
}

/// New content for `row` (see [`replace_content`]); answers the new size and change time. The
/// old content becomes a version when the owner's group keeps versions; otherwise its blob, when
/// this was its last reference, is removed after the answer, as is a surplus copy of the new
/// content.
async fn replace_row(
    ctx: &Context,
    owner: UserId,
    row: &ObjectRow,
    policy: &PolicyRow,
    usage: Usage,
    content_length: Option<u64>,
    body: ByteStream,
) -> ServiceResult<(i64, Millis)> {
    let (staged, reserved) =
        stream_content(ctx, owner, policy, &row.name, row.size, usage, content_length, body).await?;
    let size = staged.size();
    let charge = Charge { amount: size - usage.freed_by_replacing(row.size) - reserved, capacity: usage.capacity };
    let plan = recorded(Plan::replace(owner, row, charge, usage.keeps_versions), owner, &row.name, true);
    let file = ingest::commit(ctx, staged, plan).await?.ok_or_else(no_bookkeeping)?;
    Ok((size, file.at))
}

/// `plan` recording its write in the activity log: one insert in the write's own commit.
fn recorded(plan: Plan, owner: UserId, name: &str, replaced: bool) -> Plan {
    let written = Activity::by(owner, Action::FileWrite).with("replaced", replaced);
    plan.with_step(|id| activity::step(written.on(TargetKind::Object, id, Some(name))))
}

/// A commit whose steps are all optional (the activity record) cannot be superseded.
fn no_bookkeeping() -> ServiceError {
    ServiceError::internal(anyhow::anyhow!("a write without bookkeeping was superseded"))
}

/// How many bytes a write may bring: the policy's `max_size` and the room the quota leaves
/// (the file's current size counts as room when it is replaced without keeping a version).
#[derive(Debug, Clone, Copy)]
struct ByteLimit {
    max_size: Option<u64>,
    room: u64,
}

impl ByteLimit {
    fn of(policy: &PolicyRow, usage: Usage, current_size: i64) -> Self {
        Self {
            max_size: (policy.max_size > 0).then_some(policy.max_size as u64),
            room: (usage.capacity - usage.used + usage.freed_by_replacing(current_size)).max(0) as u64,
        }
    }

    /// The most bytes a write may bring.
    pub fn bytes(&self) -> u64 {
        self.max_size.map_or(self.room, |max| max.min(self.room))
    }

    /// The refusal of a write that brought `written` bytes, more than [`ByteLimit::bytes`]:
    /// 413 when the policy's size limit is passed, 507 otherwise.
    pub fn refusal(&self, written: u64) -> ServiceError {
        let max_size = self.max_size.map_or(0, |max| max as i64);
        check_max_size(max_size, written as i64).err().unwrap_or_else(quota_exceeded)
    }
}

/// A write of the file `name` in a folder, checked and ready to take its body (WebDAV `PUT`):
/// a new file on the group's default policy, or new content for the existing file there.
struct PlannedWrite {
    owner: UserId,
    /// The folder's id.
    parent: ObjectId,
    name: ObjectName,
    existing: Option<ObjectRow>,
    policy: PolicyRow,
    usage: Usage,
    declared: Option<u64>,
}

/// What the caller of [`plan_write`] knows of the name it writes, with the [`NewFileFacts`] it
/// read while finding out (if any): a new file then needs no further read, an overwrite of a
/// file on the policy new files go to only the look-up of the file.
pub enum Presence {
    /// Nothing: the plan looks the name up.
    Unknown(Option<NewFileFacts>),
    /// This request found no live object by that name a moment ago, so the plan does not look
    /// again. One created since then makes the write end as a name clash, exactly as one
    /// created while the body arrives does.
    KnownAbsent(Option<NewFileFacts>),
}

/// Where a write goes: the file `name` in the caller's `folder` (an entry this service looked
/// up for the caller), a new file going to the policy of the caller's group; and what the
/// caller already found out about the name.
pub struct Target<'a> {
    pub owner: UserId,
    pub group_id: GroupId,
    pub folder: &'a files::PathEntry,
    pub name: &'a str,
    pub presence: Presence,
}

/// Plans writing `target` from a body of `declared` bytes (unknown for a chunked body). Refuses
/// a name taken by a folder; [`PlannedWrite::admit`] then says whether the size fits.
async fn plan_write(ctx: &Context, target: Target<'_>, declared: Option<u64>) -> ServiceResult<PlannedWrite> {
    let db = ctx.db();
    let Target { owner, group_id, folder, name, presence } = target;
    let parent = access::entry_folder(owner, folder)?;
    let name = ObjectName::parse(name).map_err(|why| ServiceError::validation("name", why))?;
    let (existing, facts) = match presence {
        Presence::KnownAbsent(facts) => (None, facts),
        Presence::Unknown(facts) => (db::objects::child_by_name(db, parent, name.as_str()).await?, facts),
    };
    let (usage, policy) = match (&existing, facts) {
        // An overwrite keeps its file's policy: usually the one new files go to, already read.
        (Some(row), Some(facts)) => {
            expect_file(row)?;
            let policy = match row.policy_id == Some(facts.policy.id) {
                true => *facts.policy,
                false => policy_of(ctx, row).await?,
            };
            (facts.usage, policy)
        }
        (Some(row), None) => {
            expect_file(row)?;
            tokio::try_join!(Usage::of(db, owner), policy_of(ctx, row))?
        }
        (None, Some(facts)) => (facts.usage, *facts.policy),
        (None, None) => {
            let facts = new_file_facts(ctx, owner, group_id).await?;
            (facts.usage, *facts.policy)
        }
    };
    Ok(PlannedWrite { owner, parent, name, existing, policy, usage, declared })
}

impl PlannedWrite {
    /// Whether the write replaces an existing file.
    pub fn replaces_a_file(&self) -> bool {
        self.existing.is_some()
    }

    /// How many bytes the write may bring; a caller that sees the body arrive can refuse the
    /// rest at once (the write itself enforces the same limit).
    pub fn byte_limit(&self) -> ByteLimit {
        ByteLimit::of(&self.policy, self.usage, self.existing.as_ref().map_or(0, |row| row.size))
    }

    /// Whether the write can be taken before any byte is read: the policy's `max_size` (413)
    /// first, then the room left in the quota (507), where a body of unknown length needs some
    /// room left at all. [`PlannedWrite::write`] enforces both again while the bytes arrive.
    pub fn admit(&self) -> ServiceResult<()> {
        let limit = self.byte_limit();
        match self.declared {
            Some(size) if size > limit.bytes() => Err(limit.refusal(size)),
            None if limit.room == 0 => Err(quota_exceeded()),
            _ => Ok(()),
        }
    }

    /// Streams the body in. Nothing is visible until every byte has arrived; a body that fails
    /// or is cut off leaves no file, no blob and no quota change (an existing file keeps its
    /// content). Answers the file as written.
    pub async fn write(self, ctx: &Context, body: ByteStream) -> ServiceResult<files::PathEntry> {
        if let Some(row) = &self.existing {
            let (size, now) = replace_row(ctx, self.owner, row, &self.policy, self.usage, self.declared, body).await?;
            let id = row.id.into();
            return Ok(files::PathEntry::with_content(self.owner, id, &row.name, size, row.created_at, now));
        }
        let (staged, reserved) =
            stream_content(ctx, self.owner, &self.policy, self.name.as_str(), 0, self.usage, self.declared, body)
                .await?;
        let size = staged.size();
        let plan = self.new_file(Charge { amount: size - reserved, capacity: self.usage.capacity });
        let file = ingest::commit(ctx, staged, plan).await?.ok_or_else(no_bookkeeping)?;
        Ok(self.written(&file))
    }

    /// Writes a body the caller held whole before the write began (a small one). When the
    /// policy already holds its content, the new file (or the file's new content) refers to that
    /// blob and no byte is stored again; anything else is written as by [`PlannedWrite::write`].
    pub async fn write_whole(self, ctx: &Context, pieces: Vec<Bytes>) -> ServiceResult<files::PathEntry> {
        if let Some(entry) = self.refer_to_held_content(ctx, &pieces).await? {
            return Ok(entry);
        }
        self.write(ctx, Box::pin(futures_util::stream::iter(pieces.into_iter().map(Ok)))).await
    }

    /// The file written, when the policy holds a live blob with the content of `pieces` and the
    /// owner has room for it; `None` when the bytes need storing (or refusing, which the write
    /// does with the usual answer).
    async fn refer_to_held_content(&self, ctx: &Context, pieces: &[Bytes]) -> ServiceResult<Option<files::PathEntry>> {
        let mut hasher = StreamHasher::new();
        for piece in pieces {
            hasher.update(piece);
        }
        if hasher.len() > self.byte_limit().bytes() {
            return Ok(None);
        }
        let (blake3, size) = (hasher.finalize(), hasher.len() as i64);
        if !db::blobs::holds_content(ctx.db(), self.policy.id, self.owner, &blake3, size).await? {
            return Ok(None);
        }
        let growth = size - self.existing.as_ref().map_or(0, |row| self.usage.freed_by_replacing(row.size));
        let charge = Charge { amount: growth, capacity: self.usage.capacity };
        let plan = match &self.existing {
            Some(row) => {
                recorded(Plan::replace(self.owner, row, charge, self.usage.keeps_versions), self.owner, &row.name, true)
            }
            None => self.new_file(charge),
        };
        // `None`: the blob went (or the charge does not fit) since the look-up: store the bytes.
        match ingest::commit_held(ctx, self.policy.id, (size, &blake3), plan).await? {
            Some(file) => Ok(Some(self.written(&file))),
            None => Ok(None),
        }
    }

    /// The plan of the new file this write creates.
    fn new_file(&self, charge: Charge) -> Plan {
        recorded(
            Plan::new_file(self.owner, self.parent, self.name.as_str(), charge),
            self.owner,
            self.name.as_str(),
            false,
        )
    }

    /// The entry of the file as `file` left it.
    fn written(&self, file: &Ingested) -> files::PathEntry {
        let id = file.object_id.into();
        let (name, created_at) = match &self.existing {
            Some(row) => (row.name.as_str(), row.created_at),
            None => (self.name.as_str(), file.at),
        };
        files::PathEntry::with_content(self.owner, id, name, file.size, created_at, file.at)
    }
}

/// Streams `body` into a new blob of `policy` for a file of `owner` currently `current_size`
/// bytes large. The policy's `max_size` and the quota are enforced before (declared length:
/// the growth is reserved up front, so a full quota refuses before any byte is stored) and while
/// bytes arrive, also when no length was declared.
#[allow(clippy::too_many_arguments)] // one write's facts, each used once; a struct would only rename them
async fn stream_content(
    ctx: &Context,
    owner: UserId,
    policy: &PolicyRow,
    name: &str,
    current_size: i64,
    usage: Usage,
    content_length: Option<u64>,
    body: ByteStream,
) -> ServiceResult<(StagedBlob, i64)> {
    let db = ctx.db();
    if let Some(length) = content_length {
        check_max_size(policy.max_size, length as i64)?;
    }
    let capacity = usage.capacity;
    let mut reserved = 0_i64;
    if let Some(length) = content_length {
        let growth = length as i64 - current_size;
        // A small write is not reserved up front: its commit reserves the growth with the same
        // conditional statement, so the quota holds either way, and a statement is saved.
        if growth > 0 && length > RESERVE_ABOVE {
            let mut conn = db.writer().acquire().await.map_err(DbError::from)?;
            if !db::users::reserve_storage(&mut conn, owner, growth, capacity).await? {
                return Err(quota_exceeded());
            }
            reserved = growth;
        }
    }
    let prepared = async {
        let store = policies::store(ctx, policy).await?;
        let context =
            NamingContext { user_id: owner.as_uuid(), original_name: name, now: time::OffsetDateTime::now_utc() };
        let key = StorageKey::parse(&naming::storage_key(&policy.dir_name_rule, &policy.file_name_rule, &context))?;
        Ok::<_, ServiceError>((store, key))
    }
    .await;
    let (store, key) = match prepared {
        Ok(prepared) => prepared,
        Err(err) => {
            ingest::give_back(ctx, owner, reserved).await;
            return Err(err);
        }
    };
    let limit = ByteLimit::of(policy, usage, current_size);
    // From here on the guard gives the reservation back and removes the bytes unless they are
    // committed, also when this request is cancelled while they arrive.
    let staged = StagedBlob::new(ctx, store, key, policy.id, Hold::Reservation { owner_id: owner, bytes: reserved });
    match staged.store().put_stream(staged.key(), body, Some(limit.bytes())).await {
        Ok(outcome) => Ok((staged.holding(outcome.size as i64, &outcome.blake3).hashed_whole(), reserved)),
        Err(err) => {
            let refusal = match err {
                StorageError::TooLarge { limit: bytes } => limit.refusal(bytes + 1),
                other => other.into(),
            };
            Err(staged.discard(refusal).await)
        }
    }
}

/// Request-body pieces in flight between the front end and a write's task.
const WRITE_QUEUE: usize = 8;
/// Bodies up to this size are held and written whole at [`Write::finish`], without a task.
const INLINE_WRITE: u64 = 64 * 1024;

/// Whether a write may replace a file already at its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overwrite {
    /// Create the file or replace the one there.
    Allow,
    /// Only create: a file already there refuses the write (409 `object.name_taken`).
    Refuse,
    /// Only replace: without a file there the write is refused (404).
    Require,
}

/// A write of one file whose body a front end hands over piece by piece as it arrives (WebDAV
/// `PUT`): [`Write::begin`] plans and admits it, [`Write::push`] takes each piece,
/// [`Write::finish`] completes it. The write keeps the small-body buffer, the byte limit and
/// the hand-off to its own task. A small body is held and written whole at `finish` (not at all
/// when the policy holds the same content already); a larger one is fed through a bounded
/// channel to the write running as its own task. A write dropped before `finish` stores
/// nothing, or ends its task's body cut off, so the task gives its staged bytes up.
pub struct Write {
    ctx: Context,
    limit: ByteLimit,
    declared: Option<u64>,
    written: u64,
    replaces: bool,
    sink: Sink,
}

/// Where a write's bytes go.
enum Sink {
    /// The body so far, held until it passes [`INLINE_WRITE`] bytes or ends.
    Held { plan: Box<PlannedWrite>, pieces: Vec<Bytes> },
    /// The write's task, fed through a bounded channel: a large body streams.
    Streaming { sender: mpsc::Sender<Piece>, task: JoinHandle<ServiceResult<files::PathEntry>> },
    /// The write completed or was given up.
    Ended,
}

/// What a write's task is sent.
enum Piece {
    Data(Bytes),
    /// Every byte was sent: the body is complete.
    End,
}

impl Write {
    /// Plans writing `target` from a body of `declared` bytes (unknown for a chunked body), as
    /// [`plan_write`] does, and admits it: what cannot be taken (a file there when `overwrite`
    /// refuses one, none when it requires one, over the policy's `max_size` or the quota) is
    /// refused before a byte is read.
    pub async fn begin(
        ctx: &Context,
        target: Target<'_>,
        declared: Option<u64>,
        overwrite: Overwrite,
    ) -> ServiceResult<Self> {
        let plan = plan_write(ctx, target, declared).await?;
        let replaces = plan.replaces_a_file();
        match overwrite {
            Overwrite::Refuse if replaces => return Err(files::name_taken()),
            Overwrite::Require if !replaces => return Err(files::not_found()),
            _ => {}
        }
        plan.admit()?;
        let limit = plan.byte_limit();
        let sink = Sink::Held { plan: Box::new(plan), pieces: Vec::new() };
        Ok(Self { ctx: ctx.clone(), limit, declared, written: 0, replaces, sink })
    }

    /// Whether the write replaces an existing file.
    pub fn replaces_a_file(&self) -> bool {
        self.replaces
    }

    /// Bytes taken so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Takes the next piece of the body. Bytes past the limit are refused at once (413 or 507),
    /// without waiting for the task to see them: a client that pauses now would otherwise wait
    /// for an answer that needs more body. A refused write is given up.
    pub async fn push(&mut self, bytes: Bytes) -> ServiceResult<()> {
        self.written += bytes.len() as u64;
        if self.written > self.limit.bytes() {
            let refusal = self.limit.refusal(self.written);
            return Err(self.abandon(refusal).await);
        }
        if let Some(declared) = self.declared.filter(|declared| self.written > *declared) {
            return Err(self.abandon(wrong_length(declared, self.written)).await);
        }
        if let Sink::Held { pieces, .. } = &mut self.sink {
            pieces.push(bytes);
            if self.written <= INLINE_WRITE {
                return Ok(());
            }
            self.start_streaming().await
        } else {
            self.feed(Piece::Data(bytes)).await
        }
    }

    /// Completes the write with every byte pushed: the file appears (or gets its new content)
    /// now, or the write fails and leaves nothing. Answers the file as written.
    pub async fn finish(&mut self) -> ServiceResult<files::PathEntry> {
        if let Some(declared) = self.declared.filter(|declared| self.written != *declared) {
            return Err(self.abandon(wrong_length(declared, self.written)).await);
        }
        match std::mem::replace(&mut self.sink, Sink::Ended) {
            Sink::Held { plan, pieces } => {
                let ctx = self.ctx.clone();
                joined(finish_even_if_dropped(async move { plan.write_whole(&ctx, pieces).await }).await)
            }
            Sink::Ended => Err(ServiceError::internal(anyhow::anyhow!("a write was finished twice"))),
            streaming => {
                self.sink = streaming;
                self.feed(Piece::End).await?;
                self.outcome().await
            }
        }
    }

    /// Whether the write completed or was given up.
    pub fn ended(&self) -> bool {
        matches!(self.sink, Sink::Ended)
    }

    /// Ends the write without its end marker, so a task gives its staged bytes up; answers
    /// `error`.
    async fn abandon(&mut self, error: ServiceError) -> ServiceError {
        if let Err(outcome) = self.outcome().await
            && outcome.kind == ErrorKind::Internal
        {
            tracing::warn!(error = %outcome, "a given-up write's task failed");
        }
        error
    }

    /// Ends the write and answers what its task (if one started) says. Held bytes are dropped:
    /// nothing of them was stored.
    async fn outcome(&mut self) -> ServiceResult<files::PathEntry> {
        let Sink::Streaming { sender, task } = std::mem::replace(&mut self.sink, Sink::Ended) else {
            return Err(ServiceError::internal(anyhow::anyhow!("the write has no task")));
        };
        // Without its sender the task's body ends: after the end marker, complete; before it,
        // cut off (the task then gives its staged bytes up).
        drop(sender);
        joined(task.await)
    }

    /// Starts the write's task and hands it the held bytes.
    async fn start_streaming(&mut self) -> ServiceResult<()> {
        let Sink::Held { plan, pieces } = std::mem::replace(&mut self.sink, Sink::Ended) else {
            return Err(ServiceError::internal(anyhow::anyhow!("the write streams already")));
        };
        let (sender, receiver) = mpsc::channel(WRITE_QUEUE);
        let ctx = self.ctx.clone();
        // A task of its own: a client that hangs up does not cut the write off between storing
        // the bytes and committing the file.
        let task = tokio::spawn(async move { plan.write(&ctx, body_stream(receiver)).await });
        self.sink = Sink::Streaming { sender, task };
        for piece in pieces {
            self.feed(Piece::Data(piece)).await?;
        }
        Ok(())
    }

    /// Sends the task a piece; when it has stopped reading (quota, size limit, storage
    /// failure), answers why.
    async fn feed(&mut self, piece: Piece) -> ServiceResult<()> {
        let Sink::Streaming { sender, .. } = &self.sink else {
            return Err(ServiceError::internal(anyhow::anyhow!("the write has no task")));
        };
        if sender.send(piece).await.is_err() {
            return Err(self.outcome().await.err().unwrap_or_else(|| {
                ServiceError::internal(anyhow::anyhow!("a write's task stopped reading and succeeded"))
            }));
        }
        Ok(())
    }
}

fn wrong_length(declared: u64, written: u64) -> ServiceError {
    ServiceError::new(
        ErrorKind::BadRequest,
        codes::UPLOAD_WRONG_LENGTH,
        format!("expected exactly {declared} bytes, got {written}"),
    )
}

/// What a write's task answered.
fn joined(task: Result<ServiceResult<files::PathEntry>, tokio::task::JoinError>) -> ServiceResult<files::PathEntry> {
    task.unwrap_or_else(|error| Err(ServiceError::internal(anyhow::anyhow!("a write's task failed: {error}"))))
}

/// The body as a write's task reads it. The channel closing without [`Piece::End`] means the
/// front end went away: the stream then fails, so nothing incomplete is kept.
fn body_stream(receiver: mpsc::Receiver<Piece>) -> ByteStream {
    Box::pin(futures_util::stream::unfold(Some(receiver), |receiver| async move {
        let mut receiver = receiver?;
        match receiver.recv().await {
            Some(Piece::Data(bytes)) => Some((Ok(bytes), Some(receiver))),
            Some(Piece::End) => None,
            None => Some((Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the upload was cut off")), None)),
        }
    }))
}

/// Runs `work` to its end even if the caller is dropped (a client that hangs up): it is polled
/// here first, and only when it has to wait is it moved into a task of its own, which the
/// caller then waits for. A write that needs no waiting (a small file on SQLite and local disk)
/// so costs no task and no hand-off between threads.
async fn finish_even_if_dropped<T: Send + 'static>(
    work: impl Future<Output = T> + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    let mut work = Box::pin(work);
    // Between this poll and the spawn below there is no await: the caller cannot be dropped
    // while `work` is half done and not yet owned by a task.
    if let std::task::Poll::Ready(done) = futures_util::poll!(&mut work) {
        return Ok(done);
    }
    tokio::spawn(work).await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::sync::oneshot;

    use super::finish_even_if_dropped;

    #[tokio::test]
    async fn work_that_needs_no_waiting_runs_without_a_task() {
        let tasks = tokio::runtime::Handle::current().metrics();
        let before = tasks.num_alive_tasks();
        let during = tasks.clone();
        let answer = finish_even_if_dropped(async move { during.num_alive_tasks() }).await.unwrap();
        assert_eq!(answer, before, "the work ran in a task of its own");
    }

    #[tokio::test]
    async fn work_that_waits_finishes_after_its_caller_is_dropped() {
        let (go, gate) = oneshot::channel::<()>();
        let (done, finished) = oneshot::channel::<&str>();
        let caller = finish_even_if_dropped(async move {
            gate.await.unwrap();
            done.send("finished").unwrap();
        });
        // The caller gives up while the work waits (a client that hung up).
        assert!(tokio::time::timeout(Duration::from_millis(20), caller).await.is_err());
        go.send(()).unwrap();
        let finished = tokio::time::timeout(Duration::from_secs(5), finished).await;
        assert_eq!(finished.expect("the work went on").unwrap(), "finished");
    }
}
