//! A running node and the master's side of the conversation: signed calls and credentials.

use nubo_common::secret::Secret;
use nubo_protocol::credential::{self, DownloadGrant, UploadGrant};
use nubo_protocol::key::NodeKey;
use nubo_protocol::methods::{Call, UploadSessionCreateParams};
use nubo_protocol::rpc::Request;
use nubo_protocol::signing::{RequestParts, SignatureHeaders, Signer};
use nubo_protocol::{Role, unix_now};
use nubo_slave::config::Config;
use nubo_slave::server::Node;
use serde_json::Value;
use tempfile::TempDir;

pub const KEY: &str = "node-key-0123456789-0123456789-0123";
pub const NODE: &str = "node-1";
pub const RPC_PATH: &str = "/api/v1/slave/rpc";

pub fn key() -> NodeKey {
    NodeKey::new(&Secret::new(KEY)).unwrap()
}

pub struct TestNode {
    pub base: String,
    pub client: reqwest::Client,
    dir: TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl TestNode {
    pub async fn start() -> Self {
        Self::start_in(tempfile::tempdir().unwrap()).await
    }

    /// Starts a node on `dir`, e.g. the data directory of a node that was stopped.
    pub async fn start_in(dir: TempDir) -> Self {
        Self::start_configured(dir, |_| {}).await
    }

    /// Starts a node on `dir` with its configuration adjusted by `adjust` first.
    pub async fn start_configured(dir: TempDir, adjust: impl FnOnce(&mut Config)) -> Self {
        let mut config = Config {
            data_dir: dir.path().to_path_buf(),
            node_id: Some(NODE.into()),
            node_key: Some(Secret::new(KEY)),
            ..Config::default()
        };
        adjust(&mut config);
        let node = Node::new(config).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(node.serve(listener, async move {
            let _ = stopped.await;
        }));
        Self { base, client: reqwest::Client::new(), dir, _stop: stop }
    }

    /// Stops the server and hands back its data directory.
    pub fn stop(self) -> TempDir {
        drop(self._stop);
        self.dir
    }

    /// Puts `bytes` at `key` in the node's blob store, as a finished upload would.
    pub fn write_blob(&self, key: &str, bytes: &[u8]) {
        let path = self.dir.path().join("blobs").join(key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Posts `body` to the RPC endpoint with `headers`; answers the status and the JSON body.
    pub async fn post_rpc(&self, body: Vec<u8>, headers: Option<&SignatureHeaders>) -> (u16, Value) {
        let mut request = self.client.post(self.url(RPC_PATH)).body(body);
        if let Some(headers) = headers {
            for (name, value) in headers.pairs() {
                request = request.header(name, value);
            }
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap())
    }

    /// A call signed by the master with the right key, now.
    pub async fn call(&self, call: impl Into<Call>) -> (u16, Value) {
        let body = serde_json::to_vec(&Request::new("req-1", call)).unwrap();
        let headers = sign(&key(), &body, unix_now());
        self.post_rpc(body, Some(&headers)).await
    }

    pub async fn create_session(&self, session: &str, storage_key: &str, size: u64, chunk_size: u64) {
        let params = UploadSessionCreateParams {
            session_id: session.into(),
            storage_key: storage_key.into(),
            size,
            chunk_size,
            total_chunks: size.div_ceil(chunk_size),
            expires_at: unix_now() + 3600,
        };
        let (status, body) = self.call(params).await;
        assert_eq!(status, 200, "{body}");
    }

    pub async fn put_chunk(&self, session: &str, index: u32, credential: &str, bytes: Vec<u8>) -> reqwest::Response {
        let url = self.url(&format!("/api/v1/slave/upload/{session}/{index}"));
        self.client.put(url).bearer_auth(credential).body(bytes).send().await.unwrap()
    }
}

/// Signs `body` as the master would for the RPC endpoint.
pub fn sign(key: &NodeKey, body: &[u8], now: u64) -> SignatureHeaders {
    let signer = Signer::new(key.clone(), NODE, Role::Master).unwrap();
    signer.sign(&RequestParts { method: "POST", path: RPC_PATH, body }, now).unwrap()
}

pub fn upload_grant(session: &str, size: u64, chunk_size: u64) -> UploadGrant {
    UploadGrant {
        session_id: session.into(),
        node_id: NODE.into(),
        size,
        chunk_size,
        total_chunks: size.div_ceil(chunk_size),
        expires_at: unix_now() + 600,
    }
}

pub fn download_grant(storage_key: &str, size: u64, file_name: &str) -> DownloadGrant {
    DownloadGrant {
        node_id: NODE.into(),
        storage_key: storage_key.into(),
        size: Some(size),
        file_name: file_name.into(),
        content_type: None,
        range: None,
        expires_at: unix_now() + 600,
    }
}

pub fn issue<G: credential::Grant>(grant: &G) -> String {
    credential::issue(&key(), grant)
}

/// Deterministic test content of `len` bytes.
pub fn content(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

pub fn error_code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}
