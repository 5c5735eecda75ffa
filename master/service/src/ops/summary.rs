//! The administration summary: what the site holds (users, objects, bytes, shares, tasks,
//! nodes), the last 30 UTC days of registrations and uploads for charts, and this master's
//! version and uptime. Aggregates come from `db::summary`; this module only shapes them.

use nubo_model::db::{self, summary::DAY_MS};
use nubo_model::domain::time::{Millis, now_ms, to_rfc3339};
use serde::Serialize;
use utoipa::ToSchema;

use crate::context::Context;
use crate::error::ServiceResult;

/// Days in the series, today included.
pub const SERIES_DAYS: i64 = 30;

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SiteSummary {
    pub users: UserCounts,
    pub objects: ObjectCounts,
    pub storage: StorageFigures,
    /// Shares of every user (expired ones included until deleted).
    pub shares: i64,
    pub tasks: TaskCounts,
    pub nodes: NodeCounts,
    /// The last 30 UTC days, oldest first, today last; days without activity are zeros.
    pub daily: Vec<DayFigures>,
    /// This master's version.
    pub version: String,
    /// Seconds since this master started (each master answers for itself).
    pub uptime_seconds: u64,
    pub started_at: String,
    pub generated_at: String,
}

#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct UserCounts {
    pub total: i64,
    pub active: i64,
    /// Not yet allowed in (e.g. awaiting e-mail confirmation).
    pub inactive: i64,
    pub banned: i64,
    /// Accounts created in the last 24 hours.
    pub new_24h: i64,
    /// Accounts created in the last 7 days.
    pub new_7d: i64,
}

/// Objects of every user; root folders are not counted, the trash is (and `trashed` says how
/// many of them are in a trash).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ObjectCounts {
    pub files: i64,
    pub folders: i64,
    pub trashed: i64,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StorageFigures {
    /// Sum of file sizes (what users are charged for), the trash included.
    pub logical_bytes: i64,
    /// Sum of the sizes of the distinct stored blobs: identical content is stored once.
    pub physical_bytes: i64,
    /// Stored blobs.
    pub blobs: i64,
    /// `logical_bytes / physical_bytes`; 1 when nothing is stored.
    pub dedup_ratio: f64,
}

#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct TaskCounts {
    pub queued: i64,
    pub running: i64,
    pub completed: i64,
    pub error: i64,
    pub canceled: i64,
}

#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct NodeCounts {
    pub online: i64,
    pub offline: i64,
    /// Not checked since registered.
    pub unknown: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct DayFigures {
    /// The UTC day, `YYYY-MM-DD`.
    pub date: String,
    pub registrations: i64,
    /// Files added that day (uploads, copies, saves from shares), still counted once deleted.
    pub uploads: i64,
    pub upload_bytes: i64,
}

pub async fn summary(ctx: &Context) -> ServiceResult<SiteSummary> {
    let db = ctx.db();
    let now = now_ms();
    let today = now.div_euclid(DAY_MS);
    let first_day = today - (SERIES_DAYS - 1);
    let counters = db::summary::counters(db).await?;

    let mut users = UserCounts::default();
    for (status, count) in db::summary::users_by_status(db).await? {
        users.total += count;
        match status.as_str() {
            "ACTIVE" => users.active += count,
            "INACTIVE" => users.inactive += count,
            "BANNED" => users.banned += count,
            _ => {}
        }
    }
    users.new_24h = db::summary::users_created_since(db, now - DAY_MS).await?;
    users.new_7d = db::summary::users_created_since(db, now - 7 * DAY_MS).await?;

    let mut tasks = TaskCounts::default();
    for (status, count) in db::summary::tasks_by_status(db).await? {
        match status.as_str() {
            "queued" => tasks.queued += count,
            "running" => tasks.running += count,
            "completed" => tasks.completed += count,
            "error" => tasks.error += count,
            "canceled" => tasks.canceled += count,
            _ => {}
        }
    }
    let mut nodes = NodeCounts::default();
    for (status, count) in db::summary::nodes_by_status(db).await? {
        match status.as_str() {
            "online" => nodes.online += count,
            "offline" => nodes.offline += count,
            _ => nodes.unknown += count,
        }
    }

    let registrations = db::summary::registrations_per_day(db, first_day * DAY_MS).await?;
    let uploads = db::summary::uploads_per_day(db, first_day).await?;
    let daily = series(first_day, today, &registrations, &uploads);

    let (uptime, started_at) = ctx.uptime();
    Ok(SiteSummary {
        users,
        objects: ObjectCounts { files: counters.files, folders: counters.folders, trashed: counters.trashed },
        storage: StorageFigures {
            logical_bytes: counters.file_bytes,
            physical_bytes: counters.blob_bytes,
            blobs: counters.blobs,
            dedup_ratio: ratio(counters.file_bytes, counters.blob_bytes),
        },
        shares: db::summary::shares(db).await?,
        tasks,
        nodes,
        daily,
        version: env!("CARGO_PKG_VERSION").to_owned(),
        uptime_seconds: uptime.as_secs(),
        started_at: to_rfc3339(started_at),
        generated_at: to_rfc3339(now),
    })
}

/// Folds the changes PostgreSQL's triggers appended into the counters (a periodic job; readers
/// add what is not folded yet, so this only keeps that small). Answers how many were folded.
pub async fn fold(ctx: &Context) -> ServiceResult<u64> {
    Ok(db::summary::fold(ctx.db()).await?)
}

fn ratio(logical: i64, physical: i64) -> f64 {
    if physical <= 0 { 1.0 } else { logical as f64 / physical as f64 }
}

/// One entry per day from `first_day` to `last_day` (day numbers), zeros where no row is.
fn series(first_day: i64, last_day: i64, registrations: &[(i64, i64)], uploads: &[(i64, i64, i64)]) -> Vec<DayFigures> {
    (first_day..=last_day)
        .map(|day| {
            let registered = registrations.iter().filter(|(d, _)| *d == day).map(|(_, n)| n).sum();
            let (count, bytes) = uploads
                .iter()
                .filter(|(d, _, _)| *d == day)
                .fold((0, 0), |(count, bytes), (_, n, b)| (count + n, bytes + b));
            DayFigures { date: day_date(day), registrations: registered, uploads: count, upload_bytes: bytes }
        })
        .collect()
}

/// `YYYY-MM-DD` of a UTC day number.
fn day_date(day: i64) -> String {
    let at: Millis = day * DAY_MS;
    to_rfc3339(at).get(..10).unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_series_has_every_day_in_order_with_zeros_between() {
        let day = 1_795_000_000_000 / DAY_MS;
        let days = series(day - 2, day, &[(day, 3)], &[(day - 2, 1, 10), (day, 2, 5)]);
        assert_eq!(days.len(), 3);
        assert_eq!(days[0].date, "2026-11-16");
        assert_eq!((days[0].registrations, days[0].uploads, days[0].upload_bytes), (0, 1, 10));
        assert_eq!((days[1].registrations, days[1].uploads, days[1].upload_bytes), (0, 0, 0));
        assert_eq!((days[2].date.as_str(), days[2].registrations, days[2].uploads), ("2026-11-18", 3, 2));
    }

    #[test]
    fn nothing_stored_is_a_ratio_of_one() {
        assert!((ratio(0, 0) - 1.0).abs() < f64::EPSILON);
        assert!((ratio(300, 200) - 1.5).abs() < f64::EPSILON);
    }
}
