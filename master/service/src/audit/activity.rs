//! The activity log: who did what to which record, from which address, when. Actions record
//! themselves here with one insert: inside their own transaction ([`record_in`], or as a step
//! of a file commit, [`step`]) or, for actions that run no transaction, on its own
//! ([`record`]). Writing the log never fails the action: a failed insert is logged and
//! swallowed (and the table has no constraint an insert could break, so one inside a
//! transaction fails only when the transaction itself does). Secrets never enter it.
//!
//! The client's address reaches the services without passing through every signature: the
//! HTTP layer runs each request inside [`with_address`], and an activity takes the address of
//! the request it is recorded in unless given one.

use std::future::Future;
use std::net::IpAddr;

use nubo_model::db::activity::{ActivityFilter, ActivityRow};
use nubo_model::db::ingest::Step;
use nubo_model::db::{self, Conn, Db};
use nubo_model::domain::activity::{Action, TargetKind};
use nubo_model::domain::ids::UserId;
use nubo_model::domain::time::{Millis, from_rfc3339, now_ms, to_rfc3339};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::context::Context;
use crate::error::{ServiceError, ServiceResult};
use crate::{Page, PageRequest};

tokio::task_local! {
    /// The address of the client whose request is being handled.
    static ADDRESS: IpAddr;
}

/// Runs `work` (a request's handling) with `address` as the client's address of every activity
/// it records.
pub async fn with_address<F: Future>(address: IpAddr, work: F) -> F::Output {
    ADDRESS.scope(address, work).await
}

fn current_address() -> Option<IpAddr> {
    ADDRESS.try_with(|address| *address).ok()
}

/// Names and free text kept in the log are cut to this many characters.
const MAX_TEXT_CHARS: usize = 256;

/// Ids listed in a detail (`ids` of a trash of many objects) are cut to this many.
pub const MAX_DETAIL_IDS: usize = 20;

/// One action, about to be recorded.
#[derive(Debug, Clone)]
pub struct Activity {
    action: Action,
    actor: Option<UserId>,
    target: Option<(TargetKind, Option<String>, Option<String>)>,
    address: Option<IpAddr>,
    detail: serde_json::Map<String, serde_json::Value>,
}

impl Activity {
    /// `action` by the user `actor` (`None`: no signed-in user, or a job).
    pub fn new(action: Action, actor: Option<UserId>) -> Self {
        Self { action, actor, target: None, address: current_address(), detail: serde_json::Map::new() }
    }

    /// `action` by signed-in user `actor`.
    pub fn by(actor: UserId, action: Action) -> Self {
        Self::new(action, Some(actor))
    }

    /// The record the action is about, and its name now (kept when it is renamed or deleted).
    pub fn on(mut self, kind: TargetKind, id: impl ToString, name: Option<&str>) -> Self {
        self.target = Some((kind, Some(id.to_string()), name.map(cut)));
        self
    }

    /// Objects acted on together (a trash of several): the first is the target, and `detail`
    /// has how many and (up to [`MAX_DETAIL_IDS`]) their ids; `owner` when it is not the actor.
    pub fn on_objects<'a>(mut self, owner: UserId, objects: impl IntoIterator<Item = (Uuid, &'a str)>) -> Self {
        let objects: Vec<(Uuid, &str)> = objects.into_iter().collect();
        if let Some((id, name)) = objects.first() {
            self = self.on(TargetKind::Object, id, Some(name));
        }
        let ids: Vec<Uuid> = objects.iter().take(MAX_DETAIL_IDS).map(|(id, _)| *id).collect();
        self = self.with("count", objects.len()).with("ids", ids);
        if self.actor != Some(owner) {
            self = self.with("owner_id", owner);
        }
        self
    }

    /// A record known only by its name (an e-mail address no account has).
    pub fn on_name(mut self, kind: TargetKind, name: &str) -> Self {
        self.target = Some((kind, None, Some(cut(name))));
        self
    }

    /// The client's address, when the caller knows it better than the request does.
    pub fn from(mut self, address: IpAddr) -> Self {
        self.address = Some(address);
        self
    }

    /// No address: the request is not the client's (a storage node's report).
    pub fn without_address(mut self) -> Self {
        self.address = None;
        self
    }

    /// A detail (`provider`, `fields`, `count`...); never a secret.
    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        let value = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
        self.detail.insert(key.to_owned(), value);
        self
    }

    fn into_row(self, at: Millis) -> ActivityRow {
        let (target_kind, target_id, target_name) = match self.target {
            Some((kind, id, name)) => (Some(kind.as_str().to_owned()), id, name),
            None => (None, None, None),
        };
        ActivityRow {
            // Time-ordered, so rows of one millisecond still list in the order they happened.
            id: Uuid::now_v7().to_string(),
            at,
            actor_id: self.actor.map(|id| id.to_string()),
            actor_nickname: None,
            action: self.action.as_str().to_owned(),
            target_kind,
            target_id,
            target_name,
            address: self.address.map(|address| address.to_canonical().to_string()),
            detail: serde_json::Value::Object(self.detail).to_string(),
        }
    }
}

fn cut(text: &str) -> String {
    text.chars().take(MAX_TEXT_CHARS).collect()
}

/// Records `activity` inside the caller's transaction on `conn`: it commits or rolls back with
/// the action. A failure is logged, not answered.
pub async fn record_in(conn: &mut Conn, activity: Activity) {
    let action = activity.action;
    if let Err(error) = db::activity::insert_in(conn, &activity.into_row(now_ms())).await {
        tracing::warn!(action = action.as_str(), %error, "could not record an activity");
    }
}

/// Records `activity` on its own, after an action that ran no transaction. A failure is
/// logged, not answered.
pub async fn record(db: &Db, activity: Activity) {
    let action = activity.action;
    if let Err(error) = db::activity::insert(db, &activity.into_row(now_ms())).await {
        tracing::warn!(action = action.as_str(), %error, "could not record an activity");
    }
}

/// `activity` as a step of a file commit ([`crate::content::ingest::Plan::with_step`]).
pub fn step(activity: Activity) -> Step {
    db::activity::step(activity.into_row(now_ms()))
}

/// One recorded action.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ActivityView {
    pub id: Uuid,
    /// When it happened (RFC 3339).
    pub at: String,
    /// Who did it: `null` for a visitor, a job, or a failed sign-in naming no account.
    pub actor_id: Option<Uuid>,
    /// The actor's nickname now (`null` once the account is gone).
    pub actor_nickname: Option<String>,
    #[schema(value_type = Action)]
    pub action: String,
    /// What it was about: `user`, `object`, `share`, `group`, `policy`, `settings`, `report`
    /// or `redeem`.
    #[schema(value_type = Option<TargetKind>)]
    pub target_kind: Option<String>,
    pub target_id: Option<String>,
    /// The target's name when it happened (a file name, a share code, an e-mail address).
    pub target_name: Option<String>,
    /// The client's address (behind `trusted_proxies`, the one they forwarded).
    pub address: Option<String>,
    /// More about it, by action (see the action list); never a secret.
    #[schema(value_type = Object)]
    pub detail: serde_json::Value,
}

fn view(row: ActivityRow) -> ActivityView {
    ActivityView {
        id: row.id.parse().unwrap_or_default(),
        at: to_rfc3339(row.at),
        actor_id: row.actor_id.and_then(|id| id.parse().ok()),
        actor_nickname: row.actor_nickname,
        action: row.action,
        target_kind: row.target_kind,
        target_id: row.target_id,
        target_name: row.target_name,
        address: row.address,
        detail: serde_json::from_str(&row.detail).unwrap_or(serde_json::Value::Null),
    }
}

/// What a list asks for: an action and a time range, `from` inclusive and `to` exclusive, as
/// RFC 3339 texts.
#[derive(Debug, Default, Clone)]
pub struct ActivityQuery<'a> {
    pub action: Option<&'a str>,
    pub from: Option<&'a str>,
    pub to: Option<&'a str>,
}

impl ActivityQuery<'_> {
    fn filter(&self, actor: Option<UserId>) -> ServiceResult<ActivityFilter> {
        let action = match self.action.filter(|text| !text.is_empty()) {
            Some(text) => Some(
                Action::parse(text)
                    .ok_or_else(|| ServiceError::validation("action", format!("unknown action {text:?}")))?,
            ),
            None => None,
        };
        let time = |field: &'static str, text: Option<&str>| -> ServiceResult<Option<Millis>> {
            match text.filter(|text| !text.is_empty()) {
                Some(text) => from_rfc3339(text)
                    .map(Some)
                    .ok_or_else(|| ServiceError::validation(field, "must be an RFC 3339 time")),
                None => Ok(None),
            }
        };
        Ok(ActivityFilter {
            actor_id: actor.map(|id| id.to_string()),
            action: action.map(|action| action.as_str().to_owned()),
            from: time("from", self.from)?,
            to: time("to", self.to)?,
        })
    }
}

/// One page of `caller`'s own actions, newest first.
pub async fn list_mine(
    ctx: &Context,
    caller: UserId,
    query: &ActivityQuery<'_>,
    page: PageRequest,
) -> ServiceResult<Page<ActivityView>> {
    let filter = query.filter(Some(caller))?;
    list_filtered(ctx, &filter, page).await
}

/// One page of everyone's actions (or `user`'s), newest first (`admin_required`).
pub async fn list(
    ctx: &Context,
    user: Option<UserId>,
    query: &ActivityQuery<'_>,
    page: PageRequest,
) -> ServiceResult<Page<ActivityView>> {
    let filter = query.filter(user)?;
    list_filtered(ctx, &filter, page).await
}

async fn list_filtered(ctx: &Context, filter: &ActivityFilter, page: PageRequest) -> ServiceResult<Page<ActivityView>> {
    let (rows, count) = db::activity::page_filtered(ctx.db(), filter, page.offset, page.limit).await?;
    Ok(Page { count, items: rows.into_iter().map(view).collect() })
}

/// The most rows one CSV export holds; narrow the filters (or page with `offset`) for more.
pub const MAX_CSV_ROWS: i64 = 10_000;

/// The actions matching the filters as CSV, newest first, at most [`MAX_CSV_ROWS`] from
/// `offset` (`admin_required`).
pub async fn csv(ctx: &Context, user: Option<UserId>, query: &ActivityQuery<'_>, offset: i64) -> ServiceResult<String> {
    let page = PageRequest::parse(Some(offset), None)?;
    let filter = query.filter(user)?;
    let (rows, _) = db::activity::page_filtered(ctx.db(), &filter, page.offset, MAX_CSV_ROWS).await?;
    let mut out = String::from(CSV_HEADER);
    for row in rows.into_iter().map(view) {
        let fields = [
            row.at,
            row.actor_id.map(|id| id.to_string()).unwrap_or_default(),
            row.actor_nickname.unwrap_or_default(),
            row.action,
            row.target_kind.unwrap_or_default(),
            row.target_id.unwrap_or_default(),
            row.target_name.unwrap_or_default(),
            row.address.unwrap_or_default(),
            row.detail.to_string(),
        ];
        let cells: Vec<String> = fields.iter().map(|field| csv_cell(field)).collect();
        out.push_str(&cells.join(","));
        out.push_str("\r\n");
    }
    Ok(out)
}

/// The CSV export's first line.
pub const CSV_HEADER: &str = "at,actor_id,actor_nickname,action,target_kind,target_id,target_name,address,detail\r\n";

/// One CSV cell (RFC 4180): quoted when it holds a separator, a quote or a line break. Text a
/// spreadsheet would run as a formula (starting `=`, `+`, `-`, `@`) is quoted behind a `'`,
/// since names and addresses tried at sign-in come from anyone.
fn csv_cell(text: &str) -> String {
    let guarded = if text.starts_with(['=', '+', '-', '@', '\t', '\r']) { format!("'{text}") } else { text.to_owned() };
    if guarded.contains([',', '"', '\r', '\n']) || guarded != text {
        format!("\"{}\"", guarded.replace('"', "\"\""))
    } else {
        guarded
    }
}

/// How many rows one prune statement deletes, so pruning a long backlog never holds the
/// write lock for long.
const PRUNE_BATCH: i64 = 1_000;

/// Deletes rows older than `days` (at least one) as of `now`, in batches; answers how many.
pub async fn prune(ctx: &Context, now: Millis, days: i64) -> ServiceResult<usize> {
    let before = now - days.max(1) * 86_400_000;
    let mut pruned = 0;
    loop {
        let done = db::activity::prune_before(ctx.db(), before, PRUNE_BATCH).await?;
        pruned += done as usize;
        if done < PRUNE_BATCH as u64 {
            return Ok(pruned);
        }
        // Lets other writers in between batches.
        tokio::task::yield_now().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_cells_are_quoted_and_formulas_defused() {
        assert_eq!(csv_cell("plain"), "plain");
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_cell("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_cell("line\nbreak"), "\"line\nbreak\"");
    }

    #[test]
    fn a_row_takes_the_request_address_and_cuts_long_names() {
        let address: IpAddr = "203.0.113.7".parse().unwrap();
        let row = tokio_test_scope(address, || {
            Activity::by(UserId::from(Uuid::nil()), Action::ShareCreate)
                .on(TargetKind::Share, "abc", Some(&"x".repeat(1000)))
                .with("n", 3)
                .into_row(5)
        });
        assert_eq!(row.address.as_deref(), Some("203.0.113.7"));
        assert_eq!(row.target_name.map(|name| name.chars().count()), Some(MAX_TEXT_CHARS));
        assert_eq!(row.detail, r#"{"n":3}"#);
        assert_eq!(row.action, Action::ShareCreate.as_str());
        let outside = Activity::new(Action::SignIn, None).into_row(5);
        assert_eq!(outside.address, None, "no request, no address");
    }

    fn tokio_test_scope<T>(address: IpAddr, work: impl FnOnce() -> T) -> T {
        ADDRESS.sync_scope(address, work)
    }
}
