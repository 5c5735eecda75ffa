//! Reports of shares: a visitor's `POST /share/{code}/report` (captcha scene `report`) and the
//! administrators' `/admin/report` list and decisions. Thin handlers over `service::sharing::reports`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use nubo_model::domain::report::{ReportAction, ReportReason, ReportStatus};
use nubo_service::sharing::reports::ReportFilter;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::captcha::{CaptchaAnswer, CaptchaJson, scene};
use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath, ApiQuery, ClientAddress};
use crate::guard::{AdminRequired, MaybeSignedIn};
use nubo_service::context::Context;
use nubo_service::sharing::reports::{self, NewReportInput, ReportView};
use nubo_service::{Page, PageRequest};

/// A visitor's report of a share.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportRequest {
    pub reason: ReportReason,
    /// What is wrong, for the administrators (at most 2000 characters).
    pub description: Option<String>,
    /// The answer to the `report` scene's captcha, when the site has one.
    pub captcha: Option<String>,
}

impl CaptchaAnswer for ReportRequest {
    fn captcha(&self) -> Option<&str> {
        self.captcha.as_deref()
    }
}

/// Report a share to the administrators. Anyone who can open the share may (no password is
/// needed: the report names the share); with an access token the reporter is recorded.
#[utoipa::path(post, path = "/share/{code}/report", tag = "shares", params(("code" = String, Path)),
    request_body = ReportRequest,
    responses(
        (status = 204, description = "Reported"),
        (status = 401, description = "An access token was sent and is invalid", body = ErrorBody),
        (status = 403, description = "A wrong captcha answer (`captcha.invalid`)", body = ErrorBody),
        (status = 404, description = "No such share, or one visitors cannot open", body = ErrorBody),
        (status = 410, description = "The share has expired or is out of downloads", body = ErrorBody),
        (status = 422, description = "Unknown reason, description too long, or no captcha answer (`captcha.required`)", body = ErrorBody),
        (status = 429, description = "Too many reports from this address (`report.rate_limited`)", body = ErrorBody),
        (status = 502, description = "The captcha provider could not be reached (`captcha.unavailable`)", body = ErrorBody),
    ))]
pub async fn report(
    State(state): State<Context>,
    MaybeSignedIn(reporter): MaybeSignedIn,
    ClientAddress(address): ClientAddress,
    ApiPath(code): ApiPath<String>,
    CaptchaJson(request, _): CaptchaJson<ReportRequest, scene::Report>,
) -> ApiResult<StatusCode> {
    let input = NewReportInput {
        reason: request.reason,
        description: request.description.as_deref(),
        reporter: reporter.map(|claims| claims.sub),
        address,
    };
    reports::submit(&state, &code, input).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReportListQuery {
    /// `open` (waiting for an administrator) or `handled`.
    pub status: Option<ReportStatus>,
    pub reason: Option<ReportReason>,
    /// Only reports of the share with this code.
    pub share: Option<String>,
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    /// 1..=1000, default 50.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// Reports, newest first, with filters.
#[utoipa::path(get, path = "/admin/report", tag = "admin", security(("bearer" = [])), params(ReportListQuery),
    responses(
        (status = 200, description = "One page of reports", body = Page<ReportView>),
        (status = 400, description = "Unreadable query", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 422, description = "Paging out of range", body = ErrorBody),
    ))]
pub async fn admin_list(
    State(state): State<Context>,
    _admin: AdminRequired,
    ApiQuery(query): ApiQuery<ReportListQuery>,
) -> ApiResult<Json<Page<ReportView>>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    let filter = ReportFilter {
        open: query.status.map(|status| status == ReportStatus::Open),
        reason: query.reason,
        share_code: query.share.as_deref().filter(|code| !code.is_empty()),
    };
    Ok(Json(reports::list(&state, &filter, page).await?))
}

/// An administrator's decision on a report.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportDecision {
    pub action: ReportAction,
}

/// Act on an open report: `dismiss`; `remove_share` (visitors get 404 for good, the owner sees
/// the share as `removed`; the share's other open reports are settled with it); `ban_owner`
/// (at once, as `PATCH /admin/user/{id} {status: BANNED}`; every share of the owner closes and
/// their other open reports are settled). The action and the administrator are recorded.
#[utoipa::path(patch, path = "/admin/report/{id}", tag = "admin", security(("bearer" = [])),
    params(("id" = Uuid, Path)), request_body = ReportDecision,
    responses(
        (status = 200, description = "The handled report", body = ReportView),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such report", body = ErrorBody),
        (status = 409, description = "Already handled, the share or owner is gone, or the owner is the acting administrator", body = ErrorBody),
        (status = 422, description = "Unknown action", body = ErrorBody),
    ))]
pub async fn admin_act(
    State(state): State<Context>,
    AdminRequired(admin): AdminRequired,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(decision): ApiJson<ReportDecision>,
) -> ApiResult<Json<ReportView>> {
    Ok(Json(reports::act(&state, admin.sub, id, decision.action).await?))
}
