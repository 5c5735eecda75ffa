//! `/admin/settings` and its catalog: typed and grouped, validated (422 naming the field),
//! secrets write-only on every route, changes seen by every master at once.

use std::time::Duration;

use nubo_tests::{Session, TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    the_catalog_types_and_groups_every_setting,
    each_kind_of_bad_value_is_refused_naming_the_field,
    the_default_group_must_exist_and_takes_new_users,
    secrets_are_never_returned_by_any_route,
    a_change_on_one_master_is_seen_by_another_at_once,
    site_config_shows_only_the_public_subset
);

async fn patch(app: &TestApp, admin: &Session, body: Value) -> reqwest::Response {
    app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(body)).await
}

async fn catalog(app: &TestApp, admin: &Session) -> Vec<Value> {
    let response = app.call(Method::GET, "/admin/settings/catalog", Some(&admin.access), None).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

fn entry<'a>(catalog: &'a [Value], name: &str) -> &'a Value {
    catalog.iter().find(|e| e["name"] == name).unwrap_or_else(|| panic!("{name} missing from the catalog"))
}

async fn the_catalog_types_and_groups_every_setting(app: TestApp) {
    let admin = app.login_admin().await;
    let entries = catalog(&app, &admin).await;
    let listed: Value = app.call(Method::GET, "/admin/settings", Some(&admin.access), None).await.json().await.unwrap();
    assert_eq!(entries.len(), listed.as_object().unwrap().len(), "the catalog and the plain listing agree");
    let site_name = entry(&entries, "site_name");
    assert_eq!(
        (&site_name["group"], &site_name["type"], &site_name["value"]),
        (&json!("BASIC"), &json!("name"), &json!("Nubo"))
    );
    let register = entry(&entries, "register_enabled");
    assert_eq!(
        (&register["group"], &register["type"], &register["value"]),
        (&json!("REGISTER"), &json!("bool"), &json!(true))
    );
    let port = entry(&entries, "mail_smtp_port");
    assert_eq!((&port["type"], &port["default"]), (&json!("port"), &json!(587)));
    let tls = entry(&entries, "mail_smtp_tls");
    assert_eq!((&tls["type"], &tls["choices"]), (&json!("choice"), &json!(["none", "starttls", "tls"])));
    let methods = entry(&entries, "auth_methods");
    assert_eq!((&methods["type"], &methods["value"]), (&json!("auth_methods"), &json!(["email_password"])));
    assert!(methods["choices"].as_array().unwrap().contains(&json!("passkey")));
    assert_eq!(entry(&entries, "register_default_group")["type"], "group");
    assert_eq!(entry(&entries, "site_url")["type"], "absolute_url");
    let oauth = entry(&entries, "github_client_secret");
    assert_eq!((&oauth["group"], &oauth["type"], &oauth["is_set"]), (&json!("OAUTH"), &json!("secret"), &json!(false)));
    assert!(oauth.get("value").is_none(), "a secret has no value: {oauth}");
    // What the catalog says is the value is what PATCH takes.
    assert_eq!(patch(&app, &admin, json!({"mail_smtp_port": 2525, "register_enabled": false})).await.status(), 204);
    let entries = catalog(&app, &admin).await;
    assert_eq!(entry(&entries, "mail_smtp_port")["value"], 2525);
    assert_eq!(entry(&entries, "register_enabled")["value"], false);
}

async fn each_kind_of_bad_value_is_refused_naming_the_field(app: TestApp) {
    let admin = app.login_admin().await;
    let bad = [
        ("site_name", json!("   ")),
        ("site_name", json!(5)),
        ("site_url", json!("/drive")),
        ("site_url", json!("ftp://drive.example.com")),
        ("site_url", json!("https://")),
        ("tos_url", json!("javascript:alert(1)")),
        ("privacy_url", json!("//elsewhere.example/privacy")),
        ("register_enabled", json!("yes")),
        ("register_default_group", json!("staff")),
        ("register_default_group", json!(uuid::Uuid::new_v4().to_string())),
        ("auth_methods", json!(["telepathy"])),
        ("mail_smtp_port", json!(0)),
        ("mail_smtp_port", json!("seventy")),
        ("mail_smtp_tls", json!("ssl")),
        ("mail_from", json!("not an address")),
        ("captcha_login", json!("mystery")),
        ("github_client_secret", json!(42)),
        ("footer_code", json!("x".repeat(64 * 1024 + 1))),
    ];
    for (name, value) in bad {
        let body = error_body(patch(&app, &admin, json!({ name: value.clone() })).await, 422).await;
        assert_eq!(body["field"], name, "{name} = {value}: {body}");
    }
    let body = error_body(patch(&app, &admin, json!({"no_such_setting": "x"})).await, 422).await;
    assert_eq!((&body["code"], &body["field"]), (&json!("settings.unknown"), &json!("no_such_setting")));
    // One bad value: nothing of the request is written.
    let body = json!({"site_name": "Changed", "site_url": "drive.example.com"});
    assert_eq!(patch(&app, &admin, body).await.status(), 422);
    let config: Value = app.get("/site/config").await.json().await.unwrap();
    assert_eq!(config["site_name"], "Nubo");
}

async fn the_default_group_must_exist_and_takes_new_users(app: TestApp) {
    let admin = app.login_admin().await;
    let group = json!({"name": "Newcomers", "max_storage": 1024});
    let response = app.call(Method::POST, "/admin/group", Some(&admin.access), Some(group)).await;
    assert_eq!(response.status(), 201);
    let id = response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    assert_eq!(patch(&app, &admin, json!({"register_default_group": id})).await.status(), 204);
    let user = app.register("newcomer@example.com", "newcomer-password").await;
    let me: Value = app.call(Method::GET, "/user/me", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(me["group"]["name"], "Newcomers");
    // Back to the built-in group with an empty value.
    assert_eq!(patch(&app, &admin, json!({"register_default_group": ""})).await.status(), 204);
}

async fn secrets_are_never_returned_by_any_route(app: TestApp) {
    let admin = app.login_admin().await;
    // Signed in before the login scene asks for a captcha.
    let user = app.register("eve@example.com", "eve-password").await;
    let secrets = [
        ("mail_smtp_password", "smtp-Secret-7f3a"),
        ("github_client_secret", "github-Secret-91bd"),
        ("qq_client_secret", "qq-Secret-0c55"),
        ("captcha_recaptcha_secret", "recaptcha-Secret-e210"),
        ("captcha_turnstile_secret", "turnstile-Secret-4d9e"),
    ];
    let mut body: serde_json::Map<String, Value> = secrets.iter().map(|(n, v)| ((*n).to_owned(), json!(v))).collect();
    // A scene using reCAPTCHA: its public site key is shown, its secret is not.
    body.insert("captcha_login".into(), json!("recaptcha"));
    body.insert("captcha_recaptcha_site_key".into(), json!("public-site-key"));
    assert_eq!(patch(&app, &admin, Value::Object(body)).await.status(), 204);
    let config: Value = app.get("/site/config").await.json().await.unwrap();
    assert_eq!(config["captcha"]["login"]["site_key"], "public-site-key");
    // They are stored (the catalog says so) ...
    let entries = catalog(&app, &admin).await;
    for (name, _) in secrets {
        assert_eq!(entry(&entries, name)["is_set"], true, "{name}");
    }
    // ... and no answer carries them.
    let answers = [
        app.call(Method::GET, "/admin/settings", Some(&admin.access), None).await,
        app.call(Method::GET, "/admin/settings/catalog", Some(&admin.access), None).await,
        app.call(Method::GET, "/admin/summary", Some(&admin.access), None).await,
        app.call(Method::GET, &format!("/admin/user/{}", admin.user_id), Some(&admin.access), None).await,
        app.call(Method::GET, "/site/config", None, None).await,
        app.call(Method::GET, "/site/config", Some(&user.access), None).await,
        app.call(Method::GET, "/user/me", Some(&user.access), None).await,
        app.call(Method::GET, "/user/settings", Some(&user.access), None).await,
    ];
    for response in answers {
        let url = response.url().to_string();
        assert!(response.status().is_success(), "{url}: {}", response.status());
        let text = response.text().await.unwrap();
        for (name, value) in secrets {
            assert!(!text.contains(value), "{url} shows {name}");
        }
    }
    let listed: Value = app.call(Method::GET, "/admin/settings", Some(&admin.access), None).await.json().await.unwrap();
    assert_eq!(listed["mail_smtp_password"], "", "a secret reads as empty");
}

async fn a_change_on_one_master_is_seen_by_another_at_once(app: TestApp) {
    let admin = app.login_admin().await;
    let peer = app.spawn_peer().await;
    let on_peer = |path: &str| format!("http://{}/api/v1{path}", peer.addr);
    let before: Value = app.client.get(on_peer("/site/config")).send().await.unwrap().json().await.unwrap();
    assert_eq!(before["register_enabled"], true);
    let body = json!({"site_name": "Shared Drive", "register_enabled": false, "tos_url": "/terms"});
    assert_eq!(patch(&app, &admin, body).await.status(), 204);
    // No wait and no restart: the peer reads the setting where it is kept.
    let after: Value = app.client.get(on_peer("/site/config")).send().await.unwrap().json().await.unwrap();
    assert_eq!(
        (&after["site_name"], &after["register_enabled"], &after["tos_url"]),
        (&json!("Shared Drive"), &json!(false), &json!("/terms"))
    );
    // And it acts on it: registration is closed there too.
    let register =
        json!({"provider": "email_password", "identifier": "late@example.com", "credential": "late-password"});
    let response = app.client.post(on_peer("/user")).json(&register).send().await.unwrap();
    assert_eq!(error_body(response, 403).await["code"], "user.registration_closed");
    // A change made on the peer is seen here.
    let response = app
        .client
        .patch(on_peer("/admin/settings"))
        .bearer_auth(&admin.access)
        .json(&json!({"site_name": "From The Peer"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    let here: Value = app.get("/site/config").await.json().await.unwrap();
    assert_eq!(here["site_name"], "From The Peer");
    peer.shutdown(Duration::from_secs(5)).await.unwrap();
}

async fn site_config_shows_only_the_public_subset(app: TestApp) {
    let admin = app.login_admin().await;
    let body = json!({"mail_smtp_host": "smtp.internal.example", "mail_smtp_user": "postmaster-user",
                      "github_client_id": "gh-client-id-123", "site_url": "https://drive.example.com",
                      "oidc_client_id": "oidc-client-id-456", "oidc_issuer": "https://id.internal.example"});
    assert_eq!(patch(&app, &admin, body).await.status(), 204);
    let config: Value = app.get("/site/config").await.json().await.unwrap();
    let keys: Vec<&String> = config.as_object().unwrap().keys().collect();
    let public = [
        "auth_methods",
        "captcha",
        "footer_code",
        "oidc_display_name",
        "privacy_url",
        "register_enabled",
        "site_name",
        "tos_url",
    ];
    for key in &keys {
        assert!(public.contains(&key.as_str()), "/site/config shows {key}");
    }
    let text = config.to_string();
    for private in ["smtp.internal.example", "postmaster-user", "gh-client-id-123", "oidc-client-id-456", "id.internal"]
    {
        assert!(!text.contains(private), "/site/config shows {private}");
    }
}
