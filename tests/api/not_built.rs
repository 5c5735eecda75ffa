//! Operations the interface names but Nubo does not build yet: the document lists each (tag
//! `not-built`), and each answers 501 `route.not_implemented` with the uniform body after the
//! access check its feature will have, never 404 `route.not_found`.

use nubo_tests::{TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::Value;

on_every_backend!(
    every_not_built_operation_in_the_document_answers_501_with_the_uniform_body,
    not_built_operations_check_access_before_answering_501
);

/// `path` of the document (`/api/v1/...` or absolute) as a URL with a value in each parameter.
fn url(app: &TestApp, path: &str) -> String {
    let concrete: Vec<&str> = path
        .split('/')
        .map(|segment| if segment.starts_with('{') { "00000000-0000-4000-8000-000000000001" } else { segment })
        .collect();
    format!("{}{}", app.base_url, concrete.join("/"))
}

async fn every_not_built_operation_in_the_document_answers_501_with_the_uniform_body(app: TestApp) {
    let admin = app.login_admin().await;
    let doc: Value = app.get("/openapi.json").await.json().await.unwrap();
    let mut listed = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            if !operation["tags"].as_array().is_some_and(|tags| tags.iter().any(|t| t == "not-built")) {
                continue;
            }
            let responses = operation["responses"].as_object().unwrap();
            let successes: Vec<&String> = responses.keys().filter(|s| !s.starts_with(['4', '5'])).collect();
            assert!(successes.is_empty(), "{method} {path} documents {successes:?}");
            assert_eq!(
                responses["501"]["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/ErrorBody",
                "{method} {path}"
            );
            let verb: Method = method.to_uppercase().parse().unwrap();
            let response =
                app.client.request(verb.clone(), url(&app, path)).bearer_auth(&admin.access).send().await.unwrap();
            let body = error_body(response, 501).await;
            assert_eq!(body["code"], "route.not_implemented", "{verb} {path}");
            assert!(body["message"].as_str().unwrap().starts_with("not built yet: "), "{verb} {path}: {body}");
            listed.push(format!("{verb} {path}"));
        }
    }
    for expected in [
        "GET /api/v1/user/storage_packs",
        "POST /api/v1/user/redeem",
        "GET /api/v1/admin/summary",
        "GET /api/v1/admin/storage_pack",
    ] {
        assert!(listed.iter().any(|op| op == expected), "{expected} is not listed as not built: {listed:?}");
    }
}

async fn not_built_operations_check_access_before_answering_501(app: TestApp) {
    let user = app.register("nina@example.com", "nina-password").await;
    let anonymous = app.call(Method::GET, "/user/storage_packs", None, None).await;
    assert_eq!(error_body(anonymous, 401).await["code"], "auth.missing_token");
    let not_admin = app.call(Method::GET, "/admin/summary", Some(&user.access), None).await;
    assert_eq!(error_body(not_admin, 403).await["code"], "auth.admin_required");
    let allowed = app.call(Method::GET, "/user/storage_packs", Some(&user.access), None).await;
    assert_eq!(error_body(allowed, 501).await["message"], "not built yet: storage packs");
    // Methods a path does not take stay 405.
    let response = app.call(Method::PATCH, "/user/settings/avatar", Some(&user.access), None).await;
    assert_eq!(error_body(response, 405).await["code"], "route.method_not_allowed");
}
