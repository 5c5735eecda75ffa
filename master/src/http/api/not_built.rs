//! The operations the interface names that are not built yet, in one table: each row becomes an
//! axum route answering 501 `route.not_implemented` (after the access check its feature will
//! have) and an OpenAPI operation documenting that answer. A later feature replaces its rows with
//! real routes; nothing else here needs to change.

use axum::routing::{MethodFilter, MethodRouter, on};
use utoipa::openapi::path::{HttpMethod, Operation, OperationBuilder, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::tag::TagBuilder;
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, Required, ResponseBuilder};
use utoipa_axum::router::OpenApiRouter;

use crate::context::Context;
use crate::error::{ErrorKind, ServiceError};
use crate::error_codes as codes;
use crate::http::guard::{AdminRequired, JwtRequired};

/// The tag every not-built operation carries besides its area's, so tools (and CI's
/// schemathesis exceptions) can select them all.
pub const TAG: &str = "not-built";

/// The HTTP methods the table uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Verb {
    fn filter(self) -> MethodFilter {
        match self {
            Self::Get => MethodFilter::GET,
            Self::Post => MethodFilter::POST,
            Self::Put => MethodFilter::PUT,
            Self::Patch => MethodFilter::PATCH,
            Self::Delete => MethodFilter::DELETE,
        }
    }

    fn http_method(self) -> HttpMethod {
        match self {
            Self::Get => HttpMethod::Get,
            Self::Post => HttpMethod::Post,
            Self::Put => HttpMethod::Put,
            Self::Patch => HttpMethod::Patch,
            Self::Delete => HttpMethod::Delete,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Post => "post",
            Self::Put => "put",
            Self::Patch => "patch",
            Self::Delete => "delete",
        }
    }
}

/// Who may reach the operation once it is built; checked before the 501, so an anonymous or
/// non-admin caller already gets the 401/403 the finished operation will answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No bearer token (public pages, sign-in steps, WOPI's own `access_token`).
    Public,
    /// `jwt_required`.
    User,
    /// `admin_required`.
    Admin,
}

/// One operation of the interface that is not built yet.
#[derive(Debug)]
pub struct NotBuilt {
    pub verb: Verb,
    /// The axum path: under `/api/v1` unless it starts with `/wopi` (absolute, as the WOPI host
    /// protocol wants); `{*name}` is a wildcard, documented as `{name}`.
    pub path: &'static str,
    pub access: Access,
    /// The area tag of the document (`user`, `files`, `shares`, `tags`, `admin`).
    pub area: &'static str,
    pub summary: &'static str,
    /// What is missing, as the 501's message names it.
    pub feature: &'static str,
}

/// A row of [`TABLE`] (public, so the table may be empty without the builder going unused).
pub const fn row(
    verb: Verb,
    path: &'static str,
    access: Access,
    area: &'static str,
    summary: &'static str,
    feature: &'static str,
) -> NotBuilt {
    NotBuilt { verb, path, access, area, summary, feature }
}

/// Paths as the API conventions name them (see docs/src/design/not-built.md); a feature that
/// lands removes its rows. Empty: every operation the conventions name is built.
pub const TABLE: &[NotBuilt] = &[];

impl NotBuilt {
    /// Outside `/api/v1`: the WOPI host lives where WOPI clients expect it.
    fn is_absolute(&self) -> bool {
        self.path.starts_with("/wopi/")
    }

    /// The path as the document names it (a wildcard is one parameter there).
    fn documented_path(&self) -> String {
        let path = self.path.replace("{*", "{");
        if self.is_absolute() { path } else { format!("/api/v1{path}") }
    }

    fn refusal(&self) -> ServiceError {
        ServiceError::new(
            ErrorKind::NotImplemented,
            codes::ROUTE_NOT_IMPLEMENTED,
            format!("not built yet: {}", self.feature),
        )
    }

    fn method_router(&'static self) -> MethodRouter<Context> {
        let filter = self.verb.filter();
        match self.access {
            Access::Public => on(filter, move || async move { self.refusal() }),
            Access::User => on(filter, move |_: JwtRequired| async move { self.refusal() }),
            Access::Admin => on(filter, move |_: AdminRequired| async move { self.refusal() }),
        }
    }

    fn operation(&self) -> Operation {
        let text = ObjectBuilder::new().schema_type(Type::String).build();
        let parameters = self.path.split('/').filter_map(|segment| {
            let name = segment.strip_prefix('{')?.strip_suffix('}')?.trim_start_matches('*');
            Some(
                ParameterBuilder::new()
                    .name(name)
                    .parameter_in(ParameterIn::Path)
                    .required(Required::True)
                    .schema(Some(text.clone()))
                    .build(),
            )
        });
        let slug: String =
            self.path.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect::<String>();
        let error = ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build();
        let mut operation = OperationBuilder::new()
            .operation_id(Some(format!("not_built_{}{}", self.verb.name(), slug.trim_end_matches('_'))))
            .tags(Some([self.area, TAG]))
            .summary(Some(self.summary))
            .description(Some(format!(
                "Not built yet ({}): answers 501 `route.not_implemented` with the uniform error body.",
                self.feature
            )))
            .parameters(Some(parameters))
            .response(
                "501",
                ResponseBuilder::new().description("Not built yet").content("application/json", error).build(),
            );
        if self.access != Access::Public {
            operation = operation.security(SecurityRequirement::new("bearer", Vec::<String>::new()));
        }
        operation.build()
    }
}

/// One method router per path of the rows `absolute` selects, keeping the table's order.
fn routers(absolute: bool) -> Vec<(&'static str, MethodRouter<Context>)> {
    let mut grouped: Vec<(&'static str, MethodRouter<Context>)> = Vec::new();
    for entry in TABLE.iter().filter(|entry| entry.is_absolute() == absolute) {
        match grouped.iter_mut().find(|(path, _)| *path == entry.path) {
            Some((_, router)) => *router = std::mem::take(router).merge(entry.method_router()),
            None => grouped.push((entry.path, entry.method_router())),
        }
    }
    grouped
}

/// The rows under `/api/v1`, relative to it (their operations come from [`document`]).
pub fn api_routes() -> OpenApiRouter<Context> {
    let mut v1 = OpenApiRouter::new();
    for (path, router) in routers(false) {
        // A wildcard does not match an empty rest, so its root answers alike (as `/directory/`).
        if let Some(root) = path.strip_suffix("/{*path}") {
            v1 = v1.route(&format!("{root}/"), router.clone());
        }
        v1 = v1.route(path, router);
    }
    v1
}

/// The rows outside `/api/v1` (the WOPI host).
pub fn absolute_routes() -> axum::Router<Context> {
    routers(true).into_iter().fold(axum::Router::new(), |router, (path, method)| router.route(path, method))
}

/// Adds every row's operation, and the tags they use, to `doc`.
pub fn document(doc: &mut OpenApi) {
    for entry in TABLE {
        doc.paths.add_path_operation(entry.documented_path(), vec![entry.verb.http_method()], entry.operation());
    }
    let tags = doc.tags.get_or_insert_with(Vec::new);
    for (name, description) in [
        ("shares", "Shares of files and folders by code"),
        ("tags", "The caller's tags"),
        (TAG, "Operations of the interface that are not built yet: each answers 501 `route.not_implemented`"),
    ] {
        if !tags.iter().any(|tag| tag.name == name) {
            tags.push(TagBuilder::new().name(name).description(Some(description)).build());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_row_repeats_an_operation() {
        for (index, entry) in TABLE.iter().enumerate() {
            let twin = TABLE[index + 1..].iter().find(|other| other.verb == entry.verb && other.path == entry.path);
            assert!(twin.is_none(), "{:?} {} is listed twice", entry.verb, entry.path);
        }
    }

    #[test]
    fn no_row_shadows_a_built_operation() {
        // axum refuses a second handler for one method and path, so building every route proves
        // no row stands where a built operation is; the document must still hold each row.
        let doc = crate::http::api::openapi();
        for entry in TABLE {
            let item = doc.paths.paths.get(&entry.documented_path()).expect("documented path");
            let operation = match entry.verb {
                Verb::Get => &item.get,
                Verb::Post => &item.post,
                Verb::Put => &item.put,
                Verb::Patch => &item.patch,
                Verb::Delete => &item.delete,
            };
            let tags = operation.as_ref().and_then(|o| o.tags.clone()).unwrap_or_default();
            assert!(tags.iter().any(|t| t == TAG), "{:?} {}", entry.verb, entry.path);
        }
    }

    #[test]
    fn every_path_parameter_is_documented() {
        let operation =
            row(Verb::Get, "/share/{code}/children/{*path}", Access::Public, "shares", "List", "shares").operation();
        let names: Vec<_> = operation.parameters.unwrap().into_iter().map(|p| p.name).collect();
        assert_eq!(names, ["code", "path"]);
    }
}
