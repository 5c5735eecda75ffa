//! SQL of the `groups` and `group_policies` tables.

use super::columns::Flag;
use super::{Db, DbError};
use crate::domain::group::GroupPermissions;
use crate::domain::ids::{GroupId, PolicyId};
use crate::domain::time::Millis;

const COLUMNS: &str = "id, name, is_admin, max_storage, permissions, trash_retention_days, version_max_count, version_max_days, \
     created_at, updated_at, claims_changed_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct GroupRow {
    pub id: GroupId,
    pub name: String,
    #[sqlx(try_from = "Flag")]
    pub is_admin: bool,
    pub max_storage: i64,
    pub permissions: GroupPermissions,
    pub trash_retention_days: i32,
    /// Versions a file keeps (0: none), and for how many days (0: no limit by age).
    pub version_max_count: i32,
    pub version_max_days: i32,
    pub created_at: Millis,
    pub updated_at: Millis,
    /// When what access tokens snapshot of the group last changed (0: never); tokens carry it
    /// as their group claims' `version`.
    pub claims_changed_at: Millis,
}

/// A group's columns as written.
pub struct GroupValues<'a> {
    pub name: &'a str,
    pub is_admin: bool,
    pub max_storage: i64,
    pub permissions: GroupPermissions,
    pub trash_retention_days: i32,
    pub version_max_count: i32,
    pub version_max_days: i32,
}

pub async fn count(db: &Db) -> Result<i64, DbError> {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM groups").fetch_one(db.reader()).await?;
    Ok(n)
}

pub async fn list(db: &Db) -> Result<Vec<(GroupRow, i64)>, DbError> {
    let groups: Vec<GroupRow> = sqlx::query_as(&format!("SELECT {COLUMNS} FROM groups ORDER BY created_at, name"))
        .fetch_all(db.reader())
        .await?;
    let counts: Vec<(GroupId, i64)> =
        sqlx::query_as("SELECT group_id, COUNT(*) FROM users GROUP BY group_id").fetch_all(db.reader()).await?;
    Ok(groups
        .into_iter()
        .map(|g| {
            let members = counts.iter().find(|(id, _)| *id == g.id).map_or(0, |(_, n)| *n);
            (g, members)
        })
        .collect())
}

pub async fn find(db: &Db, id: GroupId) -> Result<Option<GroupRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM groups WHERE id = $1"))
        .bind(id)
        .fetch_optional(db.reader())
        .await?)
}

pub async fn find_by_name(db: &Db, name: &str) -> Result<Option<GroupRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM groups WHERE name = $1"))
        .bind(name)
        .fetch_optional(db.reader())
        .await?)
}

/// The first administrators' group, by creation time.
pub async fn first_admin_group(db: &Db) -> Result<Option<GroupRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM groups WHERE is_admin = 1 ORDER BY created_at, name LIMIT 1"))
        .fetch_optional(db.reader())
        .await?)
}

pub async fn member_count(db: &Db, id: GroupId) -> Result<i64, DbError> {
    let (n,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM users WHERE group_id = $1").bind(id).fetch_one(db.reader()).await?;
    Ok(n)
}

/// Inserts groups in one transaction.
pub async fn insert_all(db: &Db, groups: &[(GroupId, GroupValues<'_>)], now: Millis) -> Result<(), DbError> {
    let mut tx = db.begin().await?;
    for (id, group) in groups {
        sqlx::query(
            "INSERT INTO groups (id, name, is_admin, max_storage, permissions, trash_retention_days,
             version_max_count, version_max_days, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $8, $9, $7, $7)",
        )
        .bind(*id)
        .bind(group.name)
        .bind(i64::from(group.is_admin))
        .bind(group.max_storage)
        .bind(group.permissions)
        .bind(group.trash_retention_days)
        .bind(now)
        .bind(group.version_max_count)
        .bind(group.version_max_days)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Replaces a group's columns; `claims_version`, when given, records that members' access
/// tokens of older versions are stale.
pub async fn update(
    db: &Db,
    id: GroupId,
    group: &GroupValues<'_>,
    claims_version: Option<Millis>,
    now: Millis,
) -> Result<bool, DbError> {
    // Taking the admin flag from a group is refused while no active user outside it is an
    // administrator: the check and the change are one statement.
    let done = sqlx::query(
        "UPDATE groups SET name = $2, is_admin = $3, max_storage = $4, permissions = $5, trash_retention_days = $6,
         updated_at = $7, claims_changed_at = COALESCE($8, claims_changed_at), version_max_count = $9,
         version_max_days = $10 WHERE id = $1 AND ($3 = 1 OR groups.is_admin = 0
           OR NOT EXISTS (SELECT 1 FROM users u WHERE u.group_id = $1 AND u.status = 'ACTIVE')
           OR EXISTS (SELECT 1 FROM users o JOIN groups og ON og.id = o.group_id
                      WHERE og.is_admin = 1 AND o.status = 'ACTIVE' AND og.id <> $1))",
    )
    .bind(id)
    .bind(group.name)
    .bind(i64::from(group.is_admin))
    .bind(group.max_storage)
    .bind(group.permissions)
    .bind(group.trash_retention_days)
    .bind(now)
    .bind(claims_version)
    .bind(group.version_max_count)
    .bind(group.version_max_days)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Deletes a group that has no members; answers false when it does not exist. A group that
/// still has members is refused by the foreign key, reported as a constraint error.
pub async fn delete(db: &Db, id: GroupId) -> Result<bool, DbError> {
    let mut tx = db.begin().await?;
    sqlx::query("DELETE FROM group_policies WHERE group_id = $1").bind(id).execute(&mut *tx).await?;
    let done = sqlx::query("DELETE FROM groups WHERE id = $1").bind(id).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(done.rows_affected() > 0)
}

/// The group's policy ids in order (the first is the default for new users).
pub async fn policy_ids(db: &Db, group_id: GroupId) -> Result<Vec<PolicyId>, DbError> {
    let rows: Vec<(PolicyId,)> =
        sqlx::query_as("SELECT policy_id FROM group_policies WHERE group_id = $1 ORDER BY position")
            .bind(group_id)
            .fetch_all(db.reader())
            .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// Replaces the group's ordered policy list.
pub async fn set_policies(db: &Db, group_id: GroupId, policy_ids: &[PolicyId]) -> Result<(), DbError> {
    let mut tx = db.begin().await?;
    sqlx::query("DELETE FROM group_policies WHERE group_id = $1").bind(group_id).execute(&mut *tx).await?;
    for (position, policy_id) in policy_ids.iter().enumerate() {
        sqlx::query("INSERT INTO group_policies (group_id, policy_id, position) VALUES ($1, $2, $3)")
            .bind(group_id)
            .bind(*policy_id)
            .bind(position as i64)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Ids among `ids` that name no policy.
pub async fn unknown_policies(db: &Db, ids: &[PolicyId]) -> Result<Vec<PolicyId>, DbError> {
    let mut unknown = Vec::new();
    for id in ids {
        let found: Option<(String,)> =
            sqlx::query_as("SELECT id FROM policies WHERE id = $1").bind(*id).fetch_optional(db.reader()).await?;
        if found.is_none() {
            unknown.push(*id);
        }
    }
    Ok(unknown)
}

/// Groups whose claims changed since `since`, with the time of that change (to restore token
/// revocations at start-up).
pub async fn claims_changed_since(db: &Db, since: Millis) -> Result<Vec<(GroupId, Millis)>, DbError> {
    Ok(sqlx::query_as("SELECT id, claims_changed_at FROM groups WHERE claims_changed_at >= $1")
        .bind(since)
        .fetch_all(db.reader())
        .await?)
}
