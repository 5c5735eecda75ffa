//! Outgoing mail against a real SMTP server (aiosmtpd, `nubo_tests::mail`): magic links,
//! password resets, e-mail verification and the administrators' test mail. Each test reads
//! the mail the sink received and follows its link.

use nubo_tests::mail::{SmtpSink, link, link_token};
use nubo_tests::{Session, TestApp, error_body, login_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    a_magic_link_signs_in_once,
    an_unknown_address_is_answered_alike_and_mailed_nothing,
    magic_links_are_refused_while_the_provider_is_disabled,
    mail_requests_are_limited_per_recipient,
    a_password_reset_sets_the_password_once_and_signs_out_everywhere,
    the_test_mail_is_delivered_and_a_refusal_is_reported,
    registration_with_verification_activates_the_account_by_mail
);

/// A sink with the master's mail settings pointed at it, and the administrator's session.
async fn mail_ready(app: &TestApp, settings: Value) -> Option<(SmtpSink, Session)> {
    let sink = SmtpSink::start()?;
    let admin = app.login_admin().await;
    sink.configure(app, &admin).await;
    let response = app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(settings)).await;
    assert_eq!(response.status(), 204, "{}", response.text().await.unwrap());
    Some((sink, admin))
}

fn with_magic_links() -> Value {
    json!({"auth_methods": ["email_password", "magic_link"], "site_url": "https://drive.example.com/"})
}

async fn ask_magic_link(app: &TestApp, email: &str) -> reqwest::Response {
    app.call(Method::POST, "/user/magic_link", None, Some(json!({"email": email}))).await
}

async fn sign_in_with(app: &TestApp, token: &str) -> reqwest::Response {
    app.call(Method::POST, "/user/session", None, Some(json!({"provider": "magic_link", "identifier": token}))).await
}

async fn a_magic_link_signs_in_once(app: TestApp) {
    let Some((sink, _admin)) = mail_ready(&app, with_magic_links()).await else { return };
    let bob = app.register("bob@example.com", "bob-password").await;

    assert_eq!(ask_magic_link(&app, "Bob@Example.com").await.status(), 204);
    let mails = sink.wait_for(1).await;
    assert!(mails[0].contains("X-Envelope-To: bob@example.com"), "{}", mails[0]);
    assert!(mails[0].contains("Subject: Sign in to Nubo"), "{}", mails[0]);
    assert!(mails[0].contains("text/html"), "a HTML part too");
    let url = link(&mails[0], "/login/magic");
    assert!(url.starts_with("https://drive.example.com/login/magic?token="), "built on site_url: {url}");
    let token = link_token(&mails[0], "/login/magic");
    assert_eq!(token.len(), 43, "32 random bytes, base64url");

    let signed_in = sign_in_with(&app, &token).await;
    assert_eq!(signed_in.status(), 200);
    let body: Value = signed_in.json().await.unwrap();
    assert_eq!(body["user"]["id"], bob.user_id.as_str());
    let me = app.call(Method::GET, "/user/me", body["access_token"].as_str(), None).await;
    assert_eq!(me.status(), 200, "the issued token works");

    let again = sign_in_with(&app, &token).await;
    assert_eq!(error_body(again, 409).await["code"], "auth.magic_link_used");
    let forged = sign_in_with(&app, &"A".repeat(43)).await;
    assert_eq!(error_body(forged, 401).await["code"], "auth.magic_link_invalid");
}

async fn an_unknown_address_is_answered_alike_and_mailed_nothing(app: TestApp) {
    let Some((sink, _admin)) = mail_ready(&app, with_magic_links()).await else { return };
    app.register("known@example.com", "known-password").await;

    assert_eq!(ask_magic_link(&app, "nobody@example.com").await.status(), 204);
    let reset =
        app.call(Method::POST, "/user/password_reset", None, Some(json!({"email": "nobody@example.com"}))).await;
    assert_eq!(reset.status(), 204);
    // A mail to a known address afterwards proves the sink worked while the others were asked.
    assert_eq!(ask_magic_link(&app, "known@example.com").await.status(), 204);
    sink.wait_for(1).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let mails = sink.mails();
    assert_eq!(mails.len(), 1, "only the known address got mail: {mails:?}");
    assert!(mails[0].contains("X-Envelope-To: known@example.com"));

    let malformed = ask_magic_link(&app, "not-an-address").await;
    assert_eq!(error_body(malformed, 422).await["field"], "email");
}

async fn magic_links_are_refused_while_the_provider_is_disabled(app: TestApp) {
    let Some((sink, _admin)) = mail_ready(&app, json!({"auth_methods": ["email_password"]})).await else { return };
    app.register("carl@example.com", "carl-password").await;
    let asked = ask_magic_link(&app, "carl@example.com").await;
    assert_eq!(error_body(asked, 403).await["code"], "auth.provider_disabled");
    let signed_in = sign_in_with(&app, "whatever").await;
    assert_eq!(error_body(signed_in, 403).await["code"], "auth.provider_disabled");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(sink.mails().is_empty());
}

async fn mail_requests_are_limited_per_recipient(app: TestApp) {
    let Some((_sink, _admin)) = mail_ready(&app, with_magic_links()).await else { return };
    for _ in 0..5 {
        assert_eq!(ask_magic_link(&app, "flood@example.com").await.status(), 204);
    }
    let refused = ask_magic_link(&app, "flood@example.com").await;
    assert_eq!(error_body(refused, 429).await["code"], "auth.rate_limited");
    assert_eq!(ask_magic_link(&app, "other@example.com").await.status(), 204, "another recipient has its own budget");
}

async fn a_password_reset_sets_the_password_once_and_signs_out_everywhere(app: TestApp) {
    let Some((sink, _admin)) = mail_ready(&app, json!({"site_url": ""})).await else { return };
    let carol = app.register("carol@example.com", "old-password").await;

    let asked = app.call(Method::POST, "/user/password_reset", None, Some(json!({"email": "carol@example.com"}))).await;
    assert_eq!(asked.status(), 204);
    let mails = sink.wait_for(1).await;
    assert!(mails[0].contains("Subject: Reset your Nubo password"), "{}", mails[0]);
    assert!(link(&mails[0], "/reset").starts_with("/reset?token="), "a site path without site_url");
    let token = link_token(&mails[0], "/reset");

    let reset = |password: &'static str| {
        let token = token.clone();
        let app = &app;
        async move {
            let body = json!({"token": token, "password": password});
            app.call(Method::PATCH, "/user/password_reset", None, Some(body)).await
        }
    };
    let short = reset("short").await;
    assert_eq!(error_body(short, 422).await["field"], "password");
    assert_eq!(reset("new-password").await.status(), 204, "a refused password does not spend the token");

    let old =
        app.call(Method::POST, "/user/session", None, Some(login_body("carol@example.com", "old-password"))).await;
    assert_eq!(error_body(old, 401).await["code"], "auth.invalid_credentials");
    app.login("carol@example.com", "new-password").await;
    let refreshed = app.call(Method::POST, "/user/session/refresh", Some(&carol.refresh), None).await;
    assert_eq!(error_body(refreshed, 401).await["code"], "auth.refresh_token_invalid", "old sessions are revoked");

    let reused = reset("third-password").await;
    assert_eq!(error_body(reused, 409).await["code"], "auth.reset_token_used");
    let forged = app
        .call(Method::PATCH, "/user/password_reset", None, Some(json!({"token": "forged", "password": "x-password"})))
        .await;
    assert_eq!(error_body(forged, 401).await["code"], "auth.reset_token_invalid");
    app.login("carol@example.com", "new-password").await;
}

async fn the_test_mail_is_delivered_and_a_refusal_is_reported(app: TestApp) {
    let admin = app.login_admin().await;
    let to = |address: &str| Some(json!({"to": address}));
    let unconfigured =
        app.call(Method::POST, "/admin/settings/mail/test", Some(&admin.access), to("a@example.com")).await;
    assert_eq!(error_body(unconfigured, 503).await["code"], "mail.not_configured");

    let Some(sink) = SmtpSink::start() else { return };
    sink.configure(&app, &admin).await;
    let secret = json!({"mail_smtp_password": "smtp-secret-value"});
    assert_eq!(app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(secret)).await.status(), 204);
    let listed = app.call(Method::GET, "/admin/settings", Some(&admin.access), None).await.text().await.unwrap();
    assert!(listed.contains("\"mail_smtp_host\":\"127.0.0.1\""), "{listed}");
    assert!(!listed.contains("smtp-secret-value"), "{listed}");
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["mail_smtp_password"], "", "a secret is listed empty");
    // The sink takes no credentials: send without them.
    let no_user = json!({"mail_smtp_user": "", "mail_smtp_password": ""});
    assert_eq!(app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(no_user)).await.status(), 204);

    let sent = app.call(Method::POST, "/admin/settings/mail/test", Some(&admin.access), to("inbox@example.com")).await;
    assert_eq!(sent.status(), 204, "{}", sent.text().await.unwrap());
    let mails = sink.wait_for(1).await;
    assert!(mails[0].contains("X-Envelope-To: inbox@example.com") && mails[0].contains("Subject: Test mail from Nubo"));
    assert!(mails[0].contains("From: Nubo <nubo@nubo.test>"), "{}", mails[0]);

    let refused =
        app.call(Method::POST, "/admin/settings/mail/test", Some(&admin.access), to("refuse@example.com")).await;
    let body = error_body(refused, 502).await;
    assert_eq!(body["code"], "mail.send_failed");
    assert!(body["message"].as_str().unwrap().contains("550"), "the server's reason: {body}");
    let malformed = app.call(Method::POST, "/admin/settings/mail/test", Some(&admin.access), to("nobody")).await;
    assert_eq!(error_body(malformed, 422).await["field"], "to");

    let user = app.register("plain@example.com", "plain-password").await;
    let forbidden = app.call(Method::POST, "/admin/settings/mail/test", Some(&user.access), to("a@example.com")).await;
    assert_eq!(error_body(forbidden, 403).await["code"], "auth.admin_required");
    let bad_port = json!({"mail_smtp_port": 0});
    let bad = app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(bad_port)).await;
    assert_eq!(error_body(bad, 422).await["field"], "mail_smtp_port");
}

async fn registration_with_verification_activates_the_account_by_mail(app: TestApp) {
    let Some((sink, _admin)) = mail_ready(&app, json!({"register_email_verification": true})).await else { return };
    let body = json!({"provider": "email_password", "identifier": "dave@example.com", "credential": "dave-password"});
    let created = app.call(Method::POST, "/user", None, Some(body)).await;
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    assert_eq!(created["status"], "INACTIVE");
    let early =
        app.call(Method::POST, "/user/session", None, Some(login_body("dave@example.com", "dave-password"))).await;
    assert_eq!(error_body(early, 403).await["code"], "auth.user_inactive");

    let mails = sink.wait_for(1).await;
    assert!(mails[0].contains("X-Envelope-To: dave@example.com"), "{}", mails[0]);
    let token = link_token(&mails[0], "/verify");
    let verify = |token: String| {
        let app = &app;
        async move { app.call(Method::POST, "/user/verify_email", None, Some(json!({"token": token}))).await }
    };
    assert_eq!(verify(token.clone()).await.status(), 204);
    let session = app.login("dave@example.com", "dave-password").await;
    let me: Value = app.call(Method::GET, "/user/me", Some(&session.access), None).await.json().await.unwrap();
    assert_eq!(me["status"], "ACTIVE");
    assert_eq!(error_body(verify(token).await, 409).await["code"], "auth.verify_token_used");
    assert_eq!(error_body(verify("forged".into()).await, 401).await["code"], "auth.verify_token_invalid");
}
