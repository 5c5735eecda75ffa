//! `/user/redeem` (redeem a code) and `/admin/redeem` (generate, list, disable, delete codes).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::captcha::{CaptchaAnswer, CaptchaJson, scene};
use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath, ApiQuery, ClientAddress};
use crate::guard::{AdminRequired, AuthRequired};
use nubo_service::capacity::redeem::{self, BatchRequest, BatchView, CodeKind, CodeView, RedeemedView};
use nubo_service::context::Context;
use nubo_service::{Page, PageRequest};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedeemRequest {
    /// The code as handed out; case, spaces and dashes do not matter.
    pub code: String,
    /// The answer to the `redeem` scene's captcha, when the site has one.
    pub captcha: Option<String>,
}

impl CaptchaAnswer for RedeemRequest {
    fn captcha(&self) -> Option<&str> {
        self.captcha.as_deref()
    }
}

/// Redeem a code: a storage pack, or a temporary group (the caller's access token is then
/// stale: refresh it). One use per user per code; wrong codes count against a budget per user
/// and per address.
#[utoipa::path(post, path = "/user/redeem", tag = "user", security(("bearer" = [])), request_body = RedeemRequest,
    responses(
        (status = 200, description = "What the code gave", body = RedeemedView),
        (status = 403, description = "Account not active, or a wrong captcha answer (`captcha.invalid`)", body = ErrorBody),
        (status = 404, description = "No such code, or disabled or expired (`redeem.invalid_code`)", body = ErrorBody),
        (status = 409, description = "Used up (`redeem.used_up`), redeemed before by the caller (`redeem.already_used`), or a group code that does not apply now (`redeem.not_applicable`)", body = ErrorBody),
        (status = 422, description = "No captcha answer (`captcha.required`)", body = ErrorBody),
        (status = 429, description = "Too many wrong codes (`redeem.rate_limited`)", body = ErrorBody),
        (status = 502, description = "The captcha provider could not be reached (`captcha.unavailable`)", body = ErrorBody),
    ))]
pub async fn redeem(
    State(state): State<Context>,
    caller: AuthRequired,
    ClientAddress(address): ClientAddress,
    CaptchaJson(request, _): CaptchaJson<RedeemRequest, scene::Redeem>,
) -> ApiResult<Json<RedeemedView>> {
    Ok(Json(redeem::redeem(&state, caller.claims.sub, &request.code, address).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CodeListQuery {
    /// The codes generated together.
    pub batch_id: Option<Uuid>,
    pub kind: Option<CodeKind>,
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    /// 1..=1000, default 50.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// List redeem codes, newest first: what each gives and its use counts, never the code.
#[utoipa::path(get, path = "/admin/redeem", tag = "admin", security(("bearer" = [])), params(CodeListQuery),
    responses(
        (status = 200, description = "One page of codes", body = Page<CodeView>),
        (status = 400, description = "Unreadable query", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 422, description = "Paging out of range", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiQuery(query): ApiQuery<CodeListQuery>,
) -> ApiResult<Json<Page<CodeView>>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    Ok(Json(redeem::list(&state, query.batch_id, query.kind, page).await?))
}

/// Generate a batch of codes (`kind` `storage_pack` with `storage_pack {size, duration_days}`,
/// or `group` with `group {group_id, duration_days}`). The codes are in this answer only: they
/// are stored hashed. With `Accept: text/csv` the answer is the batch as CSV
/// (`code,id,kind,name,uses_per_code,expires_at`), to download.
#[utoipa::path(post, path = "/admin/redeem", tag = "admin", security(("bearer" = [])), request_body = BatchRequest,
    responses(
        (status = 201, description = "Generated: the codes, shown once", content(
            (BatchView = "application/json"),
            (String = "text/csv"),
        )),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 422, description = "Invalid field", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<Context>,
    AdminRequired(admin): AdminRequired,
    headers: HeaderMap,
    ApiJson(request): ApiJson<BatchRequest>,
) -> ApiResult<Response> {
    let batch = redeem::create_batch(&state, admin.sub, request).await?;
    let wants_csv = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.split(',').any(|t| t.trim().starts_with("text/csv")));
    if wants_csv {
        let disposition = format!("attachment; filename=\"redeem-codes-{}.csv\"", batch.batch_id);
        let headers = [
            (header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8")),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_str(&disposition).unwrap_or(HeaderValue::from_static("attachment")),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ];
        return Ok((StatusCode::CREATED, headers, batch.to_csv()).into_response());
    }
    let headers = [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))];
    Ok((StatusCode::CREATED, headers, Json(batch)).into_response())
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateCodeRequest {
    /// A disabled code answers `redeem.invalid_code` until enabled again.
    pub disabled: bool,
}

/// Disable or enable a code.
#[utoipa::path(patch, path = "/admin/redeem/{id}", tag = "admin", security(("bearer" = [])),
    params(("id" = Uuid, Path)), request_body = UpdateCodeRequest,
    responses(
        (status = 200, description = "The code", body = CodeView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such code", body = ErrorBody),
    ))]
pub async fn update(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(request): ApiJson<UpdateCodeRequest>,
) -> ApiResult<Json<CodeView>> {
    Ok(Json(redeem::set_disabled(&state, id, request.disabled).await?))
}

/// Delete a code; the packs and temporary groups it gave stay.
#[utoipa::path(delete, path = "/admin/redeem/{id}", tag = "admin", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "Malformed id", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such code", body = ErrorBody),
    ))]
pub async fn delete(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    redeem::delete(&state, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
