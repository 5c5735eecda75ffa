//! Reports of shares: anyone who can open a share may report it (rate-limited per address);
//! administrators list reports and act on them (dismiss, remove the share, ban its owner),
//! and the decision is recorded with who took it.

use std::net::IpAddr;
use std::time::Duration;

/// The administrators' report list query, as the front end builds it.
pub use nubo_model::db::reports::ReportFilter;
use nubo_model::db::reports::{NewReport, ReportRow};
use nubo_model::db::{self};
use nubo_model::domain::activity::{Action, TargetKind};
use nubo_model::domain::ids::UserId;
use nubo_model::domain::report::{MAX_DESCRIPTION_CHARS, ReportAction, ReportReason, ReportStatus};
use nubo_model::domain::time::{now_ms, to_rfc3339};
use nubo_model::domain::user::UserStatus;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::audit::activity::{self, Activity};
use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::identity::users::{self, UserUpdate};
use crate::{Page, PageRequest};

/// Reports one address may send in [`REPORT_WINDOW`]: enough for a person, too few to flood
/// the administrators' queue.
const REPORTS_PER_ADDRESS: u64 = 10;
const REPORT_WINDOW: Duration = Duration::from_secs(60 * 60);

/// A report as administrators see it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReportView {
    pub id: Uuid,
    pub share_code: String,
    /// The name of the shared file or folder when the report was made.
    pub object_name: String,
    /// What visitors get now: `open`, `removed` (an administrator removed it) or `deleted`
    /// (its owner or the object's deletion ended it).
    pub share_state: ShareState,
    /// The share's owner (`null` once their account is deleted).
    pub owner_id: Option<Uuid>,
    pub owner_nickname: Option<String>,
    /// The signed-in user who reported it; `null` for an anonymous visitor.
    pub reporter_id: Option<Uuid>,
    pub reason: ReportReason,
    pub description: String,
    pub status: ReportStatus,
    /// What an administrator decided; `null` while `open`.
    pub action: Option<ReportAction>,
    pub handled_by: Option<Uuid>,
    pub handled_at: Option<String>,
    pub created_at: String,
}

/// A reported share's state as a report shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ShareState {
    Open,
    Removed,
    Deleted,
}

fn view(row: &ReportRow) -> ReportView {
    let share_state = match (&row.share_id, row.share_removed_at) {
        (None, _) => ShareState::Deleted,
        (Some(_), Some(_)) => ShareState::Removed,
        (Some(_), None) => ShareState::Open,
    };
    ReportView {
        id: row.id,
        share_code: row.share_code.clone(),
        object_name: row.object_name.clone(),
        share_state,
        owner_id: row.owner_id.map(Into::into),
        owner_nickname: row.owner_nickname.clone(),
        reporter_id: row.reporter_id.map(Into::into),
        reason: row.reason,
        description: row.description.clone(),
        status: if row.action.is_some() { ReportStatus::Handled } else { ReportStatus::Open },
        action: row.action,
        handled_by: row.handled_by.map(Into::into),
        handled_at: row.handled_at.map(to_rfc3339),
        created_at: to_rfc3339(row.created_at),
    }
}

fn not_found() -> ServiceError {
    ServiceError::not_found(codes::REPORT_NOT_FOUND, "no such report")
}

/// A visitor's report of share `code`.
pub struct NewReportInput<'a> {
    pub reason: ReportReason,
    pub description: Option<&'a str>,
    /// The signed-in reporter, if the request carried an access token.
    pub reporter: Option<UserId>,
    pub address: IpAddr,
}

/// Records a report of share `code`, which must be open to visitors.
pub async fn submit(ctx: &Context, code: &str, input: NewReportInput<'_>) -> ServiceResult<()> {
    let description = input.description.unwrap_or("").trim();
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(ServiceError::validation(
            "description",
            format!("the description is longer than {MAX_DESCRIPTION_CHARS} characters"),
        ));
    }
    let share = crate::sharing::shares::reportable(ctx, code).await?;
    let key = format!("rate:report:addr:{}", input.address);
    if ctx.store().increment(&key, REPORT_WINDOW).await? > REPORTS_PER_ADDRESS {
        return Err(ServiceError::new(
            ErrorKind::RateLimited,
            codes::REPORT_RATE_LIMITED,
            "too many reports from this address, try again in an hour",
        ));
    }
    db::reports::insert(
        ctx.db(),
        &NewReport {
            id: Uuid::new_v4(),
            share_id: share.share.id,
            share_code: &share.share.code,
            owner_id: share.share.owner_id,
            object_name: &share.object_name,
            reporter_id: input.reporter,
            reason: input.reason,
            description,
            created_at: now_ms(),
        },
    )
    .await?;
    Ok(())
}

/// One page of the reports matching `filter`, newest first (`admin_required`).
pub async fn list(ctx: &Context, filter: &ReportFilter<'_>, page: PageRequest) -> ServiceResult<Page<ReportView>> {
    let (rows, count) = db::reports::page_filtered(ctx.db(), filter, page.offset, page.limit).await?;
    Ok(Page { count, items: rows.iter().map(view).collect() })
}

/// Acts on open report `id` as administrator `admin`: `BanOwner` bans the share's owner first
/// (at once, through the same path as `PATCH /admin/user/{id}`), then the decision is recorded.
/// A report already handled answers 409, whoever handled it.
pub async fn act(ctx: &Context, admin: UserId, id: Uuid, action: ReportAction) -> ServiceResult<ReportView> {
    let report = db::reports::find(ctx.db(), id).await?.ok_or_else(not_found)?;
    if report.action.is_some() {
        return Err(already_handled());
    }
    match action {
        ReportAction::RemoveShare if report.share_id.is_none() => {
            return Err(ServiceError::conflict(
                codes::REPORT_SHARE_GONE,
                "the share no longer exists: dismiss the report or ban the owner",
            ));
        }
        ReportAction::BanOwner => {
            let owner = report.owner_id.ok_or_else(|| {
                ServiceError::conflict(
                    codes::REPORT_OWNER_GONE,
                    "the share's owner no longer exists: dismiss the report",
                )
            })?;
            let ban = UserUpdate { status: Some(UserStatus::Banned), ..UserUpdate::default() };
            users::update(ctx, admin, owner, ban).await?;
        }
        ReportAction::Dismiss | ReportAction::RemoveShare => {}
    }
    if !db::reports::record_action(ctx.db(), id, action, admin, now_ms()).await? {
        return Err(already_handled());
    }
    let decided = Activity::by(admin, Action::AdminReportDecision).on(TargetKind::Report, id, Some(&report.share_code));
    activity::record(ctx.db(), decided.with("action", action).with("object_name", &report.object_name)).await;
    let handled = db::reports::find(ctx.db(), id).await?.ok_or_else(not_found)?;
    Ok(view(&handled))
}

fn already_handled() -> ServiceError {
    ServiceError::conflict(codes::REPORT_ALREADY_HANDLED, "an administrator has already handled this report")
}
