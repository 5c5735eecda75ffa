//! Migrations on both backends, and concurrent writes on SQLite.

use nubo_model::db::{Backend as DbBackend, Db};
use nubo_tests::{Backend, TestApp, TestDatabase};
use reqwest::Method;
use serde_json::Value;

async fn migrations_apply_once_and_again_as_a_no_op(backend: Backend) {
    let Some(database) = TestDatabase::create(backend).await else { return };
    let db = Db::connect(&database.url, 4).await.unwrap();
    assert!(db.table_names().await.unwrap().is_empty(), "database starts empty");
    db.migrate().await.unwrap();
    let tables = db.table_names().await.unwrap();
    for table in [
        "users",
        "auth_identities",
        "groups",
        "policies",
        "objects",
        "physical_files",
        "settings",
        "theme_presets",
        "shares",
        "tasks",
        "upload_sessions",
        "webdav_accounts",
    ] {
        assert!(tables.contains(&table.to_owned()), "{table} missing after migration: {tables:?}");
    }
    let applied = db.applied_migrations().await.unwrap();
    assert_eq!(applied, db.known_migrations() as i64);
    db.migrate().await.unwrap();
    assert_eq!(db.applied_migrations().await.unwrap(), applied, "second run applies nothing");
    assert_eq!(db.table_names().await.unwrap(), tables);
    db.close().await;
}

#[tokio::test]
async fn migrations_apply_on_empty_sqlite_and_twice_is_a_no_op() {
    migrations_apply_once_and_again_as_a_no_op(Backend::Sqlite).await;
}

#[tokio::test]
async fn migrations_apply_on_empty_postgres_and_twice_is_a_no_op() {
    migrations_apply_once_and_again_as_a_no_op(Backend::Postgres).await;
}

#[tokio::test]
async fn sqlite_database_runs_in_wal_mode() {
    let app = TestApp::spawn(Backend::Sqlite).await.unwrap();
    assert_eq!(app.context().db().backend(), DbBackend::Sqlite);
    let wal = std::fs::exists(app.database.dir.path().join("nubo.db-wal")).unwrap();
    assert!(wal, "WAL file exists next to the database");
}

/// Commits leave the log to the periodic checkpoint: SQLite's own threshold is far above what
/// a burst of writes adds, and a checkpoint copies every frame while nothing reads.
#[tokio::test]
async fn sqlite_checkpoints_run_outside_the_commits() {
    let app = TestApp::spawn(Backend::Sqlite).await.unwrap();
    let db = app.context().db();
    let (threshold,): (i64,) = sqlx::query_as("PRAGMA wal_autocheckpoint").fetch_one(db.writer()).await.unwrap();
    assert!(threshold > 10_000, "a commit does not checkpoint by itself after 1000 pages: {threshold}");
    let admin = app.login_admin().await;
    // The master's own checkpoint job runs every second and may empty the log between the writes
    // and the check below: a round that found it emptied is written again.
    let mut done = db.checkpoint().await.unwrap();
    for _round in 0..5 {
        for i in 0..20 {
            let body = serde_json::json!({"site_name": format!("Nubo {i}")});
            let response = app.call(reqwest::Method::PATCH, "/admin/settings", Some(&admin.access), Some(body)).await;
            assert!(response.status().is_success(), "{}", response.status());
        }
        done = db.checkpoint().await.unwrap();
        if done.log_frames > 0 {
            break;
        }
    }
    assert!(done.log_frames > 0, "the writes are in the log: {done:?}");
    // A background job reading at that moment holds back the frames after its snapshot; once it
    // is done, a checkpoint copies every frame.
    for _ in 0..40 {
        if done.copied_frames == done.log_frames {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        done = db.checkpoint().await.unwrap();
    }
    assert_eq!(done.copied_frames, done.log_frames, "and all of them are now in the database file");
}

/// After an idle spell the log file is emptied, so the next writes go to its end instead of
/// over pages the operating system may have dropped; a reader using the log keeps it as it is.
#[tokio::test]
async fn sqlite_log_file_is_emptied_when_nothing_uses_it() {
    let app = TestApp::spawn(Backend::Sqlite).await.unwrap();
    let db = app.context().db();
    let log = app.database.dir.path().join("nubo.db-wal");
    let admin = app.login_admin().await;
    for i in 0..20 {
        let body = serde_json::json!({"site_name": format!("Nubo {i}")});
        let response = app.call(reqwest::Method::PATCH, "/admin/settings", Some(&admin.access), Some(body)).await;
        assert!(response.status().is_success(), "{}", response.status());
    }
    assert!(std::fs::metadata(&log).unwrap().len() > 0, "the writes are in the log file");

    let mut reading = db.reader().begin().await.unwrap();
    let _: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM users").fetch_one(&mut *reading).await.unwrap();
    let started = std::time::Instant::now();
    assert!(!db.empty_log().unwrap(), "a reader holds the log");
    assert!(started.elapsed() < std::time::Duration::from_secs(1), "without waiting for it");
    assert!(std::fs::metadata(&log).unwrap().len() > 0, "the log file is untouched");
    reading.commit().await.unwrap();

    // A background job may be reading at this very moment: the log empties once it is done.
    assert!(nubo_tests::settled(true, || async { db.empty_log().unwrap() }).await, "nothing uses the log now");
    assert_eq!(std::fs::metadata(&log).unwrap().len(), 0, "the log file is empty");
    let config: serde_json::Value = app.get("/site/config").await.json().await.unwrap();
    assert_eq!(config["site_name"], "Nubo 19", "every write is in the database file");
    let body = serde_json::json!({"site_name": "after"});
    let response = app.call(reqwest::Method::PATCH, "/admin/settings", Some(&admin.access), Some(body)).await;
    assert!(response.status().is_success(), "writes go on: {}", response.status());
    assert!(std::fs::metadata(&log).unwrap().len() > 0, "into the log again");
}

nubo_tests::on_every_backend!(two_hundred_concurrent_setting_writes_all_succeed);

async fn two_hundred_concurrent_setting_writes_all_succeed(app: TestApp) {
    let admin = app.login_admin().await;
    let app = std::sync::Arc::new(app);
    let writes = (0..200).map(|i| {
        let app = app.clone();
        let token = admin.access.clone();
        tokio::spawn(async move {
            let body = serde_json::json!({"footer_code": format!("footer {i}"), "site_name": format!("Nubo {i}")});
            app.call(reqwest::Method::PATCH, "/admin/settings", Some(&token), Some(body)).await.status().as_u16()
        })
    });
    let statuses: Vec<u16> = futures_util::future::join_all(writes).await.into_iter().map(Result::unwrap).collect();
    assert!(statuses.iter().all(|s| *s == 204), "not all writes succeeded: {statuses:?}");
    // Every write landed whole: footer and name come from the same request.
    let config: serde_json::Value = app.get("/site/config").await.json().await.unwrap();
    let footer = config["footer_code"].as_str().unwrap().trim_start_matches("footer ");
    let name = config["site_name"].as_str().unwrap().trim_start_matches("Nubo ");
    assert_eq!(footer, name);
}

nubo_tests::on_every_backend!(name_lookups_search_the_folder_and_name_index);

/// A look-up by folder and name (each step of a path, a WebDAV write's name check) searches the
/// `(parent_id, name)` uniqueness index; keyed on the owner first, it made such a look-up read
/// every child of the folder.
async fn name_lookups_search_the_folder_and_name_index(app: TestApp) {
    let db = app.context().db();
    match db.backend() {
        DbBackend::Sqlite => {
            let steps = sqlite_plan(
                db,
                "SELECT id FROM objects WHERE parent_id = 'folder' AND name = 'name' AND trashed_at IS NULL",
            )
            .await;
            assert_eq!(steps, ["SEARCH objects USING INDEX objects_live_name (parent_id=? AND name=?)"]);
        }
        DbBackend::Postgres => {
            let definition = index_definition(db, "objects_live_name").await;
            assert!(definition.contains("(parent_id, name) WHERE (trashed_at IS NULL)"), "{definition}");
        }
    }
}

nubo_tests::on_every_backend!(a_new_file_is_one_transaction_that_charges_shares_content_or_refuses);

/// `db::ingest::commit` (on the calling thread on SQLite, statement by statement on
/// PostgreSQL): the file, its blob reference, the owner's charge and the caller's bookkeeping
/// land together or not at all.
async fn a_new_file_is_one_transaction_that_charges_shares_content_or_refuses(app: TestApp) {
    use nubo_model::db::ingest::{self, Committed, Content, Destination, FileCommit, Refusal, Step, StepArg};
    use nubo_model::db::objects;
    let db = app.context().db();
    let admin = app.login_admin().await;
    let owner: nubo_model::domain::ids::UserId = admin.user_id.parse().unwrap();
    let root = nubo_service::tree::files::folder_entry(app.context(), owner, "/").await.unwrap();
    let root_id = nubo_model::domain::ids::ObjectId::from(root.id);
    let (policy,): (nubo_model::domain::ids::PolicyId,) =
        sqlx::query_as("SELECT id FROM policies ORDER BY id LIMIT 1").fetch_one(db.reader()).await.unwrap();
    let used = || async { nubo_model::db::users::find(db, owner).await.unwrap().unwrap().storage };
    let start = used().await;
    // `stored`: whether the content was stored under the key `blob` (else only the policy's
    // blob of the same content will do). `steps`: the caller's bookkeeping.
    let commit_as = |stored: bool,
                     name: &'static str,
                     blob: &'static str,
                     hash: &'static str,
                     (size, charge, capacity): (i64, i64, i64),
                     steps: Vec<Step>| {
        async move {
            let commit = FileCommit {
                owner_id: owner,
                destination: Destination::NewFile {
                    object_id: nubo_model::domain::ids::ObjectId::random(),
                    parent_id: root_id,
                    name: name.to_owned(),
                },
                content: Content {
                    blob_id: blob.to_owned(),
                    policy_id: policy,
                    storage_key: stored.then(|| blob.to_owned()),
                    size,
                    blake3: hash.to_owned(),
                    hashed_whole: false,
                },
                charge,
                capacity,
                first_steps: Vec::new(),
                steps,
            };
            ingest::commit(db, &commit, 1_000).await
        }
    };
    let create =
        |name, blob, hash, size, charge, capacity| commit_as(true, name, blob, hash, (size, charge, capacity), vec![]);
    let refer =
        |name, blob, hash, size, charge, capacity| commit_as(false, name, blob, hash, (size, charge, capacity), vec![]);
    let stored = |blob: &str, duplicate: bool| Ok(Committed { blob_id: blob.to_owned(), duplicate, released: None });
    let child = |name: &'static str| async move { objects::child_by_name(db, root_id, name).await.unwrap() };
    let blob = |id: &'static str| async move { nubo_model::db::blobs::find(db, id).await.unwrap() };

    // A new file with new content: stored, charged, one reference.
    assert_eq!(create("a.txt", "blob-a", "hash-1", 60, 60, start + 100).await.unwrap(), stored("blob-a", false));
    assert_eq!(used().await, start + 60);
    assert_eq!(child("a.txt").await.unwrap().physical_file_id.as_deref(), Some("blob-a"));
    assert_eq!(blob("blob-a").await.unwrap().ref_count, 1);

    // The same content again: the file refers to the first blob, whose count goes up; no new row.
    assert_eq!(create("b.txt", "blob-b", "hash-1", 60, 60, start + 200).await.unwrap(), stored("blob-a", true));
    assert_eq!(child("b.txt").await.unwrap().physical_file_id.as_deref(), Some("blob-a"));
    assert_eq!(blob("blob-a").await.unwrap().ref_count, 2);
    assert!(blob("blob-b").await.is_none());
    assert_eq!(used().await, start + 120);

    // A charge beyond the capacity: nothing at all is written.
    assert_eq!(create("c.txt", "blob-c", "hash-3", 60, 60, start + 150).await.unwrap(), Err(Refusal::QuotaExceeded));
    assert!(child("c.txt").await.is_none());
    assert!(blob("blob-c").await.is_none());
    assert_eq!(used().await, start + 120);

    // A name already taken: a unique violation, and the charge and the blob are rolled back.
    let clash = create("a.txt", "blob-d", "hash-4", 10, 10, i64::MAX).await.unwrap_err();
    assert!(clash.is_unique_violation(), "{clash:?}");
    assert!(blob("blob-d").await.is_none());
    assert_eq!(used().await, start + 120);

    // The writer is usable after the failure; a reservation larger than the file is given back.
    assert_eq!(create("e.txt", "blob-e", "hash-5", 5, -15, start + 120).await.unwrap(), stored("blob-e", false));
    assert_eq!(used().await, start + 105);
    assert_eq!(child("e.txt").await.unwrap().size, 5);

    // Nothing stored, content the policy holds: the file refers to that blob, and is charged.
    let holds = |hash: &'static str, size: i64| async move {
        nubo_model::db::blobs::holds_content(db, policy, owner, hash, size).await.unwrap()
    };
    assert!(holds("hash-1", 60).await);
    assert!(!holds("hash-1", 61).await, "the size is part of the content");
    assert_eq!(refer("f.txt", "blob-f", "hash-1", 60, 60, i64::MAX).await.unwrap(), stored("blob-a", true));
    assert_eq!(child("f.txt").await.unwrap().physical_file_id.as_deref(), Some("blob-a"));
    assert_eq!(blob("blob-a").await.unwrap().ref_count, 3);
    assert!(blob("blob-f").await.is_none());
    assert_eq!(used().await, start + 165);

    // Nothing stored and no such content, or the charge does not fit: nothing at all is written.
    assert!(!holds("hash-9", 60).await);
    assert_eq!(refer("g.txt", "blob-g", "hash-9", 60, 60, i64::MAX).await.unwrap(), Err(Refusal::NotReferenced));
    assert_eq!(refer("h.txt", "blob-h", "hash-1", 60, 60, start + 200).await.unwrap(), Err(Refusal::QuotaExceeded));
    for name in ["g.txt", "h.txt"] {
        assert!(child(name).await.is_none(), "{name} was created");
    }
    assert!(blob("blob-g").await.is_none());
    assert_eq!(blob("blob-a").await.unwrap().ref_count, 3);
    assert_eq!(used().await, start + 165);

    // A required bookkeeping step that changes no row (settled elsewhere first): the file, the
    // blob, its reference and the charge are all rolled back. One that changes a row commits.
    let settled_elsewhere = || Step {
        sql: "UPDATE users SET nickname = nickname WHERE id = $1",
        args: vec![StepArg::Text("no-such-user".to_owned())],
        required: true,
    };
    let superseded = commit_as(true, "i.txt", "blob-i", "hash-1", (60, 60, i64::MAX), vec![settled_elsewhere()]);
    assert_eq!(superseded.await.unwrap(), Err(Refusal::Superseded));
    let superseded = commit_as(true, "j.txt", "blob-j", "hash-10", (60, 60, i64::MAX), vec![settled_elsewhere()]);
    assert_eq!(superseded.await.unwrap(), Err(Refusal::Superseded));
    for name in ["i.txt", "j.txt"] {
        assert!(child(name).await.is_none(), "{name} was created");
    }
    assert!(blob("blob-j").await.is_none());
    assert_eq!(blob("blob-a").await.unwrap().ref_count, 3);
    assert_eq!(used().await, start + 165);
    let recorded = Step {
        sql: "UPDATE users SET storage = storage + 1000 + $2 WHERE id = $1",
        args: vec![StepArg::Text(owner.to_string()), StepArg::KeepsNewBlob],
        required: true,
    };
    let kept = commit_as(true, "k.txt", "blob-k", "hash-1", (60, 60, i64::MAX), vec![recorded]);
    assert_eq!(kept.await.unwrap(), stored("blob-a", true));
    // 60 for the file, 1000 + 0 by the step: the file does not keep the new blob.
    assert_eq!(used().await, start + 165 + 60 + 1000);
}

nubo_tests::on_every_backend!(only_trashed_objects_are_in_the_trash_index);

/// The trash index holds trashed objects only (a new file does not write to it), and the trash
/// look-ups, which all name a trash root, still search it.
async fn only_trashed_objects_are_in_the_trash_index(app: TestApp) {
    let db = app.context().db();
    match db.backend() {
        DbBackend::Sqlite => {
            let definition = index_definition(db, "objects_trash").await;
            assert!(definition.ends_with("WHERE trash_root_id IS NOT NULL"), "{definition}");
            // The trash listing's look-up (`db::objects::trash_roots`).
            let steps = sqlite_plan(db, "SELECT id FROM objects WHERE owner_id = 'owner' AND trash_root_id = id").await;
            assert_eq!(steps, ["SEARCH objects USING INDEX objects_trash (owner_id=?)"]);
        }
        DbBackend::Postgres => {
            let definition = index_definition(db, "objects_trash").await;
            assert!(definition.ends_with("WHERE (trash_root_id IS NOT NULL)"), "{definition}");
        }
    }
}

nubo_tests::on_every_backend!(a_search_reads_the_owners_search_index_in_its_order);

/// A search's page (`db::objects::search`) reads one owner's live entries of `objects_search`
/// in key order, testing the pattern on the index entry alone: no table row, no sort.
async fn a_search_reads_the_owners_search_index_in_its_order(app: TestApp) {
    let db = app.context().db();
    match db.backend() {
        DbBackend::Sqlite => {
            let steps = sqlite_plan(
                db,
                "SELECT id FROM objects WHERE owner_id = 'owner' AND name_key LIKE '%a%' ESCAPE '\\' \
                 AND trashed_at IS NULL AND name_key <> '' ORDER BY name_key, kind, id LIMIT 50",
            )
            .await;
            assert_eq!(steps, ["SEARCH objects USING COVERING INDEX objects_search (owner_id=?)"]);
        }
        DbBackend::Postgres => {
            let definition = index_definition(db, "objects_search").await;
            assert!(
                definition.contains("(owner_id, name_key, kind, id, parent_id, trashed_at) WHERE (trashed_at IS NULL)"),
                "{definition}"
            );
            // PostgreSQL here has contrib's pg_trgm, so the migration enabled it.
            let trigrams = index_definition(db, "objects_search_trigrams").await;
            assert!(trigrams.contains("gin (name_key gin_trgm_ops) WHERE (trashed_at IS NULL)"), "{trigrams}");
        }
    }
}

nubo_tests::on_every_backend!(objects_from_before_search_get_their_search_keys_at_start);

/// Rows written before search keys existed have none; the master writes them when it starts.
async fn objects_from_before_search_get_their_search_keys_at_start(mut app: TestApp) {
    let ann = app.register("ann@example.com", "ann-password-1").await;
    let root = app.root_id(&ann).await;
    app.upload(&ann, &root, "Ärger.txt", b"old").await;
    sqlx::query("UPDATE objects SET name_key = NULL").execute(app.context().db().writer()).await.unwrap();
    async fn found(app: &TestApp, access: &str) -> i64 {
        let page: Value = app.call(Method::GET, "/search?q=%C3%A4rger", Some(access), None).await.json().await.unwrap();
        page["count"].as_i64().unwrap()
    }
    assert_eq!(found(&app, &ann.access).await, 0, "a row without a key is not found");
    app.restart().await;
    assert_eq!(found(&app, &ann.access).await, 1);
    let (left,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM objects WHERE name_key IS NULL")
        .fetch_one(app.context().db().reader())
        .await
        .unwrap();
    assert_eq!(left, 0);
}

/// The steps of SQLite's plan for `query`.
async fn sqlite_plan(db: &Db, query: &str) -> Vec<String> {
    let plan: Vec<(i64, i64, i64, String)> =
        sqlx::query_as(&format!("EXPLAIN QUERY PLAN {query}")).fetch_all(db.reader()).await.unwrap();
    plan.into_iter().map(|row| row.3).collect()
}

/// How the database defines the index `name` (`CREATE INDEX ...`).
async fn index_definition(db: &Db, name: &str) -> String {
    let query = match db.backend() {
        DbBackend::Sqlite => "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = $1",
        DbBackend::Postgres => "SELECT indexdef FROM pg_indexes WHERE indexname = $1 AND schemaname = current_schema()",
    };
    let (definition,): (String,) = sqlx::query_as(query).bind(name).fetch_one(db.reader()).await.unwrap();
    definition
}

/// An in-memory SQLite database exists once per connection: the master's readers, writer and
/// statements on the calling thread would each see another one.
#[tokio::test]
async fn an_in_memory_sqlite_database_is_refused() {
    for url in ["sqlite::memory:", "sqlite://nubo.db?mode=memory"] {
        let refused = Db::connect(url, 2).await;
        assert!(matches!(refused, Err(nubo_model::db::DbError::UnsupportedUrl(_))), "{url}: {refused:?}");
    }
}

/// A write on the calling thread does not wait on that thread for a write lock another
/// connection holds: the runtime goes on (here a current-thread runtime, which the write would
/// otherwise stall until its busy timeout), and the write commits once the lock is free.
#[tokio::test]
async fn an_inline_write_waits_for_a_busy_database_without_holding_the_thread() {
    use nubo_model::db::{Arg, inline};
    let app = TestApp::spawn(Backend::Sqlite).await.unwrap();
    let db = app.context().db().clone();
    let mut holder = db.writer().acquire().await.unwrap();
    sqlx::query("BEGIN IMMEDIATE").execute(&mut *holder).await.unwrap();
    let started = std::time::Instant::now();
    let write = {
        let db = db.clone();
        tokio::spawn(async move {
            let key = Arg::Text("inline-write-test");
            let sql = "INSERT INTO settings (name, type, value, updated_at) VALUES ($1, 'string', 'written', 0)";
            db.inline().expect("SQLite runs statements inline").write(|conn| inline::execute(conn, sql, &[key])).await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!write.is_finished(), "the write waits while the lock is held");
    sqlx::query("COMMIT").execute(&mut *holder).await.unwrap();
    drop(holder);
    assert_eq!(write.await.unwrap().unwrap(), 1);
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "it went ahead once the lock was free");
    let (value,): (String,) = sqlx::query_as("SELECT value FROM settings WHERE name = 'inline-write-test'")
        .fetch_one(db.reader())
        .await
        .unwrap();
    assert_eq!(value, "written");
}

nubo_tests::on_every_backend!(concurrent_writers_of_every_kind_never_answer_a_server_error);

/// Four clients moving and renaming files (write transactions that read first) while two write
/// through WebDAV (SQLite's inline writer) and one changes settings: on SQLite a deferred
/// transaction met another connection's commit and failed with "database is locked" (517).
async fn concurrent_writers_of_every_kind_never_answer_a_server_error(app: TestApp) {
    let (session, dav) = app.dav_user("writers@example.com", "box").await;
    let admin = app.login_admin().await;
    let root = app.root_id(&session).await;
    let (left, right) = (app.mkdir(&session, &root, "left").await, app.mkdir(&session, &root, "right").await);
    let mut files = Vec::new();
    for i in 0..4 {
        files.push(app.upload(&session, &left, &format!("f{i}.txt"), b"x").await["id"].as_str().unwrap().to_owned());
    }
    let app = std::sync::Arc::new(app);
    let dav = std::sync::Arc::new(dav);
    let mut tasks = Vec::new();
    for (i, file) in files.into_iter().enumerate() {
        let (app, token, left, right) = (app.clone(), session.access.clone(), left.clone(), right.clone());
        tasks.push(tokio::spawn(async move {
            let mut statuses = Vec::new();
            for round in 0..60 {
                let target = if round % 2 == 0 { &right } else { &left };
                let body = serde_json::json!({"src_ids": [file], "dst_id": target});
                statuses.push(app.call(Method::PATCH, "/object", Some(&token), Some(body)).await.status().as_u16());
                let body = serde_json::json!({"name": format!("f{i} round {round}.txt")});
                let path = format!("/object/{file}");
                statuses.push(app.call(Method::PATCH, &path, Some(&token), Some(body)).await.status().as_u16());
            }
            statuses
        }));
    }
    for writer in 0..2 {
        let dav = dav.clone();
        tasks.push(tokio::spawn(async move {
            let mut statuses = Vec::new();
            for round in 0..60 {
                let response = dav.put(&format!("/dav-{writer}-{round}.txt"), format!("written {round}")).await;
                statuses.push(response.status().as_u16());
            }
            statuses
        }));
    }
    let (app_for_settings, token) = (app.clone(), admin.access.clone());
    tasks.push(tokio::spawn(async move {
        let mut statuses = Vec::new();
        for round in 0..60 {
            let body = serde_json::json!({"site_name": format!("Nubo {round}")});
            let response = app_for_settings.call(Method::PATCH, "/admin/settings", Some(&token), Some(body)).await;
            statuses.push(response.status().as_u16());
        }
        statuses
    }));
    let statuses: Vec<u16> = futures_util::future::join_all(tasks).await.into_iter().flat_map(Result::unwrap).collect();
    let failed: Vec<&u16> = statuses.iter().filter(|s| **s >= 500).collect();
    assert!(failed.is_empty(), "{} of {} writes failed: {failed:?}", failed.len(), statuses.len());
    assert!(statuses.iter().all(|s| (200..300).contains(s)), "every write succeeded: {statuses:?}");
}
