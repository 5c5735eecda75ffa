//! Storage nodes for tests: real `nubo-slave` servers in this process on their own ports,
//! registered with a test master, stoppable and restartable on the same address and data
//! directory; plus client-direct uploads and a tiny HTTP origin for external downloads.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use nubo_common::secret::Secret;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::files::files_below;
use crate::{Session, TestApp};

/// The key every test node shares with the master.
pub const NODE_KEY: &str = "test-node-key-test-node-key-0123456789";

/// A running (or stopped) storage node.
pub struct TestNode {
    pub id: String,
    pub url: String,
    pub addr: SocketAddr,
    config: nubo_slave::config::Config,
    running: Option<(oneshot::Sender<()>, JoinHandle<std::io::Result<()>>)>,
    // Dropped last: the node's files outlive the node.
    pub dir: tempfile::TempDir,
}

impl TestNode {
    /// Registers a node with the master (as `admin`) and starts it, reporting to the master.
    /// `allow_private` lets its external downloads reach 127.0.0.1 (the test origin).
    pub async fn start(app: &TestApp, admin: &Session, allow_private: bool) -> TestNode {
        Self::start_configured(app, admin, allow_private, |_| {}).await
    }

    /// Like [`TestNode::start`], with the node's configuration adjusted by `adjust` first.
    pub async fn start_configured(
        app: &TestApp,
        admin: &Session,
        allow_private: bool,
        adjust: impl FnOnce(&mut nubo_slave::config::Config),
    ) -> TestNode {
        let name = format!("node-{}", uuid::Uuid::new_v4().simple());
        // The node must know the id the master gives it: register first, then start, then
        // tell the master the real address.
        let body = json!({"name": name, "base_url": "http://127.0.0.1:9", "key": NODE_KEY});
        let response = app.call(Method::POST, "/admin/node", Some(&admin.access), Some(body)).await;
        assert_eq!(response.status(), 201);
        let id = response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
        let dir = tempfile::tempdir().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let config = nubo_slave::config::Config {
            listen: addr,
            data_dir: dir.path().to_owned(),
            master_url: Some(app.base_url.clone()),
            node_id: Some(id.clone()),
            node_key: Some(Secret::new(NODE_KEY)),
            report_wait_seconds: 2,
            report_retry_max_seconds: 1,
            fetch_allow_private_addresses: allow_private,
            ..nubo_slave::config::Config::default()
        };
        let mut config = config;
        adjust(&mut config);
        let mut node = TestNode { id, url: format!("http://{addr}"), addr, config, running: None, dir };
        node.serve(listener);
        let update = json!({"name": name, "base_url": node.url, "enabled": true});
        let response =
            app.call(Method::PUT, &format!("/admin/node/{}", node.id), Some(&admin.access), Some(update)).await;
        assert_eq!(response.status(), 200);
        node
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let server = nubo_slave::server::Node::new(self.config.clone()).expect("node configuration");
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(server.serve(listener, async move {
            let _ = stopped.await;
        }));
        self.running = Some((stop, handle));
    }

    /// Stops the node (in-flight requests finish); its files stay.
    pub async fn stop(&mut self) {
        if let Some((stop, handle)) = self.running.take() {
            let _ = stop.send(());
            let _ = tokio::time::timeout(Duration::from_secs(10), handle).await;
        }
    }

    /// Starts the node again on the same address and data directory.
    pub async fn restart(&mut self) {
        self.stop().await;
        let listener = tokio::net::TcpListener::bind(self.addr).await.expect("the node's port is free again");
        self.serve(listener);
    }

    /// Finished blobs on the node's disk.
    pub fn blobs(&self) -> Vec<PathBuf> {
        let root = self.dir.path().join("blobs");
        files_below(&root)
            .into_iter()
            .filter(|path| {
                // Staging files live under dot-directories of the store.
                let relative = path.strip_prefix(&root).unwrap_or(path);
                !relative.components().any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
            })
            .collect()
    }
}

impl TestApp {
    /// Gives the `Users` group a local policy on `node` with 64 KiB chunks; answers its id.
    pub async fn use_node_policy(&self, admin: &Session, node: &TestNode, private: bool) -> String {
        let policy = json!({"name": format!("on {}", node.id), "type": "local", "chunk_size": crate::files::SMALL_CHUNK,
                            "is_private": private, "node_id": node.id});
        self.use_policy(admin, policy).await
    }

    /// Uploads `bytes` straight to the node the new session names, chunk by chunk; answers the
    /// session and the answer to the last chunk.
    pub async fn upload_direct(
        &self,
        session: &Session,
        parent: &str,
        name: &str,
        bytes: &[u8],
    ) -> (Value, reqwest::Response) {
        let response = self.start_upload(session, parent, name, bytes.len()).await;
        assert_eq!(response.status(), 201, "upload session for {name}: {}", response.text().await.unwrap_or_default());
        let state: Value = response.json().await.unwrap();
        let chunk = state["chunk_size"].as_u64().unwrap() as usize;
        let mut last = None;
        for (index, piece) in bytes.chunks(chunk).enumerate() {
            last = Some(self.put_direct(&state, index, piece.to_vec()).await);
        }
        (state, last.expect("at least one chunk"))
    }

    /// Sends chunk `index` of the session `state` to its node.
    pub async fn put_direct(&self, state: &Value, index: usize, bytes: Vec<u8>) -> reqwest::Response {
        let direct = &state["direct"];
        let url = format!("{}/{index}", direct["url"].as_str().expect("a direct upload"));
        self.client.put(url).bearer_auth(direct["credential"].as_str().unwrap()).body(bytes).send().await.unwrap()
    }
}

/// A local HTTP origin on 127.0.0.1 serving `/file.bin` (the given bytes) and `/redirect`
/// (a 302 to `/file.bin`); it stops when dropped.
pub struct TestOrigin {
    pub url: String,
    _stop: oneshot::Sender<()>,
}

impl TestOrigin {
    pub async fn start(content: Vec<u8>) -> TestOrigin {
        use axum::routing::get;
        let content = bytes::Bytes::from(content);
        let app = axum::Router::new()
            .route("/file.bin", get(move || async move { content.clone() }))
            .route("/redirect", get(|| async { axum::response::Redirect::temporary("/file.bin") }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        TestOrigin { url, _stop: stop }
    }
}
