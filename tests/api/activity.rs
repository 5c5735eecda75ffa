//! The activity log: sign-ins (and refused ones, with the address tried from), bans, uploads,
//! deletions, shares, settings and redeem codes are recorded with actor, target and address;
//! users read their own actions, administrators everyone's with filters, paging and a CSV
//! export; the prune job keeps the retention setting; and writing the log never fails the
//! action it records, with which it commits or rolls back.

use nubo_tests::{Backend, Session, TestApp, error_body, login_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    users_read_their_own_actions_and_administrators_filter_and_page_everyones,
    the_csv_export_parses_and_has_its_header,
    pruning_removes_rows_older_than_the_retention_setting,
    the_log_commits_and_rolls_back_with_its_action_and_never_fails_it,
    every_write_path_records_itself_once,
    the_action_filter_answers_only_that_action_in_each_list_and_the_csv,
);

/// The JSON page `path` answers `session`.
async fn page(app: &TestApp, session: &Session, path: &str) -> Value {
    let response = app.call(Method::GET, path, Some(&session.access), None).await;
    assert_eq!(response.status(), 200, "{path}: {}", response.text().await.unwrap_or_default());
    response.json().await.unwrap()
}

/// The entries of `page` with action `action`.
fn entries<'a>(page: &'a Value, action: &str) -> Vec<&'a Value> {
    page["items"].as_array().unwrap().iter().filter(|entry| entry["action"] == action).collect()
}

fn actions(page: &Value) -> Vec<&str> {
    page["items"].as_array().unwrap().iter().map(|entry| entry["action"].as_str().unwrap()).collect()
}

/// Signs in with a wrong password as the client `forwarded` behind the trusted proxy.
async fn failed_sign_in_from(app: &TestApp, email: &str, forwarded: &str) {
    let request = app
        .request(Method::POST, "/user/session")
        .header("x-forwarded-for", forwarded)
        .json(&login_body(email, "not-the-password"));
    assert_eq!(request.send().await.unwrap().status(), 401);
}

/// The acceptance test of the issue: the activity log records an administrator's ban and a
/// failed sign-in, each with its actor, target and the client's address (forwarded through a
/// trusted proxy).
async fn the_activity_log_records_an_admin_ban_and_a_failed_sign_in(backend: Backend) {
    let spawned = TestApp::spawn_configured(backend, |config| {
        config.trusted_proxies = serde_json::from_value(json!("127.0.0.1/32")).unwrap();
    });
    let Some(app) = spawned.await else { return };
    let admin = app.login_admin().await;
    let mallory = app.register("mallory@example.com", "mallory-password").await;

    failed_sign_in_from(&app, "mallory@example.com", "198.51.100.23").await;
    failed_sign_in_from(&app, "nobody@example.com", "198.51.100.24").await;
    let ban = json!({"status": "BANNED"});
    let path = format!("/admin/user/{}", mallory.user_id);
    let request = app.request(Method::PATCH, &path).bearer_auth(&admin.access).header("x-forwarded-for", "203.0.113.5");
    assert_eq!(request.json(&ban).send().await.unwrap().status(), 200);

    let failed = page(&app, &admin, "/admin/activity?action=user.sign_in_failed").await;
    assert_eq!(failed["count"], 2);
    let known = entries(&failed, "user.sign_in_failed").into_iter().find(|e| e["address"] == "198.51.100.23").unwrap();
    assert_eq!(known["actor_id"], mallory.user_id.as_str(), "the account the address names");
    assert_eq!(known["target_kind"], "user");
    assert_eq!(known["target_id"], mallory.user_id.as_str());
    assert_eq!(known["target_name"], "mallory@example.com");
    assert_eq!(known["detail"]["provider"], "email_password");
    assert_eq!(known["detail"]["code"], "auth.invalid_credentials");
    assert!(!known.to_string().contains("not-the-password"), "no password is kept");
    let unknown =
        entries(&failed, "user.sign_in_failed").into_iter().find(|e| e["address"] == "198.51.100.24").unwrap();
    assert_eq!(unknown["actor_id"], Value::Null);
    assert_eq!(unknown["target_id"], Value::Null);
    assert_eq!(unknown["target_name"], "nobody@example.com");

    let bans = page(&app, &admin, "/admin/activity?action=admin.ban").await;
    assert_eq!(bans["count"], 1);
    let ban = &bans["items"][0];
    assert_eq!(ban["actor_id"], admin.user_id.as_str());
    assert!(ban["actor_nickname"].as_str().is_some_and(|name| !name.is_empty()));
    assert_eq!(ban["target_kind"], "user");
    assert_eq!(ban["target_id"], mallory.user_id.as_str());
    assert_eq!(ban["target_name"], "mallory@example.com");
    assert_eq!(ban["address"], "203.0.113.5");
    assert_eq!(ban["detail"]["status"], "BANNED");
    assert!(ban["at"].as_str().is_some_and(|at| at.ends_with('Z')));

    // The successful sign-ins of both are there too, from the proxy's own address.
    let sign_ins = page(&app, &admin, "/admin/activity?action=user.sign_in").await;
    let signed_in: Vec<&str> =
        sign_ins["items"].as_array().unwrap().iter().map(|e| e["actor_id"].as_str().unwrap()).collect();
    assert!(signed_in.contains(&admin.user_id.as_str()) && signed_in.contains(&mallory.user_id.as_str()));
    assert!(sign_ins["items"].as_array().unwrap().iter().all(|e| e["address"] == "127.0.0.1"));
}

mod the_activity_log_records_an_admin_ban_and_a_failed_sign_in {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        the_activity_log_records_an_admin_ban_and_a_failed_sign_in(Backend::Sqlite).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        the_activity_log_records_an_admin_ban_and_a_failed_sign_in(Backend::Postgres).await
    }
}

async fn users_read_their_own_actions_and_administrators_filter_and_page_everyones(app: TestApp) {
    let admin = app.login_admin().await;
    let wren = app.register("wren@example.com", "wren-password").await;
    let yara = app.register("yara@example.com", "yara-password").await;

    // Wren uploads, shares, unshares, trashes and deletes for good, and changes a setting.
    let root = app.root_id(&wren).await;
    let file = app.upload(&wren, &root, "notes.txt", b"some notes").await;
    let id = file["id"].as_str().unwrap();
    let share = app.call(Method::POST, "/share", Some(&wren.access), Some(json!({"object_id": id}))).await;
    assert_eq!(share.status(), 201);
    let code = share.json::<Value>().await.unwrap()["code"].as_str().unwrap().to_owned();
    assert_eq!(app.call(Method::DELETE, &format!("/share/{code}"), Some(&wren.access), None).await.status(), 204);
    let ids = json!({"ids": [id]});
    assert_eq!(app.call(Method::DELETE, "/object", Some(&wren.access), Some(ids.clone())).await.status(), 204);
    assert_eq!(app.call(Method::DELETE, "/trash", Some(&wren.access), Some(ids)).await.status(), 204);
    let nickname = json!({"nickname": "Wren W."});
    assert_eq!(
        app.call(Method::PATCH, "/user/settings/nickname", Some(&wren.access), Some(nickname)).await.status(),
        204
    );
    // Yara does something too; the administrator changes a site setting.
    let yroot = app.root_id(&yara).await;
    app.upload(&yara, &yroot, "yara.txt", b"hers").await;
    let setting = json!({"site_name": "Activity test"});
    assert_eq!(app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(setting)).await.status(), 204);

    // Wren's own log: newest first, only Wren's actions.
    let mine = page(&app, &wren, "/user/activity").await;
    assert_eq!(
        actions(&mine),
        [
            "user.settings_update",
            "object.delete",
            "object.trash",
            "share.delete",
            "share.create",
            "file.upload",
            "user.sign_in",
            "user.register"
        ]
    );
    assert!(mine["items"].as_array().unwrap().iter().all(|e| e["actor_id"] == wren.user_id.as_str()));
    let upload = entries(&mine, "file.upload")[0];
    assert_eq!((upload["target_id"].as_str(), upload["target_name"].as_str()), (Some(id), Some("notes.txt")));
    assert_eq!(upload["detail"]["size"], 10);
    assert_eq!(upload["address"], "127.0.0.1");
    assert_eq!(entries(&mine, "object.delete")[0]["detail"]["ids"], json!([id]));
    assert_eq!(entries(&mine, "share.create")[0]["target_name"], code.as_str());
    assert_eq!(entries(&mine, "user.settings_update")[0]["detail"]["option"], "nickname");
    let kept: Vec<String> =
        mine["items"].as_array().unwrap().iter().map(|e| format!("{} {}", e["detail"], e["target_name"])).collect();
    assert!(!kept.concat().contains("Wren W."), "settings values are not kept");
    assert_eq!(mine["items"][0]["actor_nickname"], "Wren W.", "the actor as they are called now");
    let yours = page(&app, &yara, "/user/activity").await;
    assert_eq!(actions(&yours), ["file.upload", "user.sign_in", "user.register"]);

    // Filters and paging, for the user and the administrator.
    let uploads = page(&app, &wren, "/user/activity?action=file.upload").await;
    assert_eq!(uploads["count"], 1);
    let paged = page(&app, &wren, "/user/activity?offset=2&limit=3").await;
    assert_eq!(
        (paged["count"].as_i64(), actions(&paged)),
        (Some(8), vec!["object.trash", "share.delete", "share.create"])
    );
    let of_yara = page(&app, &admin, &format!("/admin/activity?user_id={}", yara.user_id)).await;
    assert_eq!(of_yara["count"], 3);
    let all_uploads = page(&app, &admin, "/admin/activity?action=file.upload&limit=1").await;
    assert_eq!((all_uploads["count"].as_i64(), all_uploads["items"].as_array().unwrap().len()), (Some(2), 1));
    let settings = page(&app, &admin, "/admin/activity?action=admin.settings_update").await;
    assert_eq!(settings["items"][0]["detail"]["names"], json!(["site_name"]));
    let future = page(&app, &admin, "/admin/activity?from=2999-01-01T00:00:00Z").await;
    assert_eq!(future["count"], 0);
    let past = page(&app, &admin, "/admin/activity?to=2000-01-01T00:00:00Z").await;
    assert_eq!(past["count"], 0);
    let until_now = page(&app, &admin, "/admin/activity?from=2000-01-01T00:00:00Z&to=2999-01-01T00:00:00Z").await;
    assert_eq!(until_now["count"], page(&app, &admin, "/admin/activity").await["count"]);

    // Bad filters, and the guard.
    let unknown = app.call(Method::GET, "/user/activity?action=user.dance", Some(&wren.access), None).await;
    assert_eq!(error_body(unknown, 422).await["field"], "action");
    let bad_time = app.call(Method::GET, "/admin/activity?from=yesterday", Some(&admin.access), None).await;
    assert_eq!(error_body(bad_time, 422).await["field"], "from");
    let member = app.call(Method::GET, "/admin/activity", Some(&wren.access), None).await;
    assert_eq!(error_body(member, 403).await["code"], "auth.admin_required");
    assert_eq!(app.call(Method::GET, "/user/activity", None, None).await.status(), 401);
}

async fn the_csv_export_parses_and_has_its_header(app: TestApp) {
    let admin = app.login_admin().await;
    // A name with a separator, quotes and a formula: the export keeps it one harmless cell.
    let name = "=cmd(\"a,b\").txt";
    let zoe = app.register("zoe@example.com", "zoe-password").await;
    let root = app.root_id(&zoe).await;
    app.upload(&zoe, &root, name, b"x").await;

    let response = app
        .request(Method::GET, &format!("/admin/activity?user_id={}", zoe.user_id))
        .bearer_auth(&admin.access)
        .header("accept", "text/csv")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(content_type.starts_with("text/csv"), "{content_type}");
    assert!(response.headers()["content-disposition"].to_str().unwrap().contains("attachment"));
    let text = response.text().await.unwrap();
    let rows = parse_csv(&text);
    assert_eq!(
        rows[0],
        ["at", "actor_id", "actor_nickname", "action", "target_kind", "target_id", "target_name", "address", "detail"]
    );
    assert_eq!(rows.len(), 4, "the header and three rows: {text}");
    assert!(rows.iter().all(|row| row.len() == 9), "every row has every column: {rows:?}");
    let upload = rows.iter().find(|row| row[3] == "file.upload").unwrap();
    assert_eq!(upload[1], zoe.user_id);
    assert_eq!(upload[6], format!("'{name}"), "a formula is defused");
    let detail: Value = serde_json::from_str(&upload[8]).unwrap();
    assert_eq!(detail["size"], 1);
    assert_eq!(rows[1][3], "file.upload", "newest first");
}

/// The browser journey's scenario (61-activity) through the API: a user with a mixed log and
/// refused sign-ins; each list filtered by an action (and the administrator's by the day too)
/// answers exactly the rows of that action, counted alike, and so does the CSV export.
async fn the_action_filter_answers_only_that_action_in_each_list_and_the_csv(app: TestApp) {
    let admin = app.login_admin().await;
    let vera = app.register("vera@example.com", "vera-password").await;
    let root = app.root_id(&vera).await;
    app.upload(&vera, &root, "a.txt", b"a").await;
    app.login("vera@example.com", "vera-password").await;
    for _ in 0..2 {
        failed_sign_in_from(&app, "vera@example.com", "127.0.0.1").await;
    }

    // Vera's own log, whole and then by each action it holds.
    let all = page(&app, &vera, "/user/activity?limit=100").await;
    let mut held: Vec<&str> = actions(&all);
    held.sort_unstable();
    held.dedup();
    assert!(held.len() >= 4 && held.contains(&"user.sign_in_failed"), "a mixed log: {held:?}");
    for action in &held {
        let filtered = page(&app, &vera, &format!("/user/activity?action={action}&limit=100")).await;
        let expected = entries(&all, action).len();
        assert_eq!(filtered["count"], expected, "{action}: counted as listed");
        assert_eq!(actions(&filtered), vec![*action; expected], "{action}: nothing else let through");
    }

    // The administrator's, by action and by the day of the refusals, as JSON and as CSV.
    let failed = page(&app, &vera, "/user/activity?action=user.sign_in_failed").await;
    let day = &failed["items"][0]["at"].as_str().unwrap()[..10];
    let query = format!("action=user.sign_in_failed&from={day}T00:00:00Z&to=2999-01-01T00:00:00Z");
    let everyone = page(&app, &admin, &format!("/admin/activity?{query}")).await;
    assert_eq!(actions(&everyone), ["user.sign_in_failed"; 2]);
    assert_eq!(everyone["count"], 2);
    let csv = app
        .request(Method::GET, &format!("/admin/activity?{query}"))
        .bearer_auth(&admin.access)
        .header("accept", "text/csv")
        .send()
        .await
        .unwrap();
    assert_eq!(csv.status(), 200);
    let rows = parse_csv(&csv.text().await.unwrap());
    let exported: Vec<&str> = rows[1..].iter().map(|row| row[3].as_str()).collect();
    assert_eq!(exported, ["user.sign_in_failed"; 2]);
}

/// A small RFC 4180 reader: quoted cells may hold separators, doubled quotes and line breaks.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut cell) = (Vec::new(), Vec::new(), String::new());
    let (mut quoted, mut chars) = (false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => cell.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut cell)),
            (false, '\r') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => cell.push(c),
        }
    }
    rows
}

/// Inserts a row `days_ago` days old straight into the table.
async fn old_row(app: &TestApp, days_ago: i64) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let at = nubo_model::domain::time::now_ms() - days_ago * 86_400_000;
    sqlx::query("INSERT INTO activity (id, at, action, detail) VALUES ($1, $2, 'user.sign_in', '{}')")
        .bind(&id)
        .bind(at)
        .execute(app.context().db().writer())
        .await
        .unwrap();
    id
}

async fn count_rows(app: &TestApp, id: &str) -> i64 {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM activity WHERE id = $1")
        .bind(id)
        .fetch_one(app.context().db().reader())
        .await
        .unwrap();
    n
}

async fn pruning_removes_rows_older_than_the_retention_setting(app: TestApp) {
    let admin = app.login_admin().await;
    let ancient = old_row(&app, 200).await;
    let recent = old_row(&app, 2).await;
    let prune = || nubo_service::jobs::prune_activity(app.context(), nubo_model::domain::time::now_ms());

    // The default keeps 90 days.
    assert_eq!(prune().await.unwrap(), 1);
    assert_eq!((count_rows(&app, &ancient).await, count_rows(&app, &recent).await), (0, 1));

    // A shorter retention, set through the settings API, prunes the rest of the past.
    let refused = json!({"activity_retention_days": 0});
    let response = app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(refused)).await;
    assert_eq!(error_body(response, 422).await["field"], "activity_retention_days");
    let one_day = json!({"activity_retention_days": 1});
    assert_eq!(app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(one_day)).await.status(), 204);
    assert_eq!(prune().await.unwrap(), 1);
    assert_eq!(count_rows(&app, &recent).await, 0);
    // Today's rows (the administrator's sign-in and settings change) stay.
    let left = page(&app, &admin, "/admin/activity").await;
    assert_eq!(actions(&left), ["admin.settings_update", "user.sign_in"]);
}

async fn the_log_commits_and_rolls_back_with_its_action_and_never_fails_it(app: TestApp) {
    let admin = app.login_admin().await;
    let quinn = app.register("quinn@example.com", "quinn-password").await;
    // A code for the group Quinn is in: its use is recorded inside the redeem's transaction,
    // which then refuses (already in the group) and rolls back, taking the row with it.
    let users = app.group_id(&admin, "Users").await;
    let body =
        json!({"kind": "group", "count": 1, "uses_per_code": 5, "group": {"group_id": users, "duration_days": 1}});
    let response = app.call(Method::POST, "/admin/redeem", Some(&admin.access), Some(body)).await;
    assert_eq!(response.status(), 201);
    let batch: Value = response.json().await.unwrap();
    let code = batch["codes"][0]["code"].as_str().unwrap();
    let refused = app.call(Method::POST, "/user/redeem", Some(&quinn.access), Some(json!({"code": code}))).await;
    assert_eq!(error_body(refused, 409).await["code"], "redeem.not_applicable");
    assert_eq!(page(&app, &quinn, "/user/activity?action=redeem.use").await["count"], 0, "rolled back with it");
    // A storage-pack code goes through, and its row commits with it.
    let body = json!({"kind": "storage_pack", "count": 1, "uses_per_code": 1, "storage_pack": {"size": 1024, "duration_days": 1}});
    let batch: Value =
        app.call(Method::POST, "/admin/redeem", Some(&admin.access), Some(body)).await.json().await.unwrap();
    let code = batch["codes"][0]["code"].as_str().unwrap();
    let redeemed = app.call(Method::POST, "/user/redeem", Some(&quinn.access), Some(json!({"code": code}))).await;
    assert_eq!(redeemed.status(), 200);
    let used = page(&app, &quinn, "/user/activity?action=redeem.use").await;
    assert_eq!(used["count"], 1);
    assert_eq!(used["items"][0]["detail"]["kind"], "storage_pack");
    assert!(!used.to_string().contains(code), "the code itself is not kept");

    // With the table gone, actions still succeed: the failed write is only logged.
    let db = app.context().db();
    sqlx::query("ALTER TABLE activity RENAME TO activity_away").execute(db.writer()).await.unwrap();
    let session = app.login("quinn@example.com", "quinn-password").await;
    let nickname = json!({"nickname": "Quinn Q."});
    let changed = app.call(Method::PATCH, "/user/settings/nickname", Some(&session.access), Some(nickname)).await;
    assert_eq!(changed.status(), 204);
    let wrong = app.call(Method::POST, "/user/session", None, Some(login_body("quinn@example.com", "wrong"))).await;
    assert_eq!(error_body(wrong, 401).await["code"], "auth.invalid_credentials");
    sqlx::query("ALTER TABLE activity_away RENAME TO activity").execute(db.writer()).await.unwrap();
    let after = page(&app, &quinn, "/user/activity").await;
    assert!(!actions(&after).contains(&"user.settings_update"), "nothing was written meanwhile");
}

/// Writes outside upload sessions (REST content, WebDAV) and the tree's own changes (folder,
/// rename, move, copy) each leave one entry naming their object.
async fn every_write_path_records_itself_once(app: TestApp) {
    let (user, dav) = app.dav_user("wanda@example.com", "laptop").await;
    let root = app.root_id(&user).await;
    let folder = app.mkdir(&user, &root, "Docs").await;
    let created = app
        .client
        .post(app.api("/file/content"))
        .query(&[("parent_id", root.as_str()), ("name", "a.txt")])
        .bearer_auth(&user.access)
        .body("one")
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let file = created.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let patched =
        app.request(Method::PATCH, &format!("/file/content?id={file}")).bearer_auth(&user.access).body("two").send();
    assert_eq!(patched.await.unwrap().status(), 200);
    assert_eq!(dav.put("/b.txt", "dav new").await.status(), 201);
    assert_eq!(dav.put("/b.txt", "dav over").await.status(), 204);
    let path = format!("/object/{file}");
    let renamed = app.call(Method::PATCH, &path, Some(&user.access), Some(json!({"name": "c.txt"})));
    assert_eq!(renamed.await.status(), 200);
    let moved =
        app.call(Method::PATCH, "/object", Some(&user.access), Some(json!({"src_ids": [file], "dst_id": folder})));
    assert_eq!(moved.await.status(), 204);
    let copied = app.call(
        Method::POST,
        "/object/copies",
        Some(&user.access),
        Some(json!({"src_ids": [folder], "dst_id": folder})),
    );
    assert_eq!(copied.await.status(), 409, "a folder cannot be copied into itself");
    let sub = app.mkdir(&user, &root, "Copies").await;
    let copied =
        app.call(Method::POST, "/object/copies", Some(&user.access), Some(json!({"src_ids": [folder], "dst_id": sub})));
    assert_eq!(copied.await.status(), 201);
    let dav_move = dav.request("MOVE", "/b.txt").header("destination", format!("{}/Docs/b.txt", dav.base)).send();
    assert_eq!(dav_move.await.unwrap().status(), 201);

    let log = page(&app, &user, "/user/activity?limit=100").await;
    let targets = |action: &str| -> Vec<(String, Value)> {
        entries(&log, action)
            .into_iter()
            .map(|entry| (entry["target_name"].as_str().unwrap_or_default().to_owned(), entry["detail"].clone()))
            .collect()
    };
    let folders: Vec<String> = targets("folder.create").into_iter().map(|(name, _)| name).collect();
    assert_eq!(folders.len(), 2, "{folders:?}");
    assert!(folders.contains(&"Docs".to_owned()) && folders.contains(&"Copies".to_owned()));
    let writes = targets("file.write");
    let replaced = |name: &str, flag: bool| writes.iter().filter(|(n, d)| n == name && d["replaced"] == flag).count();
    assert_eq!(writes.len(), 4, "{writes:?}");
    assert_eq!((replaced("a.txt", false), replaced("a.txt", true)), (1, 1), "POST then PATCH: {writes:?}");
    assert_eq!((replaced("b.txt", false), replaced("b.txt", true)), (1, 1), "WebDAV PUT twice: {writes:?}");
    let renames = targets("object.rename");
    assert_eq!(renames.len(), 1, "{renames:?}");
    assert_eq!((renames[0].0.as_str(), renames[0].1["from"].as_str()), ("c.txt", Some("a.txt")));
    let moves = targets("object.move");
    assert_eq!(moves.len(), 2, "the API move and the WebDAV MOVE: {moves:?}");
    assert!(moves.iter().all(|(_, detail)| detail["to"] == folder.as_str()), "{moves:?}");
    let copies = targets("object.copy");
    assert_eq!(copies.len(), 1, "the refused copy left nothing: {copies:?}");
    assert_eq!((copies[0].0.as_str(), copies[0].1["to"].as_str()), ("Docs", Some(sub.as_str())));
}
