//! `/user/settings`: every option, nulls, bounds, unknown options, and the password route.

use nubo_model::db;
use nubo_tests::{TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    each_option_is_stored,
    null_or_missing_values_are_refused_naming_the_field,
    timezone_outside_minus_12_to_14_is_refused,
    unknown_option_is_refused,
    password_route_is_not_an_option,
    a_generated_password_is_reported_until_its_owner_chooses_another,
    the_first_administrator_gets_a_generated_password_marked_as_such
);

async fn patch(app: &TestApp, token: &str, option: &str, body: Value) -> reqwest::Response {
    app.call(Method::PATCH, &format!("/user/settings/{option}"), Some(token), Some(body)).await
}

async fn each_option_is_stored(app: TestApp) {
    let user = app.register("kim@example.com", "kim-password").await;
    assert_eq!(patch(&app, &user.access, "nickname", json!({"nickname": "  Kim K.  "})).await.status(), 204);
    assert_eq!(patch(&app, &user.access, "language", json!({"language": "zh-CN"})).await.status(), 204);
    for tz in [-12, 0, 14] {
        assert_eq!(patch(&app, &user.access, "timezone", json!({"timezone": tz})).await.status(), 204, "timezone {tz}");
    }
    // Only the named option's value counts; others in the body are ignored.
    assert_eq!(
        patch(&app, &user.access, "timezone", json!({"timezone": 8, "nickname": "ignored"})).await.status(),
        204
    );
    let settings: Value = app.call(Method::GET, "/user/settings", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(settings["nickname"], "Kim K.");
    assert_eq!(settings["language"], "zh-CN");
    assert_eq!(settings["timezone"], 8);
    let me: Value = app.call(Method::GET, "/user/me", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(me["nickname"], "Kim K.");
}

async fn null_or_missing_values_are_refused_naming_the_field(app: TestApp) {
    let user = app.register("lee@example.com", "lee-password").await;
    for option in ["nickname", "language", "timezone"] {
        let body = error_body(patch(&app, &user.access, option, json!({ option: null })).await, 422).await;
        assert_eq!(body["field"], option, "null {option}");
        let body = error_body(patch(&app, &user.access, option, json!({})).await, 422).await;
        assert_eq!(body["field"], option, "missing {option}");
    }
    let body = error_body(patch(&app, &user.access, "nickname", json!({"nickname": "   "})).await, 422).await;
    assert_eq!(body["field"], "nickname");
    let body = error_body(patch(&app, &user.access, "language", json!({"language": "<script>"})).await, 422).await;
    assert_eq!(body["field"], "language");
}

async fn timezone_outside_minus_12_to_14_is_refused(app: TestApp) {
    let user = app.register("max@example.com", "max-password").await;
    for tz in [-13, 15, 1000] {
        let body = error_body(patch(&app, &user.access, "timezone", json!({"timezone": tz})).await, 422).await;
        assert_eq!(body["field"], "timezone", "timezone {tz}");
    }
    let body = error_body(patch(&app, &user.access, "timezone", json!({"timezone": "UTC+1"})).await, 422).await;
    assert_eq!(body["code"], "request.invalid_body");
    let settings: Value = app.call(Method::GET, "/user/settings", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(settings["timezone"], 0, "unchanged");
}

async fn unknown_option_is_refused(app: TestApp) {
    let user = app.register("ned@example.com", "ned-password").await;
    // The body is a valid settings body (a field named `storage` would be refused as unknown).
    let body = error_body(patch(&app, &user.access, "storage", json!({"nickname": "x"})).await, 422).await;
    assert_eq!(body["code"], "user.unknown_setting");
    assert_eq!(body["field"], "option");
}

async fn password_route_is_not_an_option(app: TestApp) {
    let user = app.register("olga@example.com", "olga-password").await;
    // Shaped like an option request: the password route answers, not the option wildcard.
    let response = patch(&app, &user.access, "password", json!({"password": "x"})).await;
    let body = error_body(response, 422).await;
    assert_eq!(body["code"], "request.invalid_body", "the password route wants old and new password");
    assert!(body["message"].as_str().unwrap().contains("old_password"), "{body}");
}

async fn password_generated(app: &TestApp, token: &str) -> Value {
    let response = app.call(Method::GET, "/user/settings", Some(token), None).await;
    assert_eq!(response.status(), 200);
    response.json::<Value>().await.unwrap()["password_generated"].clone()
}

async fn a_generated_password_is_reported_until_its_owner_chooses_another(app: TestApp) {
    let user = app.register("gen@example.com", "gen-password-1").await;
    assert_eq!(password_generated(&app, &user.access).await, json!(false), "a chosen password");
    let id = user.user_id.parse::<uuid::Uuid>().unwrap().into();
    db::users::mark_credential_generated(app.context().db(), id, "email_password").await.unwrap();
    assert_eq!(password_generated(&app, &user.access).await, json!(true));

    // A refused change keeps the mark; a done one clears it.
    let wrong = json!({"old_password": "not-the-password", "new_password": "gen-password-2"});
    let refused = app.call(Method::PATCH, "/user/settings/password", Some(&user.access), Some(wrong)).await;
    assert_eq!(error_body(refused, 403).await["code"], "user.wrong_password");
    assert_eq!(password_generated(&app, &user.access).await, json!(true));
    let change = json!({"old_password": "gen-password-1", "new_password": "gen-password-2"});
    let changed = app.call(Method::PATCH, "/user/settings/password", Some(&user.access), Some(change)).await;
    assert_eq!(changed.status(), 204);
    let again = app.login("gen@example.com", "gen-password-2").await;
    assert_eq!(password_generated(&app, &again.access).await, json!(false));
}

async fn the_first_administrator_gets_a_generated_password_marked_as_such(app: TestApp) {
    // The harness configures the first administrator's password: it is not marked.
    let admin = app.login_admin().await;
    assert_eq!(password_generated(&app, &admin.access).await, json!(false));

    // A master with none configured generates one (printed once in its log) and marks it.
    let Some(fresh) = TestApp::spawn_configured(app.backend, |config| config.admin_password = None).await else {
        return;
    };
    let db = fresh.context().db();
    let (_, users) = db::users::list(db, &Default::default(), 0, 10).await.unwrap();
    let [first] = users.as_slice() else { panic!("one user, the first administrator: {}", users.len()) };
    assert!(db::users::credential_generated(db, first.id, "email_password").await.unwrap());
    db::users::set_credential(db, first.id, "email_password", "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHQ$aGFzaA")
        .await
        .unwrap();
    assert!(!db::users::credential_generated(db, first.id, "email_password").await.unwrap(), "a set one is chosen");
}
