//! Two-factor sign-in (TOTP, RFC 6238) over HTTP: setup, enabling with a right code, the code
//! step of a password sign-in (428, 401, 200), replays and used recovery codes refused,
//! disabling; the per-account budget of wrong codes. Codes are computed with `totp-rs` from the
//! `otpauth://` URI the server hands out, as an authenticator app would.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nubo_tests::{Session, TestApp, error_body, login_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};
use totp_rs::Totp;

on_every_backend!(
    two_factor_sign_in_asks_for_a_code_accepts_each_once_and_can_be_turned_off,
    setup_is_refused_when_on_and_enabling_needs_a_pending_setup,
    wrong_codes_are_rate_limited_per_account,
    a_recovery_code_disables_two_factor_sign_in,
    a_magic_link_waits_for_the_code_and_is_used_once
);

const PASSWORD: &str = "a-long-password";
const STEP: u64 = 30;

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// Waits, when the current 30-second step is about to end, for the next one; answers the
/// current step. The steps before and after it are then accepted for at least 20 seconds.
async fn aligned_step() -> u64 {
    let into_step = unix_now() % STEP;
    if into_step >= STEP - 10 {
        tokio::time::sleep(Duration::from_secs(STEP - into_step) + Duration::from_millis(200)).await;
    }
    unix_now() / STEP
}

fn code_at(totp: &Totp, step: u64) -> String {
    totp.generate(step * STEP).to_string()
}

/// A six-digit code that is the code of none of the steps around `step`.
fn wrong_code(totp: &Totp, step: u64) -> String {
    let right: Vec<String> = (step - 2..=step + 2).map(|s| code_at(totp, s)).collect();
    (0..).map(|n| format!("{:06}", (123_456 + n * 7_919) % 1_000_000)).find(|c| !right.contains(c)).unwrap()
}

fn login_with_code(email: &str, code: Option<&str>) -> Value {
    let mut body = login_body(email, PASSWORD);
    if let Some(code) = code {
        body["two_fa_code"] = code.into();
    }
    body
}

async fn sign_in(app: &TestApp, email: &str, code: Option<&str>) -> reqwest::Response {
    app.call(Method::POST, "/user/session", None, Some(login_with_code(email, code))).await
}

/// Starts a setup; answers the app's view of the secret.
async fn start_setup(app: &TestApp, session: &Session) -> Totp {
    let response = app.call(Method::GET, "/user/settings/2fa", Some(&session.access), None).await;
    assert_eq!(response.status(), 200);
    let setup: Value = response.json().await.unwrap();
    let totp = Totp::from_url(setup["uri"].as_str().unwrap()).expect("an otpauth URI an app reads");
    assert_eq!(totp.secret().to_base32(), setup["secret"].as_str().unwrap(), "the same secret for manual entry");
    totp
}

async fn enable(app: &TestApp, session: &Session, code: &str) -> reqwest::Response {
    app.call(Method::POST, "/user/settings/2fa", Some(&session.access), Some(json!({"code": code}))).await
}

async fn disable(app: &TestApp, session: &Session, code: &str) -> reqwest::Response {
    app.call(Method::DELETE, "/user/settings/2fa", Some(&session.access), Some(json!({"code": code}))).await
}

async fn two_factor_enabled(app: &TestApp, session: &Session) -> bool {
    let me: Value = app.call(Method::GET, "/user/me", Some(&session.access), None).await.json().await.unwrap();
    me["two_factor_enabled"].as_bool().expect("the profile says")
}

/// Registers `email`, enables two-factor sign-in with the code of `step - 1` and answers the
/// app's secret and the recovery codes.
async fn enabled_account(app: &TestApp, email: &str, step: u64) -> (Session, Totp, Vec<String>) {
    let session = app.register(email, PASSWORD).await;
    let totp = start_setup(app, &session).await;
    let response = enable(app, &session, &code_at(&totp, step - 1)).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    let codes: Vec<String> =
        answer["recovery_codes"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_owned()).collect();
    (session, totp, codes)
}

async fn two_factor_sign_in_asks_for_a_code_accepts_each_once_and_can_be_turned_off(app: TestApp) {
    let email = "tess@example.com";
    let session = app.register(email, PASSWORD).await;
    assert!(!two_factor_enabled(&app, &session).await);
    let totp = start_setup(&app, &session).await;
    assert_eq!(totp.issuer(), Some("Nubo"), "the issuer is the site name");
    assert_eq!(totp.account_name(), email);
    let step = aligned_step().await;

    // A wrong code does not enable it; the right one does and answers ten recovery codes.
    let refused = enable(&app, &session, &wrong_code(&totp, step)).await;
    let body = error_body(refused, 403).await;
    assert_eq!((body["code"].as_str(), body["field"].as_str()), (Some("user.two_factor_wrong_code"), Some("code")));
    assert!(!two_factor_enabled(&app, &session).await);
    let response = enable(&app, &session, &code_at(&totp, step - 1)).await;
    assert_eq!(response.status(), 200);
    let codes: Value = response.json().await.unwrap();
    let codes: Vec<&str> = codes["recovery_codes"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(codes.len(), 10);
    assert_eq!(codes.iter().collect::<std::collections::HashSet<_>>().len(), 10, "distinct codes");
    assert!(two_factor_enabled(&app, &session).await);

    // The password alone is no longer enough; a wrong code is refused; the right one signs in.
    let body = error_body(sign_in(&app, email, None).await, 428).await;
    assert_eq!(body["code"], "auth.two_factor_required");
    let body = error_body(sign_in(&app, email, Some(&wrong_code(&totp, step))).await, 401).await;
    assert_eq!(body["code"], "auth.two_factor_invalid");
    let code = code_at(&totp, step);
    let response = sign_in(&app, email, Some(&code)).await;
    assert_eq!(response.status(), 200);
    let signed_in: Value = response.json().await.unwrap();
    assert_eq!(signed_in["user"]["two_factor_enabled"], true);

    // The same code again (a replay, within its step) is refused, and so is the enabling code.
    let body = error_body(sign_in(&app, email, Some(&code)).await, 401).await;
    assert_eq!(body["code"], "auth.two_factor_invalid");
    assert!(body["message"].as_str().unwrap().contains("already used"), "{body}");
    let body = error_body(sign_in(&app, email, Some(&code_at(&totp, step - 1))).await, 401).await;
    assert_eq!(body["code"], "auth.two_factor_invalid");

    // A recovery code signs in once, however it is typed; the second use is refused.
    let typed = codes[3].to_uppercase().replace('-', " ");
    assert_eq!(sign_in(&app, email, Some(&typed)).await.status(), 200);
    let body = error_body(sign_in(&app, email, Some(codes[3])).await, 401).await;
    assert_eq!(body["code"], "auth.two_factor_invalid");

    // A wrong password stays a wrong password, code or not.
    let mut wrong_password = login_with_code(email, Some(&code_at(&totp, step + 1)));
    wrong_password["credential"] = "not-the-password".into();
    let response = app.call(Method::POST, "/user/session", None, Some(wrong_password)).await;
    assert_eq!(error_body(response, 401).await["code"], "auth.invalid_credentials");

    // Disabling takes a code too; then the password alone signs in again.
    let body = error_body(disable(&app, &session, &wrong_code(&totp, step)).await, 403).await;
    assert_eq!(body["code"], "user.two_factor_wrong_code");
    assert_eq!(disable(&app, &session, &code_at(&totp, step + 1)).await.status(), 204);
    assert!(!two_factor_enabled(&app, &session).await);
    assert_eq!(sign_in(&app, email, None).await.status(), 200);
    let body = error_body(disable(&app, &session, &code_at(&totp, step)).await, 409).await;
    assert_eq!(body["code"], "user.two_factor_not_enabled");
}

async fn setup_is_refused_when_on_and_enabling_needs_a_pending_setup(app: TestApp) {
    let session = app.register("uma@example.com", PASSWORD).await;
    let body = error_body(enable(&app, &session, "123456").await, 409).await;
    assert_eq!(body["code"], "user.two_factor_no_setup");

    // A second setup replaces the first: the first secret's codes no longer enable.
    let first = start_setup(&app, &session).await;
    let second = start_setup(&app, &session).await;
    assert_ne!(first.secret().to_base32(), second.secret().to_base32());
    let step = aligned_step().await;
    let body = error_body(enable(&app, &session, &code_at(&first, step)).await, 403).await;
    assert_eq!(body["code"], "user.two_factor_wrong_code");
    assert_eq!(enable(&app, &session, &code_at(&second, step)).await.status(), 200);

    // On: no new setup, no second enabling (the setup was used up).
    let response = app.call(Method::GET, "/user/settings/2fa", Some(&session.access), None).await;
    assert_eq!(error_body(response, 409).await["code"], "user.two_factor_enabled");
    let body = error_body(enable(&app, &session, &code_at(&second, step + 1)).await, 409).await;
    assert_eq!(body["code"], "user.two_factor_enabled");

    // Other accounts are untouched.
    let other = app.register("vic@example.com", PASSWORD).await;
    assert!(!two_factor_enabled(&app, &other).await);
    assert_eq!(sign_in(&app, "vic@example.com", None).await.status(), 200);

    // Anonymous callers are refused before anything else.
    let response = app.call(Method::GET, "/user/settings/2fa", None, None).await;
    assert_eq!(error_body(response, 401).await["code"], "auth.missing_token");
}

async fn wrong_codes_are_rate_limited_per_account(app: TestApp) {
    let step = aligned_step().await;
    let (_, totp, _) = enabled_account(&app, "walt@example.com", step).await;
    let budget = app.config.login_failures_per_identifier;
    for _ in 0..budget {
        let response = sign_in(&app, "walt@example.com", Some(&wrong_code(&totp, step))).await;
        assert_eq!(error_body(response, 401).await["code"], "auth.two_factor_invalid");
    }
    // Over budget, even the right code waits.
    let response = sign_in(&app, "walt@example.com", Some(&code_at(&totp, step))).await;
    assert_eq!(error_body(response, 429).await["code"], "auth.rate_limited");
    // The budget is the account's: another account with a second factor still signs in.
    let (_, other, _) = enabled_account(&app, "xena@example.com", step).await;
    assert_eq!(sign_in(&app, "xena@example.com", Some(&code_at(&other, step))).await.status(), 200);
}

async fn a_recovery_code_disables_two_factor_sign_in(app: TestApp) {
    let step = aligned_step().await;
    let (session, totp, codes) = enabled_account(&app, "yann@example.com", step).await;
    assert_eq!(disable(&app, &session, &codes[0]).await.status(), 204);
    assert!(!two_factor_enabled(&app, &session).await);
    // Enabled again, the old recovery codes are gone: only the new ones work.
    let totp_again = start_setup(&app, &session).await;
    assert_ne!(totp.secret().to_base32(), totp_again.secret().to_base32());
    let response = enable(&app, &session, &code_at(&totp_again, step)).await;
    assert_eq!(response.status(), 200);
    let body = error_body(sign_in(&app, "yann@example.com", Some(&codes[1])).await, 401).await;
    assert_eq!(body["code"], "auth.two_factor_invalid");
}

async fn a_magic_link_waits_for_the_code_and_is_used_once(app: TestApp) {
    use nubo_service::identity::mailed_token::{Purpose, issue};
    let admin = app.login_admin().await;
    let settings = json!({"auth_methods": ["email_password", "magic_link"]});
    assert_eq!(app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(settings)).await.status(), 204);
    let step = aligned_step().await;
    let (session, totp, _) = enabled_account(&app, "mia@example.com", step).await;
    // The token the mail would carry (the mail itself is the mail tests' subject).
    let user = session.user_id.parse().unwrap();
    let token = issue(app.context().store(), Purpose::MagicLink, user).await.unwrap();
    let body = |code: Option<String>| json!({"provider": "magic_link", "identifier": token, "two_fa_code": code});

    let response = app.call(Method::POST, "/user/session", None, Some(body(None))).await;
    assert_eq!(error_body(response, 428).await["code"], "auth.two_factor_required");
    let response = app.call(Method::POST, "/user/session", None, Some(body(Some(wrong_code(&totp, step))))).await;
    assert_eq!(error_body(response, 401).await["code"], "auth.two_factor_invalid");
    let response = app.call(Method::POST, "/user/session", None, Some(body(Some(code_at(&totp, step))))).await;
    assert_eq!(response.status(), 200, "the link outlived the code step");
    let response = app.call(Method::POST, "/user/session", None, Some(body(Some(code_at(&totp, step + 1))))).await;
    assert_eq!(error_body(response, 409).await["code"], "auth.magic_link_used");
}
