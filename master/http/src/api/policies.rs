//! Storage policies: administrators' `/admin/policy` and the caller's `/user/settings/policies`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use nubo_model::domain::ids::PolicyId;
use nubo_model::domain::policy::PolicyType;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath};
use crate::guard::{AdminRequired, AuthRequired};
use nubo_service::context::Context;
use nubo_service::storage::policies::{self, PolicyInput, PolicySummary, PolicyView};

/// The storage policies the caller's group may use, in order (the first is the default).
#[utoipa::path(get, path = "/user/settings/policies", tag = "user", security(("bearer" = [])),
    responses(
        (status = 200, description = "Policies", body = Vec<PolicySummary>),
    ))]
pub async fn mine(State(state): State<Context>, caller: AuthRequired) -> ApiResult<Json<Vec<PolicySummary>>> {
    Ok(Json(policies::of_group(&state, caller.user.group_id()).await?))
}

/// A policy as written. `options` is `LocalOptions` (`{root, durable}`) or `S3Options` (`{endpoint,
/// region, bucket, path_style, access_key, secret_key, prefix}`); on update a blank
/// `secret_key` keeps the stored one.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyRequest {
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    #[serde(rename = "type")]
    pub kind: PolicyType,
    /// Largest file in bytes; 0 = no limit.
    #[serde(default)]
    pub max_size: i64,
    #[serde(default = "default_private")]
    pub is_private: bool,
    /// A power of two; default 8 MiB.
    pub chunk_size: Option<i64>,
    #[serde(default)]
    pub options: serde_json::Value,
    /// Template with `{uid}`, `{uuid}`, `{randomkey8}`, `{randomkey16}`, `{date}`, `{timestamp}`,
    /// `{year}`, `{month}`, `{day}`, `{hour}`, `{minute}`, `{originname}`, `{ext}`.
    pub dir_name_rule: Option<String>,
    pub file_name_rule: Option<String>,
    /// Binds a `local` policy to a storage node: files live on that node's disk, clients upload
    /// their chunks to the node directly, and public downloads redirect to a signed node URL.
    /// The `root` option is then not used (a node keeps blobs under its own data directory).
    /// Cannot change while the policy stores files.
    pub node_id: Option<uuid::Uuid>,
}

fn default_private() -> bool {
    true
}

impl From<PolicyRequest> for PolicyInput {
    fn from(r: PolicyRequest) -> Self {
        PolicyInput {
            name: r.name,
            kind: r.kind,
            max_size: r.max_size,
            is_private: r.is_private,
            chunk_size: r.chunk_size,
            options: if r.options.is_null() { serde_json::json!({}) } else { r.options },
            dir_name_rule: r.dir_name_rule,
            file_name_rule: r.file_name_rule,
            node_id: r.node_id,
        }
    }
}

/// List policies (secrets never included).
#[utoipa::path(get, path = "/admin/policy", tag = "admin", security(("bearer" = [])),
    responses(
        (status = 200, description = "Policies", body = Vec<PolicyView>),
        (status = 403, description = "Not an administrator", body = ErrorBody),
    ))]
pub async fn list(State(state): State<Context>, _admin: AdminRequired) -> ApiResult<Json<Vec<PolicyView>>> {
    Ok(Json(policies::list(&state).await?))
}

/// Create a policy.
#[utoipa::path(post, path = "/admin/policy", tag = "admin", security(("bearer" = [])), request_body = PolicyRequest,
    responses(
        (status = 201, description = "Created", body = PolicyView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 409, description = "Name taken", body = ErrorBody),
        (status = 422, description = "Invalid field", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<Context>,
    AdminRequired(admin): AdminRequired,
    ApiJson(request): ApiJson<PolicyRequest>,
) -> ApiResult<(StatusCode, Json<PolicyView>)> {
    Ok((StatusCode::CREATED, Json(policies::create(&state, admin.sub, request.into()).await?)))
}

/// One policy.
#[utoipa::path(get, path = "/admin/policy/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 200, description = "The policy", body = PolicyView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such policy", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<PolicyId>,
) -> ApiResult<Json<PolicyView>> {
    Ok(Json(policies::view(&policies::find(&state, id).await?)?))
}

/// Replace a policy's settings.
#[utoipa::path(put, path = "/admin/policy/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    request_body = PolicyRequest,
    responses(
        (status = 200, description = "Updated", body = PolicyView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such policy", body = ErrorBody),
        (status = 409, description = "Name taken, or type change of a policy in use", body = ErrorBody),
        (status = 422, description = "Invalid field", body = ErrorBody),
    ))]
pub async fn update(
    State(state): State<Context>,
    AdminRequired(admin): AdminRequired,
    ApiPath(id): ApiPath<PolicyId>,
    ApiJson(request): ApiJson<PolicyRequest>,
) -> ApiResult<Json<PolicyView>> {
    Ok(Json(policies::update(&state, admin.sub, id, request.into()).await?))
}

/// Delete a policy no group, file or upload uses.
#[utoipa::path(delete, path = "/admin/policy/{id}", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such policy", body = ErrorBody),
        (status = 409, description = "In use", body = ErrorBody),
    ))]
pub async fn delete(
    State(state): State<Context>,
    AdminRequired(admin): AdminRequired,
    ApiPath(id): ApiPath<PolicyId>,
) -> ApiResult<StatusCode> {
    policies::delete(&state, admin.sub, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Test a policy's storage: write, read back and delete a probe.
#[utoipa::path(post, path = "/admin/policy/{id}/test", tag = "admin", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses(
        (status = 204, description = "The storage works"),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such policy", body = ErrorBody),
        (status = 502, description = "The storage answered with an error", body = ErrorBody),
        (status = 503, description = "The storage is unreachable", body = ErrorBody),
    ))]
pub async fn test(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<PolicyId>,
) -> ApiResult<StatusCode> {
    policies::test(&state, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
