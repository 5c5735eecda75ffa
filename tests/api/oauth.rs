//! OAuth sign-in and linked accounts against a real OAuth 2.0 server process (oauth2-mock-server,
//! `nubo_tests::oauth`): the test plays the browser, following the master's 302 to the server's
//! authorize endpoint and its redirect back to the callback. Registration, sign-in with the
//! single-use ticket, the refusals (state, exchange, e-mail, identities of others), the QQ
//! flow, linking and unlinking, and the switches.

use nubo_tests::oauth::OAuthServer;
use nubo_tests::{Session, TestApp, error_body, on_every_backend};
use reqwest::Method;
use reqwest::header::LOCATION;
use serde_json::{Value, json};

on_every_backend!(
    a_github_sign_in_registers_then_finds_the_same_user,
    a_wrong_or_replayed_state_is_refused,
    a_failed_code_exchange_is_refused_with_a_generic_code,
    without_an_email_registration_is_refused_but_linking_works,
    qq_signs_in_by_unionid_once_linked,
    identities_are_listed_and_unlinked_but_never_the_last,
    an_identity_of_another_user_or_a_taken_email_is_refused,
    disabled_unknown_and_unconfigured_providers_are_refused
);

const BOTH: &[&str] = &["email_password", "github", "qq"];

/// Starts the OAuth server and configures the master for it; `None` without Node.js.
async fn setup(app: &TestApp, methods: &[&str]) -> Option<(OAuthServer, Session)> {
    let server = OAuthServer::start().await?;
    let admin = app.login_admin().await;
    server.configure(app, &admin, methods).await;
    Some((server, admin))
}

fn location(response: &reqwest::Response) -> String {
    assert_eq!(response.status(), 302, "a redirect");
    response.headers()[LOCATION].to_str().unwrap().to_owned()
}

/// A query parameter of a URL or site path.
fn param(url: &str, name: &str) -> Option<String> {
    let url = reqwest::Url::parse(url).or_else(|_| reqwest::Url::parse(&format!("http://site{url}"))).unwrap();
    url.query_pairs().find(|(key, _)| key == name).map(|(_, value)| value.into_owned())
}

/// What the browser does at the provider: the authorize URL redirects back to the callback
/// with a code and the state; answers that callback URL.
async fn at_provider(app: &TestApp, authorize_url: &str) -> String {
    let answer = app.client.get(authorize_url).send().await.unwrap();
    let back = location(&answer);
    assert!(back.starts_with(&app.api("/user/oauth/")), "back to this site's callback: {back}");
    back
}

/// Starts a sign-in with `provider`; answers the callback URL the provider sends the browser to.
async fn begin(app: &TestApp, provider: &str) -> String {
    let start = app.get(&format!("/user/oauth/{provider}")).await;
    let authorize = location(&start);
    assert_eq!(param(&authorize, "code_challenge_method").as_deref(), Some("S256"));
    assert_eq!(param(&authorize, "code_challenge").map(|c| c.len()), Some(43), "a SHA-256 challenge");
    assert_eq!(
        param(&authorize, "redirect_uri").unwrap(),
        format!("{}/api/v1/user/oauth/{provider}/callback", app.base_url)
    );
    assert!(param(&authorize, "state").is_some_and(|s| s.len() >= 32));
    at_provider(app, &authorize).await
}

/// Where the callback sends the browser.
async fn finish(app: &TestApp, callback: &str) -> String {
    let answer = app.client.get(callback).send().await.unwrap();
    assert_eq!(answer.headers()["cache-control"], "no-store");
    location(&answer)
}

/// A whole sign-in: answers where the browser lands.
async fn sign_in_flow(app: &TestApp, provider: &str) -> String {
    let callback = begin(app, provider).await;
    finish(app, &callback).await
}

async fn redeem(app: &TestApp, provider: &str, ticket: &str) -> reqwest::Response {
    let body = json!({"provider": provider, "identifier": ticket});
    app.call(Method::POST, "/user/session", None, Some(body)).await
}

/// A whole sign-in that must succeed: answers the signed-in user.
async fn signed_in(app: &TestApp, provider: &str) -> Value {
    let landing = sign_in_flow(app, provider).await;
    assert!(landing.starts_with("/login/oauth?"), "{landing}");
    assert_eq!(param(&landing, "provider").as_deref(), Some(provider));
    let answer = redeem(app, provider, &param(&landing, "ticket").unwrap()).await;
    assert_eq!(answer.status(), 200, "{}", answer.text().await.unwrap());
    let body: Value = answer.json().await.unwrap();
    assert!(body["access_token"].is_string() && body["refresh_token"].is_string());
    body["user"].clone()
}

/// Links `provider` to the session's user; answers where the browser lands.
async fn link_flow(app: &TestApp, session: &Session, provider: &str) -> String {
    let start =
        app.call(Method::POST, &format!("/user/settings/identities/{provider}"), Some(&session.access), None).await;
    assert_eq!(start.status(), 200, "{}", start.text().await.unwrap());
    let url = start.json::<Value>().await.unwrap()["url"].as_str().unwrap().to_owned();
    let callback = at_provider(app, &url).await;
    finish(app, &callback).await
}

async fn identities(app: &TestApp, session: &Session) -> Vec<Value> {
    let answer = app.call(Method::GET, "/user/settings/identities", Some(&session.access), None).await;
    assert_eq!(answer.status(), 200);
    answer.json().await.unwrap()
}

async fn a_github_sign_in_registers_then_finds_the_same_user(app: TestApp) {
    let Some((_server, _admin)) = setup(&app, BOTH).await else { return };
    let landing = sign_in_flow(&app, "github").await;
    let ticket = param(&landing, "ticket").unwrap();
    let first = redeem(&app, "github", &ticket).await;
    assert_eq!(first.status(), 200);
    let user = first.json::<Value>().await.unwrap()["user"].clone();
    // The primary verified address, and the GitHub login as nickname.
    assert_eq!(user["email"], "octo@example.com");
    assert_eq!(user["nickname"], "octo");

    // The ticket works once, and only for its provider.
    let again = redeem(&app, "github", &ticket).await;
    assert_eq!(error_body(again, 401).await["code"], "auth.oauth_ticket_invalid");
    let landing = sign_in_flow(&app, "github").await;
    let other = redeem(&app, "qq", &param(&landing, "ticket").unwrap()).await;
    assert_eq!(error_body(other, 401).await["code"], "auth.oauth_ticket_invalid");

    let second = signed_in(&app, "github").await;
    assert_eq!(second["id"], user["id"], "the same identity finds the same user");
    let tokens = redeem_session(&app).await;
    let listed = identities(&app, &tokens).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["provider"], "github");
    assert_eq!(listed[0]["display"], "octo");
    assert!(listed[0]["last_used_at"].is_string());
}

/// Signs in through GitHub and answers the session.
async fn redeem_session(app: &TestApp) -> Session {
    let landing = sign_in_flow(app, "github").await;
    let answer = redeem(app, "github", &param(&landing, "ticket").unwrap()).await;
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().await.unwrap();
    Session {
        access: body["access_token"].as_str().unwrap().to_owned(),
        refresh: body["refresh_token"].as_str().unwrap().to_owned(),
        user_id: body["user"]["id"].as_str().unwrap().to_owned(),
    }
}

async fn a_wrong_or_replayed_state_is_refused(app: TestApp) {
    let Some((_server, _admin)) = setup(&app, BOTH).await else { return };
    let callback = begin(&app, "github").await;
    let state = param(&callback, "state").unwrap();
    let forged = callback.replace(&state, "not-the-state-we-sent");
    assert_eq!(finish(&app, &forged).await, "/login?oauth_error=auth.oauth_state_invalid");
    // A state is bound to its provider.
    let elsewhere = callback.replace("/oauth/github/", "/oauth/qq/");
    assert_eq!(finish(&app, &elsewhere).await, "/login?oauth_error=auth.oauth_state_invalid");

    assert!(finish(&app, &callback).await.starts_with("/login/oauth?"));
    assert_eq!(finish(&app, &callback).await, "/login?oauth_error=auth.oauth_state_invalid", "replayed");
    let missing = app.api("/user/oauth/github/callback?code=abc");
    assert_eq!(finish(&app, &missing).await, "/login?oauth_error=auth.oauth_state_invalid");
}

async fn a_failed_code_exchange_is_refused_with_a_generic_code(app: TestApp) {
    let Some((_server, admin)) = setup(&app, BOTH).await else { return };
    // A code the provider never issued, with a good state.
    let callback = begin(&app, "github").await;
    let code = param(&callback, "code").unwrap();
    let wrong_code = callback.replace(&code, "a-code-nobody-issued");
    assert_eq!(finish(&app, &wrong_code).await, "/login?oauth_error=auth.oauth_exchange_failed");
    // The person declined at the provider.
    let state = param(&begin(&app, "github").await, "state").unwrap();
    let declined = app.api(&format!("/user/oauth/github/callback?state={state}&error=access_denied"));
    assert_eq!(finish(&app, &declined).await, "/login?oauth_error=auth.oauth_exchange_failed");

    // A wrong client secret: the token endpoint refuses.
    let wrong = json!({"github_client_secret": "not-the-secret", "qq_client_secret": "not-the-secret"});
    assert_eq!(app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(wrong)).await.status(), 204);
    assert_eq!(sign_in_flow(&app, "github").await, "/login?oauth_error=auth.oauth_exchange_failed");
    assert_eq!(sign_in_flow(&app, "qq").await, "/login?oauth_error=auth.oauth_exchange_failed");

    // Client secrets are written, never read back.
    let settings: Value =
        app.call(Method::GET, "/admin/settings", Some(&admin.access), None).await.json().await.unwrap();
    assert_eq!(settings["github_client_secret"], "");
    assert_eq!(settings["qq_client_secret"], "");
    assert_eq!(settings["github_client_id"], "nubo-test");
}

async fn without_an_email_registration_is_refused_but_linking_works(app: TestApp) {
    let Some((server, _admin)) = setup(&app, BOTH).await else { return };
    // Only an unverified address: as good as none.
    let github = json!({"id": 777, "login": "quiet", "name": "Quiet", "emails": [
        {"email": "quiet@example.com", "primary": true, "verified": false}]});
    server.set_profiles(json!({"github": github})).await;
    assert_eq!(sign_in_flow(&app, "github").await, "/login?oauth_error=auth.oauth_no_email");

    let person = app.register("quiet-person@example.com", "a-long-password").await;
    assert_eq!(link_flow(&app, &person, "github").await, "/settings?linked=github");
    let user = signed_in(&app, "github").await;
    assert_eq!(user["id"], person.user_id.as_str());
    assert_eq!(user["email"], "quiet-person@example.com");
    // Linking again is harmless.
    assert_eq!(link_flow(&app, &person, "github").await, "/settings?linked=github");
}

async fn qq_signs_in_by_unionid_once_linked(app: TestApp) {
    let Some((server, _admin)) = setup(&app, BOTH).await else { return };
    // QQ gives no e-mail address: a first sign-in cannot register.
    assert_eq!(sign_in_flow(&app, "qq").await, "/login?oauth_error=auth.oauth_no_email");
    let person = app.register("penguin@example.com", "a-long-password").await;
    assert_eq!(link_flow(&app, &person, "qq").await, "/settings?linked=qq");
    let listed = identities(&app, &person).await;
    let qq = listed.iter().find(|i| i["provider"] == "qq").expect("qq listed");
    assert_eq!(qq["display"], "企鹅");

    // The unionid names the person, whatever openid this app sees.
    server
        .set_profiles(json!({"qq": {"openid": "OPENID-OTHER-APP", "unionid": "UNIONID-1", "nickname": "企鹅"}}))
        .await;
    assert_eq!(signed_in(&app, "qq").await["id"], person.user_id.as_str());
    // Without a unionid, the openid does: another identity, not linked to anyone.
    server.set_profiles(json!({"qq": {"openid": "OPENID-1", "unionid": null, "nickname": "企鹅"}})).await;
    assert_eq!(sign_in_flow(&app, "qq").await, "/login?oauth_error=auth.oauth_no_email");
}

async fn identities_are_listed_and_unlinked_but_never_the_last(app: TestApp) {
    let Some((server, _admin)) = setup(&app, BOTH).await else { return };
    let person = app.register("linker@example.com", "a-long-password").await;
    server.set_profiles(json!({"github": {"id": 99, "login": "linker-gh", "name": "L", "emails": []}})).await;
    assert_eq!(link_flow(&app, &person, "github").await, "/settings?linked=github");
    let listed = identities(&app, &person).await;
    let providers: Vec<_> = listed.iter().map(|i| i["provider"].as_str().unwrap()).collect();
    assert_eq!(providers, ["email_password", "github"]);
    assert_eq!(listed[0]["display"], "linker@example.com");
    assert_eq!(listed[1]["display"], "linker-gh");

    // A second GitHub account cannot be linked beside the first.
    server.set_profiles(json!({"github": {"id": 100, "login": "linker-2", "name": "L", "emails": []}})).await;
    assert_eq!(link_flow(&app, &person, "github").await, "/settings?oauth_error=auth.identity_already_linked");

    let unlink = |session: Session| {
        let app = &app;
        async move { app.call(Method::DELETE, "/user/settings/identities/github", Some(&session.access), None).await }
    };
    assert_eq!(unlink(person.clone()).await.status(), 204);
    assert_eq!(identities(&app, &person).await.len(), 1);
    assert_eq!(error_body(unlink(person.clone()).await, 404).await["code"], "auth.identity_not_found");
    let unknown = app.call(Method::DELETE, "/user/settings/identities/myspace", Some(&person.access), None).await;
    assert_eq!(error_body(unknown, 404).await["code"], "auth.oauth_provider_unknown");
    // Unlinked: it no longer signs in as this person (it would register, but gives no e-mail).
    server.set_profiles(json!({"github": {"id": 99, "login": "linker-gh", "name": "L", "emails": []}})).await;
    assert_eq!(sign_in_flow(&app, "github").await, "/login?oauth_error=auth.oauth_no_email");

    // An account made through GitHub has nothing else to sign in with.
    server
        .set_profiles(json!({"github": {"id": 5, "login": "only", "name": "O", "emails": [
        {"email": "only@example.com", "primary": true, "verified": true}]}}))
        .await;
    let only = redeem_session(&app).await;
    let refused = unlink(only.clone()).await;
    assert_eq!(error_body(refused, 409).await["code"], "auth.last_sign_in_method");
    assert_eq!(identities(&app, &only).await.len(), 1);
}

async fn an_identity_of_another_user_or_a_taken_email_is_refused(app: TestApp) {
    let Some((_server, _admin)) = setup(&app, BOTH).await else { return };
    // The GitHub profile's address belongs to an account: no automatic linking.
    let owner = app.register("octo@example.com", "a-long-password").await;
    assert_eq!(sign_in_flow(&app, "github").await, "/login?oauth_error=auth.oauth_email_taken");
    // Its owner links it from Settings; then it signs in as them.
    assert_eq!(link_flow(&app, &owner, "github").await, "/settings?linked=github");
    assert_eq!(signed_in(&app, "github").await["id"], owner.user_id.as_str());

    let other = app.register("someone-else@example.com", "a-long-password").await;
    assert_eq!(link_flow(&app, &other, "github").await, "/settings?oauth_error=auth.identity_linked_elsewhere");
    assert_eq!(identities(&app, &other).await.len(), 1, "nothing linked");
}

async fn disabled_unknown_and_unconfigured_providers_are_refused(app: TestApp) {
    let Some((_server, admin)) = setup(&app, &["email_password", "qq"]).await else { return };
    let person = app.register("switch@example.com", "a-long-password").await;
    let disabled = app.get("/user/oauth/github").await;
    assert_eq!(error_body(disabled, 403).await["code"], "auth.provider_disabled");
    let link = app.call(Method::POST, "/user/settings/identities/github", Some(&person.access), None).await;
    assert_eq!(error_body(link, 403).await["code"], "auth.provider_disabled");
    let session = redeem(&app, "github", "any-ticket").await;
    assert_eq!(error_body(session, 403).await["code"], "auth.provider_disabled");
    let unknown = app.get("/user/oauth/myspace").await;
    assert_eq!(error_body(unknown, 404).await["code"], "auth.oauth_provider_unknown");
    let unknown = app.get("/user/oauth/myspace/callback?code=a&state=b").await;
    assert_eq!(error_body(unknown, 404).await["code"], "auth.oauth_provider_unknown");

    // A flow begun while enabled finishes only while still enabled.
    let callback = begin(&app, "qq").await;
    let off = json!({"auth_methods": ["email_password"]});
    assert_eq!(app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(off)).await.status(), 204);
    assert_eq!(finish(&app, &callback).await, "/login?oauth_error=auth.provider_disabled");

    // Enabled, but no client id.
    let unconfigured = json!({"auth_methods": ["email_password", "github"], "github_client_id": ""});
    assert_eq!(app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(unconfigured)).await.status(), 204);
    let start = app.get("/user/oauth/github").await;
    assert_eq!(error_body(start, 503).await["code"], "auth.oauth_not_configured");

    // Registration closed: a new identity does not make an account.
    let closed = json!({"github_client_id": "nubo-test", "register_enabled": false});
    assert_eq!(app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(closed)).await.status(), 204);
    assert_eq!(sign_in_flow(&app, "github").await, "/login?oauth_error=user.registration_closed");
}
