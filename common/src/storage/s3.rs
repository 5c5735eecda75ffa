//! Blobs in a bucket of any S3-compatible service (AWS, MinIO, Ceph, ...), under an optional
//! key prefix. Owns nothing in the bucket outside that prefix.
//!
//! Staged uploads are multipart uploads (one part per chunk), so nothing is visible at the key
//! before `CompleteMultipartUpload`. Bodies stream both ways; only `put_stream` buffers, one
//! 8 MiB part at a time.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{
    BehaviorVersion, Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation,
    StalledStreamProtectionConfig,
};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http_body::{Body, Frame, SizeHint};
use serde::{Deserialize, Serialize};

use super::{
    BlobStore, ByteRange, ByteStream, ChunkReceipt, ListedBlob, ListedObject, ListingStream, PROBE_AREA, PutOutcome,
    StagedUpload, StorageError, StorageKey, StorageResult, check_upload_shape,
};
use crate::hash::{ChunkHasher, StreamHasher};
use crate::secret::Secret;

/// S3 refuses multipart parts below 5 MiB, except the last one.
pub const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;
/// S3 allows at most this many parts in one multipart upload.
pub const MAX_PARTS: u64 = 10_000;
/// Part size of `put_stream`: the memory one streamed write holds at most.
pub const STREAM_PART_SIZE: usize = 8 * 1024 * 1024;

/// Where and how to reach the bucket. The credentials need read, write, delete and multipart
/// rights on the prefix, and `s3:ListBucket` on AWS: without it a missing key answers 403
/// instead of 404, which reads as a permission failure rather than "no blob".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct S3Config {
    /// `https://s3.example.com` for a non-AWS service; `None` for AWS itself.
    pub endpoint: Option<String>,
    pub region: String,
    pub bucket: String,
    /// `https://host/bucket/key` instead of `https://bucket.host/key` (MinIO and most others).
    pub path_style: bool,
    pub access_key: String,
    pub secret_key: Secret,
    /// Keys are stored as `prefix/key` when set.
    pub prefix: Option<String>,
}

/// A listing below a key prefix, one `ListObjectsV2` page at a time.
struct ListingPages {
    store: S3BlobStore,
    /// The full object-key prefix listed (the store's prefix included).
    below: String,
    continuation: Option<String>,
    /// The rest of the current page, last object first.
    page: Vec<ListedObject>,
    done: bool,
}

impl ListingPages {
    /// The next object, fetching the next page when this one is used up; `None` at the end.
    async fn next(&mut self) -> Option<StorageResult<ListedObject>> {
        loop {
            if let Some(object) = self.page.pop() {
                return Some(Ok(object));
            }
            if self.done {
                return None;
            }
            if let Err(err) = self.fetch().await {
                self.done = true;
                return Some(Err(err));
            }
        }
    }

    async fn fetch(&mut self) -> StorageResult<()> {
        let mut request = self.store.client.list_objects_v2().bucket(&self.store.bucket);
        if !self.below.is_empty() {
            request = request.prefix(&self.below);
        }
        if let Some(token) = &self.continuation {
            request = request.continuation_token(token);
        }
        let page = request.send().await.map_err(|err| sdk_error("list objects", &self.below, err))?;
        let probes = format!("{PROBE_AREA}/");
        for object in page.contents().iter().rev() {
            let Some(key) = object.key().and_then(|k| k.strip_prefix(&self.store.prefix)) else { continue };
            if key.starts_with(&probes) || key.ends_with('/') {
                continue;
            }
            let modified_ms =
                object.last_modified().map_or(0, |t| t.secs() * 1000 + i64::from(t.subsec_nanos() / 1_000_000));
            self.page.push(ListedObject {
                key: key.to_owned(),
                size: object.size().unwrap_or(0).max(0) as u64,
                modified_ms,
                etag: object.e_tag().map(|tag| tag.trim_matches('"').to_owned()),
            });
        }
        match page.next_continuation_token() {
            Some(token) if page.is_truncated() == Some(true) => self.continuation = Some(token.to_owned()),
            _ => self.done = true,
        }
        Ok(())
    }
}

/// Blob storage in an S3 bucket.
#[derive(Debug, Clone)]
pub struct S3BlobStore {
    client: Client,
    bucket: String,
    /// Empty, or the configured prefix ending with `/`.
    prefix: String,
}

impl S3BlobStore {
    pub fn new(config: &S3Config) -> StorageResult<Self> {
        if config.bucket.is_empty() {
            return Err(StorageError::Failed("the S3 bucket name is empty".into()));
        }
        // Built explicitly on ring: the SDK's default client would add aws-lc-rs as a second
        // rustls provider next to the one the rest of the workspace uses.
        let http_client =
            aws_smithy_http_client::Builder::new().tls_provider(tls::Provider::Rustls(CryptoMode::Ring)).build_https();
        let credentials = Credentials::new(
            config.access_key.clone(),
            config.secret_key.expose().to_owned(),
            None,
            None,
            "nubo-config",
        );
        let mut builder = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .http_client(http_client)
            .region(Region::new(config.region.clone()))
            .credentials_provider(credentials)
            .force_path_style(config.path_style)
            // Checksum trailers (aws-chunked bodies) are not understood by every S3-compatible
            // service; our own blake3 hashes cover integrity end to end.
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            // An upload body comes from a client over the network and may pause for a while; a
            // pause there is not a stalled S3 connection.
            .stalled_stream_protection(StalledStreamProtectionConfig::enabled().upload_enabled(false).build())
            .timeout_config(TimeoutConfig::builder().connect_timeout(Duration::from_secs(10)).build());
        if let Some(endpoint) = &config.endpoint {
            builder = builder.endpoint_url(endpoint);
        }
        let prefix = match config.prefix.as_deref().map(|p| p.trim_matches('/')) {
            None | Some("") => String::new(),
            Some(prefix) => format!("{prefix}/"),
        };
        Ok(Self { client: Client::from_conf(builder.build()), bucket: config.bucket.clone(), prefix })
    }

    fn object_key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// Whether an object exists at `object_key`.
    async fn exists(&self, object_key: &str) -> StorageResult<bool> {
        match self.client.head_object().bucket(&self.bucket).key(object_key).send().await {
            Ok(_) => Ok(true),
            Err(err) => match sdk_error("inspect an object", object_key, err) {
                StorageError::NotFound(_) => Ok(false),
                other => Err(other),
            },
        }
    }

    async fn refuse_existing(&self, object_key: &str, key: &str) -> StorageResult<()> {
        if self.exists(object_key).await? { Err(StorageError::AlreadyExists(key.to_owned())) } else { Ok(()) }
    }

    async fn put_small(&self, object_key: &str, body: Bytes) -> StorageResult<()> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(object_key)
            .content_length(body.len() as i64)
            .body(body.into())
            .send()
            .await
            .map_err(|err| sdk_error("store an object", object_key, err))?;
        Ok(())
    }

    async fn upload_part(&self, object_key: &str, upload_id: &str, number: i32, body: Bytes) -> StorageResult<String> {
        let output = self
            .client
            .upload_part()
            .bucket(&self.bucket)
            .key(object_key)
            .upload_id(upload_id)
            .part_number(number)
            .content_length(body.len() as i64)
            .body(body.into())
            .send()
            .await
            .map_err(|err| sdk_error("upload a part", object_key, err))?;
        output.e_tag.ok_or_else(|| StorageError::Failed("the service returned no part ETag".into()))
    }

    async fn complete(&self, object_key: &str, upload_id: &str, etags: Vec<String>) -> StorageResult<()> {
        let parts = etags
            .into_iter()
            .zip(1..)
            .map(|(etag, number)| CompletedPart::builder().part_number(number).e_tag(etag).build())
            .collect();
        self.client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(object_key)
            .upload_id(upload_id)
            .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(parts)).build())
            .send()
            .await
            .map_err(|err| sdk_error("complete a multipart upload", object_key, err))?;
        Ok(())
    }

    async fn abort(&self, object_key: &str, upload_id: &str) -> StorageResult<()> {
        let result =
            self.client.abort_multipart_upload().bucket(&self.bucket).key(object_key).upload_id(upload_id).send().await;
        match result.map_err(|err| sdk_error("abort a multipart upload", object_key, err)) {
            // NoSuchUpload: already aborted or completed.
            Ok(_) | Err(StorageError::NotFound(_)) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// The multipart half of `put_stream`: uploads `buffer` and the rest of `incoming` in parts
    /// of [`STREAM_PART_SIZE`] (the last one shorter), then completes the upload.
    async fn put_multipart(
        &self,
        object_key: &str,
        upload_id: &str,
        mut buffer: BytesMut,
        incoming: &mut Incoming,
    ) -> StorageResult<()> {
        let mut etags = Vec::new();
        loop {
            incoming.fill(&mut buffer).await?;
            if buffer.is_empty() {
                break;
            }
            if etags.len() as u64 >= MAX_PARTS {
                return Err(StorageError::TooLarge { limit: MAX_PARTS * STREAM_PART_SIZE as u64 });
            }
            let part = buffer.split_to(buffer.len().min(STREAM_PART_SIZE)).freeze();
            etags.push(self.upload_part(object_key, upload_id, etags.len() as i32 + 1, part).await?);
        }
        self.complete(object_key, upload_id, etags).await
    }
}

#[async_trait]
impl BlobStore for S3BlobStore {
    fn kind(&self) -> &'static str {
        "s3"
    }

    async fn begin_upload(&self, key: &StorageKey, size: u64, chunk_size: u64) -> StorageResult<StagedUpload> {
        check_upload_shape(size, chunk_size)?;
        let chunks = crate::hash::chunk_count(chunk_size, size);
        // Fail now rather than at completion, after every byte has been sent.
        if chunks > 1 && chunk_size < MIN_PART_SIZE {
            return Err(StorageError::Failed(format!("S3 needs chunks of at least {MIN_PART_SIZE} bytes")));
        }
        if chunks > MAX_PARTS {
            return Err(StorageError::SizeUnsupported {
                size,
                why: format!("S3 allows at most {MAX_PARTS} parts, this upload needs {chunks}"),
            });
        }
        // An empty blob has no parts, and S3 cannot complete a multipart upload without one.
        let handle = if size == 0 {
            String::new()
        } else {
            let object_key = self.object_key(key.as_str());
            let output = self
                .client
                .create_multipart_upload()
                .bucket(&self.bucket)
                .key(&object_key)
                .send()
                .await
                .map_err(|err| sdk_error("start a multipart upload", &object_key, err))?;
            output.upload_id.ok_or_else(|| StorageError::Failed("the service returned no upload id".into()))?
        };
        Ok(StagedUpload { key: key.to_string(), size, chunk_size, handle })
    }

    async fn put_chunk(&self, upload: &StagedUpload, index: u32, body: ByteStream) -> StorageResult<ChunkReceipt> {
        check_upload_shape(upload.size, upload.chunk_size)?;
        let expected = upload.expect_chunk(index)?;
        let hasher = ChunkHasher::new(index, upload.chunk_size, upload.size)
            .map_err(|err| StorageError::Failed(err.to_string()))?;
        let state = Arc::new(Mutex::new(BodyState { hasher, failure: None }));
        let body = CheckedBody::new(body, expected, state.clone());
        let object_key = self.object_key(&upload.key);
        let result = self
            .client
            .upload_part()
            .bucket(&self.bucket)
            .key(&object_key)
            .upload_id(&upload.handle)
            .part_number(index as i32 + 1)
            .content_length(expected as i64)
            .body(aws_sdk_s3::primitives::ByteStream::from_body_1_x(body))
            .send()
            .await;
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        // A body that failed (wrong length, client gone) explains the request's failure best.
        if let Some(failure) = state.failure.take() {
            return Err(failure);
        }
        let output = result.map_err(|err| match sdk_error("upload a part", &object_key, err) {
            StorageError::NotFound(_) => StorageError::NotFound(format!("staged upload {}", upload.handle)),
            other => other,
        })?;
        let chaining_value = state.hasher.finalize().map_err(|err| StorageError::Failed(err.to_string()))?;
        let etag = output.e_tag.ok_or_else(|| StorageError::Failed("the service returned no part ETag".into()))?;
        Ok(ChunkReceipt { index, size: expected, etag: Some(etag), chaining_value })
    }

    async fn complete_upload(&self, upload: &StagedUpload, chunks: &[ChunkReceipt]) -> StorageResult<()> {
        upload.check_receipts(chunks)?;
        let object_key = self.object_key(&upload.key);
        // S3 would silently replace the object; a conditional write (If-None-Match) is not
        // supported by every S3-compatible service, so this check leaves a small race window.
        self.refuse_existing(&object_key, &upload.key).await?;
        if upload.size == 0 {
            return self.put_small(&object_key, Bytes::new()).await;
        }
        let mut receipts: Vec<&ChunkReceipt> = chunks.iter().collect();
        receipts.sort_by_key(|receipt| receipt.index);
        let etags = receipts
            .into_iter()
            .map(|receipt| {
                receipt.etag.clone().ok_or_else(|| StorageError::Failed(format!("chunk {} has no ETag", receipt.index)))
            })
            .collect::<StorageResult<Vec<_>>>()?;
        self.complete(&object_key, &upload.handle, etags).await.map_err(|err| match err {
            StorageError::NotFound(_) => StorageError::NotFound(format!("staged upload {}", upload.handle)),
            other => other,
        })
    }

    async fn abort_upload(&self, upload: &StagedUpload) -> StorageResult<()> {
        if upload.handle.is_empty() {
            return Ok(());
        }
        self.abort(&self.object_key(&upload.key), &upload.handle).await
    }

    async fn put_stream(&self, key: &StorageKey, body: ByteStream, max_len: Option<u64>) -> StorageResult<PutOutcome> {
        let object_key = self.object_key(key.as_str());
        self.refuse_existing(&object_key, key.as_str()).await?;
        let mut incoming = Incoming { body, hasher: StreamHasher::new(), max_len, ended: false };
        let mut buffer = BytesMut::new();
        incoming.fill(&mut buffer).await?;
        if incoming.ended && buffer.len() <= STREAM_PART_SIZE {
            // Fits in one part: one request, and nothing to clean up if it fails.
            self.put_small(&object_key, buffer.freeze()).await?;
        } else {
            let output = self
                .client
                .create_multipart_upload()
                .bucket(&self.bucket)
                .key(&object_key)
                .send()
                .await
                .map_err(|err| sdk_error("start a multipart upload", &object_key, err))?;
            let upload_id =
                output.upload_id.ok_or_else(|| StorageError::Failed("the service returned no upload id".into()))?;
            let guard = AbortOnDrop::new(self, &object_key, &upload_id);
            let written = self.put_multipart(&object_key, &upload_id, buffer, &mut incoming).await;
            guard.disarm();
            if let Err(err) = written {
                // Parts of an abandoned upload are billed until aborted; the error matters more
                // than a failure to clean up.
                if let Err(abort) = self.abort(&object_key, &upload_id).await {
                    tracing::warn!(key = %object_key, error = %abort, "could not abort a failed multipart upload");
                }
                return Err(err);
            }
        }
        Ok(PutOutcome { size: incoming.hasher.len(), blake3: incoming.hasher.finalize() })
    }

    async fn get(&self, key: &StorageKey, range: Option<ByteRange>) -> StorageResult<ByteStream> {
        let object_key = self.object_key(key.as_str());
        let mut request = self.client.get_object().bucket(&self.bucket).key(&object_key);
        if let Some(range) = range {
            request = request.range(format!("bytes={}-{}", range.start, range.end_inclusive));
        }
        let output = request.send().await.map_err(|err| match sdk_error("read an object", &object_key, err) {
            StorageError::NotFound(_) => StorageError::NotFound(key.to_string()),
            other => other,
        })?;
        let stream = futures_util::stream::unfold(output.body, |mut body| async move {
            body.next().await.map(|piece| (piece.map_err(io::Error::other), body))
        });
        Ok(Box::pin(stream))
    }

    async fn size(&self, key: &StorageKey) -> StorageResult<Option<u64>> {
        let object_key = self.object_key(key.as_str());
        match self.client.head_object().bucket(&self.bucket).key(&object_key).send().await {
            Ok(output) => Ok(Some(output.content_length.unwrap_or(0).max(0) as u64)),
            Err(err) => match sdk_error("inspect an object", &object_key, err) {
                StorageError::NotFound(_) => Ok(None),
                other => Err(other),
            },
        }
    }

    async fn delete(&self, key: &StorageKey) -> StorageResult<()> {
        let object_key = self.object_key(key.as_str());
        match self.client.delete_object().bucket(&self.bucket).key(&object_key).send().await {
            Ok(_) => Ok(()),
            Err(err) => match sdk_error("delete an object", &object_key, err) {
                StorageError::NotFound(_) => Ok(()),
                other => Err(other),
            },
        }
    }

    async fn presigned_get(
        &self,
        key: &StorageKey,
        expires: Duration,
        file_name: &str,
    ) -> StorageResult<Option<String>> {
        let content_disposition = crate::http::attachment_disposition(file_name);
        let object_key = self.object_key(key.as_str());
        let presigning =
            PresigningConfig::expires_in(expires).map_err(|err| StorageError::Failed(format!("presign: {err}")))?;
        let request = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&object_key)
            .response_content_disposition(content_disposition)
            .presigned(presigning)
            .await
            .map_err(|err| sdk_error("presign a download", &object_key, err))?;
        Ok(Some(request.uri().to_owned()))
    }

    async fn list(&self) -> StorageResult<Vec<ListedBlob>> {
        let mut found = Vec::new();
        let mut continuation: Option<String> = None;
        loop {
            let mut request = self.client.list_objects_v2().bucket(&self.bucket);
            if !self.prefix.is_empty() {
                request = request.prefix(&self.prefix);
            }
            if let Some(token) = &continuation {
                request = request.continuation_token(token);
            }
            let page = request.send().await.map_err(|err| sdk_error("list objects", &self.prefix, err))?;
            for object in page.contents() {
                let Some(key) = object.key().and_then(|k| k.strip_prefix(&self.prefix)) else { continue };
                let modified_ms =
                    object.last_modified().map_or(0, |t| t.secs() * 1000 + i64::from(t.subsec_nanos() / 1_000_000));
                found.push(ListedBlob { key: key.to_owned(), modified_ms });
            }
            match page.next_continuation_token() {
                Some(token) if page.is_truncated() == Some(true) => continuation = Some(token.to_owned()),
                _ => return Ok(found),
            }
        }
    }

    fn list_below(&self, folder: Option<&StorageKey>) -> ListingStream {
        let below = match folder {
            Some(folder) => format!("{}{folder}/", self.prefix),
            None => self.prefix.clone(),
        };
        let pages = ListingPages { store: self.clone(), below, continuation: None, page: Vec::new(), done: false };
        Box::pin(futures_util::stream::unfold(pages, |mut pages| async move {
            let next = pages.next().await?;
            Some((next, pages))
        }))
    }

    async fn check(&self) -> StorageResult<()> {
        super::check_with_probe(self).await
    }

    async fn reachable(&self) -> StorageResult<()> {
        match self.client.head_bucket().bucket(&self.bucket).send().await {
            Ok(_) => Ok(()),
            Err(err) => Err(match sdk_error("reach the bucket", &self.bucket, err) {
                StorageError::NotFound(bucket) => StorageError::Failed(format!("the bucket {bucket} does not exist")),
                other => other,
            }),
        }
    }
}

/// The body of a `put_stream`, hashed and counted as it is read.
struct Incoming {
    body: ByteStream,
    hasher: StreamHasher,
    max_len: Option<u64>,
    ended: bool,
}

impl Incoming {
    /// Reads into `buffer` until it holds more than one part (so a full part is known not to
    /// be the last) or the body ends, refusing more than `max_len` bytes in all.
    async fn fill(&mut self, buffer: &mut BytesMut) -> StorageResult<()> {
        while !self.ended && buffer.len() <= STREAM_PART_SIZE {
            let Some(piece) = self.body.next().await else {
                self.ended = true;
                break;
            };
            let piece = piece.map_err(|err| StorageError::Body(err.to_string()))?;
            if let Some(limit) = self.max_len
                && self.hasher.len() + piece.len() as u64 > limit
            {
                return Err(StorageError::TooLarge { limit });
            }
            self.hasher.update(&piece);
            buffer.extend_from_slice(&piece);
        }
        Ok(())
    }
}

/// Aborts a multipart upload whose `put_stream` future was dropped midway (the client went
/// away), so its parts do not linger; explicit failures abort inline instead.
struct AbortOnDrop {
    armed: Option<(Client, String, String, String)>,
}

impl AbortOnDrop {
    fn new(store: &S3BlobStore, object_key: &str, upload_id: &str) -> Self {
        Self { armed: Some((store.client.clone(), store.bucket.clone(), object_key.to_owned(), upload_id.to_owned())) }
    }

    fn disarm(mut self) {
        self.armed = None;
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        let Some((client, bucket, key, upload_id)) = self.armed.take() else { return };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let aborted =
                    client.abort_multipart_upload().bucket(&bucket).key(&key).upload_id(upload_id).send().await;
                if let Err(error) = aborted {
                    tracing::warn!(%key, %error, "could not abort an abandoned multipart upload");
                }
            });
        }
    }
}

/// What a chunk's body learned while the SDK sent it.
struct BodyState {
    hasher: ChunkHasher,
    /// Why the body stopped early; takes precedence over the SDK's own error.
    failure: Option<StorageError>,
}

/// A chunk's body on its way to S3: hashed and counted as it passes, and cut off with an error
/// as soon as it proves longer or shorter than declared. The last piece is held back until the
/// source has ended, so a body that is too long never completes a part.
struct CheckedBody {
    // The SDK wants a `Sync` body; the mutex provides that and is never locked (`get_mut`).
    source: Mutex<ByteStream>,
    expected: u64,
    sent: u64,
    held: Option<Bytes>,
    done: bool,
    state: Arc<Mutex<BodyState>>,
}

impl CheckedBody {
    fn new(source: ByteStream, expected: u64, state: Arc<Mutex<BodyState>>) -> Self {
        Self { source: Mutex::new(source), expected, sent: 0, held: None, done: false, state }
    }

    fn fail(&mut self, failure: StorageError) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let message = failure.to_string();
        self.state.lock().unwrap_or_else(PoisonError::into_inner).failure = Some(failure);
        self.done = true;
        Poll::Ready(Some(Err(io::Error::other(message))))
    }

    fn send(&mut self, piece: Bytes) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        self.sent += piece.len() as u64;
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }
}

impl Body for CheckedBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        loop {
            let source = this.source.get_mut().unwrap_or_else(PoisonError::into_inner);
            let next = match source.as_mut().poll_next(cx) {
                Poll::Ready(next) => next,
                Poll::Pending => return Poll::Pending,
            };
            match next {
                Some(Ok(piece)) if piece.is_empty() => continue,
                Some(Ok(piece)) => {
                    let mut state = this.state.lock().unwrap_or_else(PoisonError::into_inner);
                    let actual = state.hasher.received() + piece.len() as u64;
                    if actual > this.expected {
                        drop(state);
                        return this.fail(StorageError::LengthMismatch { expected: this.expected, actual });
                    }
                    state.hasher.update(&piece);
                    drop(state);
                    if actual < this.expected {
                        return this.send(piece);
                    }
                    this.held = Some(piece);
                }
                Some(Err(err)) => return this.fail(StorageError::Body(err.to_string())),
                None => {
                    let received = this.state.lock().unwrap_or_else(PoisonError::into_inner).hasher.received();
                    if received < this.expected {
                        return this.fail(StorageError::LengthMismatch { expected: this.expected, actual: received });
                    }
                    this.done = true;
                    return match this.held.take() {
                        Some(piece) => this.send(piece),
                        None => Poll::Ready(None),
                    };
                }
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.expected.saturating_sub(self.sent))
    }
}

/// Maps an SDK failure: a missing object is `NotFound(what)`; what a retry can fix (timeouts,
/// lost connections, 5xx, throttling) is `Unavailable`; the rest (credentials, permissions, a
/// missing bucket, bad requests) is `Failed`.
fn sdk_error<E>(action: &str, what: &str, err: SdkError<E, HttpResponse>) -> StorageError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let message = format!("cannot {action}: {}", DisplayErrorContext(&err));
    match &err {
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => StorageError::Unavailable(message),
        SdkError::DispatchFailure(failure) if failure.is_user() => StorageError::Failed(message),
        SdkError::DispatchFailure(_) => StorageError::Unavailable(message),
        SdkError::ServiceError(context) => {
            let status = context.raw().status().as_u16();
            match context.err().code() {
                Some("NoSuchKey" | "NoSuchUpload" | "NotFound") => StorageError::NotFound(what.to_owned()),
                Some("NoSuchBucket") => StorageError::Failed(message),
                Some("SlowDown" | "Throttling" | "ThrottlingException" | "RequestTimeout" | "ServiceUnavailable") => {
                    StorageError::Unavailable(message)
                }
                // HEAD answers carry no error body, so only the status tells.
                _ if status == 404 => StorageError::NotFound(what.to_owned()),
                _ if status >= 500 || status == 429 => StorageError::Unavailable(message),
                _ => StorageError::Failed(message),
            }
        }
        _ => StorageError::Failed(message),
    }
}
