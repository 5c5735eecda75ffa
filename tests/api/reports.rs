//! Reports of shares: anyone who can open a share reports it (captcha scene `report`, rate-limited
//! per address); administrators list and filter reports and act on them, and each action does
//! what it says (a removed share answers 404, a banned owner is out at once) and is recorded
//! with the administrator who took it. Reports outlive their share.

use nubo_tests::{Session, TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    a_visitor_reports_a_share_and_removing_it_closes_it_for_good,
    dismissing_keeps_the_share_and_banning_shuts_out_the_owner,
    reports_outlive_their_share,
    reports_are_rate_limited_per_address_and_guarded_by_their_captcha,
);

/// A user with a file `name` and a share of it: (owner, share code).
async fn shared_file(app: &TestApp, email: &str, name: &str) -> (Session, String) {
    let owner = app.register(email, "report-owner-password").await;
    let root = app.root_id(&owner).await;
    let file = app.upload(&owner, &root, name, b"whatever is in it").await;
    let body = json!({"object_id": file["id"]});
    let response = app.call(Method::POST, "/share", Some(&owner.access), Some(body)).await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap_or_default());
    let share: Value = response.json().await.unwrap();
    (owner, share["code"].as_str().unwrap().to_owned())
}

async fn report(app: &TestApp, code: &str, token: Option<&str>, body: Value) -> reqwest::Response {
    app.call(Method::POST, &format!("/share/{code}/report"), token, Some(body)).await
}

async fn reports(app: &TestApp, admin: &Session, query: &str) -> Value {
    let response = app.call(Method::GET, &format!("/admin/report{query}"), Some(&admin.access), None).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());
    response.json().await.unwrap()
}

async fn act(app: &TestApp, admin: &Session, id: &Value, action: &str) -> reqwest::Response {
    let path = format!("/admin/report/{}", id.as_str().unwrap());
    app.call(Method::PATCH, &path, Some(&admin.access), Some(json!({ "action": action }))).await
}

async fn a_visitor_reports_a_share_and_removing_it_closes_it_for_good(app: TestApp) {
    let admin = app.login_admin().await;
    let (owner, code) = shared_file(&app, "ruth@example.com", "offer.exe").await;
    let (_, other_code) = shared_file(&app, "sam@example.com", "fine.txt").await;

    // Anyone may report; bad input is refused before anything is recorded.
    let anonymous = json!({"reason": "malware", "description": "  it installs something  "});
    assert_eq!(report(&app, &code, None, anonymous).await.status(), 204);
    let reporter = app.register("vera@example.com", "reporter-password").await;
    assert_eq!(report(&app, &code, Some(&reporter.access), json!({"reason": "spam"})).await.status(), 204);
    assert_eq!(report(&app, &other_code, None, json!({"reason": "copyright"})).await.status(), 204);
    let unknown = report(&app, &code, None, json!({"reason": "boring"})).await;
    assert_eq!(error_body(unknown, 422).await["code"], "request.invalid_body");
    let long = report(&app, &code, None, json!({"reason": "other", "description": "x".repeat(2001)})).await;
    assert_eq!(error_body(long, 422).await["field"], "description");
    let missing = report(&app, "no-such-code", None, json!({"reason": "spam"})).await;
    assert_eq!(error_body(missing, 404).await["code"], "share.not_found");
    let bad_token = report(&app, &code, Some("not-a-token"), json!({"reason": "spam"})).await;
    assert_eq!(bad_token.status(), 401);

    // The list, with its filters.
    let all = reports(&app, &admin, "").await;
    assert_eq!(all["count"], 3);
    let of_share = reports(&app, &admin, &format!("?share={code}")).await;
    assert_eq!(of_share["count"], 2);
    let items = of_share["items"].as_array().unwrap();
    let anonymous = items.iter().find(|r| r["reason"] == "malware").unwrap();
    assert_eq!(anonymous["description"], "it installs something");
    assert_eq!(anonymous["reporter_id"], Value::Null);
    assert_eq!(anonymous["object_name"], "offer.exe");
    assert_eq!(anonymous["owner_id"], owner.user_id.as_str());
    assert_eq!(anonymous["owner_nickname"].as_str().map(|n| !n.is_empty()), Some(true));
    assert_eq!(anonymous["status"], "open");
    assert_eq!(anonymous["share_state"], "open");
    let signed_in = items.iter().find(|r| r["reason"] == "spam").unwrap();
    assert_eq!(signed_in["reporter_id"], reporter.user_id.as_str());
    assert_eq!(reports(&app, &admin, "?reason=copyright").await["items"][0]["share_code"], other_code.as_str());
    assert_eq!(reports(&app, &admin, "?status=handled").await["count"], 0);
    let paging = app.call(Method::GET, "/admin/report?limit=0", Some(&admin.access), None).await;
    assert_eq!(paging.status(), 422);

    // Removing the share: recorded with the administrator, the share's other report settled.
    let removed = act(&app, &admin, &anonymous["id"], "remove_share").await;
    assert_eq!(removed.status(), 200);
    let removed: Value = removed.json().await.unwrap();
    assert_eq!(removed["status"], "handled");
    assert_eq!(removed["action"], "remove_share");
    assert_eq!(removed["handled_by"], admin.user_id.as_str());
    assert!(removed["handled_at"].is_string());
    assert_eq!(removed["share_state"], "removed");
    let settled = reports(&app, &admin, &format!("?share={code}&status=handled")).await;
    assert_eq!(settled["count"], 2, "{settled}");
    assert_eq!(reports(&app, &admin, "?status=open").await["items"][0]["share_code"], other_code.as_str());

    // Visitors get 404 for good; the owner sees why; nobody can report it again.
    let visit = app.call(Method::GET, &format!("/share/{code}"), None, None).await;
    assert_eq!(error_body(visit, 404).await["code"], "share.not_found");
    let listed: Value = app.call(Method::GET, "/share", Some(&owner.access), None).await.json().await.unwrap();
    assert_eq!(listed["items"][0]["removed"], true);
    assert_eq!(listed["items"][0]["available"], false);
    let again = report(&app, &code, None, json!({"reason": "spam"})).await;
    assert_eq!(error_body(again, 404).await["code"], "share.not_found");
    let twice = act(&app, &admin, &signed_in["id"], "dismiss").await;
    assert_eq!(error_body(twice, 409).await["code"], "report.already_handled");
    let unknown = act(&app, &admin, &json!("00000000-0000-4000-8000-000000000001"), "dismiss").await;
    assert_eq!(error_body(unknown, 404).await["code"], "report.not_found");
    let bad_action = act(&app, &admin, &anonymous["id"], "shrug").await;
    assert_eq!(error_body(bad_action, 422).await["code"], "request.invalid_body");
}

async fn dismissing_keeps_the_share_and_banning_shuts_out_the_owner(app: TestApp) {
    let admin = app.login_admin().await;
    let (owner, code) = shared_file(&app, "tom@example.com", "a.txt").await;
    let root = app.root_id(&owner).await;
    let second = app.upload(&owner, &root, "b.txt", b"second").await;
    let response =
        app.call(Method::POST, "/share", Some(&owner.access), Some(json!({"object_id": second["id"]}))).await;
    let second_code = response.json::<Value>().await.unwrap()["code"].as_str().unwrap().to_owned();

    assert_eq!(report(&app, &code, None, json!({"reason": "spam"})).await.status(), 204);
    let listed = reports(&app, &admin, "").await;
    let dismissed: Value = act(&app, &admin, &listed["items"][0]["id"], "dismiss").await.json().await.unwrap();
    assert_eq!(dismissed["action"], "dismiss");
    assert_eq!(dismissed["share_state"], "open");
    assert_eq!(app.call(Method::GET, &format!("/share/{code}"), None, None).await.status(), 200);

    // A ban settles the owner's other open reports and closes every share of theirs at once.
    assert_eq!(report(&app, &code, None, json!({"reason": "illegal"})).await.status(), 204);
    assert_eq!(report(&app, &second_code, None, json!({"reason": "illegal"})).await.status(), 204);
    let open = reports(&app, &admin, "?status=open").await;
    assert_eq!(open["count"], 2);
    let banned = act(&app, &admin, &open["items"][0]["id"], "ban_owner").await;
    assert_eq!(banned.status(), 200);
    assert_eq!(reports(&app, &admin, "?status=open").await["count"], 0);
    let handled = reports(&app, &admin, "?reason=illegal").await;
    assert!(handled["items"].as_array().unwrap().iter().all(|r| r["action"] == "ban_owner"), "{handled}");
    let user: Value = app
        .call(Method::GET, &format!("/admin/user/{}", owner.user_id), Some(&admin.access), None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(user["status"], "BANNED");
    let refused = app.call(Method::GET, "/user/me", Some(&owner.access), None).await;
    assert_eq!(refused.status(), 403, "the owner's token is refused at once");
    for code in [&code, &second_code] {
        assert_eq!(app.call(Method::GET, &format!("/share/{code}"), None, None).await.status(), 404);
    }

    // An administrator's own share cannot get them banned by their own hand.
    let root = app.root_id(&admin).await;
    let file = app.upload(&admin, &root, "admin.txt", b"mine").await;
    let response = app.call(Method::POST, "/share", Some(&admin.access), Some(json!({"object_id": file["id"]}))).await;
    let admin_code = response.json::<Value>().await.unwrap()["code"].as_str().unwrap().to_owned();
    assert_eq!(report(&app, &admin_code, None, json!({"reason": "other"})).await.status(), 204);
    let id = reports(&app, &admin, "?status=open").await["items"][0]["id"].clone();
    let own = act(&app, &admin, &id, "ban_owner").await;
    assert_eq!(error_body(own, 409).await["code"], "user.cannot_ban_self");
    assert_eq!(reports(&app, &admin, "?status=open").await["count"], 1, "a refused action records nothing");
}

async fn reports_outlive_their_share(app: TestApp) {
    let admin = app.login_admin().await;
    let (owner, code) = shared_file(&app, "una@example.com", "gone.txt").await;
    assert_eq!(report(&app, &code, None, json!({"reason": "copyright"})).await.status(), 204);
    let deleted = app.call(Method::DELETE, &format!("/share/{code}"), Some(&owner.access), None).await;
    assert_eq!(deleted.status(), 204);
    let listed = reports(&app, &admin, "").await;
    assert_eq!(listed["count"], 1);
    let kept = &listed["items"][0];
    assert_eq!(kept["share_state"], "deleted");
    assert_eq!(kept["share_code"], code.as_str());
    assert_eq!(kept["object_name"], "gone.txt");
    let remove = act(&app, &admin, &kept["id"], "remove_share").await;
    assert_eq!(error_body(remove, 409).await["code"], "report.share_gone");
    assert_eq!(act(&app, &admin, &kept["id"], "dismiss").await.status(), 200);
}

async fn reports_are_rate_limited_per_address_and_guarded_by_their_captcha(app: TestApp) {
    let admin = app.login_admin().await;
    let (_, code) = shared_file(&app, "wade@example.com", "x.txt").await;
    for n in 0..10 {
        assert_eq!(report(&app, &code, None, json!({"reason": "spam"})).await.status(), 204, "report {n}");
    }
    let limited = report(&app, &code, None, json!({"reason": "spam"})).await;
    assert_eq!(error_body(limited, 429).await["code"], "report.rate_limited");
    assert_eq!(reports(&app, &admin, "").await["count"], 10, "a refused report records nothing");

    let settings = json!({"captcha_report": "builtin"});
    let response = app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(settings)).await;
    assert_eq!(response.status(), 204);
    let missing = report(&app, &code, None, json!({"reason": "spam"})).await;
    assert_eq!(error_body(missing, 422).await["code"], "captcha.required");
    let wrong = report(&app, &code, None, json!({"reason": "spam", "captcha": "nope:nope"})).await;
    assert_eq!(error_body(wrong, 403).await["code"], "captcha.invalid");
}
