//! The uniform error body on failures the framework would otherwise answer in its own words.

use nubo_tests::{TestApp, error_body, on_every_backend};
use reqwest::Method;

on_every_backend!(
    unknown_route_answers_404_in_the_uniform_body,
    wrong_method_answers_405_with_allow_header,
    request_id_from_a_proxy_is_kept
);

async fn unknown_route_answers_404_in_the_uniform_body(app: TestApp) {
    let body = error_body(app.get("/no/such/route").await, 404).await;
    assert_eq!(body["code"], "route.not_found");
    assert!(body["message"].as_str().unwrap().contains("/api/v1/no/such/route"));
    // Outside the API prefix, paths are the web app's (`tests/api/web.rs`), but not other methods.
    let response = app.client.post(format!("{}/nowhere", app.base_url)).send().await.unwrap();
    assert_eq!(error_body(response, 404).await["code"], "route.not_found");
}

async fn wrong_method_answers_405_with_allow_header(app: TestApp) {
    let response = app.request(Method::DELETE, "/site/ping").send().await.unwrap();
    let allow = response.headers().get("allow").unwrap().to_str().unwrap().to_owned();
    assert!(allow.contains("GET"), "allow: {allow}");
    let body = error_body(response, 405).await;
    assert_eq!(body["code"], "route.method_not_allowed");
}

async fn request_id_from_a_proxy_is_kept(app: TestApp) {
    let response =
        app.request(Method::GET, "/missing").header("x-request-id", "proxy-chosen-id-42").send().await.unwrap();
    assert_eq!(response.headers()["x-request-id"], "proxy-chosen-id-42");
    assert_eq!(error_body(response, 404).await["request_id"], "proxy-chosen-id-42");
}

on_every_backend!(
    malformed_json_answers_400,
    wrong_content_type_answers_415,
    oversized_body_answers_413,
    wrong_field_types_answer_422_naming_the_problem,
    malformed_path_id_answers_400
);

async fn malformed_json_answers_400(app: TestApp) {
    let response = app
        .request(Method::POST, "/user/session")
        .header("content-type", "application/json")
        .body("{\"provider\": \"email_password\", ")
        .send()
        .await
        .unwrap();
    assert_eq!(error_body(response, 400).await["code"], "request.malformed_json");
}

async fn wrong_content_type_answers_415(app: TestApp) {
    let response = app.request(Method::POST, "/user/session").body("provider=email_password").send().await.unwrap();
    assert_eq!(error_body(response, 415).await["code"], "request.unsupported_media_type");
}

async fn oversized_body_answers_413(app: TestApp) {
    let limit = app.context().config().max_json_body;
    let body = format!("{{\"provider\":\"email_password\",\"identifier\":\"{}\"}}", "a".repeat(limit + 1));
    let response = app
        .request(Method::POST, "/user/session")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(error_body(response, 413).await["code"], "request.too_large");
}

async fn wrong_field_types_answer_422_naming_the_problem(app: TestApp) {
    let response = app
        .call(
            Method::POST,
            "/user/session",
            None,
            Some(serde_json::json!({"provider": "telepathy", "identifier": "a"})),
        )
        .await;
    let body = error_body(response, 422).await;
    assert_eq!(body["code"], "request.invalid_body");
    assert!(body["message"].as_str().unwrap().contains("provider"), "{body}");
}

async fn malformed_path_id_answers_400(app: TestApp) {
    let admin = app.login_admin().await;
    let response = app.call(Method::GET, "/admin/user/not-a-uuid", Some(&admin.access), None).await;
    assert_eq!(error_body(response, 400).await["code"], "request.invalid_path");
}
