//! Text the databases cannot hold never reaches them: a NUL in any string field of the OpenAPI
//! document (query, path or JSON body; PostgreSQL's TEXT refuses it with an error that once
//! answered 500) and a WebDAV path that is not UTF-8 are refused at the edge with 400 or 422.

use nubo_tests::{TestApp, on_every_backend};
use reqwest::Method;
use serde_json::{Map, Value, json};

on_every_backend!(
    a_nul_in_any_string_field_of_the_document_is_refused_before_the_database,
    a_webdav_path_that_is_not_utf8_or_holds_a_nul_is_refused_with_400
);

const NUL: &str = "a\u{0}b";
const ENCODED_NUL: &str = "a%00b";
const SOME_ID: &str = "00000000-0000-4000-8000-000000000001";

/// `$ref` resolved against the document's schemas (one level; utoipa names each shape once).
fn resolved<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(target) => &doc["components"]["schemas"][target.trim_start_matches("#/components/schemas/")],
        None => schema,
    }
}

/// The first non-null type of `schema` (`"string"`, `["string", "null"]`, a `oneOf`/`allOf`
/// whose first member has one), or `None`.
fn type_of<'a>(doc: &'a Value, schema: &'a Value) -> (Option<&'a str>, &'a Value) {
    let schema = resolved(doc, schema);
    for combinator in ["allOf", "oneOf", "anyOf"] {
        if let Some(members) = schema[combinator].as_array() {
            let member = members.iter().find(|m| m["type"] != "null").unwrap_or(&Value::Null);
            return type_of(doc, member);
        }
    }
    let kind = match &schema["type"] {
        Value::String(kind) => Some(kind.as_str()),
        Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).find(|k| *k != "null"),
        _ => None,
    };
    (kind, schema)
}

/// A well-formed value for `schema`: its first enum value, a UUID, an address, the minimum...
/// objects carry their required properties only.
fn example(doc: &Value, schema: &Value) -> Value {
    let (kind, schema) = type_of(doc, schema);
    if let Some(first) = schema["enum"].as_array().and_then(|values| values.first()) {
        return first.clone();
    }
    match kind {
        Some("string") => match schema["format"].as_str() {
            Some("uuid") => json!(SOME_ID),
            Some("email") => json!("sweep@example.com"),
            Some("date-time") => json!("2026-01-01T00:00:00Z"),
            Some("date") => json!("2026-01-01"),
            _ => json!("x"),
        },
        Some("integer") | Some("number") => schema["minimum"].as_i64().map_or(json!(1), |min| json!(min.max(1))),
        Some("boolean") => json!(false),
        Some("array") => match schema["minItems"].as_u64() {
            Some(n) if n > 0 => json!([example(doc, &schema["items"])]),
            _ => json!([]),
        },
        Some("object") => {
            let mut object = Map::new();
            for name in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                object.insert(name.to_owned(), example(doc, &schema["properties"][name]));
            }
            Value::Object(object)
        }
        _ => json!("x"),
    }
}

/// Where a string may stand inside a body of `schema`, as property paths (`[]` for the first
/// item of an array), a few levels deep.
fn string_slots(doc: &Value, schema: &Value, at: Vec<String>, found: &mut Vec<Vec<String>>) {
    if at.len() > 4 {
        return;
    }
    let (kind, schema) = type_of(doc, schema);
    match kind {
        Some("string") if schema["format"] != "binary" => found.push(at),
        Some("array") => string_slots(doc, &schema["items"], [at, vec!["[]".to_owned()]].concat(), found),
        Some("object") => {
            for (name, property) in schema["properties"].as_object().into_iter().flatten() {
                string_slots(doc, property, [at.clone(), vec![name.clone()]].concat(), found);
            }
        }
        _ => {}
    }
}

/// `value` (an example of `schema`) with the slot at `path` holding [`NUL`].
fn with_nul_at(doc: &Value, schema: &Value, value: &mut Value, path: &[String]) {
    let (_, schema) = type_of(doc, schema);
    let Some((head, rest)) = path.split_first() else {
        *value = json!(NUL);
        return;
    };
    if head == "[]" {
        let items = &schema["items"];
        *value = json!([example(doc, items)]);
        with_nul_at(doc, items, &mut value[0], rest);
    } else {
        let property = &schema["properties"][head];
        if value.get(head).is_none() {
            value[head] = example(doc, property);
        }
        with_nul_at(doc, property, &mut value[head], rest);
    }
}

/// A concrete value of a path or query parameter.
fn parameter_example(doc: &Value, parameter: &Value) -> String {
    match example(doc, &parameter["schema"]) {
        Value::String(text) => text,
        other => other.to_string(),
    }
}

fn is_string_parameter(doc: &Value, parameter: &Value) -> bool {
    let (kind, schema) = type_of(doc, &parameter["schema"]);
    let (item_kind, _) = type_of(doc, &schema["items"]);
    (kind == Some("string") && schema["format"] != "uuid") || (kind == Some("array") && item_kind == Some("string"))
}

/// One request of the sweep.
struct Case {
    method: Method,
    path: String,
    body: Option<Value>,
    what: String,
}

fn cases(doc: &Value) -> Vec<Case> {
    let mut all = Vec::new();
    for (template, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let parameters = operation["parameters"].as_array().cloned().unwrap_or_default();
            // Path with every parameter well formed, optionally one of them holding a NUL.
            let path_with = |nul_in: Option<&str>| {
                let mut path = template.clone();
                for parameter in parameters.iter().filter(|p| p["in"] == "path") {
                    let name = parameter["name"].as_str().unwrap();
                    let value = if nul_in == Some(name) {
                        ENCODED_NUL.to_owned()
                    } else if name == "option" {
                        "nickname".to_owned()
                    } else {
                        parameter_example(doc, parameter)
                    };
                    path = path.replace(&format!("{{{name}}}"), &value);
                }
                path
            };
            let required_query = |except: &str| {
                parameters
                    .iter()
                    .filter(|p| p["in"] == "query" && p["required"] == true && p["name"] != except)
                    .map(|p| format!("{}={}", p["name"].as_str().unwrap(), parameter_example(doc, p)))
                    .collect::<Vec<_>>()
            };
            let body_schema = operation["requestBody"]["content"]["application/json"].get("schema");
            let body_example = body_schema.map(|schema| example(doc, schema));
            for parameter in parameters.iter().filter(|p| is_string_parameter(doc, p)) {
                let name = parameter["name"].as_str().unwrap();
                let (path, what) = match parameter["in"].as_str() {
                    Some("path") => {
                        let query = required_query("").join("&");
                        (format!("{}?{query}", path_with(Some(name))), format!("path parameter {name}"))
                    }
                    Some("query") => {
                        let query = [required_query(name), vec![format!("{name}={ENCODED_NUL}")]].concat().join("&");
                        (format!("{}?{query}", path_with(None)), format!("query parameter {name}"))
                    }
                    _ => continue,
                };
                all.push(Case { method: method.clone(), path, body: body_example.clone(), what });
            }
            let Some(schema) = body_schema else { continue };
            let mut slots = Vec::new();
            string_slots(doc, schema, Vec::new(), &mut slots);
            let query = required_query("").join("&");
            for slot in slots {
                let mut body = example(doc, schema);
                with_nul_at(doc, schema, &mut body, &slot);
                all.push(Case {
                    method: method.clone(),
                    path: format!("{}?{query}", path_with(None)),
                    body: Some(body),
                    what: format!("body field {}", slot.join(".")),
                });
            }
        }
    }
    all
}

async fn a_nul_in_any_string_field_of_the_document_is_refused_before_the_database(app: TestApp) {
    let admin = app.login_admin().await;
    let doc: Value = app.get("/openapi.json").await.json().await.unwrap();
    let cases = cases(&doc);
    assert!(cases.len() >= 150, "only {} string fields found", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let mut request = app
            .client
            .request(case.method.clone(), format!("{}{}", app.base_url, case.path))
            .bearer_auth(&admin.access);
        if let Some(body) = &case.body {
            request = request.json(body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let refused_for_the_nul = match status {
            400 => ["request.invalid_query", "request.invalid_path"].contains(&body["code"].as_str().unwrap_or("")),
            422 => body["code"] == "request.invalid_field",
            _ => false,
        };
        if !refused_for_the_nul {
            failures.push(format!("{} {} ({}): {status} {body}", case.method, case.path, case.what));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases not refused:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

async fn a_webdav_path_that_is_not_utf8_or_holds_a_nul_is_refused_with_400(app: TestApp) {
    let (_, dav) = app.dav_user("bytes@example.com", "laptop").await;
    assert_eq!(dav.put("/kept.txt", "kept").await.status(), 201);
    let mut failures = Vec::new();
    for path in ["/%FF", "/%C0%AF", "/a%00b", "/%FF/child.txt", "/ok%E2%82"] {
        for method in ["PUT", "MKCOL", "PROPFIND", "GET", "DELETE", "LOCK", "PROPPATCH"] {
            let mut request = dav.request(method, path);
            if method == "PROPFIND" {
                request = request.header("Depth", "0");
            }
            let response = request.body("x").send().await.unwrap();
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            if status != 400 || body["code"] != "dav.bad_request" {
                failures.push(format!("{method} {path}: {status} {body}"));
            }
        }
    }
    for destination in ["/dav/%FF", "/dav/a%00b"] {
        for method in ["MOVE", "COPY"] {
            let response = dav.request(method, "/kept.txt").header("Destination", destination).send().await.unwrap();
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            if status != 400 || body["code"] != "dav.bad_request" {
                failures.push(format!("{method} -> {destination}: {status} {body}"));
            }
        }
    }
    assert!(failures.is_empty(), "not refused with 400:\n{}", failures.join("\n"));
    assert_eq!(dav.get("/kept.txt").await.status(), 200, "nothing was moved away");
}
