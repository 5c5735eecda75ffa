//! WebDAV helpers: a user with a WebDAV account, and requests to `/dav` signed in as it.

use reqwest::{Method, RequestBuilder, Response};
use serde_json::{Value, json};

use crate::{Session, TestApp};

/// The password test accounts get.
pub const DAV_PASSWORD: &str = "dav-password-1";

/// A WebDAV account's sign-in and a client for `/dav`.
pub struct DavUser {
    /// `http://127.0.0.1:port/dav`
    pub base: String,
    pub username: String,
    pub password: String,
    pub account_id: String,
    client: reqwest::Client,
}

impl DavUser {
    /// `method /dav{path}` signed in as the account.
    pub fn request(&self, method: &str, path: &str) -> RequestBuilder {
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        self.client.request(method, format!("{}{path}", self.base)).basic_auth(&self.username, Some(&self.password))
    }

    pub async fn put(&self, path: &str, body: impl Into<reqwest::Body>) -> Response {
        self.request("PUT", path).body(body).send().await.expect("PUT sent")
    }

    pub async fn get(&self, path: &str) -> Response {
        self.request("GET", path).send().await.expect("GET sent")
    }

    /// `PROPFIND` with `depth`; answers the status and the multistatus body.
    pub async fn propfind(&self, path: &str, depth: &str) -> (u16, String) {
        let response = self.request("PROPFIND", path).header("Depth", depth).send().await.expect("PROPFIND sent");
        (response.status().as_u16(), response.text().await.unwrap_or_default())
    }
}

impl TestApp {
    /// Creates a WebDAV account for `session` (`extra` adds fields such as `root` or
    /// `read_only`) with [`DAV_PASSWORD`].
    pub async fn dav_account(&self, session: &Session, email: &str, name: &str, extra: Value) -> DavUser {
        let mut body = json!({"name": name, "password": DAV_PASSWORD});
        for (key, value) in extra.as_object().expect("object") {
            body[key] = value.clone();
        }
        let response = self.call(Method::POST, "/webdav/accounts", Some(&session.access), Some(body)).await;
        assert_eq!(response.status(), 201, "create WebDAV account: {}", response.text().await.unwrap_or_default());
        let created: Value = response.json().await.expect("account");
        DavUser {
            base: format!("{}/dav", self.base_url),
            username: format!("{email}/{name}"),
            password: DAV_PASSWORD.to_owned(),
            account_id: created["id"].as_str().expect("id").to_owned(),
            client: reqwest::Client::builder().timeout(std::time::Duration::from_secs(120)).build().expect("client"),
        }
    }

    /// Registers `email` and gives it a WebDAV account `name` on its whole tree.
    pub async fn dav_user(&self, email: &str, name: &str) -> (Session, DavUser) {
        let session = self.register(email, "password-123").await;
        let dav = self.dav_account(&session, email, name, json!({})).await;
        (session, dav)
    }
}

/// Runs litmus's suites (basic, copymove, props, locks, http) against the folder `/litmus/` of
/// `dav` (created here) and asserts that every suite ran and none failed.
pub async fn assert_litmus_passes(dav: &DavUser) {
    let mkcol = dav.request("MKCOL", "/litmus/").send().await.expect("MKCOL sent");
    assert_eq!(mkcol.status(), 201);
    let url = format!("{}/litmus/", dav.base);
    let (username, password) = (dav.username.clone(), dav.password.clone());
    // litmus writes `debug.log` and `child.log` into its working directory.
    let logs = tempfile::tempdir().expect("temporary directory");
    let logs_dir = logs.path().to_owned();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("litmus")
            .current_dir(logs_dir)
            .env("TESTS", "basic copymove props locks http")
            .args([&url, &username, &password])
            .output()
            .expect("litmus runs")
    })
    .await
    .expect("litmus task");
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "litmus failed:\n{report}\n{}", String::from_utf8_lossy(&output.stderr));
    for suite in ["basic", "copymove", "props", "locks", "http"] {
        assert!(report.contains(&format!("<- summary for `{suite}': of")), "suite {suite} did not run:\n{report}");
    }
    assert!(!report.contains("FAIL"), "{report}");
}
