//! Open WebDAV files. Reading streams the blob from its store from the current position on;
//! writing feeds the request body through a bounded channel into a `transfers::PlannedWrite`, which
//! runs as its own task and makes the file visible only once every byte has arrived. A write
//! whose handle is dropped before `flush` (client gone, error) ends the body stream with an
//! error, so the write task removes what it stored and gives the quota back.

use std::io::SeekFrom;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use dav_server::fs::{DavFile, DavMetaData, FsError, FsFuture};
use futures_util::{FutureExt, StreamExt};
use nubo_common::storage::{BlobStore, ByteRange, ByteStream, StorageKey};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::fs::{Meta, fs_error};
use crate::app::AppState;
use crate::service::ServiceResult;
use crate::service::files::PathEntry;
use crate::service::transfers::{self, ByteLimit, PlannedWrite};

/// Request-body pieces in flight between the handler and the write task.
const WRITE_QUEUE: usize = 8;

/// A file opened for reading.
pub struct ReadFile {
    meta: Meta,
    store: Arc<dyn BlobStore>,
    key: StorageKey,
    position: u64,
    /// The store's stream from `position` on, opened on the first read after a seek (in a
    /// mutex only because dav-server wants files `Sync`; `&mut self` reaches it without locking).
    stream: std::sync::Mutex<Option<ByteStream>>,
    /// Bytes already taken from `stream` but not yet handed out.
    pending: Bytes,
}

impl std::fmt::Debug for ReadFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadFile").field("key", &self.key.as_str()).field("position", &self.position).finish()
    }
}

impl ReadFile {
    pub async fn open(ctx: &AppState, user: Uuid, entry: &PathEntry) -> Result<Self, FsError> {
        let download = transfers::open_owned(ctx, user, entry.id).await.map_err(fs_error)?;
        let mut meta = Meta::of(entry);
        meta.size = download.size;
        Ok(Self {
            meta,
            store: download.store,
            key: download.key,
            position: 0,
            stream: Default::default(),
            pending: Bytes::new(),
        })
    }
}

impl DavFile for ReadFile {
    fn metadata(&'_ mut self) -> FsFuture<'_, Box<dyn DavMetaData>> {
        let meta: Box<dyn DavMetaData> = Box::new(self.meta.clone());
        async move { Ok(meta) }.boxed()
    }

    fn write_buf(&'_ mut self, _buf: Box<dyn Buf + Send>) -> FsFuture<'_, ()> {
        async { Err(FsError::Forbidden) }.boxed()
    }

    fn write_bytes(&'_ mut self, _buf: Bytes) -> FsFuture<'_, ()> {
        async { Err(FsError::Forbidden) }.boxed()
    }

    fn read_bytes(&'_ mut self, count: usize) -> FsFuture<'_, Bytes> {
        async move {
            if self.position >= self.meta.size || count == 0 {
                return Ok(Bytes::new());
            }
            if self.pending.is_empty() {
                let slot = self.stream.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
                if slot.is_none() {
                    let range = ByteRange { start: self.position, end_inclusive: self.meta.size - 1 };
                    let stream = self.store.get(&self.key, Some(range)).await.map_err(|error| {
                        tracing::warn!(%error, key = %self.key, "cannot read a blob for WebDAV");
                        FsError::GeneralFailure
                    })?;
                    *slot = Some(stream);
                }
                let stream = slot.as_mut().ok_or(FsError::GeneralFailure)?;
                match stream.next().await {
                    Some(Ok(piece)) => self.pending = piece,
                    Some(Err(error)) => {
                        tracing::warn!(%error, key = %self.key, "a blob stream failed");
                        return Err(FsError::GeneralFailure);
                    }
                    None => return Ok(Bytes::new()),
                }
            }
            let piece = self.pending.split_to(count.min(self.pending.len()));
            self.position += piece.len() as u64;
            Ok(piece)
        }
        .boxed()
    }

    fn seek(&'_ mut self, pos: SeekFrom) -> FsFuture<'_, u64> {
        async move {
            let target = match pos {
                SeekFrom::Start(offset) => Some(offset),
                SeekFrom::Current(delta) => self.position.checked_add_signed(delta),
                SeekFrom::End(delta) => self.meta.size.checked_add_signed(delta),
            }
            .ok_or(FsError::GeneralFailure)?;
            if target != self.position {
                self.position = target;
                *self.stream.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                self.pending = Bytes::new();
            }
            Ok(target)
        }
        .boxed()
    }

    fn flush(&'_ mut self) -> FsFuture<'_, ()> {
        async { Ok(()) }.boxed()
    }
}

/// What the handler sends the write task.
enum Piece {
    Data(Bytes),
    /// Every byte was sent: the body is complete.
    End,
}

/// The body as the write task reads it. The channel closing without [`Piece::End`] means the
/// writer went away: the stream then fails, so nothing incomplete is kept.
fn body_stream(receiver: mpsc::Receiver<Piece>) -> ByteStream {
    Box::pin(futures_util::stream::unfold(Some(receiver), |receiver| async move {
        let mut receiver = receiver?;
        match receiver.recv().await {
            Some(Piece::Data(bytes)) => Some((Ok(bytes), Some(receiver))),
            Some(Piece::End) => None,
            None => Some((
                Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the WebDAV upload was cut off")),
                None,
            )),
        }
    }))
}

type WriteTask = JoinHandle<ServiceResult<PathEntry>>;

/// A file being written.
pub struct WriteFile {
    limit: ByteLimit,
    sender: Option<mpsc::Sender<Piece>>,
    task: Option<WriteTask>,
    expected: Option<u64>,
    written: u64,
    written_meta: Option<Meta>,
}

impl std::fmt::Debug for WriteFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteFile").field("expected", &self.expected).field("written", &self.written).finish()
    }
}

impl WriteFile {
    pub fn start(ctx: &AppState, plan: PlannedWrite, expected: Option<u64>) -> Self {
        let limit = plan.byte_limit();
        let (sender, receiver) = mpsc::channel(WRITE_QUEUE);
        let ctx = ctx.clone();
        let task = tokio::spawn(async move { plan.write(&ctx, body_stream(receiver)).await });
        Self { limit, sender: Some(sender), task: Some(task), expected, written: 0, written_meta: None }
    }

    /// Waits for the write task and answers its refusal (or a generic failure).
    async fn outcome(&mut self) -> Result<PathEntry, FsError> {
        self.sender = None;
        let task = self.task.take().ok_or(FsError::GeneralFailure)?;
        match task.await {
            Ok(Ok(written)) => Ok(written),
            Ok(Err(error)) => Err(fs_error(error)),
            Err(error) => {
                tracing::error!(%error, "a WebDAV write task failed");
                Err(FsError::GeneralFailure)
            }
        }
    }

    /// Ends the write without its end marker, so the task removes what it stored and gives the
    /// quota back, and answers `error`.
    async fn abandon(&mut self, error: FsError) -> FsError {
        let _ = self.outcome().await;
        error
    }

    async fn send(&mut self, bytes: Bytes) -> Result<(), FsError> {
        self.written += bytes.len() as u64;
        if self.written > self.limit.bytes() {
            // Refused here, at once: the write task may not have seen these bytes yet, and a
            // client that pauses now would otherwise wait for an answer that needs more body.
            return Err(self.abandon(fs_error(self.limit.refusal(self.written))).await);
        }
        if self.expected.is_some_and(|expected| self.written > expected) {
            return Err(self.abandon(FsError::GeneralFailure).await);
        }
        let sender = self.sender.as_ref().ok_or(FsError::GeneralFailure)?;
        if sender.send(Piece::Data(bytes)).await.is_err() {
            // The task stopped reading: it failed (quota, size limit, storage); say why.
            return Err(self.outcome().await.err().unwrap_or(FsError::GeneralFailure));
        }
        Ok(())
    }
}

impl DavFile for WriteFile {
    fn metadata(&'_ mut self) -> FsFuture<'_, Box<dyn DavMetaData>> {
        let meta =
            self.written_meta.clone().unwrap_or(Meta { size: self.written, is_dir: false, created: 0, modified: 0 });
        async move { Ok(Box::new(meta) as Box<dyn DavMetaData>) }.boxed()
    }

    fn write_buf(&'_ mut self, mut buf: Box<dyn Buf + Send>) -> FsFuture<'_, ()> {
        async move {
            let bytes = buf.copy_to_bytes(buf.remaining());
            self.send(bytes).await
        }
        .boxed()
    }

    fn write_bytes(&'_ mut self, buf: Bytes) -> FsFuture<'_, ()> {
        async move { self.send(buf).await }.boxed()
    }

    fn read_bytes(&'_ mut self, _count: usize) -> FsFuture<'_, Bytes> {
        async { Err(FsError::Forbidden) }.boxed()
    }

    fn seek(&'_ mut self, pos: SeekFrom) -> FsFuture<'_, u64> {
        // Only the start of a new file can be written.
        async move { if pos == SeekFrom::Start(0) && self.written == 0 { Ok(0) } else { Err(FsError::NotImplemented) } }
            .boxed()
    }

    /// Completes the write: the file appears (or gets its new content) now, or the write fails.
    fn flush(&'_ mut self) -> FsFuture<'_, ()> {
        async move {
            if self.task.is_none() {
                return Ok(());
            }
            if self.expected.is_some_and(|expected| self.written != expected) {
                // Fewer bytes than declared.
                return Err(self.abandon(FsError::GeneralFailure).await);
            }
            if let Some(sender) = &self.sender
                && sender.send(Piece::End).await.is_err()
            {
                return Err(self.outcome().await.err().unwrap_or(FsError::GeneralFailure));
            }
            // The stored size and times, so the ETag answered now is the one later requests see.
            let written = self.outcome().await?;
            self.written_meta = Some(Meta::of(&written));
            Ok(())
        }
        .boxed()
    }
}
