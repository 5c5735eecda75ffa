//! Redeem codes: batches generated once (never stored in plain text), redeemed once per user up
//! to `uses_per_code` even under concurrency across two masters, storage-pack and temporary
//! group codes (the group ends through the periodic job, with tokens refreshed both ways), and
//! wrong codes rate-limited per user and per address.

use std::time::Duration;

use nubo_model::domain::time::now_ms;
use nubo_service::capacity::redeem as redeem_service;
use nubo_tests::{Backend, Session, TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

on_every_backend!(
    a_storage_pack_code_gives_a_pack_once_per_user_and_is_never_stored_in_plain_text,
    administrators_export_disable_and_delete_codes,
    a_group_code_moves_the_user_for_a_time_and_the_job_moves_them_back,
    an_administrators_move_outlasts_a_temporary_group,
    twenty_concurrent_redeems_of_a_five_use_code_count_exactly_five_across_two_masters
);

const ALPHABET: &str = "ABCDEFGHJKMNPQRSTUVWXYZ23456789";

async fn generate(app: &TestApp, admin: &Session, body: Value) -> Value {
    let response = app.call(Method::POST, "/admin/redeem", Some(&admin.access), Some(body)).await;
    assert_eq!(response.status(), 201, "generate: {}", response.text().await.unwrap_or_default());
    response.json().await.unwrap()
}

fn codes_of(batch: &Value) -> Vec<String> {
    batch["codes"].as_array().unwrap().iter().map(|c| c["code"].as_str().unwrap().to_owned()).collect()
}

async fn redeem(app: &TestApp, user: &Session, code: &str) -> reqwest::Response {
    app.call(Method::POST, "/user/redeem", Some(&user.access), Some(json!({"code": code}))).await
}

async fn pack_code(app: &TestApp, admin: &Session, count: i64, uses: i64) -> Value {
    let body = json!({"kind": "storage_pack", "count": count, "uses_per_code": uses, "name": "Promo",
        "storage_pack": {"size": 5000, "duration_days": 30}});
    generate(app, admin, body).await
}

async fn admin_codes(app: &TestApp, admin: &Session, query: &str) -> Value {
    let response = app.call(Method::GET, &format!("/admin/redeem{query}"), Some(&admin.access), None).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

async fn a_storage_pack_code_gives_a_pack_once_per_user_and_is_never_stored_in_plain_text(app: TestApp) {
    let admin = app.login_admin().await;
    let batch = pack_code(&app, &admin, 3, 2).await;
    let codes = codes_of(&batch);
    assert_eq!(codes.len(), 3);
    for code in &codes {
        let plain: String = code.chars().filter(|c| *c != '-').collect();
        assert_eq!(plain.len(), 20, "{code}");
        assert!(plain.chars().all(|c| ALPHABET.contains(c)), "{code}");
    }
    // The database holds hashes and four-character hints, never a code.
    let rows: Vec<(String, String, String, String, String)> =
        sqlx::query_as("SELECT id, code_hash, hint, batch_id, name FROM redeem_codes")
            .fetch_all(app.context().db().reader())
            .await
            .unwrap();
    assert_eq!(rows.len(), 3);
    for code in &codes {
        let plain: String = code.chars().filter(|c| *c != '-').collect();
        let digest = format!("{:x}", Sha256::digest(plain.as_bytes()));
        assert!(rows.iter().any(|row| row.1 == digest), "stored as SHA-256 of the normalised code");
        for row in &rows {
            for column in [&row.0, &row.1, &row.2, &row.3, &row.4] {
                assert!(!column.contains(&plain) && !column.contains(code.as_str()), "{column} holds a code");
            }
        }
    }

    let user = app.register("rita@example.com", "rita-password-1").await;
    let before = app.call(Method::GET, "/user/storage", Some(&user.access), None).await.json::<Value>().await.unwrap();
    // Case, spaces and dashes do not matter.
    let typed = codes[0].to_lowercase().replace('-', " ");
    let response = redeem(&app, &user, &typed).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());
    let given: Value = response.json().await.unwrap();
    assert_eq!(given["kind"], "storage_pack");
    assert_eq!(
        (given["storage_pack"]["size"].as_i64(), given["storage_pack"]["source"].as_str()),
        (Some(5000), Some("redeem"))
    );
    assert_eq!(given["storage_pack"]["name"], "Promo");
    let after = app.call(Method::GET, "/user/storage", Some(&user.access), None).await.json::<Value>().await.unwrap();
    assert_eq!(after["total"].as_i64().unwrap(), before["total"].as_i64().unwrap() + 5000);
    let packs: Value =
        app.call(Method::GET, "/user/storage_packs", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(packs.as_array().unwrap().len(), 1);

    let again = redeem(&app, &user, &codes[0]).await;
    assert_eq!(error_body(again, 409).await["code"], "redeem.already_used");
    let second = app.register("sami@example.com", "sami-password-1").await;
    assert_eq!(redeem(&app, &second, &codes[0]).await.status(), 200);
    let third = app.register("tove@example.com", "tove-password-1").await;
    assert_eq!(error_body(redeem(&app, &third, &codes[0]).await, 409).await["code"], "redeem.used_up");
    // A code that fails its use takes none: the third user still redeems another code.
    assert_eq!(redeem(&app, &third, &codes[1]).await.status(), 200);

    let listed = admin_codes(&app, &admin, &format!("?batch_id={}", batch["batch_id"].as_str().unwrap())).await;
    assert_eq!(listed["count"], 3);
    let first_id = batch["codes"][0]["id"].as_str().unwrap();
    let first = listed["items"].as_array().unwrap().iter().find(|c| c["id"] == first_id).unwrap();
    assert_eq!((first["used"].as_i64(), first["uses_per_code"].as_i64()), (Some(2), Some(2)));
    assert!(first.get("code").is_none(), "lists never show codes");
    assert_eq!(first["hint"], &codes[0][..4]);
    assert_eq!(first["storage_pack"], json!({"size": 5000, "duration_days": 30}));
}

async fn administrators_export_disable_and_delete_codes(app: TestApp) {
    let admin = app.login_admin().await;
    let response = app
        .request(Method::POST, "/admin/redeem")
        .bearer_auth(&admin.access)
        .header("accept", "text/csv")
        .json(&json!({"kind": "storage_pack", "count": 4, "uses_per_code": 1, "name": "CSV, \"quoted\"",
            "storage_pack": {"size": 100, "duration_days": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/csv"));
    assert!(response.headers()["content-disposition"].to_str().unwrap().starts_with("attachment"));
    let csv = response.text().await.unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "code,id,kind,name,uses_per_code,expires_at");
    assert_eq!(lines.len(), 5);
    assert!(lines[1].contains("\"CSV, \"\"quoted\"\"\""), "{}", lines[1]);
    let code = lines[1].split(',').next().unwrap().to_owned();
    let code_id = lines[1].split(',').nth(1).unwrap().to_owned();

    let user = app.register("vera@example.com", "vera-password-1").await;
    let disabled = app
        .call(Method::PATCH, &format!("/admin/redeem/{code_id}"), Some(&admin.access), Some(json!({"disabled": true})))
        .await;
    assert_eq!(disabled.status(), 200);
    assert_eq!(disabled.json::<Value>().await.unwrap()["disabled"], true);
    assert_eq!(error_body(redeem(&app, &user, &code).await, 404).await["code"], "redeem.invalid_code");
    app.call(Method::PATCH, &format!("/admin/redeem/{code_id}"), Some(&admin.access), Some(json!({"disabled": false})))
        .await;
    assert_eq!(redeem(&app, &user, &code).await.status(), 200);
    assert_eq!(
        app.call(Method::DELETE, &format!("/admin/redeem/{code_id}"), Some(&admin.access), None).await.status(),
        204
    );
    assert_eq!(admin_codes(&app, &admin, "").await["count"], 3);
    let packs: Value =
        app.call(Method::GET, "/user/storage_packs", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(packs.as_array().unwrap().len(), 1, "what a deleted code gave stays");
    let missing = app.call(Method::DELETE, &format!("/admin/redeem/{code_id}"), Some(&admin.access), None).await;
    assert_eq!(error_body(missing, 404).await["code"], "redeem.not_found");

    for (body, field) in [
        (
            json!({"kind": "storage_pack", "count": 0, "uses_per_code": 1, "storage_pack": {"size": 1, "duration_days": 1}}),
            "count",
        ),
        (
            json!({"kind": "storage_pack", "count": 1001, "uses_per_code": 1, "storage_pack": {"size": 1, "duration_days": 1}}),
            "count",
        ),
        (
            json!({"kind": "storage_pack", "count": 1, "uses_per_code": 0, "storage_pack": {"size": 1, "duration_days": 1}}),
            "uses_per_code",
        ),
        (json!({"kind": "storage_pack", "count": 1, "uses_per_code": 1}), "storage_pack"),
        (
            json!({"kind": "group", "count": 1, "uses_per_code": 1, "storage_pack": {"size": 1, "duration_days": 1}}),
            "group",
        ),
        (
            json!({"kind": "group", "count": 1, "uses_per_code": 1, "group": {"group_id": "00000000-0000-4000-8000-000000000001", "duration_days": 1}}),
            "group.group_id",
        ),
        (
            json!({"kind": "storage_pack", "count": 1, "uses_per_code": 1, "storage_pack": {"size": 1, "duration_days": 0}}),
            "duration_days",
        ),
        (
            json!({"kind": "storage_pack", "count": 1, "uses_per_code": 1, "expires_at": "2001-01-01T00:00:00Z", "storage_pack": {"size": 1, "duration_days": 1}}),
            "expires_at",
        ),
    ] {
        let response = app.call(Method::POST, "/admin/redeem", Some(&admin.access), Some(body)).await;
        assert_eq!(error_body(response, 422).await["field"], field);
    }
    // The `redeem` captcha scene guards the route when the site turns it on.
    let captcha = app
        .call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(json!({"captcha_redeem": "builtin"})))
        .await;
    assert_eq!(captcha.status(), 204);
    let id = lines[2].split(',').next().unwrap();
    let unanswered = redeem(&app, &user, id).await;
    assert_eq!(error_body(unanswered, 422).await["code"], "captcha.required");
    let image: Value = app.get("/site/captcha?scene=redeem").await.json().await.unwrap();
    let answer =
        app.context().store().get(&format!("captcha:{}", image["id"].as_str().unwrap())).await.unwrap().unwrap();
    let body = json!({"code": id, "captcha": format!("{}:{}", image["id"].as_str().unwrap(), answer.split_once(':').unwrap().1)});
    let answered = app.call(Method::POST, "/user/redeem", Some(&user.access), Some(body)).await;
    assert_eq!(answered.status(), 200, "{}", answered.text().await.unwrap_or_default());

    let member = app.call(Method::GET, "/admin/redeem", Some(&user.access), None).await;
    assert_eq!(error_body(member, 403).await["code"], "auth.admin_required");
}

async fn create_group(app: &TestApp, admin: &Session, name: &str) -> String {
    let body = json!({"name": name, "max_storage": 1_000_000_000_i64, "permissions": {"share": true, "webdav": true}});
    let response = app.call(Method::POST, "/admin/group", Some(&admin.access), Some(body)).await;
    assert_eq!(response.status(), 201);
    response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned()
}

async fn group_code(app: &TestApp, admin: &Session, group: &str, days: i64) -> String {
    let body =
        json!({"kind": "group", "count": 1, "uses_per_code": 10, "group": {"group_id": group, "duration_days": days}});
    codes_of(&generate(app, admin, body).await).remove(0)
}

/// The group name the session's token carries (after a refresh, the current one).
async fn group_of(app: &TestApp, session: &Session) -> String {
    let facts: Value = app.call(Method::GET, "/user/session", Some(&session.access), None).await.json().await.unwrap();
    facts["group"]["name"].as_str().unwrap().to_owned()
}

async fn a_group_code_moves_the_user_for_a_time_and_the_job_moves_them_back(app: TestApp) {
    let admin = app.login_admin().await;
    let premium = create_group(&app, &admin, "Premium").await;
    let gold = create_group(&app, &admin, "Gold").await;
    let user = app.register("gus@example.com", "gus-password-1").await;
    let start = now_ms();
    let response = redeem(&app, &user, &group_code(&app, &admin, &premium, 1).await).await;
    assert_eq!(response.status(), 200);
    let given: Value = response.json().await.unwrap();
    assert_eq!((given["kind"].as_str(), given["group"]["group_name"].as_str()), (Some("group"), Some("Premium")));
    // The move made the token stale: the next request refreshes and carries the new group.
    let stale = app.call(Method::GET, "/user/storage", Some(&user.access), None).await;
    assert_eq!(stale.status(), 401);
    let user = app.refresh(&user).await;
    assert_eq!(group_of(&app, &user).await, "Premium");

    // A second code of the same group extends the stay; another group's code does not apply.
    let extended: Value = redeem(&app, &user, &group_code(&app, &admin, &premium, 2).await).await.json().await.unwrap();
    let ends = nubo_model::domain::time::from_rfc3339(extended["group"]["ends_at"].as_str().unwrap()).unwrap();
    assert!(ends >= start + 3 * 86_400_000 && ends < now_ms() + 3 * 86_400_000 + 1000, "1 + 2 days");
    let other = redeem(&app, &user, &group_code(&app, &admin, &gold, 1).await).await;
    assert_eq!(error_body(other, 409).await["code"], "redeem.not_applicable");
    let user = app.refresh(&user).await;
    assert_eq!(group_of(&app, &user).await, "Premium", "the extension changed no claims");

    // The job, its clock moved forward: nothing before the end, the move back after it.
    assert_eq!(redeem_service::end_temporary_groups(app.context(), now_ms() + 2 * 86_400_000).await.unwrap(), 0);
    // A second master on PostgreSQL (shared Redis); on SQLite, whose in-memory store only one
    // master reads (a peer's revocation would not reach this one), the same master twice.
    let peer = match app.backend {
        Backend::Postgres => Some(app.spawn_peer().await),
        Backend::Sqlite => None,
    };
    let other = peer.as_ref().map_or(app.context(), |peer| &peer.context);
    let after = ends + 1;
    let (a, b) = tokio::join!(
        redeem_service::end_temporary_groups(app.context(), after),
        redeem_service::end_temporary_groups(other, after)
    );
    assert_eq!(a.unwrap() + b.unwrap(), 1, "ended once, however many masters run the job");
    assert_eq!(redeem_service::end_temporary_groups(app.context(), after).await.unwrap(), 0);
    let stale = app.call(Method::GET, "/user/storage", Some(&user.access), None).await;
    assert_eq!(stale.status(), 401, "the move back makes the token stale too");
    let user = app.refresh(&user).await;
    assert_eq!(group_of(&app, &user).await, "Users");
    // Back in the first group, another group's code applies now.
    assert_eq!(redeem(&app, &user, &group_code(&app, &admin, &gold, 1).await).await.status(), 200);
    if let Some(peer) = peer {
        peer.shutdown(Duration::from_secs(5)).await.unwrap();
    }
}

async fn an_administrators_move_outlasts_a_temporary_group(app: TestApp) {
    let admin = app.login_admin().await;
    let premium = create_group(&app, &admin, "Premium").await;
    let gold = create_group(&app, &admin, "Gold").await;
    let user = app.register("hal@example.com", "hal-password-1").await;
    assert_eq!(redeem(&app, &user, &group_code(&app, &admin, &premium, 1).await).await.status(), 200);
    let moved = app
        .call(
            Method::PATCH,
            &format!("/admin/user/{}", user.user_id),
            Some(&admin.access),
            Some(json!({"group_id": gold})),
        )
        .await;
    assert_eq!(moved.status(), 200);
    assert_eq!(redeem_service::end_temporary_groups(app.context(), now_ms() + 10 * 86_400_000).await.unwrap(), 0);
    let user = app.refresh(&user).await;
    assert_eq!(group_of(&app, &user).await, "Gold", "the administrator's choice stands");
    // The user's own group code for the group they are in does not apply.
    let same = redeem(&app, &user, &group_code(&app, &admin, &gold, 1).await).await;
    assert_eq!(error_body(same, 409).await["code"], "redeem.not_applicable");
}

async fn twenty_concurrent_redeems_of_a_five_use_code_count_exactly_five_across_two_masters(app: TestApp) {
    let admin = app.login_admin().await;
    let batch = pack_code(&app, &admin, 1, 5).await;
    let code = codes_of(&batch).remove(0);
    let mut users = Vec::new();
    for n in 0..20 {
        users.push(app.register(&format!("racer{n}@example.com"), "racer-password-1").await);
    }
    let peer = app.spawn_peer().await;
    let bases = [app.base_url.clone(), format!("http://{}", peer.addr)];
    let requests = users.iter().enumerate().map(|(n, user)| {
        let url = format!("{}/api/v1/user/redeem", bases[n % 2]);
        app.client.post(url).bearer_auth(&user.access).json(&json!({"code": code})).send()
    });
    let answers = futures_util::future::join_all(requests).await;
    let mut statuses: Vec<u16> = answers.into_iter().map(|r| r.unwrap().status().as_u16()).collect();
    statuses.sort_unstable();
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 5, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 409).count(), 15, "{statuses:?}");
    let db = app.context().db().reader();
    let (used,): (i64,) = sqlx::query_as("SELECT used FROM redeem_codes").fetch_one(db).await.unwrap();
    let (uses,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM redeem_uses").fetch_one(db).await.unwrap();
    let (packs,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM storage_packs WHERE redeem_code_id IS NOT NULL")
        .fetch_one(db)
        .await
        .unwrap();
    assert_eq!((used, uses, packs), (5, 5, 5));
    if app.backend == Backend::Postgres {
        assert!(app.config.redis_url.is_some(), "the masters share Redis");
    }
    peer.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Wrong codes count per user and per address; past either budget every redeem answers 429.
async fn wrong_codes_are_rate_limited_per_user_and_per_address(backend: Backend) {
    let adjust = |config: &mut nubo_model::config::Config| {
        config.redeem_failures_per_user = 3;
        config.redeem_failures_per_address = 5;
    };
    let Some(app) = TestApp::spawn_configured(backend, adjust).await else { return };
    let admin = app.login_admin().await;
    let good = codes_of(&pack_code(&app, &admin, 1, 10).await).remove(0);
    let ida = app.register("ida@example.com", "ida-password-1").await;
    for wrong in ["ABCD-EFGH-JKMN-PQRS-TUVW", "not a code", "ABCD-EFGH-JKMN-PQRS-TUVX"] {
        assert_eq!(error_body(redeem(&app, &ida, wrong).await, 404).await["code"], "redeem.invalid_code");
    }
    let limited = redeem(&app, &ida, &good).await;
    assert_eq!(error_body(limited, 429).await["code"], "redeem.rate_limited", "even a good code waits");
    // Another user from the same address has two wrong codes left there.
    let jon = app.register("jon@example.com", "jon-password-1").await;
    for _ in 0..2 {
        assert_eq!(redeem(&app, &jon, "ABCD-EFGH-JKMN-PQRS-TUVW").await.status(), 404);
    }
    assert_eq!(error_body(redeem(&app, &jon, &good).await, 429).await["code"], "redeem.rate_limited");
}

mod wrong_codes_are_rate_limited_per_user_and_per_address {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        super::wrong_codes_are_rate_limited_per_user_and_per_address(nubo_tests::Backend::Sqlite).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        super::wrong_codes_are_rate_limited_per_user_and_per_address(nubo_tests::Backend::Postgres).await
    }
}
