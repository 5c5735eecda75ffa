//! Blobs as files under one root directory: blob `key` lives at `root/key`, staged uploads at
//! `root/.staging/<uuid>`. Owns nothing outside its root.
//!
//! A blob appears at its key only by a hard link from a complete, fsynced staging file, so a
//! reader never sees a partial blob and an existing blob is never replaced.

use std::io::{self, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use tokio::fs;
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
use tokio_util::io::ReaderStream;

use super::{
    BlobStore, ByteRange, ByteStream, ChunkReceipt, ListedBlob, PutOutcome, StagedUpload, StorageError, StorageKey,
    StorageResult, check_upload_shape,
};
use crate::hash::{ChunkHasher, StreamHasher};

/// Name of the staging directory under the root; no key may start with it.
const STAGING: &str = ".staging";
/// Read buffer of a blob being streamed out: memory per download stays bounded.
const READ_BUFFER: usize = 64 * 1024;

/// Blob storage on a local (or mounted) filesystem.
#[derive(Debug, Clone)]
pub struct LocalBlobStore {
    root: PathBuf,
}

impl LocalBlobStore {
    /// A store rooted at `root`, which is created on the first write if missing.
    pub fn new(root: PathBuf) -> Self {
        Self { root }
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

    /// Creates a fresh, empty staging file; the guard removes it unless the caller disarms it.
    async fn new_staging_file(&self) -> StorageResult<(String, fs::File, StagingGuard)> {
        let dir = self.root.join(STAGING);
        fs::create_dir_all(&dir).await.map_err(|err| io_failure("create the staging directory", err))?;
        let handle = uuid::Uuid::new_v4().simple().to_string();
        let path = dir.join(&handle);
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .await
            .map_err(|err| io_failure("create a staging file", err))?;
        Ok((handle, file, StagingGuard(Some(path))))
    }

    /// Links a complete staging file to `key`, never replacing an existing blob, then drops the
    /// staging name and makes the new directory entry durable.
    async fn publish(&self, staging: &Path, key: &StorageKey) -> StorageResult<()> {
        let target = self.blob_path(key)?;
        let parent = target.parent().unwrap_or(&self.root).to_path_buf();
        // A concurrent delete may prune the freshly created parent before the link lands: retry.
        let mut attempts = 0;
        loop {
            fs::create_dir_all(&parent).await.map_err(|err| io_failure("create the blob's directory", err))?;
            match fs::hard_link(staging, &target).await {
                Ok(()) => break,
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                    return Err(StorageError::AlreadyExists(key.to_string()));
                }
                Err(err) if err.kind() == io::ErrorKind::NotFound && attempts < 3 => attempts += 1,
                Err(err) => return Err(io_failure("link the blob into place", err)),
            }
        }
        fs::remove_file(staging).await.map_err(|err| io_failure("remove the staging file", err))?;
        sync_dir(parent).await
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
        let (handle, file, guard) = self.new_staging_file().await?;
        // Full length up front, so every chunk can be written at its offset in any order.
        file.set_len(size).await.map_err(|err| io_failure("size the staging file", err))?;
        guard.disarm();
        Ok(StagedUpload { key: key.to_string(), size, chunk_size, handle })
    }

    async fn put_chunk(&self, upload: &StagedUpload, index: u32, mut body: ByteStream) -> StorageResult<ChunkReceipt> {
        check_upload_shape(upload.size, upload.chunk_size)?;
        let expected = upload.expect_chunk(index)?;
        let mut hasher = ChunkHasher::new(index, upload.chunk_size, upload.size)
            .map_err(|err| StorageError::Failed(err.to_string()))?;
        let path = self.staging_path(&upload.handle)?;
        // A handle of its own: its file position is independent of parallel chunks.
        let mut file = fs::OpenOptions::new().write(true).open(&path).await.map_err(|err| match err.kind() {
            io::ErrorKind::NotFound => StorageError::NotFound(format!("staged upload {}", upload.handle)),
            _ => io_failure("open the staging file", err),
        })?;
        file.seek(SeekFrom::Start(u64::from(index) * upload.chunk_size))
            .await
            .map_err(|err| io_failure("seek in the staging file", err))?;
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
        let chaining_value = hasher.finalize().map_err(|err| StorageError::Failed(err.to_string()))?;
        Ok(ChunkReceipt { index, size: expected, etag: None, chaining_value })
    }

    async fn complete_upload(&self, upload: &StagedUpload, chunks: &[ChunkReceipt]) -> StorageResult<()> {
        upload.check_receipts(chunks)?;
        let key = StorageKey::parse(&upload.key)?;
        let staging = self.staging_path(&upload.handle)?;
        let file = fs::File::open(&staging).await.map_err(|err| match err.kind() {
            io::ErrorKind::NotFound => StorageError::NotFound(format!("staged upload {}", upload.handle)),
            _ => io_failure("open the staging file", err),
        })?;
        let len = file.metadata().await.map_err(|err| io_failure("inspect the staging file", err))?.len();
        if len != upload.size {
            return Err(StorageError::Failed(format!("staging file has {len} bytes, expected {}", upload.size)));
        }
        // One fsync covers the writes of every chunk's handle: they share the inode.
        file.sync_all().await.map_err(|err| io_failure("sync the staging file", err))?;
        drop(file);
        self.publish(&staging, &key).await
    }

    async fn abort_upload(&self, upload: &StagedUpload) -> StorageResult<()> {
        let staging = self.staging_path(&upload.handle)?;
        match fs::remove_file(&staging).await {
            Ok(()) => Ok(()),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(io_failure("remove the staging file", err)),
        }
    }

    async fn put_stream(
        &self,
        key: &StorageKey,
        mut body: ByteStream,
        max_len: Option<u64>,
    ) -> StorageResult<PutOutcome> {
        self.blob_path(key)?;
        let (_, mut file, guard) = self.new_staging_file().await?;
        let mut hasher = StreamHasher::new();
        while let Some(piece) = body.next().await {
            let piece = piece.map_err(|err| StorageError::Body(err.to_string()))?;
            if let Some(limit) = max_len
                && hasher.len() + piece.len() as u64 > limit
            {
                // The guard removes the partial staging file.
                return Err(StorageError::TooLarge { limit });
            }
            file.write_all(&piece).await.map_err(|err| io_failure("write a blob", err))?;
            hasher.update(&piece);
        }
        file.flush().await.map_err(|err| io_failure("write a blob", err))?;
        file.sync_all().await.map_err(|err| io_failure("sync a blob", err))?;
        drop(file);
        let staging = guard.path().to_path_buf();
        self.publish(&staging, key).await?;
        guard.disarm();
        Ok(PutOutcome { size: hasher.len(), blake3: hasher.finalize() })
    }

    async fn get(&self, key: &StorageKey, range: Option<ByteRange>) -> StorageResult<ByteStream> {
        let path = self.blob_path(key)?;
        let mut file = fs::File::open(&path).await.map_err(|err| not_found_or(key, "open a blob", err))?;
        let metadata = file.metadata().await.map_err(|err| io_failure("inspect a blob", err))?;
        // A directory at the key's path is a prefix of other keys, not a blob.
        if !metadata.is_file() {
            return Err(StorageError::NotFound(key.to_string()));
        }
        let Some(range) = range else {
            return Ok(Box::pin(ReaderStream::with_capacity(file, READ_BUFFER)));
        };
        if range.start >= metadata.len() || range.end_inclusive < range.start {
            return Err(StorageError::Failed(format!(
                "range {}-{} is outside the blob of {} bytes",
                range.start,
                range.end_inclusive,
                metadata.len()
            )));
        }
        file.seek(SeekFrom::Start(range.start)).await.map_err(|err| io_failure("seek in a blob", err))?;
        Ok(Box::pin(ReaderStream::with_capacity(file.take(range.len()), READ_BUFFER)))
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

    async fn check(&self) -> StorageResult<()> {
        super::check_with_probe(self).await
    }
}

/// Removes a staging file when an upload is abandoned midway, including when the request's
/// future is dropped. Unlinking is quick enough to do synchronously in `Drop`.
struct StagingGuard(Option<PathBuf>);

impl StagingGuard {
    fn path(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new(""))
    }

    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for StagingGuard {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Makes a new directory entry durable: a rename or link is only on disk once its directory is.
async fn sync_dir(dir: PathBuf) -> StorageResult<()> {
    tokio::task::spawn_blocking(move || std::fs::File::open(&dir)?.sync_all())
        .await
        .map_err(|err| StorageError::Failed(format!("sync a directory: {err}")))?
        .map_err(|err| io_failure("sync a directory", err))
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

#[cfg(test)]
mod tests {
    use std::future::pending;

    use bytes::Bytes;

    use super::*;
    use crate::storage::conformance::{Fixture, body, content, read_all, unique_key};

    async fn fixture() -> Fixture {
        let dir = tempfile::tempdir().expect("temporary directory");
        Fixture {
            store: Box::new(LocalBlobStore::new(dir.path().join("blobs"))),
            chunk_size: 1024,
            large_stream: 3 * READ_BUFFER + 5,
            keep: Box::new(dir),
        }
    }

    mod conformance {
        crate::blob_store_conformance!(super::fixture());
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

    #[tokio::test]
    async fn staging_file_has_the_full_size_from_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        let upload = store.begin_upload(&key("a/b"), 10_000, 4096).await.unwrap();
        let staging = store.staging_path(&upload.handle).unwrap();
        assert_eq!(std::fs::metadata(staging).unwrap().len(), 10_000);
        assert!(!store.root().join("a/b").exists());
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
        // A client that sends some bytes and then stalls until the request is dropped.
        let stalled: ByteStream = Box::pin(
            futures_util::stream::iter([Ok(Bytes::from_static(b"partial"))])
                .chain(futures_util::stream::once(pending())),
        );
        let stalled_key = key("stalled");
        let put = store.put_stream(&stalled_key, stalled, None);
        assert!(tokio::time::timeout(Duration::from_millis(200), put).await.is_err());
        assert_eq!(staging_entries(&store), 0);
        assert_eq!(store.size(&key("stalled")).await.unwrap(), None);
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
}
