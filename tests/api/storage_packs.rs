//! Storage packs: administrators grant and revoke them, they add to capacity while active, and
//! a user left over quota when one ends keeps every file while each kind of write that adds
//! bytes answers 507, until deleting brings usage back within capacity. The expiry job marks
//! packs once, however many masters run it.

use std::time::Duration;

use nubo_model::domain::time::{now_ms, to_rfc3339};
use nubo_service::capacity::storage_packs;
use nubo_tests::files::content;
use nubo_tests::{Session, TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    a_revoked_pack_leaves_the_user_over_quota_with_every_write_refused_and_nothing_deleted,
    a_pack_that_expires_stops_counting_and_the_job_marks_it_once,
    administrators_list_grant_and_revoke_packs_with_validation
);

async fn grant(app: &TestApp, admin: &Session, body: Value) -> Value {
    let response = app.call(Method::POST, "/admin/storage_pack", Some(&admin.access), Some(body)).await;
    assert_eq!(response.status(), 201, "grant: {}", response.text().await.unwrap_or_default());
    response.json().await.unwrap()
}

async fn admin_list(app: &TestApp, admin: &Session, query: String) -> Value {
    let response = app.call(Method::GET, &format!("/admin/storage_pack{query}"), Some(&admin.access), None).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

async fn storage(app: &TestApp, user: &Session) -> Value {
    let response = app.call(Method::GET, "/user/storage", Some(&user.access), None).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

async fn my_packs(app: &TestApp, user: &Session) -> Vec<Value> {
    let response = app.call(Method::GET, "/user/storage_packs", Some(&user.access), None).await;
    assert_eq!(response.status(), 200);
    response.json::<Value>().await.unwrap().as_array().unwrap().clone()
}

/// `POST /file/content` (a small file in one request).
async fn post_content(app: &TestApp, user: &Session, parent: &str, name: &str, body: Vec<u8>) -> reqwest::Response {
    app.client
        .post(app.api("/file/content"))
        .query(&[("parent_id", parent), ("name", name)])
        .bearer_auth(&user.access)
        .body(body)
        .send()
        .await
        .unwrap()
}

/// `PATCH /file/content?id=` (new content for a file).
async fn replace(app: &TestApp, user: &Session, id: &str, body: Vec<u8>) -> reqwest::Response {
    app.request(Method::PATCH, &format!("/file/content?id={id}"))
        .bearer_auth(&user.access)
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn a_revoked_pack_leaves_the_user_over_quota_with_every_write_refused_and_nothing_deleted(app: TestApp) {
    let admin = app.login_admin().await;
    app.use_small_chunks(&admin, 0).await;
    app.set_user_group(&admin, json!({"max_storage": 1000})).await;
    // Someone shares a small file the user will try to save.
    let owner = app.register("sharer@example.com", "sharer-password").await;
    let owner_root = app.root_id(&owner).await;
    let shared = app.upload(&owner, &owner_root, "gift.txt", &content(100, 1)).await;
    let response =
        app.call(Method::POST, "/share", Some(&owner.access), Some(json!({"object_id": shared["id"]}))).await;
    assert_eq!(response.status(), 201);
    let code = response.json::<Value>().await.unwrap()["code"].as_str().unwrap().to_owned();

    let (user, dav) = app.dav_user("ulla@example.com", "laptop").await;
    let pack = grant(&app, &admin, json!({"user_id": user.user_id, "name": "Bonus", "size": 3000})).await;
    assert_eq!(pack["status"], "active");
    assert!(pack["expires_at"].is_null(), "no end given: forever");
    let figures = storage(&app, &user).await;
    assert_eq!(
        (figures["total"].as_i64(), figures["group"].as_i64(), figures["packs"].as_i64()),
        (Some(4000), Some(1000), Some(3000))
    );
    let root = app.root_id(&user).await;
    let bytes = content(2500, 2);
    let big = app.upload(&user, &root, "big.bin", &bytes).await;
    let big_id = big["id"].as_str().unwrap().to_owned();

    let revoked = app
        .call(
            Method::DELETE,
            &format!("/admin/storage_pack/{}", pack["id"].as_str().unwrap()),
            Some(&admin.access),
            None,
        )
        .await;
    assert_eq!(revoked.status(), 204);
    let figures = storage(&app, &user).await;
    assert_eq!(figures["total"], 1000, "a revoked pack stops counting at once");
    assert_eq!(figures["used"], 2500);
    assert_eq!(figures["overrun"], 1500);
    assert_eq!(figures["free"], 0);
    assert_eq!(my_packs(&app, &user).await[0]["status"], "revoked");

    // Every kind of write that adds bytes is refused.
    let upload = app.start_upload(&user, &root, "more.bin", 10).await;
    assert_eq!(error_body(upload, 507).await["code"], "storage.quota_exceeded", "upload session");
    let small = post_content(&app, &user, &root, "note.txt", content(10, 3)).await;
    assert_eq!(error_body(small, 507).await["code"], "storage.quota_exceeded", "POST /file/content");
    let same_size = replace(&app, &user, &big_id, content(2500, 4)).await;
    assert_eq!(error_body(same_size, 507).await["code"], "storage.quota_exceeded", "content replacement");
    let put = dav.put("/dav-note.txt", content(10, 5)).await;
    assert_eq!(put.status(), 507, "WebDAV PUT");
    let copy = app
        .call(
            Method::POST,
            "/object/copies",
            Some(&user.access),
            Some(json!({"src_ids": [big_id], "dst_id": app.mkdir(&user, &root, "copies").await})),
        )
        .await;
    assert_eq!(error_body(copy, 507).await["code"], "storage.quota_exceeded", "copy (shares the blob, still counts)");
    let save =
        app.call(Method::POST, &format!("/share/{code}/save"), Some(&user.access), Some(json!({"dst_id": root}))).await;
    assert_eq!(error_body(save, 507).await["code"], "storage.quota_exceeded", "save from a share");

    // Nothing was deleted, nothing was charged.
    assert_eq!(app.download(&user, &big_id).await, bytes);
    assert_eq!(storage(&app, &user).await["used"], 2500);
    let listing: Value = app.call(Method::GET, "/directory", Some(&user.access), None).await.json().await.unwrap();
    let names: Vec<&str> = listing["items"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"big.bin") && !names.contains(&"note.txt") && !names.contains(&"gift.txt"), "{names:?}");

    // Deleting for good brings usage within capacity, and writes work again.
    let ids = json!({"ids": [big_id]});
    assert_eq!(app.call(Method::DELETE, "/object", Some(&user.access), Some(ids.clone())).await.status(), 204);
    let still_over = post_content(&app, &user, &root, "note.txt", content(10, 3)).await;
    assert_eq!(still_over.status(), 507, "the trash still counts");
    assert_eq!(app.call(Method::DELETE, "/trash", Some(&user.access), Some(ids)).await.status(), 204);
    assert_eq!(storage(&app, &user).await["overrun"], 0);
    assert_eq!(post_content(&app, &user, &root, "note.txt", content(10, 3)).await.status(), 201);
    assert_eq!(dav.put("/dav-note.txt", content(10, 5)).await.status(), 201);
    let save =
        app.call(Method::POST, &format!("/share/{code}/save"), Some(&user.access), Some(json!({"dst_id": root}))).await;
    assert_eq!(save.status(), 200, "save from a share");
}

async fn a_pack_that_expires_stops_counting_and_the_job_marks_it_once(app: TestApp) {
    let admin = app.login_admin().await;
    app.use_small_chunks(&admin, 0).await;
    app.set_user_group(&admin, json!({"max_storage": 1000})).await;
    let user = app.register("eve@example.com", "eve-password-1").await;
    let root = app.root_id(&user).await;
    // The second master starts before the pack exists: its jobs' first run (at start) finds
    // nothing to mark, so the two explicit runs below are the ones that race.
    let peer = app.spawn_peer().await;
    let ends = now_ms() + 1500;
    let pack = grant(
        &app,
        &admin,
        json!({"user_id": user.user_id, "name": "Short", "size": 2000, "expires_at": to_rfc3339(ends)}),
    )
    .await;
    assert_eq!(storage(&app, &user).await["total"], 3000);
    let bytes = content(1500, 9);
    let file = app.upload(&user, &root, "data.bin", &bytes).await;
    tokio::time::sleep(Duration::from_millis((ends - now_ms()).max(0) as u64 + 100)).await;

    let figures = storage(&app, &user).await;
    assert_eq!(
        (figures["total"].as_i64(), figures["overrun"].as_i64()),
        (Some(1000), Some(500)),
        "capacity never waits for the job"
    );
    assert_eq!(app.start_upload(&user, &root, "more.bin", 1).await.status(), 507);
    assert_eq!(my_packs(&app, &user).await[0]["status"], "expired");

    // Two masters run the job at once: each pack is marked once; running it again marks none.
    let now = now_ms();
    let (a, b) =
        tokio::join!(storage_packs::mark_expired(app.context(), now), storage_packs::mark_expired(&peer.context, now));
    assert_eq!(a.unwrap() + b.unwrap(), 1);
    assert_eq!(storage_packs::mark_expired(app.context(), now_ms()).await.unwrap(), 0);
    let (marked,): (Option<i64>,) = sqlx::query_as("SELECT expired_at FROM storage_packs WHERE id = $1")
        .bind(pack["id"].as_str().unwrap())
        .fetch_one(app.context().db().reader())
        .await
        .unwrap();
    assert_eq!(marked, Some(now));
    assert_eq!(app.download(&user, file["id"].as_str().unwrap()).await, bytes, "nothing deleted");
    peer.shutdown(Duration::from_secs(5)).await.unwrap();
}

async fn administrators_list_grant_and_revoke_packs_with_validation(app: TestApp) {
    let admin = app.login_admin().await;
    let ann = app.register("ann@example.com", "ann-password-1").await;
    let bob = app.register("bob@example.com", "bob-password-1").await;
    let start = now_ms() + 3_600_000;
    let later = grant(&app, &admin, json!({"user_id": ann.user_id, "name": "Later", "size": 10, "starts_at": to_rfc3339(start), "duration_days": 30})).await;
    assert_eq!(later["status"], "scheduled");
    assert_eq!(later["expires_at"], to_rfc3339(start + 30 * 86_400_000));
    assert_eq!(later["source"], "admin");
    grant(&app, &admin, json!({"user_id": ann.user_id, "name": "Now", "size": 20})).await;
    grant(&app, &admin, json!({"user_id": bob.user_id, "name": "Bob's", "size": 30})).await;
    assert_eq!(storage(&app, &ann).await["packs"], 20, "a scheduled pack does not count yet");

    let list = |query: String| admin_list(&app, &admin, query);
    assert_eq!(list(String::new()).await["count"], 3);
    assert_eq!(list(format!("?user_id={}", ann.user_id)).await["count"], 2);
    let active = list(format!("?user_id={}&active=true", ann.user_id)).await;
    assert_eq!((active["count"].as_i64(), active["items"][0]["name"].as_str()), (Some(1), Some("Now")));
    assert_eq!(list(format!("?user_id={}&active=false", ann.user_id)).await["items"][0]["name"], "Later");
    let page = list("?limit=1&offset=1".to_owned()).await;
    assert_eq!((page["count"].as_i64(), page["items"].as_array().unwrap().len()), (Some(3), 1));

    for (body, field) in [
        (json!({"user_id": ann.user_id, "name": "x", "size": 0}), "size"),
        (json!({"user_id": ann.user_id, "name": " ", "size": 1}), "name"),
        (
            json!({"user_id": ann.user_id, "name": "x", "size": 1, "expires_at": to_rfc3339(now_ms() - 1000)}),
            "expires_at",
        ),
        (json!({"user_id": ann.user_id, "name": "x", "size": 1, "expires_at": "tomorrow"}), "expires_at"),
        (json!({"user_id": ann.user_id, "name": "x", "size": 1, "duration_days": 0}), "duration_days"),
        (json!({"user_id": "00000000-0000-4000-8000-000000000001", "name": "x", "size": 1}), "user_id"),
    ] {
        let response = app.call(Method::POST, "/admin/storage_pack", Some(&admin.access), Some(body)).await;
        assert_eq!(error_body(response, 422).await["field"], field);
    }
    let missing = app
        .call(Method::DELETE, "/admin/storage_pack/00000000-0000-4000-8000-000000000001", Some(&admin.access), None)
        .await;
    assert_eq!(error_body(missing, 404).await["code"], "storage.pack_not_found");
    let member = app
        .call(
            Method::POST,
            "/admin/storage_pack",
            Some(&ann.access),
            Some(json!({"user_id": ann.user_id, "name": "x", "size": 1})),
        )
        .await;
    assert_eq!(error_body(member, 403).await["code"], "auth.admin_required");
    assert_eq!(my_packs(&app, &bob).await.len(), 1, "each user sees only their own packs");
    // Packs are sized by administrators: their sum saturates instead of overflowing.
    for _ in 0..2 {
        grant(&app, &admin, json!({"user_id": bob.user_id, "name": "Huge", "size": i64::MAX - 1})).await;
    }
    assert!(storage(&app, &bob).await["packs"].as_i64().unwrap() >= 4_000_000_000_000_000_000);
    let root = app.root_id(&bob).await;
    assert_eq!(app.start_upload(&bob, &root, "fits.bin", 10).await.status(), 201);
}
