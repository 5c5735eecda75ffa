//! Theme presets: administrators' CRUD, the single default preset, and the public list.

use crate::context::Context;
use nubo_model::db::themes::ThemeRow;
use nubo_model::db::{self, Db, DbError};
use nubo_model::domain::theme::ThemeColors;
use nubo_model::domain::time::{now_ms, to_rfc3339};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{ServiceError, ServiceResult};
use crate::error_codes as codes;

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ThemePresetView {
    pub id: Uuid,
    pub name: String,
    pub colors: ThemeColors,
    pub is_default: bool,
    pub updated_at: String,
}

fn view(row: &ThemeRow) -> ServiceResult<ThemePresetView> {
    Ok(ThemePresetView {
        id: row.id.parse().map_err(ServiceError::internal)?,
        name: row.name.clone(),
        colors: row.colors,
        is_default: row.is_default,
        updated_at: to_rfc3339(row.updated_at),
    })
}

fn not_found() -> ServiceError {
    ServiceError::not_found(codes::THEME_NOT_FOUND, "no such theme preset")
}

fn parse_name(raw: &str) -> ServiceResult<String> {
    let name = raw.trim();
    if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        return Err(ServiceError::validation("name", "name must be 1 to 64 characters"));
    }
    Ok(name.to_owned())
}

fn name_taken(e: DbError, name: &str) -> ServiceError {
    match e {
        ref err if err.is_unique_violation() => {
            ServiceError::conflict(codes::THEME_NAME_TAKEN, format!("a preset named {name:?} exists"))
                .with_field("name")
        }
        other => other.into(),
    }
}

pub async fn list(ctx: &Context) -> ServiceResult<Vec<ThemePresetView>> {
    let db = ctx.db();
    db::themes::list(db).await?.iter().map(view).collect()
}

pub async fn get(ctx: &Context, id: Uuid) -> ServiceResult<ThemePresetView> {
    let db = ctx.db();
    view(&db::themes::find(db, &id.to_string()).await?.ok_or_else(not_found)?)
}

pub async fn default_preset(db: &Db) -> ServiceResult<Option<ThemePresetView>> {
    db::themes::find_default(db).await?.as_ref().map(view).transpose()
}

pub async fn create(ctx: &Context, name: &str, colors: ThemeColors) -> ServiceResult<ThemePresetView> {
    let db = ctx.db();
    let name = parse_name(name)?;
    let id = Uuid::new_v4();
    db::themes::insert(db, &id.to_string(), &name, colors.as_columns(), now_ms())
        .await
        .map_err(|e| name_taken(e, &name))?;
    get(ctx, id).await
}

pub async fn update(ctx: &Context, id: Uuid, name: &str, colors: ThemeColors) -> ServiceResult<ThemePresetView> {
    let db = ctx.db();
    let name = parse_name(name)?;
    let found = db::themes::update(db, &id.to_string(), &name, colors.as_columns(), now_ms())
        .await
        .map_err(|e| name_taken(e, &name))?;
    if !found {
        return Err(not_found());
    }
    get(ctx, id).await
}

/// Deletes a preset. Users who copied its colours keep them (they hold a snapshot).
pub async fn delete(ctx: &Context, id: Uuid) -> ServiceResult<()> {
    let db = ctx.db();
    if db::themes::delete(db, &id.to_string()).await? { Ok(()) } else { Err(not_found()) }
}

pub async fn set_default(ctx: &Context, id: Uuid) -> ServiceResult<ThemePresetView> {
    let db = ctx.db();
    if !db::themes::set_default(db, &id.to_string(), now_ms()).await? {
        return Err(not_found());
    }
    get(ctx, id).await
}
