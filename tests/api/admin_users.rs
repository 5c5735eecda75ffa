//! `/admin/user/{id}`: each change `PATCH` makes takes effect, and the detail view (storage,
//! identities, counts) tells administrators the truth without showing a credential.

use nubo_tests::files::content;
use nubo_tests::{Session, TestApp, error_body, login_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    each_change_an_administrator_makes_takes_effect,
    bad_changes_are_refused_naming_the_field,
    the_detail_shows_storage_identities_and_counts
);

async fn change(app: &TestApp, admin: &Session, user: &str, body: Value) -> reqwest::Response {
    app.call(Method::PATCH, &format!("/admin/user/{user}"), Some(&admin.access), Some(body)).await
}

async fn me(app: &TestApp, session: &Session) -> reqwest::Response {
    app.call(Method::GET, "/user/me", Some(&session.access), None).await
}

async fn each_change_an_administrator_makes_takes_effect(app: TestApp) {
    let admin = app.login_admin().await;
    let fay = app.register("fay@example.com", "fay-password").await;

    // Nickname.
    let response = change(&app, &admin, &fay.user_id, json!({"nickname": "Fay the Second"})).await;
    assert_eq!(response.status(), 200);
    assert_eq!(me(&app, &fay).await.json::<Value>().await.unwrap()["nickname"], "Fay the Second");

    // Group: tokens issued before are stale; a refreshed one carries the new group.
    let admins = app.group_id(&admin, "Administrators").await;
    let response = change(&app, &admin, &fay.user_id, json!({"group_id": admins})).await;
    assert_eq!(response.json::<Value>().await.unwrap()["group"]["id"], admins.as_str());
    assert_eq!(error_body(me(&app, &fay).await, 401).await["code"], "auth.token_revoked");
    let fay = app.refresh(&fay).await;
    let listed = app.call(Method::GET, "/admin/user", Some(&fay.access), None).await;
    assert_eq!(listed.status(), 200, "an administrator now");
    let users = app.group_id(&admin, "Users").await;
    assert_eq!(change(&app, &admin, &fay.user_id, json!({"group_id": users})).await.status(), 200);
    let fay = app.login("fay@example.com", "fay-password").await;

    // Status: a ban refuses the current token at once; lifting it lets the user back in.
    assert_eq!(change(&app, &admin, &fay.user_id, json!({"status": "BANNED"})).await.status(), 200);
    assert_eq!(error_body(me(&app, &fay).await, 403).await["code"], "auth.user_inactive");
    let response =
        app.call(Method::POST, "/user/session", None, Some(login_body("fay@example.com", "fay-password"))).await;
    assert_eq!(error_body(response, 403).await["code"], "auth.user_inactive");
    assert_eq!(change(&app, &admin, &fay.user_id, json!({"status": "ACTIVE"})).await.status(), 200);
    let fay = app.login("fay@example.com", "fay-password").await;
    assert_eq!(me(&app, &fay).await.status(), 200);

    // Password: the new one signs in, the old one does not, and sessions are signed out.
    assert_eq!(change(&app, &admin, &fay.user_id, json!({"password": "a-brand-new-password"})).await.status(), 200);
    let response =
        app.call(Method::POST, "/user/session", None, Some(login_body("fay@example.com", "fay-password"))).await;
    assert_eq!(error_body(response, 401).await["code"], "auth.invalid_credentials");
    let refreshed = app.call(Method::POST, "/user/session/refresh", Some(&fay.refresh), None).await;
    assert_eq!(refreshed.status(), 401, "the old session's refresh token is revoked");
    app.login("fay@example.com", "a-brand-new-password").await;
}

async fn bad_changes_are_refused_naming_the_field(app: TestApp) {
    let admin = app.login_admin().await;
    let gus = app.register("gus@example.com", "gus-password").await;
    let cases = [
        ("nickname", json!({"nickname": "   "})),
        ("group_id", json!({"group_id": uuid::Uuid::new_v4()})),
        ("password", json!({"password": "short"})),
    ];
    for (field, body) in cases {
        let body = error_body(change(&app, &admin, &gus.user_id, body).await, 422).await;
        assert_eq!(body["field"], field, "{body}");
    }
    let response = change(&app, &admin, &gus.user_id, json!({"status": "ASLEEP"})).await;
    assert_eq!(error_body(response, 422).await["code"], "request.invalid_body");
    let response = change(&app, &admin, &uuid::Uuid::new_v4().to_string(), json!({"nickname": "Nobody"})).await;
    assert_eq!(error_body(response, 404).await["code"], "user.not_found");
    // Nothing of the refused changes was made.
    let user: Value = me(&app, &gus).await.json().await.unwrap();
    assert_eq!(user["nickname"], "gus");
    assert_eq!(user["status"], "ACTIVE");
}

async fn the_detail_shows_storage_identities_and_counts(app: TestApp) {
    let admin = app.login_admin().await;
    let hal = app.register("hal@example.com", "hal-password").await;
    let root = app.root_id(&hal).await;
    let docs = app.mkdir(&hal, &root, "docs").await;
    let kept = app.upload(&hal, &docs, "kept.bin", &content(3000, 3)).await;
    let trashed = app.upload(&hal, &root, "trashed.bin", &content(500, 4)).await;
    let trash = json!({"ids": [trashed["id"]]});
    assert!(app.call(Method::DELETE, "/object", Some(&hal.access), Some(trash)).await.status().is_success());
    let share = json!({"object_id": kept["id"]});
    assert_eq!(app.call(Method::POST, "/share", Some(&hal.access), Some(share)).await.status(), 201);

    let response = app.call(Method::GET, &format!("/admin/user/{}", hal.user_id), Some(&admin.access), None).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(!text.contains("argon2") && !text.contains("hal-password"), "no credential in {text}");
    let detail: Value = serde_json::from_str(&text).unwrap();
    // The profile's fields are all there (the list's view), and more.
    assert_eq!(detail["email"], "hal@example.com");
    assert_eq!(detail["group"]["name"], "Users");
    let storage: Value = app.call(Method::GET, "/user/storage", Some(&hal.access), None).await.json().await.unwrap();
    assert_eq!(detail["usage"]["used"], 3500, "the trash counts");
    assert_eq!(detail["usage"]["used"], storage["used"]);
    assert_eq!(detail["usage"]["capacity"], storage["total"]);
    assert_eq!(
        detail["identities"],
        json!([{"provider": "email_password", "display": "hal@example.com",
        "created_at": detail["identities"][0]["created_at"], "last_used_at": detail["identities"][0]["last_used_at"]}])
    );
    assert_eq!(detail["passkeys"], 0);
    assert_eq!(detail["counts"], json!({"files": 1, "folders": 1, "shares": 1}));
}
