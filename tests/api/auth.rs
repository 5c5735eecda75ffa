//! Registration, sign-in, the three guard levels, bans, refresh rotation and sign-out.

use nubo_service::credentials::token::{JwtPayload, TokenType};
use nubo_tests::{Session, TestApp, error_body, login_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

/// One endpoint per access level: `jwt_required`, `admin_required`, `auth_required`.
const GUARDED: [(&str, &str); 3] =
    [("jwt_required", "/user/session"), ("admin_required", "/admin/group"), ("auth_required", "/user/me")];

on_every_backend!(
    registered_user_reaches_jwt_and_auth_levels_but_not_admin,
    every_level_refuses_missing_malformed_expired_and_tampered_tokens,
    a_ban_bites_already_issued_tokens_at_every_level_and_unban_restores,
    wrong_email_and_wrong_password_answer_the_same_401,
    repeated_failures_are_rate_limited,
    forty_concurrent_wrong_passwords_check_no_more_than_the_accounts_budget,
    refresh_rotates_is_idempotent_for_a_moment_and_reuse_revokes_the_family,
    sign_out_revokes_the_refresh_token,
    password_change_revokes_refresh_tokens_and_the_old_password,
    disabled_provider_and_closed_registration_are_refused,
    duplicate_registration_is_a_conflict,
    access_token_lives_one_hour_and_carries_group_claims,
    moving_a_user_to_another_group_requires_a_fresh_token
);

async fn status_of(app: &TestApp, path: &str, token: Option<&str>) -> u16 {
    app.call(Method::GET, path, token, None).await.status().as_u16()
}

async fn registered_user_reaches_jwt_and_auth_levels_but_not_admin(app: TestApp) {
    let user = app.register("alice@example.com", "alice-password").await;
    assert_eq!(status_of(&app, "/user/session", Some(&user.access)).await, 200);
    assert_eq!(status_of(&app, "/user/me", Some(&user.access)).await, 200);
    let response = app.call(Method::GET, "/admin/group", Some(&user.access), None).await;
    assert_eq!(error_body(response, 403).await["code"], "auth.admin_required");

    let admin = app.login_admin().await;
    for (level, path) in GUARDED {
        assert_eq!(status_of(&app, path, Some(&admin.access)).await, 200, "admin at {level}");
    }
    let me: Value = app.call(Method::GET, "/user/me", Some(&user.access), None).await.json().await.unwrap();
    assert_eq!(me["email"], "alice@example.com");
    assert_eq!(me["status"], "ACTIVE");
    assert_eq!(me["group"]["name"], "Users");
    assert!(me.get("password").is_none() && me.get("two_factor_key").is_none());
}

fn claims_of(app: &TestApp, session: &Session) -> JwtPayload {
    app.context().tokens().verify_access(&session.access).unwrap()
}

async fn every_level_refuses_missing_malformed_expired_and_tampered_tokens(app: TestApp) {
    let admin = app.login_admin().await;
    let mut expired = claims_of(&app, &admin);
    expired.iat -= 7200;
    expired.exp -= 7200;
    let expired = app.context().tokens().sign(&expired);
    let (head, signature) = admin.access.rsplit_once('.').unwrap();
    let swapped = if signature.starts_with('A') { 'B' } else { 'A' };
    let tampered = format!("{head}.{swapped}{}", &signature[1..]);
    // A refresh token is validly signed but is not an access token.
    let wrong_kind = admin.refresh.clone();

    for (level, path) in GUARDED {
        let response = app.call(Method::GET, path, None, None).await;
        assert_eq!(response.headers()["www-authenticate"], "Bearer", "{level}");
        assert_eq!(error_body(response, 401).await["code"], "auth.missing_token", "{level}");
        let response = app.request(Method::GET, path).header("authorization", "Basic YTpi").send().await.unwrap();
        assert_eq!(error_body(response, 401).await["code"], "auth.invalid_token", "{level} basic");
        for (what, token, code) in [
            ("malformed", "not-a-token", "auth.invalid_token"),
            ("expired", expired.as_str(), "auth.token_expired"),
            ("tampered", tampered.as_str(), "auth.invalid_token"),
            ("refresh token", wrong_kind.as_str(), "auth.invalid_token"),
        ] {
            let response = app.call(Method::GET, path, Some(token), None).await;
            assert!(response.headers().contains_key("www-authenticate"), "{level} {what}");
            assert_eq!(error_body(response, 401).await["code"], code, "{level} {what}");
        }
    }
}

async fn set_status(app: &TestApp, admin: &Session, user_id: &str, status: &str) {
    let response = app
        .call(Method::PATCH, &format!("/admin/user/{user_id}"), Some(&admin.access), Some(json!({"status": status})))
        .await;
    assert_eq!(response.status(), 200, "status change to {status}");
}

async fn a_ban_bites_already_issued_tokens_at_every_level_and_unban_restores(app: TestApp) {
    let admin = app.login_admin().await;
    // The user is an administrator too, so one token can reach all three levels.
    let admins_group: Value =
        app.call(Method::GET, "/admin/group", Some(&admin.access), None).await.json().await.unwrap();
    let admins_group = admins_group.as_array().unwrap().iter().find(|g| g["is_admin"] == true).unwrap()["id"].clone();
    let body = json!({"email": "bob@example.com", "password": "bob-password", "group_id": admins_group});
    assert_eq!(app.call(Method::POST, "/admin/user", Some(&admin.access), Some(body)).await.status(), 201);
    let bob = app.login("bob@example.com", "bob-password").await;
    for (level, path) in GUARDED {
        assert_eq!(status_of(&app, path, Some(&bob.access)).await, 200, "{level} before ban");
    }

    set_status(&app, &admin, &bob.user_id, "BANNED").await;
    for (level, path) in GUARDED {
        let response = app.call(Method::GET, path, Some(&bob.access), None).await;
        assert_eq!(error_body(response, 403).await["code"], "auth.user_inactive", "{level} after ban");
    }
    let response =
        app.call(Method::POST, "/user/session", None, Some(login_body("bob@example.com", "bob-password"))).await;
    assert_eq!(error_body(response, 403).await["code"], "auth.user_inactive", "banned user cannot sign in");
    let response = app.call(Method::POST, "/user/session/refresh", Some(&bob.refresh), None).await;
    assert_eq!(response.status(), 401, "banned user's refresh tokens are revoked");

    set_status(&app, &admin, &bob.user_id, "ACTIVE").await;
    for (level, path) in GUARDED {
        assert_eq!(status_of(&app, path, Some(&bob.access)).await, 200, "{level} after unban");
    }
    app.login("bob@example.com", "bob-password").await;
}

async fn wrong_email_and_wrong_password_answer_the_same_401(app: TestApp) {
    app.register("carol@example.com", "carol-password").await;
    let wrong_password =
        app.call(Method::POST, "/user/session", None, Some(login_body("carol@example.com", "nope-nope-nope"))).await;
    let wrong_email =
        app.call(Method::POST, "/user/session", None, Some(login_body("nobody@example.com", "carol-password"))).await;
    let a = error_body(wrong_password, 401).await;
    let b = error_body(wrong_email, 401).await;
    assert_eq!(a["code"], "auth.invalid_credentials");
    assert_eq!((a["code"].clone(), a["message"].clone()), (b["code"].clone(), b["message"].clone()));
}

async fn repeated_failures_are_rate_limited(app: TestApp) {
    app.register("dave@example.com", "dave-password").await;
    let limit = app.context().config().login_failures_per_identifier;
    for _ in 0..limit {
        let response =
            app.call(Method::POST, "/user/session", None, Some(login_body("dave@example.com", "wrong-password"))).await;
        assert_eq!(response.status(), 401);
    }
    // Even the right password is refused while the identifier is locked.
    let response =
        app.call(Method::POST, "/user/session", None, Some(login_body("dave@example.com", "dave-password"))).await;
    assert_eq!(error_body(response, 429).await["code"], "auth.rate_limited");
    // Other identifiers are unaffected.
    app.login_admin().await;
}

/// Forty wrong passwords for one account sent at once (on PostgreSQL, every other one to a
/// second master sharing Redis): argon2 checks no more of them than the account's budget, the
/// rest are refused (those over the waiting bound with `Retry-After`); other accounts sign in.
async fn forty_concurrent_wrong_passwords_check_no_more_than_the_accounts_budget(app: TestApp) {
    app.register("erin@example.com", "erin-password").await;
    let limit = app.context().config().login_failures_per_identifier as usize;
    let peer = app.spawn_peer().await;
    let mut bases = vec![app.base_url.clone()];
    if app.backend == nubo_tests::Backend::Postgres {
        bases.push(format!("http://{}", peer.addr));
    }
    let guesses = (0..40).map(|n| {
        let url = format!("{}/api/v1/user/session", bases[n % bases.len()]);
        app.client.post(url).json(&login_body("erin@example.com", &format!("wrong-password-{n}"))).send()
    });
    let answers = futures_util::future::join_all(guesses).await;
    let (mut checked, mut refused, mut retry_after) = (0, 0, 0);
    for answer in answers {
        let answer = answer.unwrap();
        match answer.status().as_u16() {
            401 => checked += 1,
            429 => {
                refused += 1;
                retry_after += usize::from(answer.headers().contains_key("retry-after"));
                assert_eq!(error_body(answer, 429).await["code"], "auth.rate_limited");
            }
            other => panic!("a sign-in answered {other}"),
        }
    }
    assert!((1..=limit).contains(&checked), "{checked} wrong passwords were checked against a budget of {limit}");
    assert_eq!(checked + refused, 40);
    assert!(retry_after > 0, "the guesses over the waiting bound say when to come back");
    // The budget holds in sequence too: the rest of it, then even the right password waits.
    for _ in checked..limit {
        let response =
            app.call(Method::POST, "/user/session", None, Some(login_body("erin@example.com", "wrong-again"))).await;
        assert_eq!(response.status(), 401);
    }
    let right =
        app.call(Method::POST, "/user/session", None, Some(login_body("erin@example.com", "erin-password"))).await;
    assert_eq!(error_body(right, 429).await["code"], "auth.rate_limited");
    app.login_admin().await;
    peer.shutdown(std::time::Duration::from_secs(5)).await.unwrap();
}

async fn refresh(app: &TestApp, refresh_token: &str) -> reqwest::Response {
    app.call(Method::POST, "/user/session/refresh", Some(refresh_token), None).await
}

async fn refresh_rotates_is_idempotent_for_a_moment_and_reuse_revokes_the_family(app: TestApp) {
    let first = app.register("erin@example.com", "erin-password").await;
    let response = refresh(&app, &first.refresh).await;
    assert_eq!(response.status(), 200);
    let second: Value = response.json().await.unwrap();
    let second_refresh = second["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(second_refresh, first.refresh);
    assert_eq!(status_of(&app, "/user/me", second["access_token"].as_str()).await, 200);

    // Presented again a moment later (the first answer was lost on the way): the same pair, on
    // any master, and the session lives on.
    let again = refresh(&app, &first.refresh).await;
    assert_eq!(again.status(), 200, "a retry within the grace");
    assert_eq!(again.json::<Value>().await.unwrap(), second, "the same pair again");
    // Several masters share the store on PostgreSQL (Redis); SQLite is one master.
    if app.backend == nubo_tests::Backend::Postgres {
        let peer = app.spawn_peer().await;
        let through_peer = app
            .client
            .post(format!("http://{}/api/v1/user/session/refresh", peer.addr))
            .bearer_auth(&first.refresh)
            .send()
            .await
            .unwrap();
        assert_eq!(through_peer.json::<Value>().await.unwrap(), second, "every master knows the exchange");
        peer.shutdown(std::time::Duration::from_secs(5)).await.unwrap();
    }
    let third: Value = refresh(&app, &second_refresh).await.json().await.unwrap();
    let third_refresh = third["refresh_token"].as_str().unwrap().to_owned();

    // Once its successor was exchanged, the retired token coming back is a replay: refused, and
    // its whole family dies with it.
    let reuse = refresh(&app, &first.refresh).await;
    assert_eq!(error_body(reuse, 401).await["code"], "auth.refresh_token_reused");
    let after = refresh(&app, &third_refresh).await;
    assert_eq!(error_body(after, 401).await["code"], "auth.refresh_token_invalid");

    // Another sign-in (another family) is unaffected.
    let other = app.login("erin@example.com", "erin-password").await;
    assert_eq!(refresh(&app, &other.refresh).await.status(), 200);
    // An access token is not a refresh token.
    assert_eq!(refresh(&app, &other.access).await.status(), 401);
}

async fn sign_out_revokes_the_refresh_token(app: TestApp) {
    let session = app.register("frank@example.com", "frank-password").await;
    let response = app.call(Method::DELETE, "/user/session", Some(&session.refresh), None).await;
    assert_eq!(response.status(), 204);
    assert_eq!(refresh(&app, &session.refresh).await.status(), 401);
    let missing = app.call(Method::DELETE, "/user/session", None, None).await;
    assert_eq!(error_body(missing, 401).await["code"], "auth.missing_token");
}

async fn password_change_revokes_refresh_tokens_and_the_old_password(app: TestApp) {
    let session = app.register("grace@example.com", "grace-password").await;
    let other_device = app.login("grace@example.com", "grace-password").await;
    let wrong = app
        .call(
            Method::PATCH,
            "/user/settings/password",
            Some(&session.access),
            Some(json!({"old_password": "not-it-at-all", "new_password": "grace-new-password"})),
        )
        .await;
    assert_eq!(error_body(wrong, 403).await["code"], "user.wrong_password");
    let short = app
        .call(
            Method::PATCH,
            "/user/settings/password",
            Some(&session.access),
            Some(json!({"old_password": "grace-password", "new_password": "short"})),
        )
        .await;
    assert_eq!(error_body(short, 422).await["field"], "new_password");

    let response = app
        .call(
            Method::PATCH,
            "/user/settings/password",
            Some(&session.access),
            Some(json!({"old_password": "grace-password", "new_password": "grace-new-password"})),
        )
        .await;
    assert_eq!(response.status(), 204);
    assert_eq!(refresh(&app, &session.refresh).await.status(), 401);
    assert_eq!(refresh(&app, &other_device.refresh).await.status(), 401);
    let old =
        app.call(Method::POST, "/user/session", None, Some(login_body("grace@example.com", "grace-password"))).await;
    assert_eq!(old.status(), 401);
    app.login("grace@example.com", "grace-new-password").await;
}

async fn disabled_provider_and_closed_registration_are_refused(app: TestApp) {
    let admin = app.login_admin().await;
    let passkey = json!({"provider": "passkey", "identifier": "x"});
    let response = app.call(Method::POST, "/user/session", None, Some(passkey.clone())).await;
    assert_eq!(error_body(response, 403).await["code"], "auth.provider_disabled");

    // Enabled: the provider itself now judges the attempt (a passkey sign-in needs its assertion).
    let settings = json!({"auth_methods": ["email_password", "passkey"], "register_enabled": false});
    assert_eq!(app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(settings)).await.status(), 204);
    let response = app.call(Method::POST, "/user/session", None, Some(passkey)).await;
    assert_eq!(error_body(response, 422).await["field"], "credential");

    let body = json!({"provider": "email_password", "identifier": "heidi@example.com", "credential": "heidi-password"});
    let response = app.call(Method::POST, "/user", None, Some(body.clone())).await;
    assert_eq!(error_body(response, 403).await["code"], "user.registration_closed");

    let settings = json!({"auth_methods": ["passkey"], "register_enabled": true});
    assert_eq!(app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(settings)).await.status(), 204);
    let response = app.call(Method::POST, "/user", None, Some(body)).await;
    assert_eq!(error_body(response, 403).await["code"], "auth.provider_disabled");
    let response = app
        .call(
            Method::POST,
            "/user/session",
            None,
            Some(nubo_tests::login_body(nubo_tests::ADMIN_EMAIL, nubo_tests::ADMIN_PASSWORD)),
        )
        .await;
    assert_eq!(error_body(response, 403).await["code"], "auth.provider_disabled");
}

async fn duplicate_registration_is_a_conflict(app: TestApp) {
    app.register("ivan@example.com", "ivan-password").await;
    let body = json!({"provider": "email_password", "identifier": "IVAN@example.com ", "credential": "other-password"});
    let response = app.call(Method::POST, "/user", None, Some(body)).await;
    let body = error_body(response, 409).await;
    assert_eq!(body["code"], "user.email_taken");
    let bad = json!({"provider": "email_password", "identifier": "not-an-email", "credential": "whatever-password"});
    assert_eq!(error_body(app.call(Method::POST, "/user", None, Some(bad)).await, 422).await["field"], "identifier");
}

async fn access_token_lives_one_hour_and_carries_group_claims(app: TestApp) {
    let admin = app.login_admin().await;
    let claims = claims_of(&app, &admin);
    assert_eq!(claims.exp - claims.iat, 3600);
    assert_eq!(claims.typ, TokenType::Access);
    assert!(claims.group.admin);
    assert_eq!(claims.sub.to_string(), admin.user_id);
    let session: Value = app.call(Method::GET, "/user/session", Some(&admin.access), None).await.json().await.unwrap();
    assert_eq!(session["group"]["admin"], true);
    assert_eq!(session["group"]["name"], "Administrators");
    assert!(session["group"]["permissions"]["webdav"].is_boolean());
}

async fn moving_a_user_to_another_group_requires_a_fresh_token(app: TestApp) {
    let admin = app.login_admin().await;
    let user = app.register("judy@example.com", "judy-password").await;
    let groups: Value = app.call(Method::GET, "/admin/group", Some(&admin.access), None).await.json().await.unwrap();
    let admins = groups.as_array().unwrap().iter().find(|g| g["is_admin"] == true).unwrap()["id"].clone();
    let response = app
        .call(
            Method::PATCH,
            &format!("/admin/user/{}", user.user_id),
            Some(&admin.access),
            Some(json!({"group_id": admins})),
        )
        .await;
    assert_eq!(response.status(), 200);
    let stale = app.call(Method::GET, "/admin/group", Some(&user.access), None).await;
    assert_eq!(error_body(stale, 401).await["code"], "auth.token_revoked");
    // Tokens from the second of the move are refused too; one issued later carries the new claims.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let fresh: Value = refresh(&app, &user.refresh).await.json().await.unwrap();
    assert_eq!(status_of(&app, "/admin/group", fresh["access_token"].as_str()).await, 200, "new claims grant admin");
}

on_every_backend!(a_deleted_users_token_answers_401_user_not_found_at_every_level);

/// `docs/errors.md`: the token of a deleted user is 401 `auth.user_not_found` (not the ban's
/// 403), at every level, also at the levels that never read the database.
async fn a_deleted_users_token_answers_401_user_not_found_at_every_level(app: TestApp) {
    let admin = app.login_admin().await;
    let admins_group: Value =
        app.call(Method::GET, "/admin/group", Some(&admin.access), None).await.json().await.unwrap();
    let admins_group = admins_group.as_array().unwrap().iter().find(|g| g["is_admin"] == true).unwrap()["id"].clone();
    let body = json!({"email": "gone@example.com", "password": "gone-password", "group_id": admins_group});
    assert_eq!(app.call(Method::POST, "/admin/user", Some(&admin.access), Some(body)).await.status(), 201);
    let gone = app.login("gone@example.com", "gone-password").await;
    for (level, path) in GUARDED {
        assert_eq!(status_of(&app, path, Some(&gone.access)).await, 200, "{level} before deletion");
    }
    let deleted = app.call(Method::DELETE, &format!("/admin/user/{}", gone.user_id), Some(&admin.access), None).await;
    assert_eq!(deleted.status(), 204);
    for (level, path) in GUARDED {
        let response = app.call(Method::GET, path, Some(&gone.access), None).await;
        assert_eq!(response.headers()["www-authenticate"], "Bearer", "{level}");
        assert_eq!(error_body(response, 401).await["code"], "auth.user_not_found", "{level} after deletion");
    }
}
