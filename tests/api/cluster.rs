//! A master with two real storage nodes (`nubo-slave` servers on their own ports): uploads sent
//! straight to a node, resumed and de-duplicated; downloads streamed by the master or
//! redirected to the node; deletion and migration reaching the node; external downloads with
//! the node's address guard; the master's protocol refusals; nodes and the master going down.

use std::time::Duration;

use nubo_protocol::methods::{BlobStatParams, Call, PingParams};
use nubo_protocol::rpc::Request;
use nubo_protocol::signing::{RequestParts, Signer};
use nubo_protocol::{PROTOCOL_VERSION, Role, unix_now};
use nubo_tests::cluster::{NODE_KEY, TestNode, TestOrigin};
use nubo_tests::files::content;
use nubo_tests::{Session, TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    direct_uploads_land_on_their_node_and_download_through_the_master_or_by_redirect,
    a_direct_upload_resumes_and_identical_content_is_stored_once_per_node,
    deleting_the_last_reference_deletes_the_blob_on_the_node,
    files_migrate_onto_a_node_and_back,
    an_external_download_creates_the_file_only_where_the_node_may_reach_the_url,
    the_router_refuses_bad_signatures_stale_and_replayed_calls_and_unknown_methods,
    a_node_that_is_down_answers_503_and_a_restarted_node_resumes_the_upload,
    a_report_sent_while_the_master_was_down_creates_the_file_exactly_once,
    a_quota_shrunk_during_a_direct_upload_reaches_the_client_as_507,
    a_size_limit_lowered_during_a_direct_upload_reaches_the_client_as_413,
    a_policy_taken_from_the_group_during_a_direct_upload_reaches_the_client_as_403,
);

const SIZE: usize = 3 * 64 * 1024 + 1000;

async fn user_of(app: &TestApp) -> Session {
    app.register("nora@example.com", "nora-password").await
}

/// Names in the caller's root folder.
async fn file_names(app: &TestApp, user: &Session) -> Vec<String> {
    let listing: Value = app.call(Method::GET, "/directory", Some(&user.access), None).await.json().await.unwrap();
    listing["items"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap().to_owned()).collect()
}

async fn direct_uploads_land_on_their_node_and_download_through_the_master_or_by_redirect(app: TestApp) {
    let admin = app.login_admin().await;
    let node_a = TestNode::start(&app, &admin, false).await;
    let node_b = TestNode::start(&app, &admin, false).await;
    let private_a = app.use_node_policy(&admin, &node_a, true).await;
    let public_b = app.use_node_policy(&admin, &node_b, false).await;
    app.set_user_group(&admin, json!({"policy_ids": [private_a, public_b]})).await;
    let user = user_of(&app).await;
    let root = app.root_id(&user).await;
    let bytes = content(SIZE, 7);

    let (state, last) = app.upload_direct(&user, &root, "a.bin", &bytes).await;
    assert!(state["direct"]["url"].as_str().unwrap().starts_with(&node_a.url), "the chunks go to node A: {state}");
    // The web app's page is another origin: the node's preflight and answers let it call.
    let chunk_url = format!("{}/0", state["direct"]["url"].as_str().unwrap());
    let preflight = app
        .client
        .request(Method::OPTIONS, &chunk_url)
        .header("origin", "http://drive.example")
        .header("access-control-request-method", "PUT")
        .header("access-control-request-headers", "authorization")
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success(), "preflight answered {}", preflight.status());
    assert_eq!(preflight.headers()["access-control-allow-origin"], "*");
    assert!(preflight.headers()["access-control-allow-headers"].to_str().unwrap().contains("authorization"));
    assert!(preflight.headers()["access-control-allow-methods"].to_str().unwrap().contains("PUT"));
    assert_eq!(last.status(), 200);
    let done: Value = last.json().await.unwrap();
    assert_eq!(done["completed"], true, "{done}");
    let object = done["object"]["id"].as_str().unwrap().to_owned();
    assert_eq!(node_a.blobs().len(), 1, "the bytes are on node A");
    assert!(node_b.blobs().is_empty());
    assert!(
        nubo_tests::files::files_below(&app.config.data_dir).iter().all(|p| !p.to_string_lossy().contains("a.bin"))
    );
    // Chunks may not go through the master for such a session.
    let session = app.start_upload(&user, &root, "b.bin", 10).await.json::<Value>().await.unwrap();
    let refused = app.put_chunk(&user, session["id"].as_str().expect("a session"), 0, vec![0; 10]).await;
    assert_eq!(error_body(refused, 409).await["code"], "upload.direct_only");

    // Private policy: the master streams the bytes, Range included.
    assert_eq!(app.download(&user, &object).await, bytes);
    let url = app.download_url(&user, &object).await;
    let ranged = app.client.get(&url).header("range", "bytes=10-19").send().await.unwrap();
    assert_eq!(ranged.status(), 206);
    assert_eq!(ranged.bytes().await.unwrap().as_ref(), &bytes[10..20]);

    // Public policy on node B: a redirect to a signed node URL.
    let body = json!({"file_name": "pub.bin", "file_size": bytes.len(), "parent_id": root, "policy_id": public_b});
    let state: Value =
        app.call(Method::POST, "/file/upload", Some(&user.access), Some(body)).await.json().await.unwrap();
    assert!(state["direct"]["url"].as_str().unwrap().starts_with(&node_b.url));
    let mut last = None;
    for (index, piece) in bytes.chunks(64 * 1024).enumerate() {
        last = Some(app.put_direct(&state, index, piece.to_vec()).await);
    }
    let done: Value = last.unwrap().json().await.unwrap();
    let public_object = done["object"]["id"].as_str().unwrap().to_owned();
    let url = app.download_url(&user, &public_object).await;
    let redirect = app.client.get(&url).send().await.unwrap();
    assert_eq!(redirect.status(), 302);
    let location = redirect.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.starts_with(&format!("{}/api/v1/slave/download/", node_b.url)), "{location}");
    // The web app's viewers read it from their page, another origin.
    let fetched = app.client.get(&location).header("origin", "http://drive.example").send().await.unwrap();
    assert_eq!(fetched.status(), 200);
    assert_eq!(fetched.headers()["access-control-allow-origin"], "*");
    assert!(fetched.headers()["content-disposition"].to_str().unwrap().contains("pub.bin"));
    assert_eq!(fetched.bytes().await.unwrap().as_ref(), bytes.as_slice());
    assert_eq!(node_b.blobs().len(), 1);
}

async fn a_direct_upload_resumes_and_identical_content_is_stored_once_per_node(app: TestApp) {
    let admin = app.login_admin().await;
    let node = TestNode::start(&app, &admin, false).await;
    app.use_node_policy(&admin, &node, true).await;
    let user = user_of(&app).await;
    let root = app.root_id(&user).await;
    let bytes = content(SIZE, 3);
    let chunk = 64 * 1024;

    let response = app.start_upload(&user, &root, "resumed.bin", bytes.len()).await;
    let state: Value = response.json().await.unwrap();
    for index in [3, 1] {
        let piece = bytes.chunks(chunk).nth(index).unwrap().to_vec();
        assert_eq!(app.put_direct(&state, index, piece).await.status(), 200);
    }
    // Resuming: the master hands out the node's address again, the node says what it has.
    let again: Value = app
        .call(Method::GET, &format!("/file/upload/{}", state["id"].as_str().unwrap()), Some(&user.access), None)
        .await
        .json()
        .await
        .unwrap();
    let direct = &again["direct"];
    let status: Value = app
        .client
        .get(direct["url"].as_str().unwrap())
        .bearer_auth(direct["credential"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["received"], json!([1, 3]));
    for index in [0, 2] {
        let piece = bytes.chunks(chunk).nth(index).unwrap().to_vec();
        let answer = app.put_direct(&again, index, piece).await;
        assert_eq!(answer.status(), 200);
        if index == 2 {
            let done: Value = answer.json().await.unwrap();
            assert_eq!(done["object"]["name"], "resumed.bin", "{done}");
        }
    }
    assert_eq!(file_names(&app, &user).await, ["resumed.bin"]);

    // The same content again: a second file, one blob on the node.
    let (_, last) = app.upload_direct(&user, &root, "copy.bin", &bytes).await;
    let done: Value = last.json().await.unwrap();
    let copy = done["object"]["id"].as_str().unwrap().to_owned();
    assert_eq!(node.blobs().len(), 1, "the duplicate was dropped on the node");
    assert_eq!(app.download(&user, &copy).await, bytes);
    assert_eq!(app.storage_used(&user).await, 2 * bytes.len() as i64, "each file counts against the quota");
}

async fn deleting_the_last_reference_deletes_the_blob_on_the_node(app: TestApp) {
    let admin = app.login_admin().await;
    let node = TestNode::start(&app, &admin, false).await;
    app.use_node_policy(&admin, &node, true).await;
    let user = user_of(&app).await;
    let root = app.root_id(&user).await;
    let (_, last) = app.upload_direct(&user, &root, "gone.bin", &content(SIZE, 9)).await;
    let object = last.json::<Value>().await.unwrap()["object"]["id"].as_str().unwrap().to_owned();
    assert_eq!(node.blobs().len(), 1);
    let ids = json!({"ids": [object]});
    assert!(app.call(Method::DELETE, "/object", Some(&user.access), Some(ids.clone())).await.status().is_success());
    assert_eq!(node.blobs().len(), 1, "in the trash the bytes stay");
    let purged = app.call(Method::DELETE, "/trash", Some(&user.access), Some(ids)).await;
    assert!(purged.status().is_success(), "{}", purged.status());
    assert!(node.blobs().is_empty(), "purging the last reference deleted the blob on the node");
    assert_eq!(app.storage_used(&user).await, 0);
}

async fn files_migrate_onto_a_node_and_back(app: TestApp) {
    let admin = app.login_admin().await;
    let node = TestNode::start(&app, &admin, false).await;
    let on_node = app.use_node_policy(&admin, &node, true).await;
    let local = app.use_small_chunks(&admin, 0).await;
    app.set_user_group(&admin, json!({"policy_ids": [local, on_node]})).await;
    let user = user_of(&app).await;
    let root = app.root_id(&user).await;
    let bytes = content(SIZE, 11);
    let object = app.upload(&user, &root, "moving.bin", &bytes).await["id"].as_str().unwrap().to_owned();

    for (policy, blobs_on_node) in [(&on_node, 1), (&local, 0)] {
        let response = app
            .call(
                Method::PATCH,
                &format!("/object/{object}/policy"),
                Some(&user.access),
                Some(json!({"policy_id": policy})),
            )
            .await;
        assert_eq!(response.status(), 202);
        let task = response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
        let ended = app.wait_for_task(&user, &task).await;
        assert_eq!(ended["status"], "completed", "{ended}");
        assert_eq!(app.download(&user, &object).await, bytes);
        // The old blob goes once the switch committed.
        for _ in 0..100 {
            if node.blobs().len() == blobs_on_node {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(node.blobs().len(), blobs_on_node);
    }
}

async fn external_download(app: &TestApp, user: &Session, url: &str, parent: &str) -> Value {
    let body = json!({"url": url, "parent_id": parent});
    let response = app.call(Method::POST, "/file/external_download", Some(&user.access), Some(body)).await;
    assert_eq!(response.status(), 202, "{}", response.text().await.unwrap_or_default());
    let task: Value = response.json().await.unwrap();
    assert_eq!(task["type"], "EXTERNAL_DOWNLOAD");
    app.wait_for_task(user, task["id"].as_str().unwrap()).await
}

async fn an_external_download_creates_the_file_only_where_the_node_may_reach_the_url(app: TestApp) {
    let admin = app.login_admin().await;
    let open_node = TestNode::start(&app, &admin, true).await;
    let guarded_node = TestNode::start(&app, &admin, false).await;
    let open = app.use_node_policy(&admin, &open_node, true).await;
    let guarded = app.use_node_policy(&admin, &guarded_node, true).await;
    let bytes = content(300 * 1024, 5);
    let origin = TestOrigin::start(bytes.clone()).await;
    let url = format!("{}/redirect", origin.url);

    // The default configuration refuses 127.0.0.1: the task fails, nothing is created.
    let permissions = json!({"share": true, "webdav": true, "external_download": true});
    app.set_user_group(&admin, json!({"policy_ids": [guarded], "permissions": permissions})).await;
    let user = user_of(&app).await;
    let root = app.root_id(&user).await;
    let refused = external_download(&app, &user, &url, &root).await;
    assert_eq!(refused["status"], "error", "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("not allowed"), "{refused}");
    assert!(file_names(&app, &user).await.is_empty());
    assert!(guarded_node.blobs().is_empty());
    assert_eq!(app.storage_used(&user).await, 0);

    // A node configured to allow private addresses fetches it, following the redirect.
    app.set_user_group(&admin, json!({"policy_ids": [open]})).await;
    let done = external_download(&app, &user, &url, &root).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["progress"]["bytes_done"], bytes.len());
    let object = done["progress"]["object_id"].as_str().unwrap().to_owned();
    assert_eq!(file_names(&app, &user).await, ["file.bin"]);
    assert_eq!(app.download(&user, &object).await, bytes);
    assert_eq!(open_node.blobs().len(), 1);
    assert_eq!(app.storage_used(&user).await, bytes.len() as i64);

    // Larger than the quota left: fails while the bytes arrive, and leaves nothing.
    app.set_user_group(&admin, json!({"max_storage": bytes.len() + 1000})).await;
    let user = app.refresh(&user).await;
    let too_big = external_download(&app, &user, &url, &root).await;
    assert_eq!(too_big["status"], "error", "{too_big}");
    assert_eq!(file_names(&app, &user).await, ["file.bin"]);
    assert_eq!(open_node.blobs().len(), 1);
    assert_eq!(app.storage_used(&user).await, bytes.len() as i64);
}

/// Posts `body` to the master's router with the given signature headers.
async fn post_signed(app: &TestApp, body: &[u8], signer: &Signer, now: u64, nonce: Option<&str>) -> (u16, Value) {
    let parts = RequestParts { method: "POST", path: "/api/v1/node/rpc", body };
    let headers = match nonce {
        Some(nonce) => signer.sign_with_nonce(&parts, now, nonce).unwrap(),
        None => signer.sign(&parts, now).unwrap(),
    };
    let mut request =
        app.request(Method::POST, "/node/rpc").header("content-type", "application/json").body(body.to_vec());
    for (name, value) in headers.pairs() {
        request = request.header(name, value);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

async fn the_router_refuses_bad_signatures_stale_and_replayed_calls_and_unknown_methods(app: TestApp) {
    let admin = app.login_admin().await;
    let node = TestNode::start(&app, &admin, false).await;
    let key = |k: &str| nubo_protocol::key::NodeKey::new(&nubo_common::secret::Secret::new(k)).unwrap();
    let signer = Signer::new(key(NODE_KEY), node.id.clone(), Role::Node).unwrap();
    let ping = serde_json::to_vec(&Request::new("r1", PingParams { protocol_version: PROTOCOL_VERSION })).unwrap();

    let (status, answer) = post_signed(&app, &ping, &signer, unix_now(), None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["protocol_version"], PROTOCOL_VERSION);

    let wrong_key = Signer::new(key("another-key-another-key-another-key!!"), node.id.clone(), Role::Node).unwrap();
    let (status, answer) = post_signed(&app, &ping, &wrong_key, unix_now(), None).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (401, Some("unauthorized")), "{answer}");

    // A request the master signed cannot be reflected back to it.
    let as_master = Signer::new(key(NODE_KEY), node.id.clone(), Role::Master).unwrap();
    let (status, _) = post_signed(&app, &ping, &as_master, unix_now(), None).await;
    assert_eq!(status, 401);

    let unknown_node = Signer::new(key(NODE_KEY), "no-such-node", Role::Node).unwrap();
    let (status, _) = post_signed(&app, &ping, &unknown_node, unix_now(), None).await;
    assert_eq!(status, 401);

    let (status, answer) = post_signed(&app, &ping, &signer, unix_now() - 3600, None).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (401, Some("stale")), "{answer}");

    let nonce = "0123456789abcdef0123456789abcdef";
    let (status, _) = post_signed(&app, &ping, &signer, unix_now(), Some(nonce)).await;
    assert_eq!(status, 200);
    let (status, answer) = post_signed(&app, &ping, &signer, unix_now(), Some(nonce)).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (401, Some("replayed")), "{answer}");

    // A method the master does not serve, and one nobody knows.
    let node_side = Request::new("r2", Call::BlobStat(BlobStatParams { storage_key: "a".into() }));
    let (status, answer) = post_signed(&app, &serde_json::to_vec(&node_side).unwrap(), &signer, unix_now(), None).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (400, Some("unknown_method")), "{answer}");
    let made_up = br#"{"id":"r3","method":"teleport","params":{}}"#;
    let (status, answer) = post_signed(&app, made_up, &signer, unix_now(), None).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (400, Some("unknown_method")), "{answer}");
    assert_eq!(answer["id"], "r3");
    let (status, answer) = post_signed(&app, b"not json", &signer, unix_now(), None).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (400, Some("invalid_request")), "{answer}");

    // Unsigned: refused before anything is parsed.
    let response = app.request(Method::POST, "/node/rpc").body(ping).send().await.unwrap();
    assert_eq!(response.status(), 401);
}

async fn a_node_that_is_down_answers_503_and_a_restarted_node_resumes_the_upload(app: TestApp) {
    let admin = app.login_admin().await;
    let mut node = TestNode::start(&app, &admin, false).await;
    app.use_node_policy(&admin, &node, true).await;
    let user = user_of(&app).await;
    let root = app.root_id(&user).await;
    let bytes = content(SIZE, 13);

    let state: Value = app.start_upload(&user, &root, "survivor.bin", bytes.len()).await.json().await.unwrap();
    let pieces: Vec<Vec<u8>> = bytes.chunks(64 * 1024).map(<[u8]>::to_vec).collect();
    assert_eq!(app.put_direct(&state, 0, pieces[0].clone()).await.status(), 200);

    node.stop().await;
    let refused = app.start_upload(&user, &root, "other.bin", 10).await;
    let body = error_body(refused, 503).await;
    assert_eq!(body["code"], "node.unavailable", "{body}");
    assert_eq!(app.storage_used(&user).await, bytes.len() as i64, "only the open session is reserved");

    node.restart().await;
    for (index, piece) in pieces.iter().enumerate().skip(1) {
        let answer = app.put_direct(&state, index, piece.clone()).await;
        assert_eq!(answer.status(), 200, "chunk {index}");
    }
    assert_eq!(file_names(&app, &user).await, ["survivor.bin"]);
}

async fn a_report_sent_while_the_master_was_down_creates_the_file_exactly_once(mut app: TestApp) {
    let admin = app.login_admin().await;
    let node = TestNode::start(&app, &admin, false).await;
    app.use_node_policy(&admin, &node, true).await;
    let user = user_of(&app).await;
    let root = app.root_id(&user).await;
    let bytes = content(SIZE, 17);
    let state: Value = app.start_upload(&user, &root, "late.bin", bytes.len()).await.json().await.unwrap();
    let pieces: Vec<Vec<u8>> = bytes.chunks(64 * 1024).map(<[u8]>::to_vec).collect();
    for (index, piece) in pieces.iter().enumerate().take(pieces.len() - 1) {
        assert_eq!(app.put_direct(&state, index, piece.clone()).await.status(), 200);
    }

    app.stop().await;
    let last = app.put_direct(&state, pieces.len() - 1, pieces[pieces.len() - 1].clone()).await;
    assert_eq!(last.status(), 202, "the master is down: the report is pending");
    let pending: Value = last.json().await.unwrap();
    assert_eq!(pending["completed"], true);
    assert!(pending.get("result").is_none());

    app.restart().await;
    let direct = &state["direct"];
    let mut outcome = Value::Null;
    for _ in 0..200 {
        let status: Value = app
            .client
            .get(direct["url"].as_str().unwrap())
            .bearer_auth(direct["credential"].as_str().unwrap())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(result) = status.get("result") {
            outcome = result.clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(outcome["status"], 200, "the node's retry reached the restarted master: {outcome}");
    // Sending the same report again (as a node whose answer got lost would) creates nothing.
    let again = nubo_protocol::methods::UploadCompleteParams {
        session_id: direct["url"].as_str().unwrap().rsplit('/').next().unwrap().to_owned(),
        size: bytes.len() as u64,
        blake3: nubo_protocol::methods::Blake3Hex::parse(&blake3::hash(&bytes).to_hex()).unwrap(),
        storage_key: "ignored-for-settled-reports".to_owned(),
    };
    let client = nubo_protocol::client::RpcClient::new(
        &app.base_url,
        nubo_protocol::client::MASTER_RPC_PATH,
        nubo_protocol::key::NodeKey::new(&nubo_common::secret::Secret::new(NODE_KEY)).unwrap(),
        &node.id,
        Role::Node,
        Duration::from_secs(10),
    )
    .unwrap();
    let repeated = client.call(again).await.unwrap();
    assert!(repeated.keep_blob);
    assert_eq!(repeated.client_body["object"]["name"], "late.bin");
    assert_eq!(file_names(&app, &user).await, ["late.bin"], "exactly one file");
    assert_eq!(app.storage_used(&user).await, bytes.len() as i64);
    let object = repeated.client_body["object"]["id"].as_str().unwrap().to_owned();
    assert_eq!(app.download(&user, &object).await, bytes);
}

on_every_backend!(a_report_a_dead_master_was_recording_is_taken_over_once_its_lease_ran_out);

async fn a_report_a_dead_master_was_recording_is_taken_over_once_its_lease_ran_out(app: TestApp) {
    let admin = app.login_admin().await;
    let node = TestNode::start(&app, &admin, false).await;
    app.use_node_policy(&admin, &node, true).await;
    let user = user_of(&app).await;
    let root = app.root_id(&user).await;
    let bytes = content(64 * 1024 + 500, 9);
    let state: Value = app.start_upload(&user, &root, "late.bin", bytes.len()).await.json().await.unwrap();
    let id = state["id"].as_str().unwrap().to_owned();
    assert_eq!(app.put_direct(&state, 0, bytes[..64 * 1024].to_vec()).await.status(), 200);

    // Another master holds the session (recording an earlier report) and is alive: the node's
    // report is told to come again, and the client hears that the file is not recorded yet.
    app.claim_upload_as_other_master(&id, 0).await;
    let last = app.put_direct(&state, 1, bytes[64 * 1024..].to_vec()).await;
    assert_eq!(last.status(), 202, "{}", last.text().await.unwrap_or_default());
    assert!(file_names(&app, &user).await.is_empty());

    // That master died: once its lease ran out, the node's next report records the file.
    app.claim_upload_as_other_master(&id, app.stale_claim_age()).await;
    let names = nubo_tests::settled(vec!["late.bin".to_owned()], || file_names(&app, &user)).await;
    assert_eq!(names, ["late.bin"]);
    assert_eq!(app.storage_used(&user).await, bytes.len() as i64, "charged once");
    assert_eq!(node.blobs().len(), 1, "the node kept the bytes");
}

/// A direct upload of [`SIZE`] bytes with every chunk but the last on the node: the session
/// state and the last chunk, for a test to change something before sending it.
async fn direct_upload_but_the_last_chunk(app: &TestApp, user: &Session, name: &str) -> (Value, Vec<u8>) {
    let root = app.root_id(user).await;
    let response = app.start_upload(user, &root, name, SIZE).await;
    assert_eq!(response.status(), 201);
    let state: Value = response.json().await.unwrap();
    let pieces: Vec<Vec<u8>> = content(SIZE, 21).chunks(64 * 1024).map(<[u8]>::to_vec).collect();
    let (last, others) = pieces.split_last().unwrap();
    for (index, piece) in others.iter().enumerate() {
        assert_eq!(app.put_direct(&state, index, piece.clone()).await.status(), 200, "chunk {index}");
    }
    (state, last.clone())
}

/// Sends the last chunk and answers the node's error body, checking the status it relays and
/// that nothing of the upload is left: no file, no reservation, no blob on the node.
async fn relayed_refusal(
    app: &TestApp,
    user: &Session,
    node: &TestNode,
    state: &Value,
    last: Vec<u8>,
    status: u16,
) -> Value {
    let index = state["total_chunks"].as_u64().unwrap() as usize - 1;
    let answer = app.put_direct(state, index, last).await;
    assert_eq!(answer.status().as_u16(), status, "the node relays the master's status");
    let body: Value = answer.json().await.unwrap();
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert!(file_names(app, user).await.is_empty());
    assert_eq!(app.storage_used(user).await, 0, "the reservation was given back");
    assert!(node.blobs().is_empty(), "the refused bytes were dropped");
    body
}

async fn a_quota_shrunk_during_a_direct_upload_reaches_the_client_as_507(app: TestApp) {
    let admin = app.login_admin().await;
    let node = TestNode::start(&app, &admin, false).await;
    app.use_node_policy(&admin, &node, true).await;
    let user = user_of(&app).await;
    let (state, last) = direct_upload_but_the_last_chunk(&app, &user, "big.bin").await;

    app.set_user_group(&admin, json!({"max_storage": 1000})).await;
    // The group change revoked the access token; the node's upload credential stays valid.
    let user = app.refresh(&user).await;
    let body = relayed_refusal(&app, &user, &node, &state, last, 507).await;
    assert_eq!(body["code"], "storage.quota_exceeded", "{body}");
}

async fn a_size_limit_lowered_during_a_direct_upload_reaches_the_client_as_413(app: TestApp) {
    let admin = app.login_admin().await;
    let node = TestNode::start(&app, &admin, false).await;
    let policy = app.use_node_policy(&admin, &node, true).await;
    let user = user_of(&app).await;
    let (state, last) = direct_upload_but_the_last_chunk(&app, &user, "big.bin").await;

    let limited = json!({"name": format!("on {}", node.id), "type": "local", "chunk_size": nubo_tests::files::SMALL_CHUNK,
                         "is_private": true, "node_id": node.id, "max_size": 1000});
    let response = app.call(Method::PUT, &format!("/admin/policy/{policy}"), Some(&admin.access), Some(limited)).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());
    let body = relayed_refusal(&app, &user, &node, &state, last, 413).await;
    assert_eq!(body["code"], "file.too_large", "{body}");
}

async fn a_policy_taken_from_the_group_during_a_direct_upload_reaches_the_client_as_403(app: TestApp) {
    let admin = app.login_admin().await;
    let node = TestNode::start(&app, &admin, false).await;
    let on_node = app.use_node_policy(&admin, &node, true).await;
    let local = app.use_policy(&admin, json!({"name": "local", "type": "local"})).await;
    app.set_user_group(&admin, json!({"policy_ids": [on_node, local]})).await;
    let user = user_of(&app).await;
    let (state, last) = direct_upload_but_the_last_chunk(&app, &user, "big.bin").await;

    app.set_user_group(&admin, json!({"policy_ids": [local]})).await;
    let user = app.refresh(&user).await;
    let body = relayed_refusal(&app, &user, &node, &state, last, 403).await;
    assert_eq!((&body["code"], &body["field"]), (&json!("policy.not_allowed"), &json!("policy_id")), "{body}");
}
