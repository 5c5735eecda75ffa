//! Admin import of existing storage (`POST /admin/import`): files placed straight in a local
//! policy's root or an S3 bucket become a user's files without a byte being copied.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nubo_model::domain::task::TaskProps;
use nubo_service::content::import;
use nubo_service::tasks::run::TaskFailure;
use nubo_tests::files::{PolicyKind, StopAfter, TestPolicy, files_below};
use nubo_tests::{Backend, Session, TestApp, error_body, on_every_backend, on_every_backend_and_storage};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend_and_storage!(
    ten_thousand_placed_files_are_imported_in_place_and_a_rerun_imports_only_what_changed,
    imported_content_is_deduplicated_and_belongs_to_nubo_afterwards
);

on_every_backend!(
    an_import_stops_at_a_full_quota_saying_how_far_it_got,
    an_import_stopped_between_files_resumes_where_it_stopped,
    files_waiting_for_an_import_are_not_collected,
    bad_import_requests_are_refused_without_a_task
);

/// Files placed for the large import (tiny files): 10,000 on local disk with both databases
/// and on S3 with SQLite; 2,000 on S3 with PostgreSQL, where a debug build takes about 10 ms a
/// file (a signed GET and a dozen statements each).
fn how_many(backend: Backend, kind: PolicyKind) -> usize {
    if backend == Backend::Postgres && kind == PolicyKind::S3 { 2_000 } else { 10_000 }
}

/// The directory an S3 test server or a local policy keeps its objects in: what the import
/// must not write to.
fn storage_dir(app: &TestApp, policy: &TestPolicy) -> PathBuf {
    match &policy.s3 {
        Some(server) => server.dir.path().join(&server.bucket),
        None => app.config.data_dir.join("small"),
    }
}

/// Every file below `dir` with its size and modification time: equal before and after an
/// import that copied nothing.
fn snapshot(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut files: Vec<_> = files_below(dir)
        .into_iter()
        .map(|path| {
            let meta = std::fs::metadata(&path).unwrap();
            (path, meta.len(), meta.modified().unwrap())
        })
        .collect();
    files.sort();
    files
}

/// Places `bytes` at `key` of the policy's storage, behind the master's back.
fn place(dir: &Path, key: &str, bytes: &[u8]) {
    let path = dir.join(key);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Distinct small content for file `i` (40 to 140 bytes).
fn small_content(i: usize) -> Vec<u8> {
    format!("file {i} {}", "x".repeat(30 + i % 101)).into_bytes()
}

async fn start_import(app: &TestApp, admin: &Session, body: Value) -> reqwest::Response {
    app.call(Method::POST, "/admin/import", Some(&admin.access), Some(body)).await
}

/// Starts an import and waits for it to end; answers the task.
async fn import_and_wait(app: &TestApp, admin: &Session, body: Value) -> Value {
    let response = start_import(app, admin, body).await;
    assert_eq!(response.status(), 202, "import accepted: {}", response.text().await.unwrap_or_default());
    let task: Value = response.json().await.unwrap();
    assert_eq!(task["type"], "IMPORT");
    wait_for_end(app, admin, task["id"].as_str().unwrap()).await
}

async fn wait_for_end(app: &TestApp, admin: &Session, id: &str) -> Value {
    for _ in 0..12_000 {
        let view: Value =
            app.call(Method::GET, &format!("/admin/task/{id}"), Some(&admin.access), None).await.json().await.unwrap();
        if ["completed", "error", "canceled"].contains(&view["status"].as_str().unwrap_or_else(|| panic!("{view}"))) {
            return view;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("import {id} never ended");
}

fn body(policy: &str, source: &str, user: &Session, dst: &str) -> Value {
    json!({"source": {"policy_id": policy, "path_or_prefix": source}, "user_id": user.user_id, "dst_path": dst})
}

/// The counts of an import's result.
fn counts(task: &Value) -> (u64, u64, u64, u64) {
    let result = &task["progress"]["import"];
    let n = |field: &str| result[field].as_u64().unwrap_or_else(|| panic!("{field} in {task}"));
    (n("files_imported"), n("files_updated"), n("files_skipped"), n("files_conflicting"))
}

/// id, parent id, name, kind, size and content hash of an object.
type ObjectFacts = (String, Option<String>, String, String, i64, Option<String>);

/// Every live file of `owner` by its path, with its size and content hash, read from the
/// database (one query, whatever the number of files).
async fn tree_of(app: &TestApp, owner: &str) -> HashMap<String, (i64, String)> {
    let rows: Vec<ObjectFacts> = sqlx::query_as(
        "SELECT o.id, o.parent_id, o.name, o.kind, o.size, b.blake3 FROM objects o
         LEFT JOIN physical_files b ON b.id = o.physical_file_id
         WHERE o.owner_id = $1 AND o.trashed_at IS NULL",
    )
    .bind(owner)
    .fetch_all(app.context().db().reader())
    .await
    .unwrap();
    let by_id: HashMap<&str, (&Option<String>, &str)> =
        rows.iter().map(|(id, parent, name, ..)| (id.as_str(), (parent, name.as_str()))).collect();
    let path_of = |id: &str| {
        let mut names = Vec::new();
        let mut at = Some(id.to_owned());
        while let Some(current) = at {
            let (parent, name) = by_id[current.as_str()];
            if !name.is_empty() {
                names.push(name.to_owned());
            }
            at = parent.clone();
        }
        names.reverse();
        format!("/{}", names.join("/"))
    };
    rows.iter()
        .filter(|row| row.3 == "file")
        .map(|(id, _, _, _, size, blake3)| (path_of(id), (*size, blake3.clone().unwrap_or_default())))
        .collect()
}

fn blake3_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

async fn ten_thousand_placed_files_are_imported_in_place_and_a_rerun_imports_only_what_changed(
    app: TestApp,
    kind: PolicyKind,
) {
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, kind, 0).await;
    let user = app.register("ines@example.com", "ines-password").await;
    let dir = storage_dir(&app, &policy);
    let many = how_many(app.backend, kind);
    let mut placed = HashMap::new();
    for i in 0..many {
        let key = format!("archive/d{:02}/f{i:05}.txt", i % 50);
        let bytes = small_content(i);
        place(&dir, &key, &bytes);
        placed.insert(key, bytes);
    }
    let total: usize = placed.values().map(Vec::len).sum();
    let before = snapshot(&dir);

    // Figures (files per second, bytes the master writes) are `nubo-bench import`'s.
    let done = import_and_wait(&app, &admin, body(&policy.id, "archive", &user, "/imported/2026")).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(counts(&done), (many as u64, 0, 0, 0));
    assert_eq!(done["progress"]["import"]["bytes_hashed"], total);
    assert_eq!(done["progress"]["import"]["files_seen"], many);
    assert_eq!(snapshot(&dir), before, "the import wrote nothing to the storage: no copy, no new object");

    let tree = tree_of(&app, &user.user_id).await;
    assert_eq!(tree.len(), many);
    for (key, bytes) in &placed {
        let path = format!("/imported/2026/{}", key.strip_prefix("archive/").unwrap());
        assert_eq!(tree.get(&path), Some(&(bytes.len() as i64, blake3_hex(bytes))), "{path}");
    }
    assert_eq!(app.storage_used(&user).await, total as i64);
    // The file's content is the placed object itself.
    let listing: Value =
        app.call(Method::GET, "/directory/imported/2026/d07", Some(&user.access), None).await.json().await.unwrap();
    let first = &listing["items"][0];
    let key = format!("archive/d07/{}", first["name"].as_str().unwrap());
    assert_eq!(app.download(&user, first["id"].as_str().unwrap()).await, placed[&key]);

    // Again: nothing new, nothing read.
    let again = import_and_wait(&app, &admin, body(&policy.id, "archive", &user, "/imported/2026")).await;
    assert_eq!(again["status"], "completed", "{again}");
    assert_eq!(counts(&again), (0, 0, many as u64, 0));
    assert_eq!(again["progress"]["import"]["bytes_hashed"], 0);

    // One file changes behind Nubo's back, one is added: the third run takes exactly those.
    let changed = b"changed content, longer than before it was".to_vec();
    place(&dir, "archive/d00/f00000.txt", &changed);
    let added = b"a file added later".to_vec();
    place(&dir, "archive/new/added.txt", &added);
    let third = import_and_wait(&app, &admin, body(&policy.id, "archive", &user, "/imported/2026")).await;
    assert_eq!(third["status"], "completed", "{third}");
    assert_eq!(counts(&third), (1, 1, many as u64 - 1, 0));
    assert_eq!(third["progress"]["import"]["bytes_hashed"], changed.len() + added.len());
    let tree = tree_of(&app, &user.user_id).await;
    assert_eq!(tree["/imported/2026/d00/f00000.txt"], (changed.len() as i64, blake3_hex(&changed)));
    assert_eq!(tree["/imported/2026/new/added.txt"], (added.len() as i64, blake3_hex(&added)));
    let grown = changed.len() as i64 - small_content(0).len() as i64 + added.len() as i64;
    assert_eq!(app.storage_used(&user).await, total as i64 + grown, "quota follows the change");
    let listing: Value =
        app.call(Method::GET, "/directory/imported/2026/d00", Some(&user.access), None).await.json().await.unwrap();
    let changed_file = listing["items"].as_array().unwrap().iter().find(|item| item["name"] == "f00000.txt").unwrap();
    assert_eq!(app.download(&user, changed_file["id"].as_str().unwrap()).await, changed);
}

async fn imported_content_is_deduplicated_and_belongs_to_nubo_afterwards(app: TestApp, kind: PolicyKind) {
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, kind, 0).await;
    let user = app.register("jon@example.com", "jon-password").await;
    let root = app.root_id(&user).await;
    let held = b"content the policy already holds".to_vec();
    app.upload(&user, &root, "held.txt", &held).await;
    let dir = storage_dir(&app, &policy);
    place(&dir, "drop/same.txt", &held);
    place(&dir, "drop/own.txt", b"content of its own");
    // A file where the destination needs a folder, and a different file at a file's name.
    let existing = app.mkdir(&user, &root, "in").await;
    app.upload(&user, &existing, "own.txt", b"the user's own file").await;
    let done = import_and_wait(&app, &admin, body(&policy.id, "drop/", &user, "/in")).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(counts(&done), (1, 0, 0, 1), "own.txt clashes with the user's file: {done}");
    assert_eq!(done["progress"]["import"]["files_deduplicated"], 1);
    assert_eq!(done["progress"]["import"]["conflicts"], json!(["drop/own.txt"]));
    assert!(dir.join("drop/same.txt").exists(), "a duplicate's source is left alone");
    let tree = tree_of(&app, &user.user_id).await;
    assert_eq!(tree["/in/same.txt"], (held.len() as i64, blake3_hex(&held)));
    assert_eq!(tree["/in/own.txt"].1, blake3_hex(b"the user's own file"), "the user's file is untouched");

    // Imported into a fresh folder, own.txt is Nubo's: purging it deletes the placed file.
    let done = import_and_wait(&app, &admin, body(&policy.id, "drop", &user, "/other")).await;
    assert_eq!(counts(&done), (1, 0, 1, 0), "same.txt was imported before: {done}");
    let listing: Value =
        app.call(Method::GET, "/directory/other", Some(&user.access), None).await.json().await.unwrap();
    let own = listing["items"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(listing["count"], 1);
    assert_eq!(app.download(&user, &own).await, b"content of its own");
    let trashed = app.call(Method::DELETE, "/object", Some(&user.access), Some(json!({"ids": [own]}))).await;
    assert!(trashed.status().is_success());
    let purged = app.call(Method::DELETE, "/trash", Some(&user.access), Some(json!({"ids": [own]}))).await;
    assert!(purged.status().is_success(), "purge: {}", purged.status());
    let gone = nubo_tests::settled(false, || async { dir.join("drop/own.txt").exists() }).await;
    assert!(!gone, "the purged file's bytes are deleted");
}

async fn an_import_stops_at_a_full_quota_saying_how_far_it_got(app: TestApp) {
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, PolicyKind::Local, 0).await;
    app.set_user_group(&admin, json!({"max_storage": 550})).await;
    let user = app.register("kai@example.com", "kai-password").await;
    let dir = storage_dir(&app, &policy);
    for i in 0..10 {
        place(&dir, &format!("big/f{i}.bin"), &[i as u8; 100]);
    }
    let done = import_and_wait(&app, &admin, body(&policy.id, "big", &user, "/big")).await;
    assert_eq!(done["status"], "error", "{done}");
    let error = done["error"].as_str().unwrap();
    assert!(error.contains("quota") && error.contains("imported 5 new"), "{error}");
    assert_eq!(counts(&done).0, 5);
    assert_eq!(app.storage_used(&user).await, 500);
    assert_eq!(tree_of(&app, &user.user_id).await.len(), 5, "nothing half-recorded");
    assert_eq!(files_below(&dir.join("big")).len(), 10, "sources beyond the quota are left alone");
}

async fn files_waiting_for_an_import_are_not_collected(app: TestApp) {
    use nubo_service::ops::maintenance;
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, PolicyKind::Local, 0).await;
    let user = app.register("olga@example.com", "olga-password").await;
    let dir = storage_dir(&app, &policy);
    place(&dir, "old/photo.jpg", b"from before the policy");
    let year_2020 = std::time::UNIX_EPOCH + Duration::from_secs(1_577_836_800);
    std::fs::File::options().write(true).open(dir.join("old/photo.jpg")).unwrap().set_modified(year_2020).unwrap();
    place(&dir, "stray/leftover.bin", b"written since, recorded by nobody");
    let later = nubo_model::domain::time::now_ms() + 7 * 3_600_000;
    assert_eq!(maintenance::collect_blobs(app.context(), later, maintenance::BLOB_GRACE).await.unwrap(), 1);
    assert!(dir.join("old/photo.jpg").exists(), "bytes older than their policy are not orphans");
    assert!(!dir.join("stray/leftover.bin").exists());
    let done = import_and_wait(&app, &admin, body(&policy.id, "old", &user, "/old")).await;
    assert_eq!(counts(&done), (1, 0, 0, 0));

    // A folder an import read is an import area: files added there later, with fresh times,
    // wait for the next run too; bytes nobody knows elsewhere are still collected.
    place(&dir, "old/2026/added-later.jpg", b"copied in after the import");
    place(&dir, "elsewhere/leftover.bin", b"recorded by nobody");
    let later = nubo_model::domain::time::now_ms() + 7 * 3_600_000;
    assert_eq!(maintenance::collect_blobs(app.context(), later, maintenance::BLOB_GRACE).await.unwrap(), 1);
    assert!(dir.join("old/2026/added-later.jpg").exists(), "an import area's new files are not orphans");
    assert!(!dir.join("elsewhere/leftover.bin").exists());
    let done = import_and_wait(&app, &admin, body(&policy.id, "old", &user, "/old")).await;
    assert_eq!(counts(&done), (1, 0, 1, 0), "the next run picks the added file up");
}

async fn an_import_stopped_between_files_resumes_where_it_stopped(app: TestApp) {
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, PolicyKind::Local, 0).await;
    let user = app.register("lou@example.com", "lou-password").await;
    let dir = storage_dir(&app, &policy);
    for i in 0..8 {
        place(&dir, &format!("set/f{i}.txt"), &small_content(i));
    }
    let folder = app.mkdir(&user, &app.root_id(&user).await, "set").await;
    let props = TaskProps {
        source_policy_id: policy.id.parse().ok(),
        path_or_prefix: Some("set".into()),
        user_id: user.user_id.parse().ok(),
        parent_id: folder.parse().ok(),
        ..TaskProps::default()
    };
    let owner = admin.user_id.parse().ok();
    let stopped = import::run(app.context(), owner, &props, &mut StopAfter { after: 3 }).await;
    assert!(matches!(stopped, Err(TaskFailure::Stopped)));
    assert_eq!(tree_of(&app, &user.user_id).await.len(), 3, "stopped between files, each recorded whole");

    let done = import_and_wait(&app, &admin, body(&policy.id, "set", &user, "/set")).await;
    assert_eq!(counts(&done), (5, 0, 3, 0), "the rerun finishes without redoing the first three");
    assert_eq!(tree_of(&app, &user.user_id).await.len(), 8);
}

async fn bad_import_requests_are_refused_without_a_task(app: TestApp) {
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, PolicyKind::Local, 0).await;
    let user = app.register("max@example.com", "max-password").await;
    let good = body(&policy.id, "", &user, "/imported");

    let response = app.call(Method::POST, "/admin/import", Some(&user.access), Some(good.clone())).await;
    assert_eq!(error_body(response, 403).await["code"], "auth.admin_required");
    let response = app.call(Method::POST, "/admin/import", None, Some(good.clone())).await;
    assert_eq!(response.status(), 401);
    let unknown = body(&uuid::Uuid::new_v4().to_string(), "", &user, "/imported");
    assert_eq!(error_body(start_import(&app, &admin, unknown).await, 404).await["code"], "policy.not_found");
    let mut nobody = good.clone();
    nobody["user_id"] = json!(uuid::Uuid::new_v4());
    assert_eq!(error_body(start_import(&app, &admin, nobody).await, 404).await["code"], "user.not_found");
    for climbing in ["../elsewhere", "a/../../b", "/etc"] {
        let response = start_import(&app, &admin, body(&policy.id, climbing, &user, "/imported")).await;
        assert_eq!(error_body(response, 422).await["field"], "source.path_or_prefix", "{climbing}");
    }
    let relative = start_import(&app, &admin, body(&policy.id, "", &user, "imported")).await;
    assert_eq!(error_body(relative, 422).await["field"], "dst_path");
    let root = app.root_id(&user).await;
    app.upload(&user, &root, "taken", b"a file").await;
    let in_the_way = start_import(&app, &admin, body(&policy.id, "", &user, "/taken/below")).await;
    assert_eq!(error_body(in_the_way, 409).await["code"], "import.destination_is_file");

    let node = json!({"name": "far", "base_url": "http://127.0.0.1:9", "key": "node-key-node-key-node-key-node-key!!"});
    let node: Value =
        app.call(Method::POST, "/admin/node", Some(&admin.access), Some(node)).await.json().await.unwrap();
    let on_node = json!({"name": "on node", "type": "local", "chunk_size": 65536, "node_id": node["id"]});
    let response = app.call(Method::POST, "/admin/policy", Some(&admin.access), Some(on_node)).await;
    assert_eq!(response.status(), 201);
    let on_node = response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let response = start_import(&app, &admin, body(&on_node, "", &user, "/imported")).await;
    assert_eq!(error_body(response, 422).await["code"], "import.source_unsupported");

    let tasks: Value = app.call(Method::GET, "/admin/task", Some(&admin.access), None).await.json().await.unwrap();
    assert_eq!(tasks["count"], 0, "no refused request left a task");
}

/// With no worker the task stays queued, and the administrator cancels it through either task
/// endpoint.
async fn a_queued_import_is_cancelled(backend: Backend) {
    let Some(app) = TestApp::spawn_configured(backend, |c| c.task_workers = 0).await else { return };
    let admin = app.login_admin().await;
    let policy = app.use_test_policy(&admin, PolicyKind::Local, 0).await;
    let user = app.register("ned@example.com", "ned-password").await;
    place(&storage_dir(&app, &policy), "q/a.txt", b"a");
    let response = start_import(&app, &admin, body(&policy.id, "q", &user, "/q")).await;
    assert_eq!(response.status(), 202);
    let task: Value = response.json().await.unwrap();
    assert_eq!(task["status"], "queued");
    assert_eq!(task["props"]["user_id"], user.user_id.as_str());
    let id = task["id"].as_str().unwrap();
    let mine: Value = app.call(Method::GET, "/task?type=IMPORT", Some(&admin.access), None).await.json().await.unwrap();
    assert_eq!(mine["count"], 1, "the administrator who started it sees it among their tasks");
    let response = app.call(Method::DELETE, &format!("/task/{id}"), Some(&admin.access), None).await;
    assert_eq!(response.json::<Value>().await.unwrap()["status"], "canceled");
    let again = app.call(Method::DELETE, &format!("/admin/task/{id}"), Some(&admin.access), None).await;
    assert_eq!(error_body(again, 409).await["code"], "task.finished");
    assert!(tree_of(&app, &user.user_id).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_import_is_cancelled_on_sqlite() {
    a_queued_import_is_cancelled(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_import_is_cancelled_on_postgres() {
    a_queued_import_is_cancelled(Backend::Postgres).await;
}
