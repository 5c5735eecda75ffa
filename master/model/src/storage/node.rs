//! A storage node as a [`BlobStore`]: control calls go over the signed RPC protocol, bytes go
//! over the node's data plane with credentials this master signs. Client uploads skip the
//! master ([`BlobStore::direct_upload`]); downloads, migrations and deletions work like any
//! other store, streaming through here when the master itself needs the bytes.

use std::time::Duration;

use async_trait::async_trait;
use futures_util::TryStreamExt;
use nubo_common::secret::Secret;
use nubo_common::storage::{
    BlobStore, ByteRange, ByteStream, ChunkReceipt, DirectUpload, ListedBlob, ListingStream, PutOutcome, StagedUpload,
    StorageError, StorageKey, StorageResult,
};
use nubo_protocol::client::{CallError, NODE_RPC_PATH, RpcClient};
use nubo_protocol::credential::{self, DownloadGrant, UploadGrant, WriteGrant};
use nubo_protocol::key::NodeKey;
use nubo_protocol::methods::{BlobDeleteParams, BlobStatParams, UploadSessionAbortParams, UploadSessionCreateParams};
use nubo_protocol::rpc::ErrorCode;
use nubo_protocol::{Role, unix_now};
use serde::Deserialize;

use crate::db::nodes::NodeRow;

/// Longest one control call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a node keeps an upload session: a little longer than the master does (a day), so
/// the master's reaper, not the node, decides when a session ends.
const NODE_SESSION_LIFETIME: Duration = Duration::from_secs(25 * 3600);
/// Lifetime of the credentials the master uses for its own transfers.
const TRANSFER_CREDENTIAL_LIFETIME: Duration = Duration::from_secs(6 * 3600);

/// One storage node, as the stores of the policies bound to it.
pub struct NodeBlobStore {
    node_id: String,
    name: String,
    base_url: String,
    key: NodeKey,
    rpc: RpcClient,
    http: reqwest::Client,
}

impl NodeBlobStore {
    pub fn new(node: &NodeRow) -> Result<Self, String> {
        let key = NodeKey::new(&Secret::new(node.secret_key.clone())).map_err(|e| e.to_string())?;
        let node_id = node.id.to_string();
        let rpc = RpcClient::new(&node.base_url, NODE_RPC_PATH, key.clone(), &node_id, Role::Master, CALL_TIMEOUT)
            .map_err(|e| e.to_string())?;
        // Data-plane transfers may be long: only connecting is bounded.
        let http = reqwest::Client::builder()
            .connect_timeout(CALL_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            node_id,
            name: node.name.clone(),
            base_url: node.base_url.trim_end_matches('/').to_owned(),
            key,
            rpc,
            http,
        })
    }

    /// The node's control-plane client (for calls beyond blob storage: external downloads).
    pub fn rpc(&self) -> &RpcClient {
        &self.rpc
    }

    fn unreachable(&self, detail: impl std::fmt::Display) -> StorageError {
        StorageError::Unavailable(format!("storage node {} does not answer: {detail}", self.name))
    }

    /// Maps a failed control call on `key` to the storage error the callers understand.
    fn call_failure(&self, key: &str, error: CallError) -> StorageError {
        match error {
            CallError::Unreachable(detail) => self.unreachable(detail),
            CallError::Refused(error) => match error.code {
                ErrorCode::NotFound => StorageError::NotFound(key.to_owned()),
                ErrorCode::Conflict => StorageError::AlreadyExists(key.to_owned()),
                ErrorCode::Unavailable => self.unreachable(error.message),
                _ => StorageError::Failed(format!("storage node {} refused: {error}", self.name)),
            },
        }
    }

    fn download_url(&self, key: &StorageKey, file_name: &str, expires: Duration) -> String {
        let grant = DownloadGrant {
            node_id: self.node_id.clone(),
            storage_key: key.to_string(),
            size: None,
            file_name: file_name.to_owned(),
            content_type: None,
            range: None,
            expires_at: unix_now() + expires.as_secs(),
        };
        format!("{}/api/v1/slave/download/{}", self.base_url, credential::issue(&self.key, &grant))
    }
}

/// The node's answer to a blob write.
#[derive(Deserialize)]
struct Written {
    size: u64,
    blake3: String,
}

#[async_trait]
impl BlobStore for NodeBlobStore {
    fn kind(&self) -> &'static str {
        "node"
    }

    async fn begin_upload(&self, key: &StorageKey, size: u64, chunk_size: u64) -> StorageResult<StagedUpload> {
        let upload = StagedUpload {
            key: key.to_string(),
            size,
            chunk_size,
            // The node's session id: fresh per upload, so it names nothing of the master's.
            handle: uuid::Uuid::new_v4().simple().to_string(),
        };
        let params = UploadSessionCreateParams {
            session_id: upload.handle.clone(),
            storage_key: upload.key.clone(),
            size,
            chunk_size,
            total_chunks: u64::from(upload.total_chunks()),
            expires_at: unix_now() + NODE_SESSION_LIFETIME.as_secs(),
        };
        self.rpc.call(params).await.map_err(|e| self.call_failure(key.as_str(), e))?;
        Ok(upload)
    }

    async fn put_chunk(&self, _upload: &StagedUpload, _index: u32, _body: ByteStream) -> StorageResult<ChunkReceipt> {
        Err(StorageError::Failed("the chunks of an upload to a storage node go to the node directly".into()))
    }

    /// The node assembles the blob itself when the last chunk arrives: completing here only
    /// checks that it did.
    async fn complete_upload(&self, upload: &StagedUpload, _chunks: &[ChunkReceipt]) -> StorageResult<()> {
        let key = StorageKey::parse(&upload.key)?;
        match self.size(&key).await? {
            Some(size) if size == upload.size => Ok(()),
            Some(size) => Err(StorageError::LengthMismatch { expected: upload.size, actual: size }),
            None => Err(StorageError::Failed(format!("storage node {} has no blob at {key} yet", self.name))),
        }
    }

    async fn abort_upload(&self, upload: &StagedUpload) -> StorageResult<()> {
        let params = UploadSessionAbortParams { session_id: upload.handle.clone() };
        self.rpc.call(params).await.map_err(|e| self.call_failure(&upload.key, e))?;
        Ok(())
    }

    async fn put_stream(&self, key: &StorageKey, body: ByteStream, max_len: Option<u64>) -> StorageResult<PutOutcome> {
        let grant = WriteGrant {
            node_id: self.node_id.clone(),
            storage_key: key.to_string(),
            max_size: max_len,
            expires_at: unix_now() + TRANSFER_CREDENTIAL_LIFETIME.as_secs(),
        };
        let url = format!("{}/api/v1/slave/blob/{}", self.base_url, credential::issue(&self.key, &grant));
        let answer = self
            .http
            .put(url)
            .body(reqwest::Body::wrap_stream(body))
            .send()
            .await
            .map_err(|e| self.unreachable(e.without_url()))?;
        match answer.status().as_u16() {
            201 => {
                let written: Written = answer.json().await.map_err(|e| self.unreachable(e.without_url()))?;
                Ok(PutOutcome { size: written.size, blake3: written.blake3 })
            }
            409 => Err(StorageError::AlreadyExists(key.to_string())),
            413 => Err(StorageError::TooLarge { limit: max_len.unwrap_or(0) }),
            503 => Err(self.unreachable("the node's storage is unavailable")),
            status => Err(StorageError::Failed(format!("storage node {} answered {status} to a write", self.name))),
        }
    }

    async fn get(&self, key: &StorageKey, range: Option<ByteRange>) -> StorageResult<ByteStream> {
        let mut request = self.http.get(self.download_url(key, "blob", TRANSFER_CREDENTIAL_LIFETIME));
        if let Some(range) = range {
            request = request.header("range", format!("bytes={}-{}", range.start, range.end_inclusive));
        }
        let answer = request.send().await.map_err(|e| self.unreachable(e.without_url()))?;
        match answer.status().as_u16() {
            200 | 206 => Ok(Box::pin(answer.bytes_stream().map_err(|e| std::io::Error::other(e.without_url())))),
            404 => Err(StorageError::NotFound(key.to_string())),
            503 => Err(self.unreachable("the node's storage is unavailable")),
            status => Err(StorageError::Failed(format!("storage node {} answered {status} to a read", self.name))),
        }
    }

    async fn size(&self, key: &StorageKey) -> StorageResult<Option<u64>> {
        match self.rpc.call(BlobStatParams { storage_key: key.to_string() }).await {
            Ok(stat) => Ok(Some(stat.size)),
            Err(CallError::Refused(error)) if error.code == ErrorCode::NotFound => Ok(None),
            Err(error) => Err(self.call_failure(key.as_str(), error)),
        }
    }

    async fn delete(&self, key: &StorageKey) -> StorageResult<()> {
        self.rpc
            .call(BlobDeleteParams { storage_key: key.to_string() })
            .await
            .map_err(|e| self.call_failure(key.as_str(), e))?;
        Ok(())
    }

    async fn presigned_get(
        &self,
        key: &StorageKey,
        expires: Duration,
        file_name: &str,
    ) -> StorageResult<Option<String>> {
        Ok(Some(self.download_url(key, file_name, expires)))
    }

    /// Nodes do not list their blobs over the protocol: the orphan collector skips node-backed
    /// policies (a node drops the staged bytes of sessions that end by itself).
    async fn list(&self) -> StorageResult<Vec<ListedBlob>> {
        Err(StorageError::Failed("storage nodes do not list their blobs".into()))
    }

    fn list_below(&self, _folder: Option<&StorageKey>) -> ListingStream {
        nubo_common::storage::unlisted("storage nodes do not list their blobs")
    }

    async fn check(&self) -> StorageResult<()> {
        nubo_common::storage::check_with_probe(self).await
    }

    fn direct_upload(&self, upload: &StagedUpload, expires_at: u64) -> Option<DirectUpload> {
        let grant = UploadGrant {
            session_id: upload.handle.clone(),
            node_id: self.node_id.clone(),
            size: upload.size,
            chunk_size: upload.chunk_size,
            total_chunks: u64::from(upload.total_chunks()),
            expires_at,
        };
        Some(DirectUpload {
            url: format!("{}/api/v1/slave/upload/{}", self.base_url, upload.handle),
            credential: credential::issue(&self.key, &grant),
            expires_at,
        })
    }
}
