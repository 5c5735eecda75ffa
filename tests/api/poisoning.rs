//! Issue 51, H1 and L2: an upload's recorded hash is a fact about its stored bytes. An attacker
//! who re-sends a chunk with a short body, or holds a chunk open while the upload completes,
//! never gets a blob whose hash is of content Y and whose bytes are not Y; so a victim who then
//! uploads Y reads back exactly Y (on local disk, on S3 and on a storage node). A chunk that
//! loses the race with its session's ending answers 409 `upload.not_open`, not 500.

use std::time::Duration;

use bytes::Bytes;
use nubo_tests::cluster::TestNode;
use nubo_tests::files::{PolicyKind, content};
use nubo_tests::{Session, TestApp, error_body};
use reqwest::Method;
use serde_json::Value;
use tokio::sync::mpsc;

nubo_tests::on_every_backend_and_storage!(
    a_short_resend_of_a_chunk_never_pairs_the_old_hash_with_new_bytes,
    a_chunk_held_open_while_the_upload_completes_never_changes_the_blob,
);
nubo_tests::on_every_backend!(
    a_short_resend_of_a_chunk_to_a_node_never_pairs_the_old_hash_with_new_bytes,
    a_chunk_held_open_on_a_node_while_the_upload_completes_never_changes_the_blob,
    a_chunk_that_loses_the_race_with_its_session_ending_is_a_conflict,
);

/// Where one chunk of an upload goes and the bearer credential for it: the master's chunk
/// endpoint, or the node's for a direct upload.
struct ChunkTarget {
    base: String,
    bearer: String,
}

impl ChunkTarget {
    fn on_master(app: &TestApp, user: &Session, upload: &str) -> Self {
        Self { base: app.api(&format!("/file/upload/{upload}")), bearer: user.access.clone() }
    }

    fn on_node(state: &Value) -> Self {
        let direct = &state["direct"];
        Self {
            base: direct["url"].as_str().expect("a direct upload").to_owned(),
            bearer: direct["credential"].as_str().unwrap().to_owned(),
        }
    }

    async fn put(&self, app: &TestApp, index: usize, bytes: Vec<u8>) -> reqwest::Response {
        app.client.put(format!("{}/{index}", self.base)).bearer_auth(&self.bearer).body(bytes).send().await.unwrap()
    }

    /// Sends chunk `index` with `Transfer-Encoding: chunked` (no length for the server to
    /// check before the bytes arrive).
    async fn put_chunked(&self, app: &TestApp, index: usize, bytes: Vec<u8>) -> reqwest::Response {
        let pieces = futures_util::stream::iter([Ok::<Bytes, std::io::Error>(Bytes::from(bytes))]);
        let body = reqwest::Body::wrap_stream(pieces);
        app.client.put(format!("{}/{index}", self.base)).bearer_auth(&self.bearer).body(body).send().await.unwrap()
    }

    /// Opens a PUT of chunk `index` that sends `first` and then waits: the sender feeds the rest,
    /// dropping it ends the body.
    fn put_held(
        &self,
        app: &TestApp,
        index: usize,
        first: Vec<u8>,
    ) -> (mpsc::Sender<Vec<u8>>, tokio::task::JoinHandle<reqwest::Response>) {
        let (feed, fed) = mpsc::channel::<Vec<u8>>(4);
        feed.try_send(first).unwrap();
        let pieces = futures_util::stream::unfold(fed, |mut fed| async move {
            let piece = fed.recv().await?;
            Some((Ok::<Bytes, std::io::Error>(Bytes::from(piece)), fed))
        });
        let request = app.client.put(format!("{}/{index}", self.base)).bearer_auth(&self.bearer);
        let sent = tokio::spawn(async move { request.body(reqwest::Body::wrap_stream(pieces)).send().await.unwrap() });
        (feed, sent)
    }
}

/// Time for the server to take in what a held request sent so far.
const SETTLE: Duration = Duration::from_millis(400);

/// The victim uploads `y` through an upload session and reads back exactly `y`.
async fn victim_reads_back_exactly(app: &TestApp, y: &[u8], direct: bool) {
    let victim = app.register("victim@example.com", "victim-password").await;
    let root = app.root_id(&victim).await;
    let object = if direct {
        let (_, last) = app.upload_direct(&victim, &root, "y.bin", y).await;
        assert_eq!(last.status(), 200, "the victim's upload");
        last.json::<Value>().await.unwrap()["object"].clone()
    } else {
        app.upload(&victim, &root, "y.bin", y).await
    };
    let read = app.download(&victim, object["id"].as_str().unwrap()).await;
    assert!(read == y, "the victim reads back other bytes than they uploaded ({} bytes)", read.len());
}

/// The blake3 recorded for the content of the file `object`.
async fn recorded_hash(app: &TestApp, object: &Value) -> String {
    let sql = "SELECT b.blake3 FROM objects o JOIN physical_files b ON b.id = o.physical_file_id WHERE o.id = $1";
    let (hash,): (String,) =
        sqlx::query_as(sql).bind(object["id"].as_str().unwrap()).fetch_one(app.context().db().reader()).await.unwrap();
    hash
}

/// The attacker's session of `chunk + 4096` bytes: its id and the whole answer.
async fn attacker_session(app: &TestApp, attacker: &Session, chunk: usize) -> (String, Value) {
    let root = app.root_id(attacker).await;
    let response = app.start_upload(attacker, &root, "z.bin", chunk + 4096).await;
    assert_eq!(response.status(), 201);
    let state: Value = response.json().await.unwrap();
    (state["id"].as_str().unwrap().to_owned(), state)
}

async fn chunk_of(app: &TestApp, admin: &Session, kind: PolicyKind) -> (usize, nubo_tests::files::TestPolicy) {
    let policy = app.use_test_policy(admin, kind, 0).await;
    (policy.chunk, policy)
}

/// Attack 1: chunk 0 with Y's bytes, then again with `chunk - 1` bytes of Z sent chunked (the
/// server refuses the length only once the bytes are in), then Y's rest.
async fn short_resend(app: &TestApp, target: &ChunkTarget, y: &[u8], z: &[u8], chunk: usize) {
    assert_eq!(target.put(app, 0, y[..chunk].to_vec()).await.status(), 200);
    let short = target.put_chunked(app, 0, z[..chunk - 1].to_vec()).await;
    assert_eq!(short.status(), 400, "a short chunk is refused");
    let rest = target.put(app, 1, y[chunk..].to_vec()).await;
    assert_eq!(rest.status(), 200);
    let state: Value = rest.json().await.unwrap();
    assert!(state.get("object").is_none_or(Value::is_null), "completed with chunk 0 refused: {state}");
}

async fn a_short_resend_of_a_chunk_never_pairs_the_old_hash_with_new_bytes(app: TestApp, kind: PolicyKind) {
    let admin = app.login_admin().await;
    let (chunk, _policy) = chunk_of(&app, &admin, kind).await;
    let attacker = app.register("attacker@example.com", "attacker-password").await;
    let (y, z) = (content(chunk + 4096, 1), content(chunk + 4096, 2));
    let (upload, _) = attacker_session(&app, &attacker, chunk).await;
    short_resend(&app, &ChunkTarget::on_master(&app, &attacker, &upload), &y, &z, chunk).await;
    // The refused chunk counts as missing: its old receipt went before its new bytes came.
    let status = app.call(Method::GET, &format!("/file/upload/{upload}"), Some(&attacker.access), None).await;
    assert_eq!(status.status(), 200);
    assert_eq!(status.json::<Value>().await.unwrap()["uploaded"], serde_json::json!([1]));

    victim_reads_back_exactly(&app, &y, false).await;
}

/// Attack 2: Y's rest first; chunk 0 held open after one byte of Z; chunk 0 again with Y in
/// full; then the held request's remaining bytes of Z.
async fn held_open(app: &TestApp, target: &ChunkTarget, y: &[u8], z: &[u8], chunk: usize) -> Option<Value> {
    assert_eq!(target.put(app, 1, y[chunk..].to_vec()).await.status(), 200);
    let (feed, held) = target.put_held(app, 0, z[..1].to_vec());
    tokio::time::sleep(SETTLE).await;
    let full = target.put(app, 0, y[..chunk].to_vec()).await;
    let full_status = full.status().as_u16();
    let full_body: Value = full.json().await.unwrap_or(Value::Null);
    feed.send(z[1..chunk].to_vec()).await.unwrap();
    drop(feed);
    let held = held.await.unwrap();
    let held_status = held.status().as_u16();
    let held_body: Value = held.json().await.unwrap_or(Value::Null);
    assert!(held_status < 500 && full_status < 500, "answers {full_status} {full_body} and {held_status} {held_body}");
    // One writer per chunk: the second request for chunk 0 is refused while the first runs.
    assert_eq!((full_status, full_body["code"].as_str()), (409, Some("upload.chunk_busy")), "{full_body}");
    assert_eq!(held_status, 200, "{held_body}");
    Some(held_body["object"].clone()).filter(Value::is_object)
}

async fn a_chunk_held_open_while_the_upload_completes_never_changes_the_blob(app: TestApp, kind: PolicyKind) {
    let admin = app.login_admin().await;
    let (chunk, _policy) = chunk_of(&app, &admin, kind).await;
    let attacker = app.register("attacker@example.com", "attacker-password").await;
    let (y, z) = (content(chunk + 4096, 3), content(chunk + 4096, 4));
    let (upload, _) = attacker_session(&app, &attacker, chunk).await;
    let object = held_open(&app, &ChunkTarget::on_master(&app, &attacker, &upload), &y, &z, chunk).await;
    // The attacker's file holds what the held request sent, and its hash is of those bytes.
    let object = object.expect("the held chunk completed the upload");
    let mut sent = z[..chunk].to_vec();
    sent.extend_from_slice(&y[chunk..]);
    assert!(app.download(&attacker, object["id"].as_str().unwrap()).await == sent);
    assert_eq!(recorded_hash(&app, &object).await, blake3::hash(&sent).to_hex().as_str());

    victim_reads_back_exactly(&app, &y, false).await;
}

async fn node_upload(app: &TestApp) -> (TestNode, Session, usize) {
    let admin = app.login_admin().await;
    let node = TestNode::start(app, &admin, false).await;
    app.use_node_policy(&admin, &node, true).await;
    let attacker = app.register("attacker@example.com", "attacker-password").await;
    (node, attacker, nubo_tests::files::SMALL_CHUNK)
}

async fn a_short_resend_of_a_chunk_to_a_node_never_pairs_the_old_hash_with_new_bytes(app: TestApp) {
    let (_node, attacker, chunk) = node_upload(&app).await;
    let (y, z) = (content(chunk + 4096, 5), content(chunk + 4096, 6));
    let (_, state) = attacker_session(&app, &attacker, chunk).await;
    let target = ChunkTarget::on_node(&state);
    short_resend(&app, &target, &y, &z, chunk).await;
    let status: Value =
        app.client.get(&target.base).bearer_auth(&target.bearer).send().await.unwrap().json().await.unwrap();
    assert_eq!(status["received"], serde_json::json!([1]), "{status}");

    victim_reads_back_exactly(&app, &y, true).await;
}

async fn a_chunk_held_open_on_a_node_while_the_upload_completes_never_changes_the_blob(app: TestApp) {
    let (_node, attacker, chunk) = node_upload(&app).await;
    let (y, z) = (content(chunk + 4096, 7), content(chunk + 4096, 8));
    let (_, state) = attacker_session(&app, &attacker, chunk).await;
    let object = held_open(&app, &ChunkTarget::on_node(&state), &y, &z, chunk).await;
    let object = object.expect("the held chunk completed the upload");
    let mut sent = z[..chunk].to_vec();
    sent.extend_from_slice(&y[chunk..]);
    assert!(app.download(&attacker, object["id"].as_str().unwrap()).await == sent);

    victim_reads_back_exactly(&app, &y, true).await;
}

/// L2: a chunk whose session is cancelled while its bytes arrive.
async fn a_chunk_that_loses_the_race_with_its_session_ending_is_a_conflict(app: TestApp) {
    let admin = app.login_admin().await;
    let (chunk, policy) = chunk_of(&app, &admin, PolicyKind::Local).await;
    let user = app.register("late@example.com", "late-password").await;
    let bytes = content(chunk + 4096, 9);
    let (upload, _) = attacker_session(&app, &user, chunk).await;
    let target = ChunkTarget::on_master(&app, &user, &upload);
    let (feed, held) = target.put_held(&app, 0, bytes[..1].to_vec());
    tokio::time::sleep(SETTLE).await;
    let aborted = app.call(Method::DELETE, &format!("/file/upload/{upload}"), Some(&user.access), None).await;
    assert!(aborted.status().is_success(), "abort: {}", aborted.status());
    feed.send(bytes[1..chunk].to_vec()).await.unwrap();
    drop(feed);
    let late = held.await.unwrap();
    assert_eq!(error_body(late, 409).await["code"], "upload.not_open");
    assert_eq!(app.storage_used(&user).await, 0, "the reservation was given back once");
    assert_eq!(policy.settled_blobs(&app, 0).await, 0, "no bytes are left");
}
