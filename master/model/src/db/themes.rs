//! SQL of the `theme_presets` table.

use super::{Db, DbError, Values};
use crate::domain::theme::ThemeColors;
use crate::domain::time::Millis;

const COLUMNS: &str = "id, name, primary_color, secondary_color, success_color, info_color, warning_color, \
     error_color, neutral_color, is_default, created_at, updated_at";

#[derive(Debug, Clone)]
pub struct ThemeRow {
    pub id: String,
    pub name: String,
    /// The seven `*_color` columns.
    pub colors: ThemeColors,
    pub is_default: bool,
    pub created_at: Millis,
    pub updated_at: Millis,
}

/// The colour columns in [`ThemeColors::from_columns`]' order.
const COLOR_COLUMNS: [&str; 7] = [
    "primary_color",
    "secondary_color",
    "success_color",
    "info_color",
    "warning_color",
    "error_color",
    "neutral_color",
];

impl ThemeRow {
    fn read(row: &dyn Values) -> Result<Self, DbError> {
        let [a, b, c, d, e, f, g] = COLOR_COLUMNS.map(|column| row.text(column));
        let texts = [a?, b?, c?, d?, e?, f?, g?];
        let colors = ThemeColors::from_columns(texts.each_ref().map(String::as_str))
            .map_err(|reason| DbError::Invalid { column: "*_color".to_owned(), reason })?;
        Ok(Self {
            id: row.text("id")?,
            name: row.text("name")?,
            colors,
            is_default: row.flag("is_default")?,
            created_at: row.int("created_at")?,
            updated_at: row.int("updated_at")?,
        })
    }
}

impl sqlx::FromRow<'_, sqlx::any::AnyRow> for ThemeRow {
    fn from_row(row: &sqlx::any::AnyRow) -> Result<Self, sqlx::Error> {
        Self::read(row).map_err(|error| match error {
            DbError::Sqlx(error) => error,
            other => sqlx::Error::Decode(Box::new(other)),
        })
    }
}

pub async fn list(db: &Db) -> Result<Vec<ThemeRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM theme_presets ORDER BY name")).fetch_all(db.reader()).await?)
}

pub async fn find(db: &Db, id: &str) -> Result<Option<ThemeRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM theme_presets WHERE id = $1"))
        .bind(id)
        .fetch_optional(db.reader())
        .await?)
}

pub async fn find_default(db: &Db) -> Result<Option<ThemeRow>, DbError> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM theme_presets WHERE is_default = 1"))
        .fetch_optional(db.reader())
        .await?)
}

pub async fn insert(db: &Db, id: &str, name: &str, colors: [&str; 7], now: Millis) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO theme_presets (id, name, primary_color, secondary_color, success_color, info_color,
         warning_color, error_color, neutral_color, is_default, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, $10, $10)",
    )
    .bind(id)
    .bind(name)
    .bind(colors[0])
    .bind(colors[1])
    .bind(colors[2])
    .bind(colors[3])
    .bind(colors[4])
    .bind(colors[5])
    .bind(colors[6])
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(())
}

pub async fn update(db: &Db, id: &str, name: &str, colors: [&str; 7], now: Millis) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE theme_presets SET name = $2, primary_color = $3, secondary_color = $4, success_color = $5,
         info_color = $6, warning_color = $7, error_color = $8, neutral_color = $9, updated_at = $10 WHERE id = $1",
    )
    .bind(id)
    .bind(name)
    .bind(colors[0])
    .bind(colors[1])
    .bind(colors[2])
    .bind(colors[3])
    .bind(colors[4])
    .bind(colors[5])
    .bind(colors[6])
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() > 0)
}

pub async fn delete(db: &Db, id: &str) -> Result<bool, DbError> {
    let done = sqlx::query("DELETE FROM theme_presets WHERE id = $1").bind(id).execute(db.writer()).await?;
    Ok(done.rows_affected() > 0)
}

/// Makes `id` the only default preset; answers false (and changes nothing) when it does not exist.
pub async fn set_default(db: &Db, id: &str, now: Millis) -> Result<bool, DbError> {
    let mut tx = db.begin().await?;
    sqlx::query("UPDATE theme_presets SET is_default = 0, updated_at = $1 WHERE is_default = 1")
        .bind(now)
        .execute(&mut *tx)
        .await?;
    let done = sqlx::query("UPDATE theme_presets SET is_default = 1, updated_at = $2 WHERE id = $1")
        .bind(id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    if done.rows_affected() == 0 {
        tx.rollback().await?;
        return Ok(false);
    }
    tx.commit().await?;
    Ok(true)
}
