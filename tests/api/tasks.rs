//! Background tasks and storage-policy migration.

use std::time::Duration;

use nubo_model::domain::task::TaskProps;
use nubo_service::content::migration;
use nubo_service::tasks::run::TaskFailure;
use nubo_tests::files::{PolicyKind, StopAfter, TestPolicy, content};
use nubo_tests::{Session, TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    cancelling_a_running_migration_stops_it_between_files,
    a_folder_migrates_local_to_s3_and_back_byte_for_byte,
    a_deduplicated_blob_migrates_once,
    migration_to_a_policy_the_caller_may_not_use_is_refused_without_a_task,
    two_masters_on_one_database_run_each_task_once,
    a_migration_stopped_midway_leaves_everything_readable_and_resumes,
    the_collector_and_the_trash_purge_take_what_they_must_and_nothing_else
);

/// Local policy (64 KiB chunks) and an S3 policy, both usable by the `Users` group.
async fn two_policies(app: &TestApp, admin: &Session) -> (TestPolicy, TestPolicy) {
    let s3 = app.use_test_policy(admin, PolicyKind::S3, 0).await;
    let local = app.use_test_policy(admin, PolicyKind::Local, 0).await;
    app.set_user_group(admin, json!({"policy_ids": [local.id, s3.id]})).await;
    (local, s3)
}

async fn wait_for(app: &TestApp, user: &Session, task: &str, status: &str) -> Value {
    for _ in 0..600 {
        let view: Value =
            app.call(Method::GET, &format!("/task/{task}"), Some(&user.access), None).await.json().await.unwrap();
        if view["status"] == status {
            return view;
        }
        assert!(
            !["error", "canceled", "completed"].contains(&view["status"].as_str().unwrap()) || view["status"] == status,
            "task ended as {view}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {task} never reached {status}");
}

async fn migrate(app: &TestApp, user: &Session, object: &str, policy: &str) -> String {
    let response = app
        .call(
            Method::PATCH,
            &format!("/object/{object}/policy"),
            Some(&user.access),
            Some(json!({"policy_id": policy})),
        )
        .await;
    assert_eq!(response.status(), 202, "migration accepted");
    response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned()
}

async fn policy_of(app: &TestApp, user: &Session, object: &str) -> String {
    let detail: Value = app
        .call(Method::GET, &format!("/object/{object}/detail"), Some(&user.access), None)
        .await
        .json()
        .await
        .unwrap();
    detail["policy"]["id"].as_str().unwrap().to_owned()
}

async fn blob_count(app: &TestApp, policy: &str) -> i64 {
    nubo_model::db::blobs::count_for_policy(app.context().db(), policy.parse().unwrap()).await.unwrap()
}

/// A folder with nested files: (id, bytes) of each file and the folder's id.
async fn nested_tree(app: &TestApp, user: &Session, chunk: usize) -> (String, Vec<(String, Vec<u8>)>) {
    let root = app.root_id(user).await;
    let top = app.mkdir(user, &root, "project").await;
    let inner = app.mkdir(user, &top, "inner").await;
    let mut files = Vec::new();
    for (i, (parent, size)) in
        [(&top, 10), (&top, 3 * chunk + 7), (&inner, 0), (&inner, chunk), (&inner, 12_345)].iter().enumerate()
    {
        let bytes = content(*size, i as u8);
        let object = app.upload(user, parent, &format!("file-{i}.bin"), &bytes).await;
        files.push((object["id"].as_str().unwrap().to_owned(), bytes));
    }
    (top, files)
}

async fn a_folder_migrates_local_to_s3_and_back_byte_for_byte(app: TestApp) {
    let admin = app.login_admin().await;
    let (local, s3) = two_policies(&app, &admin).await;
    let user = app.register("mia@example.com", "mia-password").await;
    let (folder, files) = nested_tree(&app, &user, local.chunk).await;
    let used = app.storage_used(&user).await;

    let task = migrate(&app, &user, &folder, &s3.id).await;
    let done = wait_for(&app, &user, &task, "completed").await;
    assert_eq!(done["type"], "POLICY_MIGRATE");
    assert_eq!(done["props"]["object_id"], folder.as_str());
    assert_eq!(done["progress"]["files_done"], files.len());
    assert_eq!(done["progress"]["bytes_done"], done["progress"]["bytes_total"]);
    for (id, bytes) in &files {
        assert_eq!(policy_of(&app, &user, id).await, s3.id);
        assert_eq!(&app.download(&user, id).await, bytes);
    }
    assert_eq!(blob_count(&app, &local.id).await, 0);
    assert_eq!(local.stored_blobs(&app), 0, "old blobs released");
    assert_eq!(s3.stored_blobs(&app), files.len());
    assert_eq!(app.storage_used(&user).await, used, "quota unchanged");

    let back = migrate(&app, &user, &folder, &local.id).await;
    wait_for(&app, &user, &back, "completed").await;
    for (id, bytes) in &files {
        assert_eq!(policy_of(&app, &user, id).await, local.id);
        assert_eq!(&app.download(&user, id).await, bytes);
    }
    assert_eq!(s3.stored_blobs(&app), 0);
    assert_eq!(local.stored_blobs(&app), files.len());
}

async fn a_deduplicated_blob_migrates_once(app: TestApp) {
    let admin = app.login_admin().await;
    let (local, s3) = two_policies(&app, &admin).await;
    let user = app.register("noor@example.com", "noor-password").await;
    let root = app.root_id(&user).await;
    let folder = app.mkdir(&user, &root, "dups").await;
    let bytes = content(2 * local.chunk + 1, 42);
    let a = app.upload(&user, &folder, "a.bin", &bytes).await;
    let b = app.upload(&user, &folder, "b.bin", &bytes).await;
    assert_eq!(blob_count(&app, &local.id).await, 1);
    let task = migrate(&app, &user, &folder, &s3.id).await;
    wait_for(&app, &user, &task, "completed").await;
    assert_eq!(blob_count(&app, &s3.id).await, 1, "one blob on the target, shared by both");
    assert_eq!(s3.stored_blobs(&app), 1);
    assert_eq!(blob_count(&app, &local.id).await, 0);
    for object in [&a, &b] {
        assert_eq!(app.download(&user, object["id"].as_str().unwrap()).await, bytes);
    }
}

async fn migration_to_a_policy_the_caller_may_not_use_is_refused_without_a_task(app: TestApp) {
    let admin = app.login_admin().await;
    let s3 = app.use_test_policy(&admin, PolicyKind::S3, 0).await;
    app.use_test_policy(&admin, PolicyKind::Local, 0).await;
    let user = app.register("omar@example.com", "omar-password").await;
    let root = app.root_id(&user).await;
    let file = app.upload(&user, &root, "f.txt", b"data").await;
    let response = app
        .call(
            Method::PATCH,
            &format!("/object/{}/policy", file["id"].as_str().unwrap()),
            Some(&user.access),
            Some(json!({"policy_id": s3.id})),
        )
        .await;
    assert_eq!(error_body(response, 403).await["code"], "policy.not_allowed");
    let tasks: Value = app.call(Method::GET, "/task", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(tasks["count"], 0);
    let all: Value = app.call(Method::GET, "/admin/task", Some(&admin.access), None).await.json().await.unwrap();
    assert_eq!(all["count"], 0);
}

async fn two_masters_on_one_database_run_each_task_once(app: TestApp) {
    let admin = app.login_admin().await;
    let (local, s3) = two_policies(&app, &admin).await;
    let peer = app.spawn_peer().await;
    let user = app.register("pam@example.com", "pam-password").await;
    let root = app.root_id(&user).await;
    let mut tasks = Vec::new();
    for i in 0..6 {
        let file = app.upload(&user, &root, &format!("f{i}.bin"), &content(local.chunk + i, i as u8)).await;
        tasks.push(migrate(&app, &user, file["id"].as_str().unwrap(), &s3.id).await);
    }
    for task in &tasks {
        let done = wait_for(&app, &user, task, "completed").await;
        assert_eq!(done["attempts"], 1, "claimed exactly once: {done}");
    }
    assert_eq!(blob_count(&app, &s3.id).await, 6);
    assert_eq!(s3.stored_blobs(&app), 6, "no file was copied twice");
    peer.shutdown(Duration::from_secs(10)).await.unwrap();
}

async fn a_migration_stopped_midway_leaves_everything_readable_and_resumes(app: TestApp) {
    let admin = app.login_admin().await;
    let (local, s3) = two_policies(&app, &admin).await;
    let user = app.register("quin@example.com", "quin-password").await;
    let (folder, files) = nested_tree(&app, &user, local.chunk).await;
    let owner = user.user_id.parse().ok();
    let props =
        TaskProps { object_id: folder.parse().ok(), target_policy_id: s3.id.parse().ok(), ..TaskProps::default() };
    let stopped = migration::run(app.context(), owner, &props, &mut StopAfter { after: 2 }).await;
    assert!(matches!(stopped, Err(TaskFailure::Stopped)));
    let mut moved = 0;
    for (id, bytes) in &files {
        if policy_of(&app, &user, id).await == s3.id {
            moved += 1;
        }
        assert_eq!(&app.download(&user, id).await, bytes, "readable wherever it is");
    }
    assert_eq!(moved, 2);
    // Running it again finishes the job without redoing the first two.
    let task = migrate(&app, &user, &folder, &s3.id).await;
    wait_for(&app, &user, &task, "completed").await;
    for (id, bytes) in &files {
        assert_eq!(policy_of(&app, &user, id).await, s3.id);
        assert_eq!(&app.download(&user, id).await, bytes);
    }
    assert_eq!(s3.stored_blobs(&app), files.len());
    assert_eq!(local.stored_blobs(&app), 0);
}

async fn a_queued_task_cancels_at_once_and_ended_tasks_refuse(backend: nubo_tests::Backend) {
    // No workers: the task stays queued until cancelled.
    let Some(app) = TestApp::spawn_configured(backend, |c| c.task_workers = 0).await else { return };
    let admin = app.login_admin().await;
    let (local, s3) = two_policies(&app, &admin).await;
    let user = app.register("rosa@example.com", "rosa-password").await;
    let root = app.root_id(&user).await;
    let file = app.upload(&user, &root, "f.bin", b"x").await;
    let id = migrate(&app, &user, file["id"].as_str().unwrap(), &s3.id).await;
    let queued: Value =
        app.call(Method::GET, &format!("/task/{id}"), Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(queued["status"], "queued");
    let other = app.register("sven@example.com", "sven-password").await;
    assert_eq!(app.call(Method::GET, &format!("/task/{id}"), Some(&other.access), None).await.status(), 404);
    assert_eq!(app.call(Method::DELETE, &format!("/task/{id}"), Some(&other.access), None).await.status(), 404);

    let response = app.call(Method::DELETE, &format!("/task/{id}"), Some(&user.access), None).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap()["status"], "canceled");
    let again = app.call(Method::DELETE, &format!("/task/{id}"), Some(&user.access), None).await;
    assert_eq!(error_body(again, 409).await["code"], "task.finished");
    assert_eq!(policy_of(&app, &user, file["id"].as_str().unwrap()).await, local.id, "nothing moved");
    let listed: Value = app
        .call(Method::GET, "/admin/task?type=POLICY_MIGRATE&status=canceled", Some(&admin.access), None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["count"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_task_cancels_at_once_on_sqlite() {
    a_queued_task_cancels_at_once_and_ended_tasks_refuse(nubo_tests::Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_task_cancels_at_once_on_postgres() {
    a_queued_task_cancels_at_once_and_ended_tasks_refuse(nubo_tests::Backend::Postgres).await;
}

async fn the_collector_and_the_trash_purge_take_what_they_must_and_nothing_else(app: TestApp) {
    use nubo_service::ops::maintenance;
    let admin = app.login_admin().await;
    let local = app.use_test_policy(&admin, PolicyKind::Local, 0).await;
    let user = app.register("tara@example.com", "tara-password").await;
    let root = app.root_id(&user).await;
    let kept = app.upload(&user, &root, "kept.bin", &content(1000, 1)).await;
    let old = app.upload(&user, &root, "old.bin", &content(1000, 2)).await;
    let now = nubo_model::domain::time::now_ms();
    // Nothing unreferenced: the collector takes nothing.
    assert_eq!(maintenance::collect_blobs(app.context(), now + 1, Duration::ZERO).await.unwrap(), 0);
    assert_eq!(local.stored_blobs(&app), 2);

    app.call(Method::DELETE, "/object", Some(&user.access), Some(json!({"ids": [old["id"]]}))).await;
    let day = 86_400_000;
    assert_eq!(maintenance::purge_expired_trash(app.context(), now + 29 * day).await.unwrap(), 0, "kept 30 days");
    // Each group keeps its own retention.
    app.set_user_group(&admin, json!({"trash_retention_days": 7})).await;
    assert_eq!(maintenance::purge_expired_trash(app.context(), now + 6 * day).await.unwrap(), 0);
    assert_eq!(maintenance::purge_expired_trash(app.context(), now + 8 * day).await.unwrap(), 1);
    assert_eq!(local.stored_blobs(&app), 1);
    assert_eq!(app.storage_used(&user).await, 1000);
    assert_eq!(app.download(&user, kept["id"].as_str().unwrap()).await, content(1000, 1));

    // A journalled copy that never got its reference (an interrupted migration): collected
    // once older than the grace period, not before.
    let blob = nubo_model::db::blobs::BlobRow {
        id: uuid::Uuid::new_v4().to_string(),
        policy_id: local.id.parse().unwrap(),
        storage_key: "stray/leftover.bin".into(),
        size: 3,
        blake3: None,
        ref_count: 0,
    };
    let dir = app.config.data_dir.join("small/stray");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("leftover.bin"), b"abc").unwrap();
    {
        let mut conn = app.context().db().writer().acquire().await.unwrap();
        nubo_model::db::blobs::insert(&mut conn, &blob, now).await.unwrap();
    }
    assert_eq!(
        maintenance::collect_blobs(app.context(), now + 1000, maintenance::BLOB_GRACE).await.unwrap(),
        0,
        "too young"
    );
    assert_eq!(
        maintenance::collect_blobs(app.context(), now + 7 * 3_600_000, maintenance::BLOB_GRACE).await.unwrap(),
        1
    );
    assert!(!app.config.data_dir.join("small/stray/leftover.bin").exists());
    assert_eq!(local.stored_blobs(&app), 1, "the kept file's blob stays");

    // Bytes no row knows (a crash between writing and recording): collected after the grace
    // period too, while an open upload's future key and every recorded blob are left alone.
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("unknown.bin"), b"who am I").unwrap();
    let pending = app.start_upload(&user, &root, "pending.bin", 10).await.json::<Value>().await.unwrap();
    assert!(pending["id"].is_string());
    assert_eq!(
        maintenance::collect_blobs(app.context(), now + 1000, maintenance::BLOB_GRACE).await.unwrap(),
        0,
        "too young"
    );
    assert_eq!(
        maintenance::collect_blobs(app.context(), now + 7 * 3_600_000, maintenance::BLOB_GRACE).await.unwrap(),
        1
    );
    assert!(!dir.join("unknown.bin").exists());
    let abort = app
        .call(Method::DELETE, &format!("/file/upload/{}", pending["id"].as_str().unwrap()), Some(&user.access), None)
        .await;
    assert_eq!(abort.status(), 204);
    assert_eq!(local.stored_blobs(&app), 1, "only the kept file's blob is left");
    assert_eq!(app.download(&user, kept["id"].as_str().unwrap()).await, content(1000, 1));
}

async fn cancelling_a_running_migration_stops_it_between_files(app: TestApp) {
    let admin = app.login_admin().await;
    let (local, s3) = two_policies(&app, &admin).await;
    let user = app.register("ulla@example.com", "ulla-password").await;
    let root = app.root_id(&user).await;
    let folder = app.mkdir(&user, &root, "lots").await;
    let mut files = Vec::new();
    for i in 0..30 {
        let bytes = content(1024 * 1024, i as u8);
        let object = app.upload(&user, &folder, &format!("f{i:02}.bin"), &bytes).await;
        files.push((object["id"].as_str().unwrap().to_owned(), bytes));
    }
    let task = migrate(&app, &user, &folder, &s3.id).await;
    // Cancel as soon as it runs.
    for _ in 0..400 {
        let view: Value =
            app.call(Method::GET, &format!("/task/{task}"), Some(&user.access), None).await.json().await.unwrap();
        if view["status"] != "queued" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let response = app.call(Method::DELETE, &format!("/task/{task}"), Some(&user.access), None).await;
    if response.status() == 409 {
        return; // It finished first on a fast machine; nothing left to check.
    }
    assert_eq!(response.status(), 200);
    let mut ended = Value::Null;
    for _ in 0..600 {
        let view: Value =
            app.call(Method::GET, &format!("/task/{task}"), Some(&user.access), None).await.json().await.unwrap();
        if ["canceled", "completed"].contains(&view["status"].as_str().unwrap()) {
            ended = view;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ended["status"] == "canceled" || ended["status"] == "completed", "{ended}");
    // Consistent whatever moved: every file readable, on one policy or the other, each blob
    // stored once.
    let mut on_s3 = 0;
    for (id, bytes) in &files {
        let policy = policy_of(&app, &user, id).await;
        assert!(policy == s3.id || policy == local.id);
        on_s3 += usize::from(policy == s3.id);
        assert_eq!(&app.download(&user, id).await, bytes);
    }
    assert_eq!(s3.stored_blobs(&app), on_s3);
    assert_eq!(local.stored_blobs(&app), files.len() - on_s3);
    if ended["status"] == "canceled" {
        assert!(on_s3 < files.len(), "it stopped before the end");
    } else {
        eprintln!("note: the migration completed before the cancel was noticed");
    }
}
