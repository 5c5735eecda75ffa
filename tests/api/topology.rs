//! The cluster as it runs in production, every process real (see `nubo_tests::topology`): two
//! masters on one PostgreSQL and one Redis behind nginx (round-robin, no stickiness), two nodes
//! and an S3 server. Every request goes through the balancer, and each test checks that the
//! requests it relies on were answered by both masters. PostgreSQL only: it is the backend
//! masters share.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use nubo_tests::files::content;
use nubo_tests::topology::{S3_CHUNK, Topology};
use nubo_tests::{Session, TestApp, error_body, login_body};
use reqwest::{Method, Response};
use serde_json::{Value, json};

/// Asserts that two responses came from different masters (the balancer alternates).
fn on_different_masters(cluster: &Topology, first: &Response, second: &Response, what: &str) {
    let (a, b) = (cluster.answered_by(first), cluster.answered_by(second));
    assert!(a.is_some() && b.is_some() && a != b, "{what}: answered by {a:?} then {b:?}");
}

/// Opens an upload session for `bytes` on `policy`; answers its state.
async fn start_upload_on(app: &TestApp, user: &Session, parent: &str, name: &str, size: usize, policy: &str) -> Value {
    let body = json!({"file_name": name, "file_size": size, "parent_id": parent, "policy_id": policy});
    let response = app.call(Method::POST, "/file/upload", Some(&user.access), Some(body)).await;
    assert_eq!(response.status(), 201, "upload session for {name}: {}", response.text().await.unwrap_or_default());
    response.json().await.unwrap()
}

/// The object a finished upload answered, or a panic naming what it answered instead.
async fn finished_object(response: Response, what: &str) -> Value {
    assert_eq!(response.status(), 200, "{what}");
    let state: Value = response.json().await.unwrap();
    assert!(state["object"].is_object(), "{what} did not complete: {state}");
    state["object"].clone()
}

/// Names in the caller's root folder.
async fn root_names(app: &TestApp, user: &Session) -> Vec<String> {
    let listing: Value = app.call(Method::GET, "/directory", Some(&user.access), None).await.json().await.unwrap();
    listing["items"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_alternate_and_files_move_across_both_masters() {
    let Some(cluster) = Topology::start().await else { return };
    let app = &cluster.app;

    // Registration and sign-in: consecutive requests alternate between the masters, and a
    // token one master issued is honoured by the other.
    let body = json!({"provider": "email_password", "identifier": "ida@example.com", "credential": "ida-password"});
    let registered = app.call(Method::POST, "/user", None, Some(body)).await;
    assert_eq!(registered.status(), 201);
    let signed_in =
        app.call(Method::POST, "/user/session", None, Some(login_body("ida@example.com", "ida-password"))).await;
    assert_eq!(signed_in.status(), 200);
    on_different_masters(&cluster, &registered, &signed_in, "registration then sign-in");
    let tokens: Value = signed_in.json().await.unwrap();
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let mut seen = Vec::new();
    for _ in 0..6 {
        let me = app.call(Method::GET, "/user/me", Some(&access), None).await;
        assert_eq!(me.status(), 200);
        seen.push(cluster.answered_by(&me).expect("a master answered"));
    }
    assert!(seen.windows(2).all(|pair| pair[0] != pair[1]), "no stickiness: {seen:?}");
    let user = Session {
        access,
        refresh: tokens["refresh_token"].as_str().unwrap().to_owned(),
        user_id: tokens["user"]["id"].as_str().unwrap().to_owned(),
    };
    let root = app.root_id(&user).await;

    // A chunked upload through the masters (S3 multipart): its chunks land on both.
    let bytes = content(2 * S3_CHUNK + 1000, 3);
    let state = start_upload_on(app, &user, &root, "big.bin", bytes.len(), &cluster.s3_policy_id).await;
    let upload = state["id"].as_str().unwrap();
    let mut chunk_masters = BTreeSet::new();
    let mut last = None;
    for (index, piece) in bytes.chunks(S3_CHUNK).enumerate() {
        let answer = app.put_chunk(&user, upload, index, piece.to_vec()).await;
        chunk_masters.insert(cluster.answered_by(&answer).expect("a master answered"));
        last = Some(answer);
    }
    assert_eq!(chunk_masters.len(), 2, "the chunks were spread over both masters");
    let big = finished_object(last.unwrap(), "the chunked upload").await["id"].as_str().unwrap().to_owned();
    assert_eq!(app.download(&user, &big).await, bytes);

    // A direct upload to node 0, then downloads through each master in turn.
    let small = content(3 * 64 * 1024 + 10, 5);
    let node = &cluster.nodes[0];
    let state = start_upload_on(app, &user, &root, "direct.bin", small.len(), &node.policy_id).await;
    assert!(state["direct"]["url"].as_str().unwrap().starts_with(&node.url), "{state}");
    let mut last = None;
    for (index, piece) in small.chunks(64 * 1024).enumerate() {
        last = Some(app.put_direct(&state, index, piece.to_vec()).await);
    }
    let direct = finished_object(last.unwrap(), "the direct upload").await["id"].as_str().unwrap().to_owned();
    assert_eq!(node.blobs().len(), 1, "the bytes are on node 0");
    // Two tokens, then two downloads: consecutive downloads go to different masters.
    let urls = [app.download_url(&user, &direct).await, app.download_url(&user, &direct).await];
    let mut download_masters = BTreeSet::new();
    for url in urls {
        let response = app.client.get(url).send().await.unwrap();
        assert_eq!(response.status(), 200);
        download_masters.insert(cluster.answered_by(&response).expect("a master answered"));
        assert_eq!(response.bytes().await.unwrap().as_ref(), small.as_slice());
    }
    assert_eq!(download_masters.len(), 2, "each master streamed it from the node");

    // A download token is single-use across the masters.
    let url = app.download_url(&user, &direct).await;
    let first = app.client.get(&url).send().await.unwrap();
    let second = app.client.get(&url).send().await.unwrap();
    on_different_masters(&cluster, &first, &second, "the token's two uses");
    assert_eq!(first.status(), 200);
    assert_eq!(error_body(second, 409).await["code"], "download.token_used");

    assert_eq!(root_names(app, &user).await, ["big.bin", "direct.bin"]);
    assert_eq!(app.storage_used(&user).await, (bytes.len() + small.len()) as i64);
}

fn lock_body(owner: &str) -> String {
    format!(
        r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>{owner}</D:owner></D:lockinfo>"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_bans_and_rate_limits_hold_on_both_masters() {
    let Some(cluster) = Topology::start().await else { return };
    let app = &cluster.app;
    let (user, dav) = app.dav_user("lou@example.com", "laptop").await;

    // A WebDAV lock taken through one master is honoured by the other.
    let created = dav.put("/locked.txt", "first").await;
    assert_eq!(created.status(), 201);
    let locked = dav.request("LOCK", "/locked.txt").header("Timeout", "Second-600").body(lock_body("lou")).send().await;
    let locked = locked.unwrap();
    assert_eq!(locked.status(), 200);
    let token = locked.headers()["lock-token"].to_str().unwrap().trim_matches(['<', '>']).to_owned();
    let refused = dav.request("PUT", "/locked.txt").body("intruder").send().await.unwrap();
    on_different_masters(&cluster, &locked, &refused, "LOCK then PUT without its token");
    assert_eq!(refused.status(), 423, "the other master honours the lock");
    let with_token = dav.request("PUT", "/locked.txt").header("If", format!("(<{token}>)")).body("second");
    let with_token = with_token.send().await.unwrap();
    assert!(with_token.status().is_success(), "{}", with_token.status());
    let unlocked = dav.request("UNLOCK", "/locked.txt").header("Lock-Token", format!("<{token}>")).send().await;
    let unlocked = unlocked.unwrap();
    assert_eq!(unlocked.status(), 204);
    let free = dav.request("PUT", "/locked.txt").body("third").send().await.unwrap();
    on_different_masters(&cluster, &unlocked, &free, "UNLOCK then PUT");
    assert!(free.status().is_success(), "the other master sees the lock released: {}", free.status());
    assert_eq!(dav.get("/locked.txt").await.text().await.unwrap(), "third");

    // A ban through one master bites on the other at once.
    let before = app.call(Method::GET, "/user/me", Some(&user.access), None).await;
    assert_eq!(before.status(), 200);
    let banned = app
        .call(
            Method::PATCH,
            &format!("/admin/user/{}", user.user_id),
            Some(&cluster.admin.access),
            Some(json!({"status": "BANNED"})),
        )
        .await;
    assert_eq!(banned.status(), 200);
    let after = app.call(Method::GET, "/user/me", Some(&user.access), None).await;
    on_different_masters(&cluster, &banned, &after, "the ban then the banned user's request");
    assert_eq!(error_body(after, 403).await["code"], "auth.user_inactive");
    let again = app.call(Method::GET, "/user/me", Some(&user.access), None).await;
    assert_eq!(again.status(), 403, "and on the master that banned");
    assert_eq!(dav.get("/locked.txt").await.status(), 403, "WebDAV refuses the banned owner too");

    // Failed sign-ins count on both masters against one budget (10 per e-mail address).
    app.register("rae@example.com", "rae-password").await;
    let mut failed = Vec::new();
    for _ in 0..10 {
        let wrong = app.call(Method::POST, "/user/session", None, Some(login_body("rae@example.com", "wrong"))).await;
        assert_eq!(wrong.status(), 401);
        failed.push(cluster.answered_by(&wrong).expect("a master answered"));
    }
    assert_eq!(failed.iter().collect::<BTreeSet<_>>().len(), 2, "failures were counted on both masters");
    let first =
        app.call(Method::POST, "/user/session", None, Some(login_body("rae@example.com", "rae-password"))).await;
    let second =
        app.call(Method::POST, "/user/session", None, Some(login_body("rae@example.com", "rae-password"))).await;
    on_different_masters(&cluster, &first, &second, "the two sign-ins over the budget");
    assert_eq!(error_body(first, 429).await["code"], "auth.rate_limited");
    assert_eq!(error_body(second, 429).await["code"], "auth.rate_limited");
}

/// Polls a task until it ends; answers its last view.
async fn wait_for_task(app: &TestApp, user: &Session, task: &str) -> Value {
    for _ in 0..1200 {
        let view: Value =
            app.call(Method::GET, &format!("/task/{task}"), Some(&user.access), None).await.json().await.unwrap();
        if ["completed", "error", "canceled"].contains(&view["status"].as_str().unwrap()) {
            return view;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {task} never ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_task_runs_once_on_one_of_the_masters() {
    let Some(cluster) = Topology::start().await else { return };
    let app = &cluster.app;
    let user = app.register("mia@example.com", "mia-password").await;
    let root = app.root_id(&user).await;
    let folder = app.mkdir(&user, &root, "moving").await;
    let (from, to) = (&cluster.nodes[0], &cluster.nodes[1]);
    let mut files = Vec::new();
    for i in 0..6u8 {
        let bytes = content(100 * 1024 + usize::from(i), i);
        let state = start_upload_on(app, &user, &folder, &format!("f{i}.bin"), bytes.len(), &from.policy_id).await;
        let mut last = None;
        for (index, piece) in bytes.chunks(64 * 1024).enumerate() {
            last = Some(app.put_direct(&state, index, piece.to_vec()).await);
        }
        let object = finished_object(last.unwrap(), "upload").await;
        files.push((object["id"].as_str().unwrap().to_owned(), bytes));
    }
    assert_eq!(from.blobs().len(), files.len());

    let body = json!({"policy_id": to.policy_id});
    let response = app.call(Method::PATCH, &format!("/object/{folder}/policy"), Some(&user.access), Some(body)).await;
    assert_eq!(response.status(), 202);
    let task = response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let ended = wait_for_task(app, &user, &task).await;
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(ended["attempts"], 1, "one master ran it, once: {ended}");
    assert_eq!(ended["progress"]["files_done"], files.len(), "{ended}");
    for (id, bytes) in &files {
        let detail: Value = app
            .call(Method::GET, &format!("/object/{id}/detail"), Some(&user.access), None)
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(detail["policy"]["id"], to.policy_id.as_str());
        assert_eq!(&app.download(&user, id).await, bytes);
    }
    assert_eq!(to.blobs().len(), files.len(), "one copy of each file on the new node");
    let left = nubo_tests::settled(0, || async { from.blobs().len() }).await;
    assert_eq!(left, 0, "the old blobs were released");
    assert_eq!(app.storage_used(&user).await, files.iter().map(|(_, b)| b.len() as i64).sum::<i64>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn litmus_passes_through_the_balancer() {
    if Command::new("litmus").arg("--version").output().is_err() {
        assert!(!nubo_tests::services_required(), "litmus is not installed (apt-get install litmus)");
        return;
    }
    let Some(cluster) = Topology::start().await else { return };
    let app = &cluster.app;
    let (_session, dav) = app.dav_user("litmus@example.com", "litmus").await;
    let mkcol = dav.request("MKCOL", "/litmus/").send().await.unwrap();
    assert_eq!(mkcol.status(), 201);
    let url = format!("{}/litmus/", dav.base);
    let (username, password) = (dav.username.clone(), dav.password.clone());
    // litmus writes `debug.log` and `child.log` into its working directory.
    let logs = tempfile::tempdir().unwrap();
    let logs_dir = logs.path().to_owned();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("litmus")
            .current_dir(logs_dir)
            .env("TESTS", "basic copymove props locks http")
            .args([&url, &username, &password])
            .output()
            .expect("litmus runs")
    })
    .await
    .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "litmus failed:\n{report}\n{}", String::from_utf8_lossy(&output.stderr));
    for suite in ["basic", "copymove", "props", "locks", "http"] {
        assert!(report.contains(&format!("<- summary for `{suite}': of")), "suite {suite} did not run:\n{report}");
    }
    assert!(!report.contains("FAIL"), "{report}");
    // Both masters took part (the balancer's log names the master of every request).
    let log = std::fs::read_to_string(cluster.app.database.dir.path().join("nginx/access.log")).unwrap();
    for master in &cluster.masters {
        let served = log.lines().filter(|line| line.ends_with(&master.addr.to_string())).count();
        assert!(served > 50, "{} answered only {served} requests", master.name);
    }
}
