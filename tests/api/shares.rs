//! Shares: the owner's life cycle of a share, what a visitor without an account sees, browses
//! and downloads, the password and its grant and rate limit, the counters and limits, and that
//! a visitor never reaches anything outside the share.

use nubo_tests::files::content;
use nubo_tests::{Session, TestApp, error_body, on_every_backend};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

on_every_backend!(
    a_share_lives_from_creation_to_its_end,
    a_visitor_reaches_nothing_outside_the_share,
    a_password_opens_a_share_through_a_grant_and_wrong_ones_are_limited,
    forty_concurrent_wrong_passwords_from_one_address_check_no_more_than_five,
    limits_expiry_and_the_owners_state_close_a_share,
    the_group_permission_and_ownership_guard_shares,
    administrators_oversee_every_share,
    storage_shows_used_total_and_free,
    a_visitor_saves_a_share_into_their_files_sharing_its_blobs,
    shared_objects_are_marked_and_their_links_found_by_object,
);

/// A user with a folder `album` holding `a.txt` and `inner/b.txt`, and a file `outside.txt`
/// next to it: (session, album id, a.txt id, inner id, b.txt id, outside id).
struct Tree {
    owner: Session,
    album: String,
    a: String,
    inner: String,
    b: String,
    outside: String,
}

const A: &[u8] = b"the first file, shared with everyone who has the code";

async fn tree(app: &TestApp, email: &str) -> Tree {
    let owner = app.register(email, "share-owner-password").await;
    let root = app.root_id(&owner).await;
    let album = app.mkdir(&owner, &root, "album").await;
    let a = app.upload(&owner, &album, "a.txt", A).await["id"].as_str().unwrap().to_owned();
    let inner = app.mkdir(&owner, &album, "inner").await;
    let b = app.upload(&owner, &inner, "b.txt", &content(3000, 2)).await["id"].as_str().unwrap().to_owned();
    let outside = app.upload(&owner, &root, "outside.txt", b"private").await["id"].as_str().unwrap().to_owned();
    Tree { owner, album, a, inner, b, outside }
}

async fn share(app: &TestApp, owner: &Session, body: Value) -> Value {
    let response = app.call(Method::POST, "/share", Some(&owner.access), Some(body)).await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap_or_default());
    response.json().await.unwrap()
}

/// A visitor's request (no account), with extra headers.
async fn visit(app: &TestApp, method: Method, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = app.request(method, path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// A visitor's download of `object` through share `code`: the token's answer.
async fn visitor_token(app: &TestApp, code: &str, object: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    visit(app, Method::POST, &format!("/share/{code}/download/{object}"), headers).await
}

async fn fetch(app: &TestApp, token: reqwest::Response, range: Option<&str>) -> reqwest::Response {
    assert_eq!(token.status(), 200, "token");
    let token: Value = token.json().await.unwrap();
    let mut request = app.client.get(format!("{}{}", app.base_url, token["url"].as_str().unwrap()));
    if let Some(range) = range {
        request = request.header("range", range);
    }
    request.send().await.unwrap()
}

async fn owner_view(app: &TestApp, owner: &Session, code: &str) -> Value {
    let list: Value = app.call(Method::GET, "/share", Some(&owner.access), None).await.json().await.unwrap();
    list["items"].as_array().unwrap().iter().find(|s| s["code"] == code).cloned().expect("listed")
}

async fn a_share_lives_from_creation_to_its_end(app: TestApp) {
    let t = tree(&app, "owner@example.com").await;
    let created = share(&app, &t.owner, json!({"object_id": t.album})).await;
    let code = created["code"].as_str().unwrap().to_owned();
    assert!(code.len() >= 10 && code.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'), "{code}");
    assert!(created["url"].as_str().unwrap().ends_with(&format!("/share/{code}")), "the app's page");
    assert!(!created["url"].as_str().unwrap().contains("/api/"));
    assert_eq!((created["name"].as_str(), created["kind"].as_str()), (Some("album"), Some("folder")));
    assert_eq!(created["password_protected"], false);

    // The public view: no account, no e-mail address, and views count once per visitor.
    for _ in 0..3 {
        let response = visit(&app, Method::GET, &format!("/share/{code}"), &[("user-agent", "visitor-one")]).await;
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        assert_eq!((body["name"].as_str(), body["locked"].as_bool()), (Some("album"), Some(false)));
        assert_eq!(body["owner"]["nickname"], "owner");
        assert!(!body.to_string().contains("owner@example.com"), "{body}");
    }
    visit(&app, Method::GET, &format!("/share/{code}"), &[("user-agent", "visitor-two")]).await;
    assert_eq!(owner_view(&app, &t.owner, &code).await["views"], 2, "two visitors");

    // Browsing: the shared folder, then a folder below it.
    let top: Value = visit(&app, Method::GET, &format!("/share/{code}/children"), &[]).await.json().await.unwrap();
    let names: Vec<&str> = top["items"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["inner", "a.txt"], "folders first");
    let inner: Value =
        visit(&app, Method::GET, &format!("/share/{code}/children/inner/"), &[]).await.json().await.unwrap();
    assert_eq!(inner["path"], "/inner");
    assert_eq!(inner["items"][0]["id"], t.b.as_str());

    // Downloads, with Range, each counted.
    let whole = fetch(&app, visitor_token(&app, &code, &t.a, &[]).await, None).await;
    assert_eq!(whole.bytes().await.unwrap(), A);
    let part = fetch(&app, visitor_token(&app, &code, &t.b, &[]).await, Some("bytes=10-19")).await;
    assert_eq!(part.status(), 206);
    assert_eq!(part.bytes().await.unwrap(), content(3000, 2)[10..20]);
    let view = owner_view(&app, &t.owner, &code).await;
    assert_eq!((view["downloads"].as_i64(), view["available"].as_bool()), (Some(2), Some(true)));

    // Changing and ending it.
    let changed = app
        .call(Method::PATCH, &format!("/share/{code}"), Some(&t.owner.access), Some(json!({"max_downloads": 10})))
        .await;
    assert_eq!(changed.json::<Value>().await.unwrap()["max_downloads"], 10);
    let gone = app.call(Method::DELETE, &format!("/share/{code}"), Some(&t.owner.access), None).await;
    assert_eq!(gone.status(), 204);
    let after = visit(&app, Method::GET, &format!("/share/{code}"), &[]).await;
    assert_eq!(error_body(after, 404).await["code"], "share.not_found");
}

async fn a_visitor_reaches_nothing_outside_the_share(app: TestApp) {
    let t = tree(&app, "owner@example.com").await;
    let stranger = tree(&app, "stranger@example.com").await;
    let folder = share(&app, &t.owner, json!({"object_id": t.inner})).await["code"].as_str().unwrap().to_owned();
    let file = share(&app, &t.owner, json!({"object_id": t.a})).await["code"].as_str().unwrap().to_owned();

    // Ids from outside: the owner's other files, the parent, another user's file, a made-up id.
    for outside in [&t.a, &t.outside, &t.album, &stranger.a, &uuid::Uuid::new_v4().to_string()] {
        let response = visitor_token(&app, &folder, outside, &[]).await;
        assert_eq!(error_body(response, 404).await["code"], "object.not_found", "{outside}");
    }
    let response = visitor_token(&app, &file, &t.b, &[]).await;
    assert_eq!(error_body(response, 404).await["code"], "object.not_found", "a file share reaches only its file");
    assert_eq!(visitor_token(&app, &folder, &t.b, &[]).await.status(), 200, "inside the share");
    assert_eq!(visitor_token(&app, &file, &t.a, &[]).await.status(), 200, "the shared file itself");

    // Paths that try to leave the shared folder.
    // (A client normalises plain `.` and `..` segments away; encoded, they reach the server.)
    for bad in ["%2E%2E", "x/%2E%2E/%2E%2E", "a%2Fb", "a%2fb", "a%5Cb", "a//b", "%2E%2E/a.txt"] {
        let response = visit(&app, Method::GET, &format!("/share/{folder}/children/{bad}"), &[]).await;
        assert!(matches!(response.status().as_u16(), 400 | 404), "{bad}: {}", response.status());
        if response.status() == 400 {
            assert_eq!(error_body(response, 400).await["code"], "share.path_invalid", "{bad}");
        }
    }
    let file_share_browse = visit(&app, Method::GET, &format!("/share/{file}/children"), &[]).await;
    assert_eq!(file_share_browse.status(), 409, "a shared file has no children");
    let missing = visit(&app, Method::GET, &format!("/share/{folder}/children/nothing-here"), &[]).await;
    assert_eq!(missing.status(), 404);

    // The share grants reading only: an owner's route with no account answers 401.
    let write = visit(&app, Method::DELETE, "/object", &[]).await;
    assert_eq!(write.status(), StatusCode::UNAUTHORIZED);
}

async fn a_password_opens_a_share_through_a_grant_and_wrong_ones_are_limited(app: TestApp) {
    let t = tree(&app, "owner@example.com").await;
    let created = share(&app, &t.owner, json!({"object_id": t.album, "password": "open sesame"})).await;
    let code = created["code"].as_str().unwrap().to_owned();
    assert_eq!(created["password_protected"], true);
    assert!(!created.to_string().contains("open sesame"), "never shown");
    let stored: (String,) = sqlx::query_as("SELECT password_hash FROM shares WHERE code = $1")
        .bind(&code)
        .fetch_one(app.context().db().reader())
        .await
        .unwrap();
    assert!(stored.0.starts_with("$argon2id$"), "{}", stored.0);

    let locked: Value = visit(&app, Method::GET, &format!("/share/{code}"), &[]).await.json().await.unwrap();
    assert_eq!((locked["locked"].as_bool(), locked["password_required"].as_bool()), (Some(true), Some(true)));
    assert!(locked["name"].is_null(), "nothing of the object while locked: {locked}");
    let browse = visit(&app, Method::GET, &format!("/share/{code}/children"), &[]).await;
    assert_eq!(error_body(browse, 401).await["code"], "share.password_required");
    assert_eq!(visitor_token(&app, &code, &t.a, &[]).await.status(), 401);

    let wrong = visit(&app, Method::GET, &format!("/share/{code}"), &[("x-share-password", "guess")]).await;
    assert_eq!(error_body(wrong, 403).await["code"], "share.password_wrong");
    let opened: Value =
        visit(&app, Method::GET, &format!("/share/{code}?password=open%20sesame"), &[]).await.json().await.unwrap();
    assert_eq!(opened["name"], "album");
    let grant = opened["grant"].as_str().unwrap().to_owned();
    let with_grant = [("x-share-grant", grant.as_str())];
    assert_eq!(visit(&app, Method::GET, &format!("/share/{code}/children"), &with_grant).await.status(), 200);
    let file = fetch(&app, visitor_token(&app, &code, &t.a, &with_grant).await, None).await;
    assert_eq!(file.bytes().await.unwrap(), A);

    // A grant is for its share only.
    let other = share(&app, &t.owner, json!({"object_id": t.inner, "password": "other"})).await;
    let other_code = other["code"].as_str().unwrap();
    let borrowed = visit(&app, Method::GET, &format!("/share/{other_code}/children"), &with_grant).await;
    assert_eq!(borrowed.status(), 401);

    // A new password ends the old grant.
    let path = format!("/share/{code}");
    app.call(Method::PATCH, &path, Some(&t.owner.access), Some(json!({"password": "new secret"}))).await;
    let stale = visit(&app, Method::GET, &format!("/share/{code}/children"), &with_grant).await;
    assert_eq!(error_body(stale, 401).await["code"], "share.password_required");

    // Five wrong passwords from one address, and the right one is refused too, for a while.
    // On PostgreSQL (with Redis) the fifth goes to a second master: both count in the store they
    // share. (SQLite runs with the in-memory store: single-master by design.)
    // (The "guess" above was the first.)
    for _ in 0..3 {
        let response = visit(&app, Method::GET, &path, &[("x-share-password", "wrong")]).await;
        assert_eq!(response.status(), 403);
    }
    let peer = app.spawn_peer().await;
    let clustered = app.backend == nubo_tests::Backend::Postgres;
    let peer_url = format!("http://{}/api/v1/share/{code}", peer.addr);
    let fifth_url = if clustered { peer_url.clone() } else { app.api(&path) };
    let fifth = app.client.get(&fifth_url).header("x-share-password", "wrong").send().await.unwrap();
    assert_eq!(fifth.status(), 403);
    let mut refusing = vec![app.api(&path)];
    if clustered {
        refusing.push(peer_url);
    }
    for url in refusing {
        let limited = app.client.get(url).header("x-share-password", "new secret").send().await.unwrap();
        assert_eq!(error_body(limited, 429).await["code"], "share.rate_limited");
    }
    peer.shutdown(std::time::Duration::from_secs(5)).await.unwrap();

    // Removing the password opens it to everyone.
    app.call(Method::PATCH, &path, Some(&t.owner.access), Some(json!({"password": null}))).await;
    assert_eq!(visit(&app, Method::GET, &format!("/share/{code}/children"), &[]).await.status(), 200);
}

/// How a burst of guesses was answered: (checked and wrong: 403, refused: 429, refusals that
/// carried `Retry-After`). Anything else fails the test.
async fn tally_guesses(answers: Vec<reqwest::Result<reqwest::Response>>, refused_code: &str) -> (usize, usize, usize) {
    let (mut checked, mut refused, mut retry_after) = (0, 0, 0);
    for answer in answers {
        let answer = answer.unwrap();
        match answer.status().as_u16() {
            403 | 401 => checked += 1,
            429 => {
                refused += 1;
                retry_after += usize::from(answer.headers().contains_key("retry-after"));
                assert_eq!(error_body(answer, 429).await["code"], refused_code);
            }
            other => panic!("a guess answered {other}: {}", answer.text().await.unwrap_or_default()),
        }
    }
    (checked, refused, retry_after)
}

/// Forty wrong passwords sent at once from one address (on PostgreSQL, every other one to a
/// second master sharing Redis): argon2 checks no more of them than the address's budget of
/// five, the rest are refused (those over the waiting bound with `Retry-After`), and the
/// budget is used up exactly as five sequential wrong passwords would use it.
async fn forty_concurrent_wrong_passwords_from_one_address_check_no_more_than_five(app: TestApp) {
    let t = tree(&app, "owner@example.com").await;
    let created = share(&app, &t.owner, json!({"object_id": t.album, "password": "open sesame"})).await;
    let code = created["code"].as_str().unwrap().to_owned();
    let peer = app.spawn_peer().await;
    let mut bases = vec![app.base_url.clone()];
    if app.backend == nubo_tests::Backend::Postgres {
        bases.push(format!("http://{}", peer.addr));
    }

    let guesses = (0..40).map(|n| {
        let url = format!("{}/api/v1/share/{code}", bases[n % bases.len()]);
        app.client.get(url).header("x-share-password", format!("guess-{n}")).send()
    });
    let answers = futures_util::future::join_all(guesses).await;
    let (checked, refused, retry_after) = tally_guesses(answers, "share.rate_limited").await;
    assert!((1..=5).contains(&checked), "{checked} wrong passwords were checked against a budget of 5");
    assert_eq!(checked + refused, 40);
    assert!(retry_after > 0, "the guesses over the waiting bound say when to come back");

    // Whatever the burst left, the budget holds in sequence: five wrong ones in all, then even
    // the right one is refused, on every master.
    for n in checked..5 {
        let response =
            visit(&app, Method::GET, &format!("/share/{code}"), &[("x-share-password", &format!("late-{n}"))]).await;
        assert_eq!(response.status(), 403);
    }
    for base in &bases {
        let limited =
            app.client.get(format!("{base}/api/v1/share/{code}")).header("x-share-password", "open sesame").send();
        assert_eq!(error_body(limited.await.unwrap(), 429).await["code"], "share.rate_limited");
    }
    peer.shutdown(std::time::Duration::from_secs(5)).await.unwrap();
}

/// A master behind a trusted proxy at 127.0.0.1, so a test can speak for many addresses.
async fn behind_a_proxy(backend: nubo_tests::Backend) -> Option<TestApp> {
    TestApp::spawn_configured(backend, |config| {
        config.trusted_proxies = serde_json::from_value(json!("127.0.0.1")).unwrap();
    })
    .await
}

/// 120 wrong passwords at once from 120 addresses: each address is within its own budget, but
/// argon2 checks no more than the share's budget of fifty.
async fn guesses_from_many_addresses_check_no_more_than_the_shares_budget(backend: nubo_tests::Backend) {
    let Some(app) = behind_a_proxy(backend).await else { return };
    let t = tree(&app, "owner@example.com").await;
    let created = share(&app, &t.owner, json!({"object_id": t.album, "password": "open sesame"})).await;
    let code = created["code"].as_str().unwrap().to_owned();
    let guesses = (0..120).map(|n| {
        app.request(Method::GET, &format!("/share/{code}"))
            .header("x-forwarded-for", format!("203.0.113.{n}"))
            .header("x-share-password", format!("guess-{n}"))
            .send()
    });
    let answers = futures_util::future::join_all(guesses).await;
    let (checked, refused, _) = tally_guesses(answers, "share.rate_limited").await;
    assert!((1..=50).contains(&checked), "{checked} wrong passwords were checked against the share's budget of 50");
    assert_eq!(checked + refused, 120);
}

mod guesses_from_many_addresses_check_no_more_than_the_shares_budget {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        super::guesses_from_many_addresses_check_no_more_than_the_shares_budget(nubo_tests::Backend::Sqlite).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        super::guesses_from_many_addresses_check_no_more_than_the_shares_budget(nubo_tests::Backend::Postgres).await
    }
}

async fn limits_expiry_and_the_owners_state_close_a_share(app: TestApp) {
    let t = tree(&app, "owner@example.com").await;
    let code =
        share(&app, &t.owner, json!({"object_id": t.a, "max_downloads": 2})).await["code"].as_str().unwrap().to_owned();
    let path = format!("/share/{code}");

    // Two downloads, then the limit: a token taken before the limit was reached fails too.
    let spare = visitor_token(&app, &code, &t.a, &[]).await;
    assert_eq!(fetch(&app, visitor_token(&app, &code, &t.a, &[]).await, None).await.status(), 200);
    assert_eq!(fetch(&app, visitor_token(&app, &code, &t.a, &[]).await, None).await.status(), 200);
    let late = fetch(&app, spare, None).await;
    assert_eq!(error_body(late, 410).await["code"], "share.download_limit_reached");
    let view = visit(&app, Method::GET, &path, &[]).await;
    assert_eq!(error_body(view, 410).await["code"], "share.download_limit_reached");
    let listed = owner_view(&app, &t.owner, &code).await;
    assert_eq!((listed["downloads"].as_i64(), listed["expired"].as_bool()), (Some(2), Some(true)));

    // Lifting the limit, then an expiry in the past.
    app.call(Method::PATCH, &path, Some(&t.owner.access), Some(json!({"max_downloads": null}))).await;
    assert_eq!(visit(&app, Method::GET, &path, &[]).await.status(), 200);
    let past = json!({"expires_at": "2020-01-01T00:00:00Z"});
    app.call(Method::PATCH, &path, Some(&t.owner.access), Some(past)).await;
    assert_eq!(error_body(visit(&app, Method::GET, &path, &[]).await, 410).await["code"], "share.expired");
    let future = json!({"expires_at": "2999-01-01T00:00:00+02:00"});
    let changed: Value =
        app.call(Method::PATCH, &path, Some(&t.owner.access), Some(future)).await.json().await.unwrap();
    assert_eq!(changed["expires_at"], "2998-12-31T22:00:00Z");
    assert_eq!(visit(&app, Method::GET, &path, &[]).await.status(), 200);
    let bad = app.call(Method::PATCH, &path, Some(&t.owner.access), Some(json!({"expires_at": "soon"}))).await;
    assert_eq!(error_body(bad, 422).await["field"], "expires_at");

    // The object in the trash: missing to visitors, unavailable to the owner; restored: back.
    let ids = json!({"ids": [t.a]});
    app.call(Method::DELETE, "/object", Some(&t.owner.access), Some(ids.clone())).await;
    assert_eq!(error_body(visit(&app, Method::GET, &path, &[]).await, 404).await["code"], "share.not_found");
    assert_eq!(owner_view(&app, &t.owner, &code).await["available"], false);
    app.call(Method::PATCH, "/trash/restore", Some(&t.owner.access), Some(ids)).await;
    assert_eq!(visit(&app, Method::GET, &path, &[]).await.status(), 200);

    // The owner banned: missing to visitors.
    let admin = app.login_admin().await;
    let ban = json!({"status": "BANNED"});
    let banned =
        app.call(Method::PATCH, &format!("/admin/user/{}", t.owner.user_id), Some(&admin.access), Some(ban)).await;
    assert_eq!(banned.status(), 200);
    assert_eq!(visit(&app, Method::GET, &path, &[]).await.status(), 404);
}

async fn the_group_permission_and_ownership_guard_shares(app: TestApp) {
    let t = tree(&app, "owner@example.com").await;
    let other = app.register("other@example.com", "other-password-123").await;
    // Another user's object, or a trashed one of one's own, cannot be shared.
    let response = app.call(Method::POST, "/share", Some(&other.access), Some(json!({"object_id": t.a}))).await;
    assert_eq!(error_body(response, 404).await["code"], "object.not_found");
    let code = share(&app, &t.owner, json!({"object_id": t.a})).await["code"].as_str().unwrap().to_owned();
    // Another user can neither change nor end it, nor see it in their list.
    let path = format!("/share/{code}");
    let patch = app.call(Method::PATCH, &path, Some(&other.access), Some(json!({"max_downloads": 1}))).await;
    assert_eq!(error_body(patch, 404).await["code"], "share.not_found");
    assert_eq!(app.call(Method::DELETE, &path, Some(&other.access), None).await.status(), 404);
    let list: Value = app.call(Method::GET, "/share", Some(&other.access), None).await.json().await.unwrap();
    assert_eq!(list["count"], 0);
    let bad = app
        .call(Method::POST, "/share", Some(&t.owner.access), Some(json!({"object_id": t.a, "max_downloads": 0})))
        .await;
    assert_eq!(error_body(bad, 422).await["field"], "max_downloads");

    // A group without the share permission may not create shares.
    let admin = app.login_admin().await;
    app.set_user_group(&admin, json!({"permissions": {"share": false, "webdav": true, "external_download": true}}))
        .await;
    let owner = app.refresh(&t.owner).await;
    let refused = app.call(Method::POST, "/share", Some(&owner.access), Some(json!({"object_id": t.b}))).await;
    assert_eq!(error_body(refused, 403).await["code"], "share.not_allowed");
}

async fn administrators_oversee_every_share(app: TestApp) {
    let one = tree(&app, "one@example.com").await;
    let two = tree(&app, "two@example.com").await;
    let first = share(&app, &one.owner, json!({"object_id": one.a})).await["code"].as_str().unwrap().to_owned();
    share(&app, &one.owner, json!({"object_id": one.album})).await;
    share(&app, &two.owner, json!({"object_id": two.a})).await;
    let admin = app.login_admin().await;
    let list = |query: String| {
        let admin = admin.access.clone();
        let app = &app;
        async move {
            let response = app.call(Method::GET, &format!("/admin/share{query}"), Some(&admin), None).await;
            assert_eq!(response.status(), 200, "{query}");
            response.json::<Value>().await.unwrap()
        }
    };
    assert_eq!(list(String::new()).await["count"], 3);
    let mine = list(format!("?owner_id={}", one.owner.user_id)).await;
    assert_eq!(mine["count"], 2);
    assert!(mine["items"].as_array().unwrap().iter().all(|s| s["owner_id"] == one.owner.user_id.as_str()));
    assert_eq!(list(format!("?object_id={}", two.a)).await["items"][0]["owner_nickname"], "two");
    assert_eq!(list(format!("?code={first}")).await["items"][0]["name"], "a.txt");
    assert_eq!(list("?code=nothing".to_owned()).await["count"], 0);

    // Members may not; an administrator ends anyone's share.
    let refused = app.call(Method::GET, "/admin/share", Some(&one.owner.access), None).await;
    assert_eq!(error_body(refused, 403).await["code"], "auth.admin_required");
    let refused = app.call(Method::DELETE, &format!("/admin/share/{first}"), Some(&two.owner.access), None).await;
    assert_eq!(refused.status(), 403);
    let ended = app.call(Method::DELETE, &format!("/admin/share/{first}"), Some(&admin.access), None).await;
    assert_eq!(ended.status(), 204);
    assert_eq!(visit(&app, Method::GET, &format!("/share/{first}"), &[]).await.status(), 404);
    let again = app.call(Method::DELETE, &format!("/admin/share/{first}"), Some(&admin.access), None).await;
    assert_eq!(error_body(again, 404).await["code"], "share.not_found");
}

async fn storage_shows_used_total_and_free(app: TestApp) {
    let t = tree(&app, "owner@example.com").await;
    let storage: Value =
        app.call(Method::GET, "/user/storage", Some(&t.owner.access), None).await.json().await.unwrap();
    let used = (A.len() + 3000 + b"private".len()) as i64;
    assert_eq!(storage["used"], used);
    let total = storage["total"].as_i64().unwrap();
    assert_eq!(total, 1024 * 1024 * 1024, "the Users group's quota");
    assert_eq!(storage["free"], total - used);
    // Trashed files still count.
    app.call(Method::DELETE, "/object", Some(&t.owner.access), Some(json!({"ids": [t.outside]}))).await;
    let after: Value = app.call(Method::GET, "/user/storage", Some(&t.owner.access), None).await.json().await.unwrap();
    assert_eq!(after["used"], used);
    assert_eq!(app.call(Method::GET, "/user/storage", None, None).await.status(), 401);
}

/// `POST {path}` (a share's save) as `user`, with the share's grant when given.
async fn save(app: &TestApp, user: &Session, path: &str, body: Value, grant: Option<String>) -> reqwest::Response {
    let mut request = app.request(Method::POST, path).bearer_auth(&user.access).json(&body);
    if let Some(grant) = grant {
        request = request.header("x-share-grant", grant);
    }
    request.send().await.unwrap()
}

async fn physical_files(app: &TestApp) -> i64 {
    let (count,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM physical_files").fetch_one(app.context().db().reader()).await.unwrap();
    count
}

async fn names_in(app: &TestApp, user: &Session, path: &str) -> Vec<String> {
    let listing: Value = app.call(Method::GET, path, Some(&user.access), None).await.json().await.unwrap();
    listing["items"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap().to_owned()).collect()
}

async fn a_visitor_saves_a_share_into_their_files_sharing_its_blobs(app: TestApp) {
    let t = tree(&app, "owner@example.com").await;
    let code = share(&app, &t.owner, json!({"object_id": t.album, "password": "1234"})).await["code"]
        .as_str()
        .unwrap()
        .to_owned();
    let saver = app.register("saver@example.com", "saver-password-1").await;
    let root = app.root_id(&saver).await;
    let path = format!("/share/{code}/save");
    let everything = json!({"dst_id": root});
    let locked = save(&app, &saver, &path, everything.clone(), None).await;
    assert_eq!(error_body(locked, 401).await["code"], "share.password_required");
    let opened: Value = visit(&app, Method::GET, &format!("/share/{code}"), &[("x-share-password", "1234")])
        .await
        .json()
        .await
        .unwrap();
    let grant = opened["grant"].as_str().map(str::to_owned);

    let blobs = physical_files(&app).await;
    let saved = save(&app, &saver, &path, everything.clone(), grant.clone()).await;
    assert_eq!(saved.status(), 200);
    let saved: Value = saved.json().await.unwrap();
    assert_eq!(saved[0]["name"], "album");
    assert_eq!(names_in(&app, &saver, "/directory/album").await, ["inner", "a.txt"]);
    assert_eq!(names_in(&app, &saver, "/directory/album/inner").await, ["b.txt"]);
    let copy_of_a = app
        .call(Method::GET, "/directory/album", Some(&saver.access), None)
        .await
        .json::<Value>()
        .await
        .unwrap()["items"][1]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(app.download(&saver, &copy_of_a).await, A);
    assert_eq!(physical_files(&app).await, blobs, "the copies share the stored blobs");
    let shared_bytes = (A.len() + 3000) as i64;
    assert_eq!(app.storage_used(&saver).await, shared_bytes, "charged to the saver");

    // One chosen object; one outside the share; a name already taken.
    let one = save(&app, &saver, &path, json!({"object_ids": [t.b], "dst_id": root}), grant.clone()).await;
    assert_eq!(one.json::<Value>().await.unwrap()[0]["name"], "b.txt");
    let outside = save(&app, &saver, &path, json!({"object_ids": [t.outside], "dst_id": root}), grant.clone()).await;
    assert_eq!(error_body(outside, 404).await["code"], "object.not_found");
    let clash = save(&app, &saver, &path, everything.clone(), grant.clone()).await;
    assert_eq!(error_body(clash, 409).await["code"], "object.name_taken");
    let used = app.storage_used(&saver).await;
    assert_eq!(used, shared_bytes + 3000);

    // Over quota: 507 and nothing saved.
    let admin = app.login_admin().await;
    app.set_user_group(&admin, json!({"max_storage": used + 10})).await;
    let saver = app.refresh(&saver).await;
    let elsewhere = app.mkdir(&saver, &root, "elsewhere").await;
    let full = save(&app, &saver, &path, json!({"dst_id": elsewhere}), grant.clone()).await;
    assert_eq!(error_body(full, 507).await["code"], "storage.quota_exceeded");
    assert!(names_in(&app, &saver, "/directory/elsewhere").await.is_empty(), "nothing partial");
    assert_eq!(app.storage_used(&saver).await, used);

    // A group without the permission; no account at all.
    let permissions = json!({"share": true, "webdav": true, "external_download": true, "share_save": false});
    app.set_user_group(&admin, json!({"max_storage": 1_i64 << 40, "permissions": permissions})).await;
    let saver = app.refresh(&saver).await;
    let refused = app
        .request(Method::POST, &path)
        .bearer_auth(&saver.access)
        .header("x-share-grant", grant.clone().unwrap())
        .json(&json!({"dst_id": elsewhere}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_body(refused, 403).await["code"], "share.save_not_allowed");
    let anonymous = visit(&app, Method::POST, &path, &[]).await;
    assert_eq!(anonymous.status(), 401);
}

/// (name, `shared`) of each entry of folder `path`.
async fn marked(app: &TestApp, owner: &Session, path: &str) -> Vec<(String, bool)> {
    let listing: Value =
        app.call(Method::GET, &format!("/directory{path}"), Some(&owner.access), None).await.json().await.unwrap();
    let items = listing["items"].as_array().unwrap().iter();
    items.map(|o| (o["name"].as_str().unwrap().to_owned(), o["shared"].as_bool().unwrap())).collect()
}

async fn shared_objects_are_marked_and_their_links_found_by_object(app: TestApp) {
    let t = tree(&app, "quinn@example.com").await;
    assert_eq!(marked(&app, &t.owner, "/album").await, vec![("inner".to_owned(), false), ("a.txt".to_owned(), false)]);
    let first = share(&app, &t.owner, json!({"object_id": t.a})).await;
    let second = share(&app, &t.owner, json!({"object_id": t.a, "max_downloads": 3})).await;
    share(&app, &t.owner, json!({"object_id": t.outside})).await;
    assert_eq!(marked(&app, &t.owner, "/album").await, vec![("inner".to_owned(), false), ("a.txt".to_owned(), true)]);
    let object: Value =
        app.call(Method::GET, &format!("/object/{}", t.a), Some(&t.owner.access), None).await.json().await.unwrap();
    assert_eq!(object["shared"], true);

    let of_a: Value = app
        .call(Method::GET, &format!("/share?object_id={}", t.a), Some(&t.owner.access), None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(of_a["count"], 2);
    let codes: Vec<&str> = of_a["items"].as_array().unwrap().iter().map(|s| s["code"].as_str().unwrap()).collect();
    assert_eq!(codes, vec![second["code"].as_str().unwrap(), first["code"].as_str().unwrap()], "newest first");
    let all: Value = app.call(Method::GET, "/share", Some(&t.owner.access), None).await.json().await.unwrap();
    assert_eq!(all["count"], 3);
    // Another user's filter finds nothing of this owner's.
    let other = app.register("rita@example.com", "rita-password").await;
    let theirs: Value = app
        .call(Method::GET, &format!("/share?object_id={}", t.a), Some(&other.access), None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(theirs["count"], 0);

    for code in [&first["code"], &second["code"]] {
        let path = format!("/share/{}", code.as_str().unwrap());
        assert_eq!(app.call(Method::DELETE, &path, Some(&t.owner.access), None).await.status(), 204);
    }
    assert_eq!(marked(&app, &t.owner, "/album").await, vec![("inner".to_owned(), false), ("a.txt".to_owned(), false)]);
}
