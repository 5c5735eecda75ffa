//! `/site` endpoints and the OpenAPI document.

use nubo_tests::{TestApp, on_every_backend};
use serde_json::Value;

on_every_backend!(
    ping_reports_the_version,
    site_config_enables_email_password_by_default,
    site_config_reflects_stored_settings,
    settings_are_parsed_once_per_settings_version,
    openapi_document_is_3_1_and_lists_every_route_with_errors
);

async fn ping_reports_the_version(app: TestApp) {
    let response = app.get("/site/ping").await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("x-request-id"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(body["protocol_version"], 1);
}

async fn site_config_enables_email_password_by_default(app: TestApp) {
    let body: Value = app.get("/site/config").await.json().await.unwrap();
    assert_eq!(body["auth_methods"], serde_json::json!(["email_password"]));
    assert_eq!(body["footer_code"], "");
    assert_eq!(body["tos_url"], "");
    assert_eq!(body["privacy_url"], "");
}

async fn site_config_reflects_stored_settings(app: TestApp) {
    let mut values = serde_json::Map::new();
    values.insert("tos_url".into(), "https://example.com/tos".into());
    values.insert("auth_methods".into(), serde_json::json!(["email_password", "passkey"]));
    nubo_service::settings::site::update_settings(app.context().db(), &values).await.unwrap();
    let body: Value = app.get("/site/config").await.json().await.unwrap();
    assert_eq!(body["tos_url"], "https://example.com/tos");
    assert_eq!(body["auth_methods"], serde_json::json!(["email_password", "passkey"]));
}

/// The typed settings are reused while the settings version stands, and parsed again (with the
/// new values) once a write draws a new one.
async fn settings_are_parsed_once_per_settings_version(app: TestApp) {
    use nubo_service::settings::site;
    use std::sync::Arc;
    let ctx = app.context();
    let first = site::current(ctx).await.unwrap();
    let version = site::settings_version(ctx).await.unwrap();
    assert!(Arc::ptr_eq(&first, &site::current(ctx).await.unwrap()), "no write: the parsed value is reused");
    let mut values = serde_json::Map::new();
    values.insert("events_retention_days".into(), 30.into());
    site::update_settings(ctx.db(), &values).await.unwrap();
    assert_ne!(site::settings_version(ctx).await.unwrap(), version, "a write draws a new version");
    let after = site::current(ctx).await.unwrap();
    assert!(!Arc::ptr_eq(&first, &after));
    assert_eq!((first.events_retention_days, after.events_retention_days), (7, 30));
    // A change of something built with the settings (a WOPI application) draws one too.
    site::settings_changed(ctx).await.unwrap();
    assert!(!Arc::ptr_eq(&after, &site::current(ctx).await.unwrap()));
}

async fn openapi_document_is_3_1_and_lists_every_route_with_errors(app: TestApp) {
    let response = app.get("/openapi.json").await;
    assert_eq!(response.status(), 200);
    let doc: Value = response.json().await.unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    assert!(doc["components"]["schemas"]["ErrorBody"].is_object());
    let paths = doc["paths"].as_object().unwrap();
    for path in ["/api/v1/site/ping", "/api/v1/site/config", "/api/v1/openapi.json"] {
        assert!(paths.contains_key(path), "{path} missing from the document");
    }
    // Every operation that can fail documents its error body.
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            if path.ends_with("openapi.json") {
                continue;
            }
            let responses = operation["responses"].as_object().unwrap();
            let documents_error = responses.iter().any(|(status, r)| {
                status.starts_with(['4', '5'])
                    && r["content"]["application/json"]["schema"]["$ref"] == "#/components/schemas/ErrorBody"
            });
            assert!(documents_error, "{method} {path} documents no error response");
        }
    }
}

/// Requests already received when shutdown starts are answered; the server then stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_lets_in_flight_requests_finish() {
    // Behind a trusted proxy, so the sign-ins below come from twenty addresses: one account or
    // address has at most two password checks waiting (the rest would be refused, not queued).
    let mut app = TestApp::spawn_configured(nubo_tests::Backend::Sqlite, |config| {
        config.trusted_proxies = serde_json::from_value(serde_json::json!("127.0.0.1")).unwrap();
    })
    .await
    .unwrap();
    for n in 0..20 {
        app.register(&format!("user{n}@example.com"), "user-password").await;
    }
    // Twenty connections the server has already accepted (kept alive in the client's pool): a
    // request sent on a connection still waiting to be accepted when shutdown starts was never
    // received, and its connection is reset (a busy machine once lost one that way).
    let opened = (0..20).map(|_| app.client.get(app.api("/site/ping")).send());
    for response in futures_util::future::join_all(opened).await {
        assert_eq!(response.unwrap().status(), 200);
    }
    // Sign-ins hash with argon2 (a few at a time), so twenty of them are still running when
    // shutdown begins.
    let in_flight: Vec<_> = (0..20)
        .map(|n| {
            let client = app.client.clone();
            let url = app.api("/user/session");
            tokio::spawn(async move {
                let body = nubo_tests::login_body(&format!("user{n}@example.com"), "user-password");
                let from = format!("198.51.100.{n}");
                client.post(url).header("x-forwarded-for", from).json(&body).send().await.map(|r| r.status().as_u16())
            })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let base = app.base_url.clone();
    app.stop().await;
    let statuses: Vec<_> = futures_util::future::join_all(in_flight).await.into_iter().map(|r| r.unwrap()).collect();
    assert!(statuses.iter().all(|s| matches!(s, Ok(200))), "in-flight requests completed: {statuses:?}");
    let after = reqwest::get(format!("{base}/api/v1/site/ping")).await;
    assert!(after.is_err(), "no longer accepting connections");
}
