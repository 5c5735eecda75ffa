//! SQL of the `activity` table: one insert (inside the action's transaction, or on its own),
//! filtered pages newest first, and pruning by age in batches.

use super::ingest::{Step, StepArg};
use super::{Conn, Db, DbError, Where};
use crate::domain::time::Millis;

const INSERT: &str =
    "INSERT INTO activity (id, at, actor_id, action, target_kind, target_id, target_name, address, detail)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";

const COLUMNS: &str = "a.id, a.at, a.actor_id, u.nickname AS actor_nickname, a.action, a.target_kind, a.target_id, \
     a.target_name, a.address, a.detail";
const FROM: &str = "activity a LEFT JOIN users u ON u.id = a.actor_id";

/// One row, as stored (ids and names as text: the records they name may be gone).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ActivityRow {
    pub id: String,
    pub at: Millis,
    pub actor_id: Option<String>,
    /// The actor's nickname now (read only; `None` once the account is gone).
    #[sqlx(default)]
    pub actor_nickname: Option<String>,
    pub action: String,
    pub target_kind: Option<String>,
    pub target_id: Option<String>,
    pub target_name: Option<String>,
    pub address: Option<String>,
    pub detail: String,
}

/// Inserts `row` on `conn`, inside the caller's transaction.
pub async fn insert_in(conn: &mut Conn, row: &ActivityRow) -> Result<(), DbError> {
    bind(sqlx::query(INSERT), row).execute(conn).await?;
    Ok(())
}

/// Inserts `row` on its own.
pub async fn insert(db: &Db, row: &ActivityRow) -> Result<(), DbError> {
    bind(sqlx::query(INSERT), row).execute(db.writer()).await?;
    Ok(())
}

fn bind<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    row: &'q ActivityRow,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    query
        .bind(row.id.as_str())
        .bind(row.at)
        .bind(row.actor_id.as_deref())
        .bind(row.action.as_str())
        .bind(row.target_kind.as_deref())
        .bind(row.target_id.as_deref())
        .bind(row.target_name.as_deref())
        .bind(row.address.as_deref())
        .bind(row.detail.as_str())
}

/// `row` as a bookkeeping step of a file commit ([`super::ingest`]), inserted in its
/// transaction (never `required`: it changes a row whenever it runs).
pub fn step(row: ActivityRow) -> Step {
    let text = |value: Option<String>| StepArg::OptText(value);
    Step {
        sql: INSERT,
        args: vec![
            StepArg::Text(row.id),
            StepArg::Int(row.at),
            text(row.actor_id),
            StepArg::Text(row.action),
            text(row.target_kind),
            text(row.target_id),
            text(row.target_name),
            text(row.address),
            StepArg::Text(row.detail),
        ],
        required: false,
    }
}

/// Which rows a page holds; every field set must match.
#[derive(Debug, Default, Clone)]
pub struct ActivityFilter {
    /// The actor's id.
    pub actor_id: Option<String>,
    pub action: Option<String>,
    /// From this time on, inclusive.
    pub from: Option<Millis>,
    /// Before this time, exclusive.
    pub to: Option<Millis>,
}

/// One page of the rows matching `filter`, newest first, and how many match.
pub async fn page_filtered(
    db: &Db,
    filter: &ActivityFilter,
    offset: i64,
    limit: i64,
) -> Result<(Vec<ActivityRow>, i64), DbError> {
    let mut clause = Where::new();
    clause.and("a.actor_id = {}", filter.actor_id.clone());
    clause.and("a.action = {}", filter.action.clone());
    clause.and("a.at >= CAST({} AS BIGINT)", filter.from.map(|at| at.to_string()));
    clause.and("a.at < CAST({} AS BIGINT)", filter.to.map(|at| at.to_string()));
    let n = clause.binds.len();
    let sql = format!(
        "SELECT {COLUMNS} FROM {FROM}{} ORDER BY a.at DESC, a.id DESC LIMIT ${} OFFSET ${}",
        clause.sql,
        n + 1,
        n + 2
    );
    let mut rows = sqlx::query_as::<_, ActivityRow>(&sql);
    for value in &clause.binds {
        rows = rows.bind(value.as_str());
    }
    let rows = rows.bind(limit).bind(offset).fetch_all(db.reader()).await?;
    // Counted without the join (it names no condition), which the count would otherwise walk
    // row by row.
    let count_sql = format!("SELECT COUNT(*) FROM activity a{}", clause.sql);
    let mut count = sqlx::query_as::<_, (i64,)>(&count_sql);
    for value in &clause.binds {
        count = count.bind(value.as_str());
    }
    let (total,) = count.fetch_one(db.reader()).await?;
    Ok((rows, total))
}

/// Deletes up to `batch` rows older than `before`; answers how many went.
pub async fn prune_before(db: &Db, before: Millis, batch: i64) -> Result<u64, DbError> {
    let done =
        sqlx::query("DELETE FROM activity WHERE id IN (SELECT id FROM activity WHERE at < $1 ORDER BY at LIMIT $2)")
            .bind(before)
            .bind(batch)
            .execute(db.writer())
            .await?;
    Ok(done.rows_affected())
}
