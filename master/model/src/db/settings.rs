//! SQL of the `settings` table: one row per setting name, and the settings version row.

use super::{Db, DbError};
use crate::domain::time::Millis;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SettingRow {
    pub name: String,
    #[sqlx(rename = "type")]
    pub kind: String,
    pub value: String,
    pub updated_at: Millis,
}

/// The row whose value is redrawn by every write of settings (and of anything else built with
/// them, such as the WOPI applications), so a master knows when what it built from them is stale.
/// Not a setting: listings read only the known names.
pub const VERSION_ROW: &str = "settings:version";
const VERSION_TYPE: &str = "VERSION";

const UPSERT: &str = "INSERT INTO settings (name, type, value, updated_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT (name) DO UPDATE SET type = excluded.type, value = excluded.value, updated_at = excluded.updated_at";

pub async fn all(db: &Db) -> Result<Vec<SettingRow>, DbError> {
    Ok(sqlx::query_as("SELECT name, type, value, updated_at FROM settings ORDER BY name")
        .fetch_all(db.reader())
        .await?)
}

/// The current settings version; `None` until settings were first written.
pub async fn version(db: &Db) -> Result<Option<String>, DbError> {
    let row: Option<(String,)> = sqlx::query_as("SELECT value FROM settings WHERE name = $1")
        .bind(VERSION_ROW)
        .fetch_optional(db.reader())
        .await?;
    Ok(row.map(|(value,)| value))
}

/// Inserts or replaces each `(name, type, value)` and sets the version to `version`, in one
/// transaction.
pub async fn upsert_many(db: &Db, rows: &[(&str, &str, String)], version: &str, now: Millis) -> Result<(), DbError> {
    let mut tx = db.begin().await?;
    let version_row = (VERSION_ROW, VERSION_TYPE, version);
    for (name, kind, value) in rows.iter().map(|(n, k, v)| (*n, *k, v.as_str())).chain([version_row]) {
        sqlx::query(UPSERT).bind(name).bind(kind).bind(value).bind(now).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Sets the version to `version` (something built with the settings changed).
pub async fn set_version(db: &Db, version: &str, now: Millis) -> Result<(), DbError> {
    sqlx::query(UPSERT).bind(VERSION_ROW).bind(VERSION_TYPE).bind(version).bind(now).execute(db.writer()).await?;
    Ok(())
}
