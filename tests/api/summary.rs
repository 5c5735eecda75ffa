//! `GET /admin/summary`: every figure equals what the test created, counted independently.

use std::time::Duration;

use nubo_tests::files::content;
use nubo_tests::{Session, TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    summary_figures_equal_what_the_test_created,
    summary_is_for_administrators_only,
    the_series_covers_thirty_days_ending_today
);

async fn summary(app: &TestApp, admin: &Session) -> Value {
    let response = app.call(Method::GET, "/admin/summary", Some(&admin.access), None).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

async fn json_of(app: &TestApp, method: Method, path: &str, token: &str, body: Option<Value>) -> Value {
    let response = app.call(method, path, Some(token), body).await;
    assert!(response.status().is_success(), "{path}: {}", response.status());
    response.json().await.unwrap_or(Value::Null)
}

/// A policy migration of an empty folder: a task that completes at once and moves no blob.
async fn run_a_task(app: &TestApp, admin: &Session, user: &Session) {
    let group = app.group_id(admin, "Users").await;
    let current = json_of(app, Method::GET, &format!("/admin/group/{group}"), &admin.access, None).await;
    let second = json!({"name": "second", "type": "local", "chunk_size": 65536, "options": {"root": "second"}});
    let second = json_of(app, Method::POST, "/admin/policy", &admin.access, Some(second)).await;
    let mut policies = current["policy_ids"].as_array().unwrap().clone();
    policies.push(second["id"].clone());
    app.set_group(admin, &group, json!({"policy_ids": policies})).await;
    let root = app.root_id(user).await;
    let empty = app.mkdir(user, &root, "empty").await;
    let body = json!({"policy_id": second["id"]});
    let response = app.call(Method::PATCH, &format!("/object/{empty}/policy"), Some(&user.access), Some(body)).await;
    assert_eq!(response.status(), 202);
    let task = response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    for _ in 0..200 {
        let view = json_of(app, Method::GET, &format!("/task/{task}"), &user.access, None).await;
        if view["status"] == "completed" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the migration task did not complete");
}

async fn summary_figures_equal_what_the_test_created(app: TestApp) {
    let admin = app.login_admin().await;
    let ann = app.register("ann@example.com", "ann-password").await;
    let bob = app.register("bob@example.com", "bob-password").await;
    let cid = app.register("cid@example.com", "cid-password").await;
    let ban = json!({"status": "BANNED"});
    json_of(&app, Method::PATCH, &format!("/admin/user/{}", cid.user_id), &admin.access, Some(ban)).await;

    // Four files of known sizes; `same` is uploaded three times (twice by Ann, once by Bob):
    // stored once for Ann, and once more for Bob, since a chunked upload's hash is merged from
    // chunk values and another owner's content is never de-duplicated onto such a blob.
    let same = content(1000, 1);
    let other = content(2500, 2);
    let ann_root = app.root_id(&ann).await;
    let docs = app.mkdir(&ann, &ann_root, "docs").await;
    app.mkdir(&ann, &docs, "inner").await;
    app.upload(&ann, &docs, "same.bin", &same).await;
    let copy = app.upload(&ann, &ann_root, "same-copy.bin", &same).await;
    let bob_root = app.root_id(&bob).await;
    app.upload(&bob, &bob_root, "other.bin", &other).await;
    app.upload(&bob, &bob_root, "same-again.bin", &same).await;
    let trash = json!({"ids": [copy["id"]]});
    assert!(app.call(Method::DELETE, "/object", Some(&ann.access), Some(trash)).await.status().is_success());
    json_of(&app, Method::POST, "/share", &ann.access, Some(json!({"object_id": docs}))).await;
    json_of(&app, Method::POST, "/share", &bob.access, Some(json!({"object_id": bob_root}))).await;
    run_a_task(&app, &admin, &bob).await;

    let figures = summary(&app, &admin).await;

    // Users, counted from the administrators' list.
    let users = json_of(&app, Method::GET, "/admin/user?limit=1000", &admin.access, None).await;
    let items = users["items"].as_array().unwrap();
    let with_status = |status: &str| items.iter().filter(|u| u["status"] == status).count() as i64;
    assert_eq!(items.len(), 4, "the administrator and three users");
    assert_eq!(figures["users"]["total"], users["count"]);
    assert_eq!(figures["users"]["active"], with_status("ACTIVE"));
    assert_eq!(figures["users"]["banned"], with_status("BANNED"));
    assert_eq!(figures["users"]["banned"], 1);
    assert_eq!(figures["users"]["inactive"], 0);
    assert_eq!(figures["users"]["new_24h"], 4);
    assert_eq!(figures["users"]["new_7d"], 4);

    // Objects: four files, three folders (docs, inner, empty); one file in the trash.
    assert_eq!(figures["objects"]["files"], 4);
    assert_eq!(figures["objects"]["folders"], 3);
    assert_eq!(figures["objects"]["trashed"], 1);
    let logical = 3 * same.len() + other.len();
    let physical = 2 * same.len() + other.len();
    assert_eq!(figures["storage"]["logical_bytes"], logical);
    assert_eq!(figures["storage"]["physical_bytes"], physical);
    assert_eq!(figures["storage"]["blobs"], 3);
    let ratio = figures["storage"]["dedup_ratio"].as_f64().unwrap();
    assert!((ratio - logical as f64 / physical as f64).abs() < 1e-9, "{ratio}");
    // What users are charged for is the logical figure.
    let charged = app.storage_used(&ann).await + app.storage_used(&bob).await;
    assert_eq!(figures["storage"]["logical_bytes"], charged);

    assert_eq!(figures["shares"], 2);
    assert_eq!(figures["tasks"], json!({"queued": 0, "running": 0, "completed": 1, "error": 0, "canceled": 0}));
    assert_eq!(figures["nodes"], json!({"online": 0, "offline": 0, "unknown": 0}));

    // Today is the series' last day: every registration and upload of this test is on it.
    let today = figures["daily"].as_array().unwrap().last().unwrap().clone();
    let registered_today =
        items.iter().filter(|u| u["created_at"].as_str().unwrap().starts_with(today["date"].as_str().unwrap())).count();
    assert_eq!(today["registrations"], registered_today);
    assert_eq!(today["uploads"], 4);
    assert_eq!(today["upload_bytes"], logical);

    // Folding PostgreSQL's appended changes (the periodic job) changes no figure.
    nubo_service::ops::summary::fold(app.context()).await.unwrap();
    let folded = summary(&app, &admin).await;
    for part in ["users", "objects", "storage", "shares", "tasks", "nodes", "daily"] {
        assert_eq!(folded[part], figures[part], "{part} after folding");
    }

    assert_eq!(figures["version"], env!("CARGO_PKG_VERSION"));
    assert!(figures["uptime_seconds"].as_u64().is_some());

    // Deleting a file for good takes it out of the totals (not out of the day's history).
    let purge = json!({"ids": [copy["id"]]});
    let response = app.call(Method::DELETE, "/trash", Some(&ann.access), Some(purge)).await;
    assert!(response.status().is_success(), "purge: {}", response.status());
    let after = summary(&app, &admin).await;
    assert_eq!(after["objects"]["files"], 3);
    assert_eq!(after["objects"]["trashed"], 0);
    assert_eq!(after["storage"]["logical_bytes"], logical - same.len());
    assert_eq!(after["daily"].as_array().unwrap().last().unwrap()["uploads"], 4);
    // Deleting a user takes their files and shares with them.
    let response = app.call(Method::DELETE, &format!("/admin/user/{}", bob.user_id), Some(&admin.access), None).await;
    assert_eq!(response.status(), 204);
    let after = summary(&app, &admin).await;
    assert_eq!(after["users"]["total"], 3);
    assert_eq!(after["objects"]["files"], 1);
    assert_eq!(after["objects"]["folders"], 2);
    assert_eq!(after["storage"]["logical_bytes"], same.len());
    assert_eq!(after["shares"], 1);
    nubo_service::ops::summary::fold(app.context()).await.unwrap();
    let folded = summary(&app, &admin).await;
    assert_eq!(folded["objects"], after["objects"]);
    assert_eq!(folded["storage"], after["storage"]);
    assert_eq!(folded["daily"], after["daily"]);
}

async fn summary_is_for_administrators_only(app: TestApp) {
    let user = app.register("dee@example.com", "dee-password").await;
    let response = app.call(Method::GET, "/admin/summary", Some(&user.access), None).await;
    assert_eq!(error_body(response, 403).await["code"], "auth.admin_required");
    let response = app.call(Method::GET, "/admin/summary", None, None).await;
    assert_eq!(error_body(response, 401).await["code"], "auth.missing_token");
}

async fn the_series_covers_thirty_days_ending_today(app: TestApp) {
    let admin = app.login_admin().await;
    let figures = summary(&app, &admin).await;
    let days = figures["daily"].as_array().unwrap();
    assert_eq!(days.len(), 30);
    let dates: Vec<&str> = days.iter().map(|d| d["date"].as_str().unwrap()).collect();
    let mut sorted = dates.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted, dates, "oldest first, each day once");
    assert!(figures["generated_at"].as_str().unwrap().starts_with(dates[29]), "the last day is today (UTC)");
    // Days before today are zeros on a fresh site.
    for day in &days[..29] {
        assert_eq!((day["registrations"].as_i64(), day["uploads"].as_i64()), (Some(0), Some(0)), "{day}");
    }
}
