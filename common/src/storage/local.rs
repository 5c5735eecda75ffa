//! Blobs as files under one root directory: blob `key` lives at `root/key`, a staged upload's
//! chunks at `root/.staging/<uuid>/c<index>-<uuid>` (one file per copy of a chunk, written by
//! one request only). Owns nothing outside its root.
//!
//! A streamed blob appears at its key only by a hard link from a complete, fsynced staging
//! file; a body that arrives whole before its first write batch is created at its key directly
//! (see `write_in_place`). Either way an existing blob is never replaced, and no record names
//! a key before its bytes are complete, so no reader sees a partial blob.

use std::io::{self, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::fs;
use tokio::io::AsyncWriteExt;

use super::{
    BlobStore, ByteRange, ByteStream, ChunkReceipt, ListedBlob, ListedObject, ListingStream, PROBE_AREA, PutOutcome,
    StagedUpload, StorageError, StorageKey, StorageResult, check_upload_shape,
};
use crate::hash::{ChunkHasher, StreamHasher, hash_hex};

/// Name of the staging directory under the root; no key may start with it.
const STAGING: &str = ".staging";
/// Bytes read per blocking job when a blob is streamed out (one more is read ahead while the
/// last is sent): memory per download stays bounded, trips to the blocking pool stay few.
const READ_PIECE: u64 = 1024 * 1024;
/// Bytes read per piece on the polling thread when the page cache holds them: small enough that
/// a cached range reaches the client in several pieces, the client taking in one while the next
/// is read, large enough that a big download takes few polls.
const CACHED_PIECE: u64 = 256 * 1024;
/// A streamed body is gathered into batches of this size, each written by one blocking job: a
/// small file costs one trip to the blocking pool (not one per file operation), a large one a
/// trip per batch (not per network piece).
const WRITE_BATCH: usize = 1024 * 1024;
/// A body of at most this many bytes that arrived whole, for a store that does not sync, is
/// written on the calling thread: creating a file and copying this much into the page cache
/// takes less time than handing the job to the blocking pool and back (two thread wake-ups on
/// every small WebDAV `PUT`). Larger bodies, and every write that syncs, go to the blocking pool.
const WRITE_HERE_MAX: usize = 64 * 1024;

/// A durable write asks the kernel to start writing its bytes to disk each time this many more
/// have been written ([`start_writeback`]).
const WRITEBACK_STEP: u64 = 8 * 1024 * 1024;

/// Blob storage on a local (or mounted) filesystem.
#[derive(Debug, Clone)]
pub struct LocalBlobStore {
    root: PathBuf,
    /// Whether a blob and its directory entry are fsynced before a write completes.
    durable: bool,
}

impl LocalBlobStore {
    /// A store rooted at `root`, which is created on the first write if missing. Writes are
    /// durable (fsynced) unless [`LocalBlobStore::durable`] says otherwise.
    pub fn new(root: PathBuf) -> Self {
        Self { root, durable: true }
    }

    /// With `false`, a write completes once its bytes are in the page cache (no fsync of the
    /// blob or its directory): faster, but a power cut can lose what was written just before.
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = durable;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn blob_path(&self, key: &StorageKey) -> StorageResult<PathBuf> {
        // Keys are relative and free of `..` (see StorageKey); only the staging area needs guarding.
        if key.as_str().split('/').next() == Some(STAGING) {
            return Err(StorageError::InvalidKey(key.to_string()));
        }
        Ok(self.root.join(key.as_str()))
    }

    fn staging_path(&self, handle: &str) -> StorageResult<PathBuf> {
        // The handle comes back from the caller's records: accept only what begin_upload makes.
        let handle = uuid::Uuid::try_parse(handle)
            .map_err(|_| StorageError::Failed(format!("invalid staging handle {handle:?}")))?;
        Ok(self.root.join(STAGING).join(handle.simple().to_string()))
    }

    /// Removes the now-empty directories above `path`, up to (not including) the root.
    async fn prune_empty_parents(&self, path: &Path) {
        let mut dir = path.parent();
        while let Some(current) = dir {
            if current == self.root || !current.starts_with(&self.root) {
                break;
            }
            // Fails on a non-empty directory (or a race with a writer): either way, stop here.
            if fs::remove_dir(current).await.is_err() {
                break;
            }
            dir = current.parent();
        }
    }
}

#[async_trait]
impl BlobStore for LocalBlobStore {
    fn kind(&self) -> &'static str {
        "local"
    }

    async fn begin_upload(&self, key: &StorageKey, size: u64, chunk_size: u64) -> StorageResult<StagedUpload> {
        check_upload_shape(size, chunk_size)?;
        self.blob_path(key)?;
        let handle = uuid::Uuid::new_v4().simple().to_string();
        let dir = self.staging_path(&handle)?;
        fs::create_dir_all(&dir).await.map_err(|err| io_failure("create a staging directory", err))?;
        // A sparse file of the full length, removed at once: a size the file system cannot
        // hold is refused now, before any byte is sent.
        let probe = dir.join("size-probe");
        let sized = async {
            let file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&probe)
                .await
                .map_err(|err| io_failure("create a staging file", err))?;
            file.set_len(size).await.map_err(|err| match err.kind() {
                // EFBIG: beyond the file system's largest file (16 TiB on ext4 with 4 KiB blocks).
                io::ErrorKind::FileTooLarge | io::ErrorKind::InvalidInput => {
                    StorageError::SizeUnsupported { size, why: "larger than the file system allows".to_owned() }
                }
                _ => io_failure("size the staging file", err),
            })
        }
        .await;
        remove_leftover(&probe);
        if let Err(err) = sized {
            let _ = fs::remove_dir_all(&dir).await;
            return Err(err);
        }
        Ok(StagedUpload { key: key.to_string(), size, chunk_size, handle })
    }

    /// Writes the chunk into a file of its own, created for this request and named in the
    /// receipt (`etag`), so the receipt's chaining value is a fact about that file's bytes: no
    /// other request ever writes it, a failed write removes it, and completion assembles
    /// exactly the files the receipts name. Earlier copies of the chunk are removed first (the
    /// caller drops their receipts before sending the chunk again).
    async fn put_chunk(&self, upload: &StagedUpload, index: u32, mut body: ByteStream) -> StorageResult<ChunkReceipt> {
        check_upload_shape(upload.size, upload.chunk_size)?;
        let expected = upload.expect_chunk(index)?;
        let mut hasher = ChunkHasher::new(index, upload.chunk_size, upload.size)
            .map_err(|err| StorageError::Failed(err.to_string()))?;
        let dir = self.staging_path(&upload.handle)?;
        let gone = || StorageError::NotFound(format!("staged upload {}", upload.handle));
        remove_chunk_copies(&dir, index).await.map_err(|err| match missing(&err) {
            true => gone(),
            false => io_failure("remove an earlier copy of a chunk", err),
        })?;
        let name = chunk_file_name(index);
        let path = dir.join(&name);
        let mut file = fs::OpenOptions::new().write(true).create_new(true).open(&path).await.map_err(|err| {
            match missing(&err) {
                true => gone(),
                false => io_failure("create a chunk file", err),
            }
        })?;
        // Removes the chunk file unless it is complete (also when the request goes away).
        let guard = StagingGuard::new(path);
        while let Some(piece) = body.next().await {
            let piece = piece.map_err(|err| StorageError::Body(err.to_string()))?;
            let actual = hasher.received() + piece.len() as u64;
            // Stop reading as soon as the chunk is too long: never write past its end.
            if actual > expected {
                return Err(StorageError::LengthMismatch { expected, actual });
            }
            file.write_all(&piece).await.map_err(|err| io_failure("write a chunk", err))?;
            hasher.update(&piece);
        }
        if hasher.received() != expected {
            return Err(StorageError::LengthMismatch { expected, actual: hasher.received() });
        }
        // tokio writes in the background: flush so the bytes are in the file before answering.
        file.flush().await.map_err(|err| io_failure("write a chunk", err))?;
        drop(file);
        let chaining_value = hasher.finalize().map_err(|err| StorageError::Failed(err.to_string()))?;
        guard.disarm();
        Ok(ChunkReceipt { index, size: expected, etag: Some(name), chaining_value })
    }

    /// Copies the chunk files the receipts name, in index order, into a new file and links that
    /// to the key: the blob is a copy no chunk writer holds open, so a writer still in flight
    /// (or one arriving late) can never change the published bytes. An upload of one chunk
    /// links the file its receipt names, which no writer holds open either.
    async fn complete_upload(&self, upload: &StagedUpload, chunks: &[ChunkReceipt]) -> StorageResult<()> {
        upload.check_receipts(chunks)?;
        let key = StorageKey::parse(&upload.key)?;
        let dir = self.staging_path(&upload.handle)?;
        let target = self.blob_path(&key)?;
        let mut receipts = chunks.to_vec();
        receipts.sort_by_key(|receipt| receipt.index);
        let (handle, durable) = (upload.handle.clone(), self.durable);
        run_blocking(move || {
            let made = match receipts.as_slice() {
                // One chunk: its file is the blob as it is. Its writer closed it before the
                // receipt was made and every other copy of the chunk is a file of its own, so
                // nobody writes to it any more and nothing needs copying.
                [only] => whole_chunk(&dir, only, durable),
                _ => {
                    let assembled = dir.join(format!("assembled-{}", uuid::Uuid::new_v4().simple()));
                    let made = assemble(&dir, &assembled, &receipts, durable);
                    if made.is_err() {
                        remove_leftover(&assembled);
                    }
                    made.map(|()| assembled)
                }
            };
            let blob = made.map_err(|err| match err {
                StorageError::NotFound(_) => StorageError::NotFound(format!("staged upload {handle}")),
                other => other,
            })?;
            if let Err(error) = link_into_place(&blob, &target, &key, durable) {
                if receipts.len() > 1 {
                    remove_leftover(&blob);
                }
                return Err(error);
            }
            if let Err(error) = std::fs::remove_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), %error, "could not remove staged chunks; the collector will");
            }
            Ok(())
        })
        .await
    }

    async fn abort_upload(&self, upload: &StagedUpload) -> StorageResult<()> {
        let staging = self.staging_path(&upload.handle)?;
        // A directory of chunk files (a staging file in the layout before chunk files).
        let removed = match fs::remove_dir_all(&staging).await {
            Err(err) if err.kind() == io::ErrorKind::NotADirectory => fs::remove_file(&staging).await,
            other => other,
        };
        match removed {
            Ok(()) => Ok(()),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(io_failure("remove the staged upload", err)),
        }
    }

    async fn put_stream(
        &self,
        key: &StorageKey,
        mut body: ByteStream,
        max_len: Option<u64>,
    ) -> StorageResult<PutOutcome> {
        let target = self.blob_path(key)?;
        let guard = StagingGuard::new(self.root.join(STAGING).join(uuid::Uuid::new_v4().simple().to_string()));
        let mut staging = Some(StreamStaging::new(&guard, self.durable));
        // The blocking write of the previous batch runs while the next one arrives.
        let mut writing: Option<tokio::task::JoinHandle<StorageResult<(StreamStaging, Vec<u8>)>>> = None;
        let mut batch = Vec::new();
        let mut received = 0_u64;
        while let Some(piece) = body.next().await {
            let piece = piece.map_err(|err| StorageError::Body(err.to_string()))?;
            received += piece.len() as u64;
            if let Some(limit) = max_len
                && received > limit
            {
                // The guard removes the partial staging file.
                return Err(StorageError::TooLarge { limit });
            }
            batch.extend_from_slice(&piece);
            if batch.len() >= WRITE_BATCH {
                let (mut current, spare) = match writing.take() {
                    Some(job) => joined(job.await)??,
                    None => (staging.take().ok_or_else(lost_staging)?, Vec::new()),
                };
                let full = std::mem::replace(&mut batch, spare);
                writing = Some(tokio::task::spawn_blocking(move || {
                    current.append(&full)?;
                    let mut spare = full;
                    spare.clear();
                    Ok((current, spare))
                }));
            }
        }
        let key = key.clone();
        let outcome = match writing.take() {
            Some(job) => {
                let mut last = joined(job.await)??.0;
                run_blocking(move || {
                    last.append(&batch)?;
                    last.finish(&target, &key)
                })
                .await?
            }
            // The whole body arrived before a batch was written: it needs no staging file.
            None if !self.durable && batch.len() <= WRITE_HERE_MAX => {
                write_in_place(&target, &key, &batch, false, &guard.abandoned)?
            }
            None => {
                let (abandoned, durable) = (Arc::clone(&guard.abandoned), self.durable);
                run_blocking(move || write_in_place(&target, &key, &batch, durable, &abandoned)).await?
            }
        };
        guard.disarm();
        Ok(outcome)
    }

    async fn get(&self, key: &StorageKey, range: Option<ByteRange>) -> StorageResult<ByteStream> {
        let path = self.blob_path(key)?;
        // A blob the kernel has cached is read here, without a trip to the blocking pool (two
        // thread hand-offs, most of a small download's cost); only one that needs the disk goes.
        if let Some(opened) = read_cached(&path, key, range)? {
            return Ok(read_stream(opened));
        }
        let key = key.clone();
        // Open, check and read the first piece in one trip: a small blob costs one.
        let opened = run_blocking(move || {
            let mut file = std::fs::File::open(&path).map_err(|err| not_found_or(&key, "open a blob", err))?;
            let metadata = file.metadata().map_err(|err| io_failure("inspect a blob", err))?;
            let (start, len) = span(&key, &metadata, range)?;
            let first = read_piece(&mut file, start, len).map_err(|err| io_failure("read a blob", err))?;
            let next = start + first.len() as u64;
            let remaining = if first.is_empty() { 0 } else { len - first.len() as u64 };
            Ok(Opened { file, first, next, remaining })
        })
        .await?;
        Ok(read_stream(opened))
    }

    async fn size(&self, key: &StorageKey) -> StorageResult<Option<u64>> {
        let path = self.blob_path(key)?;
        match fs::metadata(&path).await {
            Ok(metadata) if metadata.is_file() => Ok(Some(metadata.len())),
            Ok(_) => Ok(None),
            Err(err) if missing(&err) => Ok(None),
            Err(err) => Err(io_failure("inspect a blob", err)),
        }
    }

    async fn delete(&self, key: &StorageKey) -> StorageResult<()> {
        let path = self.blob_path(key)?;
        match fs::remove_file(&path).await {
            Ok(()) => {}
            // Nothing there (or only a directory of other keys): already deleted.
            Err(err) if missing(&err) || err.kind() == io::ErrorKind::IsADirectory => return Ok(()),
            Err(err) => return Err(io_failure("delete a blob", err)),
        }
        self.prune_empty_parents(&path).await;
        Ok(())
    }

    async fn presigned_get(
        &self,
        _key: &StorageKey,
        _expires: Duration,
        _file_name: &str,
    ) -> StorageResult<Option<String>> {
        Ok(None)
    }

    async fn list(&self) -> StorageResult<Vec<ListedBlob>> {
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || {
            let mut found = Vec::new();
            let mut pending = vec![root.clone()];
            while let Some(dir) = pending.pop() {
                let entries = match std::fs::read_dir(&dir) {
                    Ok(entries) => entries,
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(err) => return Err(StorageError::Failed(format!("cannot list {}: {err}", dir.display()))),
                };
                for entry in entries.flatten() {
                    let path = entry.path();
                    let Ok(meta) = entry.metadata() else { continue };
                    if meta.is_dir() {
                        if dir != root || entry.file_name() != STAGING {
                            pending.push(path);
                        }
                        continue;
                    }
                    let Ok(relative) = path.strip_prefix(&root) else { continue };
                    let key =
                        relative.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
                    let modified_ms = meta
                        .modified()
                        .ok()
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .map_or(0, |d| d.as_millis() as i64);
                    found.push(ListedBlob { key, modified_ms });
                }
            }
            Ok(found)
        })
        .await
        .map_err(|e| StorageError::Failed(e.to_string()))?
    }

    fn list_below(&self, folder: Option<&StorageKey>) -> ListingStream {
        let (root, start) = (self.root.clone(), folder.map(|folder| folder.as_str().to_owned()));
        let (sender, receiver) = tokio::sync::mpsc::channel(LISTING_QUEUE);
        tokio::task::spawn_blocking(move || walk(&root, start.as_deref(), &sender));
        Box::pin(futures_util::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|item| (item, receiver))
        }))
    }

    async fn check(&self) -> StorageResult<()> {
        super::check_with_probe(self).await
    }
}

/// Listed objects in flight between the directory walk and its reader: the walk waits for a
/// slow reader instead of holding the whole listing.
const LISTING_QUEUE: usize = 256;

/// Walks the directory `start` below `root` (all of it for `None`) depth first and sends each
/// regular file, until done or the reader goes away. Symbolic links are not followed or listed
/// (a link could lead outside the root); the staging and probe areas are skipped; names that
/// are not UTF-8 cannot be keys and are skipped with a warning.
fn walk(root: &Path, start: Option<&str>, sender: &tokio::sync::mpsc::Sender<StorageResult<ListedObject>>) {
    let first = start.map_or_else(|| root.to_path_buf(), |start| root.join(start));
    let top = start.and_then(|start| start.split('/').next());
    if top.is_some_and(|top| top == STAGING || top == PROBE_AREA) {
        return;
    }
    // A start folder reached through a symbolic link could lie outside the root.
    let mut below = root.to_path_buf();
    for segment in start.into_iter().flat_map(|start| start.split('/')) {
        below.push(segment);
        if std::fs::symlink_metadata(&below).is_ok_and(|meta| meta.file_type().is_symlink()) {
            return;
        }
    }
    let mut pending = vec![first];
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
            Err(err) => {
                let _ = sender.blocking_send(Err(io_failure(&format!("list {}", dir.display()), err)));
                return;
            }
        };
        let mut names: Vec<std::fs::DirEntry> = entries.flatten().collect();
        names.sort_by_key(std::fs::DirEntry::file_name);
        for entry in names {
            let Ok(kind) = entry.file_type() else { continue };
            let path = entry.path();
            let own_area = dir == root && (entry.file_name() == STAGING || entry.file_name() == PROBE_AREA);
            if kind.is_symlink() || own_area {
                continue;
            }
            if kind.is_dir() {
                pending.push(path);
                continue;
            }
            if !kind.is_file() {
                continue;
            }
            let Some(key) = path.strip_prefix(root).ok().and_then(|relative| {
                let parts: Option<Vec<&str>> = relative.components().map(|c| c.as_os_str().to_str()).collect();
                parts.map(|parts| parts.join("/"))
            }) else {
                tracing::warn!(path = %path.display(), "a file whose name is not UTF-8 is not listed");
                continue;
            };
            let Ok(meta) = entry.metadata() else { continue };
            let modified_ms = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_millis() as i64);
            let listed = ListedObject { key, size: meta.len(), modified_ms, etag: None };
            if sender.blocking_send(Ok(listed)).is_err() {
                return;
            }
        }
    }
}

/// Removes a staging file when an upload is abandoned midway, including when the request's
/// future is dropped. Unlinking is quick enough to do synchronously in `Drop`. A blocking job
/// still writing the file when the guard goes sees `abandoned` and removes what it creates.
struct StagingGuard {
    path: Option<PathBuf>,
    abandoned: Arc<AtomicBool>,
}

impl StagingGuard {
    fn new(path: PathBuf) -> Self {
        Self { path: Some(path), abandoned: Arc::default() }
    }

    fn path(&self) -> &Path {
        self.path.as_deref().unwrap_or(Path::new(""))
    }

    fn disarm(mut self) {
        self.path = None;
    }
}

impl Drop for StagingGuard {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            // First the flag, then the unlink: a job either finds the flag or made its file
            // before the unlink below.
            self.abandoned.store(true, Ordering::SeqCst);
            remove_leftover(&path);
        }
    }
}

/// A streamed body on its way into a staging file, written by blocking jobs: the first creates
/// the file, the last syncs it and links it into place. Hashing happens there too, off the
/// runtime's threads.
struct StreamStaging {
    path: PathBuf,
    file: Option<std::fs::File>,
    hasher: StreamHasher,
    abandoned: Arc<AtomicBool>,
    durable: bool,
    /// Where the bytes not yet handed to [`start_writeback`] begin.
    writeback_from: u64,
}

impl StreamStaging {
    fn new(guard: &StagingGuard, durable: bool) -> Self {
        Self {
            path: guard.path().to_path_buf(),
            file: None,
            hasher: StreamHasher::new(),
            abandoned: Arc::clone(&guard.abandoned),
            durable,
            writeback_from: 0,
        }
    }

    fn file(&mut self) -> StorageResult<&mut std::fs::File> {
        if self.file.is_none() {
            let create = || std::fs::OpenOptions::new().write(true).create_new(true).open(&self.path);
            // The staging directory exists after the first write: create it only when missing.
            let file = match create() {
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    if let Some(dir) = self.path.parent() {
                        std::fs::create_dir_all(dir).map_err(|err| io_failure("create the staging directory", err))?;
                    }
                    create()
                }
                created => created,
            }
            .map_err(|err| io_failure("create a staging file", err))?;
            if self.abandoned.load(Ordering::SeqCst) {
                remove_leftover(&self.path);
                return Err(StorageError::Body("the upload was abandoned".to_owned()));
            }
            self.file = Some(file);
        }
        self.file.as_mut().ok_or_else(lost_staging)
    }

    fn append(&mut self, bytes: &[u8]) -> StorageResult<()> {
        use std::io::Write as _;
        self.file()?.write_all(bytes).map_err(|err| io_failure("write a blob", err))?;
        let written_before = self.hasher.len();
        self.hasher.update(bytes);
        if self.durable
            && let Some((offset, len)) = writeback_due(self.writeback_from, written_before, self.hasher.len())
        {
            start_writeback(self.file()?, offset, len);
            self.writeback_from = offset + len;
        }
        Ok(())
    }

    /// Syncs the staging file (when durable) and links it to `target`.
    fn finish(mut self, target: &Path, key: &StorageKey) -> StorageResult<PutOutcome> {
        let durable = self.durable;
        let file = self.file()?;
        if durable {
            file.sync_all().map_err(|err| io_failure("sync a blob", err))?;
        }
        self.file = None;
        if self.abandoned.load(Ordering::SeqCst) {
            return Err(StorageError::Body("the upload was abandoned".to_owned()));
        }
        link_into_place(&self.path, target, key, self.durable)?;
        Ok(PutOutcome { size: self.hasher.len(), blake3: self.hasher.finalize() })
    }
}

/// The range to hand to [`start_writeback`] once `written_before` bytes grew to `written`, when
/// the bytes from `from` on reached the next multiple of [`WRITEBACK_STEP`]: whole steps, so
/// the final sync is left at most a step (plus the last write) to wait for.
fn writeback_due(from: u64, written_before: u64, written: u64) -> Option<(u64, u64)> {
    let step_end = |bytes: u64| bytes / WRITEBACK_STEP * WRITEBACK_STEP;
    let end = step_end(written);
    (end > step_end(written_before) && end > from).then(|| (from, end - from))
}

/// Asks the kernel to start writing `len` bytes of `file` from `offset` to disk, without
/// waiting for them.
///
/// Why: a durable write ends with an fsync, and on a machine with much memory the kernel starts
/// writing dirty pages on its own only once they pass a tenth of it (`dirty_background_ratio`).
/// So the fsync of a 1 GiB blob wrote all of it after its last byte arrived; started as the
/// bytes arrive, the disk works while the network does, and the fsync waits for the last step
/// only (measured: 1 GiB written and synced in 0.7–1.4 s before, ~0.6 s after).
/// `POSIX_FADV_DONTNEED` does that on Linux through a safe call: it starts the writeback of the
/// range's dirty pages and drops only pages already clean, so the bytes just written stay
/// cached. It is advice: if it fails, the final fsync writes everything, as before.
fn start_writeback(file: &std::fs::File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    if let Some(len) = std::num::NonZeroU64::new(len) {
        let _ = rustix::fs::fadvise(file, offset, Some(len), rustix::fs::Advice::DontNeed);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

/// Where a read of `range` (the whole blob when `None`) starts in the blob `metadata` describes,
/// and how many bytes it takes.
fn span(key: &StorageKey, metadata: &std::fs::Metadata, range: Option<ByteRange>) -> StorageResult<(u64, u64)> {
    // A directory at the key's path is a prefix of other keys, not a blob.
    if !metadata.is_file() {
        return Err(StorageError::NotFound(key.to_string()));
    }
    match range {
        None => Ok((0, metadata.len())),
        Some(range) if range.start < metadata.len() && range.end_inclusive >= range.start => {
            Ok((range.start, range.len()))
        }
        Some(range) => Err(StorageError::Failed(format!(
            "range {}-{} is outside the blob of {} bytes",
            range.start,
            range.end_inclusive,
            metadata.len()
        ))),
    }
}

/// The first piece of a read of `range` of the blob at `path`, the file, where the piece ends and
/// how many bytes follow it, when it takes no disk access: the path resolves from the kernel's
/// lookup cache alone (`RESOLVE_CACHED`) and the bytes come from the page cache alone
/// ([`read_cached_at`]). `None` when anything would wait for the disk (or the kernel lacks
/// either flag): read on the blocking pool.
#[cfg(target_os = "linux")]
fn read_cached(path: &Path, key: &StorageKey, range: Option<ByteRange>) -> StorageResult<Option<Opened>> {
    use rustix::fs::{CWD, Mode, OFlags, ResolveFlags, openat2};
    use rustix::io::Errno;
    let fd = match openat2(CWD, path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty(), ResolveFlags::CACHED) {
        Ok(fd) => fd,
        Err(Errno::NOENT | Errno::NOTDIR) => return Err(StorageError::NotFound(key.to_string())),
        // Not cached, an old kernel, or an error the blocking path reports in full.
        Err(_) => return Ok(None),
    };
    let file = std::fs::File::from(fd);
    let metadata = file.metadata().map_err(|err| io_failure("inspect a blob", err))?;
    let (start, len) = span(key, &metadata, range)?;
    let Some(first) = read_cached_at(&file, start, len) else {
        return Ok(None);
    };
    let next = start + first.len() as u64;
    // An empty first piece: the file ended early (truncated under us), nothing follows.
    let remaining = if first.is_empty() { 0 } else { len - first.len() as u64 };
    Ok(Some(Opened { file, first, next, remaining }))
}

#[cfg(not(target_os = "linux"))]
fn read_cached(_: &Path, _: &StorageKey, _: Option<ByteRange>) -> StorageResult<Option<Opened>> {
    Ok(None)
}

/// Up to [`CACHED_PIECE`] of the `remaining` bytes at `offset`, when the page cache holds at
/// least the first (`RWF_NOWAIT`: no disk access); fewer when the file ends early or the rest
/// would need the disk. `None` when the first byte would wait for the disk, or on an error the
/// blocking path reports in full.
#[cfg(target_os = "linux")]
fn read_cached_at(file: &std::fs::File, offset: u64, remaining: u64) -> Option<Bytes> {
    use rustix::io::{Errno, ReadWriteFlags, preadv2};
    let mut piece = vec![0; remaining.min(CACHED_PIECE) as usize];
    let mut filled = 0;
    while filled < piece.len() {
        let mut slice = [std::io::IoSliceMut::new(&mut piece[filled..])];
        match preadv2(file, &mut slice, offset + filled as u64, ReadWriteFlags::NOWAIT) {
            Ok(0) => break, // the file ended early (truncated under us)
            Ok(read) => filled += read,
            Err(Errno::INTR) => {}
            Err(_) if filled == 0 => return None,
            Err(_) => break,
        }
    }
    piece.truncate(filled);
    Some(Bytes::from(piece))
}

#[cfg(not(target_os = "linux"))]
fn read_cached_at(_: &std::fs::File, _: u64, _: u64) -> Option<Bytes> {
    None
}

/// A blob opened for a read: its first piece, where that piece ends, and how many bytes follow.
struct Opened {
    file: std::fs::File,
    first: Bytes,
    next: u64,
    remaining: u64,
}

/// Up to [`READ_PIECE`] bytes at `offset` (fewer only at the end of the file), read without
/// zeroing a buffer.
fn read_piece(file: &mut std::fs::File, offset: u64, remaining: u64) -> io::Result<Bytes> {
    use std::io::{Read as _, Seek as _};
    file.seek(SeekFrom::Start(offset))?;
    let want = remaining.min(READ_PIECE);
    let mut piece = Vec::with_capacity(want as usize);
    file.take(want).read_to_end(&mut piece)?;
    Ok(Bytes::from(piece))
}

/// The rest of a blob after its first piece. Each piece the page cache holds is read on the
/// polling thread ([`read_cached_at`]): a cached range goes out in pieces as they are read, the
/// client taking in one while the next is copied. Once a piece needs the disk, the rest is read
/// on the blocking pool, the next piece read while the last one is on its way to the client.
fn read_stream(opened: Opened) -> ByteStream {
    type ReadJob = tokio::task::JoinHandle<io::Result<(std::fs::File, Bytes)>>;
    struct Reading {
        ready: Option<Bytes>,
        file: Option<std::fs::File>,
        next: u64,
        remaining: u64,
        on_disk: bool,
        job: Option<ReadJob>,
    }
    impl Reading {
        /// Starts reading the next piece on the blocking pool.
        fn read_ahead(&mut self) {
            if let Some(mut file) = self.file.take() {
                let (offset, remaining) = (self.next, self.remaining);
                self.job = Some(tokio::task::spawn_blocking(move || {
                    let piece = read_piece(&mut file, offset, remaining)?;
                    Ok((file, piece))
                }));
            }
        }

        fn advance(&mut self, piece: Bytes) {
            self.next += piece.len() as u64;
            self.remaining = if piece.is_empty() { 0 } else { self.remaining.saturating_sub(piece.len() as u64) };
            self.ready = Some(piece);
        }
    }
    let Opened { file, first, next, remaining } = opened;
    let state = Reading { ready: Some(first), file: Some(file), next, remaining, on_disk: false, job: None };
    Box::pin(futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(piece) = state.ready.take() {
                if piece.is_empty() {
                    return None; // the file ended early (truncated under us): stop there
                }
                if state.on_disk && state.remaining > 0 {
                    state.read_ahead();
                }
                return Some((Ok(piece), state));
            }
            if let Some(job) = state.job.take() {
                match job.await {
                    Ok(Ok((file, piece))) => {
                        state.file = Some(file);
                        state.advance(piece);
                        continue;
                    }
                    Ok(Err(err)) => return Some((Err(err), state)),
                    Err(err) => return Some((Err(io::Error::other(err)), state)),
                }
            }
            if state.remaining == 0 {
                return None;
            }
            match state.file.as_ref().and_then(|file| read_cached_at(file, state.next, state.remaining)) {
                Some(piece) => state.advance(piece),
                None => {
                    state.on_disk = true;
                    state.read_ahead();
                    state.job.as_ref()?;
                }
            }
        }
    }))
}

fn lost_staging() -> StorageError {
    StorageError::Failed("the staging file of a write went missing".to_owned())
}

fn joined<T>(result: Result<T, tokio::task::JoinError>) -> StorageResult<T> {
    result.map_err(|err| StorageError::Failed(format!("a blocking storage job failed: {err}")))
}

/// Runs file-system work on the blocking pool in one trip.
async fn run_blocking<T: Send + 'static>(job: impl FnOnce() -> StorageResult<T> + Send + 'static) -> StorageResult<T> {
    joined(tokio::task::spawn_blocking(job).await)?
}

/// Writes a body that arrived whole (below [`WRITE_BATCH`]) straight to `key`'s path: created
/// exclusively, so an existing blob is never replaced, and removed again when the write fails
/// or its caller went away (`abandoned`). A small file costs a create and a write, where staging
/// it took a create, a write, a link and an unlink. No record names the key until the write
/// has returned, so nobody reads it half written; a crash in between leaves bytes no record
/// knows, which the master's blob collection removes as it does any such bytes.
fn write_in_place(
    target: &Path,
    key: &StorageKey,
    bytes: &[u8],
    durable: bool,
    abandoned: &AtomicBool,
) -> StorageResult<PutOutcome> {
    use std::io::Write as _;
    let parent = target.parent().ok_or_else(|| StorageError::InvalidKey(key.to_string()))?;
    let mut file = new_entry(parent, key, "create a blob", || {
        std::fs::OpenOptions::new().write(true).create_new(true).open(target)
    })?;
    let written = file
        .write_all(bytes)
        .map_err(|err| io_failure("write a blob", err))
        .and_then(|()| if durable { file.sync_all().map_err(|err| io_failure("sync a blob", err)) } else { Ok(()) });
    drop(file);
    let kept = written.and_then(|()| {
        if abandoned.load(Ordering::SeqCst) {
            Err(StorageError::Body("the upload was abandoned".to_owned()))
        } else {
            Ok(())
        }
    });
    if let Err(error) = kept {
        remove_leftover(target);
        return Err(error);
    }
    if durable {
        // The new name is only on disk once its directory is.
        sync_directory(parent)?;
    }
    Ok(PutOutcome { size: bytes.len() as u64, blake3: hash_hex(bytes) })
}

/// A fresh name for a copy of chunk `index`: `c<index>-<uuid>`.
fn chunk_file_name(index: u32) -> String {
    format!("c{index}-{}", uuid::Uuid::new_v4().simple())
}

/// Whether `name` is one [`chunk_file_name`] makes for chunk `index` (a receipt from the
/// caller's records names nothing else, and nothing outside the staging directory).
fn names_chunk(name: &str, index: u32) -> bool {
    name.strip_prefix(&format!("c{index}-"))
        .is_some_and(|rest| rest.len() == 32 && rest.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Removes the files of earlier copies of chunk `index` in the staging directory `dir`.
async fn remove_chunk_copies(dir: &Path, index: u32) -> io::Result<()> {
    let mut entries = fs::read_dir(dir).await?;
    while let Some(entry) = entries.next_entry().await? {
        if entry.file_name().to_str().is_some_and(|name| names_chunk(name, index))
            && let Err(err) = fs::remove_file(entry.path()).await
            && err.kind() != io::ErrorKind::NotFound
        {
            return Err(err);
        }
    }
    Ok(())
}

/// Writes the chunk files `receipts` name (sorted by index) one after the other into the new
/// file `assembled`, checking each has its receipt's length; synced when `durable`. The copy is
/// the kernel's (`copy_file_range`): the bytes need not pass through this process.
/// The chunk file `receipt` names in the staging directory `dir`.
fn chunk_path(dir: &Path, receipt: &ChunkReceipt) -> StorageResult<PathBuf> {
    let name = receipt.etag.as_deref().filter(|name| names_chunk(name, receipt.index)).ok_or_else(|| {
        StorageError::Failed(format!("the receipt of chunk {} names no chunk file of it", receipt.index))
    })?;
    Ok(dir.join(name))
}

/// An error opening chunk `index`'s file.
fn chunk_open_failure(index: u32, err: io::Error) -> StorageError {
    match missing(&err) {
        // Sent again since the receipt was read: the new copy has a receipt of its own.
        true => StorageError::Failed(format!("chunk {index} was replaced while the upload completed")),
        false => io_failure("open a chunk file", err),
    }
}

/// The file of an upload's only chunk, checked against its receipt and, when `durable`, synced.
fn whole_chunk(dir: &Path, receipt: &ChunkReceipt, durable: bool) -> StorageResult<PathBuf> {
    let path = chunk_path(dir, receipt)?;
    let file = std::fs::File::open(&path).map_err(|err| chunk_open_failure(receipt.index, err))?;
    let len = file.metadata().map_err(|err| io_failure("inspect a chunk file", err))?.len();
    if len != receipt.size {
        return Err(StorageError::Failed(format!(
            "chunk {} has {len} bytes, its receipt says {}",
            receipt.index, receipt.size
        )));
    }
    if durable {
        file.sync_all().map_err(|err| io_failure("sync the chunk file", err))?;
    }
    Ok(path)
}

fn assemble(dir: &Path, assembled: &Path, receipts: &[ChunkReceipt], durable: bool) -> StorageResult<()> {
    let mut out =
        std::fs::OpenOptions::new().write(true).create_new(true).open(assembled).map_err(|err| {
            match missing(&err) {
                true => StorageError::NotFound(dir.display().to_string()),
                false => io_failure("create the assembled blob", err),
            }
        })?;
    let mut offset = 0;
    for receipt in receipts {
        let mut chunk =
            std::fs::File::open(chunk_path(dir, receipt)?).map_err(|err| chunk_open_failure(receipt.index, err))?;
        let copied = io::copy(&mut chunk, &mut out).map_err(|err| io_failure("assemble the blob", err))?;
        if copied != receipt.size {
            return Err(StorageError::Failed(format!(
                "chunk {} has {copied} bytes, its receipt says {}",
                receipt.index, receipt.size
            )));
        }
        if durable {
            start_writeback(&out, offset, copied);
        }
        offset += copied;
    }
    if durable {
        out.sync_all().map_err(|err| io_failure("sync the assembled blob", err))?;
    }
    Ok(())
}

/// Links a complete (and, when `durable`, synced) staging file to `key`'s path, never replacing
/// an existing blob, then drops the staging name and, when `durable`, syncs the directory.
fn link_into_place(staging: &Path, target: &Path, key: &StorageKey, durable: bool) -> StorageResult<()> {
    let parent = target.parent().ok_or_else(|| StorageError::InvalidKey(key.to_string()))?;
    new_entry(parent, key, "link the blob into place", || std::fs::hard_link(staging, target))?;
    std::fs::remove_file(staging).map_err(|err| io_failure("remove the staging file", err))?;
    if !durable {
        return Ok(());
    }
    // A link is only on disk once its directory is.
    sync_directory(parent)
}

/// Syncs `dir` itself, so the entries made in it are on disk.
fn sync_directory(dir: &Path) -> StorageResult<()> {
    std::fs::File::open(dir).and_then(|dir| dir.sync_all()).map_err(|err| io_failure("sync a directory", err))
}

/// Makes `key`'s directory entry in `parent` with `make` (which fails with `AlreadyExists`
/// rather than replace an entry; that is answered as such). The directory usually exists (keys
/// share directories): it is created when `make` says it is missing. A concurrent delete may
/// prune a freshly created directory before the entry lands, so that is tried a few times.
fn new_entry<T>(parent: &Path, key: &StorageKey, action: &str, make: impl Fn() -> io::Result<T>) -> StorageResult<T> {
    let mut attempts = 0;
    loop {
        match make() {
            Ok(made) => return Ok(made),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                return Err(StorageError::AlreadyExists(key.to_string()));
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound && attempts < 4 => {
                attempts += 1;
                std::fs::create_dir_all(parent).map_err(|err| io_failure("create the blob's directory", err))?;
            }
            Err(err) => return Err(io_failure(action, err)),
        }
    }
}

/// The path, or one of its parents, does not exist (a parent that is a file counts too).
fn missing(err: &io::Error) -> bool {
    matches!(err.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory)
}

fn not_found_or(key: &StorageKey, action: &str, err: io::Error) -> StorageError {
    if missing(&err) { StorageError::NotFound(key.to_string()) } else { io_failure(action, err) }
}

/// Whether a retry can help: a full disk or a failing device will not heal by itself.
fn io_failure(action: &str, err: io::Error) -> StorageError {
    match err.kind() {
        io::ErrorKind::TimedOut
        | io::ErrorKind::Interrupted
        | io::ErrorKind::WouldBlock
        | io::ErrorKind::ResourceBusy
        | io::ErrorKind::StaleNetworkFileHandle => StorageError::Unavailable(format!("cannot {action}: {err}")),
        _ => StorageError::Failed(format!("cannot {action}: {err}")),
    }
}

/// Removes a file a failed or abandoned write left. One already gone is fine; any other failure
/// is logged, and the collector removes what stays.
fn remove_leftover(path: &Path) {
    if let Err(error) = std::fs::remove_file(path)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), %error, "could not remove a leftover file; the collector will");
    }
}

#[cfg(test)]
mod tests {
    use std::future::pending;

    use bytes::Bytes;

    use super::*;
    use crate::storage::conformance::{Fixture, body, content, read_all, unique_key};

    async fn fixture() -> Fixture {
        fixture_with(true).await
    }

    async fn fixture_with(durable: bool) -> Fixture {
        let dir = tempfile::tempdir().expect("temporary directory");
        Fixture {
            store: Box::new(LocalBlobStore::new(dir.path().join("blobs")).durable(durable)),
            chunk_size: 1024,
            // Several write batches and read pieces, the last of each partial.
            large_stream: 2 * WRITE_BATCH + READ_PIECE as usize + 5,
            keep: Box::new(dir),
        }
    }

    mod conformance {
        crate::blob_store_conformance!(super::fixture());
    }

    /// The same behaviour without fsync (a policy with `durable: false`).
    mod conformance_without_fsync {
        crate::blob_store_conformance!(super::fixture_with(false));
    }

    fn store(dir: &tempfile::TempDir) -> LocalBlobStore {
        LocalBlobStore::new(dir.path().join("blobs"))
    }

    fn staging_entries(store: &LocalBlobStore) -> usize {
        std::fs::read_dir(store.root().join(STAGING)).map(|dir| dir.count()).unwrap_or(0)
    }

    fn key(raw: &str) -> StorageKey {
        StorageKey::parse(raw).unwrap()
    }

    /// A small body for a store that does not sync is written on the calling thread: it
    /// completes while the only blocking thread is taken (through the blocking pool it would
    /// wait for that thread); a synced one waits for the pool.
    #[test]
    fn a_small_unsynced_body_is_written_without_the_blocking_pool() {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().max_blocking_threads(1).build().unwrap();
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let (release, released) = std::sync::mpsc::channel::<()>();
            let occupied = tokio::task::spawn_blocking(move || released.recv());
            let data = content(WRITE_HERE_MAX, 7);
            let unsynced = store(&dir).durable(false);
            let written = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                unsynced.put_stream(&key("small/unsynced"), body(&data, 4096), None),
            )
            .await
            .expect("written while the blocking pool is busy")
            .unwrap();
            assert_eq!(written.size, data.len() as u64);
            let (synced, synced_key) = (store(&dir), key("small/synced"));
            let write = synced.put_stream(&synced_key, body(&data, 4096), None);
            let waited = tokio::time::timeout(std::time::Duration::from_millis(300), write).await;
            assert!(waited.is_err(), "a synced write goes through the blocking pool");
            release.send(()).unwrap();
            occupied.await.unwrap().unwrap();
            assert_eq!(read_all(unsynced.get(&key("small/unsynced"), None).await.unwrap()).await, data);
        });
    }

    /// Appends of `sizes` as [`StreamStaging::append`] makes them: the ranges handed to
    /// [`start_writeback`].
    fn writeback_ranges(sizes: &[u64]) -> Vec<(u64, u64)> {
        let (mut from, mut written, mut ranges) = (0, 0, Vec::new());
        for size in sizes {
            let before = written;
            written += size;
            if let Some((offset, len)) = writeback_due(from, before, written) {
                ranges.push((offset, len));
                from = offset + len;
            }
        }
        ranges
    }

    #[test]
    fn writeback_starts_once_per_whole_step_and_covers_each_byte_once() {
        let step = WRITEBACK_STEP;
        assert_eq!(writeback_ranges(&[step - 1]), vec![], "less than a step");
        assert_eq!(writeback_ranges(&[step - 1, 1]), vec![(0, step)], "the write that completes a step");
        // Batches of 1 MiB up to 2.5 steps: two ranges, back to back, the rest left to the sync.
        let batches = vec![1024 * 1024; (5 * step / 2 / (1024 * 1024)) as usize];
        assert_eq!(writeback_ranges(&batches), vec![(0, step), (step, step)]);
        // One write across two steps hands both over at once; an uneven one ends on a step.
        assert_eq!(writeback_ranges(&[2 * step + 5, 3]), vec![(0, 2 * step)]);
        assert_eq!(writeback_ranges(&[step + 7, step]), vec![(0, step), (step, step)]);
    }

    /// Large enough to start writeback twice on the way in, streamed or in chunks: the bytes
    /// and their hash come back whole.
    #[tokio::test]
    async fn a_durable_write_past_several_writeback_steps_keeps_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        let data = content(2 * WRITEBACK_STEP as usize + 12_345, 21);
        let streamed = store.put_stream(&key("big/streamed"), body(&data, 256 * 1024), None).await.unwrap();
        assert_eq!((streamed.size, streamed.blake3.as_str()), (data.len() as u64, hash_hex(&data).as_str()));
        assert_eq!(read_all(store.get(&key("big/streamed"), None).await.unwrap()).await, data);

        let chunk_size = WRITEBACK_STEP;
        let upload = store.begin_upload(&key("big/chunked"), data.len() as u64, chunk_size).await.unwrap();
        let mut receipts = Vec::new();
        for (index, chunk) in data.chunks(chunk_size as usize).enumerate() {
            receipts.push(store.put_chunk(&upload, index as u32, body(chunk, 256 * 1024)).await.unwrap());
        }
        store.complete_upload(&upload, &receipts).await.unwrap();
        assert_eq!(read_all(store.get(&key("big/chunked"), None).await.unwrap()).await, data);
        assert_eq!(staging_entries(&store), 0, "nothing left in staging");
    }

    /// The hash a receipt carries is of the bytes completion publishes: a late writer of a
    /// chunk (one still in flight when the upload completed) changes nothing of the blob, and a
    /// failed re-send leaves no copy an older receipt could complete with.
    #[tokio::test]
    async fn completion_publishes_exactly_the_copies_the_receipts_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        let (data, other) = (content(5000, 1), content(5000, 2));
        let upload = store.begin_upload(&key("fenced"), 5000, 4096).await.unwrap();
        let receipts = vec![
            store.put_chunk(&upload, 0, body(&data[..4096], 100)).await.unwrap(),
            store.put_chunk(&upload, 1, body(&data[4096..], 100)).await.unwrap(),
        ];
        // A writer of chunk 0 that began before completion and ends after it.
        let (send, receive) = tokio::sync::mpsc::channel::<io::Result<Bytes>>(1);
        let late_body: ByteStream = Box::pin(futures_util::stream::unfold(receive, |mut receive| async move {
            receive.recv().await.map(|piece| (piece, receive))
        }));
        let late = tokio::spawn({
            let (store, upload) = (store.clone(), upload.clone());
            async move { store.put_chunk(&upload, 0, late_body).await }
        });
        send.send(Ok(Bytes::copy_from_slice(&other[..1]))).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        // The late writer removed the copy receipt 0 names: completion refuses, never mixes.
        assert!(store.complete_upload(&upload, &receipts).await.is_err());
        send.send(Ok(Bytes::copy_from_slice(&other[1..4096]))).await.unwrap();
        drop(send);
        let late_receipt = late.await.unwrap().unwrap();
        let receipts = vec![late_receipt, receipts[1].clone()];
        store.complete_upload(&upload, &receipts).await.unwrap();
        let mut expected = other[..4096].to_vec();
        expected.extend_from_slice(&data[4096..]);
        assert_eq!(std::fs::read(store.root().join("fenced")).unwrap(), expected);
        // A write after completion finds no staged upload and leaves the blob alone.
        let after = store.put_chunk(&upload, 0, body(&data[..4096], 100)).await;
        assert!(matches!(after, Err(StorageError::NotFound(_))), "{after:?}");
        assert_eq!(std::fs::read(store.root().join("fenced")).unwrap(), expected);
        assert_eq!(staging_entries(&store), 0);

        // A re-send that fails (too short) removes the earlier copy as well.
        let upload = store.begin_upload(&key("short"), 5000, 4096).await.unwrap();
        let first = store.put_chunk(&upload, 0, body(&data[..4096], 100)).await.unwrap();
        let second = store.put_chunk(&upload, 1, body(&data[4096..], 100)).await.unwrap();
        let short = store.put_chunk(&upload, 0, body(&other[..4095], 100)).await;
        assert!(matches!(short, Err(StorageError::LengthMismatch { .. })), "{short:?}");
        assert!(store.complete_upload(&upload, &[first, second]).await.is_err());
        assert_eq!(store.size(&key("short")).await.unwrap(), None);
        store.abort_upload(&upload).await.unwrap();
        assert_eq!(staging_entries(&store), 0);
    }

    #[tokio::test]
    async fn no_staging_file_outlives_its_upload() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        let data = content(5000, 1);
        let completed = store.begin_upload(&key("done"), 5000, 4096).await.unwrap();
        let receipts = vec![
            store.put_chunk(&completed, 1, body(&data[4096..], 100)).await.unwrap(),
            store.put_chunk(&completed, 0, body(&data[..4096], 100)).await.unwrap(),
        ];
        store.complete_upload(&completed, &receipts).await.unwrap();
        let aborted = store.begin_upload(&key("aborted"), 5000, 4096).await.unwrap();
        store.abort_upload(&aborted).await.unwrap();
        let too_large = store.put_stream(&key("too-large"), body(&data, 100), Some(4999)).await;
        assert!(matches!(too_large, Err(StorageError::TooLarge { limit: 4999 })));
        let existing = store.put_stream(&key("done"), body(&data, 100), None).await;
        assert!(matches!(existing, Err(StorageError::AlreadyExists(_))));
        assert_eq!(staging_entries(&store), 0);
        assert_eq!(std::fs::read(store.root().join("done")).unwrap(), data);
    }

    #[tokio::test]
    async fn a_dropped_put_stream_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        // A client that sends some bytes and then stalls until the request is dropped: a few
        // bytes (nothing written yet), or several batches (a blocking write may still be running
        // when the request goes, and must remove what it created).
        for sent in [7, 2 * WRITE_BATCH + 1] {
            let stalled: ByteStream = Box::pin(
                futures_util::stream::iter([Ok(Bytes::from(content(sent, 3)))])
                    .chain(futures_util::stream::once(pending())),
            );
            let stalled_key = key("stalled");
            let put = store.put_stream(&stalled_key, stalled, None);
            assert!(tokio::time::timeout(Duration::from_millis(200), put).await.is_err());
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert_eq!(staging_entries(&store), 0, "after {sent} bytes");
            assert_eq!(store.size(&key("stalled")).await.unwrap(), None);
        }
    }

    #[tokio::test]
    async fn a_body_that_arrives_whole_is_written_in_place_without_staging() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        std::fs::create_dir_all(store.root()).unwrap();
        // A file where the staging directory would be: any write that stages fails.
        std::fs::write(store.root().join(STAGING), b"in the way").unwrap();
        let small = content(WRITE_BATCH - 1, 5);
        let outcome = store.put_stream(&key("x/y/small"), body(&small, 1000), None).await.unwrap();
        assert_eq!(outcome.size, small.len() as u64);
        assert_eq!(std::fs::read(store.root().join("x/y/small")).unwrap(), small);
        let large = store.put_stream(&key("large"), body(&content(WRITE_BATCH + 1, 5), 1000), None).await;
        assert!(large.is_err(), "a body of several batches is staged");
        // An existing blob is never replaced, and a refused body leaves it as it was.
        let other = store.put_stream(&key("x/y/small"), body(b"other bytes", 4), None).await;
        assert!(matches!(other, Err(StorageError::AlreadyExists(_))), "{other:?}");
        assert_eq!(std::fs::read(store.root().join("x/y/small")).unwrap(), small);
    }

    #[test]
    fn an_abandoned_write_in_place_removes_its_blob() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("blobs/a/b");
        for durable in [false, true] {
            let abandoned = AtomicBool::new(true);
            let result = write_in_place(&target, &key("a/b"), b"bytes", durable, &abandoned);
            assert!(matches!(result, Err(StorageError::Body(_))), "{result:?}");
            assert!(!target.exists());
        }
        let kept = write_in_place(&target, &key("a/b"), b"bytes", true, &AtomicBool::new(false)).unwrap();
        assert_eq!((kept.size, std::fs::read(&target).unwrap()), (5, b"bytes".to_vec()));
    }

    #[tokio::test]
    async fn delete_prunes_empty_directories_up_to_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        for raw in ["a/b/c/one", "a/b/two", "three"] {
            store.put_stream(&key(raw), body(b"x", 1), None).await.unwrap();
        }
        store.delete(&key("a/b/c/one")).await.unwrap();
        assert!(!store.root().join("a/b/c").exists());
        assert!(store.root().join("a/b/two").exists());
        store.delete(&key("a/b/two")).await.unwrap();
        assert!(!store.root().join("a").exists());
        store.delete(&key("three")).await.unwrap();
        assert!(store.root().is_dir(), "the root stays");
        // A directory standing where a blob would be is not a blob.
        store.put_stream(&key("d/e"), body(b"x", 1), None).await.unwrap();
        store.delete(&key("d")).await.unwrap();
        assert_eq!(store.size(&key("d")).await.unwrap(), None);
        assert!(store.root().join("d/e").exists());
    }

    #[tokio::test]
    async fn keys_in_the_staging_area_and_forged_handles_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        let result = store.put_stream(&key(".staging/x"), body(b"x", 1), None).await;
        assert!(matches!(result, Err(StorageError::InvalidKey(_))), "{result:?}");
        let forged = StagedUpload { key: "k".into(), size: 10, chunk_size: 1024, handle: "../../etc/passwd".into() };
        let result = store.put_chunk(&forged, 0, body(b"0123456789", 10)).await;
        assert!(matches!(result, Err(StorageError::Failed(_))), "{result:?}");
    }

    /// A read takes its pieces from the page cache while it holds them and from the disk once
    /// it does not: the bytes are the same whichever part of the blob was cached.
    #[tokio::test]
    async fn a_read_partly_cached_and_partly_on_disk_keeps_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        let len = 4 * READ_PIECE as usize + 3 * CACHED_PIECE as usize + 17;
        let data = content(len, 21);
        let k = unique_key("partly-cached");
        store.put_stream(&k, body(&data, 100_000), None).await.unwrap();
        let path = store.blob_path(&k).unwrap();
        let evict = |from: u64| {
            let file = std::fs::File::open(&path).unwrap();
            // Clean pages (the store synced them) leave the page cache on this advice.
            let _ = rustix::fs::fadvise(&file, from, None, rustix::fs::Advice::DontNeed);
        };
        let ranges = [(0, len as u64 - 1), (100, 3 * READ_PIECE + 5), (CACHED_PIECE - 1, CACHED_PIECE)];
        for evicted_from in [None, Some(0), Some(READ_PIECE + 12_345)] {
            for (start, end) in ranges {
                if let Some(from) = evicted_from {
                    evict(from);
                }
                let got = read_all(store.get(&k, Some(ByteRange { start, end_inclusive: end })).await.unwrap()).await;
                assert!(
                    got == data[start as usize..=end as usize],
                    "range {start}-{end}, evicted from {evicted_from:?}"
                );
            }
        }
    }

    #[tokio::test]
    async fn a_range_past_the_end_is_refused_and_a_long_one_clamped() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        let k = unique_key("range-edges");
        store.put_stream(&k, body(b"0123456789", 3), None).await.unwrap();
        let past = store.get(&k, Some(ByteRange { start: 10, end_inclusive: 12 })).await;
        assert!(matches!(past, Err(StorageError::Failed(_))));
        let long = store.get(&k, Some(ByteRange { start: 8, end_inclusive: 100 })).await.unwrap();
        assert_eq!(read_all(long).await, b"89");
    }

    #[tokio::test]
    async fn a_chunk_for_an_unknown_upload_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        let upload = store.begin_upload(&key("gone"), 10, 1024).await.unwrap();
        store.abort_upload(&upload).await.unwrap();
        let result = store.put_chunk(&upload, 0, body(b"0123456789", 10)).await;
        assert!(matches!(result, Err(StorageError::NotFound(_))), "{result:?}");
    }

    #[tokio::test]
    async fn bad_chunk_sizes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        for chunk_size in [0, 512, 1000, 3072] {
            assert!(store.begin_upload(&key("k"), 10_000, chunk_size).await.is_err(), "{chunk_size}");
        }
    }

    #[tokio::test]
    async fn a_listing_below_a_folder_skips_staging_probes_and_symbolic_links() {
        use futures_util::TryStreamExt;
        let dir = tempfile::tempdir().unwrap();
        let store = LocalBlobStore::new(dir.path().to_path_buf());
        for (path, bytes) in [
            ("in/a.txt", "aa"),
            ("in/deep/b.txt", "bbb"),
            ("out.txt", "x"),
            (".staging/s", "s"),
            (".nubo-check/p", "p"),
        ] {
            std::fs::create_dir_all(dir.path().join(path).parent().unwrap()).unwrap();
            std::fs::write(dir.path().join(path), bytes).unwrap();
        }
        std::os::unix::fs::symlink(dir.path().join("out.txt"), dir.path().join("in/link.txt")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("in"), dir.path().join("in/loop")).unwrap();
        let below: Vec<ListedObject> = store.list_below(Some(&key("in"))).try_collect().await.unwrap();
        let mut found: Vec<(String, u64)> = below.into_iter().map(|o| (o.key, o.size)).collect();
        found.sort();
        assert_eq!(found, [("in/a.txt".to_owned(), 2), ("in/deep/b.txt".to_owned(), 3)]);
        let all: Vec<ListedObject> = store.list_below(None).try_collect().await.unwrap();
        assert_eq!(all.len(), 3, "staging and probe areas are not listed: {all:?}");
        let staging: Vec<ListedObject> = store.list_below(Some(&key(".staging"))).try_collect().await.unwrap();
        assert!(staging.is_empty());
        let through_link: Vec<ListedObject> = store.list_below(Some(&key("in/loop"))).try_collect().await.unwrap();
        assert!(through_link.is_empty(), "a start folder behind a symbolic link is not listed");
    }
}
