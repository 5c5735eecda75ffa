//! The caller's tags at `/tag`: thin handlers over `service::tree::tags`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use uuid::Uuid;

use super::files::{IdsRequest, PageQuery};
use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::guard::AuthRequired;
use nubo_service::context::Context;
use nubo_service::tree::tags::{self, NewTag, TagChanges, TagView, TaggedObjectView};
use nubo_service::{Page, PageRequest};

/// The caller's tags, by name.
#[utoipa::path(get, path = "/tag", tag = "tags", security(("bearer" = [])),
    responses(
        (status = 200, description = "The tags", body = Vec<TagView>),
    ))]
pub async fn list(State(state): State<Context>, caller: AuthRequired) -> ApiResult<Json<Vec<TagView>>> {
    Ok(Json(tags::list(&state, caller.claims.sub).await?))
}

/// Create a tag. `type` `manual`: attach it with `PUT /tag/{id}/objects`. `type` `automatic`:
/// `rule` lists file-name globs separated by commas (`*.jpg, *.png`; `*` any run of
/// characters, `?` one character, letters in either case), and every file of the caller whose
/// name matches one carries the tag, current and future.
#[utoipa::path(post, path = "/tag", tag = "tags", security(("bearer" = [])), request_body = NewTag,
    responses(
        (status = 201, description = "The tag", body = TagView),
        (status = 409, description = "Name taken (`tag.name_taken`)", body = ErrorBody),
        (status = 422, description = "Invalid name, colour or rule", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<NewTag>,
) -> ApiResult<(StatusCode, Json<TagView>)> {
    Ok((StatusCode::CREATED, Json(tags::create(&state, caller.claims.sub, request).await?)))
}

/// One of the caller's tags.
#[utoipa::path(get, path = "/tag/{id}", tag = "tags", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The tag", body = TagView),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 404, description = "No such tag of the caller", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<TagView>> {
    Ok(Json(tags::get(&state, caller.claims.sub, id).await?))
}

/// Change a tag; absent fields stay. Turning it automatic drops its manual links.
#[utoipa::path(patch, path = "/tag/{id}", tag = "tags", security(("bearer" = [])), params(("id" = Uuid, Path)),
    request_body = TagChanges,
    responses(
        (status = 200, description = "The tag", body = TagView),
        (status = 404, description = "No such tag of the caller", body = ErrorBody),
        (status = 409, description = "Name taken", body = ErrorBody),
        (status = 422, description = "Invalid name, colour or rule", body = ErrorBody),
    ))]
pub async fn update(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(changes): ApiJson<TagChanges>,
) -> ApiResult<Json<TagView>> {
    Ok(Json(tags::update(&state, caller.claims.sub, id, changes).await?))
}

/// Delete a tag (its objects stay).
#[utoipa::path(delete, path = "/tag/{id}", tag = "tags", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 404, description = "No such tag of the caller", body = ErrorBody),
    ))]
pub async fn delete(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    tags::delete(&state, caller.claims.sub, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The caller's objects (not in the trash) carrying a tag, by name: those attached to a manual
/// tag, or the files an automatic tag's rule matches.
#[utoipa::path(get, path = "/tag/{id}/objects", tag = "tags", security(("bearer" = [])),
    params(("id" = Uuid, Path), PageQuery),
    responses(
        (status = 200, description = "One page of objects", body = Page<TaggedObjectView>),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 404, description = "No such tag of the caller", body = ErrorBody),
        (status = 422, description = "Paging out of range", body = ErrorBody),
    ))]
pub async fn objects(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<TaggedObjectView>>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    Ok(Json(tags::objects(&state, caller.claims.sub, id, page).await?))
}

/// Attach a manual tag to some of the caller's objects (already attached ones stay).
#[utoipa::path(put, path = "/tag/{id}/objects", tag = "tags", security(("bearer" = [])),
    params(("id" = Uuid, Path)), request_body = IdsRequest,
    responses(
        (status = 204, description = "Attached"),
        (status = 404, description = "No such tag or object of the caller", body = ErrorBody),
        (status = 409, description = "An automatic tag (`tag.automatic`)", body = ErrorBody),
        (status = 422, description = "No ids", body = ErrorBody),
    ))]
pub async fn attach(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(request): ApiJson<IdsRequest>,
) -> ApiResult<StatusCode> {
    tags::attach(&state, caller.claims.sub, id, &request.ids).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Detach a manual tag from some of the caller's objects.
#[utoipa::path(delete, path = "/tag/{id}/objects", tag = "tags", security(("bearer" = [])),
    params(("id" = Uuid, Path)), request_body = IdsRequest,
    responses(
        (status = 204, description = "Detached"),
        (status = 404, description = "No such tag or object of the caller", body = ErrorBody),
        (status = 409, description = "An automatic tag (`tag.automatic`)", body = ErrorBody),
        (status = 422, description = "No ids", body = ErrorBody),
    ))]
pub async fn detach(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(request): ApiJson<IdsRequest>,
) -> ApiResult<StatusCode> {
    tags::detach(&state, caller.claims.sub, id, &request.ids).await?;
    Ok(StatusCode::NO_CONTENT)
}
