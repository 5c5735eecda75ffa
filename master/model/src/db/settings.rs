//! SQL of the `settings` table: one row per setting name.

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

pub async fn all(db: &Db) -> Result<Vec<SettingRow>, DbError> {
    Ok(sqlx::query_as("SELECT name, type, value, updated_at FROM settings ORDER BY name")
        .fetch_all(db.reader())
        .await?)
}

/// Inserts or replaces each `(name, type, value)` in one transaction.
pub async fn upsert_many(db: &Db, rows: &[(&str, &str, String)], now: Millis) -> Result<(), DbError> {
    let mut tx = db.begin().await?;
    for (name, kind, value) in rows {
        sqlx::query(
            "INSERT INTO settings (name, type, value, updated_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (name) DO UPDATE SET type = excluded.type, value = excluded.value, updated_at = excluded.updated_at",
        )
        .bind(*name)
        .bind(*kind)
        .bind(value.as_str())
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
