//! File helpers for tests: folders, uploads through sessions and chunks, downloads.

use reqwest::Method;
use serde_json::{Value, json};

use crate::s3::S3TestServer;
use crate::{Session, TestApp};

/// The storage kinds file tests run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    Local,
    S3,
}

/// The policy a file test runs with; an S3 one keeps its server running.
pub struct TestPolicy {
    pub kind: PolicyKind,
    pub id: String,
    /// Chunk size of uploads: 64 KiB on local disk, 8 MiB on S3 (its smallest power of two
    /// above the 5 MiB minimum part size).
    pub chunk: usize,
    pub s3: Option<S3TestServer>,
}

impl TestPolicy {
    /// Whether the policy's storage holds nothing but `expected` finished blobs (no staged
    /// bytes or unfinished multipart uploads either).
    pub fn stored_blobs(&self, app: &TestApp) -> usize {
        match &self.s3 {
            Some(server) => {
                let bucket = server.dir.path().join(&server.bucket);
                files_below(&bucket).into_iter().filter(|p| !p.to_string_lossy().contains(".s3s")).count()
                    + server.multipart_leftovers().len()
            }
            None => files_below(&app.config.data_dir.join("small")).len(),
        }
    }

    /// [`Self::stored_blobs`] once what the master removes after answering (a write's
    /// leftovers, a duplicate's surplus bytes) is gone, within [`crate::settled`]'s patience.
    pub async fn settled_blobs(&self, app: &TestApp, expected: usize) -> usize {
        crate::settled(expected, || async { self.stored_blobs(app) }).await
    }
}

/// Every file below `dir` (recursively).
pub fn files_below(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() { found.extend(files_below(&path)) } else { found.push(path) }
        }
    }
    found
}

/// Chunk size of the policy [`TestApp::use_small_chunks`] installs: small, so multi-chunk
/// uploads stay cheap.
pub const SMALL_CHUNK: usize = 64 * 1024;

/// Deterministic content of `len` bytes that differs with `seed`.
pub fn content(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed).collect()
}

impl TestApp {
    /// The caller's root folder id.
    /// Polls the task `task` of `user` until it ends (completed, error or canceled); answers
    /// its last view.
    pub async fn wait_for_task(&self, user: &Session, task: &str) -> Value {
        for _ in 0..1200 {
            let view: Value =
                self.call(Method::GET, &format!("/task/{task}"), Some(&user.access), None).await.json().await.unwrap();
            if ["completed", "error", "canceled"].contains(&view["status"].as_str().unwrap()) {
                return view;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("task {task} never ended");
    }

    pub async fn root_id(&self, session: &Session) -> String {
        let listing: Value =
            self.call(Method::GET, "/directory", Some(&session.access), None).await.json().await.unwrap();
        listing["folder"]["id"].as_str().expect("root folder").to_owned()
    }

    pub async fn mkdir(&self, session: &Session, parent: &str, name: &str) -> String {
        let response = self
            .call(Method::POST, "/directory", Some(&session.access), Some(json!({"parent_id": parent, "name": name})))
            .await;
        assert_eq!(response.status(), 201, "mkdir {name}");
        response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned()
    }

    /// Opens an upload session; answers the raw response.
    pub async fn start_upload(&self, session: &Session, parent: &str, name: &str, size: usize) -> reqwest::Response {
        let body = json!({"file_name": name, "file_size": size, "parent_id": parent});
        self.call(Method::POST, "/file/upload", Some(&session.access), Some(body)).await
    }

    pub async fn put_chunk(&self, session: &Session, upload: &str, index: usize, bytes: Vec<u8>) -> reqwest::Response {
        self.request(Method::PUT, &format!("/file/upload/{upload}/{index}"))
            .bearer_auth(&session.access)
            .body(bytes)
            .send()
            .await
            .unwrap()
    }

    /// Uploads `bytes` as `name` into `parent` chunk by chunk; answers the created object.
    pub async fn upload(&self, session: &Session, parent: &str, name: &str, bytes: &[u8]) -> Value {
        let response = self.start_upload(session, parent, name, bytes.len()).await;
        assert_eq!(response.status(), 201, "upload session for {name}: {}", response.text().await.unwrap_or_default());
        let mut state: Value = response.json().await.unwrap();
        let upload = state["id"].as_str().unwrap().to_owned();
        let chunk = state["chunk_size"].as_u64().unwrap() as usize;
        for (index, piece) in bytes.chunks(chunk).enumerate() {
            let response = self.put_chunk(session, &upload, index, piece.to_vec()).await;
            assert_eq!(
                response.status(),
                200,
                "chunk {index} of {name}: {}",
                response.text().await.unwrap_or_default()
            );
            state = response.json().await.unwrap();
        }
        assert!(state["object"].is_object(), "upload of {name} did not complete: {state}");
        state["object"].clone()
    }

    /// A fresh single-use download URL for a file.
    pub async fn download_url(&self, session: &Session, object: &str) -> String {
        let response = self.call(Method::POST, &format!("/file/download/{object}"), Some(&session.access), None).await;
        assert_eq!(response.status(), 200, "download token");
        let token: Value = response.json().await.unwrap();
        format!("{}{}", self.base_url, token["url"].as_str().unwrap())
    }

    pub async fn download(&self, session: &Session, object: &str) -> Vec<u8> {
        let url = self.download_url(session, object).await;
        let response = self.client.get(url).send().await.unwrap();
        assert_eq!(response.status(), 200, "download");
        response.bytes().await.unwrap().to_vec()
    }

    /// Bytes the user is charged for (used plus reserved).
    pub async fn storage_used(&self, session: &Session) -> i64 {
        let me: Value = self.call(Method::GET, "/user/me", Some(&session.access), None).await.json().await.unwrap();
        me["storage"].as_i64().unwrap()
    }

    /// Id of a group by name.
    pub async fn group_id(&self, admin: &Session, name: &str) -> String {
        let groups: Value =
            self.call(Method::GET, "/admin/group", Some(&admin.access), None).await.json().await.unwrap();
        groups.as_array().unwrap().iter().find(|g| g["name"] == name).expect("group")["id"].as_str().unwrap().to_owned()
    }

    /// Creates a policy and makes it the only one of the `Users` group; answers its id.
    pub async fn use_policy(&self, admin: &Session, policy: Value) -> String {
        let response = self.call(Method::POST, "/admin/policy", Some(&admin.access), Some(policy)).await;
        assert_eq!(response.status(), 201, "create policy: {}", response.text().await.unwrap_or_default());
        let id = response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
        self.set_user_group(admin, json!({"policy_ids": [id]})).await;
        id
    }

    /// Changes fields of the `Users` group (name, quota, policies...), keeping the others.
    pub async fn set_user_group(&self, admin: &Session, changes: Value) {
        let id = self.group_id(admin, "Users").await;
        self.set_group(admin, &id, changes).await;
    }

    /// Makes the `Users` group keep no versions: replaced content is released (what tests of
    /// the write paths' accounting without versions need; tests/api/versions.rs covers them).
    pub async fn keep_no_versions(&self, admin: &Session) {
        let users = self.group_id(admin, "Users").await;
        self.set_group(admin, &users, json!({"version_max_count": 0})).await;
    }

    /// Changes fields of group `id` with `PUT /admin/group/{id}`, keeping the others.
    pub async fn set_group(&self, admin: &Session, id: &str, changes: Value) {
        let mut group: Value = self
            .call(Method::GET, &format!("/admin/group/{id}"), Some(&admin.access), None)
            .await
            .json()
            .await
            .unwrap();
        for (key, value) in changes.as_object().unwrap() {
            group[key] = value.clone();
        }
        let body = json!({"name": group["name"], "is_admin": group["is_admin"], "max_storage": group["max_storage"],
                          "permissions": group["permissions"], "policy_ids": group["policy_ids"],
                          "trash_retention_days": group["trash_retention_days"],
                          "version_max_count": group["version_max_count"], "version_max_days": group["version_max_days"]});
        let response = self.call(Method::PUT, &format!("/admin/group/{id}"), Some(&admin.access), Some(body)).await;
        assert_eq!(response.status(), 200, "update group {id}: {}", response.text().await.unwrap_or_default());
    }

    /// Gives the `Users` group a policy of `kind` (an S3 one on a fresh S3 test server), private,
    /// with `max_size` (0 = none).
    pub async fn use_test_policy(&self, admin: &Session, kind: PolicyKind, max_size: u64) -> TestPolicy {
        match kind {
            PolicyKind::Local => {
                TestPolicy { kind, id: self.use_small_chunks(admin, max_size).await, chunk: SMALL_CHUNK, s3: None }
            }
            PolicyKind::S3 => {
                let server = S3TestServer::start().await;
                let chunk = 8 * 1024 * 1024;
                let policy = json!({"name": "s3", "type": "s3", "chunk_size": chunk, "max_size": max_size,
                    "options": {"endpoint": server.endpoint, "region": server.region, "bucket": server.bucket,
                                "path_style": true, "access_key": server.access_key, "secret_key": server.secret_key}});
                let id = self.use_policy(admin, policy).await;
                TestPolicy { kind, id, chunk, s3: Some(server) }
            }
        }
    }

    /// Gives the `Users` group a local policy with 64 KiB chunks (and `max_size`); answers its id.
    pub async fn use_small_chunks(&self, admin: &Session, max_size: u64) -> String {
        let policy = json!({"name": "small chunks", "type": "local", "chunk_size": SMALL_CHUNK, "max_size": max_size,
                            "options": {"root": "small"}});
        self.use_policy(admin, policy).await
    }
}

impl TestApp {
    /// Marks upload `id` as claimed for finishing by another master that last renewed its
    /// lease `renewed_ms_ago` milliseconds ago (0: alive; more than the lease: dead), as a
    /// master killed while finishing the upload leaves it.
    pub async fn claim_upload_as_other_master(&self, id: &str, renewed_ms_ago: i64) {
        let claimed_at = nubo_model::domain::time::now_ms() - renewed_ms_ago;
        sqlx::query(
            "UPDATE upload_sessions SET status = 'finishing', claim_token = 'other-master', claimed_at = $2
             WHERE id = $1",
        )
        .bind(id)
        .bind(claimed_at)
        .execute(self.context().db().writer())
        .await
        .expect("claim the upload session");
    }

    /// Milliseconds after which a claim on an upload is stale, with a second to spare.
    pub fn stale_claim_age(&self) -> i64 {
        self.config.upload_claim_lease_seconds as i64 * 1000 + 1000
    }
}

/// A task checkpoint that stops the run once `after` files are done, as a crash or a cancel
/// would (for driving a migration or an import by hand).
pub struct StopAfter {
    pub after: u64,
}

#[async_trait::async_trait]
impl nubo_service::tasks::run::Checkpoint for StopAfter {
    async fn checkpoint(
        &mut self,
        progress: &nubo_model::domain::task::TaskProgress,
    ) -> Result<(), nubo_service::tasks::run::TaskFailure> {
        match progress.files_done >= self.after {
            true => Err(nubo_service::tasks::run::TaskFailure::Stopped),
            false => Ok(()),
        }
    }
}
