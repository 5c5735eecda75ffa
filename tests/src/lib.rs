//! Test harness shared by every end-to-end test: starts the real master on `127.0.0.1:0` with
//! its own temporary directory and a fresh database (SQLite file, or a new PostgreSQL database
//! dropped afterwards) and talks to it over HTTP.
//!
//! PostgreSQL tests skip when no server answers, unless `NUBO_TEST_REQUIRE_SERVICES=1` (set by
//! CI), which turns a missing service into a failure.

pub mod cluster;
pub mod dav;
pub mod files;
pub mod mail;
pub mod oauth;
pub mod relay;
pub mod s3;
pub mod topology;
pub mod wopi;

use std::time::Duration;

use nubo_common::secret::Secret;
use nubo_master::app::{self, Running};
use nubo_model::config::Config;
use reqwest::{Method, RequestBuilder, Response};
use serde_json::Value;
use tempfile::TempDir;

/// Which database a test runs on. SQLite runs with the in-memory store, PostgreSQL with Redis,
/// so every suite covers both databases and both stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The administrator every test server is seeded with.
pub const ADMIN_EMAIL: &str = "admin@nubo.test";
pub const ADMIN_PASSWORD: &str = "admin-password-for-tests";

pub fn redis_url() -> String {
    std::env::var("NUBO_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// Server used to create and drop the per-test PostgreSQL databases.
pub fn postgres_admin_url() -> String {
    std::env::var("NUBO_TEST_POSTGRES_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// Whether missing PostgreSQL/Redis must fail the run instead of skipping.
pub fn services_required() -> bool {
    std::env::var("NUBO_TEST_REQUIRE_SERVICES").is_ok_and(|v| v == "1" || v == "true")
}

/// A database made for one test: a SQLite file in a temporary directory, or a fresh PostgreSQL
/// database that is dropped when this value is.
pub struct TestDatabase {
    pub url: String,
    pub backend: Backend,
    pub dir: TempDir,
    postgres_name: Option<String>,
}

impl TestDatabase {
    /// `None` when the backend is PostgreSQL, no server answers, and services are not required.
    pub async fn create(backend: Backend) -> Option<Self> {
        let dir = tempfile::Builder::new().prefix("nubo-test-").tempdir().expect("temporary directory");
        match backend {
            Backend::Sqlite => {
                let url = format!("sqlite://{}?mode=rwc", dir.path().join("nubo.db").display());
                Some(Self { url, backend, dir, postgres_name: None })
            }
            Backend::Postgres => {
                let name = format!("nubo_test_{}", uuid::Uuid::new_v4().simple());
                let admin = postgres_admin_url();
                match sqlx::postgres::PgPool::connect(&admin).await {
                    Ok(pool) => {
                        sqlx::query(&format!("CREATE DATABASE {name}"))
                            .execute(&pool)
                            .await
                            .expect("create test database");
                        pool.close().await;
                    }
                    Err(err) if !services_required() => {
                        eprintln!("skipped: PostgreSQL unavailable at {admin}: {err}");
                        return None;
                    }
                    Err(err) => {
                        panic!("PostgreSQL is required (NUBO_TEST_REQUIRE_SERVICES=1) but {admin} fails: {err}")
                    }
                }
                let base = admin.rsplit_once('/').map(|(base, _)| base).unwrap_or(&admin).to_owned();
                Some(Self { url: format!("{base}/{name}"), backend, dir, postgres_name: Some(name) })
            }
        }
    }
}

impl TestDatabase {
    /// Copies the database (closed) to its backup, or with `restore` the backup back over it.
    async fn copy(&self, restore: bool) {
        match &self.postgres_name {
            None => {
                let live = self.dir.path().join("nubo.db").display().to_string();
                let backup = self.dir.path().join("backup.db").display().to_string();
                let (from, to) = if restore { (&backup, &live) } else { (&live, &backup) };
                // The write-ahead log belongs to the file: copied with it, or removed.
                for suffix in ["", "-wal"] {
                    let (source, target) = (format!("{from}{suffix}"), format!("{to}{suffix}"));
                    match std::path::Path::new(&source).exists() {
                        true => std::fs::copy(&source, &target).map(|_| ()).expect("copy the SQLite database"),
                        false => drop(std::fs::remove_file(&target)),
                    }
                }
                let _ = std::fs::remove_file(format!("{to}-shm"));
            }
            Some(name) => {
                let pool = sqlx::postgres::PgPool::connect(&postgres_admin_url()).await.expect("PostgreSQL");
                let backup = format!("{name}_backup");
                let statements = if restore {
                    vec![
                        format!("DROP DATABASE {name} WITH (FORCE)"),
                        format!("CREATE DATABASE {name} TEMPLATE {backup}"),
                        format!("DROP DATABASE {backup}"),
                    ]
                } else {
                    vec![format!("CREATE DATABASE {backup} TEMPLATE {name}")]
                };
                for statement in statements {
                    sqlx::query(&statement).execute(&pool).await.expect(&statement);
                }
                pool.close().await;
            }
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let Some(name) = self.postgres_name.take() else { return };
        // Drop runs inside the test's runtime, which cannot block on itself: use a thread.
        let admin = postgres_admin_url();
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            runtime.block_on(async move {
                let pool = sqlx::postgres::PgPool::connect(&admin).await.ok()?;
                sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&pool).await.ok()?;
                pool.close().await;
                Some(())
            })
        })
        .join();
    }
}

/// Whether the Redis server answers; panics when it does not and services are required.
pub async fn redis_available() -> bool {
    let url = redis_url();
    let reachable = tokio::net::TcpStream::connect(url.trim_start_matches("redis://").trim_end_matches('/')).await;
    match reachable {
        Ok(_) => true,
        Err(err) if !services_required() => {
            eprintln!("skipped: Redis unavailable at {url}: {err}");
            false
        }
        Err(err) => panic!("Redis is required (NUBO_TEST_REQUIRE_SERVICES=1) but {url} fails: {err}"),
    }
}

/// A random signing secret of a valid length.
pub fn test_secret() -> Secret {
    Secret::new(format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple()))
}

/// A configuration for a test server on an ephemeral port over `database`.
pub fn test_config(database: &TestDatabase) -> Config {
    let redis_url = (database.backend == Backend::Postgres).then(redis_url);
    Config {
        listen: "127.0.0.1:0".parse().expect("address"),
        data_dir: database.dir.path().join("data"),
        database_url: Some(database.url.clone()),
        database_max_connections: 8,
        redis_url,
        // One namespace per test server, so servers sharing the Redis never see each other.
        redis_prefix: format!("nubo-test-{}:", uuid::Uuid::new_v4().simple()),
        secret: Some(test_secret()),
        admin_email: ADMIN_EMAIL.into(),
        admin_password: Some(Secret::new(ADMIN_PASSWORD)),
        // Every client of a test comes from 127.0.0.1, many at once: the per-address cap is for
        // the tests that set it (`tests/api/connections.rs`).
        max_connections_per_address: 0,
        ..Config::default()
    }
}

/// A running master and an HTTP client pointed at it.
pub struct TestApp {
    pub base_url: String,
    pub client: reqwest::Client,
    pub backend: Backend,
    /// The configuration it runs with (its listen address pinned once bound, for restarts).
    pub config: Config,
    running: Option<Running>,
    // Dropped last: the database outlives the server using it.
    pub database: TestDatabase,
}

impl TestApp {
    /// Starts a master on a fresh database; `None` when the backend is unavailable (see module).
    pub async fn spawn(backend: Backend) -> Option<Self> {
        Self::spawn_configured(backend, |_| {}).await
    }

    /// Like [`TestApp::spawn`], with the configuration adjusted by `adjust` first.
    pub async fn spawn_configured(backend: Backend, adjust: impl FnOnce(&mut Config)) -> Option<Self> {
        let database = TestDatabase::create(backend).await?;
        let mut config = test_config(&database);
        if backend == Backend::Postgres && !redis_available().await {
            return None;
        }
        adjust(&mut config);
        Some(Self::spawn_with(database, config).await)
    }

    /// Starts a master with a configuration the test adjusted.
    pub async fn spawn_with(database: TestDatabase, config: Config) -> Self {
        if std::env::var_os("NUBO_TEST_LOG").is_some() {
            nubo_master::telemetry::init(config.log_format, "debug");
        }
        let mut config = config;
        let running = app::start(config.clone()).await.expect("master starts");
        config.listen = running.addr;
        let base_url = format!("http://{}", running.addr);
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(60))
            .build()
            .expect("http client");
        Self { base_url, client, backend: database.backend, config, running: Some(running), database }
    }

    /// Wraps a master running elsewhere (another process started with `config` on `database`),
    /// so the HTTP helpers work against it; it has no in-process state.
    pub fn external(database: TestDatabase, config: Config) -> Self {
        let base_url = format!("http://{}", config.listen);
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(60))
            .build()
            .expect("http client");
        Self { base_url, client, backend: database.backend, config, running: None, database }
    }

    /// The server's context (database handle, configuration).
    pub fn context(&self) -> &nubo_service::context::Context {
        &self.running.as_ref().expect("server is running").context
    }

    /// Absolute URL of an API path such as `/site/ping`.
    pub fn api(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.base_url)
    }

    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.client.request(method, self.api(path))
    }

    pub async fn get(&self, path: &str) -> Response {
        self.request(Method::GET, path).send().await.expect("request sent")
    }

    /// Sends `method path` with an optional bearer token and JSON body.
    pub async fn call(&self, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> Response {
        let mut request = self.request(method, path);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().await.expect("request sent")
    }

    /// Signs in with e-mail and password; panics unless it succeeds.
    pub async fn login(&self, email: &str, password: &str) -> Session {
        let response = self.call(Method::POST, "/user/session", None, Some(login_body(email, password))).await;
        assert_eq!(response.status(), 200, "login of {email} failed");
        let body: Value = response.json().await.expect("login answer");
        Session {
            access: body["access_token"].as_str().expect("access token").to_owned(),
            refresh: body["refresh_token"].as_str().expect("refresh token").to_owned(),
            user_id: body["user"]["id"].as_str().expect("user id").to_owned(),
        }
    }

    /// Trades the session's refresh token for a new pair (after a change that revoked its access
    /// token, such as a change of the user's group); panics unless it succeeds.
    pub async fn refresh(&self, session: &Session) -> Session {
        let response = self.call(Method::POST, "/user/session/refresh", Some(&session.refresh), None).await;
        assert_eq!(response.status(), 200, "refresh failed");
        let body: Value = response.json().await.expect("refresh answer");
        Session {
            access: body["access_token"].as_str().expect("access token").to_owned(),
            refresh: body["refresh_token"].as_str().expect("refresh token").to_owned(),
            user_id: session.user_id.clone(),
        }
    }

    pub async fn login_admin(&self) -> Session {
        self.login(ADMIN_EMAIL, ADMIN_PASSWORD).await
    }

    /// Registers a new account with e-mail and password and signs in.
    pub async fn register(&self, email: &str, password: &str) -> Session {
        let body = serde_json::json!({"provider": "email_password", "identifier": email, "credential": password});
        let response = self.call(Method::POST, "/user", None, Some(body)).await;
        assert_eq!(
            response.status(),
            201,
            "registration of {email} failed: {}",
            response.text().await.unwrap_or_default()
        );
        self.login(email, password).await
    }

    /// Starts a second master on the same database, data directory and secret (as a replica
    /// behind a load balancer would be); it stops when the returned value is shut down.
    pub async fn spawn_peer(&self) -> Running {
        let mut config = self.config.clone();
        config.listen = "127.0.0.1:0".parse().expect("address");
        app::start(config).await.expect("peer master starts")
    }

    /// Stops the server and starts a new one on the same address, database, data directory and
    /// secret, as an operator restarting the master would.
    pub async fn restart(&mut self) {
        self.stop().await;
        let running = app::start(self.config.clone()).await.expect("master restarts");
        self.running = Some(running);
    }

    /// Runs one SQL statement on the server's database (for a test to reach a state no API
    /// call makes, such as another server epoch).
    pub async fn sql(&self, statement: &str) {
        sqlx::query(statement).execute(self.context().db().writer()).await.expect(statement);
    }

    /// Stops the server, copies its database aside (as an operator's backup would) and starts
    /// it again; [`TestApp::restore_backup`] brings the copy back.
    pub async fn back_up(&mut self) {
        self.stop().await;
        self.database.copy(false).await;
        self.running = Some(app::start(self.config.clone()).await.expect("master restarts"));
    }

    /// Stops the server, replaces its database with the copy [`TestApp::back_up`] made (what was
    /// done since is gone, the data directory is left as it is) and starts it again.
    pub async fn restore_backup(&mut self) {
        self.stop().await;
        self.database.copy(true).await;
        self.running = Some(app::start(self.config.clone()).await.expect("master restarts"));
    }

    /// Stops the server gracefully (in-flight requests finish) and keeps the database.
    pub async fn stop(&mut self) {
        if let Some(running) = self.running.take() {
            running.shutdown(Duration::from_secs(10)).await.expect("clean shutdown");
        }
    }
}

/// Tokens of a signed-in user.
#[derive(Debug, Clone)]
pub struct Session {
    pub access: String,
    pub refresh: String,
    pub user_id: String,
}

/// Reads `read` until it answers `expected` (for five seconds at most), then answers its last
/// reading: what the master finishes after answering (a cut-off write's task, removing a
/// write's leftovers) is seen once it is done.
pub async fn settled<T: PartialEq, F: std::future::Future<Output = T>>(expected: T, read: impl Fn() -> F) -> T {
    let mut value = read().await;
    for _ in 0..100 {
        if value == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        value = read().await;
    }
    value
}

pub fn login_body(email: &str, password: &str) -> Value {
    serde_json::json!({"provider": "email_password", "identifier": email, "credential": password})
}

/// Reads a response expected to carry the uniform error body and checks its shape: a stable
/// code, a message, and the request id that the `x-request-id` header also carries.
pub async fn error_body(response: Response, status: u16) -> Value {
    assert_eq!(response.status().as_u16(), status, "unexpected status");
    let header_id = response
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .expect("x-request-id header");
    assert_eq!(
        response.headers().get("content-type").and_then(|v| v.to_str().ok()),
        Some("application/json"),
        "error bodies are JSON"
    );
    let body: Value = response.json().await.expect("JSON error body");
    let code = body["code"].as_str().expect("code is a string");
    assert!(
        code.contains('.') && code.chars().all(|c| c.is_ascii_lowercase() || c == '.' || c == '_'),
        "code {code:?}"
    );
    assert!(!body["message"].as_str().expect("message is a string").is_empty());
    assert_eq!(body["request_id"].as_str(), Some(header_id.as_str()));
    body
}

/// Declares each named `async fn(TestApp)` as one test per database backend:
/// `name::sqlite` and `name::postgres`.
#[macro_export]
macro_rules! on_every_backend {
    ($($test:ident),* $(,)?) => {$(
        mod $test {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                if let Some(app) = $crate::TestApp::spawn($crate::Backend::Sqlite).await {
                    super::$test(app).await
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(app) = $crate::TestApp::spawn($crate::Backend::Postgres).await {
                    super::$test(app).await
                }
            }
        }
    )*};
}

/// Declares each named `async fn(TestApp, PolicyKind)` as one test per database backend and
/// storage kind: `name::sqlite_local`, `name::sqlite_s3`, `name::postgres_local`, `name::postgres_s3`.
#[macro_export]
macro_rules! on_every_backend_and_storage {
    ($($test:ident),* $(,)?) => {$(
        mod $test {
            use $crate::files::PolicyKind;
            use $crate::{Backend, TestApp};
            async fn run(backend: Backend, kind: PolicyKind) {
                if let Some(app) = TestApp::spawn(backend).await {
                    super::$test(app, kind).await
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite_local() { run(Backend::Sqlite, PolicyKind::Local).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite_s3() { run(Backend::Sqlite, PolicyKind::S3).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres_local() { run(Backend::Postgres, PolicyKind::Local).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres_s3() { run(Backend::Postgres, PolicyKind::S3).await }
        }
    )*};
}
