//! WebDAV: accounts, Basic sign-in, the methods over Nubo's tree, streamed writes that keep
//! nothing on failure, and real clients (litmus, rclone) run against a real master.

use std::process::Command;

use nubo_tests::{TestApp, on_every_backend};

on_every_backend!(litmus_passes_every_suite);

/// Runs `litmus` against `/dav`; every suite (basic, copymove, props, locks, http) must pass.
async fn litmus_passes_every_suite(app: TestApp) {
    if Command::new("litmus").arg("--version").output().is_err() {
        assert!(!nubo_tests::services_required(), "litmus is not installed (apt-get install litmus)");
        return;
    }
    let (_session, dav) = app.dav_user("litmus@example.com", "litmus").await;
    let url = format!("{}/litmus/", dav.base);
    let mkcol = dav.request("MKCOL", "/litmus/").send().await.unwrap();
    assert_eq!(mkcol.status(), 201);
    let (username, password) = (dav.username.clone(), dav.password.clone());
    let output = tokio::task::spawn_blocking(move || {
        Command::new("litmus")
            .env("TESTS", "basic copymove props locks http")
            .args([&url, &username, &password])
            .output()
            .expect("litmus runs")
    })
    .await
    .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "litmus failed:\n{report}\n{}", String::from_utf8_lossy(&output.stderr));
    for suite in ["basic", "copymove", "props", "locks", "http"] {
        assert!(report.contains(&format!("<- summary for `{suite}': of")), "suite {suite} did not run:\n{report}");
    }
    assert!(!report.contains("FAIL"), "{report}");
}
