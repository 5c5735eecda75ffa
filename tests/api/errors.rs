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
    // Outside the API prefix too.
    let response = app.client.get(format!("{}/nowhere", app.base_url)).send().await.unwrap();
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
