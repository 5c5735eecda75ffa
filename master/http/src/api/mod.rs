//! The `/api/v1` routers, one module per area, and the OpenAPI document generated from them.

pub mod activity;
pub mod admin;
pub mod archives;
pub mod avatars;
pub mod contract;
pub mod events;
pub mod files;
pub mod mail;
pub mod metadata;
pub mod nodes;
pub mod oauth;
pub mod passkeys;
pub mod policies;
pub mod redeem;
pub mod reports;
pub mod search;
pub mod shares;
pub mod site;
pub mod storage_packs;
pub mod tags;
pub mod tasks;
pub mod themes;
pub mod thumbnails;
pub mod transfers;
pub mod two_factor;
pub mod user;
pub mod versions;
pub mod webdav;
pub mod wopi;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Extension};
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::ErrorBody;
use nubo_service::context::Context;

/// Top-level facts of the document; paths are collected from the routers below.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Nubo API",
        description = "Nubo: a multi-user cloud file storage and sharing service.\n\n\
Errors: every failure answers `{\"code\", \"message\", \"field\"?, \"request_id\"}` (see `ErrorBody`). \
Codes are stable `area.snake_case` strings. Status codes: 400 malformed request, 401 missing or invalid token, \
403 not allowed, 404 unknown record or route, 405 wrong method, 408 the request body stopped arriving (`body_timeout_seconds`; any route with a body), 409 conflict, 413 body too large (a JSON route refuses a declared `Content-Length` over `max_json_body` before reading it), \
415 wrong content type, 422 invalid field, 429 rate limited, 500 internal error (details only in the server log), \
501 not implemented yet, 503 dependency unavailable, 507 quota exceeded.\n\n\
Choices of ours where the interface specification is silent (not taken from it): the error body fields and \
codes above; the JSON body limit (1 MiB by default, `max_json_body`); the `x-request-id` header echoed on every answer; \
user statuses ACTIVE, INACTIVE, BANNED; refresh tokens (30 days, rotated on use, reuse revokes the chain); upload sessions \
live 24 hours and chunk sizes are powers of two; download tokens live one hour; task statuses queued, running, completed, \
error, canceled. Directory listings accept `limit` up to 1000. Storage nodes: an upload session on a policy bound to a node carries `direct {url, credential, expires_at}`; chunks then go to `PUT {url}/{index}` on the node with `Authorization: Bearer {credential}` (the master's chunk endpoint answers 409 `upload.direct_only`), and the node answers the last chunk with `{completed, object}` once the master recorded the file (202 with `completed: true` while the master does not answer; `GET {url}` then carries `result`). Public node-backed policies redirect downloads to a signed node URL valid 15 minutes, public local policies to a signed `/api/v1/file/blob/{token}` of the master, also valid 15 minutes and used without a bearer token. \
Users' files are served with `X-Content-Type-Options: nosniff` and a sandboxing `Content-Security-Policy`, script types (JavaScript, WebAssembly) as `text/plain; charset=utf-8`, so no page of this origin runs a user's file as a script (docs/src/security.md). \
No text input may hold a NUL character: a JSON string or key answers 422 `request.invalid_field`, a query or path parameter 400. External downloads run on a storage node, whose address guard refuses private, loopback, link-local and metadata addresses after DNS and on every redirect unless it is configured to allow them. The storage-node router `POST /api/v1/node/rpc` speaks the signed node protocol (docs/src/design/nodes.md) and is not described here. WebDAV (`/dav`, not described here): HTTP Basic with a WebDAV account as `{email}/{account name}` (our choice of form), successful checks cached 60 seconds; OPTIONS, PROPFIND (Depth 0 and 1; infinity answers 403 `propfind-finite-depth`), PROPPATCH, MKCOL, GET/HEAD with Range and ETag, PUT (streamed; 413 over `max_size`, 507 over quota; partial PUT answers 501), DELETE (to the trash), COPY/MOVE within `/dav`, LOCK/UNLOCK; RFC 4331 quota properties."
    ),
    paths(files::list_path, shares::browse),
    // ChangeEvent is the JSON in the `data` of `GET /events`' change events, which the stream's
    // schema (the SSE envelope) names only as text.
    components(schemas(ErrorBody, nubo_service::tree::events::ChangeEvent)),
    modifiers(&SecuritySchemes),
    tags(
        (name = "site", description = "Public facts about this instance"),
        (name = "user", description = "Registration, sign-in and the caller's own account"),
        (name = "files", description = "Files and folders, uploads and downloads"),
        (name = "tasks", description = "Background tasks"),
        (name = "webdav", description = "WebDAV accounts for `/dav`"),
        (name = "admin", description = "Administration (admin_required)"),
        (name = "wopi", description = "The WOPI host (absolute paths `/wopi/files/{id}`): Microsoft's WOPI REST protocol for Collabora Online, OnlyOffice and other WOPI clients"),
    )
)]
struct ApiDoc;

/// Declares the bearer schemes: access tokens for most routes, refresh tokens for the session
/// refresh and sign-out routes.
struct SecuritySchemes;

impl utoipa::Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        let bearer = |what: &str| {
            SecurityScheme::Http(
                HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("JWT").description(Some(what)).build(),
            )
        };
        components.add_security_scheme("bearer", bearer("Access token from POST /user/session (1 hour)"));
        components.add_security_scheme("refresh_token", bearer("Refresh token from POST /user/session"));
        components.add_security_scheme(
            "metrics_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("The `metrics_token` of the configuration"))
                    .build(),
            ),
        );
    }
}

/// The document as served, built once at start-up.
#[derive(Clone)]
pub struct OpenApiJson(Arc<String>);

/// The OpenAPI 3.1 document of this API.
#[utoipa::path(get, path = "/openapi.json", tag = "site",
    responses((status = 200, description = "OpenAPI 3.1 document", content_type = "application/json")))]
async fn openapi_json(Extension(doc): Extension<OpenApiJson>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], doc.0.as_str().to_owned())
}

/// All routes under `/api/v1` with their document.
pub fn routes() -> (axum::Router<Context>, utoipa::openapi::OpenApi) {
    let v1 = OpenApiRouter::new()
        .routes(routes!(site::ping))
        .routes(routes!(site::health))
        .routes(routes!(site::config))
        .routes(routes!(site::captcha_image))
        .routes(routes!(themes::public_list))
        .routes(routes!(user::register))
        .routes(routes!(user::login, user::logout, user::session))
        .routes(routes!(user::refresh))
        .routes(routes!(passkeys::start_registration, passkeys::finish_registration))
        .routes(routes!(passkeys::sign_in_options))
        .routes(routes!(mail::request_magic_link))
        .routes(routes!(mail::request_password_reset, mail::reset_password))
        .routes(routes!(mail::verify_email))
        .routes(routes!(passkeys::list))
        .routes(routes!(passkeys::rename, passkeys::delete))
        .routes(routes!(oauth::start))
        .routes(routes!(oauth::callback))
        .routes(routes!(oauth::list))
        .routes(routes!(oauth::link, oauth::unlink))
        .routes(routes!(user::me))
        .routes(routes!(user::storage))
        .routes(routes!(user::settings))
        // Registered before the `{option}` wildcard so `password` and `theme` are never option names.
        .routes(routes!(user::change_password))
        .routes(routes!(two_factor::start_setup, two_factor::enable, two_factor::disable))
        .routes(routes!(user::set_theme))
        .routes(routes!(avatars::use_avatar_service, avatars::reset_avatar))
        .routes(routes!(avatars::serve_avatar))
        .routes(routes!(user::update_setting))
        .routes(routes!(user::set_theme_alias))
        .routes(routes!(themes::list, themes::create))
        .routes(routes!(themes::get, themes::update, themes::delete))
        .routes(routes!(themes::set_default))
        .routes(routes!(admin::list_users, admin::create_user))
        .routes(routes!(admin::get_user, admin::update_user, admin::delete_user))
        .routes(routes!(admin::calibrate_user))
        .routes(routes!(activity::mine))
        .routes(routes!(activity::admin_list))
        .routes(routes!(admin::list_groups, admin::create_group))
        .routes(routes!(admin::get_group, admin::update_group, admin::delete_group))
        .routes(routes!(admin::get_settings, admin::update_settings))
        .routes(routes!(admin::settings_catalog))
        .routes(routes!(admin::summary))
        .routes(routes!(mail::send_test))
        .routes(routes!(policies::mine))
        .routes(routes!(policies::list, policies::create))
        .routes(routes!(policies::get, policies::update, policies::delete))
        .routes(routes!(policies::test))
        .routes(routes!(nodes::list, nodes::create))
        .routes(routes!(nodes::get, nodes::update, nodes::delete))
        .routes(routes!(nodes::test))
        .routes(listing(routes!(files::list_root, files::create_folder)))
        .routes(routes!(files::get, files::rename))
        .routes(routes!(files::detail))
        .routes(listing(routes!(files::tree)))
        .routes(routes!(thumbnails::thumbnail))
        .routes(routes!(files::move_objects, files::trash))
        .routes(routes!(files::copy_objects))
        .routes(listing(routes!(files::list_trash, files::purge)))
        .routes(routes!(files::restore))
        .routes(routes!(files::change_policy))
        .routes(routes!(tasks::list))
        .routes(routes!(tasks::get, tasks::cancel))
        .routes(routes!(tasks::admin_list))
        .routes(routes!(tasks::admin_get, tasks::admin_cancel))
        .routes(routes!(tasks::admin_import))
        .routes(routes!(metadata::get, metadata::patch))
        .routes(long_running(routes!(events::stream)))
        .routes(routes!(versions::list))
        .routes(long_running(routes!(versions::download)))
        .routes(routes!(versions::restore))
        .routes(routes!(versions::delete))
        .routes(routes!(metadata::list_properties, metadata::create_property))
        .routes(routes!(metadata::update_property, metadata::delete_property))
        .routes(routes!(transfers::create_upload, transfers::list_uploads))
        .routes(routes!(transfers::upload_status, transfers::abort_upload))
        .routes(routes!(transfers::complete_upload))
        .routes(long_running(routes!(transfers::create_download, transfers::download)))
        .routes(long_running(routes!(transfers::create_media, transfers::media)))
        .routes(routes!(transfers::create_source, transfers::get_source))
        .routes(routes!(archives::create))
        .routes(long_running(routes!(archives::download)))
        .routes(long_running(routes!(transfers::serve_source)))
        .routes(long_running(routes!(transfers::serve_blob)))
        // The wildcard path is documented through `ApiDoc` (utoipa-axum cannot register it).
        .route("/directory/{*path}", axum::routing::get(files::list_path).layer(compress_listing()))
        .route("/directory/", axum::routing::get(files::list_root).layer(compress_listing()))
        .routes(routes!(transfers::create_external_download))
        .routes(routes!(shares::create, shares::list))
        .routes(routes!(shares::public_view, shares::update, shares::delete))
        .routes(listing(routes!(shares::browse_root)))
        .route("/share/{code}/children/{*path}", axum::routing::get(shares::browse).layer(compress_listing()))
        .route("/share/{code}/children/", axum::routing::get(shares::browse_root).layer(compress_listing()))
        .routes(long_running(routes!(shares::download)))
        .routes(routes!(shares::media))
        .routes(routes!(thumbnails::share_thumbnail))
        .routes(routes!(shares::save))
        .routes(routes!(shares::archive))
        .routes(routes!(reports::report))
        .routes(routes!(reports::admin_list))
        .routes(routes!(reports::admin_act))
        .routes(routes!(admin::list_files, admin::delete_files))
        .routes(listing(routes!(search::search)))
        .routes(routes!(tags::list, tags::create))
        .routes(routes!(tags::get, tags::update, tags::delete))
        .routes(routes!(tags::objects, tags::attach, tags::detach))
        .routes(routes!(shares::admin_list))
        .routes(routes!(shares::admin_delete))
        .routes(routes!(storage_packs::mine))
        .routes(routes!(storage_packs::list, storage_packs::grant))
        .routes(routes!(storage_packs::revoke))
        .routes(routes!(redeem::redeem))
        .routes(routes!(redeem::list, redeem::create))
        .routes(routes!(redeem::update, redeem::delete))
        .routes(routes!(webdav::list, webdav::create))
        .routes(routes!(webdav::get, webdav::update, webdav::delete))
        .routes(routes!(wopi::open_session))
        .routes(routes!(wopi::viewers))
        .routes(routes!(wopi::admin_list, wopi::admin_create))
        .routes(routes!(wopi::admin_get, wopi::admin_update, wopi::admin_delete))
        .routes(routes!(wopi::admin_refresh))
        // The storage-node router speaks the node protocol (signed envelopes, see
        // docs/src/design/nodes.md), not this document's conventions, so it is not an OpenAPI operation.
        .route("/node/rpc", axum::routing::post(crate::node_rpc::handle))
        .routes(routes!(openapi_json))
        // Every route above reads JSON (or nothing): a declared length over the limit is
        // refused before the body is read.
        .route_layer(axum::middleware::from_fn(crate::edge::refuse_declared_oversize))
        // ... and must arrive whole within `json_body_deadline_seconds`.
        .route_layer(axum::middleware::from_fn(crate::edge::json_body_deadline))
        // Streamed bodies: no size limit here, the services count bytes themselves.
        .merge(
            OpenApiRouter::new()
                .routes(long_running(unlimited_body(routes!(transfers::put_chunk))))
                // Avatars count their bytes themselves, up to 2 MiB (over the JSON limit).
                .routes(unlimited_body(routes!(avatars::upload_avatar)))
                .routes(long_running(unlimited_body(routes!(transfers::replace_content, transfers::create_content)))),
        );
    let (router, mut doc) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .nest("/api/v1", v1)
        // The WOPI host lives outside /api/v1, where WOPI clients expect it.
        .merge(wopi::host_routes())
        // Prometheus scrapers expect `/metrics` at the root.
        .merge(OpenApiRouter::new().routes(routes!(crate::metrics::scrape)))
        .split_for_parts();
    add_tags(&mut doc);
    contract::add_common_errors(&mut doc);
    contract::unique_operation_ids(&mut doc);
    let json = OpenApiJson(Arc::new(doc.to_json().unwrap_or_default()));
    (router.layer(Extension(json)), doc)
}

/// The document's tags that no operation's `#[utoipa::path]` declares. `not-built` is kept for
/// an operation named before it is built, which answers 501 `route.not_implemented`.
fn add_tags(doc: &mut utoipa::openapi::OpenApi) {
    let tags = doc.tags.get_or_insert_with(Vec::new);
    for (name, description) in [
        ("shares", "Shares of files and folders by code"),
        ("tags", "The caller's tags"),
        ("not-built", "Operations of the interface that are not built yet: each answers 501 `route.not_implemented`"),
    ] {
        if !tags.iter().any(|tag| tag.name == name) {
            tags.push(utoipa::openapi::tag::TagBuilder::new().name(name).description(Some(description)).build());
        }
    }
}

type DocumentedRoute = (
    Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>,
    utoipa::openapi::path::Paths,
    axum::routing::MethodRouter<Context>,
);

/// Lifts the JSON body limit from a route whose body is a byte stream the service meters itself.
fn unlimited_body((schemas, paths, router): DocumentedRoute) -> DocumentedRoute {
    (schemas, paths, router.layer(DefaultBodyLimit::disable()))
}

/// Marks a route whose requests hold their connection long (a stream, a transfer of file bytes):
/// each takes one of the places for long requests (`http::edge::hold_long_request_slot`).
fn long_running((schemas, paths, router): DocumentedRoute) -> DocumentedRoute {
    (schemas, paths, router.layer(axum::middleware::from_fn(crate::edge::hold_long_request_slot)))
}

/// Marks a route that answers a page of a listing: gzip when the client accepts it. A page of
/// 1,000 entries is about 330 KB of JSON and 30 KB compressed, which on a phone's connection is
/// the difference between seconds and a fraction of one before a big folder shows.
/// Only listings, and only successful answers over 1 KiB: no answer carrying a token or a
/// file's bytes, and no error body, which `error::uniform_errors` may replace whole.
fn listing((schemas, paths, router): DocumentedRoute) -> DocumentedRoute {
    (schemas, paths, router.layer(compress_listing()))
}

fn compress_listing() -> tower_http::compression::CompressionLayer<impl tower_http::compression::Predicate> {
    use tower_http::compression::predicate::{Predicate, SizeAbove};
    let succeeded = |status: axum::http::StatusCode,
                     _: axum::http::Version,
                     _: &axum::http::HeaderMap,
                     _: &axum::http::Extensions| status.is_success();
    tower_http::compression::CompressionLayer::new().compress_when(SizeAbove::new(1024).and(succeeded))
}

/// The generated document (for tooling and tests).
pub fn openapi() -> utoipa::openapi::OpenApi {
    routes().1
}
