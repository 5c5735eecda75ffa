//! The object tree: `/directory`, `/object`, `/trash`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use nubo_model::domain::ids::ObjectId;
use nubo_model::domain::object::ListOrder;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::guard::AuthRequired;
use nubo_service::context::Context;
use nubo_service::tasks::queue::{self, TaskView};
use nubo_service::tree::access::{self, Reach};
use nubo_service::tree::files::{self, DirectoryView, ObjectDetail, ObjectView, TreePage};
use nubo_service::{Page, PageRequest};

#[derive(Debug, Clone, Copy, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum OrderBy {
    #[default]
    Name,
    Size,
    CreatedAt,
    UpdatedAt,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Sort key; folders always come first. Inlined: parameters do not register their schemas as
    /// components, so a reference would dangle.
    #[param(inline)]
    pub order: Option<OrderBy>,
    #[serde(default)]
    pub desc: bool,
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    /// 1..=1000, default 50.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

async fn list(state: &Context, caller: &AuthRequired, path: &str, query: ListQuery) -> ApiResult<Json<DirectoryView>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    let order = match query.order.unwrap_or_default() {
        OrderBy::Name => ListOrder::Name,
        OrderBy::Size => ListOrder::Size,
        OrderBy::CreatedAt => ListOrder::CreatedAt,
        OrderBy::UpdatedAt => ListOrder::UpdatedAt,
    };
    Ok(Json(files::list_directory(state, caller.claims.sub, path, order, query.desc, page).await?))
}

/// List the caller's root folder.
#[utoipa::path(get, path = "/directory", tag = "files", security(("bearer" = [])), params(ListQuery),
    responses(
        (status = 200, description = "The folder and one page of its children, folders first", body = DirectoryView),
        (status = 400, description = "Unreadable query", body = ErrorBody),
        (status = 422, description = "Paging out of range", body = ErrorBody),
    ))]
pub async fn list_root(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> ApiResult<Json<DirectoryView>> {
    list(&state, &caller, "", query).await
}

/// List a folder by its path below the caller's root (`/api/v1/directory/photos/2026`).
#[utoipa::path(get, path = "/api/v1/directory/{path}", tag = "files", security(("bearer" = [])),
    params(("path" = String, Path, description = "Slash-separated folder path"), ListQuery),
    responses(
        (status = 200, description = "The folder and one page of its children, folders first", body = DirectoryView),
        (status = 400, description = "Unreadable query", body = ErrorBody),
        (status = 404, description = "No such folder", body = ErrorBody),
        (status = 409, description = "The path names a file", body = ErrorBody),
        (status = 422, description = "Invalid path or paging", body = ErrorBody),
    ))]
pub async fn list_path(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(path): ApiPath<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> ApiResult<Json<DirectoryView>> {
    list(&state, &caller, &path, query).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateFolderRequest {
    pub parent_id: Uuid,
    pub name: String,
}

/// Create a folder.
#[utoipa::path(post, path = "/directory", tag = "files", security(("bearer" = [])), request_body = CreateFolderRequest,
    responses(
        (status = 201, description = "Created", body = ObjectView),
        (status = 404, description = "No such parent folder", body = ErrorBody),
        (status = 409, description = "Name taken, or the parent is a file", body = ErrorBody),
        (status = 422, description = "Invalid name", body = ErrorBody),
    ))]
pub async fn create_folder(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<CreateFolderRequest>,
) -> ApiResult<(StatusCode, Json<ObjectView>)> {
    let parent = access::writable(&state, caller.claims.sub, request.parent_id.into(), Reach::Folder).await?;
    let folder = files::create_folder(&state, &parent, &request.name).await?;
    Ok((StatusCode::CREATED, Json(folder)))
}

/// An object's properties.
#[utoipa::path(get, path = "/object/{id}", tag = "files", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The object", body = ObjectView),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 404, description = "No such object (or not the caller's)", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<ObjectId>,
) -> ApiResult<Json<ObjectView>> {
    let object = access::readable(&state, caller.claims.sub, id, Reach::Any).await?;
    Ok(Json(files::get(&state, &object).await?))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameRequest {
    pub name: String,
}

/// Rename an object.
#[utoipa::path(patch, path = "/object/{id}", tag = "files", security(("bearer" = [])), params(("id" = Uuid, Path)),
    request_body = RenameRequest,
    responses(
        (status = 200, description = "Renamed", body = ObjectView),
        (status = 403, description = "The root cannot be renamed", body = ErrorBody),
        (status = 404, description = "No such object", body = ErrorBody),
        (status = 409, description = "Name taken", body = ErrorBody),
        (status = 422, description = "Invalid name", body = ErrorBody),
    ))]
pub async fn rename(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<ObjectId>,
    ApiJson(request): ApiJson<RenameRequest>,
) -> ApiResult<Json<ObjectView>> {
    let object = access::writable(&state, caller.claims.sub, id, Reach::Live).await?;
    Ok(Json(files::rename(&state, &object, &request.name).await?))
}

/// Size, counts, policy and hash of an object.
#[utoipa::path(get, path = "/object/{id}/detail", tag = "files", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "Details", body = ObjectDetail),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 404, description = "No such object", body = ErrorBody),
    ))]
pub async fn detail(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<ObjectId>,
) -> ApiResult<Json<ObjectDetail>> {
    let object = access::readable(&state, caller.claims.sub, id, Reach::Any).await?;
    Ok(Json(files::detail(&state, &object).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TreeQuery {
    /// The `next` of the previous page (an opaque token).
    pub after: Option<String>,
    /// Entries per page, 1 to 5000 (default 1000).
    #[param(minimum = 1, maximum = 5000)]
    pub limit: Option<i64>,
}

/// Everything below a folder in pages, for sync clients: every live file and folder with its
/// path below the folder, size, change time and content hash. The order: a folder's entries by
/// name, then each subfolder's tree the same way, so a folder comes before what it holds; a page
/// costs what it returns, and resumes after the path of the last entry of the page before (an
/// entry trashed or moved meanwhile does not shift the pages after it). Each page carries the change-event cursor taken before it was read;
/// follow `GET /events?since=` the first page's cursor to learn what changed during and after
/// the listing.
#[utoipa::path(get, path = "/object/{id}/tree", tag = "files", security(("bearer" = [])),
    params(("id" = Uuid, Path), TreeQuery),
    responses(
        (status = 200, description = "A page of the tree", body = TreePage),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 404, description = "No such folder", body = ErrorBody),
        (status = 422, description = "Not a folder, a bad `after` or `limit`", body = ErrorBody),
    ))]
pub async fn tree(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<ObjectId>,
    ApiQuery(query): ApiQuery<TreeQuery>,
) -> ApiResult<Json<TreePage>> {
    let folder = access::readable(&state, caller.claims.sub, id, Reach::Live).await?;
    Ok(Json(files::tree(&state, &folder, query.after.as_deref(), query.limit).await?))
}

/// Objects to move or copy, always a list, and the destination folder.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferRequest {
    #[schema(min_items = 1)]
    pub src_ids: Vec<Uuid>,
    pub dst_id: Uuid,
}

/// Move objects into a folder: all or none. Moving a folder into itself or its descendants is
/// refused (409), and so is a name taken in the destination.
#[utoipa::path(patch, path = "/object", tag = "files", security(("bearer" = [])), request_body = TransferRequest,
    responses(
        (status = 204, description = "Moved"),
        (status = 403, description = "The root cannot be moved", body = ErrorBody),
        (status = 404, description = "A source or the destination does not exist", body = ErrorBody),
        (status = 409, description = "Cycle, name taken, or the destination is a file", body = ErrorBody),
        (status = 422, description = "No source given", body = ErrorBody),
    ))]
pub async fn move_objects(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<TransferRequest>,
) -> ApiResult<StatusCode> {
    files::move_objects(&state, caller.claims.sub, &request.src_ids, request.dst_id.into()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Copy objects into a folder. Copies share their originals' blobs; the quota counts their size.
#[utoipa::path(post, path = "/object/copies", tag = "files", security(("bearer" = [])), request_body = TransferRequest,
    responses(
        (status = 201, description = "The copies", body = Vec<ObjectView>),
        (status = 404, description = "A source or the destination does not exist", body = ErrorBody),
        (status = 409, description = "Cycle or name taken", body = ErrorBody),
        (status = 507, description = "Quota exceeded", body = ErrorBody),
    ))]
pub async fn copy_objects(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<TransferRequest>,
) -> ApiResult<(StatusCode, Json<Vec<ObjectView>>)> {
    let copies = files::copy_objects(&state, caller.claims.sub, &request.src_ids, request.dst_id.into()).await?;
    Ok((StatusCode::CREATED, Json(copies)))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IdsRequest {
    #[schema(min_items = 1)]
    pub ids: Vec<Uuid>,
}

/// What a file must still hold to be trashed.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectedContent {
    pub id: Uuid,
    /// The file's content hash (hex) the caller saw.
    pub blake3: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TrashRequest {
    #[schema(min_items = 1)]
    pub ids: Vec<Uuid>,
    /// Only when nothing at or below any of the objects changed after this change-event cursor
    /// (a folder: nothing added, changed, moved in or renamed below it).
    #[schema(minimum = 0)]
    pub unchanged_since: Option<i64>,
    /// Only when each of these files still has this content.
    #[serde(default)]
    pub expect: Vec<ExpectedContent>,
}

/// Put objects in the trash (folders with their contents). With `unchanged_since` or `expect`,
/// only when they hold (else 409 `object.changed` and nothing is trashed): sync clients trash
/// from a plan made earlier, and a change made meanwhile must survive.
#[utoipa::path(delete, path = "/object", tag = "files", security(("bearer" = [])), request_body = TrashRequest,
    responses(
        (status = 204, description = "In the trash"),
        (status = 404, description = "No such object", body = ErrorBody),
        (status = 409, description = "A precondition does not hold: nothing was trashed", body = ErrorBody),
    ))]
pub async fn trash(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<TrashRequest>,
) -> ApiResult<StatusCode> {
    let precondition = files::TrashPrecondition {
        unchanged_since: request.unchanged_since,
        blake3: request.expect.into_iter().map(|e| (e.id, e.blake3)).collect(),
    };
    files::trash_if(&state, caller.claims.sub, &request.ids, &precondition).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// The caller's trash, most recently deleted first.
#[utoipa::path(get, path = "/trash", tag = "files", security(("bearer" = [])), params(PageQuery),
    responses(
        (status = 200, description = "Trashed objects", body = Page<ObjectView>),
        (status = 422, description = "Paging out of range", body = ErrorBody),
    ))]
pub async fn list_trash(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<ObjectView>>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    Ok(Json(files::list_trash(&state, caller.claims.sub, page).await?))
}

/// Restore objects from the trash to where they were.
#[utoipa::path(patch, path = "/trash/restore", tag = "files", security(("bearer" = [])), request_body = IdsRequest,
    responses(
        (status = 204, description = "Restored"),
        (status = 404, description = "Not in the trash", body = ErrorBody),
        (status = 409, description = "Name taken, or its folder is in the trash", body = ErrorBody),
    ))]
pub async fn restore(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<IdsRequest>,
) -> ApiResult<StatusCode> {
    files::restore(&state, caller.claims.sub, &request.ids).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Delete trashed objects for good; their space is released.
#[utoipa::path(delete, path = "/trash", tag = "files", security(("bearer" = [])), request_body = IdsRequest,
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "Not in the trash", body = ErrorBody),
        (status = 409, description = "An upload into the folder is in progress", body = ErrorBody),
    ))]
pub async fn purge(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<IdsRequest>,
) -> ApiResult<StatusCode> {
    files::purge(&state, caller.claims.sub, &request.ids).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangePolicyRequest {
    pub policy_id: Uuid,
}

/// Switch an object's storage policy: queues a `POLICY_MIGRATE` task that moves the file (or every
/// file below the folder) to the target policy in the background. The caller's group must be
/// allowed to use the target policy (403, and no task is created).
#[utoipa::path(patch, path = "/object/{id}/policy", tag = "files", security(("bearer" = [])), params(("id" = Uuid, Path)),
    request_body = ChangePolicyRequest,
    responses(
        (status = 202, description = "Migration queued", body = TaskView),
        (status = 403, description = "The caller's group may not use the target policy", body = ErrorBody),
        (status = 404, description = "No such object", body = ErrorBody),
    ))]
pub async fn change_policy(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<ObjectId>,
    ApiJson(request): ApiJson<ChangePolicyRequest>,
) -> ApiResult<(StatusCode, Json<TaskView>)> {
    let object = access::writable(&state, caller.claims.sub, id, Reach::Live).await?;
    let group_id = caller.user.group_id();
    let task = queue::create_migration(&state, caller.claims.sub, group_id, &object, request.policy_id).await?;
    Ok((StatusCode::ACCEPTED, Json(task)))
}
