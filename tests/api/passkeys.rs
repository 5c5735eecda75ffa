//! Passkeys through a software authenticator (webauthn-authenticator-rs): registration,
//! discoverable sign-in, and the refusals (replay, wrong origin, deleted or foreign
//! credential, disabled provider, no usable site URL).

use nubo_tests::{Session, TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};
use uuid::Uuid;
use webauthn_authenticator_rs::WebauthnAuthenticator;
use webauthn_authenticator_rs::softpasskey::SoftPasskey;
use webauthn_rs::prelude::{CreationChallengeResponse, RequestChallengeResponse, Url};

on_every_backend!(
    a_registered_passkey_signs_in_without_an_email_address,
    a_replayed_assertion_is_refused,
    an_assertion_from_another_origin_is_refused,
    a_deleted_passkey_no_longer_signs_in,
    a_credential_cannot_sign_in_as_another_user,
    passkeys_are_listed_renamed_and_kept_apart_per_user,
    the_last_way_to_sign_in_cannot_be_removed,
    a_disabled_provider_and_an_unusable_site_url_are_refused,
    a_sign_in_begun_on_one_master_finishes_on_another
);

/// The site's origin: passkeys need a domain, so the master is addressed as `localhost`.
fn origin(app: &TestApp) -> Url {
    Url::parse(&format!("http://localhost:{}", app.config.listen.port())).unwrap()
}

async fn enable_passkeys(app: &TestApp) -> Session {
    let admin = app.login_admin().await;
    let settings =
        json!({"site_url": origin(app).as_str().trim_end_matches('/'), "auth_methods": ["email_password", "passkey"]});
    let response = app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(settings)).await;
    assert_eq!(response.status(), 204, "{}", response.text().await.unwrap());
    admin
}

/// A person with a software passkey.
struct Holder {
    session: Session,
    authenticator: SoftPasskey,
    /// The registered credential's id, base64url.
    credential_id: Option<String>,
}

impl Holder {
    async fn new(app: &TestApp, email: &str) -> Self {
        let session = app.register(email, "a-long-password").await;
        // `true`: the software key claims user verification, as a platform authenticator would.
        Self { session, authenticator: SoftPasskey::new(true), credential_id: None }
    }

    fn user_uuid(&self) -> Uuid {
        self.session.user_id.parse().unwrap()
    }

    /// Runs both registration steps from `client_origin`; answers the finishing response.
    async fn register_from(&mut self, app: &TestApp, client_origin: Url, name: &str) -> reqwest::Response {
        let start = app.call(Method::POST, "/user/authn/registration", Some(&self.session.access), None).await;
        assert_eq!(start.status(), 200);
        let start: Value = start.json().await.unwrap();
        let mut options = start["options"].clone();
        let selection = &mut options["publicKey"]["authenticatorSelection"];
        assert_eq!(selection["residentKey"], "required", "the site asks for a discoverable credential");
        // The software key keeps no credentials itself; the test remembers its id instead.
        selection["requireResidentKey"] = false.into();
        selection["residentKey"] = "discouraged".into();
        let options: CreationChallengeResponse = serde_json::from_value(options).unwrap();
        let credential = self.authenticator.do_registration(client_origin, options).unwrap();
        let credential = serde_json::to_value(credential).unwrap();
        let body = json!({"challenge_token": start["challenge_token"], "name": name, "credential": credential});
        let response = app.call(Method::PUT, "/user/authn/registration", Some(&self.session.access), Some(body)).await;
        if response.status() == 201 {
            self.credential_id = Some(credential["rawId"].as_str().unwrap().to_owned());
        }
        response
    }

    async fn register(&mut self, app: &TestApp, name: &str) -> Value {
        let response = self.register_from(app, origin(app), name).await;
        assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
        response.json().await.unwrap()
    }

    /// Begins a sign-in and answers its challenge token and this holder's assertion for it,
    /// as a discoverable authenticator would: naming its user through the user handle.
    async fn assert_from(&mut self, app: &TestApp, client_origin: Url, user_handle: Uuid) -> (String, String) {
        let start = app.call(Method::POST, "/user/authn/options", None, None).await;
        assert_eq!(start.status(), 200);
        let start: Value = start.json().await.unwrap();
        let mut options = start["options"].clone();
        let named = options["publicKey"]["allowCredentials"].as_array().map_or(0, Vec::len);
        assert_eq!(named, 0, "discoverable: no credentials named");
        options["publicKey"]["allowCredentials"] =
            json!([{"type": "public-key", "id": self.credential_id.clone().expect("registered")}]);
        let options: RequestChallengeResponse = serde_json::from_value(options).unwrap();
        let assertion = self.authenticator.do_authentication(client_origin, options).unwrap();
        let mut assertion = serde_json::to_value(assertion).unwrap();
        assertion["response"]["userHandle"] = base64url(user_handle.as_bytes()).into();
        (start["challenge_token"].as_str().unwrap().to_owned(), assertion.to_string())
    }

    async fn assertion(&mut self, app: &TestApp) -> (String, String) {
        let user = self.user_uuid();
        self.assert_from(app, origin(app), user).await
    }
}

fn base64url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

async fn sign_in(app: &TestApp, challenge_token: &str, assertion: &str) -> reqwest::Response {
    let body = json!({"provider": "passkey", "identifier": challenge_token, "credential": assertion});
    app.call(Method::POST, "/user/session", None, Some(body)).await
}

async fn a_registered_passkey_signs_in_without_an_email_address(app: TestApp) {
    enable_passkeys(&app).await;
    let mut alice = Holder::new(&app, "alice@example.com").await;
    let registered = alice.register(&app, "Laptop").await;
    assert_eq!(registered["name"], "Laptop");
    assert!(registered["last_used_at"].is_null());

    let (token, assertion) = alice.assertion(&app).await;
    let response = sign_in(&app, &token, &assertion).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["user"]["id"], alice.session.user_id.as_str());
    let access = body["access_token"].as_str().unwrap();
    let me = app.call(Method::GET, "/user/me", Some(access), None).await;
    assert_eq!(me.status(), 200, "the issued token works");

    let listed: Value = app.call(Method::GET, "/user/settings/authns", Some(access), None).await.json().await.unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert!(listed[0]["last_used_at"].is_string(), "the sign-in is recorded");

    // A second registration excludes the passkey already registered.
    let start: Value =
        app.call(Method::POST, "/user/authn/registration", Some(access), None).await.json().await.unwrap();
    let excluded = start["options"]["publicKey"]["excludeCredentials"].as_array().unwrap();
    assert_eq!(excluded.len(), 1);
    assert_eq!(excluded[0]["id"], registered["credential_id"]);
}

async fn a_replayed_assertion_is_refused(app: TestApp) {
    enable_passkeys(&app).await;
    let mut alice = Holder::new(&app, "alice@example.com").await;
    alice.register(&app, "Laptop").await;
    let (token, assertion) = alice.assertion(&app).await;
    assert_eq!(sign_in(&app, &token, &assertion).await.status(), 200);

    let again = sign_in(&app, &token, &assertion).await;
    assert_eq!(error_body(again, 401).await["code"], "auth.passkey_challenge_invalid");
    // Presented against a fresh challenge, the old assertion signs the wrong one.
    let (fresh, _) = alice.assertion(&app).await;
    let replayed = sign_in(&app, &fresh, &assertion).await;
    assert_eq!(error_body(replayed, 401).await["code"], "auth.passkey_rejected");
    let unknown = sign_in(&app, "no-such-challenge", &assertion).await;
    assert_eq!(error_body(unknown, 401).await["code"], "auth.passkey_challenge_invalid");
}

async fn an_assertion_from_another_origin_is_refused(app: TestApp) {
    enable_passkeys(&app).await;
    let mut alice = Holder::new(&app, "alice@example.com").await;
    // Same host, another port: the browser's origin is not the site's.
    let elsewhere = Url::parse("http://localhost:1").unwrap();
    let response = alice.register_from(&app, elsewhere.clone(), "Phished").await;
    assert_eq!(error_body(response, 401).await["code"], "auth.passkey_rejected");

    alice.register(&app, "Laptop").await;
    let user = alice.user_uuid();
    let (token, assertion) = alice.assert_from(&app, elsewhere, user).await;
    let response = sign_in(&app, &token, &assertion).await;
    assert_eq!(error_body(response, 401).await["code"], "auth.passkey_rejected");
}

async fn a_deleted_passkey_no_longer_signs_in(app: TestApp) {
    enable_passkeys(&app).await;
    let mut alice = Holder::new(&app, "alice@example.com").await;
    let registered = alice.register(&app, "Laptop").await;
    let path = format!("/user/settings/authn/{}", registered["id"].as_str().unwrap());
    let response = app.call(Method::DELETE, &path, Some(&alice.session.access), None).await;
    assert_eq!(response.status(), 204);

    let (token, assertion) = alice.assertion(&app).await;
    let response = sign_in(&app, &token, &assertion).await;
    assert_eq!(error_body(response, 401).await["code"], "auth.passkey_rejected");
    let response = app.call(Method::DELETE, &path, Some(&alice.session.access), None).await;
    assert_eq!(error_body(response, 404).await["code"], "auth.passkey_not_found");
}

async fn a_credential_cannot_sign_in_as_another_user(app: TestApp) {
    enable_passkeys(&app).await;
    let mut alice = Holder::new(&app, "alice@example.com").await;
    alice.register(&app, "Laptop").await;
    let mut mallory = Holder::new(&app, "mallory@example.com").await;
    mallory.register(&app, "Mine").await;

    // Mallory's own, valid credential, presented as belonging to Alice.
    let (token, assertion) = mallory.assert_from(&app, origin(&app), alice.user_uuid()).await;
    let response = sign_in(&app, &token, &assertion).await;
    assert_eq!(error_body(response, 401).await["code"], "auth.passkey_rejected");
    // The same credential under its own user signs in as Mallory, and only as her.
    let (token, assertion) = mallory.assertion(&app).await;
    let body: Value = sign_in(&app, &token, &assertion).await.json().await.unwrap();
    assert_eq!(body["user"]["id"], mallory.session.user_id.as_str());
}

async fn passkeys_are_listed_renamed_and_kept_apart_per_user(app: TestApp) {
    enable_passkeys(&app).await;
    let mut alice = Holder::new(&app, "alice@example.com").await;
    let registered = alice.register(&app, "Laptop").await;
    let bob = app.register("bob@example.com", "a-long-password").await;
    let path = format!("/user/settings/authn/{}", registered["id"].as_str().unwrap());

    let renamed = app.call(Method::PATCH, &path, Some(&alice.session.access), Some(json!({"name": " Phone "}))).await;
    assert_eq!(renamed.status(), 200);
    assert_eq!(renamed.json::<Value>().await.unwrap()["name"], "Phone");
    let blank = app.call(Method::PATCH, &path, Some(&alice.session.access), Some(json!({"name": "  "}))).await;
    assert_eq!(error_body(blank, 422).await["field"], "name");

    let theirs: Value =
        app.call(Method::GET, "/user/settings/authns", Some(&bob.access), None).await.json().await.unwrap();
    assert_eq!(theirs, json!([]), "Bob sees none of Alice's passkeys");
    let response = app.call(Method::PATCH, &path, Some(&bob.access), Some(json!({"name": "Stolen"}))).await;
    assert_eq!(error_body(response, 404).await["code"], "auth.passkey_not_found");
    let response = app.call(Method::DELETE, &path, Some(&bob.access), None).await;
    assert_eq!(error_body(response, 404).await["code"], "auth.passkey_not_found");
    let mine: Value =
        app.call(Method::GET, "/user/settings/authns", Some(&alice.session.access), None).await.json().await.unwrap();
    assert_eq!(mine[0]["name"], "Phone");
}

async fn the_last_way_to_sign_in_cannot_be_removed(app: TestApp) {
    enable_passkeys(&app).await;
    let mut alice = Holder::new(&app, "alice@example.com").await;
    let registered = alice.register(&app, "Laptop").await;
    // An account that signs in with its passkey alone (as one made through a provider would).
    sqlx::query("DELETE FROM auth_identities WHERE user_id = $1 AND provider = 'email_password'")
        .bind(&alice.session.user_id)
        .execute(app.context().db().writer())
        .await
        .unwrap();
    let path = format!("/user/settings/authn/{}", registered["id"].as_str().unwrap());
    let response = app.call(Method::DELETE, &path, Some(&alice.session.access), None).await;
    assert_eq!(error_body(response, 409).await["code"], "auth.last_sign_in_method");
    let (token, assertion) = alice.assertion(&app).await;
    assert_eq!(sign_in(&app, &token, &assertion).await.status(), 200, "the passkey still works");
}

async fn a_disabled_provider_and_an_unusable_site_url_are_refused(app: TestApp) {
    let admin = enable_passkeys(&app).await;
    let mut alice = Holder::new(&app, "alice@example.com").await;
    alice.register(&app, "Laptop").await;
    let (token, assertion) = alice.assertion(&app).await;

    let off = json!({"auth_methods": ["email_password"]});
    assert_eq!(app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(off)).await.status(), 204);
    let response = sign_in(&app, &token, &assertion).await;
    assert_eq!(error_body(response, 403).await["code"], "auth.provider_disabled");
    let response = app.call(Method::POST, "/user/authn/options", None, None).await;
    assert_eq!(error_body(response, 403).await["code"], "auth.provider_disabled");
    let response = app.call(Method::POST, "/user/authn/registration", Some(&alice.session.access), None).await;
    assert_eq!(error_body(response, 403).await["code"], "auth.provider_disabled");
    let listed = app.call(Method::GET, "/user/settings/authns", Some(&alice.session.access), None).await;
    assert_eq!(listed.status(), 200, "existing passkeys can still be managed");

    for site_url in ["", "http://127.0.0.1:5212"] {
        let settings = json!({"auth_methods": ["email_password", "passkey"], "site_url": site_url});
        let response = app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(settings)).await;
        assert_eq!(response.status(), 204);
        let response = app.call(Method::POST, "/user/authn/options", None, None).await;
        assert_eq!(error_body(response, 503).await["code"], "auth.passkey_site_url", "site_url {site_url:?}");
    }
}

async fn a_sign_in_begun_on_one_master_finishes_on_another(app: TestApp) {
    if app.backend != nubo_tests::Backend::Postgres {
        // Only the shared store (Redis, with PostgreSQL here) spans masters.
        return;
    }
    enable_passkeys(&app).await;
    let mut alice = Holder::new(&app, "alice@example.com").await;
    alice.register(&app, "Laptop").await;
    let (token, assertion) = alice.assertion(&app).await;
    let peer = app.spawn_peer().await;
    let body = json!({"provider": "passkey", "identifier": token, "credential": assertion});
    let response =
        app.client.post(format!("http://{}/api/v1/user/session", peer.addr)).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200, "the peer finds the ceremony in the shared store");
    let again = app.call(Method::POST, "/user/session", None, Some(body)).await;
    assert_eq!(error_body(again, 401).await["code"], "auth.passkey_challenge_invalid", "and it was used up there");
}
