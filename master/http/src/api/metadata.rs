//! `/object/{id}/metadata` and `/object/custom_property`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath};
use crate::guard::AuthRequired;
use nubo_model::domain::ids::ObjectId;
use nubo_service::context::Context;
use nubo_service::tree::access::{self, Reach};
use nubo_service::tree::metadata::{self, MetadataChange, MetadataEntry, PropertyInput, PropertyView};

/// An object's metadata, by namespace and name.
#[utoipa::path(get, path = "/object/{id}/metadata", tag = "files", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "Entries", body = Vec<MetadataEntry>),
        (status = 404, description = "No such object", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<ObjectId>,
) -> ApiResult<Json<Vec<MetadataEntry>>> {
    let object = access::readable(&state, caller.claims.sub, id, Reach::Any).await?;
    Ok(Json(metadata::get(&state, &object).await?))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MetadataPatch {
    pub changes: Vec<MetadataChange>,
}

/// Set or remove (value null) metadata entries, all or none. `sys` is read-only (403); `props`
/// values must fit the caller's custom property definitions.
#[utoipa::path(patch, path = "/object/{id}/metadata", tag = "files", security(("bearer" = [])), params(("id" = Uuid, Path)),
    request_body = MetadataPatch,
    responses(
        (status = 200, description = "The entries after the change", body = Vec<MetadataEntry>),
        (status = 403, description = "Read-only namespace", body = ErrorBody),
        (status = 404, description = "No such object", body = ErrorBody),
        (status = 422, description = "Invalid name, value or namespace", body = ErrorBody),
    ))]
pub async fn patch(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<ObjectId>,
    ApiJson(request): ApiJson<MetadataPatch>,
) -> ApiResult<Json<Vec<MetadataEntry>>> {
    let object = access::writable(&state, caller.claims.sub, id, Reach::Live).await?;
    Ok(Json(metadata::patch(&state, &object, &request.changes).await?))
}

/// The caller's custom property definitions.
#[utoipa::path(get, path = "/object/custom_property", tag = "files", security(("bearer" = [])),
    responses(
        (status = 200, description = "Definitions", body = Vec<PropertyView>),
    ))]
pub async fn list_properties(State(state): State<Context>, caller: AuthRequired) -> ApiResult<Json<Vec<PropertyView>>> {
    Ok(Json(metadata::list_properties(&state, caller.claims.sub).await?))
}

/// Define a custom property (type text, number, boolean, select or date; options; default).
#[utoipa::path(post, path = "/object/custom_property", tag = "files", security(("bearer" = [])), request_body = PropertyInput,
    responses(
        (status = 201, description = "Created", body = PropertyView),
        (status = 409, description = "Name taken", body = ErrorBody),
        (status = 422, description = "Invalid definition", body = ErrorBody),
    ))]
pub async fn create_property(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiJson(input): ApiJson<PropertyInput>,
) -> ApiResult<(StatusCode, Json<PropertyView>)> {
    Ok((StatusCode::CREATED, Json(metadata::create_property(&state, caller.claims.sub, input).await?)))
}

/// Change a custom property definition.
#[utoipa::path(patch, path = "/object/custom_property/{id}", tag = "files", security(("bearer" = [])),
    params(("id" = Uuid, Path)), request_body = PropertyInput,
    responses(
        (status = 200, description = "Updated", body = PropertyView),
        (status = 404, description = "No such property", body = ErrorBody),
        (status = 409, description = "Name taken", body = ErrorBody),
        (status = 422, description = "Invalid definition", body = ErrorBody),
    ))]
pub async fn update_property(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(input): ApiJson<PropertyInput>,
) -> ApiResult<Json<PropertyView>> {
    Ok(Json(metadata::update_property(&state, caller.claims.sub, id, input).await?))
}

/// Delete a custom property definition.
#[utoipa::path(delete, path = "/object/custom_property/{id}", tag = "files", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such property", body = ErrorBody),
    ))]
pub async fn delete_property(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    metadata::delete_property(&state, caller.claims.sub, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
