//! Users' files as the app's origin serves them: never as a script the app's `script-src 'self'`
//! would run (downloads, source links, share downloads, WebDAV, the redirect of a public local
//! policy), and a public local policy answers downloads with a redirect to a short-lived signed
//! URL that works without the caller's token, as the interface asks of `is_private: false`.

use base64::Engine;
use nubo_tests::{TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    a_users_script_is_served_as_plain_text_on_every_route_that_serves_files,
    a_public_local_policy_redirects_downloads_to_a_short_lived_signed_url
);

const SCRIPT: &[u8] = b"fetch('/api/v1/user/me').then(r => r.text()).then(alert)";

/// Checks a file answer that must not be runnable as a script, and that its bytes are whole.
async fn assert_inert_script(response: reqwest::Response, what: &str) {
    assert_eq!(response.status(), 200, "{what}");
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8", "{what}");
    assert_eq!(headers["x-content-type-options"], "nosniff", "{what}");
    assert!(headers["content-security-policy"].to_str().unwrap().contains("sandbox"), "{what}");
    assert_eq!(response.bytes().await.unwrap().as_ref(), SCRIPT, "{what}: the bytes are unchanged");
}

async fn a_users_script_is_served_as_plain_text_on_every_route_that_serves_files(app: TestApp) {
    let (user, dav) = app.dav_user("mallory@example.com", "laptop").await;
    let root = app.root_id(&user).await;
    for name in ["evil.js", "evil.mjs", "evil.wasm"] {
        let object = app.upload(&user, &root, name, SCRIPT).await;
        let id = object["id"].as_str().unwrap().to_owned();

        let download = app.client.get(app.download_url(&user, &id).await).send().await.unwrap();
        assert_inert_script(download, &format!("download of {name}")).await;

        let link: Value =
            app.call(Method::POST, &format!("/file/source/{id}"), Some(&user.access), None).await.json().await.unwrap();
        let source = app.client.get(format!("{}{}", app.base_url, link["url"].as_str().unwrap())).send().await.unwrap();
        assert_inert_script(source, &format!("source link of {name}")).await;

        let share = app.call(Method::POST, "/share", Some(&user.access), Some(json!({"object_id": id}))).await;
        assert_eq!(share.status(), 201, "share of {name}");
        let code = share.json::<Value>().await.unwrap()["code"].as_str().unwrap().to_owned();
        let token: Value =
            app.call(Method::POST, &format!("/share/{code}/download/{id}"), None, None).await.json().await.unwrap();
        let shared =
            app.client.get(format!("{}{}", app.base_url, token["url"].as_str().unwrap())).send().await.unwrap();
        assert_inert_script(shared, &format!("share download of {name}")).await;

        assert_inert_script(dav.get(&format!("/{name}")).await, &format!("WebDAV GET of {name}")).await;
    }
    let plain = app.upload(&user, &root, "notes.txt", b"plain").await;
    let response = app.client.get(app.download_url(&user, plain["id"].as_str().unwrap()).await).send().await.unwrap();
    assert_eq!(response.headers()["content-type"], "text/plain", "other types keep their own");
}

async fn a_public_local_policy_redirects_downloads_to_a_short_lived_signed_url(app: TestApp) {
    let admin = app.login_admin().await;
    app.use_policy(&admin, json!({"name": "public local", "type": "local", "is_private": false})).await;
    let user = app.register("pat@example.com", "pat-password").await;
    let root = app.root_id(&user).await;
    let bytes: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
    let object = app.upload(&user, &root, "ünïcode.bin", &bytes).await;
    let id = object["id"].as_str().unwrap().to_owned();

    let answer = app.client.get(app.download_url(&user, &id).await).send().await.unwrap();
    assert_eq!(answer.status(), 302, "is_private false: downloads answer with a redirect");
    assert_eq!(answer.headers()["cache-control"], "no-store");
    let location = answer.headers()["location"].to_str().unwrap().to_owned();
    let token = location.strip_prefix("/api/v1/file/blob/").unwrap_or_else(|| panic!("{location}")).to_owned();

    // The signed URL lives 15 minutes and names no user.
    let payload = token.split('.').nth(1).unwrap();
    let claims: Value =
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    assert_eq!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(), 15 * 60, "{claims}");
    assert_eq!(claims["typ"], "blob");

    // Served without any token of the caller's, with the download's headers, more than once.
    let target = format!("{}{location}", app.base_url);
    for attempt in 0..2 {
        let direct = app.client.get(&target).send().await.unwrap();
        assert_eq!(direct.status(), 200, "attempt {attempt}");
        assert_eq!(
            direct.headers()["content-disposition"],
            "attachment; filename=\"_n_code.bin\"; filename*=UTF-8''%C3%BCn%C3%AFcode.bin"
        );
        assert_eq!(direct.headers()["x-content-type-options"], "nosniff");
        assert_eq!(direct.headers()["etag"], format!("\"{}\"", blake3::hash(&bytes).to_hex()));
        assert_eq!(direct.bytes().await.unwrap().as_ref(), bytes.as_slice());
    }
    let ranged = app.client.get(&target).header("range", "bytes=100-199").send().await.unwrap();
    assert_eq!(ranged.status(), 206);
    assert_eq!(ranged.bytes().await.unwrap().as_ref(), &bytes[100..200]);

    let link: Value =
        app.call(Method::POST, &format!("/file/source/{id}"), Some(&user.access), None).await.json().await.unwrap();
    let source = app.client.get(format!("{}{}", app.base_url, link["url"].as_str().unwrap())).send().await.unwrap();
    assert_eq!(source.status(), 302, "public source links redirect too");
    let from_source = source.headers()["location"].to_str().unwrap().to_owned();
    assert!(from_source.starts_with("/api/v1/file/blob/"), "{from_source}");
    let served = app.client.get(format!("{}{from_source}", app.base_url)).send().await.unwrap();
    assert_eq!(served.bytes().await.unwrap().as_ref(), bytes.as_slice());

    let mut forged = token.clone();
    forged.pop();
    forged.push(if token.ends_with('A') { 'B' } else { 'A' });
    let refused = app.client.get(app.api(&format!("/file/blob/{forged}"))).send().await.unwrap();
    assert_eq!(error_body(refused, 401).await["code"], "auth.invalid_token");
    let download_token = app.download_url(&user, &id).await;
    let download_token = download_token.rsplit('/').next().unwrap();
    let wrong_kind = app.client.get(app.api(&format!("/file/blob/{download_token}"))).send().await.unwrap();
    assert_eq!(error_body(wrong_kind, 401).await["code"], "auth.invalid_token", "a download token is not a blob URL");
}
