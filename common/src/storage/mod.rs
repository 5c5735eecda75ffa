//! Blob storage drivers: bytes under keys, nothing about users, quotas or objects. The master
//! and the storage nodes both use them; a remote node can implement [`BlobStore`] too.
//!
//! Uploads are staged: [`BlobStore::begin_upload`] reserves a staging area, chunks arrive in any
//! order (each hashed as a blake3 subtree while it streams, see [`crate::hash`]), and
//! [`BlobStore::complete_upload`] makes the blob appear at its key in one step. Nothing is
//! visible at the key before that, so a failed upload never leaves a partial blob behind.

#[cfg(any(test, feature = "testing"))]
pub mod conformance;
pub mod key;
pub mod local;
pub mod s3;

use std::io;
use std::pin::Pin;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::Stream;
use serde::{Deserialize, Serialize};

pub use self::key::StorageKey;

/// A stream of bytes read from or written to storage; never a whole file in memory.
pub type ByteStream = Pin<Box<dyn Stream<Item = io::Result<Bytes>> + Send>>;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("no blob at {0}")]
    NotFound(String),
    #[error("a blob already exists at {0}")]
    AlreadyExists(String),
    #[error("invalid storage key {0:?}")]
    InvalidKey(String),
    #[error("chunk {index} is out of range (the upload has {total} chunks)")]
    ChunkOutOfRange { index: u32, total: u32 },
    #[error("wrong length: expected {expected} bytes, got {actual}")]
    LengthMismatch { expected: u64, actual: u64 },
    #[error("body is larger than {limit} bytes")]
    TooLarge { limit: u64 },
    /// The backend cannot hold a blob of that size at all (a file-system limit, more chunks or
    /// parts than it allows).
    #[error("storage cannot hold {size} bytes: {why}")]
    SizeUnsupported { size: u64, why: String },
    #[error("the request body failed: {0}")]
    Body(String),
    /// A retry may succeed (network, throttling, a node that is down).
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// A retry will not help (permissions, misconfiguration, corrupt state).
    #[error("storage failed: {0}")]
    Failed(String),
}

impl StorageError {
    /// Whether retrying the same operation later can help.
    pub fn is_transient(&self) -> bool {
        matches!(self, StorageError::Unavailable(_))
    }
}

pub type StorageResult<T> = Result<T, StorageError>;

/// An inclusive byte range of a blob (as in HTTP `Range: bytes=start-end`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    pub start: u64,
    pub end_inclusive: u64,
}

impl ByteRange {
    pub fn len(&self) -> u64 {
        self.end_inclusive - self.start + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

/// A staged upload; the caller persists it (as JSON) between requests and across restarts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedUpload {
    /// Where the blob appears on completion.
    pub key: String,
    /// Total size in bytes, fixed at the start.
    pub size: u64,
    /// Size of every chunk but the last; a power of two of at least 1 KiB (blake3 subtrees).
    pub chunk_size: u64,
    /// Driver-specific handle: the staging file name (local) or the multipart upload id (S3).
    pub handle: String,
}

impl StagedUpload {
    /// Number of chunks: `ceil(size / chunk_size)`; 0 for an empty blob.
    pub fn total_chunks(&self) -> u32 {
        self.size.div_ceil(self.chunk_size) as u32
    }

    /// Exact length of chunk `index`, or `None` when out of range.
    pub fn chunk_len(&self, index: u32) -> Option<u64> {
        let start = u64::from(index) * self.chunk_size;
        (index < self.total_chunks()).then(|| self.chunk_size.min(self.size - start))
    }

    /// Exact length of chunk `index`, or [`StorageError::ChunkOutOfRange`].
    pub fn expect_chunk(&self, index: u32) -> StorageResult<u64> {
        self.chunk_len(index).ok_or(StorageError::ChunkOutOfRange { index, total: self.total_chunks() })
    }

    /// Checks that `chunks` names every chunk of the upload exactly once and with its exact
    /// length, so a driver never assembles a blob with a hole or a stale chunk in it.
    pub fn check_receipts(&self, chunks: &[ChunkReceipt]) -> StorageResult<()> {
        let total = self.total_chunks();
        let mut seen = vec![false; total as usize];
        for receipt in chunks {
            let expected = self.expect_chunk(receipt.index)?;
            if receipt.size != expected {
                return Err(StorageError::LengthMismatch { expected, actual: receipt.size });
            }
            if std::mem::replace(&mut seen[receipt.index as usize], true) {
                return Err(StorageError::Failed(format!("chunk {} is listed twice", receipt.index)));
            }
        }
        match seen.iter().position(|present| !present) {
            Some(missing) => Err(StorageError::Failed(format!("chunk {missing} of {total} is missing"))),
            None => Ok(()),
        }
    }
}

/// Refuses an upload whose chunks cannot be blake3 subtrees or cannot be numbered by a `u32`.
pub(crate) fn check_upload_shape(size: u64, chunk_size: u64) -> StorageResult<()> {
    if !crate::hash::valid_chunk_size(chunk_size) {
        return Err(StorageError::Failed(format!("chunk size {chunk_size} is not a power of two of at least 1 KiB")));
    }
    if crate::hash::chunk_count(chunk_size, size) > u64::from(u32::MAX) {
        return Err(StorageError::SizeUnsupported { size, why: format!("too many chunks of {chunk_size} bytes") });
    }
    Ok(())
}

/// What storing one chunk produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkReceipt {
    pub index: u32,
    pub size: u64,
    /// The backend's tag for the stored copy of the chunk (S3 part ETag; on local disk the name
    /// of the chunk's file): completion assembles exactly the copies the receipts name.
    pub etag: Option<String>,
    /// blake3 chaining value of the chunk as a subtree at its offset, hex (see `crate::hash`).
    pub chaining_value: String,
}

/// A blob found by [`BlobStore::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedBlob {
    pub key: String,
    /// Last modification, milliseconds since the Unix epoch.
    pub modified_ms: i64,
}

/// An object found by [`BlobStore::list_below`]: what an import needs to tell a new or changed
/// object from one it has seen before without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedObject {
    pub key: String,
    pub size: u64,
    /// Last modification, milliseconds since the Unix epoch.
    pub modified_ms: i64,
    /// The backend's entity tag (S3), when it has one.
    pub etag: Option<String>,
}

/// Objects as a listing finds them, page by page; an error ends the stream.
pub type ListingStream = Pin<Box<dyn Stream<Item = StorageResult<ListedObject>> + Send>>;

/// The first key segment of the probe blobs [`check_with_probe`] writes and deletes: a store's
/// own area, never listed by [`BlobStore::list_below`].
pub const PROBE_AREA: &str = ".nubo-check";

/// A listing that fails at once (a backend that cannot list).
pub fn unlisted(why: &str) -> ListingStream {
    Box::pin(futures_util::stream::iter([Err(StorageError::Failed(why.to_owned()))]))
}

/// Size and blake3 hash of a blob written in one stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutOutcome {
    pub size: u64,
    /// blake3 of the whole content, hex.
    pub blake3: String,
}

#[async_trait]
pub trait BlobStore: Send + Sync + 'static {
    /// `local` or `s3` (for logs and diagnostics).
    fn kind(&self) -> &'static str;

    /// Prepares a staged upload of `size` bytes in chunks of `chunk_size` (a power of two, at
    /// least 1 KiB) that will appear at `key`.
    async fn begin_upload(&self, key: &StorageKey, size: u64, chunk_size: u64) -> StorageResult<StagedUpload>;

    /// Stores chunk `index`, which must have exactly [`StagedUpload::chunk_len`] bytes, hashing
    /// it as it streams. Idempotent: sending a chunk again replaces it (the caller forgets the
    /// earlier receipt first, and sends one chunk index at a time). Chunks may arrive in any
    /// order and in parallel. The receipt's chaining value is of the bytes its `etag` names.
    async fn put_chunk(&self, upload: &StagedUpload, index: u32, body: ByteStream) -> StorageResult<ChunkReceipt>;

    /// Makes the blob appear at the upload's key from the chunks (all of them, in index order),
    /// exactly the stored copies the receipts name; a chunk written after that changes nothing
    /// of the blob. Fails with [`StorageError::AlreadyExists`] rather than replacing a blob.
    async fn complete_upload(&self, upload: &StagedUpload, chunks: &[ChunkReceipt]) -> StorageResult<()>;

    /// Drops a staged upload and its bytes. Idempotent.
    async fn abort_upload(&self, upload: &StagedUpload) -> StorageResult<()>;

    /// Writes a blob of unknown length from one stream, refusing more than `max_len` bytes
    /// (nothing is left at `key` then). Fails with [`StorageError::AlreadyExists`] rather than
    /// replacing an existing blob.
    async fn put_stream(&self, key: &StorageKey, body: ByteStream, max_len: Option<u64>) -> StorageResult<PutOutcome>;

    /// Reads a blob, or the inclusive `range` of it.
    async fn get(&self, key: &StorageKey, range: Option<ByteRange>) -> StorageResult<ByteStream>;

    /// Size of the blob at `key`, or `None` when there is none.
    async fn size(&self, key: &StorageKey) -> StorageResult<Option<u64>>;

    /// Deletes the blob at `key`. Idempotent.
    async fn delete(&self, key: &StorageKey) -> StorageResult<()>;

    /// A URL that downloads the blob directly for `expires`, answering with an attachment
    /// `Content-Disposition` for `file_name`; `None` where the backend cannot (local disk).
    async fn presigned_get(
        &self,
        key: &StorageKey,
        expires: Duration,
        file_name: &str,
    ) -> StorageResult<Option<String>>;

    /// Where a client sends the chunks of `upload` itself, when the backend takes them directly
    /// (a storage node); `None` when chunks go through the master. Valid until `expires_at`
    /// (unix seconds).
    fn direct_upload(&self, _upload: &StagedUpload, _expires_at: u64) -> Option<DirectUpload> {
        None
    }

    /// Every blob (completed, not staged) with its last modification time in milliseconds since
    /// the epoch, for the orphan collector. Answers the whole listing: meant for periodic
    /// housekeeping, not for request paths.
    async fn list(&self) -> StorageResult<Vec<ListedBlob>>;

    /// Every completed object below the folder `folder` (the whole store for `None`), with its
    /// size, modification time and entity tag, streamed as the backend pages it (S3: one
    /// `ListObjectsV2` page at a time; local disk: a directory walk), so a listing of millions
    /// holds one page in memory. The store's own areas (staging files, probes) are never
    /// listed, nor are symbolic links on local disk. Backends that cannot list (storage nodes)
    /// answer a stream whose only item is an error.
    fn list_below(&self, folder: Option<&StorageKey>) -> ListingStream;

    /// Checks that the backend works: writes, reads back and deletes a small probe blob.
    async fn check(&self) -> StorageResult<()>;

    /// A cheaper check for readiness probes, asked for every few seconds: by default the full
    /// [`BlobStore::check`]; S3 asks only whether the bucket answers (one `HEAD`), which costs
    /// neither writes nor storage requests that are billed by the thousand.
    async fn reachable(&self) -> StorageResult<()> {
        self.check().await
    }
}

/// Where and how a client uploads chunks directly to the backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectUpload {
    /// `PUT {url}/{index}` sends chunk `index`; `GET {url}` lists the chunks received.
    pub url: String,
    /// Sent as `Authorization: Bearer {credential}` with every request to `url`.
    pub credential: String,
    /// Unix seconds from which the credential is refused.
    pub expires_at: u64,
}

/// The probe behind [`BlobStore::check`]: writes a small blob, reads it back and deletes it.
pub async fn check_with_probe(store: &(impl BlobStore + ?Sized)) -> StorageResult<()> {
    use futures_util::TryStreamExt;

    const PROBE: &[u8] = b"nubo storage check";
    let key = StorageKey::parse(&format!("{PROBE_AREA}/{}", uuid::Uuid::new_v4().simple()))?;
    let body: ByteStream = Box::pin(futures_util::stream::iter([Ok(Bytes::from_static(PROBE))]));
    store.put_stream(&key, body, Some(PROBE.len() as u64)).await?;
    let read = async {
        let pieces: Vec<Bytes> = store
            .get(&key, None)
            .await?
            .try_collect()
            .await
            .map_err(|err| StorageError::Unavailable(format!("cannot read the probe back: {err}")))?;
        if pieces.concat() == PROBE {
            Ok(())
        } else {
            Err(StorageError::Failed("the probe read back differs from what was written".into()))
        }
    }
    .await;
    let deleted = store.delete(&key).await;
    read.and(deleted)
}
