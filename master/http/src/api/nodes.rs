//! `/admin/node`: the storage nodes registry and the signed connection check.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use nubo_common::secret::Secret;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath};
use crate::guard::AdminRequired;
use nubo_model::domain::ids::NodeId;
use nubo_service::context::Context;
use nubo_service::storage::nodes::{self, NodeCheck, NodeInput, NodeView};

/// A node as written. `key` is the secret shared with the node (at least 32 bytes); it is never
/// returned, and leaving it out on update keeps the stored one.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeRequest {
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    /// Where the node listens, e.g. `http://10.0.0.5:5213`.
    pub base_url: String,
    #[schema(value_type = Option<String>, format = Password)]
    pub key: Option<Secret>,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
}

fn enabled_by_default() -> bool {
    true
}

impl From<NodeRequest> for NodeInput {
    fn from(r: NodeRequest) -> Self {
        NodeInput { name: r.name, base_url: r.base_url, key: r.key, enabled: r.enabled }
    }
}

/// List storage nodes with their status, last heartbeat and free space.
#[utoipa::path(get, path = "/admin/node", tag = "admin", security(("bearer" = [])),
    responses(
        (status = 200, description = "Nodes", body = Vec<NodeView>),
        (status = 403, description = "Not an administrator", body = ErrorBody),
    ))]
pub async fn list(State(state): State<Context>, _admin: AdminRequired) -> ApiResult<Json<Vec<NodeView>>> {
    Ok(Json(nodes::list(&state).await?))
}

/// Add a storage node.
#[utoipa::path(post, path = "/admin/node", tag = "admin", security(("bearer" = [])), request_body = NodeRequest,
    responses(
        (status = 201, description = "Added", body = NodeView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 409, description = "Name taken", body = ErrorBody),
        (status = 422, description = "Invalid name, URL or key", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiJson(request): ApiJson<NodeRequest>,
) -> ApiResult<(StatusCode, Json<NodeView>)> {
    Ok((StatusCode::CREATED, Json(nodes::create(&state, request.into()).await?)))
}

/// One node.
#[utoipa::path(get, path = "/admin/node/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The node", body = NodeView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such node", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<NodeId>,
) -> ApiResult<Json<NodeView>> {
    Ok(Json(nodes::get(&state, id).await?))
}

/// Change a node (disable it with `enabled: false`).
#[utoipa::path(put, path = "/admin/node/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    request_body = NodeRequest,
    responses(
        (status = 200, description = "Updated", body = NodeView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such node", body = ErrorBody),
        (status = 409, description = "Name taken", body = ErrorBody),
        (status = 422, description = "Invalid name, URL or key", body = ErrorBody),
    ))]
pub async fn update(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<NodeId>,
    ApiJson(request): ApiJson<NodeRequest>,
) -> ApiResult<Json<NodeView>> {
    Ok(Json(nodes::update(&state, id, request.into()).await?))
}

/// Remove a node; refused while storage policies keep files on it.
#[utoipa::path(delete, path = "/admin/node/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 204, description = "Removed"),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such node", body = ErrorBody),
        (status = 409, description = "Policies use the node", body = ErrorBody),
    ))]
pub async fn delete(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<NodeId>,
) -> ApiResult<StatusCode> {
    nodes::delete(&state, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Check a node with a signed `ping`; its status, heartbeat and free space are updated.
#[utoipa::path(post, path = "/admin/node/{id}/test", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The node answered", body = NodeCheck),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such node", body = ErrorBody),
        (status = 502, description = "The node refused (wrong key, incompatible version) or answered nonsense", body = ErrorBody),
        (status = 503, description = "The node does not answer", body = ErrorBody),
    ))]
pub async fn test(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<NodeId>,
) -> ApiResult<Json<NodeCheck>> {
    Ok(Json(nodes::check(&state, id).await?))
}
