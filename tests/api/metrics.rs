//! The instruments: `GET /metrics` on the master and on a storage node (off by default, behind a
//! bearer token, series by route template), and the readiness checks `GET /site/health` and
//! `GET /api/v1/slave/health`.

use nubo_common::secret::Secret;
use nubo_tests::cluster::TestNode;
use nubo_tests::files::{SMALL_CHUNK, content};
use nubo_tests::relay::Relay;
use nubo_tests::{Backend, TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::Value;

on_every_backend!(metrics_are_off_by_default, health_is_ok_when_every_check_passes,);

const TOKEN: &str = "scrape-token-0123456789";

/// A master with metrics on.
async fn spawn_with_metrics(backend: Backend) -> Option<TestApp> {
    TestApp::spawn_configured(backend, |config| config.metrics_token = Some(Secret::new(TOKEN))).await
}

/// Declares each named `async fn(TestApp)` as one test per backend, on a master with metrics on.
macro_rules! with_metrics_on_every_backend {
    ($($test:ident),* $(,)?) => {$(
        mod $test {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                if let Some(app) = super::spawn_with_metrics(nubo_tests::Backend::Sqlite).await {
                    super::$test(app).await
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(app) = super::spawn_with_metrics(nubo_tests::Backend::Postgres).await {
                    super::$test(app).await
                }
            }
        }
    )*};
}

with_metrics_on_every_backend!(
    metrics_ask_for_the_token,
    requests_are_counted_by_route_template_not_by_path,
    uploaded_and_downloaded_bytes_are_counted,
    a_stopped_node_shows_offline,
    a_node_counts_its_own_requests_and_bytes,
);

/// Scrapes `url` with the token; answers the text.
async fn scrape(app: &TestApp, url: &str) -> String {
    let response = app.client.get(url).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    response.text().await.unwrap()
}

async fn scrape_master(app: &TestApp) -> String {
    scrape(app, &format!("{}/metrics", app.base_url)).await
}

/// The value of the sample `series` (name and labels, exactly as rendered), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

async fn metrics_are_off_by_default(app: TestApp) {
    let response = app.client.get(format!("{}/metrics", app.base_url)).bearer_auth(TOKEN).send().await.unwrap();
    let body = error_body(response, 404).await;
    assert_eq!(body["code"], "route.not_found");
}

async fn metrics_ask_for_the_token(app: TestApp) {
    let url = format!("{}/metrics", app.base_url);
    let response = app.client.get(&url).send().await.unwrap();
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    assert_eq!(error_body(response, 401).await["code"], "auth.missing_token");
    let response = app.client.get(&url).bearer_auth("scrape-token-012345678").send().await.unwrap();
    assert_eq!(error_body(response, 401).await["code"], "auth.invalid_token");
    let text = scrape(&app, &url).await;
    assert!(text.contains("# TYPE nubo_db_pool_connections gauge"), "{text}");
    let pool = if app.backend == Backend::Postgres { "main" } else { "reader" };
    assert!(sample(&text, &format!("nubo_db_pool_max_connections{{pool=\"{pool}\"}}")).unwrap() >= 1.0, "{text}");
}

async fn requests_are_counted_by_route_template_not_by_path(app: TestApp) {
    let user = app.register("metrics@example.com", "correct horse battery").await;
    let root = app.root_id(&user).await;
    let folders = [app.mkdir(&user, &root, "one").await, app.mkdir(&user, &root, "two").await];
    for folder in &folders {
        let response = app.call(Method::GET, &format!("/object/{folder}"), Some(&user.access), None).await;
        assert_eq!(response.status(), 200);
    }
    let missing = uuid::Uuid::new_v4();
    let response = app.call(Method::GET, &format!("/object/{missing}"), Some(&user.access), None).await;
    assert_eq!(response.status(), 404);

    let text = scrape_master(&app).await;
    let series = |status: u16| {
        format!(r#"nubo_http_requests_total{{route="/api/v1/object/{{id}}",method="GET",status="{status}"}}"#)
    };
    assert_eq!(sample(&text, &series(200)), Some(2.0), "{text}");
    assert_eq!(sample(&text, &series(404)), Some(1.0), "{text}");
    for id in folders.iter().map(String::as_str).chain([missing.to_string().as_str()]) {
        assert!(!text.contains(id), "an id became a label: {id}");
    }
    let latency = r#"nubo_http_request_duration_seconds_count{route="/api/v1/object/{id}",method="GET"}"#;
    assert_eq!(sample(&text, latency), Some(3.0), "{text}");
}

async fn uploaded_and_downloaded_bytes_are_counted(app: TestApp) {
    let admin = app.login_admin().await;
    app.use_small_chunks(&admin, 0).await;
    let user = app.register("bytes@example.com", "correct horse battery").await;
    let root = app.root_id(&user).await;
    let upload_route = r#"nubo_upload_bytes_total{route="/api/v1/file/upload/{id}/{index}"}"#;
    let download_route = r#"nubo_download_bytes_total{route="/api/v1/file/download/{id}"}"#;
    let before = scrape_master(&app).await;
    assert_eq!(sample(&before, upload_route), None, "nothing uploaded yet");

    let bytes = content(2 * SMALL_CHUNK + 1000, 7);
    let object = app.upload(&user, &root, "counted.bin", &bytes).await;
    let text = scrape_master(&app).await;
    assert_eq!(sample(&text, upload_route), Some(bytes.len() as f64), "{text}");
    assert_eq!(sample(&text, "nubo_uploads_in_progress"), Some(0.0), "every upload has finished");

    let downloaded = app.download(&user, object["id"].as_str().unwrap()).await;
    assert_eq!(downloaded, bytes);
    let text = scrape_master(&app).await;
    assert_eq!(sample(&text, download_route), Some(bytes.len() as f64), "{text}");
}

async fn a_stopped_node_shows_offline(app: TestApp) {
    let admin = app.login_admin().await;
    let mut node = TestNode::start(&app, &admin, false).await;
    let check_path = format!("/admin/node/{}/test", node.id);
    let node_label = format!("node=\"{}\"", node.id);
    let up = |text: &str| {
        text.lines()
            .find(|line| line.starts_with("nubo_node_up{") && line.contains(&node_label))
            .and_then(|line| line.rsplit(' ').next())
            .map(str::to_owned)
    };
    assert_eq!(app.call(Method::POST, &check_path, Some(&admin.access), None).await.status(), 200);
    let text = scrape_master(&app).await;
    assert_eq!(up(&text).as_deref(), Some("1"), "{text}");

    node.stop().await;
    assert_eq!(app.call(Method::POST, &check_path, Some(&admin.access), None).await.status(), 503);
    let text = scrape_master(&app).await;
    assert_eq!(up(&text).as_deref(), Some("0"), "{text}");
}

async fn a_node_counts_its_own_requests_and_bytes(app: TestApp) {
    let admin = app.login_admin().await;
    let node = TestNode::start_configured(&app, &admin, false, |config| {
        config.metrics_token = Some(Secret::new(TOKEN));
    })
    .await;
    app.use_node_policy(&admin, &node, true).await;
    let user = app.register("direct@example.com", "correct horse battery").await;
    let root = app.root_id(&user).await;
    let bytes = content(SMALL_CHUNK + 500, 3);
    let (_, last) = app.upload_direct(&user, &root, "direct.bin", &bytes).await;
    assert_eq!(last.status(), 200);

    let url = format!("{}/metrics", node.url);
    let response = app.client.get(&url).bearer_auth("wrong").send().await.unwrap();
    assert_eq!(response.status(), 401);
    let text = scrape(&app, &url).await;
    let uploaded = r#"nubo_upload_bytes_total{route="/api/v1/slave/upload/{session_id}/{index}"}"#;
    assert_eq!(sample(&text, uploaded), Some(bytes.len() as f64), "{text}");
    let chunks =
        r#"nubo_http_requests_total{route="/api/v1/slave/upload/{session_id}/{index}",method="PUT",status="200"}"#;
    assert_eq!(sample(&text, chunks), Some(2.0), "{text}");

    let health: Value =
        app.client.get(format!("{}/api/v1/slave/health", node.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["checks"]["storage"]["ok"], true);
}

async fn health_is_ok_when_every_check_passes(app: TestApp) {
    let response = app.get("/site/health").await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "ok");
    for check in ["database", "kv", "storage"] {
        assert_eq!(body["checks"][check]["ok"], true, "{check}: {body}");
        assert!(body["checks"][check]["ms"].is_u64(), "{check}: {body}");
    }
}

/// A master whose Redis goes away: readiness fails on the kv check (and says so), liveness
/// does not, and the store's failures are counted.
async fn health_names_the_kv_check_when_redis_is_unreachable(backend: Backend) {
    if !nubo_tests::redis_available().await {
        return;
    }
    let redis = nubo_tests::redis_url();
    let relay = Relay::start(redis.trim_start_matches("redis://").trim_end_matches('/')).await;
    let through_relay = format!("redis://{}", relay.addr);
    let Some(app) = TestApp::spawn_configured(backend, |config| {
        config.redis_url = Some(through_relay);
        config.metrics_token = Some(Secret::new(TOKEN));
    })
    .await
    else {
        return;
    };
    assert_eq!(app.get("/site/health").await.status(), 200);

    relay.cut().await;
    let body = error_body(app.get("/site/health").await, 503).await;
    assert_eq!(body["code"], "site.unhealthy");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("kv"), "{message}");
    assert!(!message.contains("database") && !message.contains("storage"), "only the failed check: {message}");
    assert_eq!(app.get("/site/ping").await.status(), 200, "liveness does not depend on Redis");
    let text = scrape_master(&app).await;
    assert!(sample(&text, r#"nubo_kv_errors_total{operation="set"}"#).unwrap_or(0.0) >= 1.0, "{text}");
}

mod health_names_the_kv_check_when_redis_is_unreachable {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        super::health_names_the_kv_check_when_redis_is_unreachable(nubo_tests::Backend::Sqlite).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        super::health_names_the_kv_check_when_redis_is_unreachable(nubo_tests::Backend::Postgres).await
    }
}
