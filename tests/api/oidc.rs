//! OpenID Connect sign-in against a real OIDC issuer process (oauth2-mock-server with discovery,
//! a key set and signed ID tokens, `nubo_tests::oauth`): the test plays the browser. Registration
//! and sign-in by `{issuer}#{sub}`, RS256, ES256 and a key rotation; the refusals (a bad
//! signature, an unknown key, a wrong audience or issuer, an expired token, a replayed state or
//! nonce); unverified addresses; the group map; the switches and the SSRF guard.

use nubo_tests::oauth::OAuthServer;
use nubo_tests::{Backend, Session, TestApp, error_body, on_every_backend};
use reqwest::Method;
use reqwest::header::LOCATION;
use serde_json::{Value, json};

on_every_backend!(
    an_oidc_sign_in_registers_then_finds_the_same_user,
    es256_tokens_and_rotated_keys_are_accepted,
    a_bad_signature_or_an_unpublished_key_is_refused,
    a_wrong_audience_or_issuer_or_an_expired_token_is_refused,
    a_replayed_state_or_nonce_is_refused,
    an_unverified_email_registers_nobody_but_a_linked_identity_signs_in,
    the_group_claim_puts_users_in_mapped_groups,
    disabled_unconfigured_or_private_issuers_are_refused,
    a_flow_begun_on_one_master_finishes_on_another
);

const METHODS: &[&str] = &["email_password", "oidc"];

/// Starts the issuer and configures the master for it; `None` without Node.js.
async fn setup(app: &TestApp) -> Option<(OAuthServer, Session)> {
    let server = OAuthServer::start().await?;
    let admin = app.login_admin().await;
    let settings = server.oidc_settings(app, METHODS);
    assert_eq!(patch(app, &admin, settings).await.status(), 204);
    Some((server, admin))
}

async fn patch(app: &TestApp, admin: &Session, body: Value) -> reqwest::Response {
    app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(body)).await
}

fn location(response: &reqwest::Response) -> String {
    assert_eq!(response.status(), 302, "a redirect");
    response.headers()[LOCATION].to_str().unwrap().to_owned()
}

fn param(url: &str, name: &str) -> Option<String> {
    let url = reqwest::Url::parse(url).or_else(|_| reqwest::Url::parse(&format!("http://site{url}"))).unwrap();
    url.query_pairs().find(|(key, _)| key == name).map(|(_, value)| value.into_owned())
}

/// The browser at the issuer: its authorize endpoint redirects back with a code and the state.
async fn at_issuer(app: &TestApp, authorize_url: &str) -> String {
    let back = location(&app.client.get(authorize_url).send().await.unwrap());
    assert!(back.starts_with(&app.api("/user/oauth/oidc/callback?")), "back to the callback: {back}");
    back
}

/// Starts a sign-in; answers the callback URL the issuer sends the browser to.
async fn begin(app: &TestApp, server: &OAuthServer) -> String {
    let authorize = location(&app.get("/user/oauth/oidc").await);
    assert!(authorize.starts_with(&format!("{}/authorize?", server.base_url)), "the discovered endpoint: {authorize}");
    assert_eq!(param(&authorize, "client_id").as_deref(), Some("nubo-oidc"));
    assert_eq!(param(&authorize, "scope").as_deref(), Some("openid email profile"));
    assert_eq!(param(&authorize, "code_challenge_method").as_deref(), Some("S256"));
    assert!(param(&authorize, "nonce").is_some_and(|n| n.len() >= 32), "a fresh nonce");
    assert_ne!(param(&authorize, "nonce"), param(&authorize, "state"));
    at_issuer(app, &authorize).await
}

async fn finish(app: &TestApp, callback: &str) -> String {
    let answer = app.client.get(callback).send().await.unwrap();
    assert_eq!(answer.headers()["cache-control"], "no-store");
    location(&answer)
}

async fn sign_in_flow(app: &TestApp, server: &OAuthServer) -> String {
    let callback = begin(app, server).await;
    finish(app, &callback).await
}

async fn redeem(app: &TestApp, ticket: &str) -> reqwest::Response {
    app.call(Method::POST, "/user/session", None, Some(json!({"provider": "oidc", "identifier": ticket}))).await
}

/// A whole sign-in that must succeed: answers the login answer (tokens and user).
async fn signed_in(app: &TestApp, server: &OAuthServer) -> Value {
    let landing = sign_in_flow(app, server).await;
    assert!(landing.starts_with("/login/oauth?provider=oidc&ticket="), "{landing}");
    let answer = redeem(app, &param(&landing, "ticket").unwrap()).await;
    assert_eq!(answer.status(), 200, "{}", answer.text().await.unwrap());
    answer.json().await.unwrap()
}

fn session(login: &Value) -> Session {
    Session {
        access: login["access_token"].as_str().unwrap().to_owned(),
        refresh: login["refresh_token"].as_str().unwrap().to_owned(),
        user_id: login["user"]["id"].as_str().unwrap().to_owned(),
    }
}

async fn an_oidc_sign_in_registers_then_finds_the_same_user(app: TestApp) {
    let Some((server, _admin)) = setup(&app).await else { return };
    let config: Value = app.get("/site/config").await.json().await.unwrap();
    assert_eq!(config["oidc_display_name"], "Test IdP");
    assert!(config["auth_methods"].as_array().unwrap().contains(&json!("oidc")));

    let first = signed_in(&app, &server).await;
    assert_eq!(first["user"]["email"], "oidc@example.com");
    assert_eq!(first["user"]["nickname"], "oidc-person");
    let second = signed_in(&app, &server).await;
    assert_eq!(second["user"]["id"], first["user"]["id"], "the same (issuer, sub) finds the same user");

    let me = session(&second);
    let listed: Vec<Value> =
        app.call(Method::GET, "/user/settings/identities", Some(&me.access), None).await.json().await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["provider"], "oidc");
    assert_eq!(listed[0]["display"], "oidc-person");

    // Another subject at the same issuer is another person, even with the same name.
    server
        .set_profiles(json!({"oidc": {"sub": "oidc-subject-2", "email": "second@example.com",
        "email_verified": true, "preferred_username": "oidc-person"}}))
        .await;
    let other = signed_in(&app, &server).await;
    assert_ne!(other["user"]["id"], first["user"]["id"]);
    assert_eq!(other["user"]["email"], "second@example.com");
}

async fn es256_tokens_and_rotated_keys_are_accepted(app: TestApp) {
    let Some((server, _admin)) = setup(&app).await else { return };
    let rs256 = signed_in(&app, &server).await;
    server.set_oidc_mode(Some("es256")).await;
    let es256 = signed_in(&app, &server).await;
    assert_eq!(es256["user"]["id"], rs256["user"]["id"]);
    // The issuer rotates to a key this server has not fetched yet: one refetch finds it.
    server.set_oidc_mode(Some("rotated")).await;
    let rotated = signed_in(&app, &server).await;
    assert_eq!(rotated["user"]["id"], rs256["user"]["id"]);
}

async fn a_bad_signature_or_an_unpublished_key_is_refused(app: TestApp) {
    let Some((server, _admin)) = setup(&app).await else { return };
    server.set_oidc_mode(Some("bad_signature")).await;
    assert_eq!(sign_in_flow(&app, &server).await, "/login?oauth_error=auth.oidc_signature_invalid");
    server.set_oidc_mode(Some("unknown_kid")).await;
    assert_eq!(sign_in_flow(&app, &server).await, "/login?oauth_error=auth.oidc_signature_invalid");
    // Nobody was registered by either: the first good sign-in registers.
    server.set_oidc_mode(None).await;
    let admin = app.login_admin().await;
    let users: Value = app.call(Method::GET, "/admin/user", Some(&admin.access), None).await.json().await.unwrap();
    assert!(!users.to_string().contains("oidc@example.com"), "{users}");
    assert_eq!(signed_in(&app, &server).await["user"]["email"], "oidc@example.com");
}

async fn a_wrong_audience_or_issuer_or_an_expired_token_is_refused(app: TestApp) {
    let Some((server, _admin)) = setup(&app).await else { return };
    for (mode, code) in [
        ("wrong_audience", "auth.oidc_audience_invalid"),
        ("wrong_issuer", "auth.oidc_issuer_invalid"),
        ("expired", "auth.oidc_token_expired"),
    ] {
        server.set_oidc_mode(Some(mode)).await;
        assert_eq!(sign_in_flow(&app, &server).await, format!("/login?oauth_error={code}"), "{mode}");
    }
    server.set_oidc_mode(None).await;
    signed_in(&app, &server).await;
}

async fn a_replayed_state_or_nonce_is_refused(app: TestApp) {
    let Some((server, _admin)) = setup(&app).await else { return };
    let callback = begin(&app, &server).await;
    assert!(finish(&app, &callback).await.starts_with("/login/oauth?"));
    // The state (and the nonce kept with it) served once.
    assert_eq!(finish(&app, &callback).await, "/login?oauth_error=auth.oauth_state_invalid", "replayed state");
    // A fresh flow whose token endpoint answers the previous, still valid and well signed ID
    // token: its nonce is another flow's.
    server.set_oidc_mode(Some("replay")).await;
    assert_eq!(sign_in_flow(&app, &server).await, "/login?oauth_error=auth.oidc_nonce_invalid");
    // A code the issuer never issued.
    server.set_oidc_mode(None).await;
    let callback = begin(&app, &server).await;
    let code = param(&callback, "code").unwrap();
    let forged = callback.replace(&code, "a-code-nobody-issued");
    assert_eq!(finish(&app, &forged).await, "/login?oauth_error=auth.oauth_exchange_failed");
}

async fn an_unverified_email_registers_nobody_but_a_linked_identity_signs_in(app: TestApp) {
    let Some((server, _admin)) = setup(&app).await else { return };
    server
        .set_profiles(json!({"oidc": {"sub": "unverified-1", "email": "unverified@example.com",
        "email_verified": false, "preferred_username": "unverified"}}))
        .await;
    assert_eq!(sign_in_flow(&app, &server).await, "/login?oauth_error=auth.oauth_no_email");

    // Its owner links it from Settings; then it signs in as them, verified or not.
    let person = app.register("verified-owner@example.com", "a-long-password").await;
    let start = app.call(Method::POST, "/user/settings/identities/oidc", Some(&person.access), None).await;
    assert_eq!(start.status(), 200);
    let url = start.json::<Value>().await.unwrap()["url"].as_str().unwrap().to_owned();
    assert!(param(&url, "nonce").is_some(), "a link flow checks the nonce too");
    let callback = at_issuer(&app, &url).await;
    assert_eq!(finish(&app, &callback).await, "/settings?linked=oidc");
    let user = signed_in(&app, &server).await["user"].clone();
    assert_eq!(user["id"], person.user_id.as_str());
    assert_eq!(user["email"], "verified-owner@example.com");

    // A verified address that belongs to an account is not linked automatically.
    server
        .set_profiles(json!({"oidc": {"sub": "unverified-2", "email": "verified-owner@example.com",
        "email_verified": true}}))
        .await;
    assert_eq!(sign_in_flow(&app, &server).await, "/login?oauth_error=auth.oauth_email_taken");
}

async fn create_group(app: &TestApp, admin: &Session, name: &str) -> String {
    let body = json!({"name": name, "max_storage": 1024});
    let response = app.call(Method::POST, "/admin/group", Some(&admin.access), Some(body)).await;
    assert_eq!(response.status(), 201);
    response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned()
}

async fn the_group_claim_puts_users_in_mapped_groups(app: TestApp) {
    let Some((server, admin)) = setup(&app).await else { return };
    let staff = create_group(&app, &admin, "Staff").await;
    let crew = create_group(&app, &admin, "Crew").await;
    let elsewhere = create_group(&app, &admin, "Elsewhere").await;
    // The map is checked when written.
    for bad in [json!("staff"), json!(format!("staff={staff},staff={crew}")), json!("staff=not-a-group-id")] {
        let refused = patch(&app, &admin, json!({"oidc_group_map": bad})).await;
        assert_eq!(error_body(refused, 422).await["field"], "oidc_group_map", "{bad}");
    }
    let missing = patch(&app, &admin, json!({"oidc_group_map": format!("x={}", uuid_like())})).await;
    assert_eq!(error_body(missing, 422).await["field"], "oidc_group_map");
    let map = json!({"oidc_group_claim": "groups", "oidc_group_map": format!("staff={staff}, crew={crew}")});
    assert_eq!(patch(&app, &admin, map).await.status(), 204);

    // Registration puts the newcomer in the first mapped group their claim carries.
    server
        .set_profiles(json!({"oidc": {"sub": "mapped-1", "email": "mapped@example.com", "groups": ["other", "crew"]}}))
        .await;
    let first = signed_in(&app, &server).await;
    assert_eq!(first["user"]["group"]["name"], "Crew");
    // Each sign-in follows the claim.
    server
        .set_profiles(json!({"oidc": {"sub": "mapped-1", "email": "mapped@example.com", "groups": ["crew", "staff"]}}))
        .await;
    let login = signed_in(&app, &server).await;
    assert_eq!(login["user"]["group"]["name"], "Staff", "staff is listed first in the map");
    let me: Value = app.call(Method::GET, "/user/me", Some(&session(&login).access), None).await.json().await.unwrap();
    assert_eq!(me["group"]["name"], "Staff");
    // No mapped value any more: out of the mapped group, back to the registration group.
    server.set_profiles(json!({"oidc": {"sub": "mapped-1", "email": "mapped@example.com", "groups": []}})).await;
    assert_eq!(signed_in(&app, &server).await["user"]["group"]["name"], "Users");
    // A group an administrator chose (not a mapped one) stays.
    let user_id = first["user"]["id"].as_str().unwrap();
    let moved = app
        .call(
            Method::PATCH,
            &format!("/admin/user/{user_id}"),
            Some(&admin.access),
            Some(json!({"group_id": elsewhere})),
        )
        .await;
    assert_eq!(moved.status(), 200);
    assert_eq!(signed_in(&app, &server).await["user"]["group"]["name"], "Elsewhere");
    // Without a group claim, the map is off.
    assert_eq!(patch(&app, &admin, json!({"oidc_group_claim": ""})).await.status(), 204);
    server.set_profiles(json!({"oidc": {"sub": "mapped-1", "email": "mapped@example.com", "groups": ["staff"]}})).await;
    assert_eq!(signed_in(&app, &server).await["user"]["group"]["name"], "Elsewhere");
}

fn uuid_like() -> &'static str {
    "6f1d2c4e-8a7b-4c3d-9e2f-0a1b2c3d4e5f"
}

async fn disabled_unconfigured_or_private_issuers_are_refused(app: TestApp) {
    let Some((server, admin)) = setup(&app).await else { return };
    // A flow begun while enabled finishes only while still enabled.
    let callback = begin(&app, &server).await;
    assert_eq!(patch(&app, &admin, json!({"auth_methods": ["email_password"]})).await.status(), 204);
    assert_eq!(finish(&app, &callback).await, "/login?oauth_error=auth.provider_disabled");
    let disabled = app.get("/user/oauth/oidc").await;
    assert_eq!(error_body(disabled, 403).await["code"], "auth.provider_disabled");
    assert_eq!(error_body(redeem(&app, "any-ticket").await, 403).await["code"], "auth.provider_disabled");
    let config: Value = app.get("/site/config").await.json().await.unwrap();
    assert!(!config["auth_methods"].as_array().unwrap().contains(&json!("oidc")));

    // Enabled without an issuer: not configured.
    let unconfigured = json!({"auth_methods": ["email_password", "oidc"], "oidc_issuer": ""});
    assert_eq!(patch(&app, &admin, unconfigured).await.status(), 204);
    assert_eq!(error_body(app.get("/user/oauth/oidc").await, 503).await["code"], "auth.oauth_not_configured");

    // A loopback issuer while oidc_internal is off: the SSRF guard refuses to fetch it.
    let private = json!({"oidc_issuer": server.base_url, "oidc_internal": false});
    assert_eq!(patch(&app, &admin, private).await.status(), 204);
    assert_eq!(error_body(app.get("/user/oauth/oidc").await, 502).await["code"], "auth.oidc_discovery_failed");
    // An issuer whose discovery names another issuer (the same server by another name).
    let other_name = server.base_url.replace("127.0.0.1", "localhost");
    let wrong = json!({"oidc_issuer": other_name, "oidc_internal": true});
    assert_eq!(patch(&app, &admin, wrong).await.status(), 204);
    assert_eq!(error_body(app.get("/user/oauth/oidc").await, 502).await["code"], "auth.oidc_discovery_failed");

    // The client secret is written, never read back.
    let settings: Value =
        app.call(Method::GET, "/admin/settings", Some(&admin.access), None).await.json().await.unwrap();
    assert_eq!(settings["oidc_client_secret"], "");
    assert_eq!(settings["oidc_client_id"], "nubo-oidc");
    // A wrong client secret: the token endpoint refuses the code.
    let fixed = json!({"oidc_issuer": server.base_url, "oidc_client_secret": "not-the-secret"});
    assert_eq!(patch(&app, &admin, fixed).await.status(), 204);
    assert_eq!(sign_in_flow(&app, &server).await, "/login?oauth_error=auth.oauth_exchange_failed");
}

async fn a_flow_begun_on_one_master_finishes_on_another(app: TestApp) {
    let Some((server, _admin)) = setup(&app).await else { return };
    let peer = app.spawn_peer().await;
    let callback = begin(&app, &server).await;
    let on_peer = callback.replace(&app.base_url, &format!("http://{}", peer.addr));
    assert_ne!(on_peer, callback);
    let landing = finish(&app, &on_peer).await;
    if app.backend == Backend::Postgres {
        // The state, verifier and nonce wait in the shared store: the peer finishes the flow
        // (fetching the discovery and keys itself), once.
        assert!(landing.starts_with("/login/oauth?provider=oidc&ticket="), "{landing}");
        assert_eq!(finish(&app, &callback).await, "/login?oauth_error=auth.oauth_state_invalid");
    } else {
        // On SQLite each master keeps its own store: the peer knows no such flow.
        assert_eq!(landing, "/login?oauth_error=auth.oauth_state_invalid");
        assert!(finish(&app, &callback).await.starts_with("/login/oauth?provider=oidc&ticket="));
    }
    peer.shutdown(std::time::Duration::from_secs(5)).await.unwrap();
}
