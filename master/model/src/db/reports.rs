//! SQL of the `reports` table, and the share removal an administrator's decision makes.

use uuid::Uuid;

use super::{Db, DbError, Where};
use crate::domain::ids::UserId;
use crate::domain::report::{ReportAction, ReportReason};
use crate::domain::time::Millis;

const COLUMNS: &str = "r.id, r.share_id, r.share_code, r.owner_id, u.nickname AS owner_nickname, r.object_name, \
     r.reporter_id, r.reason, r.description, r.action, r.handled_by, r.handled_at, r.created_at, \
     s.removed_at AS share_removed_at";
const FROM: &str = "reports r LEFT JOIN users u ON u.id = r.owner_id LEFT JOIN shares s ON s.id = r.share_id";

/// A report with its share's owner's nickname and whether the share is still there or removed.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ReportRow {
    #[sqlx(try_from = "String")]
    pub id: Uuid,
    /// `None` once the share was deleted.
    pub share_id: Option<String>,
    pub share_code: String,
    pub owner_id: Option<UserId>,
    pub owner_nickname: Option<String>,
    pub object_name: String,
    pub reporter_id: Option<UserId>,
    pub reason: ReportReason,
    pub description: String,
    pub action: Option<ReportAction>,
    pub handled_by: Option<UserId>,
    pub handled_at: Option<Millis>,
    pub created_at: Millis,
    pub share_removed_at: Option<Millis>,
}

/// What a new report holds.
pub struct NewReport<'a> {
    pub id: Uuid,
    pub share_id: Uuid,
    pub share_code: &'a str,
    pub owner_id: UserId,
    pub object_name: &'a str,
    pub reporter_id: Option<UserId>,
    pub reason: ReportReason,
    pub description: &'a str,
    pub created_at: Millis,
}

pub async fn insert(db: &Db, report: &NewReport<'_>) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO reports (id, share_id, share_code, owner_id, object_name, reporter_id, reason, description, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(report.id.to_string())
    .bind(report.share_id.to_string())
    .bind(report.share_code)
    .bind(report.owner_id)
    .bind(report.object_name)
    .bind(report.reporter_id)
    .bind(report.reason)
    .bind(report.description)
    .bind(report.created_at)
    .execute(db.writer())
    .await?;
    Ok(())
}

pub async fn find(db: &Db, id: Uuid) -> Result<Option<ReportRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM {FROM} WHERE r.id = $1"))
        .bind(id.to_string())
        .fetch_optional(db.reader())
        .await?)
}

/// Which reports a list holds; every field set must match.
#[derive(Debug, Default)]
pub struct ReportFilter<'a> {
    /// `Some(true)`: only reports no administrator has handled; `Some(false)`: only handled ones.
    pub open: Option<bool>,
    pub reason: Option<ReportReason>,
    pub share_code: Option<&'a str>,
}

/// One page of the reports matching `filter`, newest first, and how many match.
pub async fn page_filtered(
    db: &Db,
    filter: &ReportFilter<'_>,
    offset: i64,
    limit: i64,
) -> Result<(Vec<ReportRow>, i64), DbError> {
    let mut clause = Where::new();
    clause.and("r.reason = {}", filter.reason.map(|r| r.as_str().to_owned()));
    clause.and("r.share_code = {}", filter.share_code.map(str::to_owned));
    let state = match filter.open {
        Some(true) => " AND r.action IS NULL",
        Some(false) => " AND r.action IS NOT NULL",
        None => "",
    };
    clause.page(db, (COLUMNS, FROM, state), "r.created_at DESC, r.id", (offset, limit)).await
}

/// Records `action` on open report `id` by `admin` at `now`, with what it implies, in one
/// transaction: `RemoveShare` closes the share to visitors and settles the share's other open
/// reports; `BanOwner` (the ban itself is the caller's) settles the open reports of every share
/// of the owner. Answers false, changing nothing, when the report is missing or already handled.
pub async fn record_action(
    db: &Db,
    id: Uuid,
    action: ReportAction,
    admin: UserId,
    now: Millis,
) -> Result<bool, DbError> {
    let mut tx = db.begin().await?;
    let id = id.to_string();
    let claimed = sqlx::query(
        "UPDATE reports SET action = $2, handled_by = $3, handled_at = $4 WHERE id = $1 AND action IS NULL",
    )
    .bind(&id)
    .bind(action)
    .bind(admin)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    if claimed.rows_affected() == 0 {
        return Ok(false);
    }
    if action == ReportAction::RemoveShare {
        sqlx::query(
            "UPDATE shares SET removed_at = $2
             WHERE id = (SELECT share_id FROM reports WHERE id = $1) AND removed_at IS NULL",
        )
        .bind(&id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    // The open reports the decision settles too: the same share's, or every share's of a
    // banned owner.
    let settled = match action {
        ReportAction::Dismiss => None,
        ReportAction::RemoveShare => Some("share_id = (SELECT share_id FROM reports WHERE id = $1)"),
        ReportAction::BanOwner => Some("owner_id = (SELECT owner_id FROM reports WHERE id = $1)"),
    };
    if let Some(scope) = settled {
        sqlx::query(&format!(
            "UPDATE reports SET action = $2, handled_by = $3, handled_at = $4 WHERE action IS NULL AND {scope}"
        ))
        .bind(&id)
        .bind(action)
        .bind(admin)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(true)
}
