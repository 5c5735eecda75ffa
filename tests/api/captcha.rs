//! Captcha per scene: the built-in image on registration (missing, wrong, right once, case),
//! reCAPTCHA and Turnstile on sign-in against a local server answering like their siteverify,
//! a provider that is down, scenes without a captcha, share passwords (`X-Captcha`), the
//! mailed-link scenes, `/site/config`, and secrets never read back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Form, State};
use axum::{Json, Router};
use nubo_tests::{Session, TestApp, error_body, login_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    the_builtin_captcha_guards_registration_once_and_case_insensitively,
    recaptcha_and_turnstile_answers_are_checked_at_their_siteverify,
    a_provider_that_is_down_or_failing_answers_502,
    scenes_without_a_captcha_ask_for_none,
    a_share_password_needs_the_captcha_in_a_header,
    mailed_link_scenes_ask_for_the_captcha_and_token_sign_ins_do_not
);

async fn set(app: &TestApp, admin: &Session, settings: Value) {
    let response = app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(settings)).await;
    assert_eq!(response.status(), 204, "{}", response.text().await.unwrap_or_default());
}

/// A new built-in image for `scene`, and its answer as the store holds it.
async fn builtin(app: &TestApp, scene: &str) -> (String, String) {
    let response = app.get(&format!("/site/captcha?scene={scene}")).await;
    assert_eq!(response.status(), 200);
    let challenge: Value = response.json().await.unwrap();
    let id = challenge["id"].as_str().unwrap().to_owned();
    assert!(challenge["image"].as_str().unwrap().starts_with("data:image/png;base64,iVBORw0KGgo"));
    let stored = app.context().store().get(&format!("captcha:{id}")).await.unwrap().expect("answer stored");
    let (stored_scene, answer) = stored.split_once(':').unwrap();
    assert_eq!(stored_scene, scene);
    (id, answer.to_owned())
}

fn register_body(email: &str, captcha: Option<&str>) -> Value {
    let mut body = json!({"provider": "email_password", "identifier": email, "credential": "a-good-password"});
    if let Some(captcha) = captcha {
        body["captcha"] = json!(captcha);
    }
    body
}

async fn register(app: &TestApp, email: &str, captcha: Option<&str>) -> reqwest::Response {
    app.call(Method::POST, "/user", None, Some(register_body(email, captcha))).await
}

async fn the_builtin_captcha_guards_registration_once_and_case_insensitively(app: TestApp) {
    let admin = app.login_admin().await;
    // Not the built-in scene yet: no image to ask for.
    let response = app.get("/site/captcha?scene=register").await;
    assert_eq!(error_body(response, 404).await["code"], "captcha.not_builtin");
    set(&app, &admin, json!({"captcha_register": "builtin"})).await;
    let config: Value = app.get("/site/config").await.json().await.unwrap();
    assert_eq!(config["captcha"], json!({"register": {"provider": "builtin"}}));

    let missing = error_body(register(&app, "a@example.com", None).await, 422).await;
    assert_eq!((missing["code"].as_str(), missing["field"].as_str()), (Some("captcha.required"), Some("captcha")));

    // A wrong answer is refused and uses the image up: the right one fails afterwards.
    let (id, answer) = builtin(&app, "register").await;
    let wrong = register(&app, "a@example.com", Some(&format!("{id}:nope"))).await;
    assert_eq!(error_body(wrong, 403).await["code"], "captcha.invalid");
    let late = register(&app, "a@example.com", Some(&format!("{id}:{answer}"))).await;
    assert_eq!(error_body(late, 403).await["code"], "captcha.invalid");

    // The right answer, in capitals, is accepted once.
    let (id, answer) = builtin(&app, "register").await;
    let right = format!("{id}:{}", answer.to_uppercase());
    assert_eq!(register(&app, "a@example.com", Some(&right)).await.status(), 201);
    let again = register(&app, "b@example.com", Some(&right)).await;
    assert_eq!(error_body(again, 403).await["code"], "captcha.invalid");

    // An image made for another scene does not pass this one.
    set(&app, &admin, json!({"captcha_login": "builtin"})).await;
    let (id, answer) = builtin(&app, "login").await;
    let other = register(&app, "b@example.com", Some(&format!("{id}:{answer}"))).await;
    assert_eq!(error_body(other, 403).await["code"], "captcha.invalid");
    let unknown = app.get("/site/captcha?scene=telepathy").await;
    assert_eq!(error_body(unknown, 400).await["code"], "request.invalid_query");
}

/// The forms the siteverify server received, in order.
type Received = Arc<Mutex<Vec<HashMap<String, String>>>>;

/// A local server answering like reCAPTCHA's and Turnstile's siteverify: `success` for the
/// token `good-token`; it keeps every form it received.
struct Siteverify {
    url: String,
    received: Received,
}

impl Siteverify {
    async fn start() -> Siteverify {
        async fn verify(State(received): State<Received>, Form(form): Form<HashMap<String, String>>) -> Json<Value> {
            let success = form.get("response").map(String::as_str) == Some("good-token");
            received.lock().unwrap().push(form);
            Json(json!({"success": success, "error-codes": []}))
        }
        async fn failing() -> (axum::http::StatusCode, &'static str) {
            (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "down for maintenance")
        }
        let received = Arc::new(Mutex::new(Vec::new()));
        let router = Router::new()
            .route("/siteverify", axum::routing::post(verify))
            .route("/failing", axum::routing::post(failing))
            .with_state(received.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await.ok() });
        Siteverify { url, received }
    }

    fn forms(&self) -> Vec<HashMap<String, String>> {
        self.received.lock().unwrap().clone()
    }
}

fn login_with(captcha: Option<&str>) -> Value {
    let mut body = login_body("user@example.com", "user-password");
    if let Some(captcha) = captcha {
        body["captcha"] = json!(captcha);
    }
    body
}

async fn login(app: &TestApp, captcha: Option<&str>) -> reqwest::Response {
    app.call(Method::POST, "/user/session", None, Some(login_with(captcha))).await
}

async fn recaptcha_and_turnstile_answers_are_checked_at_their_siteverify(app: TestApp) {
    let admin = app.login_admin().await;
    app.register("user@example.com", "user-password").await;
    let server = Siteverify::start().await;
    for provider in ["recaptcha", "turnstile"] {
        let before = server.forms().len();
        set(
            &app,
            &admin,
            json!({
                "captcha_login": provider,
                format!("captcha_{provider}_site_key"): format!("{provider}-site-key"),
                format!("captcha_{provider}_secret"): format!("{provider}-secret"),
                format!("captcha_{provider}_verify_url"): format!("{}/siteverify", server.url),
            }),
        )
        .await;
        let config: Value = app.get("/site/config").await.json().await.unwrap();
        assert_eq!(
            config["captcha"]["login"],
            json!({"provider": provider, "site_key": format!("{provider}-site-key")})
        );

        assert_eq!(error_body(login(&app, None).await, 422).await["code"], "captcha.required", "{provider}");
        assert_eq!(
            error_body(login(&app, Some("bad-token")).await, 403).await["code"],
            "captcha.invalid",
            "{provider}"
        );
        assert_eq!(login(&app, Some("good-token")).await.status(), 200, "{provider}");

        let forms = server.forms();
        assert_eq!(forms.len(), before + 2, "{provider}: one check per answer, none without one");
        for (form, token) in forms[before..].iter().zip(["bad-token", "good-token"]) {
            assert_eq!(form["secret"], format!("{provider}-secret"));
            assert_eq!(form["response"], token);
            assert_eq!(form["remoteip"], "127.0.0.1");
        }
    }
    // The secrets are written, never read back.
    let settings: Value =
        app.call(Method::GET, "/admin/settings", Some(&admin.access), None).await.json().await.unwrap();
    assert_eq!(settings["captcha_recaptcha_secret"], "");
    assert_eq!(settings["captcha_turnstile_secret"], "");
    assert_eq!(settings["captcha_turnstile_site_key"], "turnstile-site-key");
}

async fn a_provider_that_is_down_or_failing_answers_502(app: TestApp) {
    let admin = app.login_admin().await;
    app.register("user@example.com", "user-password").await;
    let server = Siteverify::start().await;
    // A port nothing listens on any more.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    set(&app, &admin, json!({"captcha_login": "turnstile", "captcha_turnstile_secret": "s3cret"})).await;
    for url in [format!("http://{closed}/siteverify"), format!("{}/failing", server.url)] {
        set(&app, &admin, json!({"captcha_turnstile_verify_url": url})).await;
        assert_eq!(
            error_body(login(&app, Some("good-token")).await, 502).await["code"],
            "captcha.unavailable",
            "{url}"
        );
    }
    // No secret configured: the provider cannot be asked.
    set(
        &app,
        &admin,
        json!({"captcha_turnstile_secret": "", "captcha_turnstile_verify_url": format!("{}/siteverify", server.url)}),
    )
    .await;
    assert_eq!(error_body(login(&app, Some("good-token")).await, 502).await["code"], "captcha.unavailable");
    assert!(server.forms().is_empty());
}

async fn scenes_without_a_captcha_ask_for_none(app: TestApp) {
    let admin = app.login_admin().await;
    let config: Value = app.get("/site/config").await.json().await.unwrap();
    assert_eq!(config["captcha"], json!({}));
    assert_eq!(register(&app, "user@example.com", None).await.status(), 201);
    // Turned on, then off again.
    set(&app, &admin, json!({"captcha_login": "builtin"})).await;
    assert_eq!(error_body(login(&app, None).await, 422).await["code"], "captcha.required");
    set(&app, &admin, json!({"captcha_login": "none"})).await;
    let response =
        app.call(Method::POST, "/user/session", None, Some(login_body("user@example.com", "a-good-password"))).await;
    assert_eq!(response.status(), 200);
    let refused = app
        .call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(json!({"captcha_login": "hcaptcha"})))
        .await;
    assert_eq!(error_body(refused, 422).await["field"], "captcha_login");
}

async fn a_share_password_needs_the_captcha_in_a_header(app: TestApp) {
    let admin = app.login_admin().await;
    let owner = app.register("owner@example.com", "owner-password").await;
    let root = app.root_id(&owner).await;
    let file = app.upload(&owner, &root, "a.txt", b"shared").await["id"].as_str().unwrap().to_owned();
    let body = json!({"object_id": file, "password": "open sesame"});
    let created: Value = app.call(Method::POST, "/share", Some(&owner.access), Some(body)).await.json().await.unwrap();
    let path = format!("/share/{}", created["code"].as_str().unwrap());
    set(&app, &admin, json!({"captcha_share_password": "builtin"})).await;
    let visit = |headers: Vec<(&'static str, String)>| {
        let mut request = app.request(Method::GET, &path);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send()
    };

    // Without a password the locked view needs no captcha.
    let locked: Value = visit(vec![]).await.unwrap().json().await.unwrap();
    assert_eq!(locked["locked"], true);
    let missing = visit(vec![("x-share-password", "open sesame".into())]).await.unwrap();
    assert_eq!(error_body(missing, 422).await["code"], "captcha.required");
    let by_query = app.get(&format!("{path}?password=open%20sesame")).await;
    assert_eq!(error_body(by_query, 422).await["code"], "captcha.required");
    let (id, answer) = builtin(&app, "share_password").await;
    let headers = vec![("x-share-password", "open sesame".to_owned()), ("x-captcha", format!("{id}:{answer}"))];
    let opened: Value = visit(headers.clone()).await.unwrap().json().await.unwrap();
    assert_eq!(opened["locked"], false);
    assert!(opened["grant"].is_string());
    assert_eq!(error_body(visit(headers).await.unwrap(), 403).await["code"], "captcha.invalid");
}

async fn mailed_link_scenes_ask_for_the_captcha_and_token_sign_ins_do_not(app: TestApp) {
    let admin = app.login_admin().await;
    set(&app, &admin, json!({"captcha_magic_link": "builtin", "captcha_password_reset": "builtin"})).await;
    for (path, scene) in [("/user/magic_link", "magic_link"), ("/user/password_reset", "password_reset")] {
        let missing = app.call(Method::POST, path, None, Some(json!({"email": "a@example.com"}))).await;
        assert_eq!(error_body(missing, 422).await["code"], "captcha.required", "{path}");
        let (id, answer) = builtin(&app, scene).await;
        let body = json!({"email": "a@example.com", "captcha": format!("{id}:{answer}x")});
        let wrong = app.call(Method::POST, path, None, Some(body)).await;
        assert_eq!(error_body(wrong, 403).await["code"], "captcha.invalid", "{path}");
    }
    // Sign-ins with a token the server issued (here a magic link's) ask for no captcha.
    set(&app, &admin, json!({"captcha_login": "builtin", "auth_methods": ["email_password", "magic_link"]})).await;
    let token = json!({"provider": "magic_link", "identifier": "not-a-token"});
    let response = app.call(Method::POST, "/user/session", None, Some(token)).await;
    assert_eq!(error_body(response, 401).await["code"], "auth.magic_link_invalid");
}

/// Images are drawn and kept for minutes: an address's budget of them is the sign-in one.
async fn images_are_rate_limited_per_address(backend: nubo_tests::Backend) {
    let adjust = |config: &mut nubo_model::config::Config| config.login_attempts_per_address = 3;
    let Some(app) = TestApp::spawn_configured(backend, adjust).await else { return };
    let admin = app.login_admin().await;
    set(&app, &admin, json!({"captcha_register": "builtin"})).await;
    for _ in 0..3 {
        builtin(&app, "register").await;
    }
    let refused = app.get("/site/captcha?scene=register").await;
    assert_eq!(error_body(refused, 429).await["code"], "auth.rate_limited");
}

mod images_are_rate_limited_per_address {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        super::images_are_rate_limited_per_address(nubo_tests::Backend::Sqlite).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        super::images_are_rate_limited_per_address(nubo_tests::Backend::Postgres).await
    }
}
