//! SQL of the `policies` table.

use super::{Db, DbError};
use crate::domain::ids::{GroupId, NodeId, PolicyId};
use crate::domain::policy::{PolicyOptions, PolicyType};
use crate::domain::time::Millis;

const COLUMNS: &str = "id, name, type, node_id, max_size, is_private, chunk_size, options, dir_name_rule, file_name_rule, created_at, updated_at";

/// [`COLUMNS`] of the table called `alias` in a query.
pub(super) fn qualified_columns(alias: &str) -> String {
    COLUMNS.split(", ").map(|c| format!("{alias}.{c}")).collect::<Vec<_>>().join(", ")
}

#[derive(Debug, Clone)]
pub struct PolicyRow {
    pub id: PolicyId,
    pub name: String,
    /// The `type` column.
    pub kind: PolicyType,
    pub node_id: Option<NodeId>,
    pub max_size: i64,
    pub is_private: bool,
    pub chunk_size: i64,
    /// Decoded as `kind` says.
    pub options: PolicyOptions,
    pub dir_name_rule: String,
    pub file_name_rule: String,
    pub created_at: Millis,
    pub updated_at: Millis,
}

impl PolicyRow {
    /// The policy in a row with its [`COLUMNS`] under their own names, from either executor.
    pub fn read(row: &dyn super::Values) -> Result<Self, DbError> {
        let kind = row.parsed("type")?;
        let options = PolicyOptions::parse(kind, &row.text("options")?)
            .map_err(|error| DbError::Invalid { column: "options".to_owned(), reason: error.to_string() })?;
        Ok(Self {
            id: row.parsed("id")?,
            name: row.text("name")?,
            kind,
            node_id: row.opt_parsed("node_id")?,
            max_size: row.int("max_size")?,
            is_private: row.flag("is_private")?,
            chunk_size: row.int("chunk_size")?,
            options,
            dir_name_rule: row.text("dir_name_rule")?,
            file_name_rule: row.text("file_name_rule")?,
            created_at: row.int("created_at")?,
            updated_at: row.int("updated_at")?,
        })
    }
}

/// sqlx's queries decode a policy with [`PolicyRow::read`] too: one decoder for both executors.
impl sqlx::FromRow<'_, sqlx::any::AnyRow> for PolicyRow {
    fn from_row(row: &sqlx::any::AnyRow) -> Result<Self, sqlx::Error> {
        Self::read(row).map_err(|error| match error {
            DbError::Sqlx(error) => error,
            other => sqlx::Error::Decode(Box::new(other)),
        })
    }
}

/// A policy's columns as written.
pub struct PolicyValues<'a> {
    pub name: &'a str,
    pub max_size: i64,
    pub is_private: bool,
    pub chunk_size: i64,
    /// Its variant is the policy's type.
    pub options: &'a PolicyOptions,
    pub dir_name_rule: &'a str,
    pub file_name_rule: &'a str,
    pub node_id: Option<NodeId>,
}

pub async fn list(db: &Db) -> Result<Vec<PolicyRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM policies ORDER BY created_at, name"))
        .fetch_all(db.reader())
        .await?)
}

pub async fn find(db: &Db, id: PolicyId) -> Result<Option<PolicyRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM policies WHERE id = $1"))
        .bind(id)
        .fetch_optional(db.reader())
        .await?)
}

/// The policies of a group, in the group's order.
pub async fn of_group(db: &Db, group_id: GroupId) -> Result<Vec<PolicyRow>, DbError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {} FROM policies p JOIN group_policies gp ON gp.policy_id = p.id
         WHERE gp.group_id = $1 ORDER BY gp.position",
        qualified_columns("p")
    ))
    .bind(group_id)
    .fetch_all(db.reader())
    .await?)
}

pub async fn insert(db: &Db, id: PolicyId, policy: &PolicyValues<'_>, now: Millis) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO policies (id, name, type, max_size, is_private, chunk_size, options, dir_name_rule, file_name_rule,
         created_at, updated_at, node_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11)",
    )
    .bind(id)
    .bind(policy.name)
    .bind(policy.options.kind().as_str())
    .bind(policy.max_size)
    .bind(i64::from(policy.is_private))
    .bind(policy.chunk_size)
    .bind(policy.options.to_text())
    .bind(policy.dir_name_rule)
    .bind(policy.file_name_rule)
    .bind(now)
    .bind(policy.node_id)
    .execute(db.writer())
    .await?;
    Ok(())
}

pub async fn update(db: &Db, id: PolicyId, policy: &PolicyValues<'_>, now: Millis) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE policies SET name = $2, type = $3, max_size = $4, is_private = $5, chunk_size = $6, options = $7,
         dir_name_rule = $8, file_name_rule = $9, updated_at = $10, node_id = $11 WHERE id = $1",
    )
    .bind(id)
    .bind(policy.name)
    .bind(policy.options.kind().as_str())
    .bind(policy.max_size)
    .bind(i64::from(policy.is_private))
    .bind(policy.chunk_size)
    .bind(policy.options.to_text())
    .bind(policy.dir_name_rule)
    .bind(policy.file_name_rule)
    .bind(now)
    .bind(policy.node_id)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}

/// How many groups, stored blobs and upload sessions use the policy.
pub async fn usage(db: &Db, id: PolicyId) -> Result<i64, DbError> {
    let (n,): (i64,) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM group_policies WHERE policy_id = $1)
              + (SELECT COUNT(*) FROM physical_files WHERE policy_id = $1)
              + (SELECT COUNT(*) FROM upload_sessions WHERE policy_id = $1)",
    )
    .bind(id)
    .fetch_one(db.reader())
    .await?;
    Ok(n)
}

/// How many stored blobs and upload sessions use the policy (what pins its storage).
pub async fn usage_by_files(db: &Db, id: PolicyId) -> Result<i64, DbError> {
    let (n,): (i64,) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM physical_files WHERE policy_id = $1)
              + (SELECT COUNT(*) FROM upload_sessions WHERE policy_id = $1)",
    )
    .bind(id)
    .fetch_one(db.reader())
    .await?;
    Ok(n)
}

pub async fn delete(db: &Db, id: PolicyId) -> Result<bool, DbError> {
    let done = sqlx::query("DELETE FROM policies WHERE id = $1").bind(id).execute(db.writer()).await?;
    Ok(done.rows_affected() > 0)
}
