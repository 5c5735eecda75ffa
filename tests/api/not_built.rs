//! Operations the interface names but Nubo does not build yet would answer 501
//! `route.not_implemented` under the tag `not-built`. None is left: the document lists no such
//! operation, and every operation that once stood in for one answers as the feature it names.

use nubo_tests::{TestApp, error_body, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(every_operation_the_conventions_name_is_built);

async fn every_operation_the_conventions_name_is_built(app: TestApp) {
    let admin = app.login_admin().await;
    let doc: Value = app.get("/openapi.json").await.json().await.unwrap();
    let mut not_built = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            if operation["tags"].as_array().is_some_and(|tags| tags.iter().any(|t| t == "not-built")) {
                not_built.push(format!("{method} {path}"));
            }
        }
    }
    assert!(not_built.is_empty(), "still not built: {not_built:?}");

    // The operations the table held answer as their features do, never 501.
    for (method, path, body, expected) in [
        (Method::GET, "/file/viewers?ext=png", None, 200),
        (Method::GET, "/user/storage_packs", None, 200),
        (Method::POST, "/user/redeem", Some(json!({"code": "NOT-A-REAL-CODE-1234"})), 404),
        (Method::GET, "/admin/summary", None, 200),
        (Method::GET, "/admin/storage_pack", None, 200),
        (Method::GET, "/admin/redeem", None, 200),
        (Method::GET, "/admin/report", None, 200),
        (Method::POST, "/share/no-such-code/report", Some(json!({"reason": "spam"})), 404),
    ] {
        let response = app.call(method.clone(), path, Some(&admin.access), body).await;
        assert_eq!(response.status(), expected, "{method} {path}");
    }
    let wopi = app.client.get(format!("{}/wopi/files/abc?access_token=x", app.base_url)).send().await.unwrap();
    assert_ne!(wopi.status(), 501, "the WOPI host is built");
    // Unknown routes and methods keep their own answers.
    let missing = app.call(Method::GET, "/no/such/route", Some(&admin.access), None).await;
    assert_eq!(error_body(missing, 404).await["code"], "route.not_found");
    let response = app.call(Method::PATCH, "/user/settings/avatar", Some(&admin.access), None).await;
    assert_eq!(error_body(response, 405).await["code"], "route.method_not_allowed");
}
