//! The one ingest path: a commit that fails (here on a name taken while the bytes arrived)
//! leaves no bytes, no reservation and no session behind, on local disk, on S3 and on a
//! storage node.

use nubo_tests::cluster::TestNode;
use nubo_tests::files::{PolicyKind, content, files_below};
use nubo_tests::{Session, TestApp, error_body};
use reqwest::Method;
use serde_json::Value;

nubo_tests::on_every_backend_and_storage!(a_failed_commit_of_an_upload_leaves_no_bytes_and_no_reservation);
nubo_tests::on_every_backend!(a_failed_commit_of_a_direct_upload_leaves_nothing_on_the_node);

/// The names in the caller's root folder.
async fn root_names(app: &TestApp, user: &Session) -> Vec<String> {
    let listing: Value = app.call(Method::GET, "/directory", Some(&user.access), None).await.json().await.unwrap();
    listing["items"].as_array().unwrap().iter().map(|item| item["name"].as_str().unwrap().to_owned()).collect()
}

async fn session_status(app: &TestApp, user: &Session, id: &str) -> u16 {
    app.call(Method::GET, &format!("/file/upload/{id}"), Some(&user.access), None).await.status().as_u16()
}

async fn a_failed_commit_of_an_upload_leaves_no_bytes_and_no_reservation(app: TestApp, kind: PolicyKind) {
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, kind, 0).await;
    let user = app.register("ingrid@example.com", "ingrid-password").await;
    let root = app.root_id(&user).await;
    let bytes = content(2 * policy.chunk + 5, 9);
    let started: Value = app.start_upload(&user, &root, "report.bin", bytes.len()).await.json().await.unwrap();
    let id = started["id"].as_str().unwrap();
    assert_eq!(app.storage_used(&user).await, bytes.len() as i64, "the session reserves the declared size");
    let pieces: Vec<&[u8]> = bytes.chunks(policy.chunk).collect();
    for (index, piece) in pieces.iter().enumerate().take(2) {
        assert_eq!(app.put_chunk(&user, id, index, piece.to_vec()).await.status(), 200);
    }

    // The name is taken while the bytes arrive: the commit of the last chunk fails on it.
    app.mkdir(&user, &root, "report.bin").await;
    let last = app.put_chunk(&user, id, 2, pieces[2].to_vec()).await;
    assert_eq!(error_body(last, 409).await["code"], "object.name_taken");

    assert_eq!(app.storage_used(&user).await, 0, "the reservation was given back");
    assert_eq!(policy.stored_blobs(&app), 0, "the completed bytes were removed");
    assert_eq!(session_status(&app, &user, id).await, 404, "the session ended");
    assert_eq!(root_names(&app, &user).await, ["report.bin"], "only the folder is there");
    let blob_rows: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM physical_files WHERE policy_id = $1")
        .bind(&policy.id)
        .fetch_one(app.context().db().reader())
        .await
        .unwrap();
    assert_eq!(blob_rows.0, 0, "no blob row was left");

    // The same content under a free name goes through: nothing of the failure is in the way.
    let object = app.upload(&user, &root, "report (2).bin", &bytes).await;
    assert_eq!(app.download(&user, object["id"].as_str().unwrap()).await, bytes);
    assert_eq!(app.storage_used(&user).await, bytes.len() as i64);
}

async fn a_failed_commit_of_a_direct_upload_leaves_nothing_on_the_node(app: TestApp) {
    let admin = app.login_admin().await;
    let node = TestNode::start(&app, &admin, false).await;
    app.use_node_policy(&admin, &node, true).await;
    let user = app.register("ingrid@example.com", "ingrid-password").await;
    let root = app.root_id(&user).await;
    let chunk = 64 * 1024;
    let bytes = content(2 * chunk + 5, 10);
    let response = app.start_upload(&user, &root, "report.bin", bytes.len()).await;
    let state: Value = response.json().await.unwrap();
    let pieces: Vec<&[u8]> = bytes.chunks(chunk).collect();
    for (index, piece) in pieces.iter().enumerate().take(2) {
        assert_eq!(app.put_direct(&state, index, piece.to_vec()).await.status(), 200);
    }

    app.mkdir(&user, &root, "report.bin").await;
    let last = app.put_direct(&state, 2, pieces[2].to_vec()).await;
    assert_eq!(last.status(), 409, "the node relays the master's refusal");
    assert_eq!(last.json::<Value>().await.unwrap()["code"], "object.name_taken");

    assert_eq!(app.storage_used(&user).await, 0, "the reservation was given back");
    assert!(node.blobs().is_empty(), "the node still holds {:?}", node.blobs());
    assert!(files_below(&node.dir.path().join("blobs")).is_empty(), "staged bytes were left on the node");
    assert_eq!(session_status(&app, &user, state["id"].as_str().unwrap()).await, 404, "the session ended");
    assert_eq!(root_names(&app, &user).await, ["report.bin"]);
}
