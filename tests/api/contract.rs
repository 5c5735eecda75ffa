//! The OpenAPI document as a contract: every reference resolves to one schema of its own, every
//! JSON request body refuses unknown fields (in the schema and on the wire), and every operation
//! documents the rejections its shape allows.

use nubo_tests::{TestApp, on_every_backend};
use reqwest::Method;
use serde_json::{Value, json};

on_every_backend!(
    every_schema_reference_resolves_and_names_one_shape,
    every_json_request_schema_forbids_additional_properties,
    an_unknown_field_is_refused_with_422_on_every_json_route,
    every_operation_documents_the_rejections_of_its_shape,
    a_json_body_that_is_not_an_object_is_refused_with_422
);

async fn document(app: &TestApp) -> Value {
    let response = app.get("/openapi.json").await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// Every `$ref` anywhere in `value`, as `(where, target)`.
fn references(value: &Value, at: &str, found: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                if key == "$ref" {
                    found.push((at.to_owned(), inner.as_str().unwrap_or_default().to_owned()));
                } else {
                    references(inner, &format!("{at}/{key}"), found);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|inner| references(inner, at, found)),
        _ => {}
    }
}

/// The operations of the document as `(method, path, operation)`.
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut all = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            all.push((method.clone(), path.clone(), operation.clone()));
        }
    }
    all
}

async fn every_schema_reference_resolves_and_names_one_shape(app: TestApp) {
    let doc = document(&app).await;
    let mut found = Vec::new();
    references(&doc, "", &mut found);
    assert!(!found.is_empty());
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for (at, target) in &found {
        let name = target.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("{at}: {target}"));
        assert!(schemas.contains_key(name), "{at} refers to the missing schema {name}");
    }
    // The token facts and the upload session were once one schema name, so one of them
    // documented the other's shape.
    let token = &doc["paths"]["/api/v1/user/session"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        ["$ref"];
    let upload = &doc["paths"]["/api/v1/file/upload"]["post"]["responses"]["201"]["content"]["application/json"]["schema"]
        ["$ref"];
    assert_ne!(token, upload);
    let token_schema = &schemas[token.as_str().unwrap().trim_start_matches("#/components/schemas/")];
    assert!(token_schema["properties"]["user_id"].is_object(), "{token_schema}");
    let upload_schema = &schemas[upload.as_str().unwrap().trim_start_matches("#/components/schemas/")];
    assert!(upload_schema["properties"]["chunk_size"].is_object(), "{upload_schema}");
}

/// The JSON request body schema of `operation`, resolved, if it has one.
fn json_body_schema<'a>(doc: &'a Value, operation: &'a Value) -> Option<&'a Value> {
    let schema = operation["requestBody"]["content"]["application/json"].get("schema")?;
    match schema["$ref"].as_str() {
        Some(target) => Some(&doc["components"]["schemas"][target.trim_start_matches("#/components/schemas/")]),
        None => Some(schema),
    }
}

async fn every_json_request_schema_forbids_additional_properties(app: TestApp) {
    let doc = document(&app).await;
    let mut checked = 0;
    for (method, path, operation) in operations(&doc) {
        let Some(schema) = json_body_schema(&doc, &operation) else { continue };
        checked += 1;
        if path == "/api/v1/admin/settings" {
            // A map of setting names: the service refuses unknown names (`settings.unknown`).
            continue;
        }
        assert_eq!(schema["additionalProperties"], json!(false), "{method} {path}: {schema}");
    }
    assert!(checked >= 20, "only {checked} JSON bodies found");
}

/// `path` with each `{parameter}` replaced by a well-formed value, so the request reaches the
/// body extractor.
fn concrete(path: &str) -> String {
    path.trim_start_matches("/api/v1")
        .split('/')
        .map(|segment| match segment {
            "{option}" => "nickname",
            "{index}" => "0",
            s if s.starts_with('{') => "00000000-0000-4000-8000-000000000001",
            s => s,
        })
        .collect::<Vec<_>>()
        .join("/")
}

async fn an_unknown_field_is_refused_with_422_on_every_json_route(app: TestApp) {
    let admin = app.login_admin().await;
    let doc = document(&app).await;
    let mut checked = 0;
    for (method, path, operation) in operations(&doc) {
        if json_body_schema(&doc, &operation).is_none() {
            continue;
        }
        let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let response =
            app.call(method.clone(), &concrete(&path), Some(&admin.access), Some(json!({"nubo_unknown": 1}))).await;
        assert_eq!(response.status(), 422, "{method} {path}");
        let body: Value = response.json().await.unwrap();
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains("unknown field `nubo_unknown`") || body["field"] == "nubo_unknown",
            "{method} {path}: {body}"
        );
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} JSON routes tried");
}

async fn every_operation_documents_the_rejections_of_its_shape(app: TestApp) {
    let doc = document(&app).await;
    for (method, path, operation) in operations(&doc) {
        let responses = operation["responses"].as_object().unwrap();
        let mut expected = vec!["500"];
        let parameters = operation["parameters"].as_array().cloned().unwrap_or_default();
        if !parameters.is_empty() {
            expected.push("400");
        }
        if json_body_schema(&doc, &operation).is_some() {
            expected.extend(["400", "413", "415", "422"]);
        }
        let security = operation["security"].as_array().cloned().unwrap_or_default();
        if security.iter().any(|s| s.get("bearer").is_some()) {
            expected.extend(["401", "403"]);
        } else if !security.is_empty() {
            expected.push("401");
        }
        for status in expected {
            let response = responses.get(status).unwrap_or_else(|| panic!("{method} {path} lacks {status}"));
            assert_eq!(
                response["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/ErrorBody",
                "{method} {path} {status}"
            );
        }
    }
}

async fn a_json_body_that_is_not_an_object_is_refused_with_422(app: TestApp) {
    let admin = app.login_admin().await;
    // serde reads a struct from an array, field by position: `[null, null]` once reset the theme.
    let response =
        app.call(Method::PATCH, "/user/settings/theme", Some(&admin.access), Some(json!([null, null]))).await;
    assert_eq!(response.status(), 422);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "request.invalid_body");
    assert_eq!(body["message"], "expected a JSON object");
}
