//! The caller's WebDAV accounts at `/webdav/accounts`: thin handlers over `service::identity::dav_accounts`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use uuid::Uuid;

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath};
use crate::guard::AuthRequired;
use nubo_service::context::Context;
use nubo_service::identity::dav_accounts::{
    self, NewWebdavAccount, WebdavAccountChanges, WebdavAccountCreated, WebdavAccountView,
};

/// List the caller's WebDAV accounts.
#[utoipa::path(get, path = "/webdav/accounts", tag = "webdav", security(("bearer" = [])),
    responses(
        (status = 200, description = "The accounts, by name", body = Vec<WebdavAccountView>),
    ))]
pub async fn list(State(state): State<Context>, caller: AuthRequired) -> ApiResult<Json<Vec<WebdavAccountView>>> {
    Ok(Json(dav_accounts::list(&state, caller.claims.sub).await?))
}

/// Create a WebDAV account. Without `password` the server generates one and answers it once
/// in `password`. Clients sign in to `/dav` with HTTP Basic as `{email}/{name}`.
#[utoipa::path(post, path = "/webdav/accounts", tag = "webdav", security(("bearer" = [])),
    request_body = NewWebdavAccount,
    responses(
        (status = 201, description = "Created", body = WebdavAccountCreated),
        (status = 403, description = "The group may not use WebDAV (`webdav.not_allowed`)", body = ErrorBody),
        (status = 409, description = "Name taken (`webdav.name_taken`)", body = ErrorBody),
        (status = 422, description = "Invalid name, password or root", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(request): ApiJson<NewWebdavAccount>,
) -> ApiResult<(StatusCode, Json<WebdavAccountCreated>)> {
    let created = dav_accounts::create(&state, caller.claims.sub, caller.user.group_id(), request).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// One WebDAV account.
#[utoipa::path(get, path = "/webdav/accounts/{id}", tag = "webdav", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The account", body = WebdavAccountView),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 404, description = "No such account of the caller", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<WebdavAccountView>> {
    Ok(Json(dav_accounts::get(&state, caller.claims.sub, id).await?))
}

/// Change a WebDAV account (absent fields stay). A cached `/dav` sign-in of the account is
/// dropped at once.
#[utoipa::path(patch, path = "/webdav/accounts/{id}", tag = "webdav", security(("bearer" = [])),
    params(("id" = Uuid, Path)), request_body = WebdavAccountChanges,
    responses(
        (status = 200, description = "Updated; `password` present when generated", body = WebdavAccountCreated),
        (status = 404, description = "No such account of the caller", body = ErrorBody),
        (status = 409, description = "Name taken", body = ErrorBody),
        (status = 422, description = "Invalid name, password or root", body = ErrorBody),
    ))]
pub async fn update(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(changes): ApiJson<WebdavAccountChanges>,
) -> ApiResult<Json<WebdavAccountCreated>> {
    Ok(Json(dav_accounts::update(&state, caller.claims.sub, id, changes).await?))
}

/// Delete a WebDAV account; its clients are refused from the next request on.
#[utoipa::path(delete, path = "/webdav/accounts/{id}", tag = "webdav", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 404, description = "No such account of the caller", body = ErrorBody),
    ))]
pub async fn delete(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    dav_accounts::delete(&state, caller.claims.sub, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
