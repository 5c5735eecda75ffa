//! The cluster as it runs in production, every process real (see `nubo_tests::topology`): two
//! masters on one PostgreSQL and one Redis behind nginx (round-robin, no stickiness), two nodes
//! and an S3 server. Every request goes through the balancer, and each test checks that the
//! requests it relies on were answered by both masters. PostgreSQL only: it is the backend
//! masters share.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use nubo_tests::files::content;
use nubo_tests::mail::{SmtpSink, link_token};
use nubo_tests::topology::{S3_CHUNK, Topology};
use nubo_tests::{Session, TestApp, error_body, login_body};
use reqwest::{Method, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;

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
    let ended = app.wait_for_task(&user, &task).await;
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

/// A magic link asked for through one master signs in once through the other and is refused
/// when used again through the first: its single use lives in Redis, which both share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_magic_link_signs_in_once_across_both_masters() {
    let Some(cluster) = Topology::start().await else { return };
    let Some(sink) = SmtpSink::start() else { return };
    let app = &cluster.app;
    sink.configure(app, &cluster.admin).await;
    let settings = json!({"auth_methods": ["email_password", "magic_link"], "site_url": "https://drive.example.com/"});
    let changed = app.call(Method::PATCH, "/admin/settings", Some(&cluster.admin.access), Some(settings)).await;
    assert_eq!(changed.status(), 204);
    let mia = app.register("mia@example.com", "mia-password").await;
    let asked = app.call(Method::POST, "/user/magic_link", None, Some(json!({"email": "mia@example.com"}))).await;
    assert_eq!(asked.status(), 204);
    let token = link_token(&sink.wait_for(1).await[0], "/login/magic");
    let sign_in = json!({"provider": "magic_link", "identifier": token});
    let first = app.call(Method::POST, "/user/session", None, Some(sign_in.clone())).await;
    let again = app.call(Method::POST, "/user/session", None, Some(sign_in)).await;
    on_different_masters(&cluster, &first, &again, "the link used twice");
    assert_eq!(first.status(), 200);
    assert_eq!(first.json::<Value>().await.unwrap()["user"]["id"], mia.user_id.as_str());
    assert_eq!(error_body(again, 409).await["code"], "auth.magic_link_used");
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
    nubo_tests::dav::assert_litmus_passes(&dav).await;
    // Both masters took part (the balancer's log names the master of every request).
    let log = std::fs::read_to_string(cluster.app.database.dir.path().join("nginx/access.log")).unwrap();
    for master in &cluster.masters {
        let served = log.lines().filter(|line| line.ends_with(&master.addr.to_string())).count();
        assert!(served > 50, "{} answered only {served} requests", master.name);
    }
}

/// A request body fed by the test: chunked (no `Content-Length`), cut off by sending an error.
fn fed_body() -> (mpsc::Sender<Result<Vec<u8>, std::io::Error>>, reqwest::Body) {
    let (sender, receiver) = mpsc::channel::<Result<Vec<u8>, std::io::Error>>(4);
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|piece| (piece, receiver))
    });
    (sender, reqwest::Body::wrap_stream(stream))
}

/// The master the balancer sends the next request to: the other one than the last answer's
/// (round-robin over two, nothing else in flight).
async fn next_master(cluster: &Topology) -> usize {
    let probe = cluster.app.get("/site/ping").await;
    1 - cluster.answered_by(&probe).expect("a master answered")
}

/// Sends `request` with a body fed half of `bytes`, kills master `victim` while it receives
/// it, and answers how the request ended (it must not have succeeded).
async fn cut_off_by_a_killed_master(
    cluster: &mut Topology,
    victim: usize,
    request: reqwest::RequestBuilder,
    bytes: &[u8],
) -> String {
    let (feed, body) = fed_body();
    let sent = tokio::spawn(request.body(body).send());
    feed.send(Ok(bytes[..bytes.len() / 2].to_vec())).await.unwrap();
    // Let the half reach the master through the balancer (it does not buffer bodies).
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster.kill_master(victim);
    let _ = feed.send(Err(std::io::Error::other("the client gives up"))).await;
    drop(feed);
    match sent.await.unwrap() {
        Ok(answer) => {
            assert!(!answer.status().is_success(), "the request finished although its master was killed");
            format!("answered {}", answer.status())
        }
        Err(err) => format!("failed: {err}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_mid_chunk_and_mid_webdav_put_loses_nothing_the_client_retries() {
    let Some(mut cluster) = Topology::start().await else { return };
    let user = cluster.app.register("kim@example.com", "kim-password").await;
    let root = cluster.app.root_id(&user).await;

    // A chunked upload through the masters (S3 multipart), its second chunk cut off.
    let bytes = content(2 * S3_CHUNK + 1000, 7);
    let pieces: Vec<&[u8]> = bytes.chunks(S3_CHUNK).collect();
    let state = start_upload_on(&cluster.app, &user, &root, "chunked.bin", bytes.len(), &cluster.s3_policy_id).await;
    let upload = state["id"].as_str().unwrap().to_owned();
    assert_eq!(cluster.app.put_chunk(&user, &upload, 0, pieces[0].to_vec()).await.status(), 200);
    let victim = next_master(&cluster).await;
    let request = cluster.app.request(Method::PUT, &format!("/file/upload/{upload}/1")).bearer_auth(&user.access);
    let outcome = cut_off_by_a_killed_master(&mut cluster, victim, request, pieces[1]).await;
    eprintln!("chunk 1 cut off by killing master {victim}: {outcome}");
    // The client retries the chunk through the balancer, which passes it to the live master.
    // The killed master's lease on chunk 1 lapses within seconds: until then the chunk answers
    // 409 `upload.chunk_busy` with a `Retry-After` the client honours.
    let mut last = None;
    for (index, piece) in pieces.iter().enumerate().skip(1) {
        let mut answer = cluster.app.put_chunk(&user, &upload, index, piece.to_vec()).await;
        for _ in 0..3 {
            if answer.status() != 409 {
                break;
            }
            let wait = answer.headers().get("retry-after").and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
            let wait = wait.expect("a busy chunk says when to send it again");
            assert!(wait <= 10, "a dead sender's lease lapses within seconds, not {wait} s");
            tokio::time::sleep(Duration::from_secs(wait)).await;
            answer = cluster.app.put_chunk(&user, &upload, index, piece.to_vec()).await;
        }
        assert_eq!(answer.status(), 200, "chunk {index} after the kill: {}", answer.text().await.unwrap_or_default());
        assert_eq!(cluster.answered_by(&answer), Some(1 - victim));
        last = Some(answer);
    }
    let chunked = finished_object(last.unwrap(), "the chunked upload").await["id"].as_str().unwrap().to_owned();
    cluster.start_master(victim).await;
    assert_eq!(cluster.app.download(&user, &chunked).await, bytes);

    // A WebDAV PUT (to node 0, the group's first policy) cut off the same way, then sent again.
    let dav = cluster.app.dav_account(&user, "kim@example.com", "laptop", json!({})).await;
    let document = content(4 * 1024 * 1024, 9);
    // The restarted master is left out for a second after its failure: wait it out.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let victim = next_master(&cluster).await;
    let outcome = cut_off_by_a_killed_master(&mut cluster, victim, dav.request("PUT", "/doc.bin"), &document).await;
    eprintln!("WebDAV PUT cut off by killing master {victim}: {outcome}");
    let again = dav.put("/doc.bin", document.clone()).await;
    assert_eq!(again.status(), 201, "the retried PUT creates the file");
    assert_eq!(cluster.answered_by(&again), Some(1 - victim));
    cluster.start_master(victim).await;
    assert_eq!(dav.get("/doc.bin").await.bytes().await.unwrap().as_ref(), document.as_slice());

    // No partial object anywhere; the user is charged exactly the two files.
    assert_eq!(root_names(&cluster.app, &user).await, ["chunked.bin", "doc.bin"]);
    let expected = (bytes.len() + document.len()) as i64;
    let used = nubo_tests::settled(expected, || cluster.app.storage_used(&user)).await;
    assert_eq!(used, expected, "usage is the sum of the file sizes");
    let s3_objects = nubo_tests::settled(1, || async { cluster.s3_objects().len() }).await;
    assert_eq!(s3_objects, 1, "one object on S3, no multipart leftovers: {:?}", cluster.s3_objects());
    assert_eq!(cluster.nodes[0].blobs().len(), 1, "one blob on node 0");
}

/// The chunks the node holds of a direct upload (its status answer).
async fn received_by_node(app: &TestApp, state: &Value) -> Value {
    let direct = &state["direct"];
    let status = app.client.get(direct["url"].as_str().unwrap()).bearer_auth(direct["credential"].as_str().unwrap());
    status.send().await.unwrap().json::<Value>().await.unwrap()["received"].clone()
}

async fn node_status(app: &TestApp, admin: &Session, id: &str) -> String {
    let node: Value =
        app.call(Method::GET, &format!("/admin/node/{id}"), Some(&admin.access), None).await.json().await.unwrap();
    node["status"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_upload_resumes_and_while_down_only_its_files_are_unavailable() {
    let Some(mut cluster) = Topology::start().await else { return };
    let app = &cluster.app;
    let user = app.register("nia@example.com", "nia-password").await;
    let root = app.root_id(&user).await;
    let elsewhere = content(100 * 1024, 1);
    let state = start_upload_on(app, &user, &root, "elsewhere.bin", elsewhere.len(), &cluster.nodes[1].policy_id).await;
    let mut last = None;
    for (index, piece) in elsewhere.chunks(64 * 1024).enumerate() {
        last = Some(app.put_direct(&state, index, piece.to_vec()).await);
    }
    let elsewhere_id = finished_object(last.unwrap(), "upload to node 1").await["id"].as_str().unwrap().to_owned();
    let before = content(70 * 1024, 4);
    let state = start_upload_on(app, &user, &root, "before.bin", before.len(), &cluster.nodes[0].policy_id).await;
    let mut last = None;
    for (index, piece) in before.chunks(64 * 1024).enumerate() {
        last = Some(app.put_direct(&state, index, piece.to_vec()).await);
    }
    let before_id = finished_object(last.unwrap(), "upload to node 0").await["id"].as_str().unwrap().to_owned();
    let on_s3 = content(1000, 2);
    let body =
        json!({"file_name": "s3.bin", "file_size": on_s3.len(), "parent_id": root, "policy_id": cluster.s3_policy_id});
    let session: Value =
        app.call(Method::POST, "/file/upload", Some(&user.access), Some(body)).await.json().await.unwrap();
    let answer = app.put_chunk(&user, session["id"].as_str().unwrap(), 0, on_s3.clone()).await;
    let on_s3_id = finished_object(answer, "upload to S3").await["id"].as_str().unwrap().to_owned();

    // A direct upload to node 0, killed in the middle of its second chunk.
    let bytes = content(4 * 64 * 1024 + 100, 3);
    let pieces: Vec<Vec<u8>> = bytes.chunks(64 * 1024).map(<[u8]>::to_vec).collect();
    let state = start_upload_on(app, &user, &root, "survivor.bin", bytes.len(), &cluster.nodes[0].policy_id).await;
    assert_eq!(app.put_direct(&state, 0, pieces[0].clone()).await.status(), 200);
    let (feed, body) = fed_body();
    let url = format!("{}/1", state["direct"]["url"].as_str().unwrap());
    let credential = state["direct"]["credential"].as_str().unwrap().to_owned();
    let sent = tokio::spawn(app.client.put(url).bearer_auth(credential).body(body).send());
    feed.send(Ok(pieces[1][..30_000].to_vec())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.kill_node(0);
    drop(feed);
    let cut = sent.await.unwrap();
    assert!(cut.as_ref().map_or(true, |answer| !answer.status().is_success()), "the chunk was cut off");
    let app = &cluster.app;
    let admin = &cluster.admin.clone();
    let node_id = cluster.nodes[0].id.clone();

    // While node 0 is down: its files answer 503 with a stable code, the others are served,
    // new uploads to it are refused the same way, and the masters mark it offline.
    let status = nubo_tests::settled("offline".to_owned(), || node_status(app, admin, &node_id)).await;
    assert_eq!(status, "offline");
    let body = json!({"file_name": "refused.bin", "file_size": 10, "parent_id": root,
                      "policy_id": cluster.nodes[0].policy_id});
    let refused = app.call(Method::POST, "/file/upload", Some(&user.access), Some(body)).await;
    assert_eq!(error_body(refused, 503).await["code"], "node.unavailable");
    for _ in 0..2 {
        let url = app.download_url(&user, &before_id).await;
        let unavailable = app.client.get(url).send().await.unwrap();
        // The code every download from unreachable storage answers (docs/src/errors.md).
        assert_eq!(error_body(unavailable, 503).await["code"], "storage.unavailable", "on either master");
    }
    assert_eq!(app.download(&user, &elsewhere_id).await, elsewhere);
    assert_eq!(app.download(&user, &on_s3_id).await, on_s3);

    // Restarted, the node takes the upload up where it stopped.
    cluster.start_node(0).await;
    let app = &cluster.app;
    let status = nubo_tests::settled("online".to_owned(), || node_status(app, admin, &node_id)).await;
    assert_eq!(status, "online", "the masters mark it online again");
    assert_eq!(received_by_node(app, &state).await, json!([0]), "the cut-off chunk was not kept");
    let mut last = None;
    for (index, piece) in pieces.iter().enumerate().skip(1) {
        let answer = app.put_direct(&state, index, piece.clone()).await;
        assert_eq!(answer.status(), 200, "chunk {index}");
        last = Some(answer);
    }
    let survivor = finished_object(last.unwrap(), "the resumed upload").await["id"].as_str().unwrap().to_owned();
    assert_eq!(app.download(&user, &survivor).await, bytes);
    assert_eq!(app.download(&user, &before_id).await, before, "its files are served again");
    assert_eq!(root_names(app, &user).await, ["before.bin", "elsewhere.bin", "s3.bin", "survivor.bin"]);
    let sizes = before.len() + elsewhere.len() + on_s3.len() + bytes.len();
    assert_eq!(app.storage_used(&user).await, sizes as i64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masters_reconnect_to_a_restarted_redis_without_answering_500() {
    let Some(mut cluster) = Topology::start().await else { return };
    let user = cluster.app.register("rex@example.com", "rex-password").await;
    let me = |cluster: &Topology| {
        let request = cluster.app.request(Method::GET, "/user/me").bearer_auth(&user.access);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(me(&cluster).await, 200);

    cluster.redis.kill();
    // While Redis is down, requests that need it are refused as unavailable, never as 500.
    let mut while_down = BTreeSet::new();
    for _ in 0..10 {
        while_down.insert(me(&cluster).await);
    }
    assert!(!while_down.contains(&500), "answers while Redis was down: {while_down:?}");
    cluster.redis.start();
    cluster.redis.wait_listening().await;

    // Once the masters have reconnected, both answer again, and keep answering.
    let mut recovered = false;
    let mut seen = BTreeSet::new();
    for _ in 0..300 {
        let status = me(&cluster).await;
        seen.insert(status);
        assert_ne!(status, 500, "a request answered 500 after Redis came back");
        if status == 200 {
            recovered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(recovered, "the masters never reconnected: {seen:?}");
    let mut masters = BTreeSet::new();
    for _ in 0..10 {
        let answer = cluster.app.request(Method::GET, "/user/me").bearer_auth(&user.access).send().await.unwrap();
        assert_eq!(answer.status(), 200, "every request after the reconnection succeeds");
        masters.insert(cluster.answered_by(&answer).expect("a master answered"));
    }
    assert_eq!(masters.len(), 2, "both masters reconnected");
    // And shared state works again: a new sign-in through each master.
    for _ in 0..2 {
        cluster.app.login("rex@example.com", "rex-password").await;
    }
}
