//! The object tree, uploads, downloads, quota and de-duplication on the local policy.

use nubo_tests::files::{PolicyKind, SMALL_CHUNK, TestPolicy, content};
use nubo_tests::{TestApp, error_body, on_every_backend, settled};
use reqwest::Method;
use serde_json::{Value, json};

nubo_tests::on_every_backend_and_storage!(
    multi_chunk_upload_downloads_byte_for_byte,
    a_small_file_is_created_in_one_request,
    chunks_may_arrive_out_of_order_and_twice,
    status_lists_received_chunks_and_upload_resumes_after_restart,
    zero_byte_files_work,
    abort_and_reaper_release_the_reservation_and_bytes,
    duplicate_content_is_stored_once_and_deleted_with_its_last_reference,
    download_tokens_work_once_and_serve_ranges,
    content_replacement_enforces_max_size_and_settles_quota,
    source_links_serve_private_files_publicly,
);

on_every_backend!(
    wrong_chunk_length_and_index_are_refused,
    concurrent_sessions_never_exceed_the_quota,
    max_size_is_enforced_at_session_creation,
    a_quota_shrunk_during_an_upload_refuses_its_completion,
    moving_a_folder_into_its_descendant_changes_nothing,
    a_batch_move_with_one_bad_id_changes_nothing,
    copies_share_blobs_and_count_against_the_quota,
    a_copy_beside_its_original_takes_the_next_free_name,
    unfinished_uploads_are_listed_with_their_reservation_and_can_be_cancelled,
    trash_restore_and_purge,
    listing_puts_folders_first_sorts_and_pages,
    a_listing_is_gzipped_when_asked_and_its_errors_are_not,
    names_are_validated_and_storage_keys_stay_inside_the_root,
    other_users_ids_answer_404_everywhere,
    policy_permission_is_checked,
    a_local_policy_may_skip_fsync
);

async fn setup_storage(app: &TestApp, kind: PolicyKind) -> (nubo_tests::Session, String, TestPolicy) {
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, kind, 0).await;
    let user = app.register("fiona@example.com", "fiona-password").await;
    let root = app.root_id(&user).await;
    (user, root, policy)
}

async fn setup(app: &TestApp) -> (nubo_tests::Session, String) {
    let admin = app.login_admin().await;
    app.use_small_chunks(&admin, 0).await;
    let user = app.register("fiona@example.com", "fiona-password").await;
    let root = app.root_id(&user).await;
    (user, root)
}

async fn multi_chunk_upload_downloads_byte_for_byte(app: TestApp, kind: PolicyKind) {
    let (user, root, policy) = setup_storage(&app, kind).await;
    let bytes = content(3 * policy.chunk + 123, 1);
    let object = app.upload(&user, &root, "data.bin", &bytes).await;
    assert_eq!(object["size"], bytes.len());
    assert_eq!(object["path"], "/data.bin");
    assert_eq!(app.download(&user, object["id"].as_str().unwrap()).await, bytes);
    let detail: Value = app
        .call(Method::GET, &format!("/object/{}/detail", object["id"].as_str().unwrap()), Some(&user.access), None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(detail["blake3"], blake3::hash(&bytes).to_hex().as_str());
    assert_eq!(app.storage_used(&user).await, bytes.len() as i64);
}

/// `POST /file/content?parent_id=&name=` with the raw body, as the web app and the CLI create
/// small files.
async fn post_content(
    app: &TestApp,
    user: &nubo_tests::Session,
    parent: &str,
    name: &str,
    body: Vec<u8>,
) -> reqwest::Response {
    let url = app.api("/file/content");
    app.client
        .post(url)
        .query(&[("parent_id", parent), ("name", name)])
        .bearer_auth(&user.access)
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn a_small_file_is_created_in_one_request(app: TestApp, kind: PolicyKind) {
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, kind, 10_000).await;
    let user = app.register("fiona@example.com", "fiona-password").await;
    let root = app.root_id(&user).await;
    let bytes = content(4096, 7);
    let created = post_content(&app, &user, &root, "note.txt", bytes.clone()).await;
    assert_eq!(created.status(), 201);
    let object: Value = created.json().await.unwrap();
    assert_eq!(
        (object["name"].as_str(), object["path"].as_str(), object["size"].as_u64()),
        (Some("note.txt"), Some("/note.txt"), Some(4096))
    );
    assert_eq!(app.download(&user, object["id"].as_str().unwrap()).await, bytes);
    assert_eq!(app.storage_used(&user).await, 4096);
    assert_eq!(policy.stored_blobs(&app), 1);

    // Refusals leave nothing behind: a name taken, a body over max_size, a stranger's folder.
    let taken = post_content(&app, &user, &root, "note.txt", content(10, 1)).await;
    assert_eq!(error_body(taken, 409).await["code"], "object.name_taken");
    let too_large = post_content(&app, &user, &root, "big.bin", content(20_000, 2)).await;
    assert_eq!(error_body(too_large, 413).await["code"], "file.too_large");
    let stranger = app.register("gus@example.com", "gus-password").await;
    let elsewhere = post_content(&app, &stranger, &root, "intruder.txt", content(10, 3)).await;
    assert_eq!(error_body(elsewhere, 404).await["code"], "object.not_found");
    let bad_name = post_content(&app, &user, &root, "a/b", content(10, 4)).await;
    assert_eq!(bad_name.status(), 422);
    assert_eq!(app.storage_used(&user).await, 4096);
    assert_eq!(policy.stored_blobs(&app), 1);
    let listing: Value = app.call(Method::GET, "/directory", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(listing["items"].as_array().unwrap().len(), 1, "only note.txt: {listing}");
}

async fn chunks_may_arrive_out_of_order_and_twice(app: TestApp, kind: PolicyKind) {
    let (user, root, policy) = setup_storage(&app, kind).await;
    let chunk = policy.chunk;
    let bytes = content(4 * chunk, 2);
    let session: Value = app.start_upload(&user, &root, "shuffled.bin", bytes.len()).await.json().await.unwrap();
    let id = session["id"].as_str().unwrap();
    let piece = |i: usize| bytes[i * chunk..(i + 1) * chunk].to_vec();
    for index in [2, 0, 2, 3] {
        assert_eq!(app.put_chunk(&user, id, index, piece(index)).await.status(), 200);
    }
    // A re-sent chunk with other bytes replaces the earlier copy and is not counted twice.
    assert_eq!(app.put_chunk(&user, id, 0, vec![0xAA; chunk]).await.status(), 200);
    assert_eq!(app.put_chunk(&user, id, 0, piece(0)).await.status(), 200);
    let last: Value = app.put_chunk(&user, id, 1, piece(1)).await.json().await.unwrap();
    let object = &last["object"];
    assert_eq!(app.download(&user, object["id"].as_str().unwrap()).await, bytes);
    assert_eq!(app.storage_used(&user).await, bytes.len() as i64);
    assert_eq!(policy.stored_blobs(&app), 1, "one blob, nothing staged left over");
}

async fn wrong_chunk_length_and_index_are_refused(app: TestApp) {
    let (user, root) = setup(&app).await;
    let session: Value = app.start_upload(&user, &root, "f.bin", 2 * SMALL_CHUNK + 10).await.json().await.unwrap();
    let id = session["id"].as_str().unwrap();
    assert_eq!(session["total_chunks"], 3);
    // Streamed without Content-Length, so the length is found out while the bytes arrive.
    let streamed = |index: usize, bytes: Vec<u8>| {
        let body = reqwest::Body::wrap_stream(futures_util::stream::iter([Ok::<_, std::io::Error>(bytes)]));
        app.request(Method::PUT, &format!("/file/upload/{id}/{index}")).bearer_auth(&user.access).body(body).send()
    };
    let short = streamed(0, vec![1; SMALL_CHUNK - 1]).await.unwrap();
    assert_eq!(error_body(short, 400).await["code"], "upload.wrong_length");
    let long = streamed(2, vec![1; 11]).await.unwrap();
    assert_eq!(error_body(long, 400).await["code"], "upload.wrong_length");
    let beyond = app.put_chunk(&user, id, 3, vec![1; 10]).await;
    assert_eq!(error_body(beyond, 422).await["code"], "upload.chunk_out_of_range");
    let status: Value =
        app.call(Method::GET, &format!("/file/upload/{id}"), Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(status["uploaded"], json!([]), "refused chunks are not recorded");
}

async fn status_lists_received_chunks_and_upload_resumes_after_restart(mut app: TestApp, kind: PolicyKind) {
    let (user, root, policy) = setup_storage(&app, kind).await;
    let chunk = policy.chunk;
    let bytes = content(3 * chunk, 3);
    let session: Value = app.start_upload(&user, &root, "resume.bin", bytes.len()).await.json().await.unwrap();
    let id = session["id"].as_str().unwrap().to_owned();
    app.put_chunk(&user, &id, 0, bytes[..chunk].to_vec()).await;
    app.put_chunk(&user, &id, 2, bytes[2 * chunk..].to_vec()).await;

    app.restart().await;
    let status: Value =
        app.call(Method::GET, &format!("/file/upload/{id}"), Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(status["uploaded"], json!([0, 2]));
    let done: Value = app.put_chunk(&user, &id, 1, bytes[chunk..2 * chunk].to_vec()).await.json().await.unwrap();
    assert_eq!(app.download(&user, done["object"]["id"].as_str().unwrap()).await, bytes);
}

async fn zero_byte_files_work(app: TestApp, kind: PolicyKind) {
    let (user, root, _policy) = setup_storage(&app, kind).await;
    let response = app.start_upload(&user, &root, "empty.txt", 0).await;
    assert_eq!(response.status(), 201);
    let session: Value = response.json().await.unwrap();
    assert_eq!(session["total_chunks"], 0);
    let object = &session["object"];
    assert_eq!(object["size"], 0);
    assert!(app.download(&user, object["id"].as_str().unwrap()).await.is_empty());
}

async fn concurrent_sessions_never_exceed_the_quota(app: TestApp) {
    let admin = app.login_admin().await;
    app.use_small_chunks(&admin, 0).await;
    app.set_user_group(&admin, json!({"max_storage": 10 * 1024 * 1024})).await;
    let user = app.register("gus@example.com", "gus-password").await;
    let root = app.root_id(&user).await;
    let app = std::sync::Arc::new(app);
    let attempts = (0..12).map(|i| {
        let (app, user, root) = (app.clone(), user.clone(), root.clone());
        tokio::spawn(async move {
            app.start_upload(&user, &root, &format!("f{i}"), 3 * 1024 * 1024).await.status().as_u16()
        })
    });
    let statuses: Vec<u16> = futures_util::future::join_all(attempts).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 3, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 507).count(), 9, "{statuses:?}");
    assert_eq!(app.storage_used(&user).await, 9 * 1024 * 1024);
    // Values above 4 GiB are fine too.
    app.set_user_group(&admin, json!({"max_storage": 6_i64 * 1024 * 1024 * 1024})).await;
    // The new capacity is in the group's claims: the user's token is refreshed to carry it.
    let user = app.refresh(&user).await;
    assert_eq!(app.start_upload(&user, &root, "big", 5 * 1024 * 1024 * 1024).await.status(), 201);
    assert_eq!(app.storage_used(&user).await, 9 * 1024 * 1024 + 5 * 1024 * 1024 * 1024);
}

use nubo_tests::files::files_below as files_under;

async fn abort_and_reaper_release_the_reservation_and_bytes(app: TestApp, kind: PolicyKind) {
    let (user, root, policy) = setup_storage(&app, kind).await;
    let chunk = policy.chunk;
    let aborted: Value = app.start_upload(&user, &root, "a.bin", 2 * chunk).await.json().await.unwrap();
    app.put_chunk(&user, aborted["id"].as_str().unwrap(), 0, vec![7; chunk]).await;
    assert_eq!(app.storage_used(&user).await, 2 * chunk as i64);
    let response = app
        .call(Method::DELETE, &format!("/file/upload/{}", aborted["id"].as_str().unwrap()), Some(&user.access), None)
        .await;
    assert_eq!(response.status(), 204);
    assert_eq!(app.storage_used(&user).await, 0);
    assert_eq!(policy.stored_blobs(&app), 0, "staged bytes removed");

    let abandoned: Value = app.start_upload(&user, &root, "b.bin", chunk + 1).await.json().await.unwrap();
    app.put_chunk(&user, abandoned["id"].as_str().unwrap(), 1, vec![1]).await;
    let kept = app.upload(&user, &root, "kept.bin", &content(100, 4)).await;
    assert_eq!(app.storage_used(&user).await, chunk as i64 + 1 + 100);
    let state = app.context();
    let now = nubo_model::domain::time::now_ms();
    assert_eq!(nubo_service::content::uploads::reap_expired(state, now).await.unwrap(), 0, "nothing expired yet");
    let later = now + nubo_service::content::uploads::SESSION_LIFETIME.as_millis() as i64 + 1;
    assert_eq!(nubo_service::content::uploads::reap_expired(state, later).await.unwrap(), 1);
    assert_eq!(app.storage_used(&user).await, 100, "only the finished file counts");
    let gone = app
        .call(Method::GET, &format!("/file/upload/{}", abandoned["id"].as_str().unwrap()), Some(&user.access), None)
        .await;
    assert_eq!(error_body(gone, 404).await["code"], "upload.not_found");
    assert_eq!(policy.stored_blobs(&app), 1, "only the finished file's blob is left");
    assert_eq!(app.download(&user, kept["id"].as_str().unwrap()).await, content(100, 4));
}

async fn max_size_is_enforced_at_session_creation(app: TestApp) {
    let admin = app.login_admin().await;
    app.use_small_chunks(&admin, 1000).await;
    let user = app.register("hank@example.com", "hank-password").await;
    let root = app.root_id(&user).await;
    let response = app.start_upload(&user, &root, "big.bin", 1001).await;
    assert_eq!(error_body(response, 413).await["code"], "file.too_large");
    assert_eq!(app.storage_used(&user).await, 0);
    assert_eq!(app.start_upload(&user, &root, "ok.bin", 1000).await.status(), 201);
}

async fn a_quota_shrunk_during_an_upload_refuses_its_completion(app: TestApp) {
    let (user, root) = setup(&app).await;
    let session: Value = app.start_upload(&user, &root, "f.bin", SMALL_CHUNK + 10).await.json().await.unwrap();
    let id = session["id"].as_str().unwrap();
    assert_eq!(app.put_chunk(&user, id, 0, vec![1; SMALL_CHUNK]).await.status(), 200);

    let admin = app.login_admin().await;
    app.set_user_group(&admin, json!({"max_storage": 1000})).await;
    let user = app.refresh(&user).await;
    let refused = app.put_chunk(&user, id, 1, vec![1; 10]).await;
    assert_eq!(error_body(refused, 507).await["code"], "storage.quota_exceeded");
    assert_eq!(app.storage_used(&user).await, 0, "the reservation was given back");
    let gone = app.call(Method::GET, &format!("/file/upload/{id}"), Some(&user.access), None).await;
    assert_eq!(error_body(gone, 404).await["code"], "upload.not_found", "the session was released");
}

async fn blob_count(app: &TestApp, policy: &str) -> i64 {
    nubo_model::db::blobs::count_for_policy(app.context().db(), policy.parse().unwrap()).await.unwrap()
}

async fn duplicate_content_is_stored_once_and_deleted_with_its_last_reference(app: TestApp, kind: PolicyKind) {
    let (user, root, test_policy) = setup_storage(&app, kind).await;
    let policy = test_policy.id.clone();
    let bytes = content(2 * test_policy.chunk + 5, 5);
    let first = app.upload(&user, &root, "one.bin", &bytes).await;
    let second = app.upload(&user, &root, "two.bin", &bytes).await;
    assert_eq!(blob_count(&app, &policy).await, 1, "one physical file");
    // The surplus copy goes after the answer.
    assert_eq!(test_policy.settled_blobs(&app, 1).await, 1, "the duplicate's bytes were removed");
    assert_eq!(app.storage_used(&user).await, 2 * bytes.len() as i64, "quota counts logical size");

    let delete = |id: &str| json!({"ids": [id]});
    app.call(Method::DELETE, "/object", Some(&user.access), Some(delete(first["id"].as_str().unwrap()))).await;
    app.call(Method::DELETE, "/trash", Some(&user.access), Some(delete(first["id"].as_str().unwrap()))).await;
    assert_eq!(blob_count(&app, &policy).await, 1, "still referenced by the second object");
    assert_eq!(app.download(&user, second["id"].as_str().unwrap()).await, bytes);
    app.call(Method::DELETE, "/object", Some(&user.access), Some(delete(second["id"].as_str().unwrap()))).await;
    app.call(Method::DELETE, "/trash", Some(&user.access), Some(delete(second["id"].as_str().unwrap()))).await;
    assert_eq!(blob_count(&app, &policy).await, 0);
    assert_eq!(test_policy.stored_blobs(&app), 0, "bytes deleted with the last reference");
    assert_eq!(app.storage_used(&user).await, 0);
}

async fn names_of(app: &TestApp, user: &nubo_tests::Session, path: &str) -> Vec<String> {
    let listing: Value =
        app.call(Method::GET, &format!("/directory{path}"), Some(&user.access), None).await.json().await.unwrap();
    listing["items"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap().to_owned()).collect()
}

async fn moving_a_folder_into_its_descendant_changes_nothing(app: TestApp) {
    let (user, root) = setup(&app).await;
    let a = app.mkdir(&user, &root, "a").await;
    let b = app.mkdir(&user, &a, "b").await;
    let c = app.mkdir(&user, &b, "c").await;
    for target in [&a, &b, &c] {
        let response = app
            .call(Method::PATCH, "/object", Some(&user.access), Some(json!({"src_ids": [a], "dst_id": target})))
            .await;
        assert_eq!(error_body(response, 409).await["code"], "object.move_cycle");
    }
    assert_eq!(names_of(&app, &user, "/a/b").await, vec!["c"]);
    // A legal move touches the folder only, and paths follow.
    let x = app.mkdir(&user, &root, "x").await;
    let moved =
        app.call(Method::PATCH, "/object", Some(&user.access), Some(json!({"src_ids": [b], "dst_id": x}))).await;
    assert_eq!(moved.status(), 204);
    let c_now: Value =
        app.call(Method::GET, &format!("/object/{c}"), Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(c_now["path"], "/x/b/c");
}

async fn a_batch_move_with_one_bad_id_changes_nothing(app: TestApp) {
    let (user, root) = setup(&app).await;
    let dst = app.mkdir(&user, &root, "dst").await;
    let one = app.mkdir(&user, &root, "one").await;
    let two = app.mkdir(&user, &root, "two").await;
    let body = json!({"src_ids": [one, uuid::Uuid::new_v4(), two], "dst_id": dst});
    let response = app.call(Method::PATCH, "/object", Some(&user.access), Some(body)).await;
    assert_eq!(response.status(), 404);
    assert!(names_of(&app, &user, "/dst").await.is_empty(), "nothing moved");
    // A name clash part-way also rolls everything back.
    app.mkdir(&user, &dst, "two").await;
    let body = json!({"src_ids": [one, two], "dst_id": dst});
    let response = app.call(Method::PATCH, "/object", Some(&user.access), Some(body)).await;
    assert_eq!(error_body(response, 409).await["code"], "object.name_taken");
    assert_eq!(names_of(&app, &user, "/dst").await, vec!["two"]);
    let root_names = names_of(&app, &user, "").await;
    assert!(root_names.contains(&"one".to_owned()) && root_names.contains(&"two".to_owned()));
}

async fn copies_share_blobs_and_count_against_the_quota(app: TestApp) {
    let admin = app.login_admin().await;
    let policy = app.use_small_chunks(&admin, 0).await;
    let user = app.register("jon@example.com", "jon-password").await;
    let root = app.root_id(&user).await;
    let folder = app.mkdir(&user, &root, "docs").await;
    let inner = app.mkdir(&user, &folder, "inner").await;
    let bytes = content(1000, 6);
    app.upload(&user, &inner, "f.txt", &bytes).await;
    let dst = app.mkdir(&user, &root, "backup").await;
    let response = app
        .call(Method::POST, "/object/copies", Some(&user.access), Some(json!({"src_ids": [folder], "dst_id": dst})))
        .await;
    assert_eq!(response.status(), 201);
    assert_eq!(blob_count(&app, &policy).await, 1, "no bytes copied");
    assert_eq!(app.storage_used(&user).await, 2000);
    let listing: Value =
        app.call(Method::GET, "/directory/backup/docs/inner", Some(&user.access), None).await.json().await.unwrap();
    let copy = &listing["items"][0];
    assert_eq!(app.download(&user, copy["id"].as_str().unwrap()).await, bytes);
    let cycle = app
        .call(Method::POST, "/object/copies", Some(&user.access), Some(json!({"src_ids": [folder], "dst_id": inner})))
        .await;
    assert_eq!(cycle.status(), 409);
    // Out of quota: the copy is refused as a whole.
    app.set_user_group(&admin, json!({"max_storage": 2500})).await;
    let user = app.refresh(&user).await;
    let full = app
        .call(Method::POST, "/object/copies", Some(&user.access), Some(json!({"src_ids": [folder], "dst_id": root})))
        .await;
    assert_eq!(error_body(full, 507).await["code"], "storage.quota_exceeded", "a copy beside itself too");
    assert!(!names_of(&app, &user, "").await.contains(&"docs (1)".to_owned()));
    let other = app.mkdir(&user, &root, "other").await;
    let full = app
        .call(Method::POST, "/object/copies", Some(&user.access), Some(json!({"src_ids": [folder], "dst_id": other})))
        .await;
    assert_eq!(error_body(full, 507).await["code"], "storage.quota_exceeded");
    assert!(names_of(&app, &user, "/other").await.is_empty());
}

async fn a_copy_beside_its_original_takes_the_next_free_name(app: TestApp) {
    let (user, root) = setup(&app).await;
    let copy = |ids: Vec<String>, dst: String| {
        let body = json!({"src_ids": ids, "dst_id": dst});
        let request = app.call(Method::POST, "/object/copies", Some(&user.access), Some(body));
        async move {
            let response = request.await;
            let status = response.status();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    let notes = app.upload(&user, &root, "notes.md", b"# notes").await["id"].as_str().unwrap().to_owned();
    let folder = app.mkdir(&user, &root, "drafts").await;
    app.upload(&user, &folder, "inside.txt", b"kept").await;
    let (status, copies) = copy(vec![notes.clone()], root.clone()).await;
    assert_eq!(status, 201);
    assert_eq!(copies[0]["name"], "notes (1).md");
    // Two at once, the folder with what it holds: each takes the next number free.
    let (status, copies) = copy(vec![notes.clone(), folder.clone()], root.clone()).await;
    assert_eq!(status, 201, "{copies}");
    assert_eq!((copies[0]["name"].as_str(), copies[1]["name"].as_str()), (Some("notes (2).md"), Some("drafts (1)")));
    assert_eq!(names_of(&app, &user, "/drafts (1)").await, vec!["inside.txt"]);
    // A number freed is taken again.
    let one = app.call(Method::GET, "/directory/notes%20(1).md", Some(&user.access), None).await;
    assert_eq!(one.status(), 409, "a file, not a folder: it exists");
    let listing: Value = app.call(Method::GET, "/directory", Some(&user.access), None).await.json().await.unwrap();
    let first =
        listing["items"].as_array().unwrap().iter().find(|o| o["name"] == "notes (1).md").unwrap()["id"].clone();
    let trashed = app.call(Method::DELETE, "/object", Some(&user.access), Some(json!({"ids": [first]}))).await;
    assert_eq!(trashed.status(), 204);
    let (_, copies) = copy(vec![notes.clone()], root.clone()).await;
    assert_eq!(copies[0]["name"], "notes (1).md");
    // Elsewhere a taken name is still refused.
    let other = app.mkdir(&user, &root, "other").await;
    assert_eq!(copy(vec![notes.clone()], other.clone()).await.0, 201);
    let (status, body) = copy(vec![notes], other).await;
    assert_eq!((status.as_u16(), body["code"].as_str()), (409, Some("object.name_taken")));
}

async fn storage(app: &TestApp, user: &nubo_tests::Session) -> Value {
    app.call(Method::GET, "/user/storage", Some(&user.access), None).await.json().await.unwrap()
}

async fn unfinished_uploads_are_listed_with_their_reservation_and_can_be_cancelled(app: TestApp) {
    let (user, root) = setup(&app).await;
    app.upload(&user, &root, "done.bin", &content(100, 1)).await;
    let started = app.start_upload(&user, &root, "half.bin", 5000).await;
    assert_eq!(started.status(), 201);
    let session: Value = started.json().await.unwrap();
    let figures = storage(&app, &user).await;
    assert_eq!((figures["used"].as_i64(), figures["reserved"].as_i64()), (Some(5100), Some(5000)));
    let pending: Value = app.call(Method::GET, "/file/upload", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(pending["count"], 1);
    let item = &pending["items"][0];
    assert_eq!((item["id"].as_str(), item["file_name"].as_str()), (session["id"].as_str(), Some("half.bin")));
    assert_eq!((item["file_size"].as_i64(), item["parent_id"].as_str()), (Some(5000), Some(root.as_str())));
    assert_eq!(item["status"], "uploading");
    let other = app.register("someone@example.com", "someone-password").await;
    let theirs: Value = app.call(Method::GET, "/file/upload", Some(&other.access), None).await.json().await.unwrap();
    assert_eq!(theirs["count"], 0, "each sees their own");

    let id = session["id"].as_str().unwrap();
    let cancelled = app.call(Method::DELETE, &format!("/file/upload/{id}"), Some(&user.access), None).await;
    assert_eq!(cancelled.status(), 204);
    let figures = storage(&app, &user).await;
    assert_eq!((figures["used"].as_i64(), figures["reserved"].as_i64()), (Some(100), Some(0)));
    let pending: Value = app.call(Method::GET, "/file/upload", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(pending["count"], 0);
}

async fn trash_restore_and_purge(app: TestApp) {
    let (user, root) = setup(&app).await;
    let folder = app.mkdir(&user, &root, "old").await;
    let file = app.upload(&user, &folder, "f.txt", b"hello").await;
    let file_id = file["id"].as_str().unwrap();
    let ids = |id: &str| json!({"ids": [id]});
    assert_eq!(app.call(Method::DELETE, "/object", Some(&user.access), Some(ids(&folder))).await.status(), 204);
    assert!(names_of(&app, &user, "").await.is_empty());
    let trash: Value = app.call(Method::GET, "/trash", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(trash["count"], 1);
    assert_eq!(trash["items"][0]["name"], "old");
    // Things inside a trashed folder are not downloadable.
    assert_eq!(
        app.call(Method::POST, &format!("/file/download/{file_id}"), Some(&user.access), None).await.status(),
        404
    );
    assert_eq!(app.storage_used(&user).await, 5, "trash still counts");
    // The name is free again while the old folder is in the trash; restoring then clashes.
    let newer = app.mkdir(&user, &root, "old").await;
    let clash = app.call(Method::PATCH, "/trash/restore", Some(&user.access), Some(ids(&folder))).await;
    assert_eq!(error_body(clash, 409).await["code"], "object.name_taken");
    app.call(Method::DELETE, "/object", Some(&user.access), Some(ids(&newer))).await;
    app.call(Method::DELETE, "/trash", Some(&user.access), Some(ids(&newer))).await;
    assert_eq!(app.call(Method::PATCH, "/trash/restore", Some(&user.access), Some(ids(&folder))).await.status(), 204);
    assert_eq!(names_of(&app, &user, "/old").await, vec!["f.txt"]);
    assert_eq!(app.download(&user, file_id).await, b"hello");
    // Purge only from the trash.
    let not_trashed = app.call(Method::DELETE, "/trash", Some(&user.access), Some(ids(&folder))).await;
    assert_eq!(error_body(not_trashed, 404).await["code"], "trash.not_found");
    app.call(Method::DELETE, "/object", Some(&user.access), Some(ids(&folder))).await;
    assert_eq!(app.call(Method::DELETE, "/trash", Some(&user.access), Some(ids(&folder))).await.status(), 204);
    assert_eq!(app.storage_used(&user).await, 0);
    assert_eq!(app.call(Method::GET, &format!("/object/{file_id}"), Some(&user.access), None).await.status(), 404);
}

async fn listing_puts_folders_first_sorts_and_pages(app: TestApp) {
    let (user, root) = setup(&app).await;
    app.upload(&user, &root, "b.txt", &[1; 30]).await;
    app.upload(&user, &root, "a.txt", &[1; 20]).await;
    app.mkdir(&user, &root, "zeta").await;
    app.mkdir(&user, &root, "alpha").await;
    assert_eq!(names_of(&app, &user, "").await, vec!["alpha", "zeta", "a.txt", "b.txt"]);
    assert_eq!(names_of(&app, &user, "/?order=size&desc=true").await, vec!["alpha", "zeta", "b.txt", "a.txt"]);
    let page: Value =
        app.call(Method::GET, "/directory?limit=2&offset=1", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(page["count"], 4);
    let names: Vec<&str> = page["items"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["zeta", "a.txt"]);
    assert_eq!(page["folder"]["path"], "/");
    let missing = app.call(Method::GET, "/directory/nope", Some(&user.access), None).await;
    assert_eq!(error_body(missing, 404).await["code"], "object.not_found");
    let file = app.call(Method::GET, "/directory/a.txt", Some(&user.access), None).await;
    assert_eq!(error_body(file, 409).await["code"], "object.not_a_folder");
}

async fn a_listing_is_gzipped_when_asked_and_its_errors_are_not(app: TestApp) {
    use reqwest::header::{ACCEPT_ENCODING, CONTENT_ENCODING};
    let (user, root) = setup(&app).await;
    for i in 0..30 {
        app.mkdir(&user, &root, &format!("folder-{i:02}")).await;
    }
    let get = |path: &str, encoding: &str| {
        app.request(Method::GET, path).bearer_auth(&user.access).header(ACCEPT_ENCODING, encoding).send()
    };
    let plain = get("/directory", "identity").await.unwrap();
    assert!(plain.headers().get(CONTENT_ENCODING).is_none());
    let length = plain.bytes().await.unwrap().len();
    assert!(length > 1024, "a listing of 30 folders is worth compressing ({length} bytes)");

    let gzipped = get("/directory", "gzip").await.unwrap();
    assert_eq!(gzipped.status(), 200);
    assert_eq!(gzipped.headers()[CONTENT_ENCODING], "gzip");
    assert!(gzipped.bytes().await.unwrap().len() < length / 3, "gzip makes the listing much smaller");

    let missing = get("/directory/nope", "gzip").await.unwrap();
    assert!(missing.headers().get(CONTENT_ENCODING).is_none(), "an error body is left as it is");
    assert_eq!(error_body(missing, 404).await["code"], "object.not_found");
}

async fn download_tokens_work_once_and_serve_ranges(app: TestApp, kind: PolicyKind) {
    let (user, root, policy) = setup_storage(&app, kind).await;
    let bytes = content(policy.chunk + 100, 7);
    let object = app.upload(&user, &root, "Résumé 2026.pdf", &bytes).await;
    let id = object["id"].as_str().unwrap();
    let len = bytes.len();

    let url = app.download_url(&user, id).await;
    let head = app.client.head(&url).send().await.unwrap();
    assert_eq!(head.status(), 200, "HEAD does not use the token up");
    assert_eq!(head.headers()["content-length"], len.to_string().as_str());
    let response = app.client.get(&url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "application/pdf");
    assert_eq!(
        headers["content-disposition"],
        "attachment; filename=\"R_sum_ 2026.pdf\"; filename*=UTF-8''R%C3%A9sum%C3%A9%202026.pdf"
    );
    assert_eq!(headers["etag"], format!("\"{}\"", blake3::hash(&bytes).to_hex()).as_str());
    assert!(headers.contains_key("last-modified"));
    assert_eq!(response.bytes().await.unwrap().to_vec(), bytes);
    let again = app.client.get(&url).send().await.unwrap();
    assert_eq!(error_body(again, 409).await["code"], "download.token_used");

    for (range, start, end) in [
        ("bytes=0-0", 0, 0),
        ("bytes=-1", len - 1, len - 1),
        (&format!("bytes={}-", len - 10) as &str, len - 10, len - 1),
        (&format!("bytes=100-{}", len + 500), 100, len - 1),
    ] {
        let url = app.download_url(&user, id).await;
        let response = app.client.get(url).header("range", range).send().await.unwrap();
        assert_eq!(response.status(), 206, "{range}");
        assert_eq!(response.headers()["content-range"], format!("bytes {start}-{end}/{len}").as_str(), "{range}");
        assert_eq!(response.bytes().await.unwrap().to_vec(), bytes[start..=end].to_vec(), "{range}");
    }
    let url = app.download_url(&user, id).await;
    let response = app.client.get(url).header("range", format!("bytes={len}-")).send().await.unwrap();
    assert_eq!(response.headers()["content-range"], format!("bytes */{len}").as_str());
    assert_eq!(error_body(response, 416).await["code"], "download.range_not_satisfiable");
    let url = app.download_url(&user, id).await;
    let etag = format!("\"{}\"", blake3::hash(&bytes).to_hex());
    let response = app.client.get(url).header("if-none-match", etag).send().await.unwrap();
    assert_eq!(response.status(), 304);
    let bad = app.client.get(format!("{}/api/v1/file/download/not-a-token", app.base_url)).send().await.unwrap();
    assert_eq!(error_body(bad, 401).await["code"], "auth.invalid_token");
}

async fn replace(app: &TestApp, user: &nubo_tests::Session, id: &str, body: Vec<u8>) -> reqwest::Response {
    app.request(Method::PATCH, &format!("/file/content?id={id}"))
        .bearer_auth(&user.access)
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn content_replacement_enforces_max_size_and_settles_quota(app: TestApp, kind: PolicyKind) {
    let admin = app.login_admin().await;
    app.keep_no_versions(&admin).await;
    let test_policy = app.use_test_policy(&admin, kind, 1000).await;
    let policy = test_policy.id.clone();
    let user = app.register("kai@example.com", "kai-password").await;
    let root = app.root_id(&user).await;
    let object = app.upload(&user, &root, "notes.txt", &[b'a'; 500]).await;
    let id = object["id"].as_str().unwrap();
    let too_big = replace(&app, &user, id, vec![b'b'; 1001]).await;
    assert_eq!(error_body(too_big, 413).await["code"], "file.too_large");
    assert_eq!(app.download(&user, id).await, vec![b'a'; 500], "nothing changed");
    assert_eq!(app.storage_used(&user).await, 500);

    let grown = replace(&app, &user, id, vec![b'c'; 800]).await;
    assert_eq!(grown.status(), 200);
    assert_eq!(grown.json::<Value>().await.unwrap()["size"], 800);
    assert_eq!(app.download(&user, id).await, vec![b'c'; 800]);
    assert_eq!(app.storage_used(&user).await, 800);
    // The old blob goes after the answer.
    assert_eq!(settled(1, || blob_count(&app, &policy)).await, 1, "the old blob was released");
    assert_eq!(settled(1, || async { test_policy.stored_blobs(&app) }).await, 1);

    app.set_user_group(&admin, json!({"max_storage": 900})).await;
    let user = app.refresh(&user).await;
    let over_both = replace(&app, &user, id, vec![b'd'; 1001]).await;
    assert_eq!(over_both.status(), 413, "max_size is checked first");
    app.set_user_group(&admin, json!({"max_storage": 850})).await;
    let user = app.refresh(&user).await;
    let over_quota = replace(&app, &user, id, vec![b'd'; 900]).await;
    assert_eq!(error_body(over_quota, 507).await["code"], "storage.quota_exceeded");
    // Without a declared length the quota is enforced while the bytes arrive.
    let stream = reqwest::Body::wrap_stream(futures_util::stream::iter(
        (0..9).map(|_| Ok::<_, std::io::Error>(vec![b'e'; 100])),
    ));
    let streamed = app
        .request(Method::PATCH, &format!("/file/content?id={id}"))
        .bearer_auth(&user.access)
        .body(stream)
        .send()
        .await
        .unwrap();
    assert_eq!(error_body(streamed, 507).await["code"], "storage.quota_exceeded");
    assert_eq!(app.storage_used(&user).await, 800, "nothing reserved is left behind");
    assert_eq!(app.download(&user, id).await, vec![b'c'; 800]);
    let shrunk = replace(&app, &user, id, b"short".to_vec()).await;
    assert_eq!(shrunk.status(), 200);
    assert_eq!(app.storage_used(&user).await, 5);
}

async fn source_links_serve_private_files_publicly(app: TestApp, kind: PolicyKind) {
    let (user, root, _policy) = setup_storage(&app, kind).await;
    let object = app.upload(&user, &root, "logo.png", b"png bytes").await;
    let id = object["id"].as_str().unwrap();
    let missing = app.call(Method::GET, &format!("/file/source/{id}"), Some(&user.access), None).await;
    assert_eq!(missing.status(), 404);
    let link: Value =
        app.call(Method::POST, &format!("/file/source/{id}"), Some(&user.access), None).await.json().await.unwrap();
    let url = link["url"].as_str().unwrap();
    assert_eq!(url, format!("/api/v1/file/source/{id}/logo%2Epng"));
    for _ in 0..2 {
        let response = app.client.get(format!("{}{url}", app.base_url)).send().await.unwrap();
        assert_eq!(response.status(), 200, "no token needed, works every time");
        assert_eq!(response.bytes().await.unwrap().as_ref(), b"png bytes");
    }
    let read: Value =
        app.call(Method::GET, &format!("/file/source/{id}"), Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(read["downloads"], 2, "counted in memory, shown at once");
    // The counts are written down in batches: once written they are not counted twice.
    let written = nubo_service::content::downloads::flush_source_downloads(app.context()).await.unwrap();
    assert_eq!(written, 1);
    let (stored,): (i64,) = sqlx::query_as("SELECT downloads FROM source_links WHERE object_id = $1")
        .bind(id)
        .fetch_one(app.context().db().reader())
        .await
        .unwrap();
    assert_eq!(stored, 2);
    let read: Value =
        app.call(Method::GET, &format!("/file/source/{id}"), Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(read["downloads"], 2);
    let wrong_name =
        app.client.get(format!("{}/api/v1/file/source/{id}/other.png", app.base_url)).send().await.unwrap();
    assert_eq!(wrong_name.status(), 404);
    let renamed =
        app.call(Method::PATCH, &format!("/object/{id}"), Some(&user.access), Some(json!({"name": "icon.png"}))).await;
    assert_eq!(renamed.status(), 200);
    let stale = app.client.get(format!("{}{url}", app.base_url)).send().await.unwrap();
    assert_eq!(stale.status(), 404, "the old name no longer serves the file");
    let renamed_url = format!("{}/api/v1/file/source/{id}/icon%2Epng", app.base_url);
    assert_eq!(app.client.get(&renamed_url).send().await.unwrap().status(), 200);
    app.call(Method::DELETE, "/object", Some(&user.access), Some(json!({"ids": [id]}))).await;
    let trashed = app.client.get(&renamed_url).send().await.unwrap();
    assert_eq!(trashed.status(), 404, "trashed files are not served");
}

async fn names_are_validated_and_storage_keys_stay_inside_the_root(app: TestApp) {
    let (user, root) = setup(&app).await;
    for bad in ["", ".", "..", "a/b", &"x".repeat(256), "\u{202e}gnp.exe", "a\nb", "  ", "..\\..\\evil.txt"] {
        let response = app.start_upload(&user, &root, bad, 1).await;
        assert_eq!(response.status(), 422, "{bad:?}");
        let response = app
            .call(Method::POST, "/directory", Some(&user.access), Some(json!({"parent_id": root, "name": bad})))
            .await;
        assert_eq!(response.status(), 422, "{bad:?}");
    }
    for (i, evil) in ["...", "..%5c..%5cevil.txt", "%2e%2e%2fetc", "名前.txt"].iter().enumerate() {
        let object = app.upload(&user, &root, evil, &[i as u8; 10]).await;
        assert_eq!(object["name"], *evil);
        assert_eq!(app.download(&user, object["id"].as_str().unwrap()).await, vec![i as u8; 10]);
    }
    let policy_root = std::fs::canonicalize(app.config.data_dir.join("small")).unwrap();
    let all = files_under(&app.config.data_dir);
    assert!(!all.is_empty());
    for path in all {
        let path = std::fs::canonicalize(path).unwrap();
        assert!(
            path.starts_with(&policy_root)
                || path.extension().is_some_and(|e| e == "db" || e == "db-wal" || e == "db-shm"),
            "{path:?} outside the root"
        );
    }
}

async fn other_users_ids_answer_404_everywhere(app: TestApp) {
    let (owner, root) = setup(&app).await;
    let folder = app.mkdir(&owner, &root, "private").await;
    let file = app.upload(&owner, &folder, "secret.txt", b"mine").await;
    let file = file["id"].as_str().unwrap().to_owned();
    let session: Value = app.start_upload(&owner, &folder, "pending.bin", 10).await.json().await.unwrap();
    let session = session["id"].as_str().unwrap().to_owned();
    let binned = app.upload(&owner, &folder, "binned.txt", b"old").await["id"].as_str().unwrap().to_owned();
    let trashed = app.call(Method::DELETE, "/object", Some(&owner.access), Some(json!({"ids": [binned]}))).await;
    assert_eq!(trashed.status(), 204);
    let intruder = app.register("mallory@example.com", "mallory-password").await;
    let their_root = app.root_id(&intruder).await;
    let theirs = app.upload(&intruder, &their_root, "theirs.txt", b"x").await["id"].as_str().unwrap().to_owned();
    let token = Some(intruder.access.as_str());
    for (method, path, body) in [
        (Method::GET, format!("/object/{file}"), None),
        (Method::PATCH, format!("/object/{file}"), Some(json!({"name": "x"}))),
        (Method::GET, format!("/object/{file}/detail"), None),
        (Method::PATCH, "/object".to_owned(), Some(json!({"src_ids": [file], "dst_id": their_root}))),
        (Method::PATCH, "/object".to_owned(), Some(json!({"src_ids": [], "dst_id": folder}))),
        (Method::POST, "/object/copies".to_owned(), Some(json!({"src_ids": [file], "dst_id": their_root}))),
        (Method::DELETE, "/object".to_owned(), Some(json!({"ids": [file]}))),
        (Method::POST, "/directory".to_owned(), Some(json!({"parent_id": folder, "name": "x"}))),
        (Method::POST, format!("/file/download/{file}"), None),
        (Method::POST, format!("/file/source/{file}"), None),
        (Method::GET, format!("/file/source/{file}"), None),
        (Method::GET, format!("/file/upload/{session}"), None),
        (Method::PUT, format!("/file/upload/{session}/0"), None),
        (Method::DELETE, format!("/file/upload/{session}"), None),
        (Method::POST, "/file/upload".to_owned(), Some(json!({"file_name": "x", "file_size": 1, "parent_id": folder}))),
        (Method::PATCH, format!("/file/content?id={file}"), None),
        (Method::PATCH, format!("/object/{file}/policy"), Some(json!({"policy_id": uuid::Uuid::new_v4()}))),
        (Method::GET, format!("/object/{file}/metadata"), None),
        (Method::PATCH, format!("/object/{file}/metadata"), Some(json!({"changes": []}))),
        (Method::PATCH, "/object".to_owned(), Some(json!({"src_ids": [theirs], "dst_id": folder}))),
        (Method::POST, "/object/copies".to_owned(), Some(json!({"src_ids": [theirs], "dst_id": folder}))),
        (Method::PATCH, "/trash/restore".to_owned(), Some(json!({"ids": [binned]}))),
        (Method::DELETE, "/trash".to_owned(), Some(json!({"ids": [binned]}))),
    ] {
        let response = app.call(method.clone(), &path, token, body.clone()).await;
        if body.as_ref().is_some_and(|b| b["src_ids"] == json!([])) {
            assert_eq!(response.status(), 422, "{method} {path}");
            continue;
        }
        // Indistinguishable from a missing object: the code an id nobody holds gets.
        let expected = if path.starts_with("/file/upload/") { "upload.not_found" } else { "object.not_found" };
        assert_eq!(error_body(response, 404).await["code"], expected, "{method} {path}");
    }
    assert_eq!(app.download(&owner, &file).await, b"mine", "nothing happened to it");
    let bin: Value = app.call(Method::GET, "/trash", Some(&owner.access), None).await.json().await.unwrap();
    assert_eq!(bin["items"][0]["id"], binned.as_str(), "still in the owner's trash");
}

async fn policy_permission_is_checked(app: TestApp) {
    let admin = app.login_admin().await;
    let allowed = app.use_small_chunks(&admin, 0).await;
    let other = json!({"name": "admins only", "type": "local", "options": {"root": "admins"}});
    let response = app.call(Method::POST, "/admin/policy", Some(&admin.access), Some(other)).await;
    let forbidden = response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let user = app.register("lena@example.com", "lena-password").await;
    let root = app.root_id(&user).await;
    let mine: Value =
        app.call(Method::GET, "/user/settings/policies", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(mine.as_array().unwrap().len(), 1);
    assert_eq!(mine[0]["id"], allowed.as_str());
    let body = json!({"file_name": "f", "file_size": 1, "parent_id": root, "policy_id": forbidden});
    let response = app.call(Method::POST, "/file/upload", Some(&user.access), Some(body)).await;
    assert_eq!(error_body(response, 403).await["code"], "policy.not_allowed");
    assert_eq!(app.storage_used(&user).await, 0);
    let file = app.upload(&user, &root, "f.txt", b"x").await;
    let path = format!("/object/{}/policy", file["id"].as_str().unwrap());
    let response = app.call(Method::PATCH, &path, Some(&user.access), Some(json!({"policy_id": forbidden}))).await;
    assert_eq!(error_body(response, 403).await["code"], "policy.not_allowed");
    let response = app.call(Method::PATCH, &path, Some(&user.access), Some(json!({"policy_id": allowed}))).await;
    assert_eq!(response.status(), 202);
    let task: Value = response.json().await.unwrap();
    assert_eq!(task["type"], "POLICY_MIGRATE");
    assert_eq!(task["props"]["target_policy_id"], allowed.as_str());
}

/// `durable` (default true) is a local policy option; a store without fsync still works.
async fn a_local_policy_may_skip_fsync(app: TestApp) {
    let admin = app.login_admin().await;
    for (options, durable) in [(json!({"root": "synced"}), true), (json!({"root": "fast", "durable": false}), false)] {
        let body = json!({"name": format!("local {durable}"), "type": "local", "options": options});
        let created: Value =
            app.call(Method::POST, "/admin/policy", Some(&admin.access), Some(body)).await.json().await.unwrap();
        assert_eq!(created["options"]["durable"], durable, "{created}");
        let test = format!("/admin/policy/{}/test", created["id"].as_str().unwrap());
        assert_eq!(app.call(Method::POST, &test, Some(&admin.access), None).await.status(), 204, "a probe write works");
    }
    let wrong = json!({"name": "odd", "type": "local", "options": {"durable": "sometimes"}});
    let response = app.call(Method::POST, "/admin/policy", Some(&admin.access), Some(wrong)).await;
    assert_eq!(response.status(), 422);
}

on_every_backend!(
    metadata_has_namespaces_and_typed_custom_properties,
    calibrate_repairs_storage_drift,
    deleting_a_user_releases_their_blobs
);

async fn metadata_has_namespaces_and_typed_custom_properties(app: TestApp) {
    let (user, root) = setup(&app).await;
    let object = app.upload(&user, &root, "photo.jpg", b"jpeg").await;
    let path = format!("/object/{}/metadata", object["id"].as_str().unwrap());
    let patch = |changes: Value| app.call(Method::PATCH, &path, Some(&user.access), Some(json!({"changes": changes})));
    let set = patch(json!([{"namespace": "user", "name": "camera", "value": "X100"}])).await;
    assert_eq!(set.status(), 200);
    let sys = patch(json!([{"namespace": "sys", "name": "blake3", "value": "forged"}])).await;
    assert_eq!(error_body(sys, 403).await["code"], "metadata.read_only");
    let undefined = patch(json!([{"namespace": "props", "name": "rating", "value": "5"}])).await;
    assert_eq!(error_body(undefined, 422).await["field"], "name");

    let definition =
        json!({"name": "rating", "type": "select", "options": {"choices": ["1", "2", "3"]}, "default": "2"});
    let created = app.call(Method::POST, "/object/custom_property", Some(&user.access), Some(definition.clone())).await;
    assert_eq!(created.status(), 201);
    let duplicate = app.call(Method::POST, "/object/custom_property", Some(&user.access), Some(definition)).await;
    assert_eq!(error_body(duplicate, 409).await["code"], "property.name_taken");
    let bad_default = json!({"name": "when", "type": "date", "default": "yesterday"});
    let response = app.call(Method::POST, "/object/custom_property", Some(&user.access), Some(bad_default)).await;
    assert_eq!(error_body(response, 422).await["field"], "default");

    let wrong = patch(json!([{"namespace": "user", "name": "ok", "value": "1"}, {"namespace": "props", "name": "rating", "value": "9"}])).await;
    assert_eq!(error_body(wrong, 422).await["field"], "value");
    let entries: Value = app.call(Method::GET, &path, Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(entries.as_array().unwrap().len(), 1, "the refused batch changed nothing: {entries}");
    let right = patch(json!([{"namespace": "props", "name": "rating", "value": "3"}, {"namespace": "user", "name": "camera", "value": null}])).await;
    let entries: Value = right.json().await.unwrap();
    assert_eq!(entries, json!([{"namespace": "props", "name": "rating", "value": "3"}]));
    let list: Value =
        app.call(Method::GET, "/object/custom_property", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(list[0]["type"], "select");
}

async fn calibrate_repairs_storage_drift(app: TestApp) {
    let (user, root) = setup(&app).await;
    app.upload(&user, &root, "a.bin", &[1; 300]).await;
    app.start_upload(&user, &root, "pending.bin", 700).await;
    let user_id = user.user_id.clone();
    nubo_model::db::users::set_storage(app.context().db(), user_id.parse().unwrap(), 123_456).await.unwrap();
    assert_eq!(app.storage_used(&user).await, 123_456);
    let admin = app.login_admin().await;
    let response = app.call(Method::POST, &format!("/admin/user/{user_id}/calibrate"), Some(&admin.access), None).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap()["storage"], 1000);
}

async fn deleting_a_user_releases_their_blobs(app: TestApp) {
    let admin = app.login_admin().await;
    let policy = app.use_small_chunks(&admin, 0).await;
    let user = app.register("nina@example.com", "nina-password").await;
    let root = app.root_id(&user).await;
    let folder = app.mkdir(&user, &root, "stuff").await;
    app.upload(&user, &folder, "a.bin", &content(2 * SMALL_CHUNK, 9)).await;
    app.upload(&user, &root, "b.bin", b"bee").await;
    assert_eq!(blob_count(&app, &policy).await, 2);
    let response = app.call(Method::DELETE, &format!("/admin/user/{}", user.user_id), Some(&admin.access), None).await;
    assert_eq!(response.status(), 204);
    assert_eq!(blob_count(&app, &policy).await, 0);
    let left = files_under(&app.config.data_dir.join("small"))
        .into_iter()
        .filter(|p| !p.to_string_lossy().contains(".staging"))
        .count();
    assert_eq!(left, 0, "their bytes are gone");
}

on_every_backend!(public_s3_policies_redirect_downloads_to_presigned_urls);

async fn public_s3_policies_redirect_downloads_to_presigned_urls(app: TestApp) {
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, PolicyKind::S3, 0).await;
    let server = policy.s3.as_ref().unwrap();
    let public = json!({"name": "s3", "type": "s3", "is_private": false, "chunk_size": policy.chunk,
        "options": {"endpoint": server.endpoint, "region": server.region, "bucket": server.bucket, "path_style": true,
                    "access_key": server.access_key, "secret_key": ""}});
    let response =
        app.call(Method::PUT, &format!("/admin/policy/{}", policy.id), Some(&admin.access), Some(public)).await;
    assert_eq!(response.status(), 200, "a blank secret keeps the stored one");
    let shown: Value = response.json().await.unwrap();
    assert_eq!(shown["options"]["has_secret_key"], true);
    assert!(shown["options"].get("secret_key").is_none(), "secrets are never returned");

    let user = app.register("otto@example.com", "otto-password").await;
    let root = app.root_id(&user).await;
    let object = app.upload(&user, &root, "ünïcode.txt", b"served by S3").await;
    let id = object["id"].as_str().unwrap();
    let response = app.client.get(app.download_url(&user, id).await).send().await.unwrap();
    assert_eq!(response.status(), 302);
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.starts_with(&server.endpoint), "{location}");
    let direct = app.client.get(&location).send().await.unwrap();
    assert_eq!(direct.status(), 200);
    assert_eq!(
        direct.headers()["content-disposition"],
        "attachment; filename=\"_n_code.txt\"; filename*=UTF-8''%C3%BCn%C3%AFcode.txt"
    );
    assert_eq!(direct.bytes().await.unwrap().as_ref(), b"served by S3");

    let link: Value =
        app.call(Method::POST, &format!("/file/source/{id}"), Some(&user.access), None).await.json().await.unwrap();
    let response = app.client.get(format!("{}{}", app.base_url, link["url"].as_str().unwrap())).send().await.unwrap();
    assert_eq!(response.status(), 302, "public source links redirect");
    let test = app.call(Method::POST, &format!("/admin/policy/{}/test", policy.id), Some(&admin.access), None).await;
    assert_eq!(test.status(), 204, "connection test passes");
}

on_every_backend!(a_download_token_works_once_across_masters, active_storage_packs_add_to_the_capacity);

async fn a_download_token_works_once_across_masters(app: TestApp) {
    let (user, root) = setup(&app).await;
    let object = app.upload(&user, &root, "shared.txt", b"one use").await;
    let url = app.download_url(&user, object["id"].as_str().unwrap()).await;
    let peer = app.spawn_peer().await;
    let on_peer = url.replace(&app.base_url, &format!("http://{}", peer.addr));
    assert_eq!(app.client.get(&on_peer).send().await.unwrap().status(), 200, "first use, on the second master");
    let again = app.client.get(&url).send().await.unwrap();
    // SQLite runs with the in-memory store: single-master by design, its masters do not share
    // it. PostgreSQL runs with Redis, which both masters share.
    if app.backend == nubo_tests::Backend::Postgres {
        assert_eq!(error_body(again, 409).await["code"], "download.token_used");
    }
    peer.shutdown(std::time::Duration::from_secs(5)).await.unwrap();
}

async fn active_storage_packs_add_to_the_capacity(app: TestApp) {
    let admin = app.login_admin().await;
    app.use_small_chunks(&admin, 0).await;
    app.set_user_group(&admin, json!({"max_storage": 1000})).await;
    let user = app.register("pete@example.com", "pete-password").await;
    let root = app.root_id(&user).await;
    assert_eq!(app.start_upload(&user, &root, "big.bin", 1500).await.status(), 507);
    let now = nubo_model::domain::time::now_ms();
    for (size, from, until) in [
        (1000_i64, now - 1000, now + 3_600_000),
        (5000, now - 7_200_000, now - 3_600_000),
        (5000, now + 3_600_000, now + 7_200_000),
    ] {
        sqlx::query("INSERT INTO storage_packs (id, user_id, name, size, starts_at, expires_at, created_at) VALUES ($1, $2, 'pack', $3, $4, $5, $4)")
            .bind(uuid::Uuid::new_v4().to_string())
            .bind(&user.user_id)
            .bind(size)
            .bind(from)
            .bind(until)
            .execute(app.context().db().writer())
            .await
            .unwrap();
    }
    // Only the active pack counts: 1000 + 1000.
    assert_eq!(app.start_upload(&user, &root, "big.bin", 1500).await.status(), 201);
    assert_eq!(app.start_upload(&user, &root, "more.bin", 501).await.status(), 507);
}

nubo_tests::on_every_backend_and_storage!(a_finish_left_by_a_dead_master_is_taken_over_once_its_lease_ran_out);
on_every_backend!(a_huge_declared_size_is_refused_before_anything_is_staged);

/// Opens an upload session; answers its id.
async fn open_upload(app: &TestApp, user: &nubo_tests::Session, root: &str, name: &str, len: usize) -> String {
    let response = app.start_upload(user, root, name, len).await;
    assert_eq!(response.status(), 201, "upload session for {name}");
    response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned()
}

/// Stores and records every chunk of upload `id`, as the master does before it claims the
/// session to finish it, without finishing; `complete_blob` also completes the blob, as a
/// master that died just after doing so leaves it.
async fn stage_without_finishing(
    app: &TestApp,
    user: &nubo_tests::Session,
    id: &str,
    bytes: &[u8],
    complete_blob: bool,
) {
    use nubo_model::db::uploads::{self, ChunkRow};
    let db = app.context().db();
    let session = uploads::find_owned(db, user.user_id.parse().unwrap(), id.parse().unwrap())
        .await
        .unwrap()
        .expect("the session");
    let staged: nubo_common::storage::StagedUpload = serde_json::from_str(&session.driver_state).unwrap();
    let policy = nubo_service::storage::policies::find(app.context(), session.policy_id).await.unwrap();
    let store = nubo_service::storage::policies::store(app.context(), &policy).await.unwrap();
    let mut receipts = Vec::new();
    for (index, piece) in bytes.chunks(session.chunk_size as usize).enumerate() {
        let body: nubo_common::storage::ByteStream =
            Box::pin(futures_util::stream::iter([Ok(bytes::Bytes::copy_from_slice(piece))]));
        let receipt = store.put_chunk(&staged, index as u32, body).await.unwrap();
        let row = ChunkRow {
            chunk_index: index as i32,
            size: receipt.size as i64,
            etag: receipt.etag.clone(),
            chaining_value: receipt.chaining_value.clone(),
        };
        uploads::upsert_chunk(db, session.id, &row, nubo_model::domain::time::now_ms()).await.unwrap();
        receipts.push(receipt);
    }
    if complete_blob {
        store.complete_upload(&staged, &receipts).await.unwrap();
    }
}

async fn a_finish_left_by_a_dead_master_is_taken_over_once_its_lease_ran_out(app: TestApp, kind: PolicyKind) {
    use nubo_service::content::uploads::recover_stale_claims;
    let (user, root, policy) = setup_storage(&app, kind).await;
    let now = nubo_model::domain::time::now_ms;
    let dead = app.stale_claim_age();

    // Every chunk is in and another master is finishing: nobody else may finish or cancel.
    let first = content(1000, 1);
    let id = open_upload(&app, &user, &root, "first.bin", first.len()).await;
    stage_without_finishing(&app, &user, &id, &first, false).await;
    app.claim_upload_as_other_master(&id, 0).await;
    let retried = app.put_chunk(&user, &id, 0, first.clone()).await;
    assert_eq!(error_body(retried, 409).await["code"], "upload.not_open");
    let completed = app.call(Method::POST, &format!("/file/upload/{id}/complete"), Some(&user.access), None).await;
    assert_eq!(error_body(completed, 409).await["code"], "upload.not_open");
    let cancelled = app.call(Method::DELETE, &format!("/file/upload/{id}"), Some(&user.access), None).await;
    assert_eq!(error_body(cancelled, 409).await["code"], "upload.not_open");
    assert_eq!(recover_stale_claims(app.context(), now()).await.unwrap(), 0, "a live claim is left alone");
    assert_eq!(app.storage_used(&user).await, 1000, "still reserved");

    // That master died: once its lease ran out, the client's retry of the last chunk finishes.
    app.claim_upload_as_other_master(&id, dead).await;
    let done = app.put_chunk(&user, &id, 0, first.clone()).await;
    assert_eq!(done.status(), 200);
    let object = done.json::<Value>().await.unwrap()["object"].clone();
    assert_eq!(object["name"], "first.bin", "{object}");
    assert_eq!(app.download(&user, object["id"].as_str().unwrap()).await, first);
    assert_eq!(app.storage_used(&user).await, 1000, "charged once");
    let gone = app.call(Method::GET, &format!("/file/upload/{id}"), Some(&user.access), None).await;
    assert_eq!(error_body(gone, 404).await["code"], "upload.not_found");

    // It died after completing the blob: an explicit completion records that blob.
    let second = content(2000, 2);
    let id = open_upload(&app, &user, &root, "second.bin", second.len()).await;
    stage_without_finishing(&app, &user, &id, &second, true).await;
    app.claim_upload_as_other_master(&id, dead).await;
    let done = app.call(Method::POST, &format!("/file/upload/{id}/complete"), Some(&user.access), None).await;
    assert_eq!(done.status(), 200);
    let object = done.json::<Value>().await.unwrap()["object"].clone();
    assert_eq!(app.download(&user, object["id"].as_str().unwrap()).await, second);
    assert_eq!(app.storage_used(&user).await, 3000);

    // Nobody comes back for it: the reaper's recovery finishes it.
    let third = content(3000, 3);
    let id = open_upload(&app, &user, &root, "third.bin", third.len()).await;
    stage_without_finishing(&app, &user, &id, &third, false).await;
    app.claim_upload_as_other_master(&id, dead).await;
    assert_eq!(recover_stale_claims(app.context(), now()).await.unwrap(), 1);
    assert_eq!(names_of(&app, &user, "").await, ["first.bin", "second.bin", "third.bin"]);
    assert_eq!(app.storage_used(&user).await, 6000);

    // The client cancels instead: everything goes, the completed blob too.
    let fourth = content(4000, 4);
    let id = open_upload(&app, &user, &root, "fourth.bin", fourth.len()).await;
    stage_without_finishing(&app, &user, &id, &fourth, true).await;
    app.claim_upload_as_other_master(&id, dead).await;
    let cancelled = app.call(Method::DELETE, &format!("/file/upload/{id}"), Some(&user.access), None).await;
    assert_eq!(cancelled.status(), 204);
    assert_eq!(app.storage_used(&user).await, 6000);
    assert_eq!(blob_count(&app, &policy.id).await, 3);
    assert_eq!(policy.stored_blobs(&app), 3, "one blob per file, nothing staged or left over");
}

async fn a_huge_declared_size_is_refused_before_anything_is_staged(app: TestApp) {
    const TIB: usize = 1 << 40;
    let admin = app.login_admin().await;
    app.use_small_chunks(&admin, 0).await;
    let user = app.register("ines@example.com", "ines-password").await;
    let root = app.root_id(&user).await;
    for size in [16 * TIB, 300 * TIB] {
        let response = app.start_upload(&user, &root, "huge.bin", size).await;
        assert_eq!(error_body(response, 507).await["code"], "storage.quota_exceeded", "{size} bytes");
    }
    // A quota that could take it, but 300 TiB are more 64 KiB chunks than an upload may have.
    app.set_user_group(&admin, json!({"max_storage": 1000 * TIB})).await;
    let user = app.refresh(&user).await;
    let response = app.start_upload(&user, &root, "huge.bin", 300 * TIB).await;
    assert_eq!(error_body(response, 413).await["code"], "file.too_large");
    assert_eq!(app.storage_used(&user).await, 0, "nothing reserved");
    let reserved =
        nubo_model::db::uploads::reserved_bytes(app.context().db(), user.user_id.parse().unwrap()).await.unwrap();
    assert_eq!(reserved, 0, "no session");
    assert!(files_under(&app.config.data_dir.join("small")).is_empty(), "nothing staged");
}
