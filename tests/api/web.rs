//! The browser app served by the master: its files with their caching and policy, `index.html`
//! for the app's own paths, the JSON 404 kept for API paths; and the browser journeys
//! (`web/e2e/journeys.mjs`) driving Debian's Chromium against a real master.

use std::path::Path;
use std::process::Command;

use nubo_tests::mail::SmtpSink;
use nubo_tests::{TestApp, error_body, on_every_backend, services_required};
use reqwest::Method;
use reqwest::header::{
    ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH,
};

on_every_backend!(the_app_is_served_with_its_policy_and_the_api_keeps_its_errors);
on_every_backend!(browser_journeys_pass_in_chromium);

async fn page(app: &TestApp, method: Method, path: &str) -> reqwest::Response {
    app.client.request(method, format!("{}{path}", app.base_url)).send().await.unwrap()
}

/// Whether this build embeds the app; without it (no Node.js at build time) the tests here only
/// check the answer that says so, unless CI requires the app.
async fn app_built(app: &TestApp) -> bool {
    let root = page(app, Method::GET, "/").await;
    if root.status() == 503 {
        assert_eq!(error_body(root, 503).await["code"], "web.not_built");
        assert!(!services_required(), "the web app is not built into this master (NUBO_WEB_BUILD, npm)");
        return false;
    }
    true
}

async fn the_app_is_served_with_its_policy_and_the_api_keeps_its_errors(app: TestApp) {
    // API and WebDAV paths never fall through to the app.
    let unknown = page(&app, Method::GET, "/api/v1/no-such-thing").await;
    assert_eq!(error_body(unknown, 404).await["code"], "route.not_found");
    assert_eq!(page(&app, Method::GET, "/wopi/nothing").await.status(), 404);
    if !app_built(&app).await {
        return;
    }
    let root = page(&app, Method::GET, "/").await;
    assert_eq!(root.status(), 200);
    let policy = root.headers()[CONTENT_SECURITY_POLICY].to_str().unwrap().to_owned();
    assert!(policy.contains("script-src 'self';") && !policy.contains("unsafe"), "{policy}");
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    assert_eq!(root.headers()[CACHE_CONTROL], "no-cache");
    assert!(root.headers()[CONTENT_TYPE].to_str().unwrap().starts_with("text/html"));
    let index = root.text().await.unwrap();
    assert!(!index.contains("<script>") && !index.contains("<style"), "no inline script or style: {index}");
    let script = index
        .split('"')
        .find(|part| part.starts_with("/assets/") && part.ends_with(".js"))
        .unwrap_or_else(|| panic!("index.html loads a hashed script: {index}"))
        .to_owned();

    // The app's own routes get index.html; a missing asset does not.
    for route in ["/login", "/files/photos/2026", "/files/release%20v1.2/notes.md", "/share/abc"] {
        let routed = page(&app, Method::GET, route).await;
        assert_eq!(routed.status(), 200, "{route}");
        assert_eq!(routed.text().await.unwrap(), index, "{route}");
    }
    for missing in ["/assets/missing-0000.js", "/robots.txt"] {
        let missing = page(&app, Method::GET, missing).await;
        assert_eq!(error_body(missing, 404).await["code"], "route.not_found");
    }
    let posted = page(&app, Method::POST, "/login").await;
    assert_eq!(error_body(posted, 404).await["code"], "route.not_found");

    // Hashed assets: cached for a year, revalidated by ETag, compressed when asked.
    let asset = page(&app, Method::GET, &script).await;
    assert_eq!(asset.status(), 200);
    assert_eq!(asset.headers()[CACHE_CONTROL], "public, max-age=31536000, immutable");
    assert!(asset.headers()[CONTENT_TYPE].to_str().unwrap().contains("javascript"));
    let etag = asset.headers()[ETAG].clone();
    let length = asset.bytes().await.unwrap().len();
    let again = app.client.get(format!("{}{script}", app.base_url)).header(IF_NONE_MATCH, etag).send().await.unwrap();
    assert_eq!(again.status(), 304);
    let gzipped =
        app.client.get(format!("{}{script}", app.base_url)).header(ACCEPT_ENCODING, "gzip").send().await.unwrap();
    assert_eq!(gzipped.headers()[CONTENT_ENCODING], "gzip");
    assert!(gzipped.bytes().await.unwrap().len() < length, "gzip makes the script smaller");

    // Pages may send upload chunks straight to the enabled storage nodes, and nowhere else.
    let admin = app.login_admin().await;
    let node = serde_json::json!({"name": "node-a", "base_url": "http://127.0.0.1:9/base", "key": "k".repeat(48)});
    let created = app.call(Method::POST, "/admin/node", Some(&admin.access), Some(node)).await;
    assert_eq!(created.status(), 201);
    let page_policy = page(&app, Method::GET, "/files").await.headers()[CONTENT_SECURITY_POLICY].clone();
    let page_policy = page_policy.to_str().unwrap();
    assert!(page_policy.contains("connect-src 'self' http://127.0.0.1:9;"), "{page_policy}");
}

async fn browser_journeys_pass_in_chromium(app: TestApp) {
    if !app_built(&app).await {
        return;
    }
    let chromium = std::env::var("NUBO_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("../web");
    let ffmpeg = std::process::Command::new("ffmpeg").arg("-version").output().is_ok_and(|out| out.status.success());
    let ready = Path::new(&chromium).exists() && web.join("node_modules/playwright-core").exists() && ffmpeg;
    if !ready {
        assert!(
            !services_required(),
            "the journeys need {chromium} (apt-get install chromium), ffmpeg (the media journey's video) and web/node_modules"
        );
        return;
    }
    // The direct-upload journey's storage node: a real nubo-slave, reporting to this master.
    let admin = app.login_admin().await;
    let node = nubo_tests::cluster::TestNode::start(&app, &admin, false).await;
    // The OAuth journey's provider: a real OAuth 2.0 server process.
    let oauth = nubo_tests::oauth::OAuthServer::start().await.expect("web/node_modules is there");
    // The generated-password journey's account: its password marked as the server's, as the
    // first administrator's is when none is configured.
    let (generated_email, generated_password) = ("generated@example.com", "a-generated-password");
    let generated = app.register(generated_email, generated_password).await;
    let generated_id = generated.user_id.parse::<uuid::Uuid>().unwrap().into();
    nubo_model::db::users::mark_credential_generated(app.context().db(), generated_id, "email_password").await.unwrap();
    let mut command = Command::new("node");
    command
        .arg(web.join("e2e/journeys.mjs"))
        .env("NUBO_E2E_NODE_ID", &node.id)
        .env("NUBO_E2E_OAUTH_URL", &oauth.base_url)
        .args(["--base", &app.base_url])
        .env("NUBO_CHROMIUM", &chromium)
        .env("NUBO_E2E_ADMIN_EMAIL", nubo_tests::ADMIN_EMAIL)
        .env("NUBO_E2E_ADMIN_PASSWORD", nubo_tests::ADMIN_PASSWORD)
        .env("NUBO_E2E_GENERATED_EMAIL", generated_email)
        .env("NUBO_E2E_GENERATED_PASSWORD", generated_password);
    // The magic-link journey reads the mail this SMTP sink receives (skipped without one).
    let sink = SmtpSink::start();
    if let Some(sink) = &sink {
        command.env("NUBO_E2E_MAIL_DIR", sink.folder()).env("NUBO_E2E_SMTP_PORT", sink.port.to_string());
    }
    // `NUBO_UPDATE_SCREENSHOTS=1` renews the screenshots of the book and the README (one backend takes them).
    if std::env::var_os("NUBO_UPDATE_SCREENSHOTS").is_some() && app.backend == nubo_tests::Backend::Sqlite {
        command.arg("--screenshots").arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/screenshots"));
    }
    let output = tokio::task::spawn_blocking(move || command.output()).await.unwrap().expect("node runs");
    drop(node);
    drop(oauth);
    let log = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    drop(sink);
    assert!(output.status.success(), "browser journeys failed:\n{log}");
    println!("{log}");
}
