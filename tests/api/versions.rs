//! File versions: every write path that replaces a file's content (`PATCH /file/content`,
//! WebDAV `PUT`, an upload with `overwrite`) keeps the previous content as a version; versions
//! are listed, downloaded, restored and deleted with the quota accounted at each step, share
//! blobs with identical contents, survive the trash, go with a purge, and are pruned to each
//! group's retention.

use nubo_model::domain::time::now_ms;
use nubo_service::content::versions;
use nubo_tests::{Session, TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    every_replacement_keeps_a_version_and_a_restore_round_trips_with_the_quota,
    versions_survive_the_trash_and_go_with_a_purge,
    a_group_without_versions_releases_the_old_content,
    retention_prunes_versions_by_count_and_by_age,
    versions_count_against_the_quota,
);

async fn replace(app: &TestApp, user: &Session, id: &str, body: &[u8]) -> reqwest::Response {
    app.request(Method::PATCH, &format!("/file/content?id={id}"))
        .bearer_auth(&user.access)
        .body(body.to_vec())
        .send()
        .await
        .unwrap()
}

async fn versions_of(app: &TestApp, user: &Session, id: &str) -> Vec<Value> {
    let response = app.call(Method::GET, &format!("/object/{id}/versions"), Some(&user.access), None).await;
    assert_eq!(response.status(), 200);
    response.json::<Vec<Value>>().await.unwrap()
}

fn sizes(versions: &[Value]) -> Vec<i64> {
    versions.iter().map(|v| v["size"].as_i64().unwrap()).collect()
}

async fn blobs(app: &TestApp) -> i64 {
    let (count,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM physical_files").fetch_one(app.context().db().reader()).await.unwrap();
    count
}

async fn version_bytes(app: &TestApp, user: &Session, file: &str, version: &str) -> Vec<u8> {
    let path = format!("/object/{file}/versions/{version}/download");
    let token: Value = app.call(Method::POST, &path, Some(&user.access), None).await.json().await.unwrap();
    let url = format!("{}{}", app.base_url, token["url"].as_str().unwrap());
    let response = app.client.get(url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap().to_vec()
}

async fn every_replacement_keeps_a_version_and_a_restore_round_trips_with_the_quota(app: TestApp) {
    let (user, dav) = app.dav_user("vic@example.com", "vic-dav").await;
    let root = app.root_id(&user).await;
    let file = app.upload(&user, &root, "notes.txt", b"one").await["id"].as_str().unwrap().to_owned();
    assert!(versions_of(&app, &user, &file).await.is_empty());
    assert_eq!(app.storage_used(&user).await, 3);

    // Three write paths, each keeping what was there.
    assert_eq!(replace(&app, &user, &file, b"two!").await.status(), 200);
    assert_eq!(dav.put("/notes.txt", "three").await.status(), 204);
    let body = json!({"file_name": "notes.txt", "file_size": 8, "parent_id": root, "overwrite": true});
    let session: Value =
        app.call(Method::POST, "/file/upload", Some(&user.access), Some(body)).await.json().await.unwrap();
    let upload = session["id"].as_str().unwrap();
    let done: Value = app.put_chunk(&user, upload, 0, b"fourfour".to_vec()).await.json().await.unwrap();
    assert_eq!(done["object"]["id"], file.as_str(), "the upload replaced the file's content");
    assert_eq!(app.download(&user, &file).await, b"fourfour");
    let listed = versions_of(&app, &user, &file).await;
    assert_eq!(sizes(&listed), [5, 4, 3], "newest first");
    assert_eq!(listed[2]["blake3"].as_str().unwrap(), blake3::hash(b"one").to_hex().as_str());
    assert_eq!(app.storage_used(&user).await, 3 + 4 + 5 + 8, "versions count in the used storage");
    let oldest = listed[2]["id"].as_str().unwrap().to_owned();
    assert_eq!(version_bytes(&app, &user, &file, &oldest).await, b"one");

    // Restoring: the old content is current again, the current one a version, nothing stored anew.
    let stored = blobs(&app).await;
    let path = format!("/object/{file}/versions/{oldest}/restore");
    let restored = app.call(Method::POST, &path, Some(&user.access), None).await;
    assert_eq!(restored.status(), 200);
    assert_eq!(restored.json::<Value>().await.unwrap()["size"], 3);
    assert_eq!(app.download(&user, &file).await, b"one");
    assert_eq!(sizes(&versions_of(&app, &user, &file).await), [8, 5, 4]);
    assert_eq!(app.storage_used(&user).await, 20, "a restore moves bytes, it adds none");
    assert_eq!(blobs(&app).await, stored);
    let again = app.call(Method::POST, &path, Some(&user.access), None).await;
    assert_eq!(error_body(again, 404).await["code"], "version.not_found", "restored: no longer a version");

    // Identical content shares the blob of the version that has it.
    assert_eq!(replace(&app, &user, &file, b"two!").await.status(), 200);
    assert_eq!(blobs(&app).await, stored, "the content of a version is not stored again");

    // Deleting a version gives its bytes back; its blob stays while another version has it.
    let listed = versions_of(&app, &user, &file).await;
    assert_eq!(sizes(&listed), [3, 8, 5, 4]);
    let four = listed[3]["id"].as_str().unwrap();
    let deleted = app.call(Method::DELETE, &format!("/object/{file}/versions/{four}"), Some(&user.access), None).await;
    assert_eq!(deleted.status(), 204);
    assert_eq!(app.storage_used(&user).await, 4 + 3 + 8 + 5);
    assert_eq!(app.download(&user, &file).await, b"two!", "the current content shares that blob");

    // Nobody else reaches them.
    let stranger = app.register("eve@example.com", "eve-password").await;
    let peek = app.call(Method::GET, &format!("/object/{file}/versions"), Some(&stranger.access), None).await;
    assert_eq!(error_body(peek, 404).await["code"], "object.not_found");
    let path = format!("/object/{file}/versions/{}/download", listed[0]["id"].as_str().unwrap());
    let peek = app.call(Method::POST, &path, Some(&stranger.access), None).await;
    assert_eq!(error_body(peek, 404).await["code"], "object.not_found");
    let missing = app.call(Method::DELETE, &format!("/object/{file}/versions/nope"), Some(&user.access), None).await;
    assert_eq!(error_body(missing, 404).await["code"], "version.not_found");
}

async fn versions_survive_the_trash_and_go_with_a_purge(app: TestApp) {
    let user = app.register("tess@example.com", "tess-password").await;
    let root = app.root_id(&user).await;
    let folder = app.mkdir(&user, &root, "drafts").await;
    let file = app.upload(&user, &folder, "draft.md", b"v1").await["id"].as_str().unwrap().to_owned();
    assert_eq!(replace(&app, &user, &file, b"v2v2").await.status(), 200);
    assert_eq!(replace(&app, &user, &file, b"v3v3v3").await.status(), 200);
    let before = blobs(&app).await;
    let trash = app.call(Method::DELETE, "/object", Some(&user.access), Some(json!({"ids": [folder]}))).await;
    assert!(trash.status().is_success(), "{}", trash.status());
    assert_eq!(sizes(&versions_of(&app, &user, &file).await), [4, 2], "kept in the trash");
    let restore = app.call(Method::PATCH, "/trash/restore", Some(&user.access), Some(json!({"ids": [folder]}))).await;
    assert!(restore.status().is_success(), "{}", restore.status());
    assert_eq!(sizes(&versions_of(&app, &user, &file).await), [4, 2], "and after the restore");

    let trash = app.call(Method::DELETE, "/object", Some(&user.access), Some(json!({"ids": [folder]}))).await;
    assert!(trash.status().is_success());
    let purge = app.call(Method::DELETE, "/trash", Some(&user.access), Some(json!({"ids": [folder]}))).await;
    assert!(purge.status().is_success(), "{}", purge.status());
    assert_eq!(app.storage_used(&user).await, 0, "the versions' bytes went with the file");
    let (left,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM file_versions").fetch_one(app.context().db().reader()).await.unwrap();
    assert_eq!(left, 0);
    assert_eq!(blobs(&app).await, before - 3, "every content's blob is released");
}

async fn a_group_without_versions_releases_the_old_content(app: TestApp) {
    let admin = app.login_admin().await;
    let users = app.group_id(&admin, "Users").await;
    app.set_group(&admin, &users, json!({"version_max_count": 0})).await;
    let user = app.register("nora@example.com", "nora-password").await;
    let root = app.root_id(&user).await;
    let file = app.upload(&user, &root, "a.txt", b"first").await["id"].as_str().unwrap().to_owned();
    let before = blobs(&app).await;
    assert_eq!(replace(&app, &user, &file, b"second!").await.status(), 200);
    assert!(versions_of(&app, &user, &file).await.is_empty());
    assert_eq!(app.storage_used(&user).await, 7, "settled by the difference");
    // The old blob goes after the answer.
    let mut left = blobs(&app).await;
    for _ in 0..50 {
        if left == before {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        left = blobs(&app).await;
    }
    assert_eq!(left, before, "the old blob went, the new one came");
    let bad = json!({"name": "Bad", "max_storage": 0, "version_max_count": -1});
    let refused = app.call(Method::POST, "/admin/group", Some(&admin.access), Some(bad)).await;
    assert_eq!(error_body(refused, 422).await["field"], "version_max_count");
}

async fn retention_prunes_versions_by_count_and_by_age(app: TestApp) {
    let admin = app.login_admin().await;
    let users = app.group_id(&admin, "Users").await;
    app.set_group(&admin, &users, json!({"version_max_count": 2, "version_max_days": 7})).await;
    let user = app.register("rita@example.com", "rita-password").await;
    let root = app.root_id(&user).await;
    let file = app.upload(&user, &root, "log.txt", b"1").await["id"].as_str().unwrap().to_owned();
    for body in [&b"22"[..], b"333", b"4444"] {
        assert_eq!(replace(&app, &user, &file, body).await.status(), 200);
    }
    assert_eq!(sizes(&versions_of(&app, &user, &file).await), [3, 2, 1], "kept until the job runs");
    assert_eq!(app.storage_used(&user).await, 10);
    let now = now_ms();
    assert_eq!(versions::prune(app.context(), now).await.unwrap(), 1, "beyond the newest 2");
    assert_eq!(sizes(&versions_of(&app, &user, &file).await), [3, 2]);
    assert_eq!(app.storage_used(&user).await, 9);
    assert_eq!(versions::prune(app.context(), now + 6 * 86_400_000).await.unwrap(), 0, "kept 7 days");
    assert_eq!(versions::prune(app.context(), now + 8 * 86_400_000).await.unwrap(), 2);
    assert!(versions_of(&app, &user, &file).await.is_empty());
    assert_eq!(app.storage_used(&user).await, 4, "only the current content is left");
    assert_eq!(app.download(&user, &file).await, b"4444");
}

async fn versions_count_against_the_quota(app: TestApp) {
    let admin = app.login_admin().await;
    let users = app.group_id(&admin, "Users").await;
    app.set_group(&admin, &users, json!({"max_storage": 10})).await;
    let user = app.register("quinn@example.com", "quinn-password").await;
    let root = app.root_id(&user).await;
    let file = app.upload(&user, &root, "q.bin", b"123456").await["id"].as_str().unwrap().to_owned();
    let refused = replace(&app, &user, &file, b"abcdef").await;
    assert_eq!(error_body(refused, 507).await["code"], "storage.quota_exceeded", "6 + a version of 6 is over 10");
    assert_eq!(app.download(&user, &file).await, b"123456", "nothing changed");
    assert_eq!(app.storage_used(&user).await, 6);
    assert_eq!(replace(&app, &user, &file, b"abcd").await.status(), 200, "4 + a version of 6 fits");
    assert_eq!(app.storage_used(&user).await, 10);
}
