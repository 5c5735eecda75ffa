//! A real OAuth 2.0 server for the OAuth tests: `web/e2e/oauth-server.mjs` (oauth2-mock-server
//! with GitHub- and QQ-style profile APIs, and an OpenID Connect issuer with discovery, a key set
//! and signed ID tokens) in a Node.js process of its own, one per test so the profile it hands
//! out is the test's alone; and the site settings that point a master at it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use reqwest::Method;
use serde_json::{Value, json};

use crate::{Session, TestApp, services_required};

/// The client secret the server accepts.
pub const CLIENT_SECRET: &str = "mock-secret";

/// A running OAuth server; stopped when dropped.
pub struct OAuthServer {
    pub base_url: String,
    child: Child,
}

fn web_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../web")
}

impl OAuthServer {
    /// Starts a server; `None` when Node.js or `web/node_modules` is missing (a failure when
    /// services are required).
    pub async fn start() -> Option<Self> {
        let web = web_dir();
        if !web.join("node_modules/oauth2-mock-server").exists() {
            assert!(!services_required(), "the OAuth tests need web/node_modules (npm ci in web/)");
            return None;
        }
        tokio::task::spawn_blocking(move || {
            let mut child = Command::new("node")
                .arg(web.join("e2e/oauth-server.mjs"))
                .env("NUBO_OAUTH_CLIENT_SECRET", CLIENT_SECRET)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("node runs");
            let mut line = String::new();
            BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("the server's address");
            assert!(line.starts_with("http://"), "the OAuth server did not start: {line:?}");
            Some(Self { base_url: line.trim().to_owned(), child })
        })
        .await
        .expect("start")
    }

    /// Sets the profiles the next sign-ins see (`{"github": {...}, "qq": {...}}`, merged per
    /// provider as a whole).
    pub async fn set_profiles(&self, profiles: Value) {
        let answer =
            reqwest::Client::new().post(format!("{}/control", self.base_url)).json(&profiles).send().await.unwrap();
        assert_eq!(answer.status(), 200);
    }

    /// The settings that enable `methods` and point both presets at this server, with the
    /// master's own address as the site URL.
    pub fn settings(&self, app: &TestApp, methods: &[&str]) -> Value {
        let base = &self.base_url;
        json!({
            "site_url": app.base_url,
            "auth_methods": methods,
            "github_client_id": "nubo-test",
            "github_client_secret": CLIENT_SECRET,
            "github_authorize_url": format!("{base}/authorize"),
            "github_token_url": format!("{base}/token"),
            "github_api_url": base,
            "qq_client_id": "nubo-test-qq",
            "qq_client_secret": CLIENT_SECRET,
            "qq_authorize_url": format!("{base}/authorize"),
            "qq_token_url": format!("{base}/oauth2.0/token"),
            "qq_api_url": base,
        })
    }

    /// Sets how the next ID tokens are made (`null`: properly; `"es256"`, `"bad_signature"`,
    /// `"unknown_kid"`, `"rotated"`, `"wrong_audience"`, `"wrong_issuer"`, `"expired"`,
    /// `"replay"`: see `web/e2e/oauth-server.mjs`).
    pub async fn set_oidc_mode(&self, mode: Option<&str>) {
        self.set_profiles(json!({ "oidc_mode": mode })).await;
    }

    /// The settings that enable `methods` and point the OpenID Connect provider at this
    /// server's issuer (a loopback address, so `oidc_internal` is on).
    pub fn oidc_settings(&self, app: &TestApp, methods: &[&str]) -> Value {
        json!({
            "site_url": app.base_url,
            "auth_methods": methods,
            "oidc_display_name": "Test IdP",
            "oidc_issuer": self.base_url,
            "oidc_internal": true,
            "oidc_client_id": "nubo-oidc",
            "oidc_client_secret": CLIENT_SECRET,
        })
    }

    /// Applies [`OAuthServer::settings`] as the administrator.
    pub async fn configure(&self, app: &TestApp, admin: &Session, methods: &[&str]) {
        let response =
            app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(self.settings(app, methods))).await;
        assert_eq!(response.status(), 204, "{}", response.text().await.unwrap());
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
