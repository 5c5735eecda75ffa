//! Taking privileges away takes them away at once, on every master: demotions survive a ban
//! and its lifting, a change of a group's claims revokes its members' tokens, group permissions
//! are enforced, and cached WebDAV sign-ins end with the privilege. On PostgreSQL + Redis the
//! changed credentials are used on a second master, not the one that made the change.

use nubo_master::app::Running;
use nubo_tests::dav::DAV_PASSWORD;
use nubo_tests::{Backend, Session, TestApp, error_body, on_every_backend};
use reqwest::{Method, Response};
use serde_json::{Value, json};

on_every_backend!(
    lifting_a_ban_does_not_revive_a_token_issued_before_a_demotion,
    changing_a_groups_claims_revokes_every_members_tokens_at_once,
    group_changes_that_tokens_do_not_carry_leave_them_valid,
    the_external_download_permission_is_enforced,
    cached_webdav_sign_ins_end_when_the_privilege_goes,
);

/// The master that did not make the changes: a second master sharing the database and Redis on
/// PostgreSQL; the same one on SQLite, whose in-memory store one master alone reads.
struct OtherMaster {
    base_url: String,
    _peer: Option<Running>,
}

impl OtherMaster {
    async fn of(app: &TestApp) -> Self {
        match app.backend {
            Backend::Postgres => {
                let peer = app.spawn_peer().await;
                Self { base_url: format!("http://{}", peer.addr), _peer: Some(peer) }
            }
            Backend::Sqlite => Self { base_url: app.base_url.clone(), _peer: None },
        }
    }

    async fn call(&self, app: &TestApp, method: Method, path: &str, token: &str, body: Option<Value>) -> Response {
        let mut request = app.client.request(method, format!("{}/api/v1{path}", self.base_url)).bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().await.expect("request sent")
    }

    /// Whether `token` may create an administrator account on this master.
    async fn creates_an_admin(&self, app: &TestApp, token: &str, email: &str) -> Response {
        let admins = app.group_id(&app.login_admin().await, "Administrators").await;
        let body = json!({"email": email, "password": "new-admin-password", "group_id": admins});
        self.call(app, Method::POST, "/admin/user", token, Some(body)).await
    }
}

async fn patch_user(app: &TestApp, admin: &Session, user: &Session, body: Value) {
    let response =
        app.call(Method::PATCH, &format!("/admin/user/{}", user.user_id), Some(&admin.access), Some(body)).await;
    assert_eq!(response.status(), 200, "PATCH user: {}", response.text().await.unwrap_or_default());
}

async fn assert_revoked(response: Response, context: &str) {
    assert_eq!(error_body(response, 401).await["code"], "auth.token_revoked", "{context}");
}

async fn lifting_a_ban_does_not_revive_a_token_issued_before_a_demotion(app: TestApp) {
    let admin = app.login_admin().await;
    let other = OtherMaster::of(&app).await;
    let admins = app.group_id(&admin, "Administrators").await;
    let users = app.group_id(&admin, "Users").await;
    let mallory = app.register("mallory@example.com", "mallory-password").await;
    patch_user(&app, &admin, &mallory, json!({"group_id": admins})).await;
    let promoted = app.refresh(&mallory).await;
    assert_eq!(other.call(&app, Method::GET, "/admin/user", &promoted.access, None).await.status(), 200);

    // Demote, ban, lift the ban: the admin token stays dead.
    patch_user(&app, &admin, &mallory, json!({"group_id": users})).await;
    assert_revoked(other.call(&app, Method::GET, "/admin/user", &promoted.access, None).await, "demoted").await;
    patch_user(&app, &admin, &mallory, json!({"status": "BANNED"})).await;
    let banned = other.call(&app, Method::GET, "/admin/user", &promoted.access, None).await;
    assert_eq!(error_body(banned, 403).await["code"], "auth.user_inactive");
    patch_user(&app, &admin, &mallory, json!({"status": "ACTIVE"})).await;
    assert_revoked(other.call(&app, Method::GET, "/admin/user", &promoted.access, None).await, "unbanned").await;
    assert_revoked(other.creates_an_admin(&app, &promoted.access, "evil1@example.com").await, "unbanned").await;

    // The same in one request: a banned admin unbanned and demoted at once.
    patch_user(&app, &admin, &mallory, json!({"group_id": admins})).await;
    let mallory = app.login("mallory@example.com", "mallory-password").await;
    assert_eq!(other.call(&app, Method::GET, "/admin/user", &mallory.access, None).await.status(), 200);
    patch_user(&app, &admin, &mallory, json!({"status": "BANNED"})).await;
    patch_user(&app, &admin, &mallory, json!({"status": "ACTIVE", "group_id": users})).await;
    assert_revoked(other.creates_an_admin(&app, &mallory.access, "evil2@example.com").await, "unban + demote").await;

    // A fresh sign-in, even in the same second, carries the new claims and works.
    let fresh = app.login("mallory@example.com", "mallory-password").await;
    assert_eq!(other.call(&app, Method::GET, "/user/me", &fresh.access, None).await.status(), 200);
    let refused = other.creates_an_admin(&app, &fresh.access, "evil3@example.com").await;
    assert_eq!(error_body(refused, 403).await["code"], "auth.admin_required");

    // A master restarted with the in-memory store remembers the demotion (SQLite: the same
    // master; PostgreSQL: Redis keeps it anyway).
    let mut app = app;
    app.restart().await;
    let response = app.call(Method::GET, "/admin/user", Some(&promoted.access), None).await;
    assert_revoked(response, "after a restart").await;
}

async fn changing_a_groups_claims_revokes_every_members_tokens_at_once(app: TestApp) {
    let admin = app.login_admin().await;
    let other = OtherMaster::of(&app).await;
    let body = json!({"name": "Deputies", "is_admin": true, "max_storage": 1_000_000,
                      "permissions": {"share": true, "webdav": true, "external_download": true}});
    let response = app.call(Method::POST, "/admin/group", Some(&admin.access), Some(body)).await;
    assert_eq!(response.status(), 201);
    let deputies = response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let dora = app.register("dora@example.com", "dora-password").await;
    patch_user(&app, &admin, &dora, json!({"group_id": deputies})).await;
    let dora = app.refresh(&dora).await;
    assert_eq!(other.call(&app, Method::GET, "/admin/user", &dora.access, None).await.status(), 200);

    // Each claim the token carries: the admin flag, the capacity, a permission, the name.
    let changes = [
        json!({"is_admin": false}),
        json!({"max_storage": 2_000_000}),
        json!({"permissions": {"share": true, "webdav": false, "external_download": true, "share_save": false}}),
        json!({"name": "Former deputies"}),
    ];
    let mut dora = dora;
    for change in changes {
        app.set_group(&admin, &deputies, change.clone()).await;
        let response = other.call(&app, Method::GET, "/user/session", &dora.access, None).await;
        assert_revoked(response, &format!("after {change}")).await;
        assert_revoked(other.creates_an_admin(&app, &dora.access, "evil@example.com").await, "admin route").await;
        // Refreshing at once (the same second) gives a token with the new claims.
        dora = app.refresh(&dora).await;
        let session: Value =
            other.call(&app, Method::GET, "/user/session", &dora.access, None).await.json().await.unwrap();
        for (key, value) in change.as_object().unwrap() {
            let claim = match key.as_str() {
                "is_admin" => "admin",
                other => other,
            };
            assert_eq!(&session["group"][claim], value, "the refreshed token carries {key}: {session}");
        }
    }
    let refused = other.creates_an_admin(&app, &dora.access, "evil@example.com").await;
    assert_eq!(error_body(refused, 403).await["code"], "auth.admin_required");
}

async fn group_changes_that_tokens_do_not_carry_leave_them_valid(app: TestApp) {
    let admin = app.login_admin().await;
    let other = OtherMaster::of(&app).await;
    let user = app.register("ulla@example.com", "ulla-password").await;
    let users = app.group_id(&admin, "Users").await;
    app.set_group(&admin, &users, json!({"trash_retention_days": 7})).await;
    app.set_group(&admin, &users, json!({"policy_ids": []})).await;
    assert_eq!(other.call(&app, Method::GET, "/user/me", &user.access, None).await.status(), 200);
    // Saving the group unchanged is no change either.
    app.set_group(&admin, &users, json!({})).await;
    assert_eq!(other.call(&app, Method::GET, "/user/me", &user.access, None).await.status(), 200);
}

async fn the_external_download_permission_is_enforced(app: TestApp) {
    let admin = app.login_admin().await;
    let users = app.group_id(&admin, "Users").await;
    app.set_group(&admin, &users, json!({"permissions": {"share": true, "webdav": true, "external_download": false}}))
        .await;
    let user = app.register("eve@example.com", "eve-password").await;
    let root = app.root_id(&user).await;
    let body = json!({"url": "https://example.com/a.iso", "parent_id": root});
    let response = app.call(Method::POST, "/file/external_download", Some(&user.access), Some(body.clone())).await;
    let refused = error_body(response, 403).await;
    assert_eq!(refused["code"], "fetch.not_allowed");
    let tasks: Value = app.call(Method::GET, "/task", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(tasks["count"], 0, "no task was queued: {tasks}");

    // With the permission the request passes that check (and fails on the next: this group
    // has no policy on a storage node).
    app.set_group(&admin, &users, json!({"permissions": {"share": true, "webdav": true, "external_download": true}}))
        .await;
    let user = app.refresh(&user).await;
    let response = app.call(Method::POST, "/file/external_download", Some(&user.access), Some(body)).await;
    assert_eq!(response.status(), 422, "past the permission check");
}

async fn cached_webdav_sign_ins_end_when_the_privilege_goes(app: TestApp) {
    let admin = app.login_admin().await;
    let other = OtherMaster::of(&app).await;
    let users = app.group_id(&admin, "Users").await;
    let (user, dav) = app.dav_user("wes@example.com", "laptop").await;
    let propfind = |base: &str| {
        app.client
            .request(Method::from_bytes(b"PROPFIND").unwrap(), format!("{base}/dav/"))
            .header("Depth", "0")
            .basic_auth(&dav.username, Some(DAV_PASSWORD))
            .send()
    };
    // Signed in (and cached) on both masters.
    assert_eq!(propfind(&app.base_url).await.unwrap().status(), 207);
    assert_eq!(propfind(&other.base_url).await.unwrap().status(), 207);

    app.set_group(&admin, &users, json!({"permissions": {"share": true, "webdav": false, "external_download": true}}))
        .await;
    let response = propfind(&other.base_url).await.unwrap();
    assert_eq!(response.status(), 403, "the group lost WebDAV");
    app.set_group(&admin, &users, json!({"permissions": {"share": true, "webdav": true, "external_download": true}}))
        .await;
    assert_eq!(propfind(&other.base_url).await.unwrap().status(), 207, "the group has WebDAV again");

    // Moved to a group without WebDAV.
    let body = json!({"name": "No DAV", "max_storage": 1_000_000, "permissions": {"webdav": false}});
    let response = app.call(Method::POST, "/admin/group", Some(&admin.access), Some(body)).await;
    let no_dav = response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    patch_user(&app, &admin, &user, json!({"group_id": no_dav})).await;
    assert_eq!(propfind(&other.base_url).await.unwrap().status(), 403, "moved to a group without WebDAV");
    patch_user(&app, &admin, &user, json!({"group_id": users})).await;
    assert_eq!(propfind(&other.base_url).await.unwrap().status(), 207);

    // Disabled, then deleted.
    patch_user(&app, &admin, &user, json!({"status": "BANNED"})).await;
    assert_eq!(propfind(&other.base_url).await.unwrap().status(), 403, "banned");
    patch_user(&app, &admin, &user, json!({"status": "ACTIVE"})).await;
    assert_eq!(propfind(&other.base_url).await.unwrap().status(), 207);
    let response = app.call(Method::DELETE, &format!("/admin/user/{}", user.user_id), Some(&admin.access), None).await;
    assert_eq!(response.status(), 204);
    let status = propfind(&other.base_url).await.unwrap().status().as_u16();
    assert!(status == 401 || status == 403, "deleted user: {status}");
}
