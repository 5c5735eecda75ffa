//! WOPI: opening a session (`POST /api/v1/file/{id}/wopi_session`) and the WOPI host at
//! `/wopi/files/{id}` and `/wopi/files/{id}/contents` (absolute, where WOPI clients expect it),
//! thin handlers over `service::office::wopi`. The host speaks WOPI's dialect: the access token in the
//! `access_token` query parameter, operations chosen by `X-WOPI-Override`, answers in WOPI's
//! headers (`X-WOPI-Lock`, `X-WOPI-ItemVersion`, ...) and status codes. Error answers still carry
//! the uniform JSON body, which WOPI clients ignore: the headers are what they read.

use axum::Json;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::download;
use crate::error::ApiResult;
use crate::error::ErrorResponse;
use crate::error::{ErrorBody, error_response};
use crate::extract::{ApiJson, ApiPath, ApiQuery, body_stream, content_length};
use crate::guard::{AdminRequired, AuthRequired, JwtRequired};
use nubo_model::domain::ids::ObjectId;
use nubo_service::context::Context;
use nubo_service::error::{ErrorKind, ServiceError, ServiceResult};
use nubo_service::error_codes as codes;
use nubo_service::office::viewers::{self, Viewers};
use nubo_service::office::wopi::{
    self, CheckFileInfo, RelativeFile, RelativeTarget, WopiAccess, WopiMode, WopiRefusal, WopiRequest, WopiSession,
};
use nubo_service::office::wopi_apps::{self, Proof, WopiAppInput, WopiAppView};
use nubo_service::settings::site;

const OVERRIDE: &str = "x-wopi-override";
const LOCK: &str = "x-wopi-lock";
const OLD_LOCK: &str = "x-wopi-oldlock";
const LOCK_FAILURE_REASON: &str = "x-wopi-lockfailurereason";
const ITEM_VERSION: &str = "x-wopi-itemversion";
const MAX_EXPECTED_SIZE: &str = "x-wopi-maxexpectedsize";
const SUGGESTED_TARGET: &str = "x-wopi-suggestedtarget";
const RELATIVE_TARGET: &str = "x-wopi-relativetarget";
const OVERWRITE_RELATIVE_TARGET: &str = "x-wopi-overwriterelativetarget";
const VALID_RELATIVE_TARGET: &str = "x-wopi-validrelativetarget";
const INVALID_FILE_NAME_ERROR: &str = "x-wopi-invalidfilenameerror";
const REQUESTED_NAME: &str = "x-wopi-requestedname";
const WOPI_SIZE: &str = "x-wopi-size";
const PROOF: &str = "x-wopi-proof";
const PROOF_OLD: &str = "x-wopi-proofold";
const TIMESTAMP: &str = "x-wopi-timestamp";

/// What a session is opened for.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WopiSessionRequest {
    /// `view` (default) or `edit` (needs write access).
    #[serde(default)]
    pub mode: WopiMode,
    /// The WOPI application to open the file with (`/admin/wopi`): the answer then carries its
    /// action URL, and the application's requests must carry its proof.
    #[serde(default)]
    pub app_id: Option<Uuid>,
}

/// The extension whose viewers are asked for.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ViewersQuery {
    /// A file extension, with or without its dot (`docx`, `.png`).
    pub ext: String,
}

/// The ways to open a file of an extension: the web app's built-in viewers that the `viewers`
/// setting enables (image, video, audio, PDF, Markdown, text and code; the last two can save
/// through `PATCH /file/content`) and the WOPI applications whose discovery lists the extension,
/// with their actions. Each master keeps the registry per settings version: a change of the
/// settings or of a WOPI application is seen at once by every master. The `ETag` is that
/// version with the extension; `If-None-Match` with it answers 304.
#[utoipa::path(get, path = "/file/viewers", tag = "files", security(("bearer" = [])), params(ViewersQuery),
    responses(
        (status = 200, description = "The viewers, built-in first", body = Viewers,
            headers(("ETag" = String, description = "Changes when the answer may change"))),
        (status = 304, description = "Unchanged since the `If-None-Match` ETag"),
        (status = 422, description = "Not a file extension", body = ErrorBody),
    ))]
pub async fn viewers(
    State(state): State<Context>,
    _: JwtRequired,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<ViewersQuery>,
) -> ApiResult<Response> {
    let ext = viewers::parse_ext(&query.ext)?;
    let registry = viewers::registry(&state).await?;
    let etag = format!("\"{}-{ext}\"", registry.version);
    let etag_value = text_header(&etag);
    let cache = (header::CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    if header_text(&headers, header::IF_NONE_MATCH.as_str())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag))
    {
        return Ok((StatusCode::NOT_MODIFIED, [(header::ETAG, etag_value), cache]).into_response());
    }
    Ok(([(header::ETAG, etag_value), cache], Json(registry.for_extension(&ext))).into_response())
}

/// Where WOPI clients reach this master: the `site_url` setting, else the address the request
/// came to.
async fn site_base(state: &Context, headers: &HeaderMap) -> ServiceResult<String> {
    let base = site::link_base(state).await?;
    if !base.is_empty() {
        return Ok(base);
    }
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("localhost");
    Ok(format!("http://{host}"))
}

/// Open a WOPI session on a file: a WOPI access token scoped to this file, the caller and the
/// mode (10 hours; refused at once when the caller is banned or the file deleted), the file's
/// `WOPISrc` and, with an application, its action URL. Viewing needs read access, editing write
/// access.
#[utoipa::path(post, path = "/file/{id}/wopi_session", tag = "files", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The file")),
    request_body = WopiSessionRequest,
    responses(
        (status = 200, description = "The session", body = WopiSession),
        (status = 404, description = "No such file, or no such WOPI application", body = ErrorBody),
        (status = 409, description = "The object is a folder, or the application has no action for its extension", body = ErrorBody),
    ))]
pub async fn open_session(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<ObjectId>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<WopiSessionRequest>,
) -> ApiResult<Json<WopiSession>> {
    let base = site_base(&state, &headers).await?;
    let target = (id, request.mode);
    Ok(Json(wopi::open_session(&state, caller.claims.sub, target, request.app_id, &base).await?))
}

/// The WOPI access token, as WOPI clients send it.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WopiQuery {
    /// The WOPI access token from `POST /api/v1/file/{id}/wopi_session`.
    pub access_token: Option<String>,
}

/// Checks the request's access token (and proof) for file `id`. The URL the client signed is
/// rebuilt from the site address and the request's path and query.
async fn authorise(
    state: &Context,
    id: ObjectId,
    query: &WopiQuery,
    headers: &HeaderMap,
    uri: &Uri,
) -> ServiceResult<WopiAccess> {
    let token = query.access_token.as_deref().filter(|t| !t.is_empty()).ok_or_else(|| {
        ServiceError::new(ErrorKind::Unauthorized, codes::AUTH_MISSING_TOKEN, "the access_token parameter is required")
    })?;
    let base = site_base(state, headers).await?;
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let url = format!("{base}{path}");
    let text = |name: &str| header_text(headers, name).map(str::to_owned);
    let proof = Proof { proof: text(PROOF), proof_old: text(PROOF_OLD), timestamp: text(TIMESTAMP) };
    wopi::authorise(state, &WopiRequest { token, url: &url, proof: &proof }, id).await
}

fn text_header(value: &str) -> HeaderValue {
    HeaderValue::from_str(value).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn with_header(mut response: Response, name: &'static str, value: &str) -> Response {
    response.headers_mut().insert(HeaderName::from_static(name), text_header(value));
    response
}

/// A refusal in WOPI's terms.
fn refusal(refusal: WopiRefusal) -> Response {
    match refusal {
        WopiRefusal::LockMismatch { current, reason } => {
            let response = error_response(StatusCode::CONFLICT, codes::WOPI_LOCK_MISMATCH, reason);
            with_header(with_header(response, LOCK, &current), LOCK_FAILURE_REASON, reason)
        }
        WopiRefusal::InvalidName(why) => {
            let response = error_response(StatusCode::BAD_REQUEST, codes::WOPI_INVALID_NAME, &why);
            with_header(response, INVALID_FILE_NAME_ERROR, &why)
        }
        WopiRefusal::TargetExists { valid, lock } => {
            let response = error_response(
                StatusCode::CONFLICT,
                codes::WOPI_TARGET_EXISTS,
                "a file of that name exists: X-WOPI-ValidRelativeTarget names a free one",
            );
            let response = with_header(response, VALID_RELATIVE_TARGET, &encode_utf7(&valid));
            match lock {
                Some(lock) => with_header(response, LOCK, &lock),
                None => response,
            }
        }
        WopiRefusal::Service(err) => err.into_response(),
    }
}

fn not_supported(what: &str) -> Response {
    error_response(StatusCode::NOT_IMPLEMENTED, codes::WOPI_NOT_SUPPORTED, &format!("not supported: {what}"))
}

/// An empty 200, with the file's version when known.
fn ok(version: Option<&str>) -> Response {
    let response = StatusCode::OK.into_response();
    match version {
        Some(version) => with_header(response, ITEM_VERSION, version),
        None => response,
    }
}

/// WOPI CheckFileInfo: the file's properties and what this user may do with it.
#[utoipa::path(get, path = "/wopi/files/{id}", tag = "wopi", params(("id" = Uuid, Path), WopiQuery),
    responses(
        (status = 200, description = "CheckFileInfo", body = CheckFileInfo),
        (status = 401, description = "Access token missing, invalid, expired, for another file or revoked", body = ErrorBody),
        (status = 404, description = "No such file (or deleted)", body = ErrorBody),
    ))]
pub async fn check_file_info(
    State(state): State<Context>,
    ApiPath(id): ApiPath<ObjectId>,
    ApiQuery(query): ApiQuery<WopiQuery>,
    headers: HeaderMap,
    uri: Uri,
) -> ApiResult<Json<CheckFileInfo>> {
    let access = authorise(&state, id, &query, &headers, &uri).await?;
    let base = site_base(&state, &headers).await?;
    Ok(Json(wopi::check_file_info(&access, &base)))
}

/// WOPI GetFile: the content, streamed, with `X-WOPI-ItemVersion`; 412 when it is larger than
/// `X-WOPI-MaxExpectedSize`.
#[utoipa::path(get, path = "/wopi/files/{id}/contents", tag = "wopi", params(("id" = Uuid, Path), WopiQuery),
    responses(
        (status = 200, description = "The content", content_type = "application/octet-stream"),
        (status = 401, description = "Access token missing, invalid, expired, for another file or revoked", body = ErrorBody),
        (status = 404, description = "No such file (or deleted)", body = ErrorBody),
        (status = 412, description = "Larger than X-WOPI-MaxExpectedSize", body = ErrorBody),
    ))]
pub async fn get_file(
    State(state): State<Context>,
    ApiPath(id): ApiPath<ObjectId>,
    ApiQuery(query): ApiQuery<WopiQuery>,
    headers: HeaderMap,
    uri: Uri,
) -> ApiResult<Response> {
    let access = authorise(&state, id, &query, &headers, &uri).await?;
    let (content, version) = wopi::get_file(&state, &access).await?;
    let max = header_text(&headers, MAX_EXPECTED_SIZE).and_then(|v| v.parse::<u64>().ok());
    if max.is_some_and(|max| content.size > max) {
        return Ok(error_response(
            StatusCode::PRECONDITION_FAILED,
            codes::WOPI_TOO_LARGE,
            "the file is larger than X-WOPI-MaxExpectedSize",
        ));
    }
    // WOPI asks for the whole file: no ranges, no conditional answers.
    let plain = HeaderMap::new();
    let response = download::serve(content, &Method::GET, &plain).await?;
    Ok(with_header(response, ITEM_VERSION, &version))
}

/// WOPI PutFile (`X-WOPI-Override: PUT`): new content for a file locked with `X-WOPI-Lock`
/// (an unlocked file only while empty), streamed through the same write path as every other
/// content replacement. 409 with `X-WOPI-Lock` on a lock mismatch, 413 over `max_size`, 507
/// over the quota; answers the new `X-WOPI-ItemVersion`.
#[utoipa::path(post, path = "/wopi/files/{id}/contents", tag = "wopi", params(("id" = Uuid, Path), WopiQuery),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses(
        (status = 200, description = "Written; X-WOPI-ItemVersion is the new version"),
        (status = 401, description = "Access token missing, invalid, expired, for another file, revoked or view-only", body = ErrorBody),
        (status = 404, description = "No such file (or deleted)", body = ErrorBody),
        (status = 409, description = "Lock mismatch (X-WOPI-Lock: the current lock, empty when unlocked)", body = ErrorBody),
        (status = 413, description = "Larger than the policy's max_size", body = ErrorBody),
        (status = 501, description = "X-WOPI-Override is not PUT", body = ErrorBody),
        (status = 507, description = "Quota exceeded", body = ErrorBody),
    ))]
pub async fn put_file(
    State(state): State<Context>,
    ApiPath(id): ApiPath<ObjectId>,
    ApiQuery(query): ApiQuery<WopiQuery>,
    headers: HeaderMap,
    uri: Uri,
    body: Body,
) -> Response {
    let operation = header_text(&headers, OVERRIDE).unwrap_or_default().to_owned();
    if !operation.eq_ignore_ascii_case("PUT") {
        return not_supported(&format!("X-WOPI-Override {operation:?} on contents"));
    }
    let access = match authorise(&state, id, &query, &headers, &uri).await {
        Ok(access) => access,
        Err(err) => return err.into_response(),
    };
    let lock = header_text(&headers, LOCK);
    match wopi::put_file(&state, &access, lock, content_length(&headers), body_stream(body)).await {
        Ok(version) => ok(Some(&version)),
        Err(err) => refusal(err),
    }
}

/// WOPI operations on a file, chosen by `X-WOPI-Override`: `LOCK` (with `X-WOPI-OldLock`:
/// UnlockAndRelock), `GET_LOCK`, `REFRESH_LOCK`, `UNLOCK`, `PUT_RELATIVE`
/// (`X-WOPI-SuggestedTarget` or `X-WOPI-RelativeTarget` with `X-WOPI-OverwriteRelativeTarget`,
/// UTF-7), `RENAME_FILE` (`X-WOPI-RequestedName`, UTF-7) and `DELETE`. Locks live 30 minutes
/// unless refreshed, shared by every master; a mismatch answers 409 with the current lock in
/// `X-WOPI-Lock`.
#[utoipa::path(post, path = "/wopi/files/{id}", tag = "wopi", params(("id" = Uuid, Path), WopiQuery),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "PUT_RELATIVE: the new file's content"),
    responses(
        (status = 200, description = "Done (GET_LOCK: X-WOPI-Lock; PUT_RELATIVE: {Name, Url}; RENAME_FILE: {Name})", body = RelativeFile),
        (status = 400, description = "Missing or overlong X-WOPI-Lock, or an invalid name (X-WOPI-InvalidFileNameError)", body = ErrorBody),
        (status = 401, description = "Access token missing, invalid, expired, for another file, revoked or view-only", body = ErrorBody),
        (status = 404, description = "No such file (or deleted)", body = ErrorBody),
        (status = 409, description = "Lock mismatch (X-WOPI-Lock), or PUT_RELATIVE target exists (X-WOPI-ValidRelativeTarget)", body = ErrorBody),
        (status = 413, description = "PUT_RELATIVE larger than the policy's max_size", body = ErrorBody),
        (status = 501, description = "Unknown X-WOPI-Override", body = ErrorBody),
        (status = 507, description = "Quota exceeded", body = ErrorBody),
    ))]
pub async fn file_operation(
    State(state): State<Context>,
    ApiPath(id): ApiPath<ObjectId>,
    ApiQuery(query): ApiQuery<WopiQuery>,
    headers: HeaderMap,
    uri: Uri,
    body: Body,
) -> Response {
    let operation = header_text(&headers, OVERRIDE).unwrap_or_default().to_ascii_uppercase();
    if !matches!(
        operation.as_str(),
        "LOCK" | "GET_LOCK" | "REFRESH_LOCK" | "UNLOCK" | "PUT_RELATIVE" | "RENAME_FILE" | "DELETE"
    ) {
        return not_supported(&format!("X-WOPI-Override {operation:?}"));
    }
    let access = match authorise(&state, id, &query, &headers, &uri).await {
        Ok(access) => access,
        Err(err) => return err.into_response(),
    };
    let lock = header_text(&headers, LOCK);
    let version = wopi::version_of(access.file.row());
    let result = match operation.as_str() {
        "LOCK" => match header_text(&headers, OLD_LOCK) {
            Some(old) => wopi::unlock_and_relock(&state, &access, lock, old).await,
            None => wopi::lock(&state, &access, lock).await,
        }
        .map(|()| ok(Some(&version))),
        "GET_LOCK" => wopi::current_lock(&state, &access)
            .await
            .map(|current| with_header(ok(None), LOCK, &current.unwrap_or_default()))
            .map_err(WopiRefusal::from),
        "REFRESH_LOCK" => wopi::refresh_lock(&state, &access, lock).await.map(|()| ok(None)),
        "UNLOCK" => wopi::unlock(&state, &access, lock).await.map(|()| ok(Some(&version))),
        "PUT_RELATIVE" => put_relative(&state, &access, &headers, body).await,
        "RENAME_FILE" => match header_text(&headers, REQUESTED_NAME).and_then(wopi::decode_utf7) {
            Some(requested) => wopi::rename(&state, &access, lock, &requested)
                .await
                .map(|name| Json(serde_json::json!({ "Name": name })).into_response()),
            None => Err(WopiRefusal::InvalidName("X-WOPI-RequestedName is missing or not UTF-7".to_owned())),
        },
        _ => wopi::delete(&state, &access).await.map(|()| ok(None)),
    };
    result.unwrap_or_else(refusal)
}

async fn put_relative(
    state: &Context,
    access: &WopiAccess,
    headers: &HeaderMap,
    body: Body,
) -> wopi::WopiResult<Response> {
    let suggested = header_text(headers, SUGGESTED_TARGET);
    let relative = header_text(headers, RELATIVE_TARGET);
    let target = match (suggested, relative) {
        (Some(suggested), None) => wopi::decode_utf7(suggested).map(RelativeTarget::Suggested),
        (None, Some(relative)) => wopi::decode_utf7(relative).map(|name| RelativeTarget::Exact {
            name,
            overwrite: header_text(headers, OVERWRITE_RELATIVE_TARGET).is_some_and(|v| v.eq_ignore_ascii_case("true")),
        }),
        _ => {
            return Ok(not_supported(
                "PUT_RELATIVE needs exactly one of X-WOPI-SuggestedTarget and X-WOPI-RelativeTarget",
            ));
        }
    };
    let target = target.ok_or_else(|| WopiRefusal::InvalidName("the target name is not valid UTF-7".to_owned()))?;
    let declared = header_text(headers, WOPI_SIZE).and_then(|v| v.parse().ok()).or_else(|| content_length(headers));
    let base = site_base(state, headers).await?;
    let file: RelativeFile = wopi::put_relative(state, access, target, declared, body_stream(body), &base).await?;
    Ok(Json(file).into_response())
}

/// List the WOPI applications, with what their discovery offers and why its last fetch failed.
#[utoipa::path(get, path = "/admin/wopi", tag = "admin", security(("bearer" = [])),
    responses(
        (status = 200, description = "The applications, by name", body = Vec<WopiAppView>),
        (status = 403, description = "Not an administrator", body = ErrorBody),
    ))]
pub async fn admin_list(State(state): State<Context>, _: AdminRequired) -> ApiResult<Json<Vec<WopiAppView>>> {
    Ok(Json(wopi_apps::list(&state).await?))
}

/// Add a WOPI application (Collabora Online, OnlyOffice, Microsoft 365 for the web) by its
/// discovery URL. The discovery is fetched at once, through the SSRF guard unless `internal`
/// (an application on a private network); a discovery that cannot be fetched or read is
/// reported in `error` and the application is kept. Discovery is fetched again every 12 hours.
#[utoipa::path(post, path = "/admin/wopi", tag = "admin", security(("bearer" = [])),
    request_body = WopiAppInput,
    responses(
        (status = 201, description = "Added (see `error` for the discovery)", body = WopiAppView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 409, description = "The name is taken", body = ErrorBody),
        (status = 422, description = "Invalid name or URL", body = ErrorBody),
    ))]
pub async fn admin_create(
    State(state): State<Context>,
    _: AdminRequired,
    ApiJson(input): ApiJson<WopiAppInput>,
) -> ApiResult<(StatusCode, Json<WopiAppView>)> {
    Ok((StatusCode::CREATED, Json(wopi_apps::create(&state, input).await?)))
}

/// One WOPI application.
#[utoipa::path(get, path = "/admin/wopi/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The application", body = WopiAppView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such application", body = ErrorBody),
    ))]
pub async fn admin_get(
    State(state): State<Context>,
    _: AdminRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<WopiAppView>> {
    Ok(Json(wopi_apps::get(&state, id).await?))
}

/// Change a WOPI application (all fields); its discovery is fetched again.
#[utoipa::path(put, path = "/admin/wopi/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    request_body = WopiAppInput,
    responses(
        (status = 200, description = "Changed (see `error` for the discovery)", body = WopiAppView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such application", body = ErrorBody),
        (status = 409, description = "The name is taken", body = ErrorBody),
        (status = 422, description = "Invalid name or URL", body = ErrorBody),
    ))]
pub async fn admin_update(
    State(state): State<Context>,
    _: AdminRequired,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(input): ApiJson<WopiAppInput>,
) -> ApiResult<Json<WopiAppView>> {
    Ok(Json(wopi_apps::update(&state, id, input).await?))
}

/// Remove a WOPI application: sessions opened with it stop working (their requests' proof can
/// no longer be checked).
#[utoipa::path(delete, path = "/admin/wopi/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 204, description = "Removed"),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such application", body = ErrorBody),
    ))]
pub async fn admin_delete(
    State(state): State<Context>,
    _: AdminRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    wopi_apps::delete(&state, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Fetch a WOPI application's discovery now (after a key rotation, or to retry a failure).
#[utoipa::path(post, path = "/admin/wopi/{id}/refresh", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "Fetched (see `error`)", body = WopiAppView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such application", body = ErrorBody),
    ))]
pub async fn admin_refresh(
    State(state): State<Context>,
    _: AdminRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<WopiAppView>> {
    Ok(Json(wopi_apps::refresh(&state, id).await?))
}

/// Encodes `text` as UTF-7 (RFC 2152) for WOPI's name headers: printable ASCII stays as it is
/// (`+` as `+-`), anything else goes in base64 runs of UTF-16.
pub fn encode_utf7(text: &str) -> String {
    use base64::Engine;
    let engine = base64::engine::general_purpose::STANDARD_NO_PAD;
    let direct = |c: char| c.is_ascii() && !c.is_ascii_control() && c != '+' && c != '\\' && c != '~';
    let mut out = String::new();
    let mut run: Vec<u8> = Vec::new();
    let flush = |run: &mut Vec<u8>, out: &mut String| {
        if !run.is_empty() {
            out.push('+');
            out.push_str(&engine.encode(&run));
            out.push('-');
            run.clear();
        }
    };
    for c in text.chars() {
        if direct(c) {
            flush(&mut run, &mut out);
            out.push(c);
        } else if c == '+' {
            flush(&mut run, &mut out);
            out.push_str("+-");
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                run.extend_from_slice(&unit.to_be_bytes());
            }
        }
    }
    flush(&mut run, &mut out);
    out
}

/// The WOPI host's routes (absolute paths), with their operations. Bodies of the POSTs are
/// streams the services meter themselves: no JSON body limit.
pub fn host_routes() -> OpenApiRouter<Context> {
    OpenApiRouter::new()
        .routes(routes!(check_file_info))
        .routes(routes!(get_file))
        .routes(unlimited(routes!(file_operation)))
        .routes(unlimited(routes!(put_file)))
}

type DocumentedRoute = (
    Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>,
    utoipa::openapi::path::Paths,
    axum::routing::MethodRouter<Context>,
);

fn unlimited((schemas, paths, router): DocumentedRoute) -> DocumentedRoute {
    (schemas, paths, router.layer(DefaultBodyLimit::disable()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf7_round_trips_names() {
        for name in ["report.docx", "Prüfbericht (2).xlsx", "日本語.odt", "a+b.txt", "emoji 😀.md"] {
            let encoded = encode_utf7(name);
            assert!(encoded.is_ascii(), "{encoded}");
            assert_eq!(wopi::decode_utf7(&encoded).as_deref(), Some(name), "{encoded}");
        }
        assert_eq!(encode_utf7("a+b.txt"), "a+-b.txt");
    }
}
