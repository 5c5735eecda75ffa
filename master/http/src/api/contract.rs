//! The error answers operations share, added to the generated OpenAPI document once the routers
//! are collected, so the document names every status the server can answer without each
//! annotation listing the same rejections by hand.
//!
//! What an operation can answer follows from its shape: path or query parameters can be
//! unreadable (400, `ApiPath`/`ApiQuery`); a JSON body can be malformed (400), too large (413), of
//! another content type (415) or carry wrong, missing or unknown fields (422, `ApiJson`); a bearer
//! token can be missing or invalid (401) and its user banned or inactive (403); anything can fail
//! inside (500). An operation's own annotation keeps its more precise wording: only the statuses
//! it does not list are added.

use std::collections::HashMap;

use utoipa::openapi::path::{Operation, ParameterIn, PathItem};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, ResponseBuilder};

/// The operations of one path item.
fn operations_mut(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.patch,
        &mut item.head,
        &mut item.options,
        &mut item.trace,
    ]
    .into_iter()
    .flatten()
}

/// Makes every `operationId` unique, as OpenAPI requires (generated clients key operations by
/// it). Ids are the handlers' names, which modules repeat (`list`, `get`, ...): a repeated one
/// gets the words of its path in front, `GET /api/v1/tag` -> `tag_list`.
pub fn unique_operation_ids(doc: &mut OpenApi) {
    let mut uses: HashMap<String, usize> = HashMap::new();
    for item in doc.paths.paths.values_mut() {
        for id in operations_mut(item).filter_map(|operation| operation.operation_id.clone()) {
            *uses.entry(id).or_default() += 1;
        }
    }
    for (path, item) in doc.paths.paths.iter_mut() {
        let words: Vec<&str> = path
            .trim_start_matches("/api/v1")
            .split('/')
            .filter(|word| !word.is_empty() && !word.starts_with('{'))
            .collect();
        for operation in operations_mut(item) {
            if let Some(id) = operation.operation_id.as_mut().filter(|id| uses.get(id.as_str()) > Some(&1)) {
                *id = format!("{}_{id}", words.join("_"));
            }
        }
    }
}

/// Adds the shared error answers to every operation of `doc`.
pub fn add_common_errors(doc: &mut OpenApi) {
    for item in doc.paths.paths.values_mut() {
        for operation in operations_mut(item) {
            for (status, description) in common_errors(operation) {
                operation.responses.responses.entry(status.to_owned()).or_insert_with(|| {
                    let body = ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build();
                    ResponseBuilder::new().description(description).content("application/json", body).build().into()
                });
            }
        }
    }
}

/// The statuses `operation` can answer by its shape alone, with a generic description.
fn common_errors(operation: &Operation) -> Vec<(&'static str, &'static str)> {
    let mut errors = Vec::new();
    let has_parameter = |place: ParameterIn| operation.parameters.iter().flatten().any(|p| p.parameter_in == place);
    let json_body =
        operation.request_body.as_ref().is_some_and(|body| body.content.keys().any(|c| c == "application/json"));
    if has_parameter(ParameterIn::Path) || has_parameter(ParameterIn::Query) || json_body {
        errors.push(("400", "Malformed request: an unreadable path or query parameter, or malformed JSON"));
    }
    if json_body {
        errors.push(("413", "Body larger than the JSON body limit"));
        errors.push(("415", "Body without Content-Type: application/json"));
        errors.push(("422", "Body with a wrong, missing or unknown field"));
    }
    match security_schemes(operation).as_slice() {
        [] => {}
        schemes => {
            errors.push(("401", "Token missing, invalid or expired"));
            if schemes.iter().any(|s| s == "bearer") {
                errors.push(("403", "Account banned or not active, or not allowed"));
            }
        }
    }
    errors.push(("500", "Internal error (details only in the server log)"));
    errors
}

/// The names of the security schemes `operation` requires.
fn security_schemes(operation: &Operation) -> Vec<String> {
    // `SecurityRequirement` keeps its scheme names private; its serialised form is the map.
    operation
        .security
        .iter()
        .flatten()
        .filter_map(|requirement| serde_json::to_value(requirement).ok())
        .filter_map(|value| value.as_object().map(|map| map.keys().cloned().collect::<Vec<_>>()))
        .flatten()
        .collect()
}

#[cfg(test)]
mod operation_id_tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_operation_of_the_document_has_its_own_id() {
        let mut doc = crate::api::openapi();
        let mut seen = HashSet::new();
        for (path, item) in doc.paths.paths.iter_mut() {
            for operation in operations_mut(item) {
                let id =
                    operation.operation_id.clone().unwrap_or_else(|| panic!("{path} has an operation without an id"));
                assert!(seen.insert(id.clone()), "{id} repeats ({path})");
            }
        }
        assert!(
            seen.contains("tag_list") && seen.contains("share_list"),
            "repeated handler names get their path's words"
        );
    }

    /// The document gets its common errors from `common_errors`; an annotation that writes one of
    /// them again word for word only hides a change to the shared wording.
    #[test]
    fn no_annotation_repeats_a_common_error_word_for_word() {
        let repeats = [
            r#"(status = 401, description = "Token missing, invalid or expired", body = ErrorBody),"#,
            r#"(status = 400, description = "Malformed request", body = ErrorBody),"#,
        ];
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut pending = vec![root];
        let mut found = Vec::new();
        let mut files = 0;
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).expect("read the source folder").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.extension().is_some_and(|e| e == "rs")
                    && path.file_stem().is_none_or(|s| s != "contract")
                {
                    files += 1;
                    let text = std::fs::read_to_string(&path).expect("read a source file");
                    for (n, line) in text.lines().enumerate() {
                        if repeats.contains(&line.trim()) {
                            found.push(format!("{}:{}", path.display(), n + 1));
                        }
                    }
                }
            }
        }
        assert!(files > 20, "the scan found the handlers ({files} files)");
        assert!(found.is_empty(), "annotations repeat a common error (contract.rs adds it): {found:?}");
    }
}
