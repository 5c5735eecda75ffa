//! Archives: a ZIP of chosen files and folders, handed out through a single-use token and
//! streamed as it is written (no temporary file; memory bounded by one folder's listing, the
//! central directory and a fixed pipe, whatever the archive's size). Owns the archive ticket in
//! the key-value store and the ZIP writing; who may reach which object stays `access`' and
//! `shares`' to decide.

use std::collections::HashSet;
use std::io;
use std::time::Duration;

use anyhow::Context as _;
use async_zip::base::write::ZipFileWriter;
use async_zip::{Compression, ZipDateTime, ZipDateTimeBuilder, ZipEntryBuilder};
use futures_util::StreamExt;
use nubo_common::storage::ByteStream;
use nubo_model::db::objects::ObjectRow;
use nubo_model::db::{self};
use nubo_model::domain::ids::{ObjectId, UserId};
use nubo_model::domain::object::ObjectKind;
use nubo_model::domain::time::{Millis, now_ms, to_rfc3339};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncWriteExt, DuplexStream};
use tokio_util::compat::FuturesAsyncWriteCompatExt;
use tokio_util::io::ReaderStream;
use tracing::Instrument;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::context::Context;
use crate::error::{ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::tree::access::{self, Grant, Reach, Readable};
use crate::{content::downloads, identity::accounts, sharing::shares};

/// How long an archive token waits for its one use.
pub const ARCHIVE_TOKEN_LIFETIME: Duration = Duration::from_secs(3600);
/// Objects one archive may name (each is checked again when the archive is fetched).
pub const MAX_ARCHIVE_IDS: usize = 1000;
/// The pipe between the ZIP writer and the response body: the only buffer the archive has.
const PIPE_CAPACITY: usize = 256 * 1024;
/// The largest piece the response body reads from the pipe at once.
const BODY_CHUNK: usize = 64 * 1024;
/// The name of an archive of several objects.
const DEFAULT_ARCHIVE_NAME: &str = "archive.zip";

/// An archive token and where to use it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ArchiveTokenView {
    /// 32 random bytes (URL-safe base64), valid for one archive download within an hour.
    pub access_token: String,
    /// `GET` this (relative to the site) to download the archive.
    pub url: String,
    pub expires: String,
}

/// What an archive token stands for, kept in the key-value store (so any master sharing it
/// can serve the archive) until its one use.
#[derive(Debug, Serialize, Deserialize)]
struct Ticket {
    grant: TicketGrant,
    ids: Vec<Uuid>,
    /// Milliseconds; the store's time-to-live ends the ticket, this bounds the used marker.
    expires: Millis,
}

/// Who asked: the owner of the objects, or a visitor of this share.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum TicketGrant {
    Owner(UserId),
    Share(Uuid),
}

fn not_found() -> ServiceError {
    ServiceError::not_found(codes::ARCHIVE_NOT_FOUND, "no such archive link, or it has expired")
}

fn used() -> ServiceError {
    ServiceError::conflict(codes::ARCHIVE_TOKEN_USED, "this archive link was already used")
}

/// The store keys of a token: its ticket, and the marker a used one leaves. Keyed by a hash,
/// so the store never holds a usable token.
fn keys(token: &str) -> (String, String) {
    let digest = nubo_common::hash::hash_hex(token.as_bytes());
    (format!("archive:{digest}"), format!("archive-used:{digest}"))
}

/// The ids of a request, each once, in the order first given; 1 to [`MAX_ARCHIVE_IDS`] of them.
pub fn selection(ids: &[Uuid]) -> ServiceResult<Vec<Uuid>> {
    if ids.is_empty() || ids.len() > MAX_ARCHIVE_IDS {
        return Err(ServiceError::validation("ids", format!("must name 1 to {MAX_ARCHIVE_IDS} objects")));
    }
    let mut seen = HashSet::with_capacity(ids.len());
    Ok(ids.iter().copied().filter(|id| seen.insert(*id)).collect())
}

/// A single-use token for an archive of `caller`'s live objects `ids` (any one missing,
/// foreign or in the trash answers 404, as everywhere).
pub async fn owner_token(ctx: &Context, caller: UserId, ids: &[Uuid]) -> ServiceResult<ArchiveTokenView> {
    let ids = selection(ids)?;
    let mut chosen = Vec::with_capacity(ids.len());
    for id in ids {
        chosen.push(access::readable(ctx, caller, id.into(), Reach::Live).await?);
    }
    issue(ctx, &chosen).await
}

/// Records a ticket for `chosen` (objects reached through one grant) and answers its token.
pub(crate) async fn issue(ctx: &Context, chosen: &[Readable]) -> ServiceResult<ArchiveTokenView> {
    let grant = match chosen.first().map(Readable::grant) {
        Some(Grant::Owner(owner)) => TicketGrant::Owner(owner),
        Some(Grant::Share(share)) => TicketGrant::Share(share),
        None => return Err(ServiceError::validation("ids", "must name at least one object")),
    };
    if chosen.iter().any(|object| object.grant() != chosen[0].grant()) {
        return Err(ServiceError::internal(anyhow::anyhow!(
            "an archive's objects were reached through several grants"
        )));
    }
    let expires = now_ms() + ARCHIVE_TOKEN_LIFETIME.as_millis() as Millis;
    let ticket = Ticket { grant, ids: chosen.iter().map(|object| object.id().into()).collect(), expires };
    let text = serde_json::to_string(&ticket).map_err(ServiceError::internal)?;
    let token = new_token();
    ctx.store().set(&keys(&token).0, &text, Some(ARCHIVE_TOKEN_LIFETIME)).await?;
    Ok(ArchiveTokenView { url: (ctx.links().archive)(&token), access_token: token, expires: to_rfc3339(expires) })
}

/// 32 bytes from the thread's CSPRNG (ChaCha, seeded by the operating system), URL-safe.
fn new_token() -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

/// An archive whose access was checked again, ready to stream.
pub struct Archive {
    ctx: Context,
    /// The chosen objects as they are now, in the order chosen.
    chosen: Vec<ObjectRow>,
    /// What the download is called: the one chosen object's name with `.zip`, else
    /// [`DEFAULT_ARCHIVE_NAME`].
    pub file_name: String,
}

/// Opens the archive `token` names. With `consume`, the ticket is spent (a second use answers
/// 409, also on another master sharing the store) and a share's archive counts one download;
/// `HEAD` does neither. The grant is checked again: the owner still active and every object
/// still live; for a share, the share still serving and every object still inside it.
pub async fn open(ctx: &Context, token: &str, consume: bool) -> ServiceResult<Archive> {
    let (ticket_key, used_key) = keys(token);
    let store = ctx.store();
    let text = if consume { store.take(&ticket_key).await? } else { store.get(&ticket_key).await? };
    let Some(text) = text else {
        return Err(if store.get(&used_key).await?.is_some() { used() } else { not_found() });
    };
    let ticket: Ticket = serde_json::from_str(&text).map_err(ServiceError::internal)?;
    if consume {
        let remaining = (ticket.expires - now_ms()).max(0) as u64 / 1000 + 60;
        store.set(&used_key, "1", Some(Duration::from_secs(remaining))).await?;
    }
    let chosen = match ticket.grant {
        TicketGrant::Owner(owner) => {
            accounts::load_active_user(ctx, owner).await?;
            let mut chosen = Vec::with_capacity(ticket.ids.len());
            for id in &ticket.ids {
                chosen.push(access::readable(ctx, owner, (*id).into(), Reach::Live).await?);
            }
            chosen
        }
        TicketGrant::Share(share) => shares::readable_for_archive(ctx, share, &ticket.ids, consume).await?,
    };
    let chosen: Vec<ObjectRow> = chosen.iter().map(|object| object.row().clone()).collect();
    let file_name = match chosen.as_slice() {
        [only] => format!("{}.zip", only.name),
        _ => DEFAULT_ARCHIVE_NAME.to_owned(),
    };
    Ok(Archive { ctx: ctx.clone(), chosen, file_name })
}

impl Archive {
    /// The ZIP as a byte stream. A task writes it into one end of a fixed pipe while the caller
    /// reads the other; when writing fails (a blob unreadable, the database gone) the stream
    /// ends with an error, so the client sees a broken transfer rather than a shorter archive
    /// that looks whole.
    pub fn into_stream(self) -> ByteStream {
        let (pipe_in, pipe_out) = tokio::io::duplex(PIPE_CAPACITY);
        let task = tokio::spawn(
            async move {
                let outcome = write_archive(&self.ctx, self.chosen, pipe_in).await;
                if let Err(error) = &outcome {
                    // Also a client that stopped reading; the log tells which.
                    tracing::warn!(error = format!("{error:#}"), "archive not completed");
                }
                outcome
            }
            .instrument(tracing::Span::current()),
        );
        let ending = futures_util::stream::once(async move {
            match task.await {
                Ok(Ok(())) => None,
                Ok(Err(_)) => Some(Err(io::Error::other("the archive could not be completed"))),
                Err(panicked) => Some(Err(io::Error::other(panicked))),
            }
        })
        .filter_map(std::future::ready);
        Box::pin(ReaderStream::with_capacity(pipe_out, BODY_CHUNK).chain(ending))
    }
}

type Writer = ZipFileWriter<tokio_util::compat::Compat<DuplexStream>>;

/// Writes the chosen objects into `pipe` as a ZIP: files stored (no compression: most are
/// compressed already, and throughput is the point), each with a data descriptor (its CRC is
/// known only once streamed) and ZIP64 fields, so entries and archives past 4 GiB are valid.
async fn write_archive(ctx: &Context, chosen: Vec<ObjectRow>, pipe: DuplexStream) -> anyhow::Result<()> {
    let mut zip = ZipFileWriter::with_tokio(pipe);
    // Objects chosen from different folders may share a name: the later ones get a suffix.
    let mut top_names = HashSet::new();
    for row in chosen {
        let name = unique_name(&mut top_names, entry_name(&row.name));
        if row.is_folder() {
            write_tree(ctx, &mut zip, row.id, name, row.updated_at).await?;
        } else {
            write_file(ctx, &mut zip, row.id, name).await?;
        }
    }
    let mut pipe = zip.close().await.context("finishing the archive")?.into_inner();
    pipe.shutdown().await.context("closing the pipe")?;
    Ok(())
}

/// Writes folder `root` as `path/` and everything live below it, one folder's listing at a
/// time: the pending folders (a stack) are all that is held, so memory follows the tree's
/// depth and breadth of one level, never its size. Every folder gets its own entry, so empty
/// ones survive.
async fn write_tree(
    ctx: &Context,
    zip: &mut Writer,
    root: ObjectId,
    path: String,
    updated_at: Millis,
) -> anyhow::Result<()> {
    let mut pending = vec![(root, path, updated_at)];
    while let Some((folder, path, updated_at)) = pending.pop() {
        let entry = ZipEntryBuilder::new(format!("{path}/").into(), Compression::Stored)
            .last_modification_date(zip_time(updated_at))
            .unix_permissions(0o040755);
        zip.write_entry_whole(entry, &[]).await.with_context(|| format!("writing folder entry {path}/"))?;
        let children = db::objects::all_live_children(ctx.db(), folder).await.context("listing a folder")?;
        let mut folders = Vec::new();
        let mut names = HashSet::with_capacity(children.len());
        for child in children {
            let child_path = format!("{path}/{}", unique_name(&mut names, entry_name(&child.name)));
            if child.kind == ObjectKind::Folder {
                folders.push((child.id, child_path, child.updated_at));
            } else {
                write_file(ctx, zip, child.id, child_path).await?;
            }
        }
        // Popped in name order: each folder's files, then its folders depth first.
        pending.extend(folders.into_iter().rev());
    }
    Ok(())
}

/// Streams file `id`'s bytes into an entry at `path`. A file trashed since it was listed is
/// left out; a blob that ends early or runs long fails the archive.
async fn write_file(ctx: &Context, zip: &mut Writer, id: ObjectId, path: String) -> anyhow::Result<()> {
    let Some(download) = downloads::open_live_file(ctx, id).await? else { return Ok(()) };
    let entry = ZipEntryBuilder::new(path.clone().into(), Compression::Stored)
        .size(download.size, download.size)
        .last_modification_date(zip_time(download.updated_at))
        .unix_permissions(0o100644);
    let mut writer = zip.write_entry_stream(entry).await.with_context(|| format!("starting {path}"))?.compat_write();
    let mut written = 0u64;
    if download.size > 0 {
        let mut bytes = download.store.get(&download.key, None).await?;
        while let Some(chunk) = bytes.next().await {
            let chunk = chunk.with_context(|| format!("reading {path}"))?;
            written += chunk.len() as u64;
            writer.write_all(&chunk).await.with_context(|| format!("writing {path}"))?;
        }
    }
    anyhow::ensure!(written == download.size, "{path}: the blob held {written} bytes, not {}", download.size);
    writer.into_inner().close().await.with_context(|| format!("finishing {path}"))?;
    Ok(())
}

/// A name as one path segment of an entry: names are validated when created, so this only
/// guards against a separator or a dot segment that slipped through.
fn entry_name(name: &str) -> String {
    match name {
        "" | "." | ".." => "_".to_owned(),
        name => name.replace(['/', '\\', '\0'], "_"),
    }
}

/// `name`, or `name (2)`, `name (3)`... when `taken` already holds it (the extension kept).
fn unique_name(taken: &mut HashSet<String>, name: String) -> String {
    if taken.insert(name.clone()) {
        return name;
    }
    let (stem, extension) = match name.rsplit_once('.') {
        Some((stem, extension)) if !stem.is_empty() => (stem.to_owned(), format!(".{extension}")),
        _ => (name.clone(), String::new()),
    };
    (2..).map(|n| format!("{stem} ({n}){extension}")).find(|candidate| taken.insert(candidate.clone())).unwrap_or(name)
}

/// A change time as the MS-DOS date ZIP stores (UTC, two-second steps, 1980 to 2107).
fn zip_time(ms: Millis) -> ZipDateTime {
    let at = time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000)).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let at = at.clamp(time::macros::datetime!(1980-01-01 00:00 UTC), time::macros::datetime!(2107-12-31 23:59:58 UTC));
    ZipDateTimeBuilder::new()
        .year(at.year())
        .month(u32::from(u8::from(at.month())))
        .day(u32::from(at.day()))
        .hour(u32::from(at.hour()))
        .minute(u32::from(at.minute()))
        .second(u32::from(at.second()))
        .build()
}

/// A single-use archive token for what the visitor of share `code` chose (default: the shared
/// object itself); each chosen object must be inside the share.
pub async fn share_archive_token(
    ctx: &Context,
    code: &str,
    visitor: &shares::Visitor<'_>,
    object_ids: Option<&[Uuid]>,
) -> ServiceResult<ArchiveTokenView> {
    let share = shares::opened(ctx, code, visitor).await?;
    let whole = [Uuid::from(share.share.object_id)];
    let ids = selection(object_ids.unwrap_or(&whole))?;
    let mut chosen = Vec::with_capacity(ids.len());
    for id in ids {
        chosen.push(shares::reach(&share, ctx, id.into()).await?);
    }
    issue(ctx, &chosen).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_one_segment_and_unique() {
        assert_eq!(entry_name("a/b"), "a_b");
        assert_eq!(entry_name(".."), "_");
        assert_eq!(entry_name("Ärger"), "Ärger");
        let mut taken = HashSet::new();
        assert_eq!(unique_name(&mut taken, "a.txt".into()), "a.txt");
        assert_eq!(unique_name(&mut taken, "a.txt".into()), "a (2).txt");
        assert_eq!(unique_name(&mut taken, "a.txt".into()), "a (3).txt");
        assert_eq!(unique_name(&mut taken, ".env".into()), ".env");
        assert_eq!(unique_name(&mut taken, ".env".into()), ".env (2)");
    }

    #[test]
    fn a_selection_names_each_object_once_and_not_too_many() {
        let id = Uuid::new_v4();
        assert_eq!(selection(&[id, id]).unwrap(), [id]);
        assert_eq!(selection(&[]).unwrap_err().code, codes::REQUEST_INVALID_FIELD);
        let many = vec![Uuid::new_v4(); MAX_ARCHIVE_IDS + 1];
        assert_eq!(selection(&many).unwrap_err().code, codes::REQUEST_INVALID_FIELD);
    }

    #[test]
    fn times_become_dos_dates_within_their_range() {
        let date = zip_time(1_700_000_000_000);
        assert_eq!((date.year(), date.month(), date.day()), (2023, 11, 14));
        assert_eq!(zip_time(0).year(), 1980);
    }
}
