//! Theme presets, the default preset, and each user's colour snapshot.

use nubo_tests::{TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

const CHROMATIC: [&str; 17] = [
    "red", "orange", "amber", "yellow", "lime", "green", "emerald", "teal", "cyan", "sky", "blue", "indigo", "violet",
    "purple", "fuchsia", "pink", "rose",
];
const NEUTRAL: [&str; 5] = ["slate", "gray", "zinc", "neutral", "stone"];

on_every_backend!(
    all_17_chromatic_and_5_neutral_colours_are_accepted,
    colours_outside_the_sets_are_refused,
    preset_names_are_unique,
    exactly_one_preset_is_default,
    effective_theme_falls_back_from_snapshot_to_default_to_built_in
);

fn colors(chromatic: &str, neutral: &str) -> Value {
    json!({"primary": chromatic, "secondary": chromatic, "success": chromatic, "info": chromatic,
           "warning": chromatic, "error": chromatic, "neutral": neutral})
}

async fn create(app: &TestApp, token: &str, name: &str, colors: Value) -> reqwest::Response {
    app.call(Method::POST, "/admin/theme", Some(token), Some(json!({"name": name, "colors": colors}))).await
}

async fn all_17_chromatic_and_5_neutral_colours_are_accepted(app: TestApp) {
    let admin = app.login_admin().await;
    for (i, chromatic) in CHROMATIC.iter().enumerate() {
        let neutral = NEUTRAL[i % NEUTRAL.len()];
        let response = create(&app, &admin.access, &format!("theme {chromatic}"), colors(chromatic, neutral)).await;
        assert_eq!(response.status(), 201, "{chromatic}/{neutral}");
        let preset: Value = response.json().await.unwrap();
        assert_eq!(preset["colors"]["primary"], *chromatic);
        assert_eq!(preset["colors"]["neutral"], neutral);
    }
    let public: Value = app.get("/site/themes").await.json().await.unwrap();
    assert_eq!(public.as_array().unwrap().len(), 17);
}

async fn colours_outside_the_sets_are_refused(app: TestApp) {
    let admin = app.login_admin().await;
    for (chromatic, neutral) in
        [("magenta", "slate"), ("slate", "slate"), ("red", "red"), ("Red", "slate"), ("red", "black")]
    {
        let response = create(&app, &admin.access, "bad", colors(chromatic, neutral)).await;
        assert_eq!(error_body(response, 422).await["code"], "request.invalid_body", "{chromatic}/{neutral}");
    }
    let user = app.register("pia@example.com", "pia-password").await;
    let response =
        app.call(Method::PATCH, "/theme", Some(&user.access), Some(json!({"colors": colors("beige", "slate")}))).await;
    assert_eq!(response.status(), 422);
    let public: Value = app.get("/site/themes").await.json().await.unwrap();
    assert!(public.as_array().unwrap().is_empty());
}

async fn preset_names_are_unique(app: TestApp) {
    let admin = app.login_admin().await;
    assert_eq!(create(&app, &admin.access, "Ocean", colors("blue", "slate")).await.status(), 201);
    let body = error_body(create(&app, &admin.access, "Ocean", colors("teal", "zinc")).await, 409).await;
    assert_eq!(body["code"], "theme.name_taken");
    let other: Value = create(&app, &admin.access, "Forest", colors("green", "stone")).await.json().await.unwrap();
    let rename = json!({"name": "Ocean", "colors": colors("green", "stone")});
    let response = app
        .call(
            Method::PUT,
            &format!("/admin/theme/{}", other["id"].as_str().unwrap()),
            Some(&admin.access),
            Some(rename),
        )
        .await;
    assert_eq!(error_body(response, 409).await["code"], "theme.name_taken");
}

async fn set_default(app: &TestApp, token: &str, id: &str) {
    let response = app.call(Method::PATCH, &format!("/admin/theme/{id}/default"), Some(token), None).await;
    assert_eq!(response.status(), 200);
}

async fn exactly_one_preset_is_default(app: TestApp) {
    let admin = app.login_admin().await;
    let a: Value = create(&app, &admin.access, "A", colors("red", "gray")).await.json().await.unwrap();
    let b: Value = create(&app, &admin.access, "B", colors("lime", "zinc")).await.json().await.unwrap();
    let (a, b) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap());
    set_default(&app, &admin.access, a).await;
    set_default(&app, &admin.access, b).await;
    let public: Value = app.get("/site/themes").await.json().await.unwrap();
    let defaults: Vec<&str> = public
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["is_default"] == true)
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(defaults, vec![b]);
    let missing = app
        .call(Method::PATCH, &format!("/admin/theme/{}/default", uuid::Uuid::new_v4()), Some(&admin.access), None)
        .await;
    assert_eq!(error_body(missing, 404).await["code"], "theme.not_found");
    let public: Value = app.get("/site/themes").await.json().await.unwrap();
    assert_eq!(
        public.as_array().unwrap().iter().filter(|t| t["is_default"] == true).count(),
        1,
        "a failed switch keeps the old default"
    );
}

async fn theme_of(app: &TestApp, token: &str) -> Value {
    let settings: Value = app.call(Method::GET, "/user/settings", Some(token), None).await.json().await.unwrap();
    settings["theme"].clone()
}

async fn effective_theme_falls_back_from_snapshot_to_default_to_built_in(app: TestApp) {
    let admin = app.login_admin().await;
    let user = app.register("quinn@example.com", "quinn-password").await;
    let theme = theme_of(&app, &user.access).await;
    assert_eq!(theme["source"], "built_in");
    assert_eq!(theme["colors"]["primary"], "blue");

    let preset: Value = create(&app, &admin.access, "Sunset", colors("orange", "stone")).await.json().await.unwrap();
    let preset_id = preset["id"].as_str().unwrap().to_owned();
    set_default(&app, &admin.access, &preset_id).await;
    let theme = theme_of(&app, &user.access).await;
    assert_eq!(
        (theme["source"].as_str(), theme["colors"]["primary"].as_str()),
        (Some("default_preset"), Some("orange"))
    );

    // Choosing a preset copies its colours: later edits of the preset do not reach the user.
    let other: Value = create(&app, &admin.access, "Rose", colors("rose", "neutral")).await.json().await.unwrap();
    let chosen = app
        .call(Method::PATCH, "/user/settings/theme", Some(&user.access), Some(json!({"preset_id": other["id"]})))
        .await;
    assert_eq!(chosen.status(), 200);
    let edit = json!({"name": "Rose", "colors": colors("pink", "neutral")});
    app.call(Method::PUT, &format!("/admin/theme/{}", other["id"].as_str().unwrap()), Some(&admin.access), Some(edit))
        .await;
    let theme = theme_of(&app, &user.access).await;
    assert_eq!((theme["source"].as_str(), theme["colors"]["primary"].as_str()), (Some("user"), Some("rose")));

    // Explicit colours through the spec's `PATCH /theme`.
    let response =
        app.call(Method::PATCH, "/theme", Some(&user.access), Some(json!({"colors": colors("cyan", "gray")}))).await;
    let theme: Value = response.json().await.unwrap();
    assert_eq!(theme["colors"]["primary"], "cyan");

    // Reset: back to the default preset, then to the built-in theme once no default exists.
    app.call(Method::PATCH, "/theme", Some(&user.access), Some(json!({}))).await;
    assert_eq!(theme_of(&app, &user.access).await["source"], "default_preset");
    app.call(Method::DELETE, &format!("/admin/theme/{preset_id}"), Some(&admin.access), None).await;
    assert_eq!(theme_of(&app, &user.access).await["source"], "built_in");
}
