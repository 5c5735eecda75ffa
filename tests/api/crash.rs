//! A master killed with SIGKILL in the middle of a migration: after a restart the task is taken
//! over once its lease runs out and completes with nothing lost. And one killed during a burst
//! of uploads: no session stays stuck `finishing`, every file ends up there once, charged once.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use nubo_tests::files::{PolicyKind, TestPolicy, content};
use nubo_tests::s3::S3TestServer;
use nubo_tests::{Backend, TestApp, TestDatabase, test_config};
use reqwest::Method;
use serde_json::{Value, json};

/// The `nubo-master` binary built next to this test binary (`cargo test --workspace` builds it).
fn master_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let binary = exe.parent().and_then(|deps| deps.parent()).expect("target directory").join("nubo-master");
    assert!(binary.exists(), "{} is missing: run the suite with `cargo test --workspace`", binary.display());
    binary
}

fn start_master(config: &nubo_model::config::Config) -> Child {
    let mut command = Command::new(master_binary());
    command
        .env_clear()
        .env("NUBO_LISTEN", config.listen.to_string())
        .env("NUBO_DATA_DIR", &config.data_dir)
        .env("NUBO_DATABASE_URL", config.database_url.as_deref().unwrap())
        .env("NUBO_SECRET", config.secret.as_ref().unwrap().expose())
        .env("NUBO_ADMIN_EMAIL", &config.admin_email)
        .env("NUBO_ADMIN_PASSWORD", config.admin_password.as_ref().unwrap().expose())
        .env("NUBO_REDIS_PREFIX", &config.redis_prefix)
        .env("NUBO_TASK_LEASE_SECONDS", "2")
        .env("NUBO_TASK_POLL_MILLIS", "100")
        .env("NUBO_UPLOAD_CLAIM_LEASE_SECONDS", config.upload_claim_lease_seconds.to_string())
        .env("NUBO_LOG_LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(redis) = &config.redis_url {
        command.env("NUBO_REDIS_URL", redis);
    }
    command.spawn().expect("master process starts")
}

/// A `nubo-master` process on a fresh database and its own port (configured by `adjust`), and
/// a [`TestApp`] talking to it; `None` when the backend is unavailable.
async fn spawn_master_process(
    backend: Backend,
    adjust: impl FnOnce(&mut nubo_model::config::Config),
) -> Option<(TestApp, Child)> {
    let database = TestDatabase::create(backend).await?;
    if backend == Backend::Postgres && !nubo_tests::redis_available().await {
        return None;
    }
    let mut config = test_config(&database);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    config.listen = format!("127.0.0.1:{port}").parse().unwrap();
    adjust(&mut config);
    let master = start_master(&config);
    let app = TestApp::external(database, config);
    wait_until_up(&app).await;
    Some((app, master))
}

async fn wait_until_up(app: &TestApp) {
    for _ in 0..200 {
        if app.client.get(app.api("/site/ping")).send().await.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("master did not come up");
}

async fn task_view(app: &TestApp, token: &str, task: &str) -> Value {
    app.call(Method::GET, &format!("/task/{task}"), Some(token), None).await.json().await.unwrap()
}

async fn killed_mid_migration_resumes_after_restart(backend: Backend) {
    let Some((app, mut master)) = spawn_master_process(backend, |_| {}).await else { return };
    let config = app.config.clone();

    let admin = app.login_admin().await;
    let server = S3TestServer::start().await;
    let s3_body = json!({"name": "s3", "type": "s3", "chunk_size": 8 * 1024 * 1024,
        "options": {"endpoint": server.endpoint, "region": server.region, "bucket": server.bucket, "path_style": true,
                    "access_key": server.access_key, "secret_key": server.secret_key}});
    let s3_id = app.use_policy(&admin, s3_body).await;
    let local_body = json!({"name": "local", "type": "local", "chunk_size": 1024 * 1024, "options": {"root": "small"}});
    let local_id = app.use_policy(&admin, local_body).await;
    app.set_user_group(&admin, json!({"policy_ids": [local_id, s3_id]})).await;
    let s3 = TestPolicy { kind: PolicyKind::S3, id: s3_id.clone(), chunk: 8 * 1024 * 1024, s3: Some(server) };

    let user = app.register("uma@example.com", "uma-password").await;
    let root = app.root_id(&user).await;
    let folder = app.mkdir(&user, &root, "many").await;
    let mut files = Vec::new();
    for i in 0..40 {
        let object = app.upload(&user, &folder, &format!("f{i:02}.bin"), &content(2 * 1024 * 1024, i as u8)).await;
        files.push(object["id"].as_str().unwrap().to_owned());
    }
    let response = app
        .call(Method::PATCH, &format!("/object/{folder}/policy"), Some(&user.access), Some(json!({"policy_id": s3_id})))
        .await;
    assert_eq!(response.status(), 202);
    let task = response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();

    // Kill it with SIGKILL once some files have moved (progress is saved with each heartbeat).
    let mut progressed = false;
    for _ in 0..400 {
        let view = task_view(&app, &user.access, &task).await;
        assert_ne!(view["status"], "completed", "the migration finished before the kill: make the files bigger");
        if view["progress"]["files_done"].as_u64().unwrap_or(0) >= 2 {
            progressed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(progressed, "the migration made no progress");
    master.kill().expect("SIGKILL");
    master.wait().expect("reaped");

    let mut master = start_master(&config);
    wait_until_up(&app).await;
    let mut finished = Value::Null;
    for _ in 0..1200 {
        let view = task_view(&app, &user.access, &task).await;
        if view["status"] == "completed" {
            finished = view;
            break;
        }
        assert!(view["status"] == "running" || view["status"] == "queued", "task ended badly: {view}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(finished["status"], "completed", "the task completed after the restart");
    assert!(finished["attempts"].as_i64().unwrap() >= 2, "it was taken over: {finished}");
    for (i, id) in files.iter().enumerate() {
        let detail: Value = app
            .call(Method::GET, &format!("/object/{id}/detail"), Some(&user.access), None)
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(detail["policy"]["id"], s3_id.as_str(), "file {i} moved");
        assert_eq!(app.download(&user, id).await, content(2 * 1024 * 1024, i as u8), "file {i} intact");
    }
    master.kill().expect("stop");
    master.wait().expect("reaped");

    // At most the one copy that was in flight is left over, journalled for the collector,
    // which takes it once its grace period has passed.
    let TestApp { database, config, .. } = app;
    let collector = TestApp::spawn_with(database, config).await;
    let later = nubo_model::domain::time::now_ms() + 7 * 3_600_000;
    let collected = nubo_service::ops::maintenance::collect_blobs(
        collector.context(),
        later,
        nubo_service::ops::maintenance::BLOB_GRACE,
    )
    .await
    .unwrap();
    assert!(collected <= 1, "{collected} leftovers");
    assert_eq!(s3.stored_blobs(&collector), files.len(), "exactly one blob per file on S3");
    let local_left =
        nubo_model::db::blobs::count_for_policy(collector.context().db(), local_id.parse().unwrap()).await.unwrap();
    assert_eq!(local_left, 0, "every old blob released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_mid_migration_resumes_after_restart_on_sqlite() {
    killed_mid_migration_resumes_after_restart(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_mid_migration_resumes_after_restart_on_postgres() {
    killed_mid_migration_resumes_after_restart(Backend::Postgres).await;
}

/// Sessions of the database at `url` in `finishing` or `aborting`.
async fn claimed_sessions(url: &str) -> i64 {
    let db = nubo_model::db::Db::connect(url, 1).await.expect("database");
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM upload_sessions WHERE status IN ('finishing', 'aborting')")
        .fetch_one(db.reader())
        .await
        .unwrap();
    n
}

/// Opens a session for file `i` of the burst and sends its only chunk; answers the session id
/// (when the answer came) and whether the file was created. A master killed meanwhile cuts
/// either request off.
async fn upload_one(app: &TestApp, token: &str, folder: &str, i: usize) -> (Option<String>, bool) {
    let body = json!({"file_name": format!("f{i:03}.bin"), "file_size": BURST_FILE, "parent_id": folder});
    let created = app.request(Method::POST, "/file/upload").bearer_auth(token).json(&body).send().await;
    let Ok(created) = created else { return (None, false) };
    assert_eq!(created.status(), 201, "session of file {i}");
    let Some(id) = created.json::<Value>().await.ok().and_then(|s| s["id"].as_str().map(str::to_owned)) else {
        return (None, false);
    };
    let sent = app
        .request(Method::PUT, &format!("/file/upload/{id}/0"))
        .bearer_auth(token)
        .body(content(BURST_FILE, i as u8))
        .send()
        .await;
    let done = sent.is_ok_and(|answer| answer.status() == 200);
    (Some(id), done)
}

const BURST_FILES: usize = 120;
const BURST_FILE: usize = 20 * 1024;

async fn killed_during_an_upload_burst_leaves_no_upload_stuck(backend: Backend) {
    let Some((app, mut master)) = spawn_master_process(backend, |config| config.upload_claim_lease_seconds = 2).await
    else {
        return;
    };
    let config = app.config.clone();
    let admin = app.login_admin().await;
    app.use_small_chunks(&admin, 0).await;
    let user = app.register("ugo@example.com", "ugo-password").await;
    let root = app.root_id(&user).await;
    let folder = app.mkdir(&user, &root, "burst").await;

    // 120 single-chunk uploads, eight at a time; SIGKILL once a third of them are done.
    let app = Arc::new(app);
    let finished = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(tokio::sync::Semaphore::new(8));
    let burst: Vec<_> = (0..BURST_FILES)
        .map(|i| {
            let (app, token, folder) = (app.clone(), user.access.clone(), folder.clone());
            let (finished, gate) = (finished.clone(), gate.clone());
            tokio::spawn(async move {
                let _turn = gate.acquire().await.unwrap();
                let outcome = upload_one(&app, &token, &folder, i).await;
                if outcome.1 {
                    finished.fetch_add(1, Ordering::SeqCst);
                }
                outcome
            })
        })
        .collect();
    for _ in 0..2000 {
        if finished.load(Ordering::SeqCst) >= BURST_FILES / 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    master.kill().expect("SIGKILL");
    master.wait().expect("reaped");
    let outcomes: Vec<(Option<String>, bool)> =
        futures_util::future::join_all(burst).await.into_iter().map(Result::unwrap).collect();
    let done = outcomes.iter().filter(|(_, done)| *done).count();
    assert!(done < BURST_FILES, "the burst finished before the kill: make it bigger");
    let stuck = claimed_sessions(&app.database.url).await;
    eprintln!("killed with {done} of {BURST_FILES} uploads done and {stuck} sessions claimed");

    // After the restart the client resumes what it knows: the claims of the dead master are
    // taken over once their lease ran out (by the retry or by the reaper), never refused for good.
    let mut master = start_master(&config);
    wait_until_up(&app).await;
    for (i, (id, done)) in outcomes.iter().enumerate() {
        if *done {
            continue;
        }
        let Some(id) = id else {
            // The session's answer was lost (its reservation expires with it): upload anew.
            app.upload(&user, &folder, &format!("f{i:03}.bin"), &content(BURST_FILE, i as u8)).await;
            continue;
        };
        let mut settled = false;
        for _ in 0..200 {
            let answer = app.put_chunk(&user, id, 0, content(BURST_FILE, i as u8)).await;
            match answer.status().as_u16() {
                // Finished by this retry, or by the reaper before it.
                200 | 404 => {
                    settled = true;
                    break;
                }
                409 => tokio::time::sleep(Duration::from_millis(50)).await,
                other => panic!("file {i}: {other} {}", answer.text().await.unwrap_or_default()),
            }
        }
        assert!(settled, "upload {i} stayed refused after the restart");
    }
    let listing: Value = app
        .call(Method::GET, &format!("/directory/burst?limit={}", 2 * BURST_FILES), Some(&user.access), None)
        .await
        .json()
        .await
        .unwrap();
    let files = listing["items"].as_array().unwrap();
    let names: Vec<&str> = files.iter().map(|f| f["name"].as_str().unwrap()).collect();
    let expected: Vec<String> = (0..BURST_FILES).map(|i| format!("f{i:03}.bin")).collect();
    assert_eq!(names, expected, "every file exactly once");
    for (i, file) in files.iter().enumerate() {
        assert_eq!(app.download(&user, file["id"].as_str().unwrap()).await, content(BURST_FILE, i as u8), "file {i}");
    }
    assert_eq!(claimed_sessions(&app.database.url).await, 0, "no session left claimed");
    master.kill().expect("stop");
    master.wait().expect("reaped");

    // Sessions whose answer was lost hold their reservation until they expire; after that the
    // user is charged exactly for the files.
    let app = Arc::into_inner(app).expect("the burst is over");
    let TestApp { database, config, .. } = app;
    let app = TestApp::spawn_with(database, config).await;
    let later =
        nubo_model::domain::time::now_ms() + nubo_service::content::uploads::SESSION_LIFETIME.as_millis() as i64 + 1;
    nubo_service::content::uploads::reap_expired(app.context(), later).await.unwrap();
    assert_eq!(app.storage_used(&user).await, (BURST_FILES * BURST_FILE) as i64, "charged once per file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_during_an_upload_burst_leaves_no_upload_stuck_on_sqlite() {
    killed_during_an_upload_burst_leaves_no_upload_stuck(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_during_an_upload_burst_leaves_no_upload_stuck_on_postgres() {
    killed_during_an_upload_burst_leaves_no_upload_stuck(Backend::Postgres).await;
}
