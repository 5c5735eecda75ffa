//! Open WebDAV files. Reading streams the blob from its store from the current position on;
//! writing runs a `writes::PlannedWrite`, which makes the file visible only once every byte
//! has arrived. A small body is held and written whole at `flush` (not at all when the policy
//! holds the same content already); a larger one is fed through a
//! bounded channel to the write as its own task. A write whose handle is dropped before `flush`
//! (client gone, error) stores nothing, or ends the task's body stream with an error, so the
//! task removes what it stored and gives the quota back.

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
use crate::context::Context;
use crate::error::ServiceResult;
use crate::service::downloads;
use crate::service::files::PathEntry;
use crate::service::writes::{ByteLimit, PlannedWrite};

/// Request-body pieces in flight between the handler and the write task.
const WRITE_QUEUE: usize = 8;
/// Bodies up to this size are held and written at `flush`, without the channel.
const INLINE_WRITE: u64 = 64 * 1024;

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
    pub async fn open(ctx: &Context, user: Uuid, entry: &PathEntry) -> Result<Self, FsError> {
        let download = downloads::open_owned(ctx, user, entry.id).await.map_err(fs_error)?;
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

/// Where a write's bytes go.
enum Destination {
    /// The body so far, held until it passes [`INLINE_WRITE`] bytes or ends. A body that ends
    /// first is written at `flush` by a task given the whole body: a small file needs no
    /// hand-offs through a channel.
    Held { plan: Box<PlannedWrite>, pieces: Vec<Bytes> },
    /// The write task, fed through a bounded channel: a large body streams.
    Streaming { sender: mpsc::Sender<Piece>, task: WriteTask },
    /// The write completed or was given up.
    Ended,
}

/// What a write task answers: the file written, its refusal, or a generic failure.
async fn written(
    task: impl Future<Output = Result<ServiceResult<PathEntry>, tokio::task::JoinError>>,
) -> Result<PathEntry, FsError> {
    match task.await {
        Ok(Ok(written)) => Ok(written),
        Ok(Err(error)) => Err(fs_error(error)),
        Err(error) => {
            tracing::error!(%error, "a WebDAV write task failed");
            Err(FsError::GeneralFailure)
        }
    }
}

/// A file being written.
pub struct WriteFile {
    ctx: Context,
    limit: ByteLimit,
    destination: Destination,
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
    pub fn start(ctx: &Context, plan: PlannedWrite, expected: Option<u64>) -> Self {
        Self {
            ctx: ctx.clone(),
            limit: plan.byte_limit(),
            destination: Destination::Held { plan: Box::new(plan), pieces: Vec::new() },
            expected,
            written: 0,
            written_meta: None,
        }
    }

    /// Ends the write and answers what the write task (if one started) says (see [`written`]).
    /// Held bytes are dropped: nothing of them was stored.
    async fn outcome(&mut self) -> Result<PathEntry, FsError> {
        let Destination::Streaming { sender, task } = std::mem::replace(&mut self.destination, Destination::Ended)
        else {
            return Err(FsError::GeneralFailure);
        };
        // Without its sender the task's body ends: after the end marker, complete; before it,
        // cut off (the task then removes what it stored).
        drop(sender);
        written(task).await
    }

    /// Ends the write without its end marker, so a write task removes what it stored and gives
    /// the quota back, and answers `error`.
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
        if let Destination::Held { pieces, .. } = &mut self.destination {
            pieces.push(bytes);
            if self.written <= INLINE_WRITE {
                return Ok(());
            }
            self.start_streaming().await
        } else {
            self.feed(Piece::Data(bytes)).await
        }
    }

    /// Starts the write task and hands it the held bytes.
    async fn start_streaming(&mut self) -> Result<(), FsError> {
        let Destination::Held { plan, pieces } = std::mem::replace(&mut self.destination, Destination::Ended) else {
            return Err(FsError::GeneralFailure);
        };
        let (sender, receiver) = mpsc::channel(WRITE_QUEUE);
        let task = self.spawn_write(*plan, body_stream(receiver));
        self.destination = Destination::Streaming { sender, task };
        for piece in pieces {
            self.feed(Piece::Data(piece)).await?;
        }
        Ok(())
    }

    /// Sends the write task a piece; when it has stopped reading (quota, size limit, storage
    /// failure), answers why.
    async fn feed(&mut self, piece: Piece) -> Result<(), FsError> {
        let Destination::Streaming { sender, .. } = &self.destination else {
            return Err(FsError::GeneralFailure);
        };
        if sender.send(piece).await.is_err() {
            return Err(self.outcome().await.err().unwrap_or(FsError::GeneralFailure));
        }
        Ok(())
    }

    /// Completes the write with every byte sent: stores held bytes in this task, or tells the
    /// write task the body ended and waits for it.
    async fn complete(&mut self) -> Result<PathEntry, FsError> {
        match std::mem::replace(&mut self.destination, Destination::Ended) {
            Destination::Held { plan, pieces } => {
                let ctx = self.ctx.clone();
                written(finish_even_if_dropped(async move { plan.write_whole(&ctx, pieces).await })).await
            }
            streaming => {
                self.destination = streaming;
                self.feed(Piece::End).await?;
                self.outcome().await
            }
        }
    }

    /// Runs the write as a task of its own (as `complete` does a held body's): a client that
    /// hangs up does not cut it off between storing the bytes and committing the file.
    fn spawn_write(&self, plan: PlannedWrite, body: ByteStream) -> WriteTask {
        let ctx = self.ctx.clone();
        tokio::spawn(async move { plan.write(&ctx, body).await })
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
            if matches!(self.destination, Destination::Ended) {
                return Ok(());
            }
            if self.expected.is_some_and(|expected| self.written != expected) {
                // Fewer bytes than declared.
                return Err(self.abandon(FsError::GeneralFailure).await);
            }
            // The stored size and times, so the ETag answered now is the one later requests see.
            let written = self.complete().await?;
            self.written_meta = Some(Meta::of(&written));
            Ok(())
        }
        .boxed()
    }
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
