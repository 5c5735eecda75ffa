//! Shares at `/share`: the owner's routes (bearer token), the visitor's (no account needed) and
//! the administrator's at `/admin/share`, thin handlers over `service::sharing::shares`. A visitor's
//! archive token (`/share/{code}/archive`) is used at `/file/archive/{token}`, in `archives`.

use axum::Json;
use axum::extract::{OriginalUri, State};
use axum::http::StatusCode;
use nubo_service::sharing::shares::ShareFilter;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::files::PageQuery;
use crate::captcha::ShareVisitor;
use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::guard::{AdminRequired, AuthRequired};
use nubo_model::domain::ids::ObjectId;
use nubo_service::content::archives::{self, ArchiveTokenView};
use nubo_service::content::downloads::{self, DownloadTokenView};
use nubo_service::content::media::{self, MediaUrlView};
use nubo_service::context::Context;
use nubo_service::sharing::shares::{
    self, AdminShareView, NewShare, PublicShareView, SaveShare, ShareChanges, ShareView, SharedFolderView,
};
use nubo_service::tree::files::ObjectView;
use nubo_service::{Page, PageRequest};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PasswordQuery {
    /// The share's password (the `X-Share-Password` header keeps it out of access logs).
    pub password: Option<String>,
}

/// Share one of the caller's files or folders. The answer carries the share's `code` (12
/// characters from `A-Z a-z 0-9 - _`, drawn from a CSPRNG) and its `url`.
#[utoipa::path(post, path = "/share", tag = "shares", security(("bearer" = [])), request_body = NewShare,
    responses(
        (status = 201, description = "The share", body = ShareView),
        (status = 403, description = "The group may not create shares (`share.not_allowed`)", body = ErrorBody),
        (status = 404, description = "No such object of the caller, or it is in the trash", body = ErrorBody),
        (status = 422, description = "Invalid password, expiry or limit", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<NewShare>,
) -> ApiResult<(StatusCode, Json<ShareView>)> {
    let share = shares::create(&state, caller.claims.sub, caller.user.group_id(), request).await?;
    Ok((StatusCode::CREATED, Json(share)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ShareListQuery {
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    /// Only the shares of this object (the web app's share dialog reopens an existing link
    /// instead of making another).
    pub object_id: Option<Uuid>,
}

/// The caller's shares, newest first, with their counters and state.
#[utoipa::path(get, path = "/share", tag = "shares", security(("bearer" = [])), params(ShareListQuery),
    responses(
        (status = 200, description = "One page of shares", body = Page<ShareView>),
        (status = 422, description = "Paging out of range", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiQuery(query): ApiQuery<ShareListQuery>,
) -> ApiResult<Json<Page<ShareView>>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    Ok(Json(shares::list(&state, caller.claims.sub, query.object_id.map(ObjectId::from), page).await?))
}

/// A share as visitors see it; no account needed. A password-protected share answers `locked`
/// with only its owner and expiry until its password comes (`X-Share-Password` or
/// `?password=`); the answer to a correct one carries a `grant` to send as `X-Share-Grant`
/// while browsing and downloading. Wrong passwords are limited per share and address (5) and
/// per share (50) in 15 minutes. Views count once per visitor (address and user agent) per 30
/// minutes. A share whose object is in the trash or deleted, or whose owner is banned or
/// inactive, answers 404 (its owner sees it in `GET /share` with `available: false`).
/// When the site's `share_password` scene has a captcha, every request carrying a password
/// carries the captcha's answer in `X-Captcha` too (here and on the other visitor routes).
#[utoipa::path(get, path = "/share/{code}", tag = "shares", params(("code" = String, Path), PasswordQuery,
        ("X-Share-Password" = Option<String>, Header, description = "The share's password"),
        ("X-Share-Grant" = Option<String>, Header, description = "A grant from an earlier answer"),
        ("X-Captcha" = Option<String>, Header, description = "The `share_password` captcha's answer, with a password")),
    responses(
        (status = 200, description = "The share", body = PublicShareView),
        (status = 401, description = "A grant that is invalid or expired", body = ErrorBody),
        (status = 403, description = "Wrong password (`share.password_wrong`), or a wrong captcha answer (`captcha.invalid`)", body = ErrorBody),
        (status = 422, description = "A password without the captcha's answer (`captcha.required`)", body = ErrorBody),
        (status = 502, description = "The captcha provider could not be reached (`captcha.unavailable`)", body = ErrorBody),
        (status = 404, description = "No such share, or not available (`share.not_found`)", body = ErrorBody),
        (status = 410, description = "Expired (`share.expired`) or out of downloads (`share.download_limit_reached`)", body = ErrorBody),
        (status = 429, description = "Too many wrong passwords (`share.rate_limited`)", body = ErrorBody),
    ))]
pub async fn public_view(
    State(state): State<Context>,
    ApiPath(code): ApiPath<String>,
    // Read by `ShareVisitor`; taken here so a malformed query answers 400.
    ApiQuery(_password): ApiQuery<PasswordQuery>,
    visitor: ShareVisitor,
) -> ApiResult<Json<PublicShareView>> {
    let visitor = visitor.visitor();
    Ok(Json(shares::public_view(&state, &code, &visitor).await?))
}

/// Change one of the caller's shares: an absent field stays, `null` removes the password,
/// expiry or download limit. A new password ends every grant of the old one.
#[utoipa::path(patch, path = "/share/{code}", tag = "shares", security(("bearer" = [])),
    params(("code" = String, Path)), request_body = ShareChanges,
    responses(
        (status = 200, description = "The changed share", body = ShareView),
        (status = 404, description = "No such share of the caller", body = ErrorBody),
        (status = 422, description = "Invalid password, expiry or limit", body = ErrorBody),
    ))]
pub async fn update(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(code): ApiPath<String>,
    ApiJson(changes): ApiJson<ShareChanges>,
) -> ApiResult<Json<ShareView>> {
    Ok(Json(shares::update(&state, caller.claims.sub, &code, changes).await?))
}

/// End one of the caller's shares.
#[utoipa::path(delete, path = "/share/{code}", tag = "shares", security(("bearer" = [])),
    params(("code" = String, Path)),
    responses(
        (status = 204, description = "Ended"),
        (status = 404, description = "No such share of the caller", body = ErrorBody),
    ))]
pub async fn delete(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(code): ApiPath<String>,
) -> ApiResult<StatusCode> {
    shares::delete(&state, caller.claims.sub, &code).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The shared folder's own entries (see `GET /share/{code}/children/{path}`).
#[utoipa::path(get, path = "/share/{code}/children", tag = "shares",
    params(("code" = String, Path), PageQuery,
        ("X-Share-Grant" = Option<String>, Header, description = "The share grant, for a password-protected share")),
    responses(
        (status = 200, description = "One page of the shared folder", body = SharedFolderView),
        (status = 401, description = "Password-protected and no valid grant (`share.password_required`)", body = ErrorBody),
        (status = 404, description = "No such share, or not available", body = ErrorBody),
        (status = 409, description = "The share is a file", body = ErrorBody),
        (status = 410, description = "Expired or out of downloads", body = ErrorBody),
        (status = 422, description = "Paging out of range", body = ErrorBody),
    ))]
pub async fn browse_root(
    State(state): State<Context>,
    ApiPath(code): ApiPath<String>,
    ApiQuery(query): ApiQuery<PageQuery>,
    visitor: ShareVisitor,
) -> ApiResult<Json<SharedFolderView>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    let visitor = visitor.visitor();
    Ok(Json(shares::browse(&state, &code, &visitor, ("", ""), page).await?))
}

/// A folder inside a shared folder, by its path below it (folders first, then by name). The
/// path stays inside the share: an empty, `.` or `..` segment, a backslash or an encoded
/// separator (`%2F`, `%5C`) answers 400 `share.path_invalid`.
#[utoipa::path(get, path = "/api/v1/share/{code}/children/{path}", tag = "shares",
    params(("code" = String, Path), ("path" = String, Path, description = "Names below the shared folder, joined by `/`"), PageQuery,
        ("X-Share-Grant" = Option<String>, Header, description = "The share grant, for a password-protected share")),
    responses(
        (status = 200, description = "One page of the folder", body = SharedFolderView),
        (status = 400, description = "A path that leaves the share (`share.path_invalid`)", body = ErrorBody),
        (status = 401, description = "Password-protected and no valid grant (`share.password_required`)", body = ErrorBody),
        (status = 404, description = "No such share or folder", body = ErrorBody),
        (status = 409, description = "The share or the path is a file", body = ErrorBody),
        (status = 410, description = "Expired or out of downloads", body = ErrorBody),
        (status = 422, description = "Paging out of range", body = ErrorBody),
    ))]
pub async fn browse(
    State(state): State<Context>,
    ApiPath((code, path)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<PageQuery>,
    OriginalUri(uri): OriginalUri,
    visitor: ShareVisitor,
) -> ApiResult<Json<SharedFolderView>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    let raw = uri.path().split_once("/children/").map_or("", |(_, raw)| raw);
    let visitor = visitor.visitor();
    Ok(Json(shares::browse(&state, &code, &visitor, (&path, raw), page).await?))
}

/// A single-use download token for a file of the share (the shared file, or one below the
/// shared folder), used like the owner's (`GET /file/download/{token}`, `Range` included).
/// Each download through it counts; the share's `max_downloads` is checked when it is used.
#[utoipa::path(post, path = "/share/{code}/download/{object_id}", tag = "shares",
    params(("code" = String, Path), ("object_id" = Uuid, Path),
        ("X-Share-Grant" = Option<String>, Header, description = "The share grant, for a password-protected share")),
    responses(
        (status = 200, description = "The token", body = DownloadTokenView),
        (status = 400, description = "Malformed object id", body = ErrorBody),
        (status = 401, description = "Password-protected and no valid grant (`share.password_required`)", body = ErrorBody),
        (status = 404, description = "No such share, or the object is not in it", body = ErrorBody),
        (status = 409, description = "The object is a folder", body = ErrorBody),
        (status = 410, description = "Expired or out of downloads", body = ErrorBody),
    ))]
pub async fn download(
    State(state): State<Context>,
    ApiPath((code, object_id)): ApiPath<(String, Uuid)>,
    visitor: ShareVisitor,
) -> ApiResult<Json<DownloadTokenView>> {
    let visitor = visitor.visitor();
    Ok(Json(downloads::share_download_token(&state, &code, &visitor, object_id.into()).await?))
}

/// A media URL for a file of the share, for its visitor's player (as `POST /file/media/{id}`
/// is for the owner): reusable for ranged reads for four hours. The share must allow previews
/// (`allow_preview`); making the URL counts one download, within `max_downloads`. Deleting the
/// share, its expiry, turning previews off or replacing the file's content end it.
#[utoipa::path(post, path = "/share/{code}/media/{object_id}", tag = "shares",
    params(("code" = String, Path), ("object_id" = Uuid, Path),
        ("X-Share-Grant" = Option<String>, Header, description = "The share grant, for a password-protected share")),
    responses(
        (status = 200, description = "The media URL", body = MediaUrlView),
        (status = 400, description = "Malformed object id", body = ErrorBody),
        (status = 401, description = "Password-protected and no valid grant (`share.password_required`)", body = ErrorBody),
        (status = 403, description = "The share does not allow previews (`share.preview_not_allowed`)", body = ErrorBody),
        (status = 404, description = "No such share, or the object is not in it", body = ErrorBody),
        (status = 409, description = "The object is a folder", body = ErrorBody),
        (status = 410, description = "Expired or out of downloads", body = ErrorBody),
    ))]
pub async fn media(
    State(state): State<Context>,
    ApiPath((code, object_id)): ApiPath<(String, Uuid)>,
    visitor: ShareVisitor,
) -> ApiResult<Json<MediaUrlView>> {
    let file = shares::preview_in(&state, &code, &visitor.visitor(), object_id.into()).await?;
    Ok(Json(media::create(&state, &file).await?))
}

/// What a visitor puts in an archive of a share.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShareArchiveRequest {
    /// Objects of the share (the shared object or anything below it); default: the shared
    /// object itself, that is all of the share.
    #[schema(min_items = 1, max_items = 1000)]
    pub ids: Option<Vec<Uuid>>,
}

/// A single-use token for a ZIP archive of the share, or of what the visitor chooses of it,
/// downloaded like the owner's (`GET /file/archive/{token}`). No account needed; a
/// password-protected share needs its grant. The archive counts as one download of the share
/// when it is fetched, and the share's `max_downloads` is checked then.
#[utoipa::path(post, path = "/share/{code}/archive", tag = "shares",
    params(("code" = String, Path),
        ("X-Share-Grant" = Option<String>, Header, description = "The share grant, for a password-protected share")),
    request_body = ShareArchiveRequest,
    responses(
        (status = 200, description = "The token", body = ArchiveTokenView),
        (status = 401, description = "Password-protected and no valid grant (`share.password_required`)", body = ErrorBody),
        (status = 404, description = "No such share, or an object not in it", body = ErrorBody),
        (status = 410, description = "Expired or out of downloads", body = ErrorBody),
        (status = 422, description = "An empty list of ids, or more than 1000", body = ErrorBody),
    ))]
pub async fn archive(
    State(state): State<Context>,
    ApiPath(code): ApiPath<String>,
    visitor: ShareVisitor,
    ApiJson(request): ApiJson<ShareArchiveRequest>,
) -> ApiResult<Json<ArchiveTokenView>> {
    let visitor = visitor.visitor();
    Ok(Json(archives::share_archive_token(&state, &code, &visitor, request.ids.as_deref()).await?))
}

/// Save what the caller chooses of a share (default: all of it) into one of their folders: the
/// copies share the stored blobs (nothing is copied byte by byte) and are charged to the
/// caller's quota in one transaction, 507 with nothing saved when they do not fit. The copies
/// stay in the storage policy their blobs are in. Needs the group permission `share_save`.
#[utoipa::path(post, path = "/share/{code}/save", tag = "shares", security(("bearer" = [])),
    params(("code" = String, Path),
        ("X-Share-Grant" = Option<String>, Header, description = "The share grant, for a password-protected share")),
    request_body = SaveShare,
    responses(
        (status = 200, description = "The copies, one per chosen object", body = Vec<ObjectView>),
        (status = 401, description = "Token missing or invalid, or the share's grant (`share.password_required`)", body = ErrorBody),
        (status = 403, description = "The group may not save shares (`share.save_not_allowed`)", body = ErrorBody),
        (status = 404, description = "No such share, an object not in it, or no such folder of the caller", body = ErrorBody),
        (status = 409, description = "A name taken in the folder, or the folder is a file", body = ErrorBody),
        (status = 410, description = "Expired or out of downloads", body = ErrorBody),
        (status = 422, description = "No objects chosen", body = ErrorBody),
        (status = 507, description = "Quota exceeded", body = ErrorBody),
    ))]
pub async fn save(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(code): ApiPath<String>,
    visitor: ShareVisitor,
    ApiJson(request): ApiJson<SaveShare>,
) -> ApiResult<Json<Vec<ObjectView>>> {
    let visitor = visitor.visitor();
    let who = (caller.claims.sub, caller.user.group_id());
    Ok(Json(shares::save(&state, who, &code, &visitor, request).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AdminShareQuery {
    /// Only this user's shares.
    pub owner_id: Option<Uuid>,
    /// Only shares of this object.
    pub object_id: Option<Uuid>,
    /// Only the share with this code.
    pub code: Option<String>,
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// Every user's shares, newest first, with filters (access level `admin_required`).
#[utoipa::path(get, path = "/admin/share", tag = "admin", security(("bearer" = [])), params(AdminShareQuery),
    responses(
        (status = 200, description = "One page of shares", body = Page<AdminShareView>),
        (status = 400, description = "Unreadable query", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 422, description = "Paging out of range", body = ErrorBody),
    ))]
pub async fn admin_list(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiQuery(query): ApiQuery<AdminShareQuery>,
) -> ApiResult<Json<Page<AdminShareView>>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    let filter = ShareFilter {
        owner_id: query.owner_id.map(Into::into),
        object_id: query.object_id.map(Into::into),
        code: query.code.as_deref().filter(|code| !code.is_empty()),
    };
    Ok(Json(shares::admin_list(&state, &filter, page).await?))
}

/// End any user's share (access level `admin_required`).
#[utoipa::path(delete, path = "/admin/share/{code}", tag = "admin", security(("bearer" = [])),
    params(("code" = String, Path)),
    responses(
        (status = 204, description = "Ended"),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such share", body = ErrorBody),
    ))]
pub async fn admin_delete(
    State(state): State<Context>,
    AdminRequired(admin): AdminRequired,
    ApiPath(code): ApiPath<String>,
) -> ApiResult<StatusCode> {
    shares::admin_delete(&state, admin.sub, &code).await?;
    Ok(StatusCode::NO_CONTENT)
}
