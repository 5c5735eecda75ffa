//! Bytes in and out: upload sessions and chunks (`/file/upload`), download tokens
//! (`/file/download`), media URLs (`/file/media`), content replacement (`/file/content`), source links (`/file/source`) and
//! external downloads (`/file/external_download`).
//! Bodies stream as raw bytes, never multipart and never collected whole.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::files::PageQuery;
use crate::download;
use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath, ApiQuery, body_stream, content_length};
use crate::guard::AuthRequired;
use nubo_model::domain::ids::{ObjectId, UploadId};
use nubo_service::content::downloads::{self, DownloadTokenView, SourceLinkView};
use nubo_service::content::external::{self, NewExternalDownload};
use nubo_service::content::media::{self, MediaUrlView};
use nubo_service::content::uploads::{self, NewUpload, PendingUploadView, SessionView};
use nubo_service::content::writes;
use nubo_service::context::Context;
use nubo_service::tasks::queue::TaskView;
use nubo_service::tree::access::{self, Reach};
use nubo_service::tree::files::ObjectView;
use nubo_service::{Page, PageRequest};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUploadRequest {
    pub file_name: String,
    /// Exact size in bytes (64-bit).
    pub file_size: i64,
    pub parent_id: Uuid,
    /// One of the caller's group's policies; default: the group's first.
    pub policy_id: Option<Uuid>,
    /// When a file of that name is in the folder, replace its content instead of answering 409:
    /// the upload goes to that file's policy, and on completion its current content becomes a
    /// version (when the owner's group keeps versions; otherwise it is released). A folder of
    /// that name still answers 409.
    #[serde(default)]
    pub overwrite: bool,
    /// The content's blake3, 64 hexadecimal digits, when the client knows it. When the caller
    /// already has a file (in the trash or not) with exactly this content on the target policy,
    /// the file is made at once from that content: the answer is complete (`object` set,
    /// `total_chunks` 0, an `id` that names no session) and no byte is sent; the quota is charged
    /// as for an upload. Otherwise a session opens as without it. Content of other users is never
    /// matched: a hash is no proof of holding their bytes.
    #[schema(pattern = "^[0-9a-fA-F]{64}$")]
    pub blake3: Option<String>,
    /// With `overwrite`: the blake3 of the content this upload replaces, for clients that must
    /// not overwrite a change they have not seen (sync clients). The file must have exactly that
    /// content when the session opens and again when it completes; otherwise 409
    /// `object.changed` (and, at completion, the session ends and its bytes are dropped).
    #[schema(pattern = "^[0-9a-fA-F]{64}$")]
    pub replaces_blake3: Option<String>,
}

/// Start an upload. Checks the caller may use the policy (403), its `max_size` (413), the name
/// (422, 409 when taken, unless `overwrite` names an existing file) and reserves `file_size` against the quota (507). A 0-byte file is
/// created at once (`object` in the answer). Sessions live 24 hours.
#[utoipa::path(post, path = "/file/upload", tag = "files", security(("bearer" = [])), request_body = CreateUploadRequest,
    responses(
        (status = 201, description = "Session created, or the file made at once from content held (`object` set)", body = SessionView),
        (status = 403, description = "Policy not allowed", body = ErrorBody),
        (status = 404, description = "No such folder", body = ErrorBody),
        (status = 409, description = "Name taken; or the file no longer has the content `replaces_blake3` names", body = ErrorBody),
        (status = 413, description = "Larger than the policy's max_size or than its storage can hold", body = ErrorBody),
        (status = 422, description = "Invalid name, size or blake3", body = ErrorBody),
        (status = 507, description = "Quota exceeded (checked before anything is staged)", body = ErrorBody),
    ))]
pub async fn create_upload(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<CreateUploadRequest>,
) -> ApiResult<(StatusCode, Json<SessionView>)> {
    let upload = NewUpload {
        file_name: request.file_name,
        file_size: request.file_size,
        parent_id: request.parent_id,
        policy_id: request.policy_id,
        overwrite: request.overwrite,
        blake3: request.blake3,
        replaces_blake3: request.replaces_blake3,
    };
    let session = uploads::create(&state, caller.claims.sub, caller.user.group_id(), upload).await?;
    Ok((StatusCode::CREATED, Json(session)))
}

/// The caller's uploads that have not finished, newest first: each holds its `file_size` of
/// the quota (`reserved` in `GET /user/storage`) until it completes, is cancelled (`DELETE
/// /file/upload/{id}`) or expires 24 hours after it began.
#[utoipa::path(get, path = "/file/upload", tag = "files", security(("bearer" = [])), params(PageQuery),
    responses(
        (status = 200, description = "One page of unfinished uploads", body = Page<PendingUploadView>),
        (status = 422, description = "Paging out of range", body = ErrorBody),
    ))]
pub async fn list_uploads(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<PendingUploadView>>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    Ok(Json(uploads::pending(&state, caller.claims.sub, page).await?))
}

/// Which chunks have arrived (to resume after a crash).
#[utoipa::path(get, path = "/file/upload/{id}", tag = "files", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The session", body = SessionView),
        (status = 404, description = "No such session", body = ErrorBody),
    ))]
pub async fn upload_status(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<UploadId>,
) -> ApiResult<Json<SessionView>> {
    Ok(Json(uploads::status(&state, caller.claims.sub, id).await?))
}

/// Send chunk `index` as the raw body; it must be exactly `chunk_size` bytes (the last one:
/// the rest). Idempotent; any order; in parallel. The last missing chunk completes the upload
/// and the answer carries the new `object`.
#[utoipa::path(put, path = "/file/upload/{id}/{index}", tag = "files", security(("bearer" = [])),
    params(("id" = Uuid, Path), ("index" = u32, Path)),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses(
        (status = 200, description = "Chunk stored (and the upload completed when it was the last)", body = SessionView),
        (status = 400, description = "Wrong chunk length, or the body broke off", body = ErrorBody),
        (status = 403, description = "At completion: the group may no longer use the session's policy", body = ErrorBody),
        (status = 404, description = "No such or expired session", body = ErrorBody),
        (status = 409, description = "Session being completed or cancelled; or the name was taken meanwhile, or the replaced file changed (`replaces_blake3`)", body = ErrorBody),
        (status = 413, description = "At completion: the policy's max_size was lowered below the file's size", body = ErrorBody),
        (status = 422, description = "Chunk index out of range", body = ErrorBody),
        (status = 503, description = "Storage unavailable", body = ErrorBody),
        (status = 507, description = "At completion: the quota shrank below the usage", body = ErrorBody),
    ))]
pub async fn put_chunk(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath((id, index)): ApiPath<(UploadId, u32)>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<SessionView>> {
    let session =
        uploads::put_chunk(&state, caller.claims.sub, id, index, content_length(&headers), body_stream(body)).await?;
    Ok(Json(session))
}

/// Complete an upload whose chunks have all arrived (normally the last chunk does this).
#[utoipa::path(post, path = "/file/upload/{id}/complete", tag = "files", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "Completed", body = SessionView),
        (status = 403, description = "The group may no longer use the session's policy", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 409, description = "Chunks missing, or already being completed; or the replaced file changed (`replaces_blake3`)", body = ErrorBody),
        (status = 413, description = "The policy's max_size was lowered below the file's size", body = ErrorBody),
        (status = 507, description = "The quota shrank below the usage", body = ErrorBody)
    ))]
pub async fn complete_upload(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<UploadId>,
) -> ApiResult<Json<SessionView>> {
    Ok(Json(uploads::complete(&state, caller.claims.sub, id).await?))
}

/// Cancel an upload; its reserved space and staged bytes are released.
#[utoipa::path(delete, path = "/file/upload/{id}", tag = "files", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 204, description = "Cancelled"),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 409, description = "Already being completed", body = ErrorBody),
    ))]
pub async fn abort_upload(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<UploadId>,
) -> ApiResult<StatusCode> {
    uploads::abort(&state, caller.claims.sub, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Create a single-use download token for a file (valid for one hour).
#[utoipa::path(post, path = "/file/download/{id}", tag = "files", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The file's id")),
    responses(
        (status = 200, description = "Token and URL", body = DownloadTokenView),
        (status = 404, description = "No such file", body = ErrorBody),
        (status = 409, description = "The object is a folder", body = ErrorBody),
    ))]
pub async fn create_download(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<ObjectId>,
) -> ApiResult<Json<DownloadTokenView>> {
    let file = access::readable(&state, caller.claims.sub, id, Reach::Live).await?;
    Ok(Json(downloads::create_download_token(&state, &file).await?))
}

/// Download with a token from `POST /file/download/{id}`; the token works once (`HEAD` does not
/// use it up). Supports one `Range` (206, 416), `ETag`/`If-None-Match`, `Last-Modified`. Files
/// of a public policy (`is_private` false) answer 302: to a presigned URL (S3), a signed node
/// URL (storage nodes) or, on local disk, a signed `/api/v1/file/blob/{token}` of this master,
/// each valid 15 minutes and used without the caller's token. Files are served with
/// `X-Content-Type-Options: nosniff` and a sandboxing CSP, and script types (JavaScript,
/// WebAssembly) as `text/plain; charset=utf-8`, so no page of this origin can run a user's file.
#[utoipa::path(get, path = "/file/download/{id}", tag = "files",
    params(("id" = String, Path, description = "The download token")),
    responses(
        (status = 200, description = "The file", content_type = "application/octet-stream"),
        (status = 206, description = "The requested range"),
        (status = 302, description = "Redirect to the storage service"),
        (status = 304, description = "Not modified"),
        (status = 401, description = "Invalid or expired token", body = ErrorBody),
        (status = 404, description = "The file is gone", body = ErrorBody),
        (status = 409, description = "Token already used", body = ErrorBody),
        (status = 416, description = "Range not satisfiable", body = ErrorBody),
    ))]
pub async fn download(
    State(state): State<Context>,
    ApiPath(token): ApiPath<String>,
    method: Method,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let file = downloads::open_download(&state, &token, method != Method::HEAD).await?;
    download::serve(file, &method, &headers).await
}

/// A media URL for a file: signed, reusable for every ranged `GET` a player makes while it
/// seeks, valid four hours, for the caller alone. It is a separate credential from the
/// download token, which stays single-use. Each request through it is checked again: a ban,
/// "sign out everywhere", the file trashed or its content replaced (410
/// `media.content_changed`) end it at once.
#[utoipa::path(post, path = "/file/media/{id}", tag = "files", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The file's id")),
    responses(
        (status = 200, description = "The media URL", body = MediaUrlView),
        (status = 404, description = "No such file", body = ErrorBody),
        (status = 409, description = "The object is a folder", body = ErrorBody),
    ))]
pub async fn create_media(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<ObjectId>,
) -> ApiResult<Json<MediaUrlView>> {
    let file = access::readable(&state, caller.claims.sub, id, Reach::Live).await?;
    Ok(Json(media::create(&state, &file).await?))
}

/// Read a file through a media URL from `POST /file/media/{id}` or `POST
/// /share/{code}/media/{object_id}`, as often as needed until it expires: one `Range` per
/// request (206, 416), `HEAD`, `ETag`/`If-None-Match`, served like a download (the same
/// `nosniff` and sandboxing CSP; a public policy answers 302 to its presigned or signed URL).
#[utoipa::path(get, path = "/file/media/{id}", tag = "files",
    params(("id" = String, Path, description = "The media URL's token")),
    responses(
        (status = 200, description = "The file", content_type = "application/octet-stream"),
        (status = 206, description = "The requested range"),
        (status = 302, description = "Redirect to the storage service"),
        (status = 304, description = "Not modified"),
        (status = 401, description = "Invalid, expired or revoked (`auth.token_revoked`)", body = ErrorBody),
        (status = 403, description = "The share no longer allows previews", body = ErrorBody),
        (status = 404, description = "The file is gone, or no longer in the share", body = ErrorBody),
        (status = 410, description = "The content changed (`media.content_changed`), or the share expired", body = ErrorBody),
        (status = 416, description = "Range not satisfiable", body = ErrorBody),
    ))]
pub async fn media(
    State(state): State<Context>,
    ApiPath(token): ApiPath<String>,
    method: Method,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let file = media::open(&state, &token).await?;
    download::serve(file, &method, &headers).await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ContentQuery {
    /// The file whose content is replaced.
    pub id: Uuid,
}

/// Replace a file's content with the raw body. `max_size` answers 413 with nothing changed; the
/// quota is settled by the difference (507 when it does not fit); the old content is released.
/// Of two replacements that overlap, the first to finish wins and the other answers 409
/// `object.changed` (send it again).
#[utoipa::path(patch, path = "/file/content", tag = "files", security(("bearer" = [])), params(ContentQuery),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses(
        (status = 200, description = "The file with its new size", body = ObjectView),
        (status = 400, description = "The body broke off", body = ErrorBody),
        (status = 404, description = "No such file", body = ErrorBody),
        (status = 409, description = "The object is a folder, or another write changed or removed the file while the body arrived (`object.changed`)", body = ErrorBody),
        (status = 413, description = "Larger than the policy's max_size", body = ErrorBody),
        (status = 507, description = "Quota exceeded", body = ErrorBody),
    ))]
pub async fn replace_content(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiQuery(query): ApiQuery<ContentQuery>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<ObjectView>> {
    let object = writes::replace_content(
        &state,
        caller.claims.sub,
        query.id.into(),
        content_length(&headers),
        body_stream(body),
    )
    .await?;
    Ok(Json(object))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NewContentQuery {
    /// The folder the file is created in.
    pub parent_id: Uuid,
    /// The new file's name (1-255 characters; no `/`, no control or direction characters).
    pub name: String,
}

/// Create a file from the raw body in one request: the cheapest way to store a small file (one
/// request and one commit, where an upload session takes two requests). The file goes to the
/// policy of the caller's group for new files. The body streams; `max_size` answers 413 and
/// the quota 507, before any byte is read when `Content-Length` says so, else as the bytes
/// arrive, and a refused or broken-off body leaves nothing behind. A name already taken in the
/// folder answers 409 before any byte is stored. Not resumable: for large files, or to choose
/// the policy, use an upload session (`POST /file/upload`).
#[utoipa::path(post, path = "/file/content", tag = "files", security(("bearer" = [])), params(NewContentQuery),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses(
        (status = 201, description = "The new file", body = ObjectView),
        (status = 400, description = "The body broke off", body = ErrorBody),
        (status = 403, description = "The group may not use any policy", body = ErrorBody),
        (status = 404, description = "No such folder", body = ErrorBody),
        (status = 409, description = "The name is taken in the folder, or the parent is a file", body = ErrorBody),
        (status = 413, description = "Larger than the policy's max_size", body = ErrorBody),
        (status = 422, description = "Invalid name", body = ErrorBody),
        (status = 507, description = "Quota exceeded", body = ErrorBody),
    ))]
pub async fn create_content(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiQuery(query): ApiQuery<NewContentQuery>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<ObjectView>)> {
    let target = (query.parent_id.into(), query.name.as_str());
    let group = caller.user.group_id();
    let created =
        writes::create_file(&state, caller.claims.sub, group, target, content_length(&headers), body_stream(body))
            .await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// Create (or return) a file's permanent source link.
#[utoipa::path(post, path = "/file/source/{id}", tag = "files", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The link", body = SourceLinkView),
        (status = 404, description = "No such file", body = ErrorBody),
        (status = 409, description = "The object is a folder", body = ErrorBody),
    ))]
pub async fn create_source(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<ObjectId>,
) -> ApiResult<Json<SourceLinkView>> {
    let file = access::writable(&state, caller.claims.sub, id, Reach::Live).await?;
    Ok(Json(downloads::create_source_link(&state, &file).await?))
}

/// Read a file's source link.
#[utoipa::path(get, path = "/file/source/{id}", tag = "files", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The link", body = SourceLinkView),
        (status = 404, description = "No such file or no link", body = ErrorBody),
    ))]
pub async fn get_source(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<ObjectId>,
) -> ApiResult<Json<SourceLinkView>> {
    let file = access::readable(&state, caller.claims.sub, id, Reach::Any).await?;
    Ok(Json(downloads::source_link(&state, &file).await?))
}

/// Public source link: streams the file when its policy is private, otherwise answers 302 to
/// a URL valid 15 minutes: the storage service's (S3, a storage node) or, on local disk, a
/// signed `/api/v1/file/blob/{token}` of this master. Script types are served as
/// `text/plain; charset=utf-8` with `nosniff`, so the file cannot run as a script of this origin.
#[utoipa::path(get, path = "/file/source/{id}/{name}", tag = "files", params(("id" = Uuid, Path), ("name" = String, Path)),
    responses(
        (status = 200, description = "The file", content_type = "application/octet-stream"),
        (status = 206, description = "The requested range"),
        (status = 302, description = "Redirect to the storage service"),
        (status = 404, description = "No such link", body = ErrorBody),
        (status = 416, description = "Range not satisfiable", body = ErrorBody),
    ))]
pub async fn serve_source(
    State(state): State<Context>,
    ApiPath((id, name)): ApiPath<(ObjectId, String)>,
    method: Method,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let file = downloads::open_source(&state, id, &name).await?;
    download::serve(file, &method, &headers).await
}

/// The target of a public local policy's download redirect: the file's bytes for whoever holds
/// the signed URL, without a bearer token, reusable until it expires (15 minutes after the
/// redirect). The same headers, `Range` and `ETag` handling as a download.
#[utoipa::path(get, path = "/file/blob/{token}", tag = "files",
    params(("token" = String, Path, description = "The signed token a redirect named")),
    responses(
        (status = 200, description = "The file", content_type = "application/octet-stream"),
        (status = 206, description = "The requested range"),
        (status = 304, description = "Not modified"),
        (status = 401, description = "Invalid or expired signed URL", body = ErrorBody),
        (status = 404, description = "The file is gone", body = ErrorBody),
        (status = 416, description = "Range not satisfiable", body = ErrorBody),
    ))]
pub async fn serve_blob(
    State(state): State<Context>,
    ApiPath(token): ApiPath<String>,
    method: Method,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let file = downloads::open_signed_blob(&state, &token).await?;
    download::serve(file, &method, &headers).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExternalDownloadRequest {
    /// An `http` or `https` URL without credentials, at most 2048 characters.
    pub url: String,
    /// The folder the file appears in.
    pub parent_id: Uuid,
    /// The storage node that fetches: one of the caller's policies must be bound to it.
    /// Default: the node of the caller's first node-backed policy.
    pub node_id: Option<Uuid>,
}

/// Fetch a URL into a folder, in the background. Answers the queued `EXTERNAL_DOWNLOAD` task
/// (follow it with `GET /task/{id}`, stop it with `DELETE /task/{id}`). A storage node fetches:
/// it refuses private, loopback, link-local and metadata addresses after DNS resolution and on
/// every redirect unless its configuration allows them, stops at the smaller of the policy's
/// `max_size` and the caller's free quota, and at its time limit. The file takes the name the
/// remote suggests (or the URL's last segment), with ` (n)` added when the name is taken. A
/// failed or cancelled fetch leaves no file and uses no quota; the task's `error` says why.
#[utoipa::path(post, path = "/file/external_download", tag = "files", security(("bearer" = [])),
    request_body = ExternalDownloadRequest,
    responses(
        (status = 202, description = "Task queued", body = TaskView),
        (status = 404, description = "No such folder", body = ErrorBody),
        (status = 422, description = "Invalid URL, or no node-backed policy (on that node)", body = ErrorBody),
    ))]
pub async fn create_external_download(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<ExternalDownloadRequest>,
) -> ApiResult<(StatusCode, Json<TaskView>)> {
    let request = NewExternalDownload { url: request.url, parent_id: request.parent_id, node_id: request.node_id };
    let task = external::create(&state, caller.claims.sub, caller.user.group_id(), request).await?;
    Ok((StatusCode::ACCEPTED, Json(task)))
}
