//! The activity log: the caller's own actions (`GET /user/activity`) and everyone's for
//! administrators (`GET /admin/activity`, also as CSV). Thin handlers over `service::audit::activity`.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::IntoParams;
use uuid::Uuid;

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::ApiQuery;
use crate::guard::{AdminRequired, JwtRequired};
use nubo_model::domain::ids::UserId;
use nubo_service::audit::activity::{self, ActivityQuery, ActivityView};
use nubo_service::context::Context;
use nubo_service::{Page, PageRequest};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OwnActivityQuery {
    /// Only this action (`user.sign_in`, `share.create`...).
    pub action: Option<String>,
    /// From this time on (RFC 3339, inclusive).
    pub from: Option<String>,
    /// Before this time (RFC 3339, exclusive).
    pub to: Option<String>,
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    /// 1..=1000, default 50.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// The caller's own actions, newest first: their sign-ins, uploads, deletions, shares and
/// settings changes, and the failed sign-ins that named their e-mail address.
#[utoipa::path(get, path = "/user/activity", tag = "user", security(("bearer" = [])), params(OwnActivityQuery),
    responses(
        (status = 200, description = "One page of the caller's activity", body = Page<ActivityView>),
        (status = 400, description = "Unreadable query", body = ErrorBody),
        (status = 422, description = "Unknown action, unreadable time, or paging out of range", body = ErrorBody),
    ))]
pub async fn mine(
    State(state): State<Context>,
    JwtRequired(claims): JwtRequired,
    ApiQuery(query): ApiQuery<OwnActivityQuery>,
) -> ApiResult<Json<Page<ActivityView>>> {
    let page = PageRequest::parse(query.offset, query.limit)?;
    let filter =
        ActivityQuery { action: query.action.as_deref(), from: query.from.as_deref(), to: query.to.as_deref() };
    Ok(Json(activity::list_mine(&state, claims.sub, &filter, page).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AdminActivityQuery {
    /// Only the actions of this user.
    pub user_id: Option<Uuid>,
    /// Only this action (`admin.ban`, `user.sign_in_failed`...).
    pub action: Option<String>,
    /// From this time on (RFC 3339, inclusive).
    pub from: Option<String>,
    /// Before this time (RFC 3339, exclusive).
    pub to: Option<String>,
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    /// 1..=1000, default 50 (ignored by the CSV export, which holds up to 10,000 rows).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// Everyone's actions, newest first, with filters. With `Accept: text/csv` the answer is a CSV
/// download (`at,actor_id,actor_nickname,action,target_kind,target_id,target_name,address,detail`)
/// of up to 10,000 rows from `offset`; narrow the filters or page with `offset` for more.
#[utoipa::path(get, path = "/admin/activity", tag = "admin", security(("bearer" = [])), params(AdminActivityQuery),
    responses(
        (status = 200, description = "One page of activity", content(
            (Page<ActivityView> = "application/json"),
            (String = "text/csv"),
        )),
        (status = 400, description = "Unreadable query", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 422, description = "Unknown action, unreadable time, or paging out of range", body = ErrorBody),
    ))]
pub async fn admin_list(
    State(state): State<Context>,
    _admin: AdminRequired,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<AdminActivityQuery>,
) -> ApiResult<Response> {
    let filter =
        ActivityQuery { action: query.action.as_deref(), from: query.from.as_deref(), to: query.to.as_deref() };
    let wants_csv = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.split(',').any(|t| t.trim().starts_with("text/csv")));
    if wants_csv {
        let csv = activity::csv(&state, query.user_id.map(UserId::from), &filter, query.offset.unwrap_or(0)).await?;
        let headers = [
            (header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8")),
            (header::CONTENT_DISPOSITION, HeaderValue::from_static("attachment; filename=\"activity.csv\"")),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ];
        return Ok((StatusCode::OK, headers, csv).into_response());
    }
    let page = PageRequest::parse(query.offset, query.limit)?;
    Ok(Json(activity::list(&state, query.user_id.map(UserId::from), &filter, page).await?).into_response())
}
