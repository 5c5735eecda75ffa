//! Open WebDAV files. Reading streams the blob from its store from the current position on;
//! writing forwards the body to a `writes::Write`, which makes the file visible only once every
//! byte has arrived (at `flush`); a write dropped before `flush` (client gone, error) leaves
//! nothing.

use std::io::SeekFrom;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use dav_server::fs::{DavFile, DavMetaData, FsError, FsFuture};
use futures_util::{FutureExt, StreamExt};
use nubo_common::storage::{BlobStore, ByteRange, ByteStream, StorageKey};

use super::fs::{Meta, fs_error};
use nubo_model::domain::ids::UserId;
use nubo_service::content::downloads;
use nubo_service::content::writes::Write;
use nubo_service::context::Context;
use nubo_service::tree::files::PathEntry;

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
    pub async fn open(ctx: &Context, user: UserId, entry: &PathEntry) -> Result<Self, FsError> {
        let download = downloads::open_entry(ctx, user, entry).await.map_err(fs_error)?;
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

/// A file being written: forwards the body to the service's [`Write`], which holds, limits
/// and commits it.
pub struct WriteFile {
    write: Write,
    written_meta: Option<Meta>,
}

impl std::fmt::Debug for WriteFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteFile").field("written", &self.write.written()).finish()
    }
}

impl WriteFile {
    pub fn new(write: Write) -> Self {
        Self { write, written_meta: None }
    }
}

impl DavFile for WriteFile {
    fn metadata(&'_ mut self) -> FsFuture<'_, Box<dyn DavMetaData>> {
        let written = self.write.written();
        let meta = self.written_meta.clone().unwrap_or(Meta { size: written, is_dir: false, created: 0, modified: 0 });
        async move { Ok(Box::new(meta) as Box<dyn DavMetaData>) }.boxed()
    }

    fn write_buf(&'_ mut self, mut buf: Box<dyn Buf + Send>) -> FsFuture<'_, ()> {
        async move {
            let bytes = buf.copy_to_bytes(buf.remaining());
            self.write.push(bytes).await.map_err(fs_error)
        }
        .boxed()
    }

    fn write_bytes(&'_ mut self, buf: Bytes) -> FsFuture<'_, ()> {
        async move { self.write.push(buf).await.map_err(fs_error) }.boxed()
    }

    fn read_bytes(&'_ mut self, _count: usize) -> FsFuture<'_, Bytes> {
        async { Err(FsError::Forbidden) }.boxed()
    }

    fn seek(&'_ mut self, pos: SeekFrom) -> FsFuture<'_, u64> {
        // Only the start of a new file can be written.
        let at_start = pos == SeekFrom::Start(0) && self.write.written() == 0;
        async move { if at_start { Ok(0) } else { Err(FsError::NotImplemented) } }.boxed()
    }

    /// Completes the write: the file appears (or gets its new content) now, or the write fails.
    fn flush(&'_ mut self) -> FsFuture<'_, ()> {
        async move {
            if self.write.ended() {
                return Ok(());
            }
            // The stored size and times, so the ETag answered now is the one later requests see.
            let written = self.write.finish().await.map_err(fs_error)?;
            self.written_meta = Some(Meta::of(&written));
            Ok(())
        }
        .boxed()
    }
}
