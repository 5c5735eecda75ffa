//! `IMPORT`: files that already sit in a local or S3 policy's storage become a user's files
//! without a byte being copied. [`start`] checks the request and queues the task; [`run`] walks
//! the storage's listing and commits each file through the ingest path ([`ingest::commit`] with
//! [`Hold::Adopted`]: the blob's key is the existing object's key), hashed once while read, with
//! the user's quota charged and de-duplication against the policy's blobs. A ledger
//! (`imported_files`) recorded in each file's commit lets a later run skip what is unchanged
//! and re-hash what changed, so a run stopped anywhere (crash, restart, cancel) simply runs
//! again. Imported bytes are Nubo's from then on: purging the file deletes them.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt;
use nubo_common::hash::StreamHasher;
use nubo_common::storage::{BlobStore, ListedObject, StorageKey};
use nubo_model::db::imports::{self, ImportedRow};
use nubo_model::db::objects::ObjectRow;
use nubo_model::db::policies::PolicyRow;
use nubo_model::db::{self};
use nubo_model::domain::activity::{Action, TargetKind};
use nubo_model::domain::ids::{ObjectId, PolicyId, UserId};
use nubo_model::domain::object::{ObjectName, parse_path};
use nubo_model::domain::task::{ImportProgress, TaskProgress, TaskProps, TaskType};
use nubo_model::domain::time::now_ms;
use uuid::Uuid;

use crate::audit::activity::{self, Activity};
use crate::content::ingest::{self, Charge, Hold, Plan, StagedBlob};
use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::tasks::queue::{self, TaskView};
use crate::tasks::run::{Checkpoint, TaskFailure};
use crate::tree::access::{self, Reach};
use crate::{storage::policies, tree::files};

/// Conflicting keys kept in a run's result.
const MAX_LISTED_CONFLICTS: usize = 20;

/// The first key segment of the keys blob rows get when their bytes changed behind Nubo's back
/// (see [`imports::detach_step`]); no object ever has such a key.
const REPLACED_AREA: &str = ".nubo-replaced";

/// What `POST /admin/import` asks for.
#[derive(Debug, Clone)]
pub struct ImportRequest {
    pub policy_id: PolicyId,
    /// The folder of the policy's storage to import (empty: all of it).
    pub path_or_prefix: String,
    pub user_id: UserId,
    /// The folder of the user's tree the files appear in, made with its parents when missing.
    pub dst_path: String,
}

/// Checks `request` and queues its `IMPORT` task, owned by `admin`: 404 for an unknown policy
/// or user, 422 for a policy on a storage node, a source path that is absolute or climbs out
/// (`..`), or a destination that is not an absolute path; 409 when a file of the user stands
/// where the destination (or a folder on the way) should be. The destination folder is made
/// now, so the task finds it.
pub async fn start(ctx: &Context, admin: UserId, request: ImportRequest) -> ServiceResult<TaskView> {
    let db = ctx.db();
    let policy = policies::find(ctx, request.policy_id).await?;
    if policy.node_id.is_some() {
        return Err(ServiceError::new(
            ErrorKind::Validation,
            codes::IMPORT_SOURCE_UNSUPPORTED,
            "importing from a storage node's policy is not supported yet; only local and S3 policies",
        ));
    }
    let source = source_folder(&request.path_or_prefix)?;
    if !request.dst_path.starts_with('/') {
        return Err(ServiceError::validation("dst_path", "an absolute path in the user's tree, such as /imported"));
    }
    let names = parse_path(&request.dst_path).map_err(|why| ServiceError::validation("dst_path", why))?;
    if db::users::find(db, request.user_id).await?.is_none() {
        return Err(ServiceError::not_found(codes::USER_NOT_FOUND, "no such user"));
    }
    let root = files::ensure_root(db, request.user_id).await?;
    let mut folder = root.id;
    for name in &names {
        folder = folder_in(ctx, request.user_id, folder, name).await?;
    }
    let prefix = source.as_ref().map_or_else(String::new, |key| key.as_str().to_owned());
    // From now on the collector takes bytes no file knows in this folder for files waiting.
    db::imports::remember_source(db, policy.id, &prefix, now_ms()).await?;
    let props = TaskProps {
        source_policy_id: Some(request.policy_id.as_uuid()),
        path_or_prefix: Some(prefix),
        user_id: Some(request.user_id.as_uuid()),
        dst_path: Some(request.dst_path),
        parent_id: Some(folder.into()),
        ..TaskProps::default()
    };
    queue::enqueue(db, TaskType::Import, Some(admin), &props).await
}

/// The folder of a policy's storage `raw` names (`None`: all of it): relative, `/`-separated,
/// without `.` or `..` segments.
fn source_folder(raw: &str) -> ServiceResult<Option<StorageKey>> {
    let trimmed = raw.trim_end_matches('/');
    if trimmed.is_empty() && !raw.starts_with('/') {
        return Ok(None);
    }
    StorageKey::parse(trimmed).map(Some).map_err(|_| {
        ServiceError::validation(
            "source.path_or_prefix",
            "a relative path inside the policy's storage, without `.` or `..` segments",
        )
    })
}

/// The owner's live folder `name` in `parent`, made when missing; 409 when a file has the name.
async fn folder_in(ctx: &Context, owner: UserId, parent: ObjectId, name: &ObjectName) -> ServiceResult<ObjectId> {
    let db = ctx.db();
    for _ in 0..2 {
        match db::objects::child_by_name(db, parent, name.as_str()).await? {
            Some(row) if row.is_folder() => return Ok(row.id),
            Some(_) => {
                return Err(ServiceError::conflict(
                    codes::IMPORT_DESTINATION_IS_FILE,
                    format!("a file named {:?} is where a folder is needed", name.as_str()),
                ));
            }
            None => {
                let writable = access::writable(ctx, owner, parent, Reach::Folder).await?;
                match files::create_folder(ctx, &writable, name.as_str()).await {
                    Ok(created) => return Ok(created.id.into()),
                    // Made meanwhile by someone else: look again.
                    Err(err) if err.code == codes::OBJECT_NAME_TAKEN => continue,
                    Err(err) => return Err(err),
                }
            }
        }
    }
    Err(ServiceError::conflict(codes::OBJECT_NAME_TAKEN, "the folder's name keeps being taken"))
}

/// Files read (looked up and hashed) ahead of the one being committed: reading overlaps the
/// commits, and an object store's latency is paid once per this many files rather than per file.
const READ_AHEAD: usize = 8;

/// What reading a listed file needs: nothing of the run's state, so several are read at once,
/// each in a task of its own (a read waiting in a stream that is not polled while a file is
/// committed would hold its database connection, which the commit may need).
struct Reader {
    ctx: Context,
    policy: PolicyRow,
    store: Arc<dyn BlobStore>,
    /// Keys below this are imported, named after the rest of their key.
    prefix: String,
}

/// A listed file, read.
enum Read {
    /// Imported before and unchanged (not read), or a blob of Nubo's own.
    Skip,
    /// Its key cannot name a file of the user's tree.
    Unnamable,
    /// New or changed: its content hash and size as read.
    Content { key: StorageKey, names: Vec<ObjectName>, ledger: Option<ImportedRow>, blake3: String, size: i64 },
}

impl Reader {
    /// Looks `listed` up in the ledger, and reads and hashes it when it is new or changed.
    /// Changes nothing, so a file read ahead of a stop is simply read again by the next run.
    async fn read(&self, listed: &ListedObject) -> Result<Read, TaskFailure> {
        let db = self.ctx.db();
        let (Ok(key), Some(relative)) = (StorageKey::parse(&listed.key), listed.key.strip_prefix(&self.prefix)) else {
            return Ok(Read::Unnamable);
        };
        let Ok(names) = relative.split('/').map(ObjectName::parse).collect::<Result<Vec<_>, _>>() else {
            return Ok(Read::Unnamable);
        };
        let ledger = imports::find(db, self.policy.id, key.as_str()).await?;
        match &ledger {
            Some(entry)
                if entry.size == listed.size as i64
                    && entry.modified == listed.modified_ms
                    && entry.etag == listed.etag =>
            {
                return Ok(Read::Skip);
            }
            None if db::blobs::key_exists(db, self.policy.id, key.as_str()).await? => return Ok(Read::Skip),
            _ => {}
        }
        let mut body = self.store.get(&key, None).await?;
        let mut hasher = StreamHasher::new();
        while let Some(piece) = body.next().await {
            let piece = piece.map_err(|err| TaskFailure::Transient(format!("cannot read {key}: {err}")))?;
            hasher.update(&piece);
        }
        Ok(Read::Content { key, names, ledger, blake3: hasher.finalize(), size: hasher.len() as i64 })
    }
}

/// One run of an import: what it records with, and what it did so far.
struct Job<'a> {
    ctx: &'a Context,
    actor: UserId,
    user: UserId,
    policy: &'a PolicyRow,
    store: Arc<dyn BlobStore>,
    capacity: i64,
    /// The user's folders by their path below the destination ("" is the destination).
    folders: HashMap<String, ObjectId>,
    progress: TaskProgress,
}

/// What became of one listed file.
enum Outcome {
    Imported {
        duplicate: bool,
    },
    Updated,
    Skipped,
    Conflict,
    /// The user's quota cannot take it: the run stops here.
    QuotaFull,
}

/// Runs an import to the end, or until the checkpoint says stop (checked between files). A
/// full quota ends it as failed, saying how far it got (every file before was recorded whole,
/// none after).
pub async fn run(
    ctx: &Context,
    actor: Option<UserId>,
    props: &TaskProps,
    control: &mut dyn Checkpoint,
) -> Result<TaskProgress, TaskFailure> {
    let missing = |what: &str| TaskFailure::Permanent(format!("the task has no {what}"));
    let policy_id = props.source_policy_id.ok_or_else(|| missing("source policy"))?;
    let user = UserId::from(props.user_id.ok_or_else(|| missing("user"))?);
    let destination = props.parent_id.ok_or_else(|| missing("destination"))?;
    let actor = actor.unwrap_or(user);
    let policy = policies::find(ctx, policy_id.into())
        .await
        .map_err(|_| TaskFailure::Permanent("the source policy no longer exists".to_owned()))?;
    access::writable(ctx, user, destination.into(), Reach::Folder)
        .await
        .map_err(|_| TaskFailure::Permanent("the destination folder no longer exists".to_owned()))?;
    let source = source_folder(props.path_or_prefix.as_deref().unwrap_or_default())?;
    let store = policies::store(ctx, &policy).await?;
    let (_, capacity, _) = db::users::write_usage(ctx.db(), user, now_ms()).await?;
    let prefix = source.as_ref().map_or_else(String::new, |key| format!("{key}/"));
    let reader = Arc::new(Reader { ctx: ctx.clone(), policy: policy.clone(), store: store.clone(), prefix });
    let mut job = Job {
        ctx,
        actor,
        user,
        policy: &policy,
        store: store.clone(),
        capacity,
        folders: HashMap::from([(String::new(), ObjectId::from(destination))]),
        progress: TaskProgress { import: Some(ImportProgress::default()), ..TaskProgress::default() },
    };
    let mut files = store
        .list_below(source.as_ref())
        .map(|listed| {
            let reader = Arc::clone(&reader);
            tokio::spawn(async move {
                let listed = listed?;
                let read = reader.read(&listed).await?;
                Ok::<_, TaskFailure>((listed, read))
            })
        })
        .buffered(READ_AHEAD);
    while let Some(next) = files.next().await {
        control.checkpoint(&job.progress).await?;
        let (listed, read) = next.map_err(|err| TaskFailure::Transient(format!("a read failed: {err}")))??;
        job.count(|p| p.files_seen += 1);
        job.progress.files_total += 1;
        let outcome = job.import(&listed, read).await?;
        match outcome {
            Outcome::Imported { duplicate } => job.count(|p| {
                p.files_imported += 1;
                p.files_deduplicated += u64::from(duplicate);
            }),
            Outcome::Updated => job.count(|p| p.files_updated += 1),
            Outcome::Skipped => job.count(|p| p.files_skipped += 1),
            Outcome::Conflict => job.count(|p| {
                p.files_conflicting += 1;
                if p.conflicts.len() < MAX_LISTED_CONFLICTS {
                    p.conflicts.push(listed.key.clone());
                }
            }),
            Outcome::QuotaFull => {
                let done = job.progress.import.clone().unwrap_or_default();
                // Saved for the task's view; whether to stop no longer matters.
                let _ = control.checkpoint(&job.progress).await;
                return Err(TaskFailure::Permanent(format!(
                    "the user's quota is full: stopped before {}; this run imported {} new and {} changed \
                     files of {} seen (each recorded whole); run the import again once there is room",
                    listed.key, done.files_imported, done.files_updated, done.files_seen
                )));
            }
        }
        job.progress.files_done += 1;
    }
    control.checkpoint(&job.progress).await?;
    Ok(job.progress)
}

impl Job<'_> {
    fn count(&mut self, change: impl FnOnce(&mut ImportProgress)) {
        change(self.progress.import.get_or_insert_with(ImportProgress::default));
    }

    /// Records one file as read: a new file at its path below the destination, or new content
    /// of the file it became last time (if that file still lives).
    async fn import(&mut self, listed: &ListedObject, read: Read) -> Result<Outcome, TaskFailure> {
        let db = self.ctx.db();
        let (key, names, ledger, blake3, read) = match read {
            Read::Skip => return Ok(Outcome::Skipped),
            Read::Unnamable => return Ok(Outcome::Conflict),
            Read::Content { key, names, ledger, blake3, size } => (key, names, ledger, blake3, size),
        };
        let Some((name, folders)) = names.split_last() else { return Ok(Outcome::Conflict) };
        self.count(|p| p.bytes_hashed += read as u64);
        let previous = match &ledger {
            Some(entry) => db::objects::find_by_id(db, entry.object_id)
                .await?
                .filter(|row| row.trashed_at.is_none() && !row.is_folder() && row.owner_id == self.user),
            None => None,
        };
        let parent = match &previous {
            Some(row) => row.parent_id.unwrap_or(self.folders[""]),
            None => match self.folder(folders).await {
                Ok(parent) => parent,
                Err(err) if err.kind == ErrorKind::Conflict => return Ok(Outcome::Conflict),
                Err(err) => return Err(err.into()),
            },
        };
        if previous.is_none() && db::objects::child_by_name(db, parent, name.as_str()).await?.is_some() {
            return Ok(Outcome::Conflict);
        }
        let plan = self.plan(previous.as_ref(), (parent, name), key.as_str(), read);
        let record = ImportedRow {
            storage_key: key.as_str().to_owned(),
            size: read,
            modified: listed.modified_ms,
            etag: listed.etag.clone(),
            blake3: blake3.clone(),
            object_id: plan.destination.object_id(),
        };
        let plan = plan.with_step(|_| imports::record_step(self.policy.id, record, now_ms()));
        let staged = StagedBlob::new(self.ctx, self.store.clone(), key, self.policy.id, Hold::Adopted)
            .holding(read, &blake3)
            .hashed_whole();
        match ingest::commit(self.ctx, staged, plan).await {
            Ok(Some(_)) if previous.is_some() => Ok(Outcome::Updated),
            Ok(Some(file)) => Ok(Outcome::Imported { duplicate: file.duplicate }),
            // The ledger's upsert always changes its row: not superseded in practice.
            Ok(None) => Ok(Outcome::Skipped),
            Err(err) if err.code == codes::STORAGE_QUOTA_EXCEEDED => Ok(Outcome::QuotaFull),
            // A name taken meanwhile, or the file changed meanwhile.
            Err(err) if err.kind == ErrorKind::Conflict => Ok(Outcome::Conflict),
            Err(err) => Err(err.into()),
        }
    }

    /// The commit of `size` bytes found at a key: new content for `previous` (the file the key
    /// became last time; the blob row that described the key's old bytes is moved out of the
    /// way first, as they are gone), or a new file `name` in `parent`.
    fn plan(
        &self,
        previous: Option<&ObjectRow>,
        (parent, name): (ObjectId, &ObjectName),
        key: &str,
        size: i64,
    ) -> Plan {
        let written = |replaced: bool| {
            Activity::by(self.actor, Action::FileWrite)
                .with("replaced", replaced)
                .with("import", true)
                .with("owner_id", self.user)
        };
        match previous {
            Some(row) => {
                let charge = Charge { amount: size - row.size, capacity: self.capacity };
                let tombstone = format!("{REPLACED_AREA}/{}", Uuid::new_v4().simple());
                Plan::replace(self.user, row, charge, false)
                    .with_first_step(imports::detach_step(self.policy.id, key, tombstone))
                    .with_step(|id| activity::step(written(true).on(TargetKind::Object, id, Some(&row.name))))
            }
            None => {
                let charge = Charge { amount: size, capacity: self.capacity };
                Plan::new_file(self.user, parent, name.as_str(), charge)
                    .with_step(|id| activity::step(written(false).on(TargetKind::Object, id, Some(name.as_str()))))
            }
        }
    }

    /// The user's folder at `names` below the destination, made (with its parents) when missing.
    async fn folder(&mut self, names: &[ObjectName]) -> ServiceResult<ObjectId> {
        let mut path = String::new();
        let mut folder = self.folders[""];
        for name in names {
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(name.as_str());
            folder = match self.folders.get(&path) {
                Some(known) => *known,
                None => {
                    let made = folder_in(self.ctx, self.user, folder, name).await?;
                    self.folders.insert(path.clone(), made);
                    made
                }
            };
        }
        Ok(folder)
    }
}
